"""The Auto Mode cluster role may tag what the NodeClasses and the Auto Mode StorageClass tag.

EKS user guide, auto-learn-iam.adoc "Custom AWS tags for EKS Auto resources": the managed
policies do not allow user tags on what Auto Mode creates; without an extra policy on the
cluster role no NodeClaim with tags launches ("Error getting launch template configs",
auto-troubleshoot.adoc) and no tagged volume is made. components/iam_specs.py cites the rest.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi_harness import k8s_objects, raw_config, run, run_config

from components.iam_specs import AUTO_MODE_CLUSTER_POLICIES, CLUSTER_NAME_TAG

BASE = "base-a100-auto"
AUTO_EBS_PROVISIONER = "ebs.csi.eks.amazonaws.com"


def _needed_actions(result) -> set[str]:
    """What Auto Mode must be allowed to create with the user's tags in this stack."""
    needed: set[str] = set()
    for _, obj in k8s_objects(result):
        if obj["kind"] == "NodeClass" and obj["spec"].get("tags"):
            needed |= {"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate"}
        if obj["kind"] == "StorageClass" and obj.get("provisioner") == AUTO_EBS_PROVISIONER \
                and any(k.startswith("tagSpecification_") for k in obj.get("parameters", {})):
            needed.add("ec2:CreateVolume")
    return needed


def _role_statements(result) -> tuple[set[str], list[dict[str, Any]]]:
    """The managed policy names and the inline statements of the cluster's service role."""
    cluster = result.of_type("eks:index:Cluster")[0].inputs
    role_urn = cluster.get("serviceRole")
    if role_urn is None:    # pulumi-eks's own role: the five managed policies only
        return set(AUTO_MODE_CLUSTER_POLICIES), []
    role = next(r for r in result.resources if r.urn == role_urn)
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "eks.amazonaws.com"}
    assert set(trust["Action"]) == {"sts:AssumeRole", "sts:TagSession"}
    managed = {r.inputs["policyArn"].rsplit("/", 1)[-1]
               for r in result.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
               if r.inputs["role"] == role.name}
    statements = [s for r in result.of_type("aws:iam/rolePolicy:RolePolicy")
                  if r.inputs["role"] == role.name
                  for s in json.loads(r.inputs["policy"])["Statement"]]
    return managed, statements


def _allowed_for_own_cluster(statements: list[dict[str, Any]], action: str) -> bool:
    return any(s["Effect"] == "Allow" and action in s["Action"]
               and s.get("Condition", {}).get("StringEquals", {}).get(CLUSTER_NAME_TAG)
               for s in statements)


@pytest.mark.parametrize("stack", [BASE, "base-a100-auto-odcr"])
def test_the_cluster_role_can_tag_what_the_node_classes_and_storage_class_ask_for(
        stack: str) -> None:
    if stack == BASE:
        result = run(BASE)
    else:
        raw = raw_config(BASE)
        raw["cluster"]["nodeGroups"][0].update(capacityType="reservation",
                                               capacityReservationId="cr-0123456789abcdef0")
        result = run_config(stack, raw)
    assert result.error is None, result.error
    needed = _needed_actions(result)
    # the shipped Auto Mode base tags both its nodes and its Prometheus volume
    assert needed == {"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate",
                      "ec2:CreateVolume"}
    managed, statements = _role_statements(result)
    assert managed == set(AUTO_MODE_CLUSTER_POLICIES)
    missing = sorted(a for a in needed if not _allowed_for_own_cluster(statements, a))
    assert not missing, f"the cluster role cannot tag on {missing}"
    # the cluster waits for its role's permissions: nodes launch as soon as it is active
    eks = result.of_type("eks:index:Cluster")[0]
    policies = {r.urn for r in result.resources
                if r.type in ("aws:iam/rolePolicy:RolePolicy",
                              "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                and r.inputs["role"] == "cluster-cluster-role"}
    assert len(policies) == len(AUTO_MODE_CLUSTER_POLICIES) + 1
    assert policies <= eks.depends_on


def test_a_node_group_cluster_keeps_pulumi_eks_own_role() -> None:
    # managed node groups tag through their launch templates, with the deployer's rights
    eks = run("base-a100").of_type("eks:index:Cluster")[0].inputs
    assert "serviceRole" not in eks and "autoMode" not in eks
