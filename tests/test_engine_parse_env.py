"""The engine parse runs each command line with its pod's env (stacks/preflight/engine_lines.py,
stacks/conventions/pod_env.py), never the host shell's, and keys its cache by that env and the
worker's GPU, so a pass under one env is never reused under another. A stub parser environment
records what each job was given (no ai-dynamo needed); the last test holds the parse env to the
env the graph really sets on each container."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from components.graph import build_graph_deployment
from stacks.catalog.instances import H100
from stacks.config.loader import load_stack
from stacks.config.schema import TransferBackend
from stacks.preflight import engine_parse
from stacks.preflight.engine_releases import RELEASES
from stacks.preflight.run import check_stack

STUB = """#!{python}
import json, os, sys
jobs = json.load(sys.stdin)
with open({log!r}, "a") as f:
    for j in jobs:
        f.write(json.dumps({{"argv": j["argv"], "env": j["env"], "gpu": j["gpu"],
                             "process_env": dict(os.environ)}}) + "\\n")
print(json.dumps({{"results": {{j["key"]: {{"ok": True, "refusals": []}} for j in jobs}}}}))
"""
HOST_ONLY = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1", "DYN_NAMESPACE": "host-shell",
             "PYTHONPATH": "/somewhere/else"}


@pytest.fixture
def stubs(tmp_path, monkeypatch):
    base = tmp_path / "p"
    for r in RELEASES:
        venv = Path(f"{base}{r.venv_suffix}")
        (venv / "bin").mkdir(parents=True)
        python = venv / "bin" / "python"
        python.write_text(STUB.format(python=sys.executable, log=str(venv / "jobs.log")))
        python.chmod(0o755)
    monkeypatch.setenv("DYNAMO_BENCH_PARSERS_VENV", str(base))
    monkeypatch.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    for key, value in HOST_ONLY.items():
        monkeypatch.setenv(key, value)
    return base


def _jobs(venv: Path) -> list[dict]:
    log = venv / "jobs.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_each_job_gets_its_containers_env_and_nothing_of_the_host(stubs, tmp_path):
    report = check_stack("disagg-b200-solar2")
    engine_parse.consult([report.stack], cache=tmp_path / "cache",
                         clusters={report.stack.name: report.cluster})
    jobs = _jobs(Path(f"{stubs}-1.4.1"))
    assert len(jobs) == 3                         # frontend, prefill, decode
    for job in jobs:
        for key in HOST_ONLY:
            assert key not in job["env"] and key not in job["process_env"], key
        # the graph's spec.env and the stack's serving.env, as the pod gets them
        assert job["env"]["DYN_EVENT_PLANE"] == "zmq"
        assert job["env"]["VLLM_SSM_CONV_STATE_LAYOUT"] == "DS"
        # the parse's own needs win over the pod's
        assert job["env"]["VLLM_TARGET_DEVICE"] == "cpu" and job["env"]["HF_HUB_OFFLINE"] == "1"
    workers = [j for j in jobs if "--model" in j["argv"]]
    assert [j["gpu"] for j in workers] == [{"name": "B200", "capability": [10, 0]}] * 2
    assert all(j["env"]["PYTHONHASHSEED"] == "0" for j in workers)


def test_the_cache_key_holds_the_env_and_the_gpu(stubs, tmp_path):
    qwen = load_stack("agg-a100")
    assert qwen.serving is not None
    allowed = qwen.model_copy(update={"serving": qwen.serving.model_copy(
        update={"env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}})})
    worker = engine_parse.command_lines(qwen)[1]
    assert engine_parse.cache_key(worker) != engine_parse.cache_key(
        engine_parse.command_lines(allowed)[1])
    on_h100 = engine_parse.CommandLine(**{**worker.__dict__, "gpu": H100})
    assert engine_parse.cache_key(worker) != engine_parse.cache_key(on_h100)
    # a pass cached without the variable is not reused with it, nor the other way round
    cache = tmp_path / "cache"
    engine_parse.consult([qwen], cache=cache)
    engine_parse.consult([allowed], cache=cache)
    engine_parse.consult([qwen, allowed], cache=cache)
    envs = [j["env"].get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") for j in _jobs(Path(str(stubs)))
            if "--model" in j["argv"]]
    assert envs == [None, "1"]


# What the graph sets that the parse leaves out, and why (stacks/conventions/pod_env.py).
NOT_PARSED = {
    "HF_HOME": "a path on the pod (the parse has its own cache)",
    "VLLM_CACHE_ROOT": "a path on the pod's model volume",
    "FLASHINFER_WORKSPACE_BASE": "a path on the pod's model volume",
    "HF_MODULES_CACHE": "a path on the pod's scratch volume",
    "DYN_KVBM_DISK_CACHE_DIR": "a path on the pod",
    "DYN_KVBM_CPU_CACHE_GB": "read by the KVBM connector when it starts, not a parser",
    "DYN_KVBM_DISK_CACHE_GB": "read by the KVBM connector when it starts, not a parser",
    "DYN_REQUEST_TRACE": "the frontend's trace sink, read when it serves",
    "DYN_REQUEST_TRACE_SINKS": "the frontend's trace sink, read when it serves",
    "DYN_REQUEST_TRACE_OUTPUT_PATH": "the frontend's trace sink, read when it serves",
    "DYN_REQUEST_TRACE_JSONL_FLUSH_INTERVAL_MS": "the frontend's trace sink",
    "FI_PROVIDER": "libfabric's, read when NIXL opens the EFA device",
    "FI_PROVIDER_PATH": "libfabric's (a donor's provider dir), read when NIXL loads libfabric",
    "FI_EFA_USE_DEVICE_RDMA": "libfabric's, read when NIXL opens the EFA device",
    "FI_EFA_ENABLE_SHM_TRANSFER": "libfabric's, read when NIXL opens the EFA device",
    "FI_EFA_ENABLE_SHM": "libfabric's, read when NIXL opens the EFA device",
    "DYNAMO_BENCH_GPUS": "the EFA worker's GPU-pinning shell reads it before Python starts",
}


@pytest.mark.parametrize("name", ["agg-a100", "disagg-a100-kv-offload", "disagg-b200-solar2",
                                  "disagg-b200-kexaone", "agg-b200-motif3"])
def test_the_parse_env_is_what_the_graph_sets(name):
    report = check_stack(name)
    assert report.cluster is not None
    assert report.stack.serving is not None
    efa = report.stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC
    graph = build_graph_deployment(report.stack, namespace="ns", efa=efa, cluster=report.cluster)
    spec_env = {e["name"]: e["value"] for e in graph["spec"]["env"]}
    lines = {line.where: dict(line.env)
             for line in engine_parse.command_lines(report.stack, report.cluster)}
    components = graph["spec"]["components"]
    assert len(components) == len(lines)
    for comp, (where, parse_env) in zip(components, lines.items(), strict=True):
        (main,) = [c for c in comp["podTemplate"]["spec"]["containers"] if c["name"] == "main"]
        plain = {e["name"]: e["value"] for e in main.get("env", []) if "value" in e}
        for key, value in {**spec_env, **plain}.items():
            if key in NOT_PARSED:
                assert key not in parse_env, (where, key)
            else:
                assert parse_env.get(key) == value, (where, key)
