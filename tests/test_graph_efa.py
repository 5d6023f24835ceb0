"""EFA workers, GPU isolation and the NIXL side channel in the generated graphs, and the
GPU-pinning shell run for real (components/efa.py, components/kv_config.py)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from graph_stacks import components, env_of, graph_of, main, serving_stack_names, variant

from components import efa
from components.conventions import MODEL_CACHE_MOUNT, MODEL_CACHE_PVC
from components.graph import build_graph_deployment
from components.kv_config import SIDE_CHANNEL_HOST_ENV
from stacks.config.loader import StackError, load_stack
from stacks.config.schema import Topology, TransferBackend

SERVING = serving_stack_names()
AWS = [n for n in SERVING if load_stack(n).target == "aws"]


def _workers(graph):
    return [c for c in graph["spec"]["components"] if c["type"] != "frontend"]


@pytest.mark.parametrize("name", AWS)
def test_a_privileged_worker_always_pins_the_gpus_the_device_plugin_gave_it(name):
    # NVIDIA/k8s-device-plugin#336: a privileged container sees every GPU of its node.
    for comp in graph_of(name)["spec"]["components"]:
        c = main(comp)
        if (c.get("securityContext") or {}).get("privileged"):
            assert c["command"] == efa.pinned_command(), comp["name"]
            assert comp["type"] != "frontend"
            assert c["resources"]["limits"].get("vpc.amazonaws.com/efa"), \
                "privileged only where the EFA device plugin's resource demands it"


def test_efa_workers_run_the_efa_image_with_the_guides_environment():
    graph = graph_of("disagg-a100")
    comps = components(graph)
    assert main(comps["frontend"])["image"] == "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"
    for comp in _workers(graph):
        c = main(comp)
        assert c["image"] == "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1-efa"
        assert comp["runtimeVersionOverride"] == "1.6.1"   # the -efa tag does not state it
        env = env_of(c)
        for key, value in efa.REQUIRED_ENV.items():
            assert env[key] == value
        assert "IPC_LOCK" in c["securityContext"]["capabilities"]["add"]
    assert "runtimeVersionOverride" not in comps["frontend"]


def test_efa_image_keeps_digests_model_builds_and_other_registries():
    assert efa.efa_runtime_image("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1-efa") \
        == "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1-efa"
    model_build = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-a.x-k2-post.1"
    assert efa.efa_runtime_image(model_build) == model_build
    digest = "nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:" + "a" * 64
    assert efa.efa_runtime_image(digest) == digest
    assert efa.efa_runtime_image("my.ecr/dynamo:efa") == "my.ecr/dynamo:efa"


@pytest.mark.parametrize("name", [n for n in AWS
                                  if load_stack(n).serving.topology == Topology.DISAGGREGATED])
def test_every_nixl_worker_advertises_its_pod_ip_as_side_channel_host(name):
    # ai-dynamo/dynamo#11219: Dynamo 1.6.1 leaves it unset inside a MultiConnector.
    for comp in _workers(graph_of(name)):
        env = {e["name"]: e for e in main(comp)["env"]}
        assert env[SIDE_CHANNEL_HOST_ENV] == {
            "name": SIDE_CHANNEL_HOST_ENV,
            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, comp["name"]


def test_offload_stack_with_multiconnector_gets_the_side_channel_host():
    comps = _workers(graph_of("disagg-a100-kv-offload"))
    prefill = next(c for c in comps if c["type"] == "prefill")
    assert '"MultiConnector"' in " ".join(main(prefill)["args"])
    assert SIDE_CHANNEL_HOST_ENV in {e["name"] for e in main(prefill)["env"]}


def test_aggregated_workers_get_no_side_channel_host():
    for comp in _workers(graph_of("agg-a100")):
        assert SIDE_CHANNEL_HOST_ENV not in {e["name"] for e in main(comp)["env"]}


@pytest.mark.parametrize("name", AWS)
def test_frontend_mounts_the_model_cache_read_only_for_its_tokenizer(name):
    comp = components(graph_of(name))["frontend"]
    c, pod = main(comp), comp["podTemplate"]["spec"]
    assert {"name": MODEL_CACHE_PVC, "mountPath": MODEL_CACHE_MOUNT,
            "readOnly": True} in c["volumeMounts"]
    assert {"name": MODEL_CACHE_PVC,
            "persistentVolumeClaim": {"claimName": MODEL_CACHE_PVC}} in pod["volumes"]
    assert env_of(c)["HF_HOME"] == f"{MODEL_CACHE_MOUNT}/hf"
    assert env_of(c)["HF_HUB_OFFLINE"] == "1"


def test_multinode_efa_worker_is_refused_naming_the_field():
    stack = variant("disagg-a100")
    raw_workers = [w.model_dump(by_alias=True, exclude_defaults=True)
                   for w in stack.serving.workers]
    raw_workers[0]["nodeCount"] = 2
    multinode = variant("disagg-a100", workers=raw_workers)
    from stacks.preflight.run import effective_cluster
    cluster = effective_cluster(multinode, load_stack("base-a100"))
    cluster = cluster.model_copy(update={"allow_multinode": True})
    with pytest.raises(StackError, match=r"serving\.workers\[0\]\.nodeCount"):
        build_graph_deployment(multinode, namespace="dynamo", efa=True, cluster=cluster)
    assert multinode.serving.transfer == TransferBackend.NIXL_LIBFABRIC


# --- the pinning shell, run for real ---------------------------------------------------------

def _fake_python(tmp_path: Path) -> dict[str, str]:
    """A `python3` on PATH that prints what the worker would start with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "python3"
    exe.write_text('#!/bin/sh\necho "CUDA=$CUDA_VISIBLE_DEVICES"\n'
                   'echo "LD=$LD_LIBRARY_PATH"\necho "ARGV=$*"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64"}


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*cmd, "--model", "Qwen/Qwen3-30B-A3B"], env=env,
                          capture_output=True, text=True, timeout=30)


def test_pinning_shell_exports_the_plugins_gpus_and_the_efa_libraries(tmp_path):
    env = _fake_python(tmp_path)
    gpus = "GPU-4b1c2d3e-0000-1111-2222-333344445555,GPU-9f8e7d6c-0000-1111-2222-333344445555"
    out = _run(efa.pinned_command(), {**env, "NVIDIA_VISIBLE_DEVICES": gpus})
    assert out.returncode == 0, out.stderr
    lines = dict(line.split("=", 1) for line in out.stdout.splitlines())
    assert lines["CUDA"] == gpus
    assert lines["LD"] == f"{efa.EFA_LIBRARY_PATH}:/usr/local/cuda/lib64"
    assert lines["ARGV"] == "-m dynamo.vllm --model Qwen/Qwen3-30B-A3B"


@pytest.mark.parametrize("visible", [None, "", "all", "void", "none"])
def test_pinning_shell_refuses_to_start_when_the_plugin_named_no_gpus(tmp_path, visible):
    env = _fake_python(tmp_path)
    if visible is not None:
        env["NVIDIA_VISIBLE_DEVICES"] = visible
    out = _run(efa.pinned_command(), env)
    assert out.returncode == efa.NO_GPUS_EXIT
    assert "refusing to start" in out.stderr and "k8s-device-plugin#336" in out.stderr
    assert "CUDA=" not in out.stdout
