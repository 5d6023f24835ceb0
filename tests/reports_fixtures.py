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


def run_dir(root: Path, stack: str) -> Path:
    return next(p.parent for p in (root / stack).glob("*/manifest.json"))


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
