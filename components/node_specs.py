"""Pure builders for the cluster's compute: subnet plan, AZ choice, launch-template pieces
and device-plugin chart values (EKS Auto Mode NodeClass/NodePool objects:
components/auto_mode_specs.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from components.conventions import (
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    NODE_GROUP_LABEL,
)
from components.placement import INSTANCE_TYPE_LABEL, catalogue_gpu_types, gpu_instance_type_term
from stacks.catalog.eks_zones import SOURCE as EKS_ZONES_SOURCE
from stacks.catalog.eks_zones import refused_zone_ids
from stacks.catalog.instances import INSTANCE_TYPES, InstanceType
from stacks.config.schema import CapacityType, NodeGroup, StackConfig
from stacks.conventions.efa_groups import uses_efa

# EKS managed node group AMI types (AL2023; the NVIDIA variant ships driver + container toolkit).
AMI_GPU = "AL2023_x86_64_NVIDIA"
AMI_CPU = "AL2023_x86_64_STANDARD"
ROOT_DEVICE = "/dev/xvda"

# EKS API spellings of the node group capacity type and of the taint effect.
_MNG_CAPACITY = {CapacityType.ON_DEMAND: "ON_DEMAND", CapacityType.SPOT: "SPOT",
                 CapacityType.RESERVATION: "ON_DEMAND",
                 CapacityType.CAPACITY_BLOCK: "CAPACITY_BLOCK"}
_EKS_TAINT_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE",
                     "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


def instance_of(group: NodeGroup) -> InstanceType:
    return INSTANCE_TYPES[group.instance_type]


def is_gpu(group: NodeGroup) -> bool:
    return instance_of(group).gpu is not None


def pinned_zone(group: NodeGroup, stack: StackConfig, zones: Sequence[str]) -> str | None:
    """The one AZ a group must live in: its own setting, or the first AZ when EFA or a
    capacity reservation needs one; None when it may spread over all private subnets.
    `zones`: the AZs that have a private subnet, in preference order."""
    if group.availability_zone:
        if group.availability_zone not in zones:
            raise ValueError(f"node group '{group.name}' is pinned to {group.availability_zone}"
                             f", which has no private subnet here ({zones}): fix "
                             "cluster.nodeGroups[].availabilityZone")
        return group.availability_zone
    if uses_efa(group, stack) or group.capacity_reservation_id:
        return zones[0]
    if not is_gpu(group):
        # The CPU group joins the GPU groups' one zone: the frontend and the load generator
        # run on it, and side by side they must not compete for the one CPU node that
        # happens to sit in the workers' zone (aws.md S1, runner.md R5).
        gpu = {pinned_zone(g, stack, zones) for g in stack.cluster.node_groups if is_gpu(g)}
        if len(gpu) == 1:
            return gpu.pop()
    return None


def eks_usable_zones(names: Sequence[str], zone_ids: Sequence[str], region: str,
                     pinned: Sequence[str] = ()) -> list[str]:
    """The region's zone names whose zone IDs EKS accepts for cluster subnets (names map to IDs
    per account, so only the account's getAvailabilityZones answer can say; the refused IDs:
    stacks/catalog/eks_zones.py). A node group pinned to a refused zone is an error naming it."""
    refused = set(refused_zone_ids(region))
    by_name = dict(zip(names, zone_ids, strict=True))
    bad = sorted(z for z in set(pinned) if by_name.get(z) in refused)
    if bad:
        raise ValueError(f"availabilityZone {bad} is zone ID "
                         f"{sorted(by_name[z] for z in bad)} in this account, where EKS refuses "
                         f"cluster subnets ({EKS_ZONES_SOURCE}): fix "
                         "cluster.nodeGroups[].availabilityZone (use one of "
                         f"{[n for n in names if by_name[n] not in refused]})")
    return [n for n in names if by_name[n] not in refused]


def choose_zones(available: Sequence[str], count: int, pinned: list[str]) -> list[str]:
    """`count` AZs for the VPC: the ones node groups pin first, then the region's others."""
    unknown = sorted(set(pinned) - set(available))
    if unknown:
        raise ValueError(f"availabilityZone {unknown} is not in this region's zones "
                         f"{available}: fix cluster.nodeGroups[].availabilityZone")
    chosen = list(dict.fromkeys(pinned))
    chosen += [z for z in available if z not in chosen]
    return chosen[:max(count, len(set(pinned)))]


@dataclass(frozen=True)
class SubnetPlan:
    zone: str
    private_cidr: str
    public_cidr: str


def subnet_plan(vpc_cidr: str, zones: list[str]) -> list[SubnetPlan]:
    """Private subnets of 1/8 of the VPC each (room for many pod IPs); public subnets (NAT
    only) small, carved from the last eighth."""
    net = ipaddress.ip_network(vpc_cidr)
    if len(zones) > 7:
        raise ValueError("at most 7 availability zones fit the subnet plan")
    eighths: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = list(
        net.subnets(prefixlen_diff=3))
    public = list(eighths[7].subnets(prefixlen_diff=3))
    return [SubnetPlan(z, str(eighths[i]), str(public[i])) for i, z in enumerate(zones)]


# --- managed node groups ----------------------------------------------------------------------

def node_labels(group: NodeGroup) -> dict[str, str]:
    return {NODE_GROUP_LABEL: group.name}


def node_group_taints(group: NodeGroup) -> list[dict[str, str]]:
    if not is_gpu(group):
        return []
    return [{"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE,
             "effect": _EKS_TAINT_EFFECT[GPU_TAINT_EFFECT]}]


