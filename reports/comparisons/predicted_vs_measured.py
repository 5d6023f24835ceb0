"""Predicted vs measured (pure): per step, the run's measured TTFT p50, ITL p50 and output
throughput over what AIConfigurator predicted for it (the manifest's `predictions`, kept at run
start, so no predictor is needed here), flagged outside a stated band; the timings its figures
stand on are worded by reports/records/stackinfo.py timing_words, as everywhere in a report.

On a local run the ratio is the rehearsal's fidelity to the model (the mocker runs on the
model's own table); on a cluster it is the model against the GPU. Where a TTFT gap is larger
than its band, the known causes are named, with their size only where the run measured it.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pandas as pd

from stacks.sizing.step_itl import repeated_step
from workloads.attest.checks import first_data_measured

# The bands, and why each is as wide as it is (issue 27): ITL is one decode step, which the
# table and the database give directly, so it should hold within 10 %; TTFT adds queueing,
# batched and mixed prefill steps and the client's first-data path, none of them the same in
# the model and a server, so 25 %; output throughput follows ITL and TTFT of a whole request
# plus the step's ramp and tail, so 15 %.
BANDS: dict[str, float] = {"ttft_p50_ms": 0.25, "itl_p50_ms": 0.10, "output_tok_s": 0.15}
PREDICTED_FIELD = {"ttft_p50_ms": "ttft_ms", "itl_p50_ms": "itl_ms",
                   "output_tok_s": "output_tok_s"}
# The prediction's own error band (stacks/predict/bands.py: AIConfigurator's measured rows
# nearest to it), kept by the run's record beside the figure: `<col>_likely_lo/hi` in ms (None
# where no row was near) and whether the measured value fell in it (`<col>_in_likely`). The
# ±BANDS above judge a run against the prediction; the likely band says how far the model
# itself is known to be off. A rehearsal's figures are SIMULATED on the model's own table, so
# the same band carries over to them (`<col>_simulated_likely_lo/hi`: the figure times the
# band's ratios to the prediction, what a GPU would likely show given the rehearsal's figure;
# stacks/predict/bands.py simulated_band gives the same from the table's record), and whether
# a rehearsal fell in the prediction's band says nothing (`in_likely` empty).
LIKELY_FIELD = {"ttft_p50_ms": "ttft_band_ms", "itl_p50_ms": "itl_band_ms"}
MEASURED_LABEL = "MEASURED"
UNRECORDED_LABEL = "SIMULATED (mocker; its timings were not recorded by this run)"
MIXED_STEP = ("on the local engine the mocker table charges a step that mixes a prefill with "
              "decodes as the prefill plus a full decode step, and a batched prefill by its "
              "total tokens (stacks/predict/mocker_table.py)")
MODEL_TERMS = ("AIConfigurator's TTFT adds a per-request vLLM dispatch term (0.8 ms a layer) and "
               "a queueing factor (1 + log2(batch) / 8) to the prefill kernels' time "
               "(aiconfigurator_core 0.12.0 sdk/backends/vllm_backend.py), which the mocker on "
               "its table does not run: the model terms, per step")


def in_band(ratio: float | None, band: float) -> bool | None:
    if ratio is None:
        return None
    return abs(ratio - 1.0) <= band + 1e-9   # a ratio on the edge (1.10) is in


def on_table(manifest_extra: dict[str, Any]) -> bool:
    """The run's mockers ran on tables made from AIConfigurator's database (its last attempt's
    recorded timings, workloads/targets/mocker_timings.py)."""
    for attempt in reversed(manifest_extra.get("attempts") or []):
        timings = (attempt.get("target") or {}).get("timings")
        if timings:
            return timings.get("source") == "aiconfigurator" and bool(timings.get("tables"))
    return False


def first_data_stall_ms(manifest_extra: dict[str, Any]) -> float | None:
    """The first-data stall the run's attestation measured (workloads/attest/first_data.py;
    a probe refused as a measurement has none)."""
    evidence = first_data_measured(manifest_extra.get("attestations"))
    return float(evidence["stall_ms"]) if evidence is not None else None


def table(steps: pd.DataFrame, predictions: dict[str, dict[str, Any]],
          simulated: Collection[str] = frozenset()) -> pd.DataFrame:
    """One row per measured step with a prediction: measured, predicted, ratio, in band, the
    prediction's likely range. `predictions`: {stack: the manifest's predictions record};
    `simulated`: the stacks whose figures are SIMULATED on the model's table (on_table)."""
    rows = []
    for _, s in steps.iterrows():
        pred = ((predictions.get(str(s["stack"])) or {}).get("steps") or {}).get(
            # a repeat is compared with its step's prediction; a trace's warm pass is not
            # (its TTFT stands on the cold pass's cache, which the prediction does not model)
            repeated_step(str(s["step"])))
        if not pred:
            continue
        row: dict[str, Any] = {"stack": s["stack"], "step": s["step"]}
        for col, band in BANDS.items():
            measured = s.get(col)
            predicted = pred.get(PREDICTED_FIELD[col])
            ratio = (float(measured) / float(predicted)
                     if isinstance(measured, (int, float)) and not pd.isna(measured)
                     and isinstance(predicted, (int, float)) and predicted > 0 else None)
            row[f"{col}_measured"] = measured
            row[f"{col}_predicted"] = predicted
            row[f"{col}_ratio"] = round(ratio, 3) if ratio is not None else None
            row[f"{col}_in_band"] = in_band(ratio, band)
        for col, field in LIKELY_FIELD.items():
            lo, hi = likely(pred.get(field))
            row[f"{col}_likely_lo"], row[f"{col}_likely_hi"] = lo, hi
            m, p = _num(row[f"{col}_measured"]), _num(row[f"{col}_predicted"])
            row[f"{col}_in_likely"] = None
            row[f"{col}_simulated_likely_lo"] = row[f"{col}_simulated_likely_hi"] = None
            if lo is None or hi is None or m is None:
                continue
            if str(s["stack"]) not in simulated:
                row[f"{col}_in_likely"] = lo <= m <= hi
            elif p:
                row[f"{col}_simulated_likely_lo"] = round(m * lo / p, 3)
                row[f"{col}_simulated_likely_hi"] = round(m * hi / p, 3)
        row["ttft_model_terms_ms"] = pred.get("ttft_model_terms_ms")
        # the client's mean TTFT (AIPerf) and the frontend's own (its histogram), for the
        # measured split of a TTFT gap
        for col in ("ttft_mean_ms", "server_ttft_mean_ms"):
            row[col] = _num(s.get(col))
        rows.append(row)
    columns = ["stack", "step", *[f"{c}_{k}" for c in BANDS
                                     for k in ("measured", "predicted", "ratio", "in_band")],
               *[f"{c}_{k}" for c in LIKELY_FIELD
                 for k in ("likely_lo", "likely_hi", "in_likely", "simulated_likely_lo",
                           "simulated_likely_hi")],
               "ttft_model_terms_ms", "ttft_mean_ms", "server_ttft_mean_ms"]
    return pd.DataFrame(rows, columns=columns)   # the columns even without a row (its CSV)


