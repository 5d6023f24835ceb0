"""Node-hour cost from moto EC2 instances tagged for two stacks, against a hand computation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import moto.ec2.models.instances as moto_instances
import pytest
from aws_moto import aws_env  # noqa: F401 (fixtures)
from moto import mock_aws

from reports.accounting.node_hours import (
    NodeUsage,
    list_stack_instances,
    overlap_hours,
    period_cost,
    usage_from_manifest,
)

T0 = datetime(2026, 8, 1, 0, 0)             # moto keeps naive UTC times
P4D, M7I = 21.957642, 0.8064
PRICES = {"p4d.24xlarge": P4D, "m7i.4xlarge": M7I, "g6e.12xlarge": 10.49264}



def _launch(ec2, monkeypatch, at_h: float, itype: str, stack: str | None,
            group: str = "") -> str:
    """Run one instance whose launch time is T0 + at_h hours (moto's clock patched)."""
    monkeypatch.setattr(moto_instances, "utcnow", lambda: T0 + timedelta(hours=at_h))
    extra = [{"Key": "eks:nodegroup-name", "Value": group}] if group else []
    tags = [{"ResourceType": "instance", "Tags": [{"Key": "stack", "Value": stack}, *extra]}] \
        if stack else []
    return ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1,
                             InstanceType=itype, TagSpecifications=tags)["Instances"][0][
        "InstanceId"]


@pytest.mark.usefixtures("aws_env")
def test_cost_of_a_period_from_tagged_instances_matches_hand_computation(monkeypatch):
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        p4d_a = _launch(ec2, monkeypatch, 0, "p4d.24xlarge", "agg-a100-standalone")
        p4d_b = _launch(ec2, monkeypatch, 0, "p4d.24xlarge", "agg-a100-standalone")
        _launch(ec2, monkeypatch, 0.5, "m7i.4xlarge", "agg-a100-standalone")
        _launch(ec2, monkeypatch, 0, "p4d.24xlarge", "other-stack")     # not ours
        _launch(ec2, monkeypatch, 0, "g6e.12xlarge", None)              # untagged
        monkeypatch.setattr(moto_instances, "utcnow", lambda: T0 + timedelta(hours=3))
        ec2.terminate_instances(InstanceIds=[p4d_b])
        usage = list_stack_instances(ec2, "agg-a100-standalone")

    assert sorted(u.instance_type for u in usage) == ["m7i.4xlarge", "p4d.24xlarge",
                                                      "p4d.24xlarge"]
    by_id = {u.node: u for u in usage}
    assert by_id[p4d_a].end is None
    assert by_id[p4d_b].end == datetime(2026, 8, 1, 3, 0, tzinfo=UTC)

    start, end = T0 + timedelta(hours=1), T0 + timedelta(hours=5)
    cost = period_cost(usage, start, end, PRICES, efs_gib=200)
    # By hand, period 01:00-05:00 (4 h):
    #   p4d a: running all period  4 h ; p4d b: terminated 03:00 -> 2 h ; 6 node-h x 21.957642
    #   m7i: launched 00:30, running -> 4 h x 0.8064
    #   EKS control plane 4 h x 0.10 ; EFS 200 GiB x $0.30/GB-month / 730 h x 4 h
    p4d_usd = 6 * 21.957642                       # 131.745852
    m7i_usd = 4 * 0.8064                          # 3.2256
    eks_usd = 4 * 0.10                            # 0.4
    efs_usd = 200 * 0.30 / 730 * 4                # 0.328767
    assert cost.node_hours == pytest.approx({"p4d.24xlarge": 6.0, "m7i.4xlarge": 4.0})
    assert cost.total == pytest.approx(p4d_usd + m7i_usd + eks_usd + efs_usd)
    assert cost.total == pytest.approx(135.700219, abs=1e-6)
    auto = period_cost(usage, start, end, PRICES, auto_mode=True, efs_gib=200)
    assert auto.total - cost.total == pytest.approx(0.12 * (p4d_usd + m7i_usd))  # 16.196574


