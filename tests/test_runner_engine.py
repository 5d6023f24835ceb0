"""The runner end to end with the REAL AIPerf CLI and the REAL local Dynamo engine (small)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import httpx
import pytest
from engine_support import (
    REPO,
    alive_in_group,
    needs_engine,
    read_manifest,
    runner_cmd,
    runner_env,
    start_runner,
    started_pids,
    stop_runner,
    wait_for,
    write_stack,
)
from scipy import stats

from stacks.catalog.metrics import FRONTEND_OUTPUT_TOKENS
from workloads import datasets as ds
from workloads.attest.parse import metric_sum, parse_prometheus
from workloads.targets.processes import pid_alive

pytestmark = [pytest.mark.engine, pytest.mark.load(2), needs_engine]

TINY = {
    "warmupRequests": 2,
    "errorRateThreshold": 0.0,
    # the fault runs (below) send this sweep too: the first AIPerf to send it builds its
    # prompts, the others find them in AIPerf's cache
    "concurrencySweep": {"quick": {"concurrencies": [2], "durationS": 6, "isl": 512, "osl": 32}},
    # short pauses: this run checks the turn records, not think time, and 5 turns must fit in
    # the step on 2 busy cores
    "multiTurn": {"quick": {"conversations": 2, "durationS": 6, "isl": 128, "osl": 8,
                            "turnDelayMs": 20}},
    # one shape and two shares: every AIPerf step costs ~8 s of start-up and export on 2
    # cores, and the shapes and shares take the same path through AIPerf and the engine (each
    # shape's and share's dataset is checked exactly in tests/test_workloads_datasets.py)
    "sequenceDistributions": {"distributions": ["lognormal"],
                              "quick": {"requests": 24, "islMax": 1024, "oslMin": 8,
                                        "oslMax": 48, "concurrency": 4}},
    "prefixCache": {"shares": [0.5, 1.0], "quick": {"requests": 8, "osl": 8,
                                                    "concurrency": 4}},
}


# The kill and Ctrl-C runs: one 6 s sweep step on one worker (the kill lands about a second
# into profiling, the interrupt within half a second). They and the tiny run write the same
# sweep dataset file (same rows, name and seed), so only the first AIPerf to send it builds
# its prompts; the others find them in AIPerf's cache (aiperf 0.13.0 dataset/mmap_cache.py
# compute_cache_key: file name and bytes, tokenizer, seed) and skip ~10 s of CPU. Each sends
# the same requests either way.
FAULT_RUN = {"warmupRequests": 1, "errorRateThreshold": 0.0,
             "concurrencySweep": TINY["concurrencySweep"]}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One quick run of every workload on a 2-worker KV-routed local engine."""
    root = tmp_path_factory.mktemp("run")
    stack = write_stack(root / "stacks", "t-agg", workers=[{"role": "worker", "replicas": 2}],
                        workloads=TINY)
    # a relative --runs-dir, as `make demo` passes it (AIPerf runs in another directory)
    cmd = runner_cmd(stack, root / "stacks", Path("runs"), "r1")
    env = {**runner_env(root / "hf"), "PYTHONPATH": str(REPO)}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=root)
    run_dir = root / "runs" / stack / "r1"
    return out, run_dir, read_manifest(run_dir)


def test_a_run_completes_with_zero_errors(tiny_run):
    out, run_dir, m = tiny_run
    assert out.returncode == 0, out.stderr[-3000:]
    assert m["status"] == "complete"
    assert list(m["steps"]) == [
        "concurrency_sweep/c2", "multi_turn/conv2", "sequence_distributions/lognormal",
        "prefix_cache/share050", "prefix_cache/share100"]
    for step_id, step in m["steps"].items():
        assert step["status"] == "complete", step_id
        c = step["counts"]
        assert c["attempted"] > 0 and c["completed"] == c["attempted"], step_id
        assert (run_dir / step_id / "profile_export_aiperf.json").exists()
        assert json.loads((run_dir / step_id / "step.json").read_text())["status"] == "complete"
    assert not list(run_dir.rglob("*.partial"))


