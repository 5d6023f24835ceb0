"""A capacity block on a managed node group, rendered by the program (aws.md R5).

EKS rejects a capacity-block node group whose launch template lacks the instance type
(latest/ug/ml/capacity-blocks-mng.adoc) and fails one that names the type both in the template
and in `instanceTypes` (CreateNodegroup API); a capacity block needs no cluster placement group
(EC2 capacity-blocks-using), and our fresh one holds no reservation.
"""

from __future__ import annotations

from pulumi_harness import raw_config, run, run_config

RESERVATION = "cr-0123456789abcdef0"


def _by_group(result, type_token: str, group: str):
    return [r for r in result.of_type(type_token) if r.name.endswith(f"-{group}")]


def test_a_capacity_block_puts_its_type_in_the_launch_template_only() -> None:
    raw = raw_config("base-b200")
    raw["cluster"]["nodeGroups"][0].update(capacityType="capacity-block",
                                           capacityReservationId=RESERVATION)
    result = run_config("base-b200-block", raw)
    assert result.error is None, result.error
    (template,) = _by_group(result, "aws:ec2/launchTemplate:LaunchTemplate", "b200")
    assert template.inputs["instanceType"] == "p6-b200.48xlarge"
    assert template.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template.inputs["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": RESERVATION}}
    assert "placement" not in template.inputs
    assert template.inputs["networkInterfaces"]  # EFA stays on
    assert not _by_group(result, "aws:ec2/placementGroup:PlacementGroup", "b200")
    (group,) = _by_group(result, "eks:index:ManagedNodeGroup", "b200")
    assert not group.inputs.get("instanceTypes")
    assert group.inputs["capacityType"] == "CAPACITY_BLOCK"


def test_an_on_demand_efa_group_keeps_its_placement_group_and_instance_types() -> None:
    result = run("base-b200")
    (template,) = _by_group(result, "aws:ec2/launchTemplate:LaunchTemplate", "b200")
    assert "instanceType" not in template.inputs
    assert template.inputs["placement"]["groupName"]
    assert _by_group(result, "aws:ec2/placementGroup:PlacementGroup", "b200")
    (group,) = _by_group(result, "eks:index:ManagedNodeGroup", "b200")
    assert group.inputs["instanceTypes"] == ["p6-b200.48xlarge"]
