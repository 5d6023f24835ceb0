"""Pre-flight checks of the values AWS itself would refuse (pure, offline).

- region: one where EKS and EFS are offered, from botocore's bundled endpoint data (the
  installed botocore's partitions: aws, aws-cn, aws-us-gov, ...);
- zones: a node group's availabilityZone belongs to the stack's region (`<region><letter>`;
  which letters exist is only known to the account, the program asks AWS at deploy time);
- VPC CIDR: an IPv4 network without host bits, /16 to /28 as AWS allows a VPC, and no
  smaller than /22 here because the subnet plan (components.node_specs.subnet_plan) carves
  public subnets of 1/64 of it and AWS's smallest subnet is a /28;
- EKS version: one EKS offers on the estimate date (stacks.catalog.eks_versions);
- EKS cluster name: `dynamo-bench-<stack>`: "can contain only alphanumeric characters
  (case-sensitive), hyphens, and underscores. It must start with an alphanumeric character
  and can't be longer than 100 characters" (EKS CreateCluster API reference, `name`);
- tags: AWS's tag rules ("Tag naming limits and requirements", AWS tagging docs): keys 1-128
  and values 0-256 Unicode characters of letters, digits, spaces and `_ . : / = + - @`; no key
  or value starting with `aws:` "or any upper or lowercase combination of such"; at most 50
  user tags per resource;
- provider config that contradicts the stack (`aws:region` other than cluster.region);
- EFA groups outside the aws partition: the EFA device plugin's image is in the aws
  partition's ECR (EFA_PLUGIN_IMAGE).
"""

from __future__ import annotations

import datetime as dt
import difflib
import functools
import ipaddress
import re
from typing import Any

import boto3
import botocore

from stacks.catalog.eks_versions import version_problem
from stacks.config.errors import Problem
from stacks.config.schema import ComputeMode, StackConfig
from stacks.config.stack_file import PROJECT
from stacks.conventions.efa_groups import uses_efa

P = f"{PROJECT}:"
TAG_CHARS = "letters, digits, spaces and _ . : / = + - @"
_TAG_TEXT = re.compile(r"[\w .:/=+\-@]*")
MAX_USER_TAGS = 50
RESERVED_TAG_KEYS = ("project", "stack", "experiment")
# Prefixes AWS, Kubernetes and Auto Mode reserve: a NodeClass refuses tags carrying them
# (components.tags applies the same list when it builds the tags).
RESERVED_TAG_PREFIXES = ("aws:", "kubernetes.io/cluster/", "karpenter.sh/", "eks.amazonaws.com/")


def ebs_tag_problem(key: str, value: str) -> str | None:
    """Why a tag cannot travel as an EBS CSI StorageClass `tagSpecification_<n>: key=value`
    parameter (the driver splits on the first '=' and expands '{{ }}' templates), or None."""
    if "=" in key or "{{" in key or "{{" in value:
        return ("EBS CSI tag parameters split on the first '=' of 'key=value' and expand "
                "'{{': the EBS volumes would get another tag")
    return None
VPC_PREFIX_RANGE = (16, 22)
_EKS_CLUSTER_NAME = re.compile(r"[0-9A-Za-z][A-Za-z0-9_-]{0,99}")


@functools.cache
def eks_regions() -> tuple[str, ...]:
    """Regions (every partition botocore knows) where both EKS and EFS have endpoints."""
    session = boto3.session.Session()
    out: set[str] = set()
    for partition in session.get_available_partitions():
        eks = set(session.get_available_regions("eks", partition))
        out |= eks & set(session.get_available_regions("efs", partition))
    return tuple(sorted(out))


def eks_cluster_name(stack: StackConfig) -> str:
    """The EKS cluster a stack that owns its cluster creates (components.cluster uses it)."""
    return f"dynamo-bench-{stack.name}"


def _check_region(region: str, out: list[Problem]) -> bool:
    regions = eks_regions()
    if region in regions:
        return True
    near = difflib.get_close_matches(region, regions, n=3, cutoff=0.6) or ["us-east-1"]
    out.append(Problem(f"{P}cluster.region", f"'{region}' is not an AWS region where EKS and "
                       f"EFS are offered (botocore {botocore.__version__} endpoint data, "
                       f"{len(regions)} regions)", f"use one such as {', '.join(near)}"))
    return False


# The EFA device plugin chart's image (aws/eks-charts stable/aws-efa-k8s-device-plugin
# values.yaml, image.repository, read at commit 050f81ee), in the aws partition's EKS registry.
# EKS's registries "require authentication with an AWS IAM account. Your nodes authenticate
# using the Amazon EKS node IAM role", and the China and GovCloud regions have registries of
# their own (cn-north-1: 918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn; docs.aws.amazon.com
# /eks/latest/userguide/add-ons-images.html): a node role of another partition cannot pull it
# (aws.md M4).
EFA_PLUGIN_IMAGE = "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin"


def _check_efa_partition(stack: StackConfig, region: str, out: list[Problem]) -> None:
    """The program installs the EFA device plugin for its EFA groups on node groups (Auto Mode
    brings AWS's own); outside the aws partition its image cannot be pulled."""
    if stack.cluster.compute_mode == ComputeMode.AUTO:
        return
    partition = boto3.session.Session().get_partition_for_region(region)
    if partition == "aws":
        return
    for i, g in enumerate(stack.cluster.node_groups):
        if uses_efa(g, stack):
            out.append(Problem(f"{P}cluster.nodeGroups[{i}]", f"{g.name} gets EFA, whose "
                               f"device plugin image {EFA_PLUGIN_IMAGE} is in the aws "
                               f"partition's ECR: {region} is in {partition}, whose nodes "
                               "cannot pull it", "use a region of the aws partition, or a "
                               "group without EFA (no NIXL over LIBFABRIC)"))


