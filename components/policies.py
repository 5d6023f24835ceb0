"""The dynamo-bench policy pack's policies, as plain resource validations.

Each policy is a `pulumi_policy.ResourceValidationPolicy` whose `validate(args, report)` can be
called directly on a resource's type and inputs, so the tests run them on every resource the
offline harness records, without the Pulumi CLI or a policy server. The pack itself is built
only in components/policy_pack/__main__.py (`pulumi preview --policy-pack
components/policy_pack`): constructing a PolicyPack starts a server and blocks.

A policy sees a resource's inputs (`args.props`, camelCase). Children of remote components
(pulumi-eks, Helm charts) are validated too when the CLI runs the pack; offline only the
component's own inputs exist, so the Service policy also reads Helm values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

from components.conventions import HF_TOKEN_KEY, HF_TOKEN_SECRET
from components.tags import REQUIRED_TAG_KEYS, is_taggable
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.render.offline import HELM_TYPES

NODE_GROUP_TYPES = ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup")
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_CLASS = "kubernetes:eks.amazonaws.com/v1:NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
SERVICE = "kubernetes:core/v1:Service"
EXPOSED_SERVICE_TYPES = ("LoadBalancer", "NodePort")
TOKEN_ENV_NAMES = (HF_TOKEN_KEY, "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACEHUB_API_TOKEN")
# A Hugging Face user access token: "hf_" and 30+ letters/digits.
TOKEN_PATTERN = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")
PROJECT = "dynamo-bench"


def _stack_of(urn: str) -> str | None:
    """urn:pulumi:<stack>::<project>::<type>::<name> -> <stack>."""
    parts = urn.split(":", 2)
    return parts[2].split("::", 1)[0] if len(parts) == 3 and parts[0] == "urn" else None


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) inside nested dicts and lists."""
    yield path, value
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


def _tag_problems(tags: Mapping[str, Any] | None, urn: str, where: str) -> list[str]:
    tags = tags or {}
    missing = [k for k in REQUIRED_TAG_KEYS if not tags.get(k)]
    if missing:
        return [f"{where} lacks the cost tags {missing}"]
    problems = []
    if tags.get("project") != PROJECT:
        problems.append(f"{where} has project={tags.get('project')!r}, not {PROJECT!r}")
    stack = _stack_of(urn)
    if stack and tags.get("stack") != stack:
        problems.append(f"{where} has stack={tags.get('stack')!r}, not {stack!r}")
    return problems


# --- required tags ----------------------------------------------------------------------------

