"""Which catalogue instance types are known to support GPUDirect RDMA over EFA, with the source.

NIXL's LIBFABRIC backend moves KV between GPUs across nodes by registering GPU memory with the
EFA device ("With EFA, Dynamo's prefill and decode workers transfer KV cache directly between
GPUs across nodes via GPU-Direct RDMA", ai-dynamo/dynamo docs/kubernetes/cloud-providers/eks/
efa.md; FI_EFA_USE_DEVICE_RDMA=1 there). EFA RDMA read/write support is per instance type
(AWS EC2 User Guide, "Elastic Fabric Adapter": "RDMA read is supported on all instances with
Nitro version 4 and later", per-type table). A type missing here is not confirmed: pre-flight
refuses nixl-libfabric on it, and such a worker moves KV with nixl-ucx over TCP (KV staged
through host memory, `kv_buffer_device: cpu`), a path that needs no RDMA.
"""

from __future__ import annotations

_EFA_GUIDE = "ai-dynamo/dynamo docs/kubernetes/cloud-providers/eks/efa.md (recommended types)"
_P4 = ("AWS P4d launch: 400 Gbps EFA with NVIDIA GPUDirect RDMA (FI_EFA_USE_DEVICE_RDMA=1 "
       "was introduced for p4d.24xlarge)")

GPUDIRECT_RDMA: dict[str, str] = {
    "p4d.24xlarge": _P4,
    "p4de.24xlarge": _P4,
    "p5.48xlarge": _EFA_GUIDE,
    "p6-b200.48xlarge": _EFA_GUIDE,
}
# g6e (L40S): EFA interfaces from g6e.8xlarge up, but no source here confirms GPUDirect RDMA.


def has_gpudirect_rdma(instance_type: str) -> bool:
    return instance_type in GPUDIRECT_RDMA
