"""Run-time attestation on the fake cluster (tests/aws_target_fake*.py): the deployed graph's
pods answer with realistic logs (vLLM's engine-config line, NIXL's backend line), GPU-probe exec
output and Prometheus metrics that move under the probe's requests. Every check passes on a
faithful deployment and fails, with its evidence, when one thing is broken; a refused run sends
no load."""

from __future__ import annotations

import json

import pytest

from reports.build import build_report
from stacks.preflight.run import check_stack
from tests.aws_target_deploy import aws_target, connect_runner, deploy
from tests.aws_target_fake_serving import engine_log, node_uuids
from workloads.attest.checks import FAIL, FLAGGED, NOT_CONFIGURED, PASS
from workloads.runner import RunOptions, run


def _attest(tmp_path, stack="disagg-a100", before=None, **serving):
    d = deploy(tmp_path, stack)
    for key, value in serving.items():
        setattr(d.cluster.serving, key, value)
    capacity = [m.kv_capacity_tokens for m in check_stack(stack).memory]
    target = aws_target(d, tmp_path, kv_capacity_tokens=capacity)
    target.start()
    if before:
        before(d, target)
    return d, target.attest("test")


def _status(att) -> dict[str, str]:
    return {c.name: c.status for c in att.checks}


def _failed(att, name: str):
    check = next(c for c in att.checks if c.name == name)
    assert check.status == FAIL, (name, check)
    assert not att.ok and name in att.refusal() and "no load was sent" in att.refusal()
    return check


def _component(d, kind: str):
    return next(c for c in d.cluster.components[next(iter(d.cluster.dgds))] if c.type == kind)


# --- faithful deployments pass ----------------------------------------------------------------

def test_a_faithful_disaggregated_libfabric_deployment_passes_every_check(tmp_path):
    d, att = _attest(tmp_path, "disagg-a100")
    assert att.ok, att.refusal()
    assert _status(att) == {"model": PASS, "gpus": PASS, "driver": PASS, "nixl_backend": PASS,
                            "kv_transfer": PASS, "prefix_cache": PASS,
                            "kv_events": NOT_CONFIGURED, "kv_offload": NOT_CONFIGURED,
                            "precision": PASS, "first_data": PASS}
    gpus = next(c for c in att.checks if c.name == "gpus").evidence
    assert len(gpus) == 4 and all(len(p["uuids"]) == 4 for p in gpus.values())
    assert next(c for c in att.checks if c.name == "driver").evidence == {
        "drivers": ["580.159.03"]}


def test_kv_router_and_offload_stacks_show_events_and_offloaded_bytes(tmp_path):
    d, att = _attest(tmp_path, "disagg-a100-kv-offload")
    assert att.ok, att.refusal()
    assert _status(att)["kv_events"] == PASS and _status(att)["kv_offload"] == PASS
    offload = next(c for c in att.checks if c.name == "kv_offload").evidence
    # enough distinct requests to overflow both prefill workers' GPU KV cache (pre-flight)
    assert offload["requests"]["requests"] >= 2 * 700_000 // 8192


# --- one broken thing per check ------------------------------------------------------------

def test_two_pods_reporting_the_same_gpu_fail_the_gpu_check(tmp_path):
    def same_gpu(d, target):
        pods = sorted(n for (_, n), p in d.cluster.pods.items()
                      if p["_fake"].get("comp") is _component(d, "prefill"))
        first = json.loads(d.cluster.serving.probe(d.cluster.pods[("dynamo", pods[0])]))
        d.cluster.serving.probe_override[pods[1]] = first
    d, att = _attest(tmp_path, before=same_gpu)
    check = _failed(att, "gpus")
    assert "is used by 2 pods on node" in check.detail


def test_a_privileged_worker_without_the_gpu_pin_sees_the_whole_node(tmp_path):
    # NVIDIA/k8s-device-plugin#336: what the EFA workers did before the pinning shell.
    def unpinned(d, target):
        for pod in d.cluster.pods.values():
            if pod["_fake"].get("comp") is _component(d, "decode"):
                pod["spec"]["containers"][0]["command"] = ["python3", "-m", "dynamo.vllm"]
    d, att = _attest(tmp_path, before=unpinned)
    check = _failed(att, "gpus")
    assert "sees 8 distinct GPU(s), the stack gives it 4" in check.detail
    assert node_uuids("p4d-0")[0] in json.dumps(check.evidence)