def _validate_tags(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props, urn = args.props, args.urn
    problems: list[str] = []
    if is_taggable(args.resource_type):
        tags = {**(props.get("tagsAll") or {}), **(props.get("tags") or {})}
        problems += _tag_problems(tags, urn, "the resource")
    if args.resource_type == LAUNCH_TEMPLATE:
        # Instances and volumes a node group starts are tagged through the template.
        specs = {s.get("resourceType"): s.get("tags") for s in props.get("tagSpecifications") or []}
        for kind in ("instance", "volume"):
            problems += _tag_problems(specs.get(kind), urn, f"tagSpecifications[{kind}]")
    if args.resource_type == NODE_CLASS:
        problems += _tag_problems((props.get("spec") or {}).get("tags"), urn,
                                  "spec.tags (Auto Mode instances and volumes)")
    for p in problems:
        report(f"{p}: the cost report and the teardown audit find resources by these tags", None)


required_tags = ResourceValidationPolicy(
    name="required-cost-tags",
    description="Every taggable AWS resource, node instance and volume carries the project, "
                "stack and experiment tags.",
    enforcement_level=EnforcementLevel.MANDATORY,
    validate=_validate_tags)


# --- EFS encryption ------------------------------------------------------------------------

def _validate_efs(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == "aws:efs/fileSystem:FileSystem" and args.props.get("encrypted") \
            is not True:
        report("EFS file systems must be encrypted at rest (encrypted: true)", None)


efs_encrypted = ResourceValidationPolicy(
    name="efs-encrypted", description="The model cache file system is encrypted at rest.",
    enforcement_level=EnforcementLevel.MANDATORY, validate=_validate_efs)


# --- no exposed services ---------------------------------------------------------------------

def _exposed_helm_services(values: Mapping[str, Any]) -> list[str]:
    found = []
    for path, value in _walk(values):
        if path.endswith("service.type") and value in EXPOSED_SERVICE_TYPES:
            found.append(f"{path}={value}")
    return found


def _validate_services(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == SERVICE:
        kind = (args.props.get("spec") or {}).get("type")
        if kind in EXPOSED_SERVICE_TYPES:
            name = (args.props.get("metadata") or {}).get("name")
            report(f"Service {name} is {kind}: the frontend, Prometheus and Grafana stay "
                   "ClusterIP (use kubectl port-forward)", None)
    elif args.resource_type in HELM_TYPES:
        for hit in _exposed_helm_services(args.props.get("values") or {}):
            report(f"Helm values {hit}: keep every Service ClusterIP", None)


no_exposed_services = ResourceValidationPolicy(
    name="no-exposed-services",
    description="No Service of type LoadBalancer or NodePort (frontend, Prometheus, Grafana).",
    enforcement_level=EnforcementLevel.MANDATORY, validate=_validate_services)


# --- IMDSv2 ----------------------------------------------------------------------------------

def _validate_imdsv2(args: ResourceValidationArgs, report: ReportViolation) -> None:
    if args.resource_type == LAUNCH_TEMPLATE:
        options = args.props.get("metadataOptions") or {}
        tokens = options.get("httpTokens")
        if tokens != "required":
            report(f"launch template metadataOptions.httpTokens is {tokens!r}: nodes must "
                   "require IMDSv2 (httpTokens: required)", None)
        hops = options.get("httpPutResponseHopLimit")
        if hops != 1:
            report(f"launch template metadataOptions.httpPutResponseHopLimit is {hops!r}: "
                   "keep instance metadata (and the node role) out of pods' reach with 1; "
                   "pods get AWS roles from EKS Pod Identity", None)
    elif args.resource_type in NODE_GROUP_TYPES and not args.props.get("launchTemplate"):
        report("node group without a launch template gets EKS's default, which allows IMDSv1: "
               "give it a launch template with httpTokens: required", None)


imdsv2_required = ResourceValidationPolicy(
    name="imdsv2-required", description="Nodes require IMDSv2 with a hop limit of 1.",
    enforcement_level=EnforcementLevel.MANDATORY, validate=_validate_imdsv2)


# --- HF token only as a secret -----------------------------------------------------------------

def _validate_token(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props = args.props
    is_token_secret = (args.resource_type == "kubernetes:core/v1:Secret"
                       and (props.get("metadata") or {}).get("name") == HF_TOKEN_SECRET)
    for path, value in _walk(props):
        if isinstance(value, Mapping) and value.get("name") in TOKEN_ENV_NAMES \
                and "value" in value:
            report(f"{path}: env {value['name']} is written in plain text; read it from the "
                   f"Secret {HF_TOKEN_SECRET} (valueFrom.secretKeyRef)", None)
        if isinstance(value, str) and not is_token_secret and TOKEN_PATTERN.search(value):
            report(f"{path}: looks like a Hugging Face token in plain text; keep it in the "
                   "Pulumi secret dynamo-bench:hfToken", None)


hf_token_secret_only = ResourceValidationPolicy(
    name="hf-token-secret-only",
    description="The Hugging Face token appears only in its Secret, never as plain text.",
    enforcement_level=EnforcementLevel.MANDATORY, validate=_validate_token)


# --- GPU instance types -----------------------------------------------------------------------

CATALOGUE_TYPES = frozenset(INSTANCE_TYPES)
CATALOGUE_FAMILIES = frozenset(i.family for i in INSTANCE_TYPES.values())


def _pool_problems(props: Mapping[str, Any]) -> list[str]:
    template = ((props.get("spec") or {}).get("template") or {}).get("spec") or {}
    reqs = {r.get("key"): r for r in template.get("requirements") or []}
    types = reqs.get("node.kubernetes.io/instance-type")
    if types is None or types.get("operator") != "In":
        return ["NodePool does not limit node.kubernetes.io/instance-type with In: Auto Mode "
                "could start any instance type"]
    out = [f"instance type {t} is not in the catalogue"
           for t in types.get("values") or [] if t not in CATALOGUE_TYPES]
    families = reqs.get("eks.amazonaws.com/instance-family") or {}
    out += [f"instance family {f} is not in the catalogue"
            for f in families.get("values") or [] if f not in CATALOGUE_FAMILIES]
    return out


def _validate_instance_types(args: ResourceValidationArgs, report: ReportViolation) -> None:
    props, kind = args.props, args.resource_type
    problems: list[str] = []
    if kind in NODE_GROUP_TYPES:
        problems = [f"instance type {t} is not in the catalogue"
                    for t in props.get("instanceTypes") or [] if t not in CATALOGUE_TYPES]
    elif kind == LAUNCH_TEMPLATE and props.get("instanceType") not in (None, *CATALOGUE_TYPES):
        problems = [f"instance type {props['instanceType']} is not in the catalogue"]
    elif kind == NODE_POOL:
        problems = _pool_problems(props)
    for p in problems:
        report(f"{p} (stacks/catalog/instances.py: {', '.join(sorted(CATALOGUE_TYPES))})", None)


catalogue_instance_types = ResourceValidationPolicy(
    name="catalogue-instance-types",
    description="Nodes use only instance types of the stack catalogue (priced, memory-checked).",
    enforcement_level=EnforcementLevel.MANDATORY, validate=_validate_instance_types)


POLICIES = [required_tags, efs_encrypted, no_exposed_services, imdsv2_required,
            hf_token_secret_only, catalogue_instance_types]


def violations(policy: ResourceValidationPolicy, resource_type: str, props: Mapping[str, Any],
               urn: str = "", name: str = "") -> list[str]:
    """Run one policy on one resource's inputs; the messages it reports."""
    found: list[str] = []
    args = ResourceValidationArgs(resource_type=resource_type, props=props, urn=urn, name=name,
                                  opts=None, provider=None)  # type: ignore[arg-type]

    def report(message: str, _urn: str | None = None) -> None:
        found.append(message)
    policy.validate(args, report)
    return found
