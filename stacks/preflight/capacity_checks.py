"""Capacity, offerings and quotas (pure; aws.md R3, R7): what the account says, judged.

The facts come from the account (workloads/targets/aws/account_facts.py asks EC2 and Service
Quotas with the deployer's credentials); offline only what the catalogue knows is judged:
- offerings: a group pinned to a zone where EC2 does not offer its type is refused (EKS's
  EFA guide: "Determine which Availability Zones that the instance type that you want to
  deploy is available in ... aws ec2 describe-instance-type-offerings",
  awsdocs/amazon-eks-user-guide latest/ug/ml/node-efa.adoc);
- vCPU quotas: the vCPUs the stack's groups run per quota, against the account's value, as a
  warning with the numbers (a quota can be raised, and other running instances count too);
- on-demand capacity of Capacity Block types (p6-b200, p5*, p4d*): a warning;
- regional VPC / internet gateway / Elastic IP quotas (5 each by default): a warning when the
  stacks that own a cluster in one region would reach them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from stacks.catalog.aws_quotas import (
    CAPACITY_BLOCK_FAMILIES,
    ON_DEMAND_VCPUS,
    REGIONAL,
    SPOT_VCPUS,
    Quota,
    family_letter,
)
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.errors import Problem
from stacks.config.schema import CapacityType, ClusterConfig, StackConfig
from stacks.config.stack_file import PROJECT

P = f"{PROJECT}:"


def vcpu_quota(instance_type: str, capacity: CapacityType) -> Quota | None:
    """The vCPU quota a running node of this type counts against (None for a capacity block,
    which is its own purchased capacity)."""
    if capacity == CapacityType.CAPACITY_BLOCK:
        return None
    table = SPOT_VCPUS if capacity == CapacityType.SPOT else ON_DEMAND_VCPUS
    return table[family_letter(instance_type)]


def vcpu_demand(cluster: ClusterConfig) -> dict[Quota, int]:
    """vCPUs each quota must allow for every node of the cluster's groups at its count."""
    out: Counter[Quota] = Counter()
    for g in cluster.node_groups:
        quota = vcpu_quota(g.instance_type, g.capacity_type)
        if quota is not None and g.instance_type in INSTANCE_TYPES:
            out[quota] += INSTANCE_TYPES[g.instance_type].vcpus * g.count
    return dict(out)


def quota_notes(cluster: ClusterConfig, region: str, quotas: Mapping[str, float],
                usage: Mapping[str, int] | None = None) -> list[str]:
    """A warning per vCPU quota (by code in `quotas`) the cluster's nodes, on top of the vCPUs
    already in use under it (`usage` by code, from the account), would exceed."""
    out = []
    for quota, need in sorted(vcpu_demand(cluster).items(), key=lambda kv: kv[0].code):
        have = quotas.get(quota.code)
        used = (usage or {}).get(quota.code, 0)
        if have is not None and need + used > have:
            out.append(f"WARNING: the node groups need {need} vCPUs under '{quota.name}' "
                       f"({quota.code}), {used} are in use there already, and the account's "
                       f"quota in {region} is {have:g}: EC2 would refuse the launches "
                       "(VcpuLimitExceeded) -> request an increase (aws service-quotas "
                       f"request-service-quota-increase --service-code {quota.service} "
                       f"--quota-code {quota.code} --desired-value {need + used})")
    return out


def offering_problems(stack: StackConfig, offerings: Mapping[str, Iterable[str]]) -> list[Problem]:
    """Groups pinned to a zone whose offerings (type -> zones EC2 offers it in) lack the type."""
    out = []
    for i, g in enumerate(stack.cluster.node_groups):
        zones = offerings.get(g.instance_type)
        if g.availability_zone is None or zones is None:
            continue
        zones = sorted(zones)
        if g.availability_zone not in zones:
            out.append(Problem(f"{P}cluster.nodeGroups[{i}].availabilityZone",
                               f"EC2 does not offer {g.instance_type} in {g.availability_zone} "
                               f"for this account (DescribeInstanceTypeOfferings)",
                               f"use a zone that offers it: {', '.join(zones) or 'none here'}"))
    return out


def on_demand_capacity_notes(cluster: ClusterConfig) -> list[str]:
    """A warning per on-demand group of a type EC2 sells as Capacity Blocks."""
    out = []
    for g in cluster.node_groups:
        family = g.instance_type.split(".")[0]
        if g.capacity_type == CapacityType.ON_DEMAND and family in CAPACITY_BLOCK_FAMILIES:
            out.append(f"WARNING: node group '{g.name}' asks for {g.count} x {g.instance_type} "
                       "on demand; on-demand launches of this family often fail with "
                       "InsufficientInstanceCapacity -> buy a Capacity Block (capacityType: "
                       "capacity-block, capacityReservationId) or an On-Demand Capacity "
                       "Reservation (capacityType: reservation)")
    return out


def regional_quota_notes(region: str, owners: int, usage: Mapping[str, int] | None = None,
                         quotas: Mapping[str, float] | None = None) -> list[str]:
    """A warning per regional quota (VPCs, internet gateways, Elastic IPs) that `owners` more
    cluster-owning stacks would reach: each makes one of each. `usage` / `quotas` by code
    come from the account; without them the default VPC counts as one VPC in use and the
    documented defaults apply."""
    out = []
    for quota in REGIONAL:
        used = (usage or {}).get(quota.code, 1 if quota.code == "L-F678F1CE" else 0)
        limit = (quotas or {}).get(quota.code, quota.default)
        if limit is not None and used + owners > limit:
            out.append(f"WARNING: {owners} stack(s) that own a cluster in {region} each make one "
                       f"'{quota.name}' ({quota.code}); with {used} in use the region needs "
                       f"{used + owners}, over the quota of {limit:g} -> deploy fewer at once "
                       f"or request an increase (--service-code {quota.service} --quota-code "
                       f"{quota.code})")
    return out
