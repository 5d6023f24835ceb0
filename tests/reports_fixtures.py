"""Shared helpers of the report tests: the committed real-run fixtures, copied to a temp dir,
and independent readers of the raw AIPerf exports (plain json, no reports code)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

FIXTURE_RUNS = Path(__file__).parent / "fixtures" / "runs"
STACKS = ("local-agg", "local-disagg", "local-agg-kv")


def copy_runs(dest: Path) -> Path:
    """A writable copy of the fixture runs (the reports cache parquet next to each run)."""
    root = dest / "runs"
    shutil.copytree(FIXTURE_RUNS, root, ignore=shutil.ignore_patterns(".reports-cache"))
    return root


def run_dir(root: Path, stack: str, run_id: str = "fixture") -> Path:
    """The stack's full fixture run (`fixture-repeats` holds two more sweeps of it)."""
    return root / stack / run_id


def all_run_dirs(root: Path) -> list[Path]:
    return [run_dir(root, s, r) for s in STACKS for r in ("fixture", "fixture-repeats")]


def sweep_dirs(root: Path, stack: str, c: int) -> list[Path]:
    """Every sample of concurrency c: the full run's step and the two repeats of the other."""
    rep = run_dir(root, stack, "fixture-repeats") / "concurrency_sweep" / f"c{c}"
    return [run_dir(root, stack) / "concurrency_sweep" / f"c{c}", rep / "r1", rep / "r2"]


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def step_with_failures(run: Path) -> Path:
    return next(d.parent for d in sorted(run.rglob("profile_export.jsonl"))
                if any("error" in r for r in profiling_records(d.parent)))


def summary(step_dir: Path) -> dict:
    return json.loads((step_dir / "profile_export_aiperf.json").read_text())


def profiling_records(step_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in
            (step_dir / "profile_export.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r["metadata"]["benchmark_phase"] == "profiling"]


def metric(rec: dict, name: str) -> float | None:
    m = rec.get("metrics", {}).get(name)
    return m["value"] if m else None


def p(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


def histogram_totals(step_dir: Path, name: str) -> tuple[float, float]:
    """(sum, count) of a histogram over all its series in server_metrics_export.json."""
    export = json.loads((step_dir / "server_metrics_export.json").read_text())
    series = export["metrics"][name]["series"]
    return (sum(s["stats"].get("sum", 0.0) for s in series),
            sum(s["stats"].get("count", 0) for s in series))


def cost_row(tmp_path: Path, edit, stack: str = "local-agg",
             step: str = "concurrency_sweep/c4") -> tuple[dict, float, Path]:
    """Build a report of the stack's fixture run after `edit(manifest dict)`; return the step's
    cost_efficiency row, its AIPerf profiling window in hours and the report folder."""
    from reports.build import build_report

    rd = run_dir(copy_runs(tmp_path), stack)
    doc = manifest(rd)
    edit(doc)
    (rd / "manifest.json").write_text(json.dumps(doc))
    report = build_report([rd], tmp_path / "out", name="cost")
    row = report.tables["cost_efficiency"].set_index("step").loc[step].to_dict()
    recs = profiling_records(rd / step)
    hours = (max(r["metadata"]["request_end_ns"] for r in recs)
             - min(r["metadata"]["request_start_ns"] for r in recs)) / 1e9 / 3600
    return row, hours, report.out_dir
