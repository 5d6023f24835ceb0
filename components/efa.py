"""What a worker pod needs to move KV over EFA with NIXL's LIBFABRIC backend (pure).

Sources, read at the versions the project pins:
- Dynamo's EKS EFA guide (ai-dynamo/dynamo docs/kubernetes/cloud-providers/eks/efa.md, the 1.6
  line) and its AWS recipe (recipes/qwen3-32b/vllm/cloud-providers/disagg-1p1d-aws-efa/
  deploy.yaml): an EFA-enabled runtime image (the `aws` stage with libfabric and aws-ofi-nccl,
  published as `vllm-runtime:<version>-efa` since 1.3.0, see docs/fern/components/
  releases.data.ts "EFA variants retagged from -efa-amd64 to -efa"); on every worker
  FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1, FI_EFA_ENABLE_SHM_TRANSFER=0, FI_EFA_ENABLE_SHM=0
  and the EFA libraries first in LD_LIBRARY_PATH; `vpc.amazonaws.com/efa` requested; and
  `privileged: true` plus IPC_LOCK ("privileged: true is required for NIXL to register CUDA
  VRAM with the EFA NIC via fi_mr_reg. IPC_LOCK alone is insufficient").
- A privileged container sees every GPU of its node, not only the ones the device plugin gave
  it (NVIDIA/k8s-device-plugin#336): two TP4 pods on one 8-GPU node would both start on GPUs
  0-3 (containerd gives a privileged container every host device, so /dev/nvidia* and
  nvidia-smi list the whole node too). The worker is started through a small shell that
  pins CUDA_VISIBLE_DEVICES to the GPUs the device plugin allocated, read from whichever way
  the plugin passed them (k8s-device-plugin internal/plugin/server.go, getAllocateResponse):
  * `envvar` (the plugin's default; the one this project installs on node groups, v0.18.0
    with --device-id-strategy uuid): NVIDIA_VISIBLE_DEVICES is the list of allocated IDs;
  * `volume-mounts` (Bottlerocket's default, so Auto Mode's, whose plugin is AWS's:
    bottlerocket.dev settings.kubelet-device-plugins.nvidia.device-list-strategy "Default:
    volume-mounts", device-id-strategy "Default: index"): NVIDIA_VISIBLE_DEVICES is the
    directory /var/run/nvidia-container-devices and every allocated ID is a mount under it
    (apiMounts: ContainerPath filepath.Join(deviceListAsVolumeMountsContainerPathRoot, id));
  * neither (a plugin passing CDI devices, the image's NVIDIA_VISIBLE_DEVICES=all left): the
    allocation cannot be read from inside, so the shell uses the node's GPUs only when the pod
    asked for all of them (then nobody else holds one), and otherwise refuses to start.
  CUDA accepts UUIDs or indices; with indices CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA number
  the GPUs as NVML and the plugin do (CUDA's default order is FASTEST_FIRST). The shell
  exports which way it pinned (DYNAMO_BENCH_GPU_SOURCE) and the runner's attestation checks it
  against the plugin's answer before load (workloads/attest/checks.check_gpus).
  Kubernetes' $(VAR) expansion cannot do this: the plugin's variables are added by the kubelet
  after the pod spec's env is expanded. The Dynamo operator rewrites a vLLM worker's command
  only for multinode, GMS and elastic-EP workers (deploy/operator/internal/dynamo/
  backend_vllm.go, UpdateContainer), so multinode EFA workers are refused.
"""

from __future__ import annotations

import re
from typing import Any

from stacks.conventions.k8s_names import (
    DEVICE_LIST_DIR,
    GPU_COUNT_ENV,
    GPU_SOURCE_ENV,
    ZONE_LABEL,
)

OFFICIAL_RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"
# Only the EFA worker pods carry this label: they require each other in one zone.
ZONE_GROUP_LABEL = "dynamo-bench.io/efa-zone-group"
EFA_TAG_SUFFIX = "-efa"
REQUIRED_ENV = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1",
                "FI_EFA_ENABLE_SHM_TRANSFER": "0", "FI_EFA_ENABLE_SHM": "0"}
EFA_LIBRARY_PATH = "/opt/amazon/efa/lib:/opt/amazon/efa/lib64:/opt/aws-ofi-nccl/lib"
CAPABILITIES = ("IPC_LOCK",)
WORKER_MODULE = ("python3", "-m", "dynamo.vllm")
# Exit code of the wrapper when it cannot tell the pod's GPUs (EX_CONFIG of sysexits.h).
NO_GPUS_EXIT = 78


