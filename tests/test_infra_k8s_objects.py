"""Every Kubernetes object the program creates for every AWS stack is valid.

- built-in kinds: kubernetes_validate strict for the stack's pinned Kubernetes version (an
  unknown kind raises SchemaNotFoundError and fails);
- DynamoGraphDeployment: jsonschema against the vendored CRD (v1beta1), unknown fields rejected;
- Auto Mode NodePool: jsonschema against Karpenter's published CRD (karpenter.sh_nodepools.yaml,
  v1), unknown fields rejected; NodeClass (AWS publishes no CRD file): the schema transcribed
  from the EKS user guide (tests/schemas/README.md). base-a100-auto and its derived variants
  produce them (tests/test_infra_auto_mode.py).
Any other custom kind fails: nothing is waved through.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from k8s_validation import K8S_VERSION, crd_schema, strict_schema, validate_builtin, validate_dgd
from kubernetes_validate.utils import SchemaNotFoundError
from pulumi_harness import aws_stacks, k8s_objects, run

from stacks.config.loader import load_stack

SCHEMAS = Path(__file__).parent / "schemas"
NODEPOOL_CRD = SCHEMAS / "karpenter.sh_nodepools.yaml"
NODECLASS_SCHEMA = SCHEMAS / "eks.amazonaws.com_v1_NodeClass.json"


@cache
def _custom_validators() -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    return {
        ("karpenter.sh/v1", "NodePool"): jsonschema.Draft7Validator(
            strict_schema(crd_schema(NODEPOOL_CRD, "v1"))),
        ("eks.amazonaws.com/v1", "NodeClass"): jsonschema.Draft7Validator(
            json.loads(NODECLASS_SCHEMA.read_text())),
    }


def _is_builtin(api_version: str) -> bool:
    group = api_version.rpartition("/")[0]
    return not group or "." not in group or group.endswith(".k8s.io")


def validate_object(obj: dict[str, Any], k8s_version: str) -> None:
    key = (obj["apiVersion"], obj["kind"])
    if key == ("nvidia.com/v1beta1", "DynamoGraphDeployment"):
        validate_dgd(obj)
    elif key in _custom_validators():
        _custom_validators()[key].validate(obj)
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


def test_unknown_custom_kind_fails() -> None:
    with pytest.raises(pytest.fail.Exception):
        validate_object({"apiVersion": "example.com/v1", "kind": "Widget",
                         "metadata": {"name": "w"}}, K8S_VERSION)
    with pytest.raises(SchemaNotFoundError):
        validate_builtin({"apiVersion": "v1", "kind": "NoSuchKind", "metadata": {"name": "x"}})


def test_a_misspelt_node_pool_field_is_rejected() -> None:
    # a copy: the session's cached run must stay as recorded (tests/test_infra_stability.py)
    pool = copy.deepcopy(next(o for _, o in k8s_objects(run("base-a100-auto"))
                              if o["kind"] == "NodePool"))
    pool["spec"]["template"]["spec"]["nodeclassRef"] = pool["spec"]["template"]["spec"].pop(
        "nodeClassRef")
    with pytest.raises(jsonschema.ValidationError):
        validate_object(pool, K8S_VERSION)
