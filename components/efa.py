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
  0-3. The NVIDIA device plugin (v0.18.0, internal/plugin/server.go: deviceListEnvVar =
  "NVIDIA_VISIBLE_DEVICES", default --device-list-strategy envvar, --device-id-strategy uuid)
  puts the allocated GPUs' UUIDs in NVIDIA_VISIBLE_DEVICES; the worker is started through a
  small shell that copies them into CUDA_VISIBLE_DEVICES (CUDA accepts GPU UUIDs there), so the
  engine uses exactly its own GPUs, and refuses to start when the plugin named none.
  Kubernetes' $(VAR) expansion cannot do this: the plugin's variables are added by the kubelet
  after the pod spec's env is expanded. The Dynamo operator rewrites a vLLM worker's command
  only for multinode, GMS and elastic-EP workers (deploy/operator/internal/dynamo/
  backend_vllm.go, UpdateContainer), so multinode EFA workers are refused.
"""

from __future__ import annotations

import re
from typing import Any

from stacks.conventions.k8s_names import ZONE_LABEL

OFFICIAL_RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"
# Only the EFA worker pods carry this label: they require each other in one zone.
ZONE_GROUP_LABEL = "dynamo-bench.io/efa-zone-group"
EFA_TAG_SUFFIX = "-efa"
REQUIRED_ENV = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1",
                "FI_EFA_ENABLE_SHM_TRANSFER": "0", "FI_EFA_ENABLE_SHM": "0"}
EFA_LIBRARY_PATH = "/opt/amazon/efa/lib:/opt/amazon/efa/lib64:/opt/aws-ofi-nccl/lib"
CAPABILITIES = ("IPC_LOCK",)
WORKER_MODULE = ("python3", "-m", "dynamo.vllm")
# Exit code of the wrapper when the device plugin named no GPUs (EX_CONFIG of sysexits.h).
NO_GPUS_EXIT = 78

# $0 is the process name, "$@" the container's args (the worker flags).
PIN_GPUS_SCRIPT = f"""set -eu
case "${{NVIDIA_VISIBLE_DEVICES:-}}" in
  ""|all|none|void)
    echo "dynamo-bench: NVIDIA_VISIBLE_DEVICES='${{NVIDIA_VISIBLE_DEVICES:-}}': the NVIDIA \
device plugin named no GPUs for this pod, and a privileged container sees every GPU of its \
node; refusing to start (NVIDIA/k8s-device-plugin#336)" >&2
    exit {NO_GPUS_EXIT};;
esac
export CUDA_VISIBLE_DEVICES="$NVIDIA_VISIBLE_DEVICES"
export LD_LIBRARY_PATH="{EFA_LIBRARY_PATH}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
exec {" ".join(WORKER_MODULE)} "$@"
"""


def efa_runtime_image(image: str) -> str:
    """The EFA build of a runtime image: Dynamo's own `vllm-runtime:X.Y.Z` becomes
    `vllm-runtime:X.Y.Z-efa`; a tag already ending in -efa, a digest, a model build
    (`1.4.1-a.x-k2-post.1`) or another registry's image is used as given (it must carry the
    EFA userspace itself; the run-time attestation refuses a run whose workers did not
    instantiate LIBFABRIC)."""
    if "@sha256:" in image:
        return image
    repo, _, tag = image.rpartition(":")
    if repo == OFFICIAL_RUNTIME and re.fullmatch(r"\d+\.\d+\.\d+", tag):
        return f"{image}{EFA_TAG_SUFFIX}"
    return image


def pinned_command() -> list[str]:
    """The worker container's command: the GPU-pinning shell, then `python3 -m dynamo.vllm`
    with the container's args."""
    return ["/bin/sh", "-c", PIN_GPUS_SCRIPT, "dynamo-vllm"]


def security_context() -> dict[str, Any]:
    return {"privileged": True, "capabilities": {"add": list(CAPABILITIES)}}


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
