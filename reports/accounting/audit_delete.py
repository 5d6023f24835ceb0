"""Deletion of audited resources (the I/O half of the teardown audit, see
`reports.accounting.audit`).

One deleter per kind; `delete_resources` runs them kind by kind in `DELETE_ORDER`, after the
`deletion_plan` guard kept only the stack's own (`reports.accounting.audit.may_delete`). Where AWS
deletes asynchronously, a bounded wait follows before the next kind, so dependants are gone
when their owners go. Parts that cannot carry tags go with their owner: an EFS file system's
mount targets, an internet gateway's VPC attachment, a route table's subnet associations,
security-group rules that point at each other, an EKS cluster's add-ons, pod identity
associations and access entries. IAM deleters: `reports.accounting.audit_delete_iam`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, WaiterError

from reports.accounting.audit import PROJECT, PROJECT_KEY, TAG_KEY, Clients, Resource, deletion_plan
from reports.accounting.audit_delete_iam import IAM_DELETERS


class Skip(Exception):
    """Not deleted on purpose (it goes with its owner); the re-audit shows if it stayed."""


@dataclass
class Outcome:
    resource: Resource
    status: str    # deleted | gone (already absent) | skipped | failed
    detail: str = ""


def poll_until(check: Callable[[], bool], poll_s: float, attempts: int = 90) -> bool:
    """Bounded wait (attempts x poll_s) for an asynchronous deletion."""
    for _ in range(attempts):
        if check():
            return True
        time.sleep(poll_s)
    return check()


def _delete_file_system(c: Clients, r: Resource, poll_s: float) -> None:
    efs = c("efs")
    # Mount targets cannot be tagged; they belong to the file system and must go first.
    for mt in efs.describe_mount_targets(FileSystemId=r.id)["MountTargets"]:
        efs.delete_mount_target(MountTargetId=mt["MountTargetId"])
    if not poll_until(lambda: not efs.describe_mount_targets(FileSystemId=r.id)["MountTargets"],
                      poll_s):
        raise Skip(f"mount targets of {r.id} still deleting after the wait; run again")
    efs.delete_file_system(FileSystemId=r.id)


def _delete_security_group(c: Clients, r: Resource, poll_s: float) -> None:
    group = c("ec2").describe_security_groups(GroupIds=[r.id])["SecurityGroups"][0]
    if group["GroupName"] == "default":
        raise Skip("a VPC's default security group is deleted with its VPC")
    c("ec2").delete_security_group(GroupId=r.id)


def _delete_internet_gateway(c: Clients, r: Resource, poll_s: float) -> None:
    ec2 = c("ec2")
    igw = ec2.describe_internet_gateways(InternetGatewayIds=[r.id])["InternetGateways"][0]
    for att in igw.get("Attachments", []):
        ec2.detach_internet_gateway(InternetGatewayId=r.id, VpcId=att["VpcId"])
    ec2.delete_internet_gateway(InternetGatewayId=r.id)


def _delete_route_table(c: Clients, r: Resource, poll_s: float) -> None:
    ec2 = c("ec2")
    table = ec2.describe_route_tables(RouteTableIds=[r.id])["RouteTables"][0]
    assocs = table.get("Associations", [])
    if any(a.get("Main") for a in assocs):
        raise Skip("a VPC's main route table is deleted with its VPC")
    for a in assocs:
        ec2.disassociate_route_table(AssociationId=a["RouteTableAssociationId"])
    ec2.delete_route_table(RouteTableId=r.id)


def _call(service: str, method: str, param: str, use_parent: str = "") -> Callable[..., None]:
    def delete(c: Clients, r: Resource, poll_s: float) -> None:
        extra = {use_parent: r.parent} if use_parent else {}
        getattr(c(service), method)(**{param: r.id}, **extra)
    return delete


def _with_cluster(c: Clients, r: Resource, poll_s: float) -> None:
    raise Skip(f"deleted with its EKS cluster {r.parent}".rstrip())


def _delete_log_group(c: Clients, r: Resource, poll_s: float) -> None:
    c("logs").delete_log_group(logGroupName=r.name or r.id.split(":log-group:", 1)[1])


DELETERS: dict[str, Callable[[Clients, Resource, float], None]] = {
    "eks:addon": _with_cluster,
    "eks:podidentityassociation": _with_cluster,
    "eks:access-entry": _with_cluster,
    "eks:nodegroup": _call("eks", "delete_nodegroup", "nodegroupName", "clusterName"),
    "eks:cluster": _call("eks", "delete_cluster", "name"),
    "autoscaling:autoScalingGroup": lambda c, r, _: c("autoscaling").delete_auto_scaling_group(
        AutoScalingGroupName=r.id, ForceDelete=True),
    "elasticloadbalancing:listener": _call("elbv2", "delete_listener", "ListenerArn"),
    "elasticloadbalancing:loadbalancer": _call("elbv2", "delete_load_balancer",
                                               "LoadBalancerArn"),
    "elb:loadbalancer": _call("elb", "delete_load_balancer", "LoadBalancerName"),
    "elasticloadbalancing:targetgroup": _call("elbv2", "delete_target_group", "TargetGroupArn"),
    "ec2:instance": lambda c, r, _: c("ec2").terminate_instances(InstanceIds=[r.id]),
    "ec2:placement-group": _call("ec2", "delete_placement_group", "GroupName"),
    "ec2:natgateway": _call("ec2", "delete_nat_gateway", "NatGatewayId"),
    "elasticfilesystem:access-point": _call("efs", "delete_access_point", "AccessPointId"),
    "elasticfilesystem:file-system": _delete_file_system,
    "ec2:network-interface": _call("ec2", "delete_network_interface", "NetworkInterfaceId"),
    "ec2:volume": _call("ec2", "delete_volume", "VolumeId"),
    "ec2:snapshot": _call("ec2", "delete_snapshot", "SnapshotId"),
    "ec2:elastic-ip": _call("ec2", "release_address", "AllocationId"),
    "ec2:launch-template": _call("ec2", "delete_launch_template", "LaunchTemplateId"),
    "ec2:security-group": _delete_security_group,
    "ec2:internet-gateway": _delete_internet_gateway,
    "ec2:route-table": _delete_route_table,
    "ec2:subnet": _call("ec2", "delete_subnet", "SubnetId"),
    "ec2:vpc": _call("ec2", "delete_vpc", "VpcId"),
    "logs:log-group": _delete_log_group,
    **IAM_DELETERS,
}


def _revoke_cross_references(c: Clients, groups: list[Resource]) -> None:
    """Rules naming other groups keep those groups alive (EKS cluster <-> node groups): revoke
    them in every group about to go, before deleting any."""
    ec2 = c("ec2")
    found = ec2.describe_security_groups(GroupIds=[g.id for g in groups])["SecurityGroups"]
    for sg in found:
        for rules, revoke in ((sg.get("IpPermissions", []), ec2.revoke_security_group_ingress),
                              (sg.get("IpPermissionsEgress", []),
                               ec2.revoke_security_group_egress)):
            refs = [{k: v for k, v in p.items() if k in ("IpProtocol", "FromPort", "ToPort",
                                                          "UserIdGroupPairs")}
                    for p in rules if p.get("UserIdGroupPairs")]
            if refs:
                revoke(GroupId=sg["GroupId"], IpPermissions=refs)


PREPARE: dict[str, Callable[[Clients, list[Resource]], None]] = {
    "ec2:security-group": _revoke_cross_references,
}


def _waiter(service: str, name: str, build: Callable[[list[Resource]], list[dict[str, Any]]]):
    def wait(c: Clients, done: list[Resource], poll_s: float) -> str:
        try:
            for kwargs in build(done):
                c(service).get_waiter(name).wait(
                    **kwargs, WaiterConfig={"Delay": poll_s, "MaxAttempts": 120})
        except WaiterError as exc:
            return str(exc)
        return ""
    return wait


def _groups_gone(c: Clients, done: list[Resource], poll_s: float) -> str:
    """Auto Scaling has no deletion waiter: poll until the groups are no longer described."""
    names = [r.id for r in done]

    def gone() -> bool:
        return not c("autoscaling").describe_auto_scaling_groups(
            AutoScalingGroupNames=names)["AutoScalingGroups"]
    return "" if poll_until(gone, poll_s, attempts=120) else f"{names} still deleting"


WAITERS: dict[str, Callable[[Clients, list[Resource], float], str]] = {
    "autoscaling:autoScalingGroup": _groups_gone,
    "eks:nodegroup": _waiter("eks", "nodegroup_deleted", lambda rs: [
        {"clusterName": r.parent, "nodegroupName": r.id} for r in rs]),
    "eks:cluster": _waiter("eks", "cluster_deleted", lambda rs: [{"name": r.id} for r in rs]),
    "elasticloadbalancing:loadbalancer": _waiter("elbv2", "load_balancers_deleted", lambda rs: [
        {"LoadBalancerArns": [r.id for r in rs]}]),
    "ec2:instance": _waiter("ec2", "instance_terminated", lambda rs: [
        {"InstanceIds": [r.id for r in rs]}]),
    "ec2:natgateway": _waiter("ec2", "nat_gateway_deleted", lambda rs: [
        {"NatGatewayIds": [r.id for r in rs]}]),
}


def is_not_found(exc: ClientError) -> bool:
    code = exc.response.get("Error", {}).get("Code", "")
    return "NotFound" in code or code.startswith("NoSuch")


def _delete_one(c: Clients, r: Resource, poll_s: float) -> Outcome:
    try:
        DELETERS[r.kind](c, r, poll_s)
        return Outcome(r, "deleted")
    except Skip as why:
        return Outcome(r, "skipped", str(why))
    except ClientError as exc:
        return Outcome(r, "gone") if is_not_found(exc) else Outcome(r, "failed", str(exc))
    except BotoCoreError as exc:
        return Outcome(r, "failed", str(exc))


def delete_resources(c: Clients, resources: list[Resource], stack: str,
                     poll_s: float = 10.0) -> list[Outcome]:
    """Delete the stack's own resources (`may_delete`), kind by kind in dependency order; one
    Outcome each."""
    plan = deletion_plan(resources, stack)
    outcomes = [Outcome(r, "failed", f"tagged {TAG_KEY}={stack} but not {PROJECT_KEY}="
                        f"{PROJECT}: not deleted automatically; check that it is this stack's "
                        "and delete it by hand") for r in resources
                if r.owner == stack and not r.gone and r not in plan]
    for kind in dict.fromkeys(r.kind for r in plan):
        group = [r for r in plan if r.kind == kind]
        if kind not in DELETERS:
            outcomes += [Outcome(r, "failed", f"no automatic deletion for {kind}: delete it by "
                                 "hand (console or CLI)") for r in group]
            continue
        try:
            if kind in PREPARE:
                PREPARE[kind](c, group)
        except (ClientError, BotoCoreError) as exc:
            outcomes += [Outcome(r, "failed", f"preparing deletion: {exc}") for r in group]
            continue
        mine = [_delete_one(c, r, poll_s) for r in group]
        done = [o for o in mine if o.status == "deleted"]
        error = WAITERS[kind](c, [o.resource for o in done], poll_s) \
            if done and kind in WAITERS else ""
        for o in done if error else []:
            o.status, o.detail = "failed", f"deletion did not finish: {error}"
        outcomes += mine
    return outcomes