def managed_capacity_type(group: NodeGroup) -> str:
    return _MNG_CAPACITY[group.capacity_type]


def scaling(group: NodeGroup, nodes: int | None = None) -> dict[str, int]:
    """Fixed size: a benchmark must not have nodes come and go under it (min = desired). A
    campaign sets `nodes` below the group's count (0 when no scheduled variant uses it); the
    count stays the maximum. EKS needs max >= 1."""
    nodes = group.count if nodes is None else nodes
    return {"min_size": nodes, "desired_size": nodes, "max_size": max(1, group.count)}


def efa_network_interfaces(inst: InstanceType, security_group_id: object) -> list[dict]:
    """One EFA interface per network card: card 0 the primary (`efa`, ENA + EFA, device index
    0), the others `efa-only` at device index 1, which hold no private IP (EKS user guide
    device-management-efa.adoc, "Conserving IP address allocation": "use `efa-only` for all
    interfaces except the primary"; pulumi-eks nodejs/eks/nodes/instances.ts
    getEfaNetworkInterfaces does the same). The EFA device count per node is unchanged."""
    return [{"network_card_index": card, "device_index": 0 if card == 0 else 1,
             "interface_type": "efa" if card == 0 else "efa-only",
             "delete_on_termination": "true", "security_groups": [security_group_id]}
            for card in range(inst.efa_interfaces)]


def capacity_reservation_args(group: NodeGroup) -> dict:
    """Launch-template arguments that put nodes into the group's reservation / capacity block.

    A capacity block's instance type lives in the launch template: EKS "make[s] sure that the
    LaunchTemplateData includes ... InstanceMarketOptions MarketType capacity-block ...
    CapacityReservationTarget ... InstanceType set to an instance type that supports Capacity
    Blocks ... If the capacity type isn't set to CAPACITY_BLOCK or any of the other above
    required launch template values are missing, then the create request will be rejected"
    (awsdocs/amazon-eks-user-guide latest/ug/ml/capacity-blocks-mng.adoc); the node group then
    names no instance types (managed_instance_types).
    """
    if not group.capacity_reservation_id:
        return {}
    args: dict = {"capacity_reservation_specification": {
        "capacity_reservation_target": {"capacity_reservation_id": group.capacity_reservation_id}}}
    if group.capacity_type == CapacityType.CAPACITY_BLOCK:
        args["instance_market_options"] = {"market_type": "capacity-block"}
        args["instance_type"] = group.instance_type
    return args


def managed_instance_types(group: NodeGroup) -> list[str] | None:
    """The node group's instanceTypes: none when the launch template carries the type (a
    capacity block, capacity_reservation_args). EKS takes it from one place only: "If however,
    you specify an instance type in your launch template and specify any instanceTypes, the
    node group deployment will fail" (EKS CreateNodegroup API, instanceTypes; botocore's eks
    model as installed)."""
    if group.capacity_type == CapacityType.CAPACITY_BLOCK and group.capacity_reservation_id:
        return None
    return [group.instance_type]


def needs_placement_group(group: NodeGroup, stack: StackConfig) -> bool:
    """A cluster placement group for EFA nodes, except inside a reservation: a capacity block
    already gives "low-latency, high-throughput network connectivity between the instances
    inside the Capacity Block, so there is no need to use a cluster placement group" (EC2 user
    guide, capacity-blocks-using), and capacity reserved for a cluster placement group must be
    reserved in that group ("we recommend that you reserve capacity explicitly in the cluster
    placement group", EC2 user guide, limitations-placement-groups): a group this program has
    just created holds no reservation, so its nodes could not use the one they target."""
    return uses_efa(group, stack) and not group.capacity_reservation_id


def root_volume(group: NodeGroup) -> list[dict]:
    return [{"device_name": ROOT_DEVICE,
             "ebs": {"volume_size": group.disk_gib, "volume_type": "gp3", "encrypted": "true",
                     "delete_on_termination": "true"}}]


# IMDSv2 only, and one hop: the node itself reaches instance metadata (and its role), a pod
# one network hop behind it does not. Nothing here needs it from a pod: the CSI drivers get
# their roles from EKS Pod Identity and the EBS CSI node plugin falls back to the Kubernetes
# API for its metadata (EKS best practices, Security: "Restrict the use of IMDS", hop limit 1;
# the EKS-optimized launch template default of 2 is meant for IRSA-less pods).
IMDSV2_REQUIRED = {"http_endpoint": "enabled", "http_tokens": "required",
                   "http_put_response_hop_limit": 1}


# --- device plugins (node group mode only: Auto Mode ships both) ---------------------------

def _gpu_toleration() -> dict:
    return {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}


def nvidia_device_plugin_values() -> dict:
    """Run on every catalogue GPU instance type (extra groups of variants included); no NFD:
    the chart's default affinity waits for NFD labels the EKS GPU AMI does not set."""
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [gpu_instance_type_term()]}}},
        "tolerations": [_gpu_toleration()],
        "nfd": {"enabled": False}, "gfd": {"enabled": False},
    }


def efa_device_plugin_values() -> dict:
    """Advertise `vpc.amazonaws.com/efa` on the GPU nodes (tainted, so tolerate the taint)."""
    return {"tolerations": [_gpu_toleration()],
            "supportedInstanceLabels": {"keys": [INSTANCE_TYPE_LABEL],
                                        "values": catalogue_gpu_types(efa=True)}}