def test_attached_variant_costs_the_base_nodes_from_its_manifest():
    manifest = {"stack": "agg-a100", "nodes": [
        {"node": "ip-10-42-1-10.ec2.internal", "instanceType": "p4d.24xlarge",
         "start": "2026-08-01T10:00:00Z", "end": "2026-08-01T11:30:00Z"},
        {"node": "i-0abc", "instance_type": "p4d.24xlarge",
         "start": "2026-08-01T10:00:00Z", "end": "2026-08-01T11:30:00Z"}]}
    nodes = usage_from_manifest(manifest)
    assert [n.node for n in nodes] == ["ip-10-42-1-10.ec2.internal", "i-0abc"]
    start = datetime(2026, 8, 1, 10, 0, tzinfo=UTC)
    cost = period_cost(nodes, start, start + timedelta(hours=1.5), PRICES, efs_gib=200)
    # 2 nodes x 1.5 h x 21.957642 + 1.5 h x 0.10 + 200 x 0.30 / 730 x 1.5
    assert cost.total == pytest.approx(65.872926 + 0.15 + 0.123288, abs=1e-6)
    with pytest.raises(ValueError, match="'nodes' field"):
        usage_from_manifest({"stack": "agg-a100"})


def test_overlap_and_bad_periods():
    t = datetime(2026, 8, 1, tzinfo=UTC)
    h = timedelta(hours=1)
    assert overlap_hours(t - 2 * h, t - h, t, t + h) == 0          # ended before
    assert overlap_hours(t + 2 * h, None, t, t + h) == 0           # started after
    assert overlap_hours(t - h, None, t, t + 2 * h) == 2           # running through
    # a type nobody prices is counted as unknown, never dropped and never a crash
    n = NodeUsage(node="i-1", instance_type="p5.48xlarge", start=t)
    unknown = period_cost([n], t, t + h, PRICES)
    assert unknown.unknown == {"p5.48xlarge": 1.0} and not unknown.complete
    assert not any(k.startswith("nodes ") for k in unknown.lines)
    with pytest.raises(ValueError, match="not after its start"):
        period_cost([], t, t, PRICES)


@pytest.mark.usefixtures("aws_env")
def test_root_volumes_nat_and_the_shared_part(monkeypatch):
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        _launch(ec2, monkeypatch, 0, "p4d.24xlarge", "base-a100", group="p4d")
        _launch(ec2, monkeypatch, 0, "m7i.4xlarge", "base-a100", group="cpu")
        _launch(ec2, monkeypatch, 0, "m7i.4xlarge", "base-a100")       # group not tagged
        usage = list_stack_instances(ec2, "base-a100")
    assert sorted(u.node_group for u in usage) == ["", "cpu", "p4d"]
    start, end = T0, T0 + timedelta(hours=2)
    cost = period_cost(usage, start, end, PRICES, efs_gib=200, nat_gateways=1,
                       root_gib={"p4d": 500, "cpu": 200})
    # By hand, 2 h: p4d 2 x 21.957642; 2 m7i 4 x 0.8064; root volumes p4d 500 GiB x 2 h and
    # cpu 200 GiB x 2 h at $0.08 per GiB-month / 730; EKS 0.2; EFS 0.164384; NAT + IPv4 0.1
    gpu = 2 * P4D + 1000 * 0.08 / 730                   # 43.915284 + 0.109589
    shared = 4 * M7I + 400 * 0.08 / 730 + 0.2 + 200 * 0.30 / 730 * 2 + 2 * 0.05
    assert cost.total == pytest.approx(gpu + shared)
    assert cost.shared_total == pytest.approx(shared)   # 3.225600 + 0.043836 + 0.464384
    assert cost.excluded == ["root volumes of 1 node(s) whose node group was not recorded",
                             "network transfer and NAT data processing"]


def test_control_plane_rate_follows_the_version_lifecycle_of_the_period():
    """EKS 1.33: standard support until 2026-07-29, then $0.60/h (6x) in extended support.
    A period is billed at its first day's rate; without a version, the standard rate."""
    start = datetime(2026, 7, 28, 10, tzinfo=UTC)
    before = period_cost([], start, start + timedelta(hours=2), {}, eks_version="1.33")
    after = period_cost([], start + timedelta(days=1), start + timedelta(days=1, hours=2), {},
                        eks_version="1.33")
    unknown_version = period_cost([], start + timedelta(days=1),
                                  start + timedelta(days=1, hours=2), {})
    def eks(cost) -> dict[str, float]:
        return {k: round(v, 9) for k, v in cost.lines.items() if k.startswith("EKS")}
    assert eks(before) == {"EKS control plane": 0.20}
    assert eks(after) == {"EKS control plane (EKS 1.33 in extended support on 2026-07-29)": 1.20}
    assert eks(unknown_version) == {"EKS control plane": 0.20}
