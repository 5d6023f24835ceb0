"""EFA workers, GPU isolation and the NIXL side channel in the generated graphs, and the
GPU-pinning shell run for real (components/efa.py, components/kv_config.py)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from graph_stacks import components, env_of, graph_of, main, serving_stack_names, variant
from k8s_validation import validate_builtin

from components import efa, efa_userspace
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
            # the pinning shell, with the library path of the stack's EFA userspace
            stack = load_stack(name)
            assert stack.serving is not None
            fabric = efa_userspace.for_worker(stack.serving, c["image"], 1)
            assert c["command"] == efa.pinned_command(efa.pin_gpus_script(
                library_path=fabric.library_path)), comp["name"]
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


@pytest.mark.parametrize("name", AWS)
def test_efa_workers_run_privileged_as_root_like_dynamos_efa_manifests(name):
    # recipes/qwen3-32b/vllm/cloud-providers/disagg-1p1d-aws-efa/deploy.yaml: privileged,
    # runAsUser 0, IPC_LOCK; the image's own user (uid 1000) would have no capability
    # effective. The pod template stays a valid Kubernetes PodTemplateSpec.
    for comp in _workers(graph_of(name)):
        c = main(comp)
        if not c["resources"]["limits"].get("vpc.amazonaws.com/efa"):
            assert "runAsUser" not in (c.get("securityContext") or {}), comp["name"]
            continue
        ctx = c["securityContext"]
        assert ctx["privileged"] is True and ctx["runAsUser"] == 0, comp["name"]
        assert "IPC_LOCK" in ctx["capabilities"]["add"]
        validate_builtin({"apiVersion": "v1", "kind": "PodTemplate",
                          "metadata": {"name": comp["name"].lower()},
                          "template": comp["podTemplate"]})


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


# --- the pinning shell, run for real, against a fake filesystem ---------------------------

UUIDS = ("GPU-4b1c2d3e-0000-1111-2222-333344445555", "GPU-9f8e7d6c-0000-1111-2222-333344445555")


def _node(tmp_path: Path, *, gpus: int = 8, mounts: tuple[str, ...] = ()) -> list[str]:
    """A fake node as a container sees it: `gpus` device nodes under dev/ (a privileged
    container sees all of the node's), the plugin's volume-mount entries under list/ (files
    bind-mounted from /dev/null), and a `python3` on PATH that prints what the worker would
    start with. Returns the pinned command for these directories."""
    dev, listing, bin_dir = tmp_path / "dev", tmp_path / "list", tmp_path / "bin"
    for d in (dev, listing, bin_dir):
        d.mkdir()
    for i in range(gpus):
        (dev / f"nvidia{i}").touch()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-modeset"):
        (dev / name).touch()        # not GPUs: the count must skip them
    for m in mounts:
        (listing / m).touch()
    exe = bin_dir / "python3"
    exe.write_text('#!/bin/sh\necho "CUDA=$CUDA_VISIBLE_DEVICES"\n'
                   'echo "ORDER=$CUDA_DEVICE_ORDER"\necho "SOURCE=$DYNAMO_BENCH_GPU_SOURCE"\n'
                   'echo "LD=$LD_LIBRARY_PATH"\necho "ARGV=$*"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return efa.pinned_command(efa.pin_gpus_script(device_list_dir=str(listing),
                                                  dev_dir=str(dev)))


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
            "LD_LIBRARY_PATH": "/usr/local/cuda/lib64", **extra}


def _run(cmd: list[str], env: dict[str, str], shell: str = "/bin/sh"
         ) -> subprocess.CompletedProcess:
    return subprocess.run([shell, *cmd[1:], "--model", "Qwen/Qwen3-30B-A3B"], env=env,
                          capture_output=True, text=True, timeout=30)


def _started(out: subprocess.CompletedProcess) -> dict[str, str]:
    assert out.returncode == 0, out.stderr
    return dict(line.split("=", 1) for line in out.stdout.splitlines())


SHELLS = [s for s in ("/bin/sh", "/usr/bin/dash", "/bin/bash") if Path(s).exists()]


@pytest.mark.parametrize("shell", SHELLS)
def test_pinning_shell_takes_the_envvar_answer_of_our_own_plugin(tmp_path, shell):
    # node groups: k8s-device-plugin v0.18.0, envvar strategy, UUIDs
    cmd = _node(tmp_path)
    out = _run(cmd, _env(tmp_path, NVIDIA_VISIBLE_DEVICES=",".join(UUIDS),
                         DYNAMO_BENCH_GPUS="2"), shell)
    lines = _started(out)
    assert lines["CUDA"] == ",".join(UUIDS) and lines["SOURCE"] == "envvar"
    assert lines["ORDER"] == "PCI_BUS_ID"
    assert lines["LD"] == f"{efa.EFA_LIBRARY_PATH}:/usr/local/cuda/lib64"
    assert lines["ARGV"] == "-m dynamo.vllm --model Qwen/Qwen3-30B-A3B"
    assert "pinned from the device plugin's envvar answer" in out.stderr


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("visible", ["/var/run/nvidia-container-devices", "all", None])
def test_pinning_shell_takes_the_volume_mounts_answer_of_bottlerocket(tmp_path, shell,
                                                                      visible):
    # Auto Mode (Bottlerocket defaults volume-mounts + index): the plugin sets the env to the
    # directory (or the image's `all` stays) and mounts one entry per allocated GPU; the
    # container itself sees all 8 device nodes
    cmd = _node(tmp_path, gpus=8, mounts=("4", "5", "6", "7"))
    env = _env(tmp_path, DYNAMO_BENCH_GPUS="4")
    if visible is not None:
        env["NVIDIA_VISIBLE_DEVICES"] = visible
    lines = _started(_run(cmd, env, shell))
    assert lines["CUDA"] == "4,5,6,7" and lines["SOURCE"] == "volume-mounts"
    assert lines["ORDER"] == "PCI_BUS_ID"     # indices mean NVML's (PCI bus) order


def test_pinning_shell_uses_the_whole_node_only_when_the_pod_asked_for_all_of_it(tmp_path):
    cmd = _node(tmp_path, gpus=4)
    lines = _started(_run(cmd, _env(tmp_path, NVIDIA_VISIBLE_DEVICES="all",
                                    DYNAMO_BENCH_GPUS="4")))
    assert lines["CUDA"] == "0,1,2,3" and lines["SOURCE"] == "whole-node"


@pytest.mark.parametrize("visible", [None, "", "all", "void", "none",
                                     "/var/run/nvidia-container-devices"])
def test_pinning_shell_refuses_when_the_plugins_gpus_cannot_be_told(tmp_path, visible):
    # 2 of 8 GPUs asked for, and neither the env nor a mount names them
    cmd = _node(tmp_path, gpus=8)
    env = _env(tmp_path, DYNAMO_BENCH_GPUS="2")
    if visible is not None:
        env["NVIDIA_VISIBLE_DEVICES"] = visible
    out = _run(cmd, env)
    assert out.returncode == efa.NO_GPUS_EXIT
    assert "refusing to start" in out.stderr and "k8s-device-plugin#336" in out.stderr
    assert "8 GPU(s) on the node for a request of 2" in out.stderr
    assert "CUDA=" not in out.stdout


@pytest.mark.parametrize(("visible", "mounts"), [(",".join(UUIDS), ()), (None, ("0",))])
def test_pinning_shell_refuses_a_plugin_answer_of_another_size_than_the_request(
        tmp_path, visible, mounts):
    cmd = _node(tmp_path, mounts=mounts)
    env = _env(tmp_path, DYNAMO_BENCH_GPUS="4")
    if visible is not None:
        env["NVIDIA_VISIBLE_DEVICES"] = visible
    out = _run(cmd, env)
    assert out.returncode == efa.NO_GPUS_EXIT
    assert "for a request of 4" in out.stderr and "CUDA=" not in out.stdout


def test_every_efa_worker_tells_the_shell_its_gpu_request():
    for name in AWS:
        for comp in _workers(graph_of(name)):
            c = main(comp)
            if c["command"] != efa.pinned_command():
                continue
            want = c["resources"]["limits"]["nvidia.com/gpu"]
            assert env_of(c)[efa.GPU_COUNT_ENV] == want, (name, comp["name"])
