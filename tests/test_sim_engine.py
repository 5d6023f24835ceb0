"""The simulation target on the real DynoSim (Dynamo 1.6.1's offline replay, .venv-engine).

Pins what the simulation relies on in DynoSim itself (a session's turns chain on their
predecessor's end plus the row's delay; a disaggregated request's prefill ends before its
first decode token), and that `workloads run --target sim` writes a run record the reports
read like any other, every figure SIMULATED, equal to what plan_sim gives for the same steps.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.engine_support import REPO, read_manifest, runner_cmd, runner_env, write_stack
from workloads.sim.replay import Replayer

pytestmark = [pytest.mark.engine]

MOCKER = ["--model-path", "", "--block-size", "64", "--num-gpu-blocks-override", "4096",
          "--kv-bytes-per-token", "98304"]


def _job(rows: list[dict], roles: dict, runs: int = 1) -> dict:
    return {"trace": rows, "trace_block_size": 64, "roles": roles,
            "router_mode": "round_robin", "router_config": None, "replay_concurrency": None,
            "runs": runs}


def test_dynosim_chains_a_sessions_turns_on_their_predecessor_plus_its_delay():
    """Also: DynoSim's clock starts at the trace's first timestamp (a lone session at 100 ms
    starts at 0), so every plan has a slot, or a row, at 0 (workloads/sim/dispatch.py)."""
    rows = [{"session_id": "anchor", "timestamp": 0.0, "input_length": 64, "output_length": 2,
             "hash_ids": [0]},
            {"session_id": "s", "timestamp": 100.0, "input_length": 256, "output_length": 8,
             "hash_ids": [1, 2, 3, 4]},
            {"session_id": "s", "delay": 50.0, "input_length": 256, "output_length": 8,
             "hash_ids": [5, 6, 7, 8]}]
    replayer = Replayer()
    try:
        (answer,) = replayer([_job(rows, {"worker": {"argv": MOCKER, "count": 1}})])
    finally:
        replayer.close()
    first, second = sorted((r for r in answer["runs"][0]["requests"] if r["session_id"] == "s"),
                           key=lambda r: r["turn_index"])
    assert first["arrival_time_ms"] == pytest.approx(100.0)
    assert second["arrival_time_ms"] == pytest.approx(first["terminal_time_ms"] + 50.0)


def test_a_disaggregated_request_ends_its_prefill_before_its_first_decode_token():
    """What workloads/sim/exports relies on: DynoSim's first token is the decode worker's (the
    client's), after the prefill's end (source_held_ms, where the frontend's own trace stops
    its TTFT)."""
    rows = [{"session_id": "s", "timestamp": 0.0, "input_length": 1024, "output_length": 8,
             "hash_ids": list(range(16))}]
    roles = {"prefill": {"argv": [*MOCKER, "--disaggregation-mode", "prefill"], "count": 1},
             "decode": {"argv": [*MOCKER, "--disaggregation-mode", "decode"], "count": 1}}
    replayer = Replayer()
    try:
        (answer,) = replayer([_job(rows, roles)])
    finally:
        replayer.close()
    (req,) = answer["runs"][0]["requests"]
    assert 0 < req["source_held_ms"] < req["first_token_ms"] <= req["last_token_ms"]


@pytest.mark.load(1)   # the runner, though it sends nothing: the hygiene rule's lane
def test_a_simulated_run_is_recorded_read_and_labelled_as_one(tmp_path):
    from reports.records.runs import load_run
    from stacks.preflight.run import check_stack
    from workloads.sim.build import make
    from workloads.sim.plan_sim import simulate_plan

    stacks = tmp_path / "stacks"
    name = write_stack(stacks, "sim-agg", router="round-robin",
                       workers=[{"role": "worker", "replicas": 2}],
                       workloads={"concurrencySweep": {"quick": {"concurrencies": [1, 4],
                                                                 "durationS": 6}},
                                  "multiTurn": {"enabled": False},
                                  "sequenceDistributions": {"enabled": False},
                                  "prefixCache": {"quick": {"shares": [0.5], "requests": 16}}})
    hf = tmp_path / "hf"
    done = subprocess.run(runner_cmd(name, stacks, tmp_path / "runs", "sim-1", "--target",
                                     "sim"), cwd=REPO, env=runner_env(hf), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "runs" / name / "sim-1"
    m = read_manifest(run)
    assert m["target_info"]["kind"] == "sim"
    assert m["target_info"]["timings"]["label"].startswith("SIMULATED (DynoSim")
    assert all(s["status"] == "complete" for s in m["steps"].values())
    first = json.loads((run / "concurrency_sweep/c4/profile_export.jsonl").read_text()
                       .splitlines()[0])
    assert first["metadata"]["simulated"] is True
    summary = json.loads((run / "concurrency_sweep/c4/profile_export_aiperf.json").read_text())
    assert summary["aiperf_version"] is None and summary["simulated_by"]["simulator"] == "DynoSim"

    frames = load_run(run, use_cache=False).steps.set_index("step")
    report = check_stack(name, stacks)
    target, ex = make(report.stack, [x.kv_capacity_tokens for x in report.memory], hf)
    figures = {f.step: f for f in simulate_plan(report.stack, "quick", target, ex.template,
                                                predictions=m.get("predictions"))}
    assert set(figures) == set(frames.index)
    for step, row in frames.iterrows():
        assert row["completed"] == figures[step].requests, step
        assert row["ttft_p50_ms"] == pytest.approx(figures[step].ttft_p50_ms), step
        assert row["itl_p50_ms"] == pytest.approx(figures[step].itl_p50_ms), step
    # the step's own trace (what routing evidence reads) carries the simulated reuse
    assert frames.loc["prefix_cache/share050", "trace_hit_rate"] == pytest.approx(
        figures["prefix_cache/share050"].reuse, abs=1e-3)
    assert figures["prefix_cache/share050"].reuse > 0.3