@pytest.mark.parametrize("strategy", ["envvar", "volume-mounts"])
def test_the_gpu_check_records_which_way_the_device_plugin_answered(tmp_path, strategy):
    # Auto Mode's plugin (Bottlerocket) passes indices as mounts, ours UUIDs in the env: both
    # pin each worker to its own GPUs, and the attestation says which it saw (components/efa.py)
    def plugin(d, target):
        d.cluster.serving.plugin_strategy = strategy
    d, att = _attest(tmp_path, before=plugin)
    assert att.ok, att.refusal()
    check = next(c for c in att.checks if c.name == "gpus")
    assert f"pinned from the device plugin's {strategy} answer" in check.detail
    assert {p["pinned_by"] for p in check.evidence.values()} == {strategy}
    mounts = [p["device_list_mounts"] for p in check.evidence.values()]
    assert all(m is None for m in mounts) if strategy == "envvar" else \
        all(len(m) == 4 for m in mounts)


def test_a_worker_pinned_to_other_gpus_than_the_plugins_mounts_fails(tmp_path):
    def off_by_one(d, target):
        d.cluster.serving.plugin_strategy = "volume-mounts"
        pod = sorted(n for (_, n), p in d.cluster.pods.items()
                     if p["_fake"].get("comp") is _component(d, "decode"))[0]
        probe = json.loads(d.cluster.serving.probe(d.cluster.pods[("dynamo", pod)]))
        probe["device_list_mounts"] = ["0", "1", "2", "7"]
        d.cluster.serving.probe_override[pod] = probe
    d, att = _attest(tmp_path, before=off_by_one)
    check = _failed(att, "gpus")
    assert "the device plugin's volume-mounts answer names ['0', '1', '2', '7']" in check.detail


def test_an_old_node_driver_fails(tmp_path):
    d, att = _attest(tmp_path, driver="570.195.03")
    assert "older than the 580" in _failed(att, "driver").detail


def test_a_tcp_fallback_in_the_nixl_log_fails(tmp_path):
    def fallback(d, target):
        _component(d, "decode").log = _component(d, "decode").log.replace(
            "Backend LIBFABRIC was instantiated", "Backend UCX was instantiated")
    d, att = _attest(tmp_path, before=fallback)
    assert "did not log 'Backend LIBFABRIC was instantiated' (saw ['UCX'])" in \
        _failed(att, "nixl_backend").detail


def test_no_kv_bytes_between_prefill_and_decode_fails(tmp_path):
    d, att = _attest(tmp_path, kv_bytes_per_request=0)
    check = _failed(att, "kv_transfer")
    assert "moved no KV bytes" in check.detail and check.evidence["bytes"] == 0


def test_decode_workers_without_nixl_metrics_fail(tmp_path):
    d, att = _attest(tmp_path, exports_nixl=False)
    assert "export no NIXL transfer metrics" in _failed(att, "kv_transfer").detail


def test_zero_cached_tokens_on_a_repeated_prompt_fails(tmp_path):
    d, att = _attest(tmp_path, "agg-a100", cache_hits=False)
    check = _failed(att, "prefix_cache")
    assert check.evidence["cached_tokens_per_send"] == [0] * 5   # 4 workers + 1


def test_a_router_receiving_no_kv_events_fails(tmp_path):
    d, att = _attest(tmp_path, "agg-a100-kv", kv_events=False)
    assert "routes blind" in _failed(att, "kv_events").detail


def test_offload_metrics_that_do_not_move_fail(tmp_path):
    d, att = _attest(tmp_path, "disagg-a100-kv-offload", offload_bytes_per_request=0)
    assert "stored nothing to the CPU tier" in _failed(att, "kv_offload").detail