def _check_zones(stack: StackConfig, region: str, out: list[Problem]) -> None:
    for i, g in enumerate(stack.cluster.node_groups):
        zone = g.availability_zone
        if zone is not None and not re.fullmatch(re.escape(region) + "[a-z]", zone):
            out.append(Problem(f"{P}cluster.nodeGroups[{i}].availabilityZone", f"'{zone}' is not "
                               f"a zone of region {region} (its zones are {region}a, "
                               f"{region}b, ...)", f"use a zone of {region}, such as {region}a"))


def _check_vpc(stack: StackConfig, out: list[Problem]) -> None:
    vpc, f = stack.cluster.vpc, f"{P}cluster.vpc"
    if vpc.id is not None:
        if "cidr" in vpc.model_fields_set:
            out.append(Problem(f"{f}.cidr", f"is ignored with vpc.id {vpc.id}: the existing "
                               "VPC's own CIDR is used", "remove cidr, or drop vpc.id"))
        return
    try:
        net = ipaddress.IPv4Network(vpc.cidr, strict=True)
    except ValueError as exc:
        out.append(Problem(f"{f}.cidr", f"'{vpc.cidr}' is not an IPv4 network: {exc}",
                           "write an IPv4 network with no host bits set, e.g. 10.42.0.0/16"))
        return
    low, high = VPC_PREFIX_RANGE
    if not low <= net.prefixlen <= high:
        out.append(Problem(f"{f}.cidr", f"/{net.prefixlen} is outside /{low}../{high}: AWS "
                           "allows a VPC of /16 to /28, and the subnet plan needs 8 private "
                           "eighths plus public subnets of 1/64 (at least /28 each)",
                           f"use a prefix from /{low} to /{high}, e.g. 10.42.0.0/16"))
    if not net.is_private:
        out.append(Problem(f"{f}.cidr", f"{net} is a public (internet-routable) range: pods "
                           "and nodes would shadow real addresses on the internet",
                           "use a private range (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16)"))


def _tag_text_problem(text: str, what: str, limit: int) -> str | None:
    if len(text) > limit:
        return f"{what} is {len(text)} characters; AWS allows at most {limit}"
    if not _TAG_TEXT.fullmatch(text):
        bad = sorted({c for c in text if not _TAG_TEXT.fullmatch(c)})
        return f"{what} contains {' '.join(repr(c) for c in bad)}; AWS allows {TAG_CHARS}"
    if text.lower().startswith("aws:"):
        return f"{what} starts with '{text[:4]}', a prefix AWS reserves in any letter case"
    reserved = next((p for p in RESERVED_TAG_PREFIXES if text.startswith(p)), None)
    if reserved and what == "the key":
        return f"{what} starts with '{reserved}', a prefix Kubernetes / EKS Auto Mode reserve"
    return None


def _check_tags(stack: StackConfig, out: list[Problem]) -> None:
    tags = stack.tags
    fields = {"stack": ("stack (the stack name)", stack.name),
              "experiment": (f"{P}tags.experiment", tags.experiment)}
    for key, (where, value) in fields.items():
        why = _tag_text_problem(value, f"the value of tag '{key}'", 256)
        if why:
            out.append(Problem(where, why, "change it to fit AWS's tag rules"))
    for key, value in tags.extra.items():
        where = f"{P}tags.extra.{key}"
        if key in RESERVED_TAG_KEYS:
            out.append(Problem(where, f"tag '{key}' is reserved (dynamo-bench sets it)",
                               "use another key"))
            continue
        why = (("the key is empty" if not key else None)
               or _tag_text_problem(key, "the key", 128)
               or _tag_text_problem(value, "the value", 256)
               or ebs_tag_problem(key, value))
        if why:
            out.append(Problem(where, why, "change it to fit AWS's tag rules"))
    if len(stack.resource_tags()) > MAX_USER_TAGS:
        out.append(Problem(f"{P}tags.extra", f"{len(stack.resource_tags())} tags per resource; "
                           f"AWS allows {MAX_USER_TAGS}", "drop some extra tags"))


def _check_cluster_name(stack: StackConfig, out: list[Problem]) -> None:
    name = eks_cluster_name(stack)
    if not _EKS_CLUSTER_NAME.fullmatch(name):
        out.append(Problem("stack (the stack name)", f"the EKS cluster name '{name}' breaks "
                           "EKS's rule: up to 100 letters, digits, '-' and '_', starting with "
                           "a letter or digit", "rename the stack file (letters, digits, '-')"))


def _check_provider_config(stack: StackConfig, region: str,
                           provider_config: dict[str, Any], out: list[Problem]) -> None:
    said = provider_config.get("aws:region")
    if said is not None and said != region:
        out.append(Problem("aws:region", f"says {said}, but the stack builds in {region} "
                           "(cluster.region): one file, two regions",
                           f"remove aws:region or set it to {region}"))


def check_aws(stack: StackConfig, region: str, *, on: dt.date, owns_cluster: bool,
              provider_config: dict[str, Any] | None = None) -> list[Problem]:
    """AWS's own rules for a stack that runs on AWS (target aws) in `region`."""
    out: list[Problem] = []
    _check_tags(stack, out)
    _check_provider_config(stack, region, provider_config or {}, out)
    if not owns_cluster:
        _check_zones(stack, region, out)  # a variant's extra groups live in its base's region
        return out
    if _check_region(region, out):
        _check_zones(stack, region, out)
        _check_efa_partition(stack, region, out)
    _check_vpc(stack, out)
    _check_cluster_name(stack, out)
    why = version_problem(stack.cluster.eks_version, on)
    if why:
        out.append(Problem(f"{P}cluster.eksVersion", why, "use a version EKS offers"))
    return out