def likely(band: Any) -> tuple[float | None, float | None]:
    """A recorded band ([lo, hi] in JSON) as numbers, or (None, None) without one."""
    if isinstance(band, (list, tuple)) and len(band) == 2:
        return _num(band[0]), _num(band[1])
    return None, None


def likely_words(r: pd.Series, col: str, digits: int, simulated: bool = False) -> str:
    """' (likely 9.0-12.5)' after a predicted figure with a band (`simulated`: after the
    rehearsal's SIMULATED figure), '' without one."""
    kind = "simulated_likely" if simulated else "likely"
    lo, hi = _num(r.get(f"{col}_{kind}_lo")), _num(r.get(f"{col}_{kind}_hi"))
    return "" if lo is None or hi is None else f" (likely {lo:,.{digits}f}-{hi:,.{digits}f})"


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not pd.isna(x) else None


def _split(r: pd.Series, rehearsal: bool) -> str:
    """One step's TTFT gap split into what this run measured and what the model adds."""
    pred = float(r["ttft_p50_ms_predicted"])
    client, frontend = _num(r.get("ttft_mean_ms")), _num(r.get("server_ttft_mean_ms"))
    terms = _num(r.get("ttft_model_terms_ms")) if rehearsal else None
    parts = [f"{r['step']}:"]
    if client is not None and frontend is not None:
        parts.append(f"client over frontend {client - frontend:+.1f} ms (mean {client:.1f} vs "
                     f"{frontend:.1f})")
    rest = pred - (terms or 0.0)
    if terms is not None:
        parts.append(f"model terms {terms:.1f} of the predicted {pred:.1f} ms")
    if frontend is not None and rest > 0:
        parts.append(f"frontend mean / prediction{' without them' if terms is not None else ''} "
                     f"{frontend / rest:.2f}")
    if len(parts) == 1:
        parts.append("no client or frontend TTFT recorded for it")
    return " ".join(parts[:1]) + " " + ", ".join(parts[1:])


