"""Teardown audit: who owns each dynamo-bench resource left in AWS, and what that means.

A resource belongs to a stack when it carries the stacks' tags (`project=dynamo-bench` and
`stack=<stack>`), or when an AWS controller made it for the stack's EKS cluster and tagged it
with the cluster name (`dynamo-bench-<stack>`), or when EKS named it after that cluster (its
log groups), or when its parent belongs to the stack (an access point of the stack's file
system, a node group of its cluster). `reports.accounting.audit_listings` finds candidates, service
by service; this module attributes them and decides what a stack's `--delete` may touch.

Categories, for an audit of stack S (`split`):
- S's own: owner S. Deleted by `--delete` unless only a bare `stack=S` tag (no project tag)
  says so: that one might be another tool's, so it is listed and left to a person.
- orphans: the project's (project tag, or made for a dynamo-bench cluster) but with no stack,
  or a stack that has no stack file. Reported apart, never deleted by a stack's `--delete`.
- other stacks': owned by another stack that has a stack file. Counted, never touched.
Everything else in the account is not the project's and is not even listed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

TAG_KEY = "stack"
PROJECT_KEY, PROJECT = "project", "dynamo-bench"
# components.cluster.cluster_name: "dynamo-bench-<stack>" (pinned by tests/test_aws_audit.py).
CLUSTER_PREFIX = f"{PROJECT}-"
# Tags whose value is the EKS cluster a controller made the resource for:
# - eks:cluster-name: EKS managed node groups (their Auto Scaling group, its instances and
#   EKS's copy of the launch template);
# - eks:eks-cluster-name: EKS Auto Mode / Karpenter v1 instances, launch templates and instance
#   profiles (aws/karpenter-provider-aws website/content/en/v1.0/upgrading/v1-migration.md:
#   "karpenter.sh/managed-by ... is replaced by eks:eks-cluster-name");
# - aws:eks:cluster-name: the cluster security group EKS creates;
# - cluster.k8s.amazonaws.com/name: ENIs of the VPC CNI;
# - KubernetesCluster: volumes of the EBS CSI driver run with k8s-tag-cluster-id
#   (kubernetes-sigs/aws-ebs-csi-driver docs/tagging.md);
# - elbv2.k8s.aws/cluster: load balancers and target groups of the AWS Load Balancer Controller.
CLUSTER_NAME_KEYS = ("eks:cluster-name", "eks:eks-cluster-name", "aws:eks:cluster-name",
                     "cluster.k8s.amazonaws.com/name", "KubernetesCluster",
                     "elbv2.k8s.aws/cluster")
# kubernetes.io/cluster/<cluster> = owned (in-tree cloud provider, EBS CSI, Karpenter); "shared"
# marks a resource the cluster only uses (a subnet), which is not the cluster's to delete.
CLUSTER_OWNED_PREFIX = "kubernetes.io/cluster/"
# Log groups EKS (control-plane logging) and Container Insights name after the cluster.
LOG_GROUP_PREFIXES = ("/aws/eks/", "/aws/containerinsights/")

Clients = Callable[[str], Any]   # service name -> boto3 client of the audited region
GLOBAL = "global"                # the "region" of IAM resources

# How a resource was attributed to its stack (Resource.via).
VIA_TAGS = "stack+project tags"
VIA_STACK_TAG_ONLY = "stack tag only (no project tag)"


@dataclass
class Resource:
    kind: str                 # "<service>:<type>", e.g. ec2:volume, eks:nodegroup, iam:role
    id: str                   # what the delete call takes (id, name or ARN), printed whole
    tags: dict[str, str] = field(default_factory=dict)
    name: str = ""
    parent: str = ""          # EKS cluster of a node group, file system of an access point
    found_by: set[str] = field(default_factory=set)
    # Set when a direct listing saw it already gone (terminated instance, deleted NAT
    # gateway), which the tagging API keeps reporting for a while.
    gone: bool = False
    region: str = ""
    owner: str | None = None  # the stack it belongs to (attribute())
    via: str = ""             # how that was decided
    project: bool = False     # the project's (tags or cluster), whoever the stack

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.id


def stack_of_cluster(cluster: str) -> str | None:
    """'dynamo-bench-agg-a100' -> 'agg-a100'; None for a cluster that is not the project's."""
    if cluster.startswith(CLUSTER_PREFIX) and len(cluster) > len(CLUSTER_PREFIX):
        return cluster[len(CLUSTER_PREFIX):]
    return None


def cluster_owner(tags: dict[str, str], name: str = "") -> tuple[str | None, str]:
    """The stack whose EKS cluster a controller made this for, and the evidence."""
    for key in CLUSTER_NAME_KEYS:
        if (stack := stack_of_cluster(tags.get(key, ""))) is not None:
            return stack, f"cluster tag {key}"
    for key, value in tags.items():
        owned = key.startswith(CLUSTER_OWNED_PREFIX) and value == "owned"
        if owned and (stack := stack_of_cluster(key[len(CLUSTER_OWNED_PREFIX):])) is not None:
            return stack, f"cluster tag {key}=owned"
    for prefix in LOG_GROUP_PREFIXES:
        if name.startswith(prefix):
            cluster = name[len(prefix):].split("/")[0]
            if (stack := stack_of_cluster(cluster)) is not None:
                return stack, "log group named after the cluster"
    return None, ""


def attribute(r: Resource) -> Resource:
    """Set owner, via and project from the resource's own tags and name."""
    tags = r.tags
    r.project = tags.get(PROJECT_KEY) == PROJECT
    if tags.get(TAG_KEY):
        r.owner = tags[TAG_KEY]
        r.via = VIA_TAGS if r.project else VIA_STACK_TAG_ONLY
        return r
    owner, via = cluster_owner(tags, r.name)
    if owner is not None:
        r.owner, r.via, r.project = owner, via, True
    return r


