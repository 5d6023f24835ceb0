"""Node-hours and the cost of a period, from what actually ran.

Input is a list of `NodeUsage` (a node, its instance type, when it started and stopped
billing). Two sources produce it:
- a standalone stack: EC2 instances carrying its `stack` tag (`list_stack_instances`), from
  launch time to termination/stop (or now);
- an attached variant: the base's nodes its workers ran on, as the runner records them in the
  run manifest's `nodes` field (`usage_from_manifest`), over the run's window.
`period_cost` is the pure arithmetic: sum(instance price x hours overlapping the period)
+ the nodes' gp3 root volumes + Auto Mode fee where the cluster runs Auto Mode + EKS control
plane + EFS storage + the NAT gateway and its public IPv4 address, prorated. A node whose
instance type nobody prices is counted in `unknown` (the total is then a lower bound and
says so), never dropped and never a crash. Lines are split into the cluster's shared fixed
costs (EKS, EFS, NAT, CPU nodes) and the GPU nodes a stack occupies (`PeriodCost.shared`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from stacks.catalog.instances import EKS_CONTROL_PLANE_USD_PER_HOUR, INSTANCE_TYPES
from stacks.catalog.service_prices import (
    AUTO_MODE_FEE,
    EBS_GP3,
    EKS_CONTROL_PLANE,
    gp3_usd_per_hour,
)
from stacks.sizing.estimate import CostLines, add_storage_and_network, auto_mode_fee, eks_fee_line


class NodeUsage(BaseModel):
    """One node's billed interval. `node` is an EC2 instance id or a Kubernetes node name."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore",
                              frozen=True)

    node: Annotated[str, Field(min_length=1)]
    instance_type: Annotated[str, Field(min_length=1)]
    start: datetime
    end: datetime | None = None   # None: still running
    note: str = ""
    node_group: str = ""          # the stack's node group (sizes its root volume)


_NODES = TypeAdapter(list[NodeUsage])


def usage_from_manifest(doc: Any) -> list[NodeUsage]:
    """Node usage from a run manifest (its `nodes` field) or a bare list of node records."""
    records = doc.get("nodes") if isinstance(doc, dict) else doc
    if records is None:
        raise ValueError("the manifest has no 'nodes' field: give a list of {node, "
                         "instanceType, start, end} records")
    return _NODES.validate_python(records)


def as_utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def overlap_hours(start: datetime, end: datetime | None, window_start: datetime,
                  window_end: datetime) -> float:
    lo = max(as_utc(start), as_utc(window_start))
    hi = min(as_utc(end) if end else as_utc(window_end), as_utc(window_end))
    return max((hi - lo).total_seconds(), 0.0) / 3600


@dataclass
class PeriodCost(CostLines):
    start: datetime
    end: datetime
    node_hours: dict[str, float] = field(default_factory=dict)   # by instance type
    lines: dict[str, float] = field(default_factory=dict)        # USD by what it pays for
    unknown: dict[str, float] = field(default_factory=dict)      # node-hours nobody prices
    shared: set[str] = field(default_factory=set)                # the cluster's fixed costs
    prices: set[str] = field(default_factory=set)                # price keys used
    excluded: list[str] = field(default_factory=list)            # for the scope line

    @property
    def hours(self) -> float:
        return (as_utc(self.end) - as_utc(self.start)).total_seconds() / 3600


def _is_cpu(instance_type: str) -> bool:
    it = INSTANCE_TYPES.get(instance_type)
    return it is not None and it.gpu is None


