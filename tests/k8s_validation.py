"""Validation of generated Kubernetes objects (test helpers, shared by the spec and mocks tests).

- Built-in kinds: `kubernetes_validate` strict for the pinned Kubernetes version. An unknown
  kind raises SchemaNotFoundError, which is never caught here: it fails the test.
- DynamoGraphDeployment: jsonschema against the vendored CRD's v1beta1 openAPIV3Schema, made
  strict first. The CRD leaves most object schemas open (no additionalProperties), so a
  misspelled field would pass; `strict_schema` closes every object schema that lists its
  properties, except where the CRD itself asks to keep unknown fields.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from reference import reference_file

K8S_VERSION = "1.35.0"  # the shipped stacks' EKS version (stacks/Pulumi.base-*.yaml)
# Upstream files from the reference folder (tests/reference.py: pinned by sha256; a test that
# needs one skips without the folder, and fails under CI).
DGD_CRD = "crds/nvidia.com_dynamographdeployments.yaml"
PLATFORM_VALUES = "helm/dynamo-platform/values.yaml"


# kubernetes-validate 1.37.0 reads and parses the version's _definitions.json (1.5 MB) and the
# kind's schema on every validate() call (kubernetes_validate/utils.py `validate` calls the
# module's `schema_contents` each time); the files do not change, so each is parsed once.
# jsonschema only reads a schema, never changes it, so the parsed copies can be shared.
kubernetes_validate.utils.schema_contents = cache(kubernetes_validate.utils.schema_contents)


def validate_builtin(obj: dict[str, Any]) -> None:
    """Strict schema validation of a built-in kind; raises on any problem or unknown kind."""
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of an OpenAPI v3 schema in which every object schema with `properties` (and no
    x-kubernetes-preserve-unknown-fields) rejects fields it does not list."""
    out = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                close(item)
            return
        if not isinstance(node, dict):
            return
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for key in ("properties", "patternProperties", "$defs", "definitions"):
            for sub in (node.get(key) or {}).values():
                close(sub)
        for key in ("items", "additionalProperties", "not"):
            close(node.get(key))
        for key in ("allOf", "anyOf", "oneOf"):
            close(node.get(key))

    close(out)
    return out


@cache
def _load_yaml(path: Path) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRD is 1.6 MB of YAML
    return yaml.load(path.read_text(), Loader=loader)


def crd_schema(path: Path | None = None, version: str = "v1beta1") -> dict[str, Any]:
    """The version's openAPIV3Schema (a fresh copy: callers may change it); the Dynamo CRD of
    the reference folder by default."""
    path = path or reference_file(DGD_CRD)
    for v in _load_yaml(path)["spec"]["versions"]:
        if v["name"] == version:
            return copy.deepcopy(v["schema"]["openAPIV3Schema"])
    raise KeyError(f"{path.name} has no version {version}")


@cache
def _dgd_validator(strict: bool) -> jsonschema.Draft7Validator:
    schema = crd_schema()
    return jsonschema.Draft7Validator(strict_schema(schema) if strict else schema)


def dgd_errors(obj: dict[str, Any], *, strict: bool = True) -> list[str]:
    """Every schema violation of a DynamoGraphDeployment, as 'path: message' lines."""
    errors = _dgd_validator(strict).iter_errors(obj)
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


def validate_dgd(obj: dict[str, Any]) -> None:
    assert obj["apiVersion"] == "nvidia.com/v1beta1" and obj["kind"] == "DynamoGraphDeployment"
    errors = dgd_errors(obj)
    assert not errors, "DynamoGraphDeployment does not match the CRD:\n" + "\n".join(errors)


def validate_pod_templates(dgd: dict[str, Any]) -> None:
    """Each component's podTemplate is a core PodTemplateSpec: check it with the Kubernetes
    schema too (quantities, probes, affinity types), which the CRD copy may lag behind."""
    for comp in dgd["spec"]["components"]:
        validate_builtin({"apiVersion": "v1", "kind": "PodTemplate",
                          "metadata": {"name": comp["name"]}, "template": comp["podTemplate"]})
