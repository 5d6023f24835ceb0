"""Teardown audit: every AWS resource still tagged stack=<stack> in a region, and its removal.

Listing = the Resource Groups Tagging API plus direct listings of what it misses or reports
late (EKS clusters and node groups, EFS file systems and access points, EBS volumes, classic
and v2 load balancers, ENIs, instances, security groups, NAT gateways, Elastic IPs, launch
templates, internet gateways, route tables, subnets, VPCs). Volumes and load balancers that
Kubernetes controllers create are found when the cluster passes the stack tag to them.

Deletion (`reports.audit_delete`) touches only resources whose tags, as read, carry
stack=<stack>; it goes in dependency order (node groups before clusters, load balancers and
instances before the network they use), waits where AWS deletes asynchronously, and reports
every failure. Parts that cannot carry tags go with their tagged owner: an EFS file system's
mount targets, an internet gateway's VPC attachment, a route table's subnet associations,
security-group rules that point at each other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

TAG_KEY = "stack"
Clients = Callable[[str], Any]   # service name -> boto3 client of the audited region


@dataclass
class Resource:
    kind: str                 # "<service>:<type>", e.g. ec2:volume, eks:nodegroup
    id: str                   # what the delete call takes (id, name or ARN)
    tags: dict[str, str] = field(default_factory=dict)
    name: str = ""
    parent: str = ""          # EKS cluster of a node group, file system of an access point
    found_by: set[str] = field(default_factory=set)
    # Set when a direct listing saw it already gone (terminated instance, deleted NAT
    # gateway), which the tagging API keeps reporting for a while.
    gone: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.id


def carries(tags: dict[str, str], stack: str) -> bool:
    return tags.get(TAG_KEY) == stack


def _tags(items: Iterable[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or []}


def _pages(client: Any, method: str, key: str, **kw: Any) -> Iterator[dict[str, Any]]:
    if client.can_paginate(method):
        for page in client.get_paginator(method).paginate(**kw):
            yield from page.get(key, [])
    else:
        yield from getattr(client, method)(**kw).get(key, [])


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
    return Resource(kind, rid, tags, name=tags.get("Name", ""), parent=parent,
                    found_by={"tagging-api"})


def list_tagging_api(c: Clients, stack: str) -> list[Resource]:
    return [resource_from_arn(m["ResourceARN"], _tags(m.get("Tags")))
            for m in _pages(c("resourcegroupstaggingapi"), "get_resources",
                            "ResourceTagMappingList",
                            TagFilters=[{"Key": TAG_KEY, "Values": [stack]}])]


# kind, describe method, result key, id key, filter parameter, tags key, states already gone
_EC2 = [
    ("ec2:instance", "describe_instances", "Reservations", "InstanceId", "Filters", "Tags",
     ("terminated",)),
    ("ec2:volume", "describe_volumes", "Volumes", "VolumeId", "Filters", "Tags", ()),
    ("ec2:network-interface", "describe_network_interfaces", "NetworkInterfaces",
     "NetworkInterfaceId", "Filters", "TagSet", ()),
    ("ec2:security-group", "describe_security_groups", "SecurityGroups", "GroupId", "Filters",
     "Tags", ()),
    ("ec2:natgateway", "describe_nat_gateways", "NatGateways", "NatGatewayId", "Filter",
     "Tags", ("deleted",)),
    ("ec2:elastic-ip", "describe_addresses", "Addresses", "AllocationId", "Filters", "Tags", ()),
    ("ec2:launch-template", "describe_launch_templates", "LaunchTemplates", "LaunchTemplateId",
     "Filters", "Tags", ()),
    ("ec2:internet-gateway", "describe_internet_gateways", "InternetGateways",
     "InternetGatewayId", "Filters", "Tags", ()),
    ("ec2:route-table", "describe_route_tables", "RouteTables", "RouteTableId", "Filters",
     "Tags", ()),
    ("ec2:subnet", "describe_subnets", "Subnets", "SubnetId", "Filters", "Tags", ()),
    ("ec2:vpc", "describe_vpcs", "Vpcs", "VpcId", "Filters", "Tags", ()),
]


def _state(item: dict[str, Any]) -> str:
    s = item.get("State")
    return s.get("Name", "") if isinstance(s, dict) else s or ""


def list_ec2(c: Clients, stack: str) -> list[Resource]:
    ec2, out = c("ec2"), []
    for kind, method, key, id_key, fparam, tkey, gone in _EC2:
        items = _pages(ec2, method, key, **{fparam: [{"Name": f"tag:{TAG_KEY}",
                                                      "Values": [stack]}]})
        if kind == "ec2:instance":
            items = (i for r in items for i in r["Instances"])
        for item in items:
            tags = _tags(item.get(tkey))
            if carries(tags, stack):
                out.append(Resource(kind, item[id_key], tags, name=tags.get("Name", ""),
                                    found_by={"ec2"}, gone=_state(item) in gone))
    return out


def list_eks(c: Clients, stack: str) -> list[Resource]:
    eks, out = c("eks"), []
    for name in _pages(eks, "list_clusters", "clusters"):
        tags = eks.describe_cluster(name=name)["cluster"].get("tags") or {}
        if carries(tags, stack):
            out.append(Resource("eks:cluster", name, tags, name=name, found_by={"eks"}))
        for ng in _pages(eks, "list_nodegroups", "nodegroups", clusterName=name):
            ng_tags = eks.describe_nodegroup(clusterName=name, nodegroupName=ng)[
                "nodegroup"].get("tags") or {}
            if carries(ng_tags, stack):
                out.append(Resource("eks:nodegroup", ng, ng_tags, name=ng, parent=name,
                                    found_by={"eks"}))
    return out


def list_efs(c: Clients, stack: str) -> list[Resource]:
    efs, out = c("efs"), []
    for fs in _pages(efs, "describe_file_systems", "FileSystems"):
        tags = _tags(fs.get("Tags"))
        if carries(tags, stack):
            out.append(Resource("elasticfilesystem:file-system", fs["FileSystemId"], tags,
                                name=fs.get("Name", ""), found_by={"efs"}))
    for ap in _pages(efs, "describe_access_points", "AccessPoints"):
        tags = _tags(ap.get("Tags"))
        if carries(tags, stack):
            out.append(Resource("elasticfilesystem:access-point", ap["AccessPointId"], tags,
                                name=ap.get("Name", ""), parent=ap.get("FileSystemId", ""),
                                found_by={"efs"}))
    return out


def _chunks(items: list[str], n: int = 20) -> Iterator[list[str]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def list_load_balancers(c: Clients, stack: str) -> list[Resource]:
    out = []
    v2 = c("elbv2")
    kinds = {a["LoadBalancerArn"]: "elasticloadbalancing:loadbalancer"
             for a in _pages(v2, "describe_load_balancers", "LoadBalancers")}
    kinds.update({t["TargetGroupArn"]: "elasticloadbalancing:targetgroup"
                  for t in _pages(v2, "describe_target_groups", "TargetGroups")})
    for chunk in _chunks(list(kinds)):
        for d in v2.describe_tags(ResourceArns=chunk)["TagDescriptions"]:
            tags = _tags(d.get("Tags"))
            if carries(tags, stack):
                arn = d["ResourceArn"]
                out.append(Resource(kinds[arn], arn, tags, name=arn.split("/")[-2],
                                    found_by={"elbv2"}))
    classic = c("elb")
    names = [d["LoadBalancerName"] for d in
             _pages(classic, "describe_load_balancers", "LoadBalancerDescriptions")]
    for chunk in _chunks(names):
        for d in classic.describe_tags(LoadBalancerNames=chunk)["TagDescriptions"]:
            tags = _tags(d.get("Tags"))
            if carries(tags, stack):
                out.append(Resource("elb:loadbalancer", d["LoadBalancerName"], tags,
                                    name=d["LoadBalancerName"], found_by={"elb"}))
    return out


LISTINGS = (list_tagging_api, list_eks, list_efs, list_load_balancers, list_ec2)


def audit(c: Clients, stack: str) -> list[Resource]:
    """Every resource in the region still tagged stack=<stack>, merged across listings."""
    merged: dict[tuple[str, str], Resource] = {}
    for listing in LISTINGS:
        for r in listing(c, stack):
            have = merged.setdefault(r.key, r)
            if have is not r:
                have.found_by |= r.found_by
                have.name, have.parent = have.name or r.name, have.parent or r.parent
                have.gone |= r.gone
    return sorted((r for r in merged.values() if not r.gone),
                  key=lambda r: (order_of(r.kind), r.kind, r.id))


# Dependency order of deletion; kinds not listed have no automatic deletion.
DELETE_ORDER = (
    "eks:nodegroup", "eks:cluster",
    "elasticloadbalancing:listener", "elasticloadbalancing:loadbalancer", "elb:loadbalancer",
    "elasticloadbalancing:targetgroup",
    "ec2:instance", "ec2:natgateway",
    "elasticfilesystem:access-point", "elasticfilesystem:file-system",
    "ec2:network-interface", "ec2:volume", "ec2:elastic-ip", "ec2:launch-template",
    "ec2:security-group", "ec2:internet-gateway", "ec2:route-table", "ec2:subnet", "ec2:vpc",
)


def order_of(kind: str) -> int:
    return DELETE_ORDER.index(kind) if kind in DELETE_ORDER else len(DELETE_ORDER)


def deletion_plan(resources: Iterable[Resource], stack: str) -> list[Resource]:
    """Only what carries stack=<stack>, in dependency order (the guard every delete passes)."""
    return sorted((r for r in resources if carries(r.tags, stack)),
                  key=lambda r: (order_of(r.kind), r.id))
