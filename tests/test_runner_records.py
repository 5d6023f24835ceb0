"""Pure parts of the runner: error counting, achieved concurrency, lengths, verdicts, manifest."""

from __future__ import annotations

import json

import pytest

from stacks.config.loader import load_stack, parse_config
from workloads import results
from workloads.manifest import COMPLETE, FAILED, Manifest
from workloads.saturation import verdict


def _rec(start, end, *, conv="req-000000", turn=0, error=None, cancelled=False, phase="profiling",
         isl=None):
    rec = {"metadata": {"conversation_id": conv, "turn_index": turn, "request_start_ns": start,
                        "request_end_ns": end, "benchmark_phase": phase,
                        "was_cancelled": cancelled},
           "metrics": {}}
    if isl is not None:
        rec["metrics"]["input_sequence_length"] = {"value": isl, "unit": "tokens"}
    if error:
        rec["error"] = error
    return rec


def test_errors_timeouts_and_cancellations_are_counted_apart():
    recs = [_rec(0, 1), _rec(0, 1), _rec(0, 1, error={"code": 503, "type": "Service Unavailable"}),
            _rec(0, 1, error={"code": None, "type": "TimeoutError", "message": "timed out"}),
            _rec(0, 1, cancelled=True, error={"type": "Cancelled"})]
    c = results.count(recs, results.outcomes(recs, [], None))
    assert (c.completed, c.failed, c.timeouts, c.cancelled, c.truncated) == (2, 2, 1, 1, 0)
    # 2 failed of the 4 not cut by the step's end
    assert c.attempted == 5 and c.error_rate == pytest.approx(0.5)


def test_only_profiling_records_count(tmp_path):
    lines = [_rec(0, 1, phase="warmup"), _rec(0, 1), _rec(0, 1, error={"code": 500})]
    (tmp_path / results.RECORDS).write_text("".join(json.dumps(r) + "\n" for r in lines))
    recs = results.read_records(tmp_path)
    assert results.count(recs, results.outcomes(recs, [], None)).attempted == 2


def test_achieved_concurrency_from_timestamps():
    # closed loop, 4 lanes, each starting its next request when the last one ends; the
    # first wave is issued over 30 ns (a ramp that must not count against the client)
    lanes = [_rec(j * 40 + k * 10 * (j == 0) + k, j * 40 + 40 + k) for j in range(3)
             for k in range(4)]
    assert results.achieved_concurrency(lanes, 4) == pytest.approx(4.0, rel=0.05)
    # a client that could only keep 2 of 4 in flight
    starved = [_rec(j * 40 + k, j * 40 + 40 + k) for j in range(6) for k in range(2)]
    assert results.achieved_concurrency(starved, 4) == pytest.approx(2.0, rel=0.05)
    # a single wave has no steady state
    assert results.achieved_concurrency(lanes[:4], 4) is None


def test_multi_turn_concurrency_counts_conversations_not_requests():
    """AIPerf holds a conversation's slot through its think time: 4 conversations of 3 turns
    with 20 ns pauses keep 4 conversations in flight but only ~2.7 requests. Judged per
    request the step would be a false client-bound alarm."""
    recs = []
    for wave in range(3):
        for k in range(4):
            t0 = wave * 162 + k
            recs += [_rec(t0 + turn * 60, t0 + turn * 60 + 40, conv=f"c{wave}-{k}", turn=turn)
                     for turn in range(3)]
    per_request = results.achieved_concurrency(recs, 4)
    per_conv = results.achieved_concurrency(recs, 4, per_conversation=True)
    assert per_request < 0.9 * 4 <= per_conv
    assert verdict(4, per_conv, None, 2)["client_bound"] is False


def test_request_lengths_match_rows_by_session_and_turn():
    rows = [{"session_id": "conv-00000", "input_length": 512, "output_length": 64},
            {"session_id": "conv-00000", "input_length": 500, "output_length": 32},
            {"session_id": "conv-00001", "input_length": 128, "output_length": 16}]
    recs = [_rec(0, 1, conv="conv-00000", turn=1, isl=1200),
            _rec(0, 1, conv="conv-00001", turn=0, isl=140)]
    out = results.request_lengths(recs, rows)
    assert [(o["requested_input_tokens"], o["requested_output_tokens"], o["input_tokens"])
            for o in out] == [(500, 32, 1200), (128, 16, 140)]


def test_client_bound_verdict():
    assert not verdict(16, 15.6, 0.5, 2)["client_bound"]
    low = verdict(16, 11.0, 0.5, 2)
    assert low["client_bound"] and "achieved concurrency" in low["reasons"][0]
    busy = verdict(16, 15.9, 1.9, 2)
    assert busy["client_bound"] and "cores" in busy["reasons"][0]


