"""The bandwidth a disaggregated stack's KV transfer runs at, per path, from the links in
stacks/catalog/interconnects.py (pure arithmetic over the catalogue).

What DynoSim charges (ai-dynamo 1.6.1 dynamo.replay, the mocker's core; measured here by
tests/test_sim_kv_transfer.py): a request's decode starts `tokens x kv_transfer_bytes_per_token /
(kv_transfer_bandwidth x 1e9)` seconds after its prefill ends, per request, with no contention
between concurrent transfers. Both numbers are read from the PREFILL worker's engine (a bandwidth
given only to the decode worker charges nothing), and `kv_transfer_timing_mode
destination_missing` counts only the prompt tokens the decode worker does not already hold. That
is vLLM 0.31.0's NixlConnector: the decode side pulls `prompt tokens - num_computed_tokens`, its
own prefix-cache hits excluded (vllm/distributed/kv_transfer/kv_connector/v1/nixl/
pull_scheduler.py `get_num_new_matched_tokens`).

Ranks: each decode rank reads its KV slice from the prefill rank(s) holding it, all ranks at once
(vllm .../nixl/tp_mapping.py: a local rank reads from one source rank, or from several when the
prefill TP is larger), so a transfer is max(prefill TP, decode TP) rank-to-rank streams and its
bytes per token are the decode worker's whole KV per token (every rank's share, a KV head or an
MLA latent that TP replicates counted on each rank that holds it).

Paths (stacks/conventions/kv_path.py, the path the graph builds):
- nixl-libfabric: GPU to GPU over EFA with GPUDirect RDMA (ai-dynamo/dynamo docs/kubernetes/
  cloud-providers/eks/efa.md). NIXL's LIBFABRIC backend stripes over the EFA devices it sees,
  GPU-to-EFA topology aware (ai-dynamo/nixl src/plugins/libfabric/README.md: multi-rail), and a
  pod sees its share of the node's interfaces (components/graph.py `efa_devices`: interfaces x
  pod GPUs / node GPUs, at least one). The transfer runs at the smaller side's rails.
- nixl-ucx without an RDMA device: KV staged through host memory (`kv_buffer_device: cpu`) and
  sent over TCP, one flow per rank stream; each flow is held to EC2's single-flow limit across
  nodes, and the streams together to each pod's share of its node's network bandwidth.
- NVLink: no shipped stack's path. Prefill and decode are separate pods; LIBFABRIC moves over the
  EFA rails and UCX without RDMA over TCP, whether or not the two pods share a node; UCX's CUDA
  IPC between pods needs privileged, hostPID and hostIPC pods that see each other's GPUs, which
  no stack runs (stacks/conventions/kv_path.py says why, with the upstream issues). Its
  bandwidth is catalogued (interconnects.GPU_LINKS) for a path that would use it.
- nixl-ucx over InfiniBand (serving.rdma): no AWS instance type has it; not catalogued.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.catalog.interconnects import (
    FLOW_SOURCE,
    GBPS_TO_GB_S,
    INSTANCE_NETWORK,
    SAME_NODE_ASSUMPTION,
    SAME_NODE_FLOW_GBPS,
    SINGLE_FLOW_GBPS,
    SINGLE_FLOW_PLACEMENT_GROUP_GBPS,
)

LINE_RATE = ("line rate, no protocol overhead, and no contention between concurrent transfers "
             "(DynoSim charges each request the full bandwidth)")


class Placement(str, Enum):
    """Where a prefill pod and a decode pod sit relative to each other."""

    SAME_NODE = "same node"
    SAME_PLACEMENT_GROUP = "different nodes of one cluster placement group"
    APART = "different nodes, not in one cluster placement group"


@dataclass(frozen=True)
class Endpoint:
    """One side of a transfer: a worker pod."""

    instance_type: str
    tensor_parallel_size: int
    gpus_per_pod: int


@dataclass(frozen=True)
class Link:
    path: str              # "EFA (NIXL LIBFABRIC)" | "TCP (NIXL UCX, KV staged in host memory)"
    gb_s: float            # decimal GB/s for one prefill -> decode transfer, all ranks together
    detail: str            # how gb_s was reached, with the sources
    assumptions: tuple[str, ...] = ()


class UncataloguedLink(ValueError):
    """A path or instance type the catalogue has no bandwidth for."""


def _network(instance_type: str):
    links = INSTANCE_NETWORK.get(instance_type)
    if links is None:
        raise UncataloguedLink(f"no network bandwidth catalogued for {instance_type} "
                               "(stacks/catalog/interconnects.py INSTANCE_NETWORK)")
    return links


def efa_rails(instance_type: str, gpus_per_pod: int) -> int:
    """EFA interfaces one pod gets: its GPU share of the node's (components/graph.py
    efa_devices requests exactly this)."""
    inst = INSTANCE_TYPES[instance_type]
    return max(1, inst.efa_interfaces * gpus_per_pod // inst.gpus_per_node)


def streams(src: Endpoint, dst: Endpoint) -> int:
    """Rank-to-rank streams of one transfer (vLLM's NIXL TP mapping)."""
    return max(src.tensor_parallel_size, dst.tensor_parallel_size)


def efa_link(src: Endpoint, dst: Endpoint) -> Link:
    sides = []
    for end in (src, dst):
        net = _network(end.instance_type)
        if net.efa_interfaces == 0:
            raise UncataloguedLink(f"{end.instance_type} has no EFA: nixl-libfabric cannot run "
                                   "on it")
        rails = efa_rails(end.instance_type, end.gpus_per_pod)
        sides.append((rails * net.efa_gbps_per_interface, rails, net, end))
    gbps, rails, net, end = min(sides, key=lambda s: s[0])
    detail = (f"EFA: the {end.instance_type} pod's {rails} of {net.efa_interfaces} EFA "
              f"interfaces x {net.efa_gbps_per_interface:g} Gbps = {gbps:g} Gbps "
              f"({net.source})")
    return Link("EFA (NIXL LIBFABRIC)", gbps * GBPS_TO_GB_S, detail,
                (LINE_RATE, "a pair on one node is charged the same EFA rails (the LIBFABRIC "
                 "backend's device path; NVLink is not used)"))


def _nic_share_gbps(end: Endpoint) -> float:
    inst = INSTANCE_TYPES[end.instance_type]
    return _network(end.instance_type).network_gbps * end.gpus_per_pod / inst.gpus_per_node


def tcp_link(src: Endpoint, dst: Endpoint, placement: Placement) -> Link:
    n = streams(src, dst)
    assumptions = [LINE_RATE, "one TCP flow per rank stream (UCX's TCP transport, one "
                   "interface per pod)"]
    if placement == Placement.SAME_NODE:
        per_flow, bound = SAME_NODE_FLOW_GBPS, n * SAME_NODE_FLOW_GBPS
        assumptions.append(SAME_NODE_ASSUMPTION)
        detail = f"TCP on one node: {n} flows x {per_flow:g} Gbps"
    else:
        per_flow = (SINGLE_FLOW_PLACEMENT_GROUP_GBPS if placement == Placement.SAME_PLACEMENT_GROUP
                    else SINGLE_FLOW_GBPS)
        shares = {end.instance_type: _nic_share_gbps(end) for end in (src, dst)}
        bound = min(n * per_flow, *shares.values())
        nic = ", ".join(f"{t} pod's network share {g:g} Gbps" for t, g in shares.items())
        detail = (f"TCP across nodes ({placement.value}): {n} flows x {per_flow:g} Gbps "
                  f"({FLOW_SOURCE}), bounded by {nic}")
        assumptions.append("a pod gets its GPU share of its node's network bandwidth")
    return Link("TCP (NIXL UCX, KV staged in host memory)", bound * GBPS_TO_GB_S,
                f"{detail} = {bound:g} Gbps", tuple(assumptions))


def transfer_ms(tokens: int, bytes_per_token: int, gb_s: float) -> float:
    """What DynoSim charges a request whose decode worker lacks `tokens` prompt tokens."""
    return tokens * bytes_per_token / (gb_s * 1e9) * 1000
