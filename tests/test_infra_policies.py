"""The policy pack: every policy passes on every resource of every shipped AWS stack, and each
fails on a planted bad resource (so a policy that checks nothing cannot pass)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pulumi_harness import aws_stacks, run

from components.policies import (
    POLICIES,
    catalogue_instance_types,
    efs_encrypted,
    hf_token_secret_only,
    imdsv2_required,
    no_exposed_services,
    required_tags,
    violations,
)


def _resource(name: str, type_token: str) -> Any:
    return next(r for r in run(name).resources if r.type == type_token)


@pytest.mark.parametrize("name", aws_stacks())
@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
def test_policy_passes_on_shipped_stack(policy: Any, name: str) -> None:
    found = [f"{r.type} {r.name}: {v}" for r in run(name).resources
             for v in violations(policy, r.type, r.inputs, r.urn, r.name)]
    assert not found, "\n".join(found)


def _planted(type_token: str, stack: str = "base-a100") -> tuple[dict[str, Any], str]:
    """A deep copy of a real recorded resource's inputs, to break one thing in."""
    r = _resource(stack, type_token)
    return copy.deepcopy(r.inputs), r.urn


def test_required_tags_fails_on_untagged_and_mislabelled() -> None:
    props, urn = _planted("aws:ec2/vpc:Vpc")
    assert not violations(required_tags, "aws:ec2/vpc:Vpc", props, urn)
    del props["tags"]["experiment"]
    assert violations(required_tags, "aws:ec2/vpc:Vpc", props, urn)
    props, urn = _planted("aws:efs/fileSystem:FileSystem")
    props["tags"]["stack"] = "some-other-stack"
    assert violations(required_tags, "aws:efs/fileSystem:FileSystem", props, urn)
    props, urn = _planted("aws:ec2/launchTemplate:LaunchTemplate")
    props["tagSpecifications"] = [s for s in props["tagSpecifications"]
                                  if s["resourceType"] != "volume"]
    assert violations(required_tags, "aws:ec2/launchTemplate:LaunchTemplate", props, urn)
    node_class = {"spec": {"role": "r", "tags": {"project": "dynamo-bench"}}}
    assert violations(required_tags, "kubernetes:eks.amazonaws.com/v1:NodeClass", node_class,
                      urn)


def test_efs_encrypted_fails_on_plain_file_system() -> None:
    props, urn = _planted("aws:efs/fileSystem:FileSystem")
    assert not violations(efs_encrypted, "aws:efs/fileSystem:FileSystem", props, urn)
    props["encrypted"] = False
    assert violations(efs_encrypted, "aws:efs/fileSystem:FileSystem", props, urn)


def test_no_exposed_services_fails_on_load_balancer_and_node_port() -> None:
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "agg-a100-frontend", "namespace": "dynamo"},
               "spec": {"type": "LoadBalancer", "ports": [{"port": 8000}]}}
    assert violations(no_exposed_services, "kubernetes:core/v1:Service", service)
    service["spec"]["type"] = "ClusterIP"
    assert not violations(no_exposed_services, "kubernetes:core/v1:Service", service)
    chart = run("base-a100").helm_charts()["kube-prometheus-stack"]
    props = copy.deepcopy(chart.inputs)
    props["values"]["grafana"]["service"]["type"] = "NodePort"
    assert violations(no_exposed_services, chart.type, props)


def test_imdsv2_fails_on_optional_tokens_and_template_less_groups() -> None:
    props, urn = _planted("aws:ec2/launchTemplate:LaunchTemplate")
    assert props["metadataOptions"]["httpPutResponseHopLimit"] == 1   # the shipped templates
    assert not violations(imdsv2_required, "aws:ec2/launchTemplate:LaunchTemplate", props, urn)
    props["metadataOptions"]["httpPutResponseHopLimit"] = 2   # pods could reach the node role
    assert violations(imdsv2_required, "aws:ec2/launchTemplate:LaunchTemplate", props, urn)
    props["metadataOptions"]["httpPutResponseHopLimit"] = 1
    props["metadataOptions"]["httpTokens"] = "optional"
    assert violations(imdsv2_required, "aws:ec2/launchTemplate:LaunchTemplate", props, urn)
    props, urn = _planted("eks:index:ManagedNodeGroup")
    assert not violations(imdsv2_required, "eks:index:ManagedNodeGroup", props, urn)
    del props["launchTemplate"]
    assert violations(imdsv2_required, "eks:index:ManagedNodeGroup", props, urn)


def test_hf_token_fails_on_plain_env_and_pasted_token() -> None:
    props, urn = _planted("kubernetes:batch/v1:Job")
    assert not violations(hf_token_secret_only, "kubernetes:batch/v1:Job", props, urn)
    env = props["spec"]["template"]["spec"]["containers"][0]["env"]
    token_env = next(e for e in env if e["name"] == "HF_TOKEN")
    token_env.pop("valueFrom")
    token_env["value"] = "from-a-config-file"
    assert violations(hf_token_secret_only, "kubernetes:batch/v1:Job", props, urn)
    values = {"values": {"extraEnv": "token=hf_" + "A1b2C3d4" * 5}}
    assert violations(hf_token_secret_only, "kubernetes:helm.sh/v4:Chart", values)


def test_hf_token_secret_data_is_a_pulumi_secret() -> None:
    for name in ("base-a100", "agg-a100-standalone"):
        secret = next(r for r in run(name).of_type("kubernetes:core/v1:Secret")
                      if r.inputs["metadata"]["name"] == "hf-token")
        assert "stringData" in secret.secret_inputs
        assert "kubeconfig" in run(name).secret_outputs


def test_catalogue_instance_types_fails_outside_the_catalogue() -> None:
    props, urn = _planted("eks:index:ManagedNodeGroup")
    props["instanceTypes"] = ["p3.16xlarge"]
    assert violations(catalogue_instance_types, "eks:index:ManagedNodeGroup", props, urn)
    pool = {"spec": {"template": {"spec": {"requirements": [
        {"key": "eks.amazonaws.com/instance-family", "operator": "In", "values": ["p5"]}]}}}}
    assert violations(catalogue_instance_types, "kubernetes:karpenter.sh/v1:NodePool", pool)
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "node.kubernetes.io/instance-type", "operator": "In",
         "values": ["p5.48xlarge"]})
    assert not violations(catalogue_instance_types, "kubernetes:karpenter.sh/v1:NodePool", pool)