def ttft_causes(compared: pd.DataFrame, stall_ms: dict[str, float | None],
                on_table: Collection[str] = frozenset(),
                labels: dict[str, str] | None = None) -> list[str]:
    """The known causes of each TTFT gap outside its band, split per step into what the run
    measured: the client's TTFT over the frontend's (the first-data stall, which the
    attestation also measures on a short prompt), and, for a rehearsal (`on_table`: its
    mockers ran on the database's table), the model's terms the table leaves out; what is left
    is the engine's own TTFT over the prediction without them. The model's terms are named
    only where the prediction has them (AIConfigurator's agg estimate: a disaggregated
    prediction carries none, stacks/predict/aic_runner.py ttft_terms). `labels`: what each
    stack's figures stand on (stackinfo.timing_words' label), said on its per-step line."""
    if compared.empty:
        return []
    out = []
    for stack, rows in compared.groupby("stack"):
        off = rows[rows["ttft_p50_ms_in_band"] == False]  # noqa: E712 - None is "no figure"
        if off.empty:
            continue
        rehearsal = str(stack) in on_table and bool(off["ttft_model_terms_ms"].notna().any())
        causes = []
        stall = stall_ms.get(str(stack))
        causes.append("the client's first data waits for its delayed ACK on a kept-alive "
                      "connection (docs/testing.md; the attestation measured "
                      + (f"{stall:.1f} ms" if stall is not None else "no figure")
                      + " on a short prompt; a request whose first token takes longer hides "
                        "part of it): the client's TTFT over the frontend's, per step")
        if rehearsal:
            causes.append(MODEL_TERMS)
        causes.append("the engine: the frontend's TTFT over the prediction"
                      + (" without the model's terms" if rehearsal else "") + "; " + MIXED_STEP)
        steps = "; ".join(_split(r, rehearsal) for _, r in off.iterrows())
        out.append(f"{stack}: TTFT outside ±{BANDS['ttft_p50_ms']:.0%} at "
                   f"{', '.join(str(s) for s in off['step'])}. Known causes: "
                   + "; ".join(f"({i}) {c}" for i, c in enumerate(causes, 1))
                   + f". Per step ({(labels or {}).get(str(stack), 'measured')}): {steps}")
    return out


def band_note() -> str:
    return ("Bands: " + ", ".join(f"{k.removesuffix('_ms')} ±{v:.0%}" for k, v in BANDS.items())
            + " (reports/comparisons/predicted_vs_measured.py BANDS says why); a ratio outside "
            "its band is marked `!`. A PREDICTED figure's `likely` range is the model's own error "
            "where the world measured it (AIConfigurator's measured rows nearest to the "
            "prediction, stacks/predict/bands.py); no range where no row is near. A rehearsal's "
            "SIMULATED figure, on the model's own table, carries the same band: what a GPU would "
            "likely show given it.")
