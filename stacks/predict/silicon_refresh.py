"""The shell that (re)makes stacks/predict/silicon_estimates.json, the table the error bands
stand on (stacks/predict/bands.py), and prints the bands' calibration.

`refresh` asks the predictor (aic_runner.py, through predictor.run and its cache) for its own
measured vLLM rows (`silicon_rows`), the checkpoint facts of their models (`checkpoint`) and the
estimate at each row's exact configuration (stacks/predict/silicon.py), and writes what was
measured beside what was estimated, with the versions and the CSV's sha256. About 1,300
estimates: ~25 minutes of one core, once per AIConfigurator version (the pinned one is in the
snapshot; tests/test_bands.py checks a sample against the installed predictor).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from stacks.predict.bands import (
    MIN_ROWS,
    NEAREST,
    QUANTILES,
    SNAPSHOT,
    EstimatedRow,
    NoBand,
    calibration,
    leave_one_out,
    load,
)
from stacks.predict.predictor import PredictorUnavailable, run
from stacks.predict.silicon import models_of, rows_of
from stacks.predict.systems import BACKEND

COLUMNS = [f.name for f in fields(EstimatedRow)]
CHUNK = 48
FIRST = ["h100_sxm", "h200_sxm", "b200_sxm"]


def refresh(path: Path = SNAPSHOT,
            progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Re-estimate every usable vLLM silicon row and write the snapshot; its provenance."""
    (info, rows_answer) = run([{"op": "versions"}, {"op": "silicon_rows", "backend": BACKEND}],
                              [])
    for a in (info, rows_answer):
        if "error" in a:
            raise PredictorUnavailable(f"the predictor failed: {a['error']}")
    (checkpoints,) = run([{"op": "checkpoint", "models": models_of(rows_answer["rows"])}], [])
    rows, excluded = rows_of(rows_answer["rows"], checkpoints)
    # the rows the GPUs we rent borrow first (A100 and L40S: Hopper; B200: Blackwell), so an
    # interrupted refresh has made those
    rows.sort(key=lambda r: (FIRST.index(r.system) if r.system in FIRST else len(FIRST), r.id))
    answers: list[dict[str, Any]] = []
    # in chunks: each is cached as it completes (predictor.run), so an interrupted refresh
    # resumes, and no runner process meets predictor.TIMEOUT_S
    for i in range(0, len(rows), CHUNK):
        answers += run([{"op": "estimate", "kwargs": r.kwargs} for r in rows[i:i + CHUNK]], [])
        if progress is not None:
            progress(len(answers), len(rows))
    out = []
    for r, a in zip(rows, answers, strict=True):
        if "error" in a or not a.get("ttft_ms") or not a.get("tpot_ms"):
            reason = f"the estimate refused: {str(a.get('error', 'no figure'))[:80]}"
            excluded[reason] = excluded.get(reason, 0) + 1
            continue
        out.append([r.id, r.system, r.model, r.architecture, r.moe, r.precision, r.mode, r.isl,
                    r.osl, r.batch, r.tp, round(r.measured_ttft_ms, 4),
                    round(r.measured_tpot_ms, 4), round(a["ttft_ms"], 4), round(a["tpot_ms"], 4)])
    estimated = [EstimatedRow(**dict(zip(COLUMNS, row, strict=True))) for row in out]
    meta = {"aiconfigurator": info["aiconfigurator"],
            "aiconfigurator_core": info["aiconfigurator_core"], "backend": BACKEND,
            "silicon_sample_sha256": rows_answer["sha256"], "rows_in_csv": len(rows_answer["rows"]),
            "excluded": dict(sorted(excluded.items())),
            "made_by": "python -m stacks bands --refresh (stacks/predict/silicon_refresh.py)",
            "quantiles": list(QUANTILES), "nearest": NEAREST, "min_rows": MIN_ROWS,
            "calibration": calibration(estimated)}
    write(path, meta, out)
    load.cache_clear()
    return meta


def recalibrate(path: Path = SNAPSHOT) -> dict[str, Any]:
    """The snapshot's band settings and calibration summary recomputed from its own rows (after
    a change to the band rule in bands.py; the estimates stand), rewritten; its provenance."""
    doc = json.loads(path.read_text())
    rows = [EstimatedRow(**dict(zip(doc["columns"], r, strict=True))) for r in doc["rows"]]
    meta = {k: v for k, v in doc.items() if k not in ("columns", "rows")}
    meta |= {"quantiles": list(QUANTILES), "nearest": NEAREST, "min_rows": MIN_ROWS,
             "calibration": calibration(rows)}
    write(path, meta, doc["rows"])
    load.cache_clear()
    return meta


def write(path: Path, meta: dict[str, Any], rows: list[list[Any]]) -> None:
    """The snapshot: its provenance, then one row a line (a refresh's diff reads row by row)."""
    lines = [json.dumps(row) for row in rows]
    path.write_text(json.dumps(meta, indent=1)[:-2] + ',\n "columns": ' + json.dumps(COLUMNS)
                    + ',\n "rows": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n")


def calibration_lines(rows: list[EstimatedRow], borrowed: bool = False) -> list[str]:
    """The bands' leave-one-out coverage per group, for TTFT and ITL, as printed lines: the
    band built without a row (its own GPU's other rows, as for a prediction on that GPU; or,
    `borrowed`, only other GPUs' rows, as for a GPU with none of its own) against the row's
    measured value; the width is the band's hi / lo."""
    out = ["group (system, precision, mode) | rows | TTFT banded, covered, median width | "
           "ITL banded, covered, median width"]
    ttft, itl = leave_one_out(rows, "ttft", borrowed), leave_one_out(rows, "itl", borrowed)
    for key in sorted(ttft):
        cells = []
        for g in (ttft[key], itl[key]):
            w = sorted(g["widths"])
            cov = g["covered"] / g["banded"] if g["banded"] else None
            cells.append(f"{g['banded']}, " + (f"{cov:.0%}" if cov is not None else "-")
                         + (f", x{w[len(w) // 2]:.2f}" if w else ""))
        out.append(f"{' '.join(key)} | {ttft[key]['rows']} | {cells[0]} | {cells[1]}")
    return out


def no_band_reasons(rows: list[EstimatedRow], metric: str) -> dict[str, int]:
    """Why held-out rows got no band, counted (for the calibration's footnote)."""
    from stacks.predict.bands import band, query_of
    out: dict[str, int] = {}
    for r in rows:
        b = band([x for x in rows if x.id != r.id], query_of(r), metric)
        if isinstance(b, NoBand):
            out[b.reason] = out.get(b.reason, 0) + 1
    return out