def test_an_engine_running_another_precision_fails(tmp_path):
    def fp16(d, target):
        for kind in ("prefill", "decode"):
            comp = _component(d, kind)
            comp.log = comp.log.replace("dtype=torch.bfloat16", "dtype=torch.float16")
    d, att = _attest(tmp_path, before=fp16)
    assert "dtype=torch.float16" in _failed(att, "precision").detail


def test_an_engine_serving_another_revision_fails(tmp_path):
    def other_revision(d, target):
        comp = _component(d, "prefill")
        comp.log = engine_log("Qwen/Qwen3-30B-A3B", revision="0123abcd") + comp.log
        comp.log = comp.log.replace(engine_log("Qwen/Qwen3-30B-A3B", revision=None), "")
    d, att = _attest(tmp_path, before=other_revision)
    assert "revision 0123abcd" in _failed(att, "model").detail


# --- the runner: before the smoke test, and after every cold restart --------------------------

@pytest.fixture
def deployed(tmp_path, monkeypatch):
    return connect_runner(monkeypatch, deploy(tmp_path, "agg-a100"))


def _run(tmp_path, d):
    return run(RunOptions(stack="agg-a100", scale="quick", run_id="att",
                          runs_dir=tmp_path / "runs", outputs_file=d.outputs,
                          show_progress=False, only=["prefix_cache"]))


def test_the_runner_attests_before_the_smoke_test_and_after_each_cold_restart(tmp_path,
                                                                              deployed):
    result = _run(tmp_path, deployed)
    assert result.status == "complete"
    m = json.loads((result.run_dir / "manifest.json").read_text())
    cold = [s for s in m["steps"].values() if s.get("cold")]
    assert cold and all(s["attestation"].startswith("passed") for s in cold)
    whens = [a["when"] for a in m["attestations"]]
    assert whens[0] == "before the smoke test"
    assert len(whens) == 1 + len(cold) and all(a["ok"] for a in m["attestations"])
    assert m["attempts"][-1]["target"]["gpu_drivers"] == ["580.159.03"]   # in the run record
    phases = [p["name"] for p in m["attempts"][-1]["phases"]]
    assert phases.index("attestation") < phases.index("smoke")
    # report.md's run records carry the attestation line
    report = build_report([result.run_dir], tmp_path / "out", name="att")
    text = (report.out_dir / "report.md").read_text()
    assert "attestation" in text.split("## Run records used")[1]
    assert f"[{len(whens)} attestation(s)]" in text and "passed (after the cold restart" in text
    # ... and the summary that opens it says where the run ran and what proved it
    where = text.split("**Where it ran**")[1].split("**What was measured**")[0]
    assert "real cluster" in where and "attestation: " in where \
        and f"[{len(whens)} attestation(s)]" in where


def test_a_refused_attestation_sends_no_load(tmp_path, deployed):
    deployed.cluster.serving.cache_hits = False
    result = _run(tmp_path, deployed)
    assert result.status == "failed"
    assert not [o for o in deployed.cluster.created if o["kind"] == "Job"]   # no AIPerf Job
    m = json.loads((result.run_dir / "manifest.json").read_text())
    (attestation,) = m["attestations"]
    assert not attestation["ok"] and "REFUSED" in attestation["line"]
    assert "prefix_cache" in m["attempts"][-1]["error"]
    phases = {p["name"]: p for p in m["attempts"][-1]["phases"]}
    assert phases["attestation"]["status"] == "failed" and "smoke" not in phases


def test_a_refusal_after_a_cold_restart_stops_the_run_at_that_step(tmp_path, deployed):
    original = deployed.cluster.serving.allocate

    def shared_gpus(pod, nodes):   # replacement pods all land on the first node's GPUs
        node = original(pod, nodes)
        deployed.cluster.serving.allocated[pod["metadata"]["name"]] = node_uuids(node)[:4]
        return node
    deployed.cluster.serving.allocate = shared_gpus
    result = _run(tmp_path, deployed)
    assert result.status == "failed"
    m = json.loads((result.run_dir / "manifest.json").read_text())
    assert [a["ok"] for a in m["attestations"]] == [True, False]   # startup, then the restart
    assert "gpus" in m["attempts"][-1]["error"]
    first_cold = next(s for s in m["steps"].values() if s.get("cold"))
    assert first_cold["status"] != "complete" and "attestation" not in first_cold


