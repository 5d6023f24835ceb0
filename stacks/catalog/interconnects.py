"""The links KV cache can move over, as data with their sources: each GPU's NVLink and host
(PCIe) link, each instance type's network and EFA interfaces, and EC2's per-flow TCP limits.
stacks/catalog/kv_transfer.py turns them into the bandwidth a disaggregated stack's KV transfer
runs at; the host links size the simulated host offload (workloads/sim/engine_setup.py).

Units: GB/s are decimal (10**9 bytes per second, what DynoSim's `--kv-transfer-bandwidth` and
`--host-offload-*-bandwidth-gbps` take: ai-dynamo 1.6.1 dynamo/mocker/args.py), Gbps decimal
bits. Datasheets give NVLink and PCIe as bidirectional totals; one direction is half of it, and a
KV copy moves one way. Every figure is a line rate: protocol overhead is not subtracted.
"""

from __future__ import annotations

from dataclasses import dataclass

GBPS_TO_GB_S = 1 / 8   # decimal gigabits per second -> decimal gigabytes per second


@dataclass(frozen=True)
class GpuLinks:
    nvlink_gb_s: float | None            # NVLink per GPU, both directions; None: no NVLink
    host_link: str                       # the GPU's own link to its host
    host_gb_s: float                     # that link, both directions
    source: str

    @property
    def host_gb_s_one_way(self) -> float:
        return self.host_gb_s / 2


_A100 = GpuLinks(600.0, "PCIe Gen4 x16", 64.0,
                 "NVIDIA A100 Tensor Core GPU datasheet (SXM4): NVIDIA NVLink 600 GB/s, "
                 "PCIe Gen4 64 GB/s")
# Keyed by stacks.catalog.instances Gpu.name.
GPU_LINKS: dict[str, GpuLinks] = {
    "A100-SXM4-40GB": _A100,
    "A100-SXM4-80GB": _A100,
    "H100-SXM5-80GB": GpuLinks(900.0, "PCIe Gen5 x16", 128.0,
                               "NVIDIA H100 Tensor Core GPU datasheet (SXM): NVLink 900 GB/s, "
                               "PCIe Gen5 128 GB/s"),
    "L40S": GpuLinks(None, "PCIe Gen4 x16", 64.0,
                     "NVIDIA L40S datasheet: Interconnect Interface PCIe Gen4 x16: 64 GB/s "
                     "bidirectional; no NVLink"),
    "B200": GpuLinks(1800.0, "PCIe Gen5 x16", 128.0,
                     "NVIDIA HGX B200 (DGX B200 datasheet): fifth-generation NVLink 1.8 TB/s per "
                     "GPU; host link PCIe Gen5 x16 (p6-b200's host CPUs are PCIe Gen5, AWS P6 "
                     "instances page), 128 GB/s both directions by the PCIe Gen5 x16 line rate"),
}


@dataclass(frozen=True)
class NetworkLinks:
    network_gbps: float                  # the instance's network bandwidth (all its cards)
    efa_interfaces: int
    efa_gbps_per_interface: float        # 0 without EFA
    source: str

    @property
    def efa_gbps(self) -> float:
        return self.efa_interfaces * self.efa_gbps_per_interface


_P4 = ("AWS EC2 P4 instances page: p4d/p4de.24xlarge 400 Gbps instance networking, EFA and "
       "GPUDirect RDMA (4 x 100 Gbps EFA interfaces, one per network card)")
_G6E = ("AWS EC2 G6e instances page (network bandwidth per size) and EC2 User Guide "
        "efa-acc-inst-types: G6e supports up to four network cards and up to 400 Gbps")
# Keyed by instance type; GPU instance types only (the CPU nodes move no KV).
INSTANCE_NETWORK: dict[str, NetworkLinks] = {
    "p4d.24xlarge": NetworkLinks(400.0, 4, 100.0, _P4),
    "p4de.24xlarge": NetworkLinks(400.0, 4, 100.0, _P4),
    "p5.48xlarge": NetworkLinks(3200.0, 32, 100.0,
                                "AWS EC2 P5 instances page and EC2 User Guide "
                                "efa-acc-inst-types: up to 32 network cards, 3,200 Gbps EFA"),
    "p6-b200.48xlarge": NetworkLinks(3200.0, 8, 400.0,
                                     "AWS EC2 P6 instances page: p6-b200.48xlarge 8 x 400 Gbps "
                                     "EFAv4 (3.2 Tbps)"),
    "g6e.4xlarge": NetworkLinks(20.0, 0, 0.0, f"{_G6E}; g6e.4xlarge up to 20 Gbps, no EFA"),
    "g6e.12xlarge": NetworkLinks(100.0, 1, 100.0, f"{_G6E}; g6e.12xlarge 100 Gbps, 1 EFA"),
    "g6e.48xlarge": NetworkLinks(400.0, 4, 100.0, f"{_G6E}; g6e.48xlarge 400 Gbps, 4 EFA"),
}

# One TCP flow (a 5-tuple) between two instances: EC2 User Guide, "Amazon EC2 instance network
# bandwidth", Single-flow traffic: "limited to 5 Gbps when instances are not in the same
# cluster placement group" and "up to 10 Gbps bandwidth for instances within the same placement
# group" (25 Gbps with ENA Express, which the project does not configure).
SINGLE_FLOW_GBPS = 5.0
SINGLE_FLOW_PLACEMENT_GROUP_GBPS = 10.0
FLOW_SOURCE = ("EC2 User Guide, Amazon EC2 instance network bandwidth: single-flow traffic "
               "5 Gbps outside a cluster placement group, 10 Gbps inside one")
# Two pods on one node talk TCP through the node's own pod network (the VPC CNI routes
# same-node pod traffic over veth pairs, never through the ENA), where EC2's per-flow limit does
# not apply and no AWS page gives a figure. ASSUMED: the in-placement-group single-flow rate.
SAME_NODE_FLOW_GBPS = SINGLE_FLOW_PLACEMENT_GROUP_GBPS
SAME_NODE_ASSUMPTION = (f"ASSUMED {SAME_NODE_FLOW_GBPS:g} Gbps per TCP flow between two pods of "
                        "one node (pod-to-pod traffic stays on the node's veth pairs, outside "
                        "EC2's per-flow limits; no source gives its rate: the cluster placement "
                        "group's single-flow figure stands in)")
