"""Node-hours and the cost of a period, from what actually ran.

Input is a list of `NodeUsage` (a node, its instance type, when it started and stopped
billing). Two sources produce it:
- a standalone stack: EC2 instances carrying its `stack` tag (`list_stack_instances`), from
  launch time to termination/stop (or now);
- an attached variant: the base's nodes its workers ran on, as the runner records them in the
  run manifest's `nodes` field (`usage_from_manifest`), over the run's window.
`period_cost` is the pure arithmetic: sum(instance price x hours overlapping the period)
+ Auto Mode fee where the cluster runs Auto Mode + EKS control plane + EFS storage prorated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel

from stacks.catalog import EKS_CONTROL_PLANE_USD_PER_HOUR
from stacks.estimate import auto_mode_fee, efs_usd_per_hour


class NodeUsage(BaseModel):
    """One node's billed interval. `node` is an EC2 instance id or a Kubernetes node name."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore",
                              frozen=True)

    node: Annotated[str, Field(min_length=1)]
    instance_type: Annotated[str, Field(min_length=1)]
    start: datetime
    end: datetime | None = None   # None: still running
    note: str = ""


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
class PeriodCost:
    start: datetime
    end: datetime
    node_hours: dict[str, float] = field(default_factory=dict)   # by instance type
    lines: dict[str, float] = field(default_factory=dict)        # USD by what it pays for

    @property
    def hours(self) -> float:
        return (as_utc(self.end) - as_utc(self.start)).total_seconds() / 3600

    @property
    def total(self) -> float:
        return sum(self.lines.values())


def period_cost(nodes: list[NodeUsage], start: datetime, end: datetime,
                prices: Mapping[str, float], *, auto_mode: bool = False,
                eks_clusters: int = 1, efs_gib: float = 0.0) -> PeriodCost:
    """Cost of [start, end): nodes by overlap, plus the fixed fees for the whole period."""
    if as_utc(end) <= as_utc(start):
        raise ValueError(f"period end {end} is not after its start {start}")
    missing = sorted({n.instance_type for n in nodes} - set(prices))
    if missing:
        raise ValueError(f"no price for {missing}: resolve prices for every instance type")
    cost = PeriodCost(start, end)
    for n in nodes:
        h = overlap_hours(n.start, n.end, start, end)
        if h > 0:
            cost.node_hours[n.instance_type] = cost.node_hours.get(n.instance_type, 0.0) + h
    for it, h in sorted(cost.node_hours.items()):
        usd = h * prices[it]
        cost.lines[f"nodes {it} ({h:.2f} node-h x ${prices[it]:.4f})"] = usd
        if auto_mode:
            cost.lines[f"auto mode fee {it}"] = auto_mode_fee(usd)
    if eks_clusters:
        cost.lines["EKS control plane"] = (eks_clusters * EKS_CONTROL_PLANE_USD_PER_HOUR
                                           * cost.hours)
    if efs_gib:
        cost.lines[f"EFS storage ({efs_gib:g} GiB)"] = efs_usd_per_hour(efs_gib) * cost.hours
    return cost


# EC2 puts the time of a user-initiated stop/terminate in StateTransitionReason:
# "User initiated (2026-08-01 10:20:30 GMT)" (moto writes UTC).
_TRANSITION = re.compile(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?:GMT|UTC)\)")
_NOT_BILLING = ("shutting-down", "terminated", "stopping", "stopped")


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
    return NodeUsage(node=inst["InstanceId"], instance_type=inst["InstanceType"],
                     start=as_utc(inst["LaunchTime"]), end=end, note=note)


def list_stack_instances(ec2: Any, stack: str) -> list[NodeUsage]:
    """EC2 instances tagged stack=<stack> (terminated ones stay listed for about an hour)."""
    usage = []
    for page in ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "tag:stack", "Values": [stack]}]):
        for reservation in page["Reservations"]:
            usage.extend(instance_usage(i) for i in reservation["Instances"])
    return usage
