"""Capacity, offerings and quotas judged from the account's answers (aws.md R3, R7); the
answers themselves are fetched by workloads/targets/aws/account_facts.py."""

from __future__ import annotations

from stacks.catalog.aws_quotas import family_letter
from stacks.config.loader import load_stack
from stacks.preflight.capacity_checks import (
    offering_problems,
    on_demand_capacity_notes,
    quota_notes,
    regional_quota_notes,
    vcpu_demand,
)
from stacks.preflight.run import check_stack


def test_quota_families() -> None:
    assert [family_letter(t) for t in ("p4d.24xlarge", "p6-b200.48xlarge", "g6e.12xlarge",
                                       "vt1.3xlarge", "m7i.4xlarge")] == \
        ["P", "P", "G", "G", "standard"]


def test_vcpu_demand_of_the_shipped_bases() -> None:
    demand = {q.code: n for q, n in vcpu_demand(load_stack("base-a100").cluster).items()}
    assert demand == {"L-417A185B": 192, "L-DB2E81BA": 48, "L-1216C47A": 32}
    demand = {q.code: n for q, n in vcpu_demand(load_stack("base-b200").cluster).items()}
    assert demand["L-417A185B"] == 384


def test_a_quota_below_the_demand_is_a_warning_with_the_numbers() -> None:
    cluster = load_stack("base-b200").cluster
    (note,) = quota_notes(cluster, "us-east-1", {"L-417A185B": 96, "L-1216C47A": 640})
    assert note.startswith("WARNING") and "384 vCPUs" in note and "is 96" in note
    assert "--quota-code L-417A185B --desired-value 384" in note
    assert quota_notes(cluster, "us-east-1", {"L-417A185B": 384}) == []


def test_vcpus_already_in_use_count_against_the_quota() -> None:
    cluster = load_stack("base-b200").cluster
    (note,) = quota_notes(cluster, "us-east-1", {"L-417A185B": 400}, {"L-417A185B": 96})
    assert "need 384 vCPUs" in note and "96 are in use" in note and "is 400" in note
    assert "--desired-value 480" in note
    assert quota_notes(cluster, "us-east-1", {"L-417A185B": 480}, {"L-417A185B": 96}) == []


def test_a_type_not_offered_in_the_pinned_zone_is_refused() -> None:
    stack = load_stack("base-b200")
    (problem,) = offering_problems(stack, {"p6-b200.48xlarge": ["us-east-1b", "us-east-1d"]})
    assert problem.field == "dynamo-bench:cluster.nodeGroups[0].availabilityZone"
    assert "us-east-1b, us-east-1d" in problem.fix
    assert offering_problems(stack, {"p6-b200.48xlarge": ["us-east-1a"]}) == []


def test_on_demand_capacity_block_types_get_a_warning() -> None:
    (note,) = on_demand_capacity_notes(load_stack("base-b200").cluster)
    assert "p6-b200.48xlarge" in note and "capacity-block" in note
    assert any("InsufficientInstanceCapacity" in n for n in check_stack("base-b200").notes)
    assert on_demand_capacity_notes(load_stack("base-a100").cluster)  # p4d on demand too
    assert not on_demand_capacity_notes(load_stack("agg-a100").cluster)  # no own groups


def test_regional_quotas_reached_by_side_by_side_owners() -> None:
    # the four shipped owners in us-east-1 plus the default VPC fill the 5 VPCs exactly
    assert regional_quota_notes("us-east-1", 4) == []
    notes = regional_quota_notes("us-east-1", 5)
    assert any("L-F678F1CE" in n and "needs 6" in n for n in notes)
    assert any("L-F678F1CE" in n for n in regional_quota_notes("us-east-1", 4,
                                                                 usage={"L-F678F1CE": 2}))
    (eip,) = [n for n in regional_quota_notes("us-east-1", 2, usage={"L-0263D0A3": 4})
              if "L-0263D0A3" in n]
    assert "needs 6" in eip