def test_manifest_records_what_ran(tiny_run):
    _, run_dir, m = tiny_run
    attempt = m["attempts"][-1]
    assert [p["name"] for p in attempt["phases"]][:4] == ["startup", "attestation", "smoke",
                                                          "warmup"]
    # the engine was attested before the smoke test and after each cold restart (the two
    # prefix-cache steps), every time passing the checks the mocker can show
    assert len(m["attestations"]) == 1 + sum(1 for s in m["steps"].values() if s.get("cold"))
    assert all(a["ok"] and a["target"] == "local" for a in m["attestations"])
    assert attempt["phases"][-1]["name"] == "shutdown"
    assert all(p["start"] and p["end"] for p in attempt["phases"])
    assert attempt["versions"]["aiperf"] == "0.13.0" and attempt["versions"]["dynamo"] == "1.6.1"
    assert len(attempt["versions"]["dynamo_bench"]["commit"]) == 40
    assert m["host"]["cpu_count"] == os.cpu_count()
    assert set(m["endpoints"]["metrics"]) == {"frontend", "worker-0", "worker-1"}
    sweep = m["steps"]["concurrency_sweep/c2"]
    assert sweep["command"][1] == "profile" and sweep["command"][0].endswith("aiperf")
    assert sweep["cold"] is False and m["steps"]["prefix_cache/share050"]["cold"] is True
    # every dataset's hash is the hash of the file the command line names
    for step in m["steps"].values():
        f = run_dir / step["dataset"]["path"]
        assert str(f) in step["command"]
        assert hashlib.sha256(f.read_bytes()).hexdigest() == step["dataset"]["sha256"]
        assert m["datasets"][step["dataset"]["path"]] == step["dataset"]["sha256"]


def test_the_sweep_warms_one_request_per_slot_before_the_rows_it_profiles(tiny_run):
    """workloads/step_warmup.py through the real AIPerf: the sweep step's warm-up takes the
    file's first rows and the profiled requests the rows after them (no prompt sent twice,
    no warm-up record counted); the other workloads warm nothing; every step says which AIPerf
    correction it ran with."""
    _, run_dir, m = tiny_run
    sweep = m["steps"]["concurrency_sweep/c2"]
    cmd = sweep["command"]
    assert sweep["aiperf_warmup_requests"] == 2
    assert cmd[cmd.index("--warmup-request-count") + 1] == "2"
    assert int(cmd[cmd.index("--request-count") + 1]) == sweep["dataset"]["rows"] - 2
    records = [json.loads(x)["metadata"] for x in
               (run_dir / "concurrency_sweep/c2" / "profile_export.jsonl").read_text().splitlines()]
    warm = [r["conversation_id"] for r in records if r["benchmark_phase"] == "warmup"]
    profiled = [r["conversation_id"] for r in records if r["benchmark_phase"] == "profiling"]
    rows = [json.loads(x)["session_id"] for x in
            (run_dir / sweep["dataset"]["path"]).read_text().splitlines()]
    assert sorted(warm) == sorted(rows[:2]) and not set(warm) & set(profiled)
    assert len(profiled) == sweep["counts"]["attempted"]
    # the frontend's request records the step keeps are the profiled requests', not warm-up's
    assert sweep["routing_evidence"]["records"] == sweep["counts"]["completed"]
    for step_id, step in m["steps"].items():
        # what the step's own AIPerf said at start-up (its aiperf.log), not what was intended
        assert step["aiperf_patches"] == {"aiperf_slot_wait": "applied"}, step_id
        if step_id != "concurrency_sweep/c2":
            assert step["aiperf_warmup_requests"] == 0
            assert "--warmup-request-count" not in step["command"], step_id


