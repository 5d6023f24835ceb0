"""Shared helpers of the report tests: the committed real-run fixtures, copied to a temp dir,
and independent readers of the raw AIPerf exports (plain json, no reports code)."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from reports.records.runs import CACHE_DIR, load_run

FIXTURE_RUNS = Path(__file__).parent / "fixtures" / "runs"
# A real run of local-agg's sweep with worker-0 killed (SIGKILL) two seconds into c4's profiling:
# the streams it served end without their usage block (tests/fixtures/make_fixtures.py --fault).
FAULT_RUN = Path(__file__).parent / "fixtures" / "fault-runs" / "local-agg" / "killed-worker"
STACKS = ("local-agg", "local-disagg", "local-agg-kv")


_CACHED_COPY: list[Path] = []


def _cached_fixture_runs() -> Path:
    """This process's copy of the fixture runs with every run's reports cache built (once: the
    exports of all six runs take ~5 s to parse), removed when the process ends."""
    if not _CACHED_COPY:
        root = Path(tempfile.mkdtemp(prefix="fixture-runs-")) / "runs"
        atexit.register(shutil.rmtree, root.parent, ignore_errors=True)
        shutil.copytree(FIXTURE_RUNS, root, ignore=shutil.ignore_patterns(CACHE_DIR))
        for run in all_run_dirs(root):
            load_run(run)
        _CACHED_COPY.append(root)
    return _CACHED_COPY[0]


def copy_runs(dest: Path, with_cache: bool = True) -> Path:
    """A writable copy of the fixture runs. `with_cache`: with each run's reports cache, built
    from the same exports by the same code (a copied run keeps its cache: reports/records/runs.py
    _fingerprint), so a report of them skips the parse; without it, the first report parses."""
    root = dest / "runs"
    if with_cache:
        shutil.copytree(_cached_fixture_runs(), root)
    else:
        shutil.copytree(FIXTURE_RUNS, root, ignore=shutil.ignore_patterns(CACHE_DIR))
    return root


def built_fixture_run(fixture: Path, root: Path, name: str):
    """A committed real run (runs/<stack>/<run-id>) copied under `root`, and its report."""
    from reports.build import build_report

    run = root / "runs" / fixture.parent.name / fixture.name
    shutil.copytree(fixture, run)
    return run, build_report([run], root / "out", name=name)


def run_dir(root: Path, stack: str, run_id: str = "fixture") -> Path:
    """The stack's full fixture run (`fixture-repeats` holds two more sweeps of it)."""
    return root / stack / run_id


def copy_fault_run(dest: Path) -> Path:
    run = dest / "fault-runs" / "local-agg" / "killed-worker"
    shutil.copytree(FAULT_RUN, run, ignore=shutil.ignore_patterns(CACHE_DIR))
    return run


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


# --- independent definitions (plain python, no reports or workloads code) -------------------

def completed(rec: dict) -> bool:
    """Completed: no error, not cancelled, and the server's usage block arrived (every request
    of these runs fixed its length with ignore_eos; the engine test checks usage == asked)."""
    return ("error" not in rec and not rec["metadata"].get("was_cancelled")
            and "usage_completion_tokens" in rec["metrics"])


def window_s(recs: list[dict]) -> float:
    return (max(r["metadata"]["request_end_ns"] for r in recs)
            - min(r["metadata"]["request_start_ns"] for r in recs)) / 1e9


def achieved(recs: list[dict], c: int, per_conversation: bool = False) -> float | None:
    """Time-weighted requests (or, multi-turn, conversations) in flight from the c-th start to
    the last start."""
    spans = [(r["metadata"]["request_start_ns"], r["metadata"]["request_end_ns"]) for r in recs]
    if per_conversation:
        convs: dict = {}
        for r, (s, e) in zip(recs, spans, strict=True):
            lo, hi = convs.get(r["metadata"]["conversation_id"], (s, e))
            convs[r["metadata"]["conversation_id"]] = (min(lo, s), max(hi, e))
        spans = list(convs.values())
    starts = sorted(s for s, _ in spans)
    if len(spans) <= c:
        return None
    lo, hi = starts[c - 1], starts[-1]
    return sum(max(0, min(e, hi) - max(s, lo)) for s, e in spans) / (hi - lo)


def usable(step_dir: Path, c: int) -> bool:
    """Complete, no truncated stream, and the client held at least 90 % of the concurrency."""
    recs = profiling_records(step_dir)
    step = json.loads((step_dir / "step.json").read_text())
    cut = any("error" not in r and "usage_completion_tokens" not in r["metrics"] for r in recs)
    a = achieved(recs, c, per_conversation=step.get("workload") == "multi_turn")
    return step["status"] == "complete" and not cut and (a is None or a >= 0.9 * c)
