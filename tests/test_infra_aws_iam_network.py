"""Node IAM and EFA interfaces under Pulumi mocks: managed policy ARNs in the region's own
partition (aws-cn, aws-us-gov), the node role's least-privilege ECR policy, and `efa-only`
interfaces on every network card but the primary (aws.md M3, M4, M5)."""

from __future__ import annotations

import boto3
import pytest
from pulumi_harness import raw_config, run, run_config

from components.node_specs import efa_network_interfaces
from stacks.catalog.instances import INSTANCE_TYPES


def _raw_in_region(stack: str, region: str, *, efa: bool = True) -> dict:
    raw = raw_config(stack)
    raw["cluster"]["region"] = region
    for group in raw["cluster"]["nodeGroups"]:
        if "availabilityZone" in group:
            group["availabilityZone"] = f"{region}a"
        if not efa and INSTANCE_TYPES[group["instanceType"]].efa_interfaces:
            group["instanceType"] = "g6e.4xlarge"   # a GPU without EFA
    return raw


def _in_region(stack: str, region: str):
    # outside the aws partition, groups without EFA (its device plugin image cannot be pulled
    # there: the next test)
    raw = _raw_in_region(stack, region, efa=boto3.session.Session().get_partition_for_region(
        region) == "aws")
    result = run_config(f"{stack}-{region}", raw)
    assert result.error is None, result.error
    return result


def test_efa_groups_outside_the_aws_partition_are_refused_before_anything_is_created():
    """The EFA device plugin's image is in the aws partition's ECR (aws.md M4): a node-group
    base with EFA groups in us-gov-west-1 is refused naming each group; Auto Mode brings AWS's
    own plugin, and in us-east-1 nothing is refused."""
    from stacks.preflight.aws_checks import EFA_PLUGIN_IMAGE

    result = run_config("base-a100-gov", _raw_in_region("base-a100", "us-gov-west-1"))
    assert result.error is not None and EFA_PLUGIN_IMAGE in str(result.error)
    groups = raw_config("base-a100")["cluster"]["nodeGroups"]
    refused = {f"dynamo-bench:cluster.nodeGroups[{i}]" for i, g in enumerate(groups)
               if INSTANCE_TYPES[g["instanceType"]].efa_interfaces}
    assert refused and all(f in str(result.error) for f in refused)
    assert "aws-us-gov" in str(result.error)
    assert run_config("base-a100-auto-gov", _raw_in_region("base-a100-auto", "us-gov-west-1")
                      ).error is None


@pytest.mark.parametrize(("stack", "region", "partition"), [
    ("base-a100", "us-gov-west-1", "aws-us-gov"), ("base-a100-auto", "us-gov-west-1",
                                                   "aws-us-gov"),
    ("base-a100", "us-east-1", "aws")])
def test_every_managed_policy_arn_is_in_the_regions_partition(stack, region, partition):
    # pre-flight accepts every partition's regions (botocore's); the CSI roles' ARNs were
    # written for `aws` only
    arns = [r.inputs["policyArn"] for r in _in_region(stack, region).resources
            if "policyArn" in r.inputs]
    assert arns and all(a.startswith(f"arn:{partition}:iam::aws:policy/") for a in arns), arns


def test_the_node_role_pulls_from_ecr_without_read_rights():
    arns = {r.inputs["policyArn"].rsplit("/", 1)[-1] for r in run("base-a100").resources
            if r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
            and "-node-" in r.name}
    assert arns == {"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
                    "AmazonEC2ContainerRegistryPullOnly"}


@pytest.mark.parametrize("instance", ["p4d.24xlarge", "p6-b200.48xlarge", "g6e.12xlarge"])
def test_efa_cards_after_the_primary_are_efa_only(instance):
    inst = INSTANCE_TYPES[instance]
    cards = efa_network_interfaces(inst, "sg-1")
    assert len(cards) == inst.efa_interfaces      # one EFA device per card either way
    assert (cards[0]["interface_type"], cards[0]["device_index"]) == ("efa", 0)
    assert all((c["interface_type"], c["device_index"]) == ("efa-only", 1) for c in cards[1:])
    assert [c["network_card_index"] for c in cards] == list(range(inst.efa_interfaces))


@pytest.mark.parametrize(("group", "kinds"), [
    ("p4d", ["efa", "efa-only", "efa-only", "efa-only"]), ("g6e", ["efa"])])
def test_each_rendered_launch_template_has_one_ip_interface(group, kinds):
    # base-a100 has two EFA groups; resources register in no fixed order under the mocks, so
    # the template is picked by its group's name (the first one found flaked in CI)
    (lt,) = [r for r in run("base-a100").of_type("aws:ec2/launchTemplate:LaunchTemplate")
             if r.name.endswith(f"-{group}")]
    assert [n["interfaceType"] for n in lt.inputs["networkInterfaces"]] == kinds


@pytest.mark.parametrize("stack", ["base-a100", "base-a100-auto"])
def test_the_efs_csi_role_cannot_create_or_delete_access_points(stack):
    # aws.md M5: EFS is provisioned statically (no StorageClass with provisioningMode efs-ap),
    # so the managed AmazonEFSCSIDriverPolicy's Create/DeleteAccessPoint are not granted
    import json

    from components import loadgen_specs

    result = run(stack)
    assert all("provisioningMode" not in sc.get("parameters", {})
               for sc in loadgen_specs.storage_classes(tags={}, auto_mode="auto" in stack))
    arns = [r.inputs["policyArn"] for r in result.resources
            if r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"]
    assert not any(a.endswith("/AmazonEFSCSIDriverPolicy") for a in arns)
    (efs,) = [r for r in result.of_type("aws:iam/rolePolicy:RolePolicy")
              if "aws-efs-csi-driver" in r.name]
    doc = efs.inputs["policy"]
    doc = json.loads(doc) if isinstance(doc, str) else doc
    actions = {a for st in doc["Statement"] for a in st["Action"]}
    assert actions and all(a.split(":")[1].startswith("Describe") for a in actions)
