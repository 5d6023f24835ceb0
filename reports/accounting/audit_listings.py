"""Where the audit looks: one listing per kind of resource the stacks (and the controllers they
install) create, through the service's own API, plus the Resource Groups Tagging API.

What the stacks create (components/): VPC, subnets, route tables, internet gateway, NAT
gateway and its Elastic IP (network.py); the EKS cluster, its IAM roles and node role, pod
identity add-on (cluster.py); managed node groups with launch templates and, on EFA groups,
cluster placement groups (nodegroups.py); EFS with mount targets, its security group, the CSI
add-ons and their IAM roles (storage.py). What controllers then make: node instances, their
volumes and ENIs, the node groups' Auto Scaling groups and launch-template copies (EKS), the
cluster security group and control-plane ENIs (EKS), log groups (EKS control-plane logging,
Container Insights), EBS volumes and snapshots (EBS CSI), EFS access points (EFS CSI, tagged
`efs.csi.aws.com/cluster=true` plus its configured tags: kubernetes-sigs/aws-efs-csi-driver
pkg/driver/provisioner_ap.go), load balancers (if a Service asks for one), Auto Mode instance
profiles. OIDC providers and customer-managed IAM policies are listed too (the stacks use Pod
Identity, but a user's additions are exactly what gets forgotten).

The tagging API does not return IAM, EKS node groups reliably, Elastic IPs or launch templates
in every account, and reports deleted resources for a while, so each kind is also listed
directly. A listing that fails is reported by name: the audit is then incomplete, never clean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from reports.accounting.audit import (
    GLOBAL,
    LOG_GROUP_PREFIXES,
    PROJECT,
    PROJECT_KEY,
    TAG_KEY,
    Clients,
    Resource,
    merge,
    relevant,
    resource_from_arn,
)

Listing = Callable[[Clients], Iterable[Resource]]


def tag_map(items: Iterable[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or []}


def pages(client: Any, method: str, key: str, **kw: Any) -> Iterator[Any]:
    """Every item under `key` of every page: a dict per resource from a describe_* call, a
    name from a list_* call (list_clusters, list_nodegroups)."""
    if client.can_paginate(method):
        for page in client.get_paginator(method).paginate(**kw):
            yield from page.get(key, [])
    else:
        yield from getattr(client, method)(**kw).get(key, [])


def _chunks(items: list[str], n: int = 20) -> Iterator[list[str]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def tagging_api(stack: str | None) -> Listing:
    """Everything tagged project=dynamo-bench, and (for one stack) stack=<stack>."""
    filters = [[{"Key": PROJECT_KEY, "Values": [PROJECT]}]]
    if stack is not None:
        filters.append([{"Key": TAG_KEY, "Values": [stack]}])

    def listing(c: Clients) -> Iterator[Resource]:
        for tag_filter in filters:
            for m in pages(c("resourcegroupstaggingapi"), "get_resources",
                           "ResourceTagMappingList", TagFilters=tag_filter):
                yield resource_from_arn(m["ResourceARN"], tag_map(m.get("Tags")))
    return listing


# kind, describe method, result key, id key, tags key, states already gone, extra arguments
_EC2 = [
    ("ec2:instance", "describe_instances", "Reservations", "InstanceId", "Tags",
     ("terminated",), {}),
    ("ec2:volume", "describe_volumes", "Volumes", "VolumeId", "Tags", (), {}),
    ("ec2:snapshot", "describe_snapshots", "Snapshots", "SnapshotId", "Tags", (),
     {"OwnerIds": ["self"]}),
    ("ec2:network-interface", "describe_network_interfaces", "NetworkInterfaces",
     "NetworkInterfaceId", "TagSet", (), {}),
    ("ec2:security-group", "describe_security_groups", "SecurityGroups", "GroupId", "Tags",
     (), {}),
    ("ec2:natgateway", "describe_nat_gateways", "NatGateways", "NatGatewayId", "Tags",
     ("deleted",), {}),
    ("ec2:elastic-ip", "describe_addresses", "Addresses", "AllocationId", "Tags", (), {}),
    ("ec2:launch-template", "describe_launch_templates", "LaunchTemplates", "LaunchTemplateId",
     "Tags", (), {}),
    # A placement group is deleted by name; its ARN ends in the name too.
    ("ec2:placement-group", "describe_placement_groups", "PlacementGroups", "GroupName",
     "Tags", ("deleted",), {}),
    ("ec2:internet-gateway", "describe_internet_gateways", "InternetGateways",
     "InternetGatewayId", "Tags", (), {}),
    ("ec2:route-table", "describe_route_tables", "RouteTables", "RouteTableId", "Tags", (), {}),
    ("ec2:subnet", "describe_subnets", "Subnets", "SubnetId", "Tags", (), {}),
    ("ec2:vpc", "describe_vpcs", "Vpcs", "VpcId", "Tags", (), {}),
]


def _state(item: dict[str, Any]) -> str:
    s = item.get("State")
    return s.get("Name", "") if isinstance(s, dict) else s or ""


def _ec2_listing(kind: str, method: str, key: str, id_key: str, tkey: str,
                 gone: tuple[str, ...], extra: dict[str, Any]) -> Listing:
    def listing(c: Clients) -> Iterator[Resource]:
        items = pages(c("ec2"), method, key, **extra)
        if kind == "ec2:instance":
            items = (i for r in items for i in r["Instances"])
        for item in items:
            tags = tag_map(item.get(tkey))
            yield Resource(kind, item[id_key], tags, name=tags.get("Name", ""),
                           found_by={"ec2"}, gone=_state(item) in gone)
    return listing


def list_eks(c: Clients) -> Iterator[Resource]:
    eks = c("eks")
    for name in pages(eks, "list_clusters", "clusters"):
        tags = eks.describe_cluster(name=name)["cluster"].get("tags") or {}
        yield Resource("eks:cluster", name, tags, name=name, found_by={"eks"})
        for ng in pages(eks, "list_nodegroups", "nodegroups", clusterName=name):
            ng_tags = eks.describe_nodegroup(clusterName=name, nodegroupName=ng)[
                "nodegroup"].get("tags") or {}
            yield Resource("eks:nodegroup", ng, ng_tags, name=ng, parent=name,
                           found_by={"eks"})


def list_efs(c: Clients) -> Iterator[Resource]:
    efs = c("efs")
    for fs in pages(efs, "describe_file_systems", "FileSystems"):
        yield Resource("elasticfilesystem:file-system", fs["FileSystemId"],
                       tag_map(fs.get("Tags")), name=fs.get("Name", ""), found_by={"efs"})
    for ap in pages(efs, "describe_access_points", "AccessPoints"):
        yield Resource("elasticfilesystem:access-point", ap["AccessPointId"],
                       tag_map(ap.get("Tags")), name=ap.get("Name", ""),
                       parent=ap.get("FileSystemId", ""), found_by={"efs"})


def list_elbv2(c: Clients) -> Iterator[Resource]:
    v2 = c("elbv2")
    kinds = {a["LoadBalancerArn"]: "elasticloadbalancing:loadbalancer"
             for a in pages(v2, "describe_load_balancers", "LoadBalancers")}
    kinds.update({t["TargetGroupArn"]: "elasticloadbalancing:targetgroup"
                  for t in pages(v2, "describe_target_groups", "TargetGroups")})
    for chunk in _chunks(list(kinds)):
        for d in v2.describe_tags(ResourceArns=chunk)["TagDescriptions"]:
            arn = d["ResourceArn"]
            yield Resource(kinds[arn], arn, tag_map(d.get("Tags")), name=arn.split("/")[-2],
                           found_by={"elbv2"})


def list_elb(c: Clients) -> Iterator[Resource]:
    classic = c("elb")
    names = [d["LoadBalancerName"] for d in
             pages(classic, "describe_load_balancers", "LoadBalancerDescriptions")]
    for chunk in _chunks(names):
        for d in classic.describe_tags(LoadBalancerNames=chunk)["TagDescriptions"]:
            yield Resource("elb:loadbalancer", d["LoadBalancerName"], tag_map(d.get("Tags")),
                           name=d["LoadBalancerName"], found_by={"elb"})


def list_autoscaling(c: Clients) -> Iterator[Resource]:
    for g in pages(c("autoscaling"), "describe_auto_scaling_groups", "AutoScalingGroups"):
        name = g["AutoScalingGroupName"]
        yield Resource("autoscaling:autoScalingGroup", name, tag_map(g.get("Tags")),
                       name=name, found_by={"autoscaling"},
                       gone=g.get("Status") == "Delete in progress")


def list_log_groups(c: Clients) -> Iterator[Resource]:
    """Log groups EKS and Container Insights name after a cluster (EKS does not tag them);
    tagged ones elsewhere come from the tagging API."""
    logs = c("logs")
    for prefix in LOG_GROUP_PREFIXES:
        for g in pages(logs, "describe_log_groups", "logGroups", logGroupNamePrefix=prefix):
            arn = g.get("logGroupArn") or g["arn"].removesuffix(":*")
            tags = logs.list_tags_for_resource(resourceArn=arn).get("tags") or {}
            yield Resource("logs:log-group", arn, tags, name=g["logGroupName"],
                           found_by={"logs"})


def regional_listings(stack: str | None) -> list[tuple[str, Listing]]:
    """(label, listing) for one region; each is called and may fail on its own."""
    return [("tagging API", tagging_api(stack)), ("EKS", list_eks), ("EFS", list_efs),
            ("load balancers (v2)", list_elbv2), ("classic load balancers", list_elb),
            ("Auto Scaling groups", list_autoscaling), ("log groups", list_log_groups),
            *((spec[0], _ec2_listing(*spec)) for spec in _EC2)]


# --- IAM (global) ----------------------------------------------------------------------------

def _iam(kind: str, arn: str, name: str, tags: Iterable[dict[str, str]] | None) -> Resource:
    return Resource(kind, arn, tag_map(tags), name=name, found_by={"iam"}, region=GLOBAL)


def list_roles(c: Clients) -> Iterator[Resource]:
    iam = c("iam")
    for role in pages(iam, "list_roles", "Roles"):
        if role.get("Path", "/").startswith("/aws-service-role/"):
            continue  # service-linked roles belong to AWS services, never to a stack
        full = iam.get_role(RoleName=role["RoleName"])["Role"]   # ListRoles omits tags
        yield _iam("iam:role", role["Arn"], role["RoleName"], full.get("Tags"))


def list_instance_profiles(c: Clients) -> Iterator[Resource]:
    iam = c("iam")
    for p in pages(iam, "list_instance_profiles", "InstanceProfiles"):
        full = iam.get_instance_profile(InstanceProfileName=p["InstanceProfileName"])[
            "InstanceProfile"]
        yield _iam("iam:instance-profile", p["Arn"], p["InstanceProfileName"], full.get("Tags"))


def list_policies(c: Clients) -> Iterator[Resource]:
    iam = c("iam")
    for p in pages(iam, "list_policies", "Policies", Scope="Local"):
        full = iam.get_policy(PolicyArn=p["Arn"])["Policy"]
        yield _iam("iam:policy", p["Arn"], p["PolicyName"], full.get("Tags"))


def list_oidc_providers(c: Clients) -> Iterator[Resource]:
    iam = c("iam")
    for p in iam.list_open_id_connect_providers().get("OpenIDConnectProviderList", []):
        full = iam.get_open_id_connect_provider(OpenIDConnectProviderArn=p["Arn"])
        yield _iam("iam:oidc-provider", p["Arn"], full.get("Url", ""), full.get("Tags"))


GLOBAL_LISTINGS: list[tuple[str, Listing]] = [
    ("IAM roles", list_roles), ("IAM instance profiles", list_instance_profiles),
    ("IAM policies", list_policies), ("IAM OIDC providers", list_oidc_providers)]


# --- running them ----------------------------------------------------------------------------

@dataclass
class Findings:
    """What one region (or IAM, region GLOBAL) holds of the project, and what could not be
    listed there (label -> error): any entry in `unlisted` makes the audit incomplete."""

    region: str
    resources: list[Resource] = field(default_factory=list)
    unlisted: dict[str, str] = field(default_factory=dict)
    listed: int = 0      # listings that answered


def collect(c: Clients, region: str, listings: list[tuple[str, Listing]],
            stack: str | None) -> Findings:
    """Run every listing, merge and attribute what they found, keep what is relevant."""
    found: list[Resource] = []
    unlisted: dict[str, str] = {}
    for label, listing in listings:
        try:
            found.extend(listing(c))
        except Exception as exc:  # noqa: BLE001 - any failure: reported, the audit incomplete
            first = (str(exc).splitlines() or [""])[0][:300]
            unlisted[label] = f"{type(exc).__name__}: {first}"
    for r in found:
        r.region = r.region or region
    return Findings(region, [r for r in merge(found) if relevant(r, stack)], unlisted,
                    listed=len(listings) - len(unlisted))


def find_regional(c: Clients, region: str, stack: str | None) -> Findings:
    return collect(c, region, regional_listings(stack), stack)


def find_global(c: Clients, stack: str | None) -> Findings:
    return collect(c, GLOBAL, GLOBAL_LISTINGS, stack)