def test_server_metrics_of_frontend_and_every_worker_are_kept(tiny_run):
    _, run_dir, m = tiny_run
    export = json.loads((run_dir / "prefix_cache/share100/server_metrics_export.json")
                        .read_text())
    assert set(export["summary"]["endpoints_successful"]) == set(m["endpoints"]["metrics"]
                                                                .values())
    cached = export["metrics"]["dynamo_frontend_cached_tokens"]["series"][0]["stats"]["sum"]
    assert cached > 0   # 100 % shared prefix: the server reports prefix hits


def test_prefix_datasets_have_exactly_the_asked_share(tiny_run):
    _, run_dir, m = tiny_run
    for name, share in [("share050", 0.5), ("share100", 1.0)]:
        rows = [json.loads(line) for line in
                (run_dir / m["steps"][f"prefix_cache/{name}"]["dataset"]["path"]).open()]
        assert ds.shared_prefix_fraction(rows) == share
    ids = [set(h for r in (json.loads(line) for line in (run_dir / s["dataset"]["path"]).open())
               for h in r["hash_ids"])
           for k, s in m["steps"].items() if k.startswith("prefix_cache/")]
    assert ids[0] and not ids[0] & ids[1]   # fresh blocks per step


def test_distribution_datasets_match_their_shape_and_lengths_are_recorded(tiny_run):
    _, run_dir, m = tiny_run
    for kind in ("lognormal",):
        step = m["steps"][f"sequence_distributions/{kind}"]
        rows = [json.loads(line) for line in (run_dir / step["dataset"]["path"]).open()]
        target = ds.LengthDistribution(kind, 128, 1024)
        sample = [r["input_length"] for r in rows]
        assert stats.kstest(sample, lambda x, t=target: [t.cdf(v) for v in x]).pvalue > 0.01
        recorded = [json.loads(line) for line in
                    (run_dir / f"sequence_distributions/{kind}/requests.jsonl").open()]
        assert len(recorded) == len(rows)
        for r in recorded:   # ignore_eos: the server produced exactly the requested output
            assert r["output_tokens"] == r["requested_output_tokens"]
            assert r["outcome"] == "completed"
            assert r["input_tokens"] >= r["requested_input_tokens"] * 0.9


def test_multi_turn_records_carry_turn_indexes(tiny_run):
    _, run_dir, _ = tiny_run
    recorded = [json.loads(line) for line in
                (run_dir / "multi_turn/conv2/requests.jsonl").open()]
    turns = Counter(r["turn_index"] for r in recorded)
    assert set(turns) == {0, 1, 2, 3, 4}
    by_conv = {}
    for r in recorded:
        by_conv.setdefault(r["conversation_id"], {})[r["turn_index"]] = r["input_tokens"]
    full = [t for t in by_conv.values() if len(t) == 5]
    assert full and all(t[0] < t[1] < t[2] < t[3] < t[4] for t in full)   # history grows


def test_every_started_process_is_gone(tiny_run):
    _, _, m = tiny_run
    pids = started_pids(m)
    assert len(pids) >= 4 + 5          # broker, frontend, 2 mockers (+restarts) + 5 AIPerf
    assert [p for p in pids if pid_alive(p) or alive_in_group(p)] == []


def _output_tokens(metrics_url: str) -> float:
    """Output tokens the frontend has streamed so far."""
    samples = parse_prometheus(httpx.get(metrics_url, timeout=10).text)
    return metric_sum(samples, (FRONTEND_OUTPUT_TOKENS,)) or 0.0


