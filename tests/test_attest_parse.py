"""The attestation's pure readers and its in-pod programs, run for real: the GPU probe against a
fake `nvidia-smi` and a fake process environment, the metrics reader against a loopback
server, vLLM's engine-config line, Prometheus text, and what a stack says it deploys."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from stacks.config.loader import load_stack
from tests.aws_target_fake_serving import engine_log, node_uuids
from workloads.attest.checks import summary_line
from workloads.attest.parse import (
    engine_config,
    expected,
    expected_gpus,
    metric_totals,
    nixl_backends,
    parse_prometheus,
)
from workloads.targets.aws.attest_scripts import GPU_PROBE, METRICS_GET

UUIDS = node_uuids("p4d-0")


def _probe(tmp_path, environ: dict[str, str], mounts: tuple[str, ...] | None = None) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    rows = "".join(f"{i}, {u}, 580.159.03\\n" for i, u in enumerate(UUIDS))
    smi.write_text(f"#!/bin/sh\nprintf '{rows}'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    env_file = tmp_path / "environ"
    env_file.write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in environ.items()) + b"\0")
    listing = tmp_path / "nvidia-container-devices"
    if mounts is not None:
        listing.mkdir(exist_ok=True)
        for m in mounts:
            (listing / m).touch()
    out = subprocess.run([sys.executable, "-c", GPU_PROBE, str(env_file), str(listing)],
                         capture_output=True,
                         text=True, timeout=30, env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_gpu_probe_keeps_what_cuda_visible_devices_names(tmp_path):
    pinned = _probe(tmp_path, {"CUDA_VISIBLE_DEVICES": f"{UUIDS[5]},{UUIDS[2]}",
                               "NVIDIA_VISIBLE_DEVICES": f"{UUIDS[5]},{UUIDS[2]}"})
    assert [g["uuid"] for g in pinned["gpus"]] == [UUIDS[5], UUIDS[2]]
    assert pinned["gpus"][0] == {"index": "5", "uuid": UUIDS[5], "driver": "580.159.03"}


def test_gpu_probe_without_a_pin_sees_every_gpu_nvidia_smi_lists(tmp_path):
    # A privileged container: nvidia-smi lists the whole node (k8s-device-plugin#336).
    probe = _probe(tmp_path, {"NVIDIA_VISIBLE_DEVICES": f"{UUIDS[0]},{UUIDS[1]}"})
    assert len(probe["gpus"]) == 8 and probe["cuda_visible_devices"] is None


@pytest.mark.parametrize(("visible", "count"), [("0,1,2,3", 4), ("1,99,2", 1), ("", 0)])
def test_gpu_probe_follows_cudas_index_names_and_stops_at_an_unknown_one(tmp_path, visible,
                                                                         count):
    assert len(_probe(tmp_path, {"CUDA_VISIBLE_DEVICES": visible})["gpus"]) == count


def test_gpu_probe_records_the_plugins_volume_mounts_and_how_the_shell_pinned(tmp_path):
    probe = _probe(tmp_path, {"CUDA_VISIBLE_DEVICES": "4,5", "NVIDIA_VISIBLE_DEVICES":
                              "/var/run/nvidia-container-devices",
                              "DYNAMO_BENCH_GPU_SOURCE": "volume-mounts"}, mounts=("5", "4"))
    assert probe["device_list_mounts"] == ["4", "5"] and probe["pinned_by"] == "volume-mounts"
    assert [g["uuid"] for g in probe["gpus"]] == [UUIDS[4], UUIDS[5]]



def test_gpu_probe_without_the_plugins_mounts_or_the_shell_records_none(tmp_path):
    probe = _probe(tmp_path, {"CUDA_VISIBLE_DEVICES": "0"})
    assert probe["device_list_mounts"] is None and probe["pinned_by"] is None


def test_metrics_get_reads_the_pods_own_endpoint():
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = b'vllm:nixl_bytes_transferred_sum{engine="0"} 42\n'
            self.send_response(200 if self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass
    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        out = subprocess.run([sys.executable, "-c", METRICS_GET, str(server.server_port)],
                             capture_output=True, text=True, timeout=30)
    finally:
        server.shutdown()
    assert out.returncode == 0 and "vllm:nixl_bytes_transferred_sum" in out.stdout


def test_engine_config_and_nixl_lines_are_read_from_a_worker_log():
    log = ("INFO loading weights\n" + engine_log("Qwen/Qwen3-30B-A3B-FP8", revision="abc123",
                                                quantization="fp8", kv_cache_dtype="fp8_e4m3")
           + "Backend LIBFABRIC was instantiated\nBackend LIBFABRIC was instantiated\n")
    cfg = engine_config(log)
    assert cfg["model"] == "Qwen/Qwen3-30B-A3B-FP8" and cfg["revision"] == "abc123"
    assert (cfg["dtype"], cfg["quantization"], cfg["kv_cache_dtype"]) == (
        "torch.bfloat16", "fp8", "fp8_e4m3")
    assert nixl_backends(log) == ["LIBFABRIC"]
    assert engine_config("no config here") is None


def test_metric_totals_sum_the_right_kinds_and_take_either_offload_name():
    frontend = ('# TYPE dynamo_frontend_cached_tokens histogram\n'
                'dynamo_frontend_cached_tokens_sum{model="m"} 768\n'
                'dynamo_component_kv_cache_events_applied{event_type="stored",status="ok"} 3\n'
                'dynamo_component_kv_cache_events_applied{event_type="stored",'
                'status="block_not_found"} 9\n')
    old_offload = 'vllm:kv_offload_total_bytes_total{transfer_type="GPU_to_CPU"} 1024\n'
    totals = metric_totals({"f": ("frontend", frontend), "p": ("prefill", old_offload),
                            "d": ("decode", 'vllm:nixl_bytes_transferred_sum 5\n'),
                            "d2": ("decode", 'vllm:nixl_bytes_transferred_sum 7\n')})
    assert totals["frontend_cached_tokens"] == 768
    assert totals["router_kv_events_stored"] == 3            # only status="ok"
    assert totals["nixl_bytes_transferred"] == 12            # both decode pods
    assert totals["offload_store_bytes"] == 1024
    assert totals["nixl_failed_transfers"] is None            # not exported: unknown, not 0
    assert parse_prometheus("garbage line\n# HELP x y\nx 1\n") == [("x", {}, 1.0)]


def test_expected_follows_the_stack():
    x = expected(load_stack("disagg-a100-kv-offload"), "aws", 580)
    assert (x.nixl_backend, x.kv_router, x.kv_offload, x.prefix_workers) == (
        "LIBFABRIC", True, True, 2)
    assert expected_gpus(x, "prefill-p4d") == 4 and expected_gpus(x, "decode-p4d-2") == 4
    assert expected_gpus(x, "frontend") is None
    assert expected(load_stack("disagg-l40s-decode"), "aws").nixl_backend == "UCX"
    assert expected(load_stack("agg-a100"), "aws").nixl_backend is None


def test_summary_line_names_the_last_attestation_and_counts_refusals():
    assert summary_line(None) == "none recorded"
    line = summary_line([{"ok": True, "line": "passed (x)"}, {"ok": False,
                                                              "line": "REFUSED (y)"}])
    assert line == "REFUSED (y) [2 attestation(s); 1 refused]"