def pin_gpus_script(*, device_list_dir: str = DEVICE_LIST_DIR, dev_dir: str = "/dev",
                    worker: tuple[str, ...] = WORKER_MODULE,
                    library_path: str = EFA_LIBRARY_PATH) -> str:
    """The worker's start shell (POSIX sh): pin the plugin's GPUs, put the EFA userspace first
    in LD_LIBRARY_PATH (`library_path`, components/efa_userspace.py), then exec the worker with
    the container's args ("$@"; $0 is the process name). The directories are parameters so
    the tests run the very script against a fake filesystem."""
    refuse = ("dynamo-bench: the NVIDIA device plugin's GPUs for this pod cannot be told "
              "($why), and a privileged container sees every GPU of its node; refusing to "
              "start (NVIDIA/k8s-device-plugin#336)")
    return f"""set -eu
want="${{{GPU_COUNT_ENV}:-}}" nvd="${{NVIDIA_VISIBLE_DEVICES:-}}" gpus="" source=""
refuse() {{ why="$1"; echo "{refuse}" >&2; exit {NO_GPUS_EXIT}; }}
for f in "{device_list_dir}"/*; do
  [ -e "$f" ] || continue
  gpus="${{gpus:+$gpus,}}${{f##*/}}" source=volume-mounts
done
if [ -z "$gpus" ]; then
  case "$nvd" in
    ""|all|none|void|/*) ;;
    *) gpus="$nvd" source=envvar;;
  esac
fi
if [ -z "$gpus" ]; then
  n=0
  for d in "{dev_dir}"/nvidia[0-9]*; do [ -e "$d" ] && n=$((n + 1)); done
  [ -n "$want" ] && [ "$n" -gt 0 ] && [ "$n" -eq "$want" ] || \
    refuse "NVIDIA_VISIBLE_DEVICES='$nvd', nothing under {device_list_dir}, $n GPU(s) on \
the node for a request of ${{want:-?}}"
  i=0
  while [ "$i" -lt "$n" ]; do gpus="${{gpus:+$gpus,}}$i"; i=$((i + 1)); done
  source=whole-node
fi
got=$(printf '%s' "$gpus" | tr ',' '\\n' | grep -c .)
[ -z "$want" ] || [ "$got" -eq "$want" ] || refuse "the plugin named $got GPU(s) ($gpus, \
$source) for a request of $want"
export CUDA_VISIBLE_DEVICES="$gpus" CUDA_DEVICE_ORDER=PCI_BUS_ID {GPU_SOURCE_ENV}="$source"
# root (security_context) may lift the memlock limit, as the B200 recipes' workers do
ulimit -l unlimited 2>/dev/null || true
export LD_LIBRARY_PATH="{library_path}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
echo "dynamo-bench: GPUs $gpus pinned from the device plugin's $source answer" >&2
exec {" ".join(worker)} "$@"
"""


PIN_GPUS_SCRIPT = pin_gpus_script()


def worker_env(gpus_per_pod: int) -> dict[str, str]:
    """The env of an EFA worker: libfabric's settings and the GPU count the shell checks."""
    return {**REQUIRED_ENV, GPU_COUNT_ENV: str(gpus_per_pod)}


def efa_runtime_image(image: str) -> str:
    """The EFA build of a runtime image: Dynamo's own `vllm-runtime:X.Y.Z` becomes
    `vllm-runtime:X.Y.Z-efa`; a tag already ending in -efa, a digest, a model build
    (`1.4.1-a.x-k2-post.1`) or another registry's image is used as given: an -efa build
    carries the EFA userspace, anything else gets a donor's (serving.efaUserspaceImage,
    components/efa_userspace.py), or pre-flight refuses the stack."""
    if "@sha256:" in image:
        return image
    repo, _, tag = image.rpartition(":")
    if repo == OFFICIAL_RUNTIME and re.fullmatch(r"\d+\.\d+\.\d+", tag):
        return f"{image}{EFA_TAG_SUFFIX}"
    return image


def pinned_command(script: str = PIN_GPUS_SCRIPT) -> list[str]:
    """The worker container's command: the GPU-pinning shell, then `python3 -m dynamo.vllm`
    with the container's args."""
    return ["/bin/sh", "-c", script, "dynamo-vllm"]


def security_context() -> dict[str, Any]:
    """Privileged and root, as Dynamo's own EFA manifests run their workers: the AWS EFA recipe
    (ai-dynamo/dynamo recipes/qwen3-32b/vllm/cloud-providers/disagg-1p1d-aws-efa/deploy.yaml
    @3bff4336: `privileged: true, runAsUser: 0, capabilities: add: [IPC_LOCK, SYS_PTRACE]`)
    and every B200 recipe worker (`runAsUser: 0`, IPC_LOCK, SYS_RESOURCE, `ulimit -l
    unlimited`). The runtime images end with `USER dynamo` (uid 1000; container/templates/
    aws.Dockerfile), and a non-root process has none of the added capabilities effective, so
    libfabric's memory registration (ibv_reg_mr pins pages; the kernel lifts RLIMIT_MEMLOCK
    only for CAP_IPC_LOCK) would be bounded by whatever memlock limit containerd passes."""
    return {"privileged": True, "runAsUser": 0, "capabilities": {"add": list(CAPABILITIES)}}


def one_zone_affinity(graph: str, zone: str | None) -> dict[str, Any]:
    """EFA traffic does not cross AZs: every EFA worker of the graph joins the first one's zone
    (the first pod matches its own selector, which the scheduler accepts), pinned to the node
    group's zone when it has one."""
    affinity: dict[str, Any] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuring"
                                                "Execution": [{
        "labelSelector": {"matchLabels": {ZONE_GROUP_LABEL: graph}},
        "topologyKey": ZONE_LABEL}]}}
    if zone:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{
                "key": ZONE_LABEL, "operator": "In", "values": [zone]}]}]}}
    return affinity