def relevant(r: Resource, stack: str | None) -> bool:
    """Whether the audit keeps a candidate at all: the project's, or tagged stack=<stack>."""
    return r.project or (stack is not None and r.owner == stack)


def merge(found: Iterable[Resource]) -> list[Resource]:
    """One record per (kind, id) across listings; children inherit an owner from a parent."""
    merged: dict[tuple[str, str], Resource] = {}
    for r in found:
        have = merged.setdefault(r.key, r)
        if have is not r:
            have.found_by |= r.found_by
            have.name, have.parent = have.name or r.name, have.parent or r.parent
            have.gone |= r.gone
            have.tags = {**r.tags, **have.tags}
    by_id = {r.id: r for r in merged.values()}
    for r in merged.values():
        attribute(r)
    for r in merged.values():
        parent = by_id.get(r.parent)
        if r.owner is None and parent is not None and parent.owner is not None:
            r.owner, r.via, r.project = parent.owner, f"parent {parent.id}", parent.project
    return sorted(merged.values(), key=lambda r: (r.region, order_of(r.kind), r.kind, r.id))


@dataclass
class Split:
    """An audit of one stack: its own resources, the orphans, and other stacks' counts."""

    stack: str
    mine: list[Resource] = field(default_factory=list)
    orphans: list[Resource] = field(default_factory=list)
    others: dict[str, int] = field(default_factory=dict)

    @property
    def deletable(self) -> list[Resource]:
        return deletion_plan(self.mine, self.stack)


def split(resources: Iterable[Resource], stack: str, known: set[str]) -> Split:
    """`known`: stack names that have a stack file."""
    out = Split(stack)
    for r in resources:
        if r.gone:
            continue
        if r.owner == stack:
            out.mine.append(r)
        elif r.project and (r.owner is None or r.owner not in known):
            out.orphans.append(r)
        elif r.project and r.owner is not None:
            out.others[r.owner] = out.others.get(r.owner, 0) + 1
    return out


def stack_tags_present(resources: Iterable[Resource]) -> dict[str, int]:
    """Stack owners among the project's live resources, with counts ('' = no stack)."""
    counts: dict[str, int] = {}
    for r in resources:
        if r.project and not r.gone:
            counts[r.owner or ""] = counts.get(r.owner or "", 0) + 1
    return dict(sorted(counts.items()))


def resource_from_arn(arn: str, tags: dict[str, str]) -> Resource:
    """Kind and delete id of a tagging-API ARN (kinds match the direct listings)."""
    service, res = arn.split(":", 5)[2], arn.split(":", 5)[5]
    segs = res.split("/")
    # resource-type/id, resource-type:id, or a bare id (then the kind is the service)
    rtype = re.split(r"[/:]", res)[0] if re.search(r"[/:]", res) else ""
    kind, rid, parent = f"{service}:{rtype}" if rtype else service, arn, ""
    if service == "ec2" or service == "elasticfilesystem":
        rid = segs[-1]
    elif service == "elasticloadbalancing" and segs[0] == "loadbalancer" and len(segs) == 2:
        kind, rid = "elb:loadbalancer", segs[1]      # classic: loadbalancer/<name>
    elif service == "eks" and segs[0] == "cluster":
        rid = segs[1]
    elif service == "eks" and segs[0] == "nodegroup":
        rid, parent = segs[2], segs[1]               # nodegroup/<cluster>/<name>/<uuid>
    elif service == "eks" and len(segs) > 1:
        parent = segs[1]                             # addon/<cluster>/..., access-entry/...
    elif service == "autoscaling" and "autoScalingGroupName/" in res:
        rid = res.split("autoScalingGroupName/", 1)[1]
    return Resource(kind, rid, dict(tags), name=tags.get("Name", ""), parent=parent,
                    found_by={"tagging-api"})


# Dependency order of deletion; kinds not listed have no automatic deletion.
DELETE_ORDER = (
    # EKS children that go with their cluster (skipped; the re-audit shows if one stayed)
    "eks:addon", "eks:podidentityassociation", "eks:access-entry",
    "eks:nodegroup", "eks:cluster", "autoscaling:autoScalingGroup",
    "elasticloadbalancing:listener", "elasticloadbalancing:loadbalancer", "elb:loadbalancer",
    "elasticloadbalancing:targetgroup",
    "ec2:instance", "ec2:placement-group", "ec2:natgateway",
    "elasticfilesystem:access-point", "elasticfilesystem:file-system",
    "ec2:network-interface", "ec2:volume", "ec2:snapshot", "ec2:elastic-ip",
    "ec2:launch-template", "ec2:security-group", "ec2:internet-gateway", "ec2:route-table",
    "ec2:subnet", "ec2:vpc", "logs:log-group",
    # IAM last: node groups and clusters use their roles until they are gone
    "iam:instance-profile", "iam:role", "iam:policy", "iam:oidc-provider",
)


def order_of(kind: str) -> int:
    return DELETE_ORDER.index(kind) if kind in DELETE_ORDER else len(DELETE_ORDER)


def may_delete(r: Resource, stack: str) -> bool:
    """The guard every deletion passes: the stack's own, by more than a bare stack tag.
    A resource built by hand (no owner yet) is attributed from its tags first."""
    if r.owner is None:
        attribute(r)
    return r.owner == stack and r.via != VIA_STACK_TAG_ONLY and not r.gone


def deletion_plan(resources: Iterable[Resource], stack: str) -> list[Resource]:
    """Only what `may_delete` allows, in dependency order."""
    return sorted((r for r in resources if may_delete(r, stack)),
                  key=lambda r: (order_of(r.kind), r.id))