@pytest.fixture()
def stack():
    return load_stack("local-agg")


def test_manifest_keeps_step_history_and_is_valid_json(tmp_path, stack):
    path = tmp_path / "m" / "manifest.json"
    m = Manifest.open(path, stack=stack, run_id="r", scale="quick")
    m.begin_attempt()
    m.begin_step("a/b", {"status": "running"})
    m.update_step("a/b", status=FAILED, dataset={"path": "datasets/a/b.jsonl", "sha256": "x"})
    m.begin_step("a/b", {"status": "running"})
    m.update_step("a/b", status=COMPLETE)
    data = json.loads(path.read_text())
    assert data["steps"]["a/b"]["status"] == COMPLETE
    assert [h["status"] for h in data["steps"]["a/b"]["history"]] == [FAILED]
    assert data["datasets"] == {"datasets/a/b.jsonl": "x"}
    assert len(data["stack_config_sha256"]) == 64 and data["host"]["cpu_count"] >= 1


def test_manifest_write_is_atomic(tmp_path, stack, monkeypatch):
    path = tmp_path / "manifest.json"
    m = Manifest.open(path, stack=stack, run_id="r", scale="quick")
    m.save()
    before = path.read_text()
    m.data["status"] = "changed"

    def crash(*a, **k):
        raise OSError("disk gone")
    monkeypatch.setattr("workloads.manifest.os.replace", crash)
    with pytest.raises(OSError):
        m.save()
    assert path.read_text() == before and json.loads(before)["status"] == "running"


def test_resume_refuses_a_changed_stack_or_scale(tmp_path, stack):
    path = tmp_path / "manifest.json"
    Manifest.open(path, stack=stack, run_id="r", scale="quick").save()
    raw = stack.model_dump(by_alias=True, exclude={"name"})
    raw["workloads"]["seed"] = 1
    with pytest.raises(ValueError, match="different config"):
        Manifest.open(path, stack=parse_config("local-agg", raw), run_id="r", scale="quick")
    with pytest.raises(ValueError, match="scale quick"):
        Manifest.open(path, stack=stack, run_id="r", scale="full")


def test_client_cpu_is_judged_while_the_load_ran():
    from workloads.saturation import CpuSampler
    s = CpuSampler(pid=1)
    s.samples = [(0, 1.0), (10, 0.2), (20, 0.4), (30, 1.0)]   # start-up, load, load, exit
    assert s.summary((10, 20))["mean_cores"] == pytest.approx(0.3)
    assert s.summary((10, 20))["mean_cores_whole_process"] == pytest.approx(0.65)
    window = results.load_window_ns([_rec(12, 30), _rec(10, 25)])
    assert window == (10, 30)


def test_a_phase_that_raises_is_closed_failed_or_interrupted(tmp_path, stack):
    m = Manifest.open(tmp_path / "m.json", stack=stack, run_id="r", scale="quick")
    m.begin_attempt()
    with pytest.raises(RuntimeError), m.phase("smoke"):
        raise RuntimeError("no content")
    with pytest.raises(KeyboardInterrupt), m.phase("step:x"):
        raise KeyboardInterrupt
    with m.phase("shutdown") as p:
        p["note"] = "ok"
    phases = json.loads((tmp_path / "m.json").read_text())["attempts"][0]["phases"]
    assert [(p["name"], p["status"]) for p in phases] == [
        ("smoke", FAILED), ("step:x", "interrupted"), ("shutdown", COMPLETE)]
    assert phases[0]["error"] == "no content" and all(p["end"] for p in phases)


def test_aws_target_endpoints_come_from_stack_outputs():
    from workloads.targets.aws.target import endpoints_from_outputs, prometheus_url
    from workloads.targets.base import TargetError
    outputs = {"frontendService": "agg-a100-frontend", "dynamoNamespace": "dynamo",
               "prometheusService": "prometheus-kube-prometheus-prometheus"}
    ep = endpoints_from_outputs(outputs, "Qwen/Qwen3-30B-A3B")
    assert ep.base_url == "http://agg-a100-frontend.dynamo.svc.cluster.local:8000"
    assert ep.metrics == {"frontend": f"{ep.base_url}/metrics"}
    assert prometheus_url(outputs) == ("http://prometheus-kube-prometheus-prometheus.monitoring"
                                       ".svc.cluster.local:9090")
    assert prometheus_url({**outputs, "prometheusUrl": "http://p:9090"}) == "http://p:9090"
    with pytest.raises(TargetError, match="frontendService"):
        endpoints_from_outputs({"dynamoNamespace": "dynamo"}, "m")