# the two fault runs take lane 1, behind the routing pair: the lanes then take about as long
@pytest.mark.load(1)
def test_killing_a_mocker_mid_step_marks_it_failed_and_resume_completes_it(tmp_path):
    # the kill lands once 64 tokens streamed (about a second into profiling), well inside
    # the 6 s step; the resumed run then runs the whole step again
    stack = write_stack(tmp_path / "stacks", "t-kill",
                        workers=[{"role": "worker", "replicas": 1}], router="round-robin",
                        workloads=FAULT_RUN)
    runs = tmp_path / "runs"
    cmd = runner_cmd(stack, tmp_path / "stacks", runs, "k", "--only", "concurrency_sweep")
    env = runner_env(tmp_path / "hf")
    run_dir = runs / stack / "k"
    step_log = run_dir / "concurrency_sweep" / "c2.partial" / "logs" / "aiperf.log"
    proc = start_runner(cmd, env, tmp_path / "runner1.log")
    try:
        wait_for(lambda: step_log.exists() and "Phase profiling (profiling) started"
                 in step_log.read_text(), 240, "AIPerf to start profiling")
        m = read_manifest(run_dir)
        mocker = next(p for p in m["target_info"]["processes"] if p["name"] == "worker-0")
        # load flowing (the frontend streams profiling tokens), then the worker dies under it
        frontend = m["endpoints"]["metrics"]["frontend"]
        at_start = _output_tokens(frontend)
        wait_for(lambda: _output_tokens(frontend) >= at_start + 64, 60,
                 "the profiling load to stream tokens")
        os.kill(mocker["pid"], signal.SIGKILL)
        assert proc.wait(timeout=240) == 1
    finally:
        stop_runner(proc)
    m = read_manifest(run_dir)
    step = m["steps"]["concurrency_sweep/c2"]
    assert step["status"] == "failed"
    c = step["counts"]
    # the only worker died: the streams it served were cut (truncated), later requests fail
    assert c["failed"] + c["truncated"] > 0 and c["completed"] < c["attempted"]
    assert any("error rate" in r or "truncated" in r for r in step["failure_reasons"])
    assert m["status"] == "failed" and "worker-0" in m["attempts"][-1]["error"]

    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    m = read_manifest(run_dir)
    step = m["steps"]["concurrency_sweep/c2"]
    assert step["status"] == "complete"
    assert step["counts"]["failed"] == step["counts"]["truncated"] == 0
    assert [h["status"] for h in step["history"]] == ["failed"]
    assert list((run_dir / ".failed").iterdir())          # the failed attempt's files kept
    assert [a["status"] for a in m["attempts"]] == ["failed", "complete"]
    pids = started_pids(m)
    assert [p for p in pids if pid_alive(p) or alive_in_group(p)] == []


@pytest.mark.load(1)
def test_ctrl_c_stops_the_load_then_the_engine_and_leaves_a_valid_manifest(tmp_path):
    stack = write_stack(tmp_path / "stacks", "t-int",
                        workers=[{"role": "worker", "replicas": 1}], router="round-robin",
                        workloads=FAULT_RUN)
    runs = tmp_path / "runs"
    cmd = runner_cmd(stack, tmp_path / "stacks", runs, "i", "--only", "concurrency_sweep")
    run_dir = runs / stack / "i"
    step_log = run_dir / "concurrency_sweep" / "c2.partial" / "logs" / "aiperf.log"
    # started as from a script's background job: SIGINT inherited ignored, which the runner
    # must undo, or the interrupt below is lost and the run goes on to exit 0
    proc = start_runner(cmd, runner_env(tmp_path / "hf"), tmp_path / "runner.log",
                        sigint_ignored=True)
    try:
        wait_for(lambda: step_log.exists() and "Phase profiling (profiling) started"
                 in step_log.read_text(), 240, "AIPerf to start profiling")
        proc.send_signal(signal.SIGINT)      # what Ctrl-C delivers to the runner
        assert proc.wait(timeout=120) == 130
    finally:
        stop_runner(proc)
    m = read_manifest(run_dir)               # parses: the manifest stayed valid
    attempt = m["attempts"][-1]
    assert m["status"] == "interrupted" and attempt["status"] == "interrupted"
    step = m["steps"]["concurrency_sweep/c2"]
    shutdown = attempt["phases"][-1]
    assert step["status"] == "interrupted" and shutdown["name"] == "shutdown"
    assert step["end"] <= shutdown["start"]  # the load was stopped before the engine
    assert not (run_dir / "concurrency_sweep" / "c2").exists()   # nothing half-published
    assert [p for p in started_pids(m) if pid_alive(p) or alive_in_group(p)] == []
