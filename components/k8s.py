"""Turn plain Kubernetes object dicts (built by the pure spec modules) into Pulumi resources.

Built-in kinds become the typed pulumi_kubernetes class (`core.v1.Secret`, `batch.v1.Job`, ...)
so Pulumi tracks them with the right type token, awaits their readiness and marks Secret data
secret; custom resources (DynamoGraphDeployment, NodePool, NodeClass) become
`apiextensions.CustomResource`. One resource per object: the policy pack and the offline
harness see every object's full spec.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _is_builtin_group(group: str) -> bool:
    return group == "core" or "." not in group or group.endswith(".k8s.io")


def typed_class(api_version: str, kind: str) -> type | None:
    """The pulumi_kubernetes class of a built-in kind, or None for a custom resource."""
    group, _, version = api_version.rpartition("/")
    group = group or "core"
    if not _is_builtin_group(group):
        return None
    try:
        module = importlib.import_module(f"pulumi_kubernetes.{group.split('.')[0]}.{version}")
    except ImportError:
        return None
    return getattr(module, kind, None)


def resource_name(obj: dict[str, Any]) -> str:
    """A stack-unique Pulumi name: kind, namespace and object name."""
    meta = obj.get("metadata", {})
    parts = [obj["kind"].lower(), meta.get("namespace"), meta["name"]]
    return "-".join(p for p in parts if p)


def create_object(obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """One Pulumi resource for one Kubernetes object dict."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    name = resource_name(obj)
    cls = typed_class(api_version, kind)
    if cls is None:
        extra = {k: v for k, v in fields.items() if k not in ("metadata", "spec")}
        if extra:
            # CustomResource only carries metadata and spec; anything else would be dropped.
            raise ValueError(f"{kind} {name}: top-level fields {sorted(extra)} are not supported "
                             "on custom resources")
        return k8s.apiextensions.CustomResource(name, api_version=api_version, kind=kind,
                                                metadata=fields.get("metadata"),
                                                spec=fields.get("spec"), opts=opts)
    kwargs = {_CAMEL.sub("_", k).lower(): v for k, v in fields.items()}
    return cls(name, opts=opts, **kwargs)


def create_objects(objs: list[dict[str, Any]],
                   opts: pulumi.ResourceOptions) -> list[pulumi.CustomResource]:
    return [create_object(o, opts) for o in objs]