def _node_lines(cost: PeriodCost, nodes: list[NodeUsage], prices: Mapping[str, float],
                auto_mode: bool, root_gib: Mapping[str, float] | None) -> None:
    gib_hours: dict[str, float] = {}
    unsized = 0
    for n in nodes:
        h = overlap_hours(n.start, n.end, cost.start, cost.end)
        if h <= 0:
            continue
        cost.node_hours[n.instance_type] = cost.node_hours.get(n.instance_type, 0.0) + h
        if root_gib is not None and n.node_group in root_gib:
            gib_hours[n.instance_type] = (gib_hours.get(n.instance_type, 0.0)
                                          + h * root_gib[n.node_group])
        else:
            unsized += 1
    for it, h in sorted(cost.node_hours.items()):
        if it not in prices:
            cost.unknown[it] = h
            continue
        usd = h * prices[it]
        names = [f"nodes {it} ({h:.2f} node-h x ${prices[it]:.4f})"]
        cost.lines[names[0]] = usd
        cost.prices.add(it)
        if auto_mode:
            names.append(f"auto mode fee {it}")
            cost.lines[names[-1]] = auto_mode_fee(usd)
            cost.prices.add(AUTO_MODE_FEE.key)
        if _is_cpu(it):
            cost.shared |= set(names)
    for it, gh in sorted(gib_hours.items()):
        name = f"root volumes {it} ({gh:,.0f} GiB-h gp3)"
        cost.lines[name] = gp3_usd_per_hour(gh)
        cost.prices.add(EBS_GP3.key)
        if _is_cpu(it):
            cost.shared.add(name)
    if unsized:
        cost.excluded.append(f"root volumes of {unsized} node(s) whose node group was not "
                             "recorded")


def period_cost(nodes: list[NodeUsage], start: datetime, end: datetime,
                prices: Mapping[str, float], *, auto_mode: bool = False,
                eks_clusters: int = 1, efs_gib: float = 0.0, nat_gateways: int = 0,
                root_gib: Mapping[str, float] | None = None,
                eks_version: str | None = None) -> PeriodCost:
    """Cost of [start, end): nodes by overlap (and their root volumes, sized by node group
    from `root_gib`), plus the fixed fees for the whole period. Instance types without a
    price land in `unknown`. `eks_version`: the cluster's, so the control plane is billed at
    the rate of the period's first day (extended support costs 6x; stacks/catalog/eks_versions.py);
    without it, the standard rate."""
    if as_utc(end) <= as_utc(start):
        raise ValueError(f"period end {end} is not after its start {start}")
    cost = PeriodCost(start, end)
    _node_lines(cost, nodes, prices, auto_mode, root_gib)
    if eks_clusters:
        label, rate = (eks_fee_line(eks_version, as_utc(start).date()) if eks_version
                       else ("EKS control plane", EKS_CONTROL_PLANE_USD_PER_HOUR))
        cost.lines[label] = eks_clusters * rate * cost.hours
        cost.prices.add(EKS_CONTROL_PLANE.key)
        cost.shared.add(label)
    add_storage_and_network(cost, efs_gib, nat_gateways, cost.hours)
    return cost


# EC2 puts the time of a user-initiated stop/terminate in StateTransitionReason:
# "User initiated (2026-08-01 10:20:30 GMT)" (moto writes UTC).
_TRANSITION = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")
_NOT_BILLING = ("shutting-down", "terminated", "stopping", "stopped")


# The stack's node group of an instance: EKS managed node groups tag their instances with the
# group's name (components/nodegroups.py names each group after the stack's); Auto Mode with
# its NodePool's (components/auto_mode_specs.auto_mode_name: "dynamo-bench-<group>").
_GROUP_TAGS = (("eks:nodegroup-name", ""), ("karpenter.sh/nodepool", "dynamo-bench-"))


def _node_group(tags: Mapping[str, str]) -> str:
    for key, prefix in _GROUP_TAGS:
        value = tags.get(key, "")
        if value and value.startswith(prefix):
            return value[len(prefix):]
    return ""


def instance_usage(inst: Mapping[str, Any]) -> NodeUsage:
    """NodeUsage of one describe_instances record."""
    state = inst["State"]["Name"]
    end, note = None, ""
    if state in _NOT_BILLING:
        m = _TRANSITION.search(inst.get("StateTransitionReason", ""))
        if m:
            end = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        else:
            note = f"{state} without a recorded time: counted until the period's end"
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
    return NodeUsage(node=inst["InstanceId"], instance_type=inst["InstanceType"],
                     start=as_utc(inst["LaunchTime"]), end=end, note=note,
                     node_group=_node_group(tags))


def list_stack_instances(ec2: Any, stack: str) -> list[NodeUsage]:
    """EC2 instances tagged stack=<stack> (terminated ones stay listed for about an hour)."""
    usage: list[NodeUsage] = []
    for page in ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "tag:stack", "Values": [stack]}]):
        for reservation in page["Reservations"]:
            usage.extend(instance_usage(i) for i in reservation["Instances"])
    return usage
