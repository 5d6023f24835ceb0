"""Every Kubernetes object the program creates for every AWS stack is valid.

- built-in kinds: kubernetes_validate strict for the stack's pinned Kubernetes version (an
  unknown kind raises SchemaNotFoundError and fails);
- DynamoGraphDeployment: jsonschema against the vendored CRD (v1beta1), unknown fields rejected;
- Auto Mode NodePool / NodeClass (no published CRD): the schemas in tests/schemas/, transcribed
  from the EKS user guide; an Auto Mode copy of base-a100 produces them.
Any other custom kind fails: nothing is waved through.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from k8s_validation import K8S_VERSION, validate_builtin, validate_dgd
from kubernetes_validate.utils import SchemaNotFoundError
from pulumi_harness import aws_stacks, k8s_objects, raw_config, run, run_config

from stacks.loader import load_stack

SCHEMAS = Path(__file__).parent / "schemas"
CUSTOM_SCHEMAS = {
    ("eks.amazonaws.com/v1", "NodeClass"): SCHEMAS / "eks.amazonaws.com_v1_NodeClass.json",
    ("karpenter.sh/v1", "NodePool"): SCHEMAS / "karpenter.sh_v1_NodePool.json",
}


def _is_builtin(api_version: str) -> bool:
    group = api_version.rpartition("/")[0]
    return not group or "." not in group or group.endswith(".k8s.io")


def validate_object(obj: dict[str, Any], k8s_version: str) -> None:
    key = (obj["apiVersion"], obj["kind"])
    if key == ("nvidia.com/v1beta1", "DynamoGraphDeployment"):
        validate_dgd(obj)
    elif key in CUSTOM_SCHEMAS:
        jsonschema.validate(obj, json.loads(CUSTOM_SCHEMAS[key].read_text()))
    elif _is_builtin(obj["apiVersion"]):
        kubernetes_validate.validate(obj, k8s_version, strict=True)
    else:
        pytest.fail(f"no schema for custom kind {key}: add one before creating it")


def _k8s_version(name: str) -> str:
    stack = load_stack(name)
    owner = load_stack(stack.cluster.attach_to) if stack.is_attached else stack
    return f"{owner.cluster.eks_version}.0"


@pytest.mark.parametrize("name", aws_stacks())
def test_every_object_validates(name: str) -> None:
    objs = k8s_objects(run(name))
    assert objs, f"{name} created no Kubernetes object"
    for record, obj in objs:
        try:
            validate_object(obj, _k8s_version(name))
        except Exception as exc:
            raise AssertionError(f"{name}: {record.type} {record.name}: {exc}") from exc


def auto_mode_base() -> dict[str, Any]:
    raw = raw_config("base-a100")
    raw["cluster"]["computeMode"] = "auto"
    raw["cluster"]["nodeGroups"][0].update(capacityType="reservation",
                                           capacityReservationId="cr-0123456789abcdef0")
    return raw


def test_auto_mode_pools_validate_and_cover_the_groups() -> None:
    result = run_config("base-a100-auto", auto_mode_base())
    assert result.error is None, result.error
    objs = [o for _, o in k8s_objects(result)]
    pools = {o["metadata"]["name"]: o for o in objs if o["kind"] == "NodePool"}
    classes = {o["metadata"]["name"]: o for o in objs if o["kind"] == "NodeClass"}
    for obj in [*pools.values(), *classes.values()]:
        validate_object(obj, K8S_VERSION)
    assert set(pools) == set(classes) == {"dynamo-bench-p4d", "dynamo-bench-g6e",
                                          "dynamo-bench-cpu"}
    p4d = pools["dynamo-bench-p4d"]["spec"]
    reqs = {r["key"]: r["values"] for r in p4d["template"]["spec"]["requirements"]}
    assert reqs["eks.amazonaws.com/instance-family"] == ["p4d"]
    assert reqs["karpenter.sh/capacity-type"] == ["reserved"]
    assert reqs["topology.kubernetes.io/zone"] == ["us-east-1a"]
    assert p4d["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert p4d["limits"] == {"nvidia.com/gpu": "16"}
    assert "taints" not in pools["dynamo-bench-cpu"]["spec"]["template"]["spec"]
    assert classes["dynamo-bench-p4d"]["spec"]["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"}]
    assert "capacityReservationSelectorTerms" not in classes["dynamo-bench-g6e"]["spec"]
    # Auto Mode owns the NVIDIA/EFA device plugins and the EBS driver: none installed.
    charts = set(result.helm_charts())
    assert not charts & {"nvidia-device-plugin", "aws-efa-k8s-device-plugin"}
    addons = {r.inputs["addonName"] for r in result.of_type("aws:eks/addon:Addon")}
    assert addons == {"aws-efs-csi-driver"}
    eks = result.of_type("eks:index:Cluster")[0].inputs
    assert eks["autoMode"]["enabled"] is True


def test_unknown_custom_kind_fails() -> None:
    with pytest.raises(pytest.fail.Exception):
        validate_object({"apiVersion": "example.com/v1", "kind": "Widget",
                         "metadata": {"name": "w"}}, K8S_VERSION)
    with pytest.raises(SchemaNotFoundError):
        validate_builtin({"apiVersion": "v1", "kind": "NoSuchKind", "metadata": {"name": "x"}})


def test_a_misspelt_node_pool_field_is_rejected() -> None:
    result = run_config("base-a100-auto", auto_mode_base())
    pool = next(o for _, o in k8s_objects(result) if o["kind"] == "NodePool")
    pool["spec"]["template"]["spec"]["nodeclassRef"] = pool["spec"]["template"]["spec"].pop(
        "nodeClassRef")
    with pytest.raises(jsonschema.ValidationError):
        validate_object(pool, K8S_VERSION)