def test_a_first_data_stall_is_flagged_with_its_size_and_never_refuses(tmp_path):
    stalled = {"requests": 8, "quickack_supported": True, "stall_ms": 23.4,
               "plain": {"first_data_p50_ms": 43.9, "frontend_ttft_mean_ms": 20.1},
               "quickack": {"first_data_p50_ms": 20.5, "frontend_ttft_mean_ms": 19.9}}
    d, att = _attest(tmp_path, "disagg-a100", before=lambda d, t: setattr(
        d.cluster, "first_data", stalled))
    assert att.ok, att.refusal()
    check = next(c for c in att.checks if c.name == "first_data")
    assert check.status == FLAGGED and "23.4 ms" in check.detail
    assert check.evidence["gap_ms"] == pytest.approx(23.8)
    # run in a frontend pod, on its own HTTP port, with the model the stack serves
    host, port, model, n = d.cluster.first_data_probes[-1]
    assert (host, n) == ("127.0.0.1", "8") and port.isdigit() and model


def test_a_failed_first_data_probe_is_recorded_as_unmeasured(tmp_path):
    d, att = _attest(tmp_path, "disagg-a100", before=lambda d, t: setattr(
        d.cluster, "first_data", {"error": "exit 1: boom"}))
    check = next(c for c in att.checks if c.name == "first_data")
    assert att.ok and check.status == FLAGGED
    assert "not measured: exit 1: boom" in check.detail


def test_a_probe_that_cannot_quick_ack_is_refused_as_a_measurement(tmp_path):
    """Without socket.TCP_QUICKACK the probe's quick-ACK mode is its plain mode: a stall of
    ~0 ms would pass the check while measuring nothing. The check says not measured, and no
    reader finds a stall or a floor in its evidence."""
    from reports.comparisons.predicted_vs_measured import first_data_stall_ms
    from workloads.attest.checks import first_data_floor, first_data_measured

    blind = {"requests": 8, "quickack_supported": False, "stall_ms": 0.3,
             "plain": {"first_data_p50_ms": 43.9, "frontend_ttft_mean_ms": 20.1},
             "quickack": {"first_data_p50_ms": 43.6, "frontend_ttft_mean_ms": 19.9}}
    d, att = _attest(tmp_path, "disagg-a100", before=lambda d, t: setattr(
        d.cluster, "first_data", blind))
    check = next(c for c in att.checks if c.name == "first_data")
    assert att.ok and check.status == FLAGGED
    assert "not measured" in check.detail and "TCP_QUICKACK" in check.detail
    assert set(check.evidence) == {"probe"} and check.evidence["probe"]["stall_ms"] == 0.3
    records = [att.record()]
    assert first_data_measured(records) is None and first_data_floor(records) is None
    assert first_data_stall_ms({"attestations": records}) is None


def test_a_flagged_stall_gives_the_report_its_floor_not_a_constant():
    """A flagged stall hands the report the plain first data (the floor under short TTFTs,
    reports/tables/tables.py ttft_gap); a passed one hands none; the last attestation that measured
    it counts."""
    from workloads.attest.checks import first_data_floor

    def att(status: str, stall: float, plain: float) -> dict:
        return {"checks": [{"name": "first_data", "status": status, "evidence": {
            "stall_ms": stall, "plain_first_data_p50_ms": plain, "bound_ms": 5.0}}]}
    assert first_data_floor([att(PASS, 0.4, 21.0)]) is None
    assert first_data_floor([att(FLAGGED, 23.4, 43.9)]) == 43.9
    unmeasured = {"checks": [{"name": "first_data", "status": FLAGGED,
                              "evidence": {"probe": {"error": "boom"}}}]}
    assert first_data_floor([att(FLAGGED, 23.4, 43.9), unmeasured]) == 43.9
    assert first_data_floor([att(FLAGGED, 23.4, 43.9), att(PASS, 0.4, 60.2)]) is None
