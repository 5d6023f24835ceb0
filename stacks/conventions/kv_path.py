"""How a disaggregated stack's KV gets from prefill to decode on a cluster (pure): one rule that
pre-flight names and refuses by, the graph builds and the attestation holds the workers to.

The paths, and the upstream facts each stands on (docs/b200-recipes.md has the whole argument):
- `efa-image`: NIXL LIBFABRIC on a Dynamo `-efa` runtime. Its `aws` stage runs the AWS EFA
  installer on top of the runtime stage ("extends the runtime/dev stage with AWS EFA installer
  which includes: libfabric and aws-ofi-nccl"), writes `/opt/amazon/efa/lib` to ld.so.conf and
  LD_LIBRARY_PATH and checks `/opt/amazon/efa/bin/fi_info --version` (ai-dynamo/dynamo
  container/templates/aws.Dockerfile@141939f3): libfabric, its efa provider and fi_info live
  under EFA_HOME. Published as `vllm-runtime:<version>-efa` since 1.3.0 (releases.data.ts
  "EFA variants retagged from -efa-amd64 to -efa").
- `efa-donor`: NIXL LIBFABRIC on an image without that userspace: the recipe model builds
  (`1.4.1-a.x-k2-post.1`, ...) are the runtime stage only, which copies NIXL (built with
  `-Dlibfabric_path=/usr/local/libfabric`) but not /usr/local/libfabric (vllm_runtime.Dockerfile,
  wheel_builder.Dockerfile @009d786f), and NIXL's LIBFABRIC plugin NEEDs libfabric.so.1
  (dynamo.md F2). The EFA userspace of a Dynamo `-efa` runtime (`serving.efaUserspaceImage`)
  is copied into a pod-local volume by an init container and loaded by the worker from there
  (components/efa_userspace.py); the `libfabric-check` init container first loads it with the
  worker's own loader and lists the efa provider (`fi_info -p efa`).
- `ucx-infiniband`: NIXL UCX with RDMA devices (serving.rdma; InfiniBand clusters only).
- `ucx-tcp`: NIXL UCX without RDMA devices: the KV staged through host memory over TCP.
- `none`: aggregated, nothing moves. `missing`: LIBFABRIC on an image without the EFA userspace
  and no donor: NIXL would skip the plugin and vLLM fail at register_memory; pre-flight refuses.

Not a path: NIXL UCX over CUDA IPC between pods of one node. Legacy CUDA IPC handles do not
cross PID namespaces (openucx/ucx#11514, merged: "Legacy CUDA IPC handles cannot be exchanged
across PID namespaces"; POSIX-FD handles are refused likewise, openucx/ucx#11978); on
Kubernetes it takes privileged + hostPID + hostIPC pods that see each other's GPUs
(vllm-project/vllm#52607: without hostPID `cudaIpcOpenMemHandle` returns invalid device
context, without the peer GPU visible invalid argument), and otherwise UCX silently falls back
to TCP (vllm-project/vllm#55906, vLLM 0.28.0: "TCP software emulation"). That gives up the GPU
isolation the attestation checks (each worker on its own GPUs), so no stack uses it.
"""

from __future__ import annotations

import re
from enum import Enum

from stacks.config.schema import ServingConfig, Topology, TransferBackend

# Where the AWS EFA installer puts libfabric, its providers and fi_info in a Dynamo -efa image.
EFA_HOME = "/opt/amazon/efa"
# Where a donor's EFA userspace is mounted, in the copying init container and in the worker.
DONOR_HOME = "/opt/dynamo-bench/efa"
OFFICIAL_RUNTIMES = ("nvcr.io/nvidia/ai-dynamo/vllm-runtime",
                     "nvcr.io/nvidia/ai-dynamo/sglang-runtime",
                     "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime")
_VERSION = re.compile(r"\d+\.\d+\.\d+")


class KvPath(str, Enum):
    NONE = "none"
    EFA_IMAGE = "efa-image"
    EFA_DONOR = "efa-donor"
    UCX_INFINIBAND = "ucx-infiniband"
    UCX_TCP = "ucx-tcp"
    MISSING = "missing"


def image_tag(image: str) -> str:
    """The tag of an image reference ('' when it is pinned by digest only)."""
    name = image.partition("@")[0]
    return name.rsplit("/", 1)[-1].partition(":")[2]


def runs_an_efa_build(image: str) -> bool:
    """Whether the graph runs this image as a Dynamo EFA build: a tag ending in `-efa`, or
    Dynamo's own `vllm-runtime:X.Y.Z`, which components/efa.py `efa_runtime_image` turns into
    `X.Y.Z-efa`."""
    repo = image.partition("@")[0].rpartition(":")[0]
    tag = image_tag(image)
    return tag.endswith("-efa") or (repo == OFFICIAL_RUNTIMES[0] and
                                    _VERSION.fullmatch(tag) is not None)


def kv_path(serving: ServingConfig) -> KvPath:
    if serving.topology != Topology.DISAGGREGATED or serving.transfer == TransferBackend.NONE:
        return KvPath.NONE
    if serving.transfer == TransferBackend.NIXL_UCX:
        return KvPath.UCX_INFINIBAND if serving.rdma is not None else KvPath.UCX_TCP
    if runs_an_efa_build(serving.image):
        return KvPath.EFA_IMAGE
    return KvPath.EFA_DONOR if serving.efa_userspace_image else KvPath.MISSING


def libfabric_home(serving: ServingConfig) -> str | None:
    """Where the workers' libfabric (lib/), its providers (lib/libfabric/) and fi_info (bin/)
    are: the image's own EFA_HOME or the donor's copy; None off the LIBFABRIC paths."""
    return {KvPath.EFA_IMAGE: EFA_HOME, KvPath.EFA_DONOR: DONOR_HOME}.get(kv_path(serving))


def release_line(version: str) -> str | None:
    """`major.minor` of the Dynamo version a version or image tag starts with, else None."""
    m = re.match(r"(\d+)\.(\d+)\.\d+", version)
    return f"{m[1]}.{m[2]}" if m else None


def describe(serving: ServingConfig) -> str:
    """One line naming the path, for pre-flight and the docs."""
    path = kv_path(serving)
    if path == KvPath.EFA_IMAGE:
        return (f"NIXL LIBFABRIC over EFA with the image's own EFA userspace ({EFA_HOME}); "
                "libfabric-check loads it and lists the efa provider before the engine starts")
    if path == KvPath.EFA_DONOR:
        return (f"NIXL LIBFABRIC over EFA with the EFA userspace of "
                f"{serving.efa_userspace_image} (init container efa-userspace copies "
                f"{EFA_HOME} and what libfabric links into {DONOR_HOME}; libfabric-check "
                "loads it in the worker's image and lists the efa provider before the "
                "engine starts)")
    if path == KvPath.UCX_INFINIBAND:
        assert serving.rdma is not None
        return f"NIXL UCX over InfiniBand ({serving.rdma.resource_name.value})"
    if path == KvPath.UCX_TCP:
        return "NIXL UCX over TCP, the KV staged through host memory (no RDMA device)"
    if path == KvPath.MISSING:
        return f"none: NIXL LIBFABRIC on {serving.image}, which carries no EFA userspace"
    return "none (aggregated: no KV moves between workers)"
