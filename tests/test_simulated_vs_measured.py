"""Simulated vs measured (issue 38, item 4): per stack and step, the run's measured figures beside
DynoSim's simulation of the same step (its manifest's `simulation`, kept at run start), their
ratios, bands (ITL 5 %, TTFT 15 % on the frontend's own TTFT, output tok/s 5 %) and the cause of
a ratio out of its band; and a simulated run labelled SIMULATED everywhere, never compared with
itself (reports/comparisons/simulated_vs_measured.py, reports/records/stackinfo.py,
reports/render/summary.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from reports.build import build_report
from reports.comparisons import simulated_vs_measured as svm
from reports.records.runs import load_run
from tests.reports_fixtures import FIXTURE_RUNS

LABEL = ("SIMULATED (DynoSim (dynamo.replay, ai-dynamo 1.6.1), timings from AIConfigurator "
         "0.12.0 a100_sxm_40gb/vllm 0.14.0, table sha256 7bec7f1d1f0c)")


def _row(**measured) -> pd.DataFrame:
    base = {"stack": "local-agg", "run_id": "r", "step": "concurrency_sweep/c4",
            "workload": "concurrency_sweep", "concurrency": 4, "window_s": 10.0,
            "frontend_ttft_p50_ms": 100.0, "frontend_ttft_p40_ms": 95.0,
            "frontend_ttft_p60_ms": 105.0, "itl_p50_ms": 10.0, "output_tok_s": 1000.0,
            "cancelled": 0, "host_cores": 8, "client_cpu_cores_mean": 0.5}
    return pd.DataFrame([{**base, **measured}])


def _sim(**figures) -> dict:
    base = {"ttft_p50_ms": 100.0, "itl_p50_ms": 10.0, "output_tok_s": 1000.0, "cancelled": 0,
            "concurrency": 4, "window_s": 10.0, "requests": 20,
            "request_latency_mean_ms": 1990.0}
    return {"label": LABEL, "steps": {"concurrency_sweep/c4": {**base, **figures}}}


def _compare(steps: pd.DataFrame, sim: dict, local: bool = False) -> dict:
    t = svm.table(steps, {("local-agg", "r"): sim}, None,
                  frozenset({"local-agg"}) if local else frozenset())
    assert len(t) == 1
    return t.iloc[0].to_dict()


@pytest.mark.parametrize(("col", "simulated", "in_band"), [
    ("itl_p50_ms", 10.0 / 1.05, True), ("itl_p50_ms", 10.0 / 1.051, False),
    ("ttft_p50_ms", 100.0 / 1.15, True), ("ttft_p50_ms", 100.0 / 1.151, False),
    ("output_tok_s", 1000.0 / 0.95, True), ("output_tok_s", 1000.0 / 0.949, False),
])
def test_each_figure_holds_its_own_band_measured_over_simulated(col, simulated, in_band):
    r = _compare(_row(), _sim(**{col: simulated}))
    assert r[f"{col}_in_band"] is in_band
    assert r[f"{col}_ratio"] == pytest.approx(
        {"itl_p50_ms": 10.0, "ttft_p50_ms": 100.0, "output_tok_s": 1000.0}[col] / simulated,
        abs=1e-3)
    assert (r["cause"] == "") is in_band


def test_ttft_is_the_frontends_not_the_clients():
    """The client's TTFT (ttft_p50_ms, with the first-data stall) is kept beside it, never
    compared."""
    r = _compare(_row(ttft_p50_ms=140.0), _sim())
    assert r["ttft_p50_ms_measured"] == 100.0 and r["ttft_p50_ms_ratio"] == 1.0
    assert r["ttft_p50_ms"] == 140.0


def test_the_causes_the_record_shows():
    # a cliff: half the burst queued (p60 3x p40), the simulated p50 between them
    r = _compare(_row(frontend_ttft_p40_ms=40.0, frontend_ttft_p50_ms=130.0,
                      frontend_ttft_p60_ms=120.0), _sim(ttft_p50_ms=60.0))
    assert r["cause"].startswith("TTFT p50 on a cliff: the frontend's p40 40.0 ms and p60 "
                                 "120.0 ms (a burst's queued half and the rest), the simulated "
                                 "p50 60.0 ms between them")
    # requests cut at the step's end, and slots idle longer than the simulation's turnaround
    r = _compare(_row(output_tok_s=800.0, cancelled=3), _sim())
    assert "requests cut at the step's end: 3 measured, 0 simulated" in r["cause"]
    # the live slots: 4 x 10 s less 20 requests of 1,900 ms = 100 ms idle each; simulated 10
    requests = pd.DataFrame({"stack": "local-agg", "run_id": "r",
                             "step": "concurrency_sweep/c4", "completed": [True] * 20,
                             "request_latency_ms": [1900.0] * 20})
    t = svm.table(_row(output_tok_s=800.0), {("local-agg", "r"): _sim()}, requests)
    assert t.iloc[0]["idle_ms_measured"] == pytest.approx(100.0)
    assert t.iloc[0]["idle_ms_simulated"] == pytest.approx(10.0)
    assert "the client's turnaround: a slot stood idle 100.0 ms per request measured, " \
        "10.0 ms simulated" in t.iloc[0]["cause"]
    # the local engine on a small host, slower than simulated: CPU; faster: never CPU
    slow = _compare(_row(itl_p50_ms=11.0, host_cores=2), _sim(), local=True)
    assert slow["cause"].startswith("CPU: the live frontend and mockers ran on the host's 2 "
                                    "cores beside AIPerf (which used 0.50 of them on average)")
    assert "lower priority" not in slow["cause"]
    # work the host ran at a lower priority beside the step (make demo's simulation) is named
    beside = _compare(_row(itl_p50_ms=11.0, host_cores=2, host_low_priority_cores=0.93),
                      _sim(), local=True)
    assert "work at a lower priority used 0.93 cores beside them" in beside["cause"]
    fast = _compare(_row(itl_p50_ms=9.0, host_cores=2), _sim(), local=True)
    assert fast["cause"] == svm.NO_CAUSE
    assert _compare(_row(itl_p50_ms=11.0, host_cores=2), _sim())["cause"] == svm.NO_CAUSE


def _trace_line(ttft: float, at: int) -> str:
    return json.dumps({"timestamp": at, "event": {
        "schema": "dynamo.request.trace.v1", "event_type": "request_end",
        "event_time_unix_ms": at + 100, "request": {
            "request_id": f"r{at}", "input_tokens": 256, "output_tokens": 32,
            "cached_tokens": 0, "request_received_ms": at, "ttft_ms": ttft}}})


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    root = tmp_path_factory.mktemp("svm")
    run = root / "runs" / "local-agg" / "fixture"
    shutil.copytree(FIXTURE_RUNS / "local-agg" / "fixture", run,
                    ignore=shutil.ignore_patterns(".reports-cache"))
    # the frontend's TTFT of two sweep steps: c1 steady at 30 ms, c4 a burst whose queued half
    # waits (p40 20 ms, p60 200 ms)
    (run / "concurrency_sweep/c1/request_trace.jsonl").write_text(
        "".join(_trace_line(30.0 + i % 3, i) + "\n" for i in range(20)))
    (run / "concurrency_sweep/c4/request_trace.jsonl").write_text(
        "".join(_trace_line(20.0 if i < 10 else 200.0, i) + "\n" for i in range(20)))
    return run, load_run(run, use_cache=False).steps


def _with_simulation(run: Path, steps: pd.DataFrame, factor: dict[str, float],
                     kind: str | None = None) -> None:
    """The run's manifest with a simulation of its own steps: each figure the measured one
    over `factor` (ratio measured / simulated = factor)."""
    m = json.loads((run / "manifest.json").read_text())
    figures = {}
    for _, s in steps.iterrows():
        figures[s["step"]] = {
            "ttft_p50_ms": (s["frontend_ttft_p50_ms"] / factor["ttft"]
                            if pd.notna(s["frontend_ttft_p50_ms"]) else 50.0),
            "itl_p50_ms": s["itl_p50_ms"] / factor["itl"],
            "output_tok_s": s["output_tok_s"] / factor["tok_s"], "cancelled": s["cancelled"],
            "concurrency": int(s["concurrency"]), "window_s": s["window_s"],
            "requests": int(s["completed"])}
    m["simulation"] = {"label": LABEL, "simulator": "DynoSim", "steps": figures}
    if kind:   # what a --target sim run's record says (workloads/sim/target.py describe)
        recorded = next((a["target"]["timings"] for a in reversed(m.get("attempts") or [])
                         if (a.get("target") or {}).get("timings")), {})
        timings = {**recorded, "label": LABEL, "simulator": "DynoSim", "dynamo_version": "1.6.1"}
        m["target_info"] = {**m.get("target_info", {}), "kind": kind, "timings": timings}
        for attempt in m.get("attempts") or []:
            attempt["target"] = {**attempt.get("target", {}), "kind": kind, "timings": timings}
    (run / "manifest.json").write_text(json.dumps(m))


def test_a_measured_run_is_put_beside_its_simulation_in_the_report(fixture_run, tmp_path):
    src, steps = fixture_run
    run = tmp_path / "runs" / "local-agg" / "fixture"
    shutil.copytree(src, run)
    _with_simulation(run, steps, {"ttft": 1.10, "itl": 1.03, "tok_s": 0.93})
    report = build_report([run], tmp_path / "out", name="svm")
    t = report.tables["simulated_vs_measured"].set_index("step")
    assert sorted(t.index) == sorted(steps["step"])          # every measured step
    assert (t["itl_p50_ms_ratio"] == 1.03).all() and t["itl_p50_ms_in_band"].all()
    assert (t["output_tok_s_ratio"] == 0.93).all() and not t["output_tok_s_in_band"].any()
    c1, c4 = t.loc["concurrency_sweep/c1"], t.loc["concurrency_sweep/c4"]
    assert c1["ttft_p50_ms_measured"] == pytest.approx(31.0) and c1["ttft_p50_ms_in_band"]
    # without a frontend trace there is no TTFT to compare (the client's is not taken)
    assert pd.isna(t.loc["multi_turn/conv4", "ttft_p50_ms_ratio"])
    assert (c4["frontend_ttft_p40_ms"], c4["frontend_ttft_p60_ms"]) == (20.0, 200.0)
    assert (t["cause"] != "").all()                           # every step out of its band
    md = (report.out_dir / "report.md").read_text()
    assert f"## Simulated vs measured — {LABEL}" in md
    assert "| 0.93 ! |" in md and "| 1.03 |" in md
    assert (report.out_dir / "simulated_vs_measured.csv").is_file()
    html = (report.out_dir / "index.html").read_text()
    assert "Simulated vs measured — SIMULATED (DynoSim (dynamo.replay" in html


def test_a_simulated_run_is_simulated_everywhere_and_never_compared_with_itself(fixture_run,
                                                                                 tmp_path):
    src, steps = fixture_run
    run = tmp_path / "runs" / "local-agg" / "fixture"
    shutil.copytree(src, run)
    _with_simulation(run, steps, {"ttft": 1.0, "itl": 1.0, "tok_s": 1.0}, kind="sim")
    report = build_report([run], tmp_path / "out", name="sim")
    assert report.tables["simulated_vs_measured"].empty
    assert report.tables["predicted_vs_measured"].empty
    md = (report.out_dir / "report.md").read_text()
    where = md.split("**Where it ran**")[1].split("**What was")[0]
    assert f"`local-agg`: **SIMULATION by DynoSim, {LABEL}**: NVIDIA DynoSim" in where
    assert "REHEARSAL" not in md and "local mocker" not in where
    assert "**Headline answers — SIMULATION (local-agg: DynoSim, " in md
    assert "local-agg (SIMULATION: aggregated, round-robin, 8 GPUs replayed by DynoSim" in md
    assert "## Concurrency sweep — SIMULATION (local-agg: DynoSim, " in md
    assert "A simulated run is the simulation: it is not compared with itself." in md
