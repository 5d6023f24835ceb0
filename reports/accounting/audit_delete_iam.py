"""Deleting a stack's IAM resources (the teardown audit's global part).

IAM refuses to delete what is still attached, so each deleter first undoes the attachments the
resource itself holds: an instance profile's role; a role's instance profiles, managed policies
and inline policies; a policy's attachments and its non-default versions. Ids are ARNs; names
are the ARN's last path segment (roles and profiles may sit under a path).
"""

from __future__ import annotations

from collections.abc import Callable

from reports.accounting.audit import Clients, Resource


def name_of(arn: str) -> str:
    return arn.rsplit("/", 1)[-1]


def delete_instance_profile(c: Clients, r: Resource, poll_s: float) -> None:
    iam, name = c("iam"), name_of(r.id)
    profile = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    for role in profile.get("Roles", []):
        iam.remove_role_from_instance_profile(InstanceProfileName=name,
                                              RoleName=role["RoleName"])
    iam.delete_instance_profile(InstanceProfileName=name)


def delete_role(c: Clients, r: Resource, poll_s: float) -> None:
    iam, name = c("iam"), name_of(r.id)
    for p in iam.list_instance_profiles_for_role(RoleName=name)["InstanceProfiles"]:
        iam.remove_role_from_instance_profile(InstanceProfileName=p["InstanceProfileName"],
                                              RoleName=name)
    for p in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
        iam.detach_role_policy(RoleName=name, PolicyArn=p["PolicyArn"])
    for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
        iam.delete_role_policy(RoleName=name, PolicyName=policy)
    iam.delete_role(RoleName=name)


def delete_policy(c: Clients, r: Resource, poll_s: float) -> None:
    iam = c("iam")
    entities = iam.list_entities_for_policy(PolicyArn=r.id)
    for role in entities.get("PolicyRoles", []):
        iam.detach_role_policy(RoleName=role["RoleName"], PolicyArn=r.id)
    for user in entities.get("PolicyUsers", []):
        iam.detach_user_policy(UserName=user["UserName"], PolicyArn=r.id)
    for group in entities.get("PolicyGroups", []):
        iam.detach_group_policy(GroupName=group["GroupName"], PolicyArn=r.id)
    for v in iam.list_policy_versions(PolicyArn=r.id)["Versions"]:
        if not v["IsDefaultVersion"]:
            iam.delete_policy_version(PolicyArn=r.id, VersionId=v["VersionId"])
    iam.delete_policy(PolicyArn=r.id)


def delete_oidc_provider(c: Clients, r: Resource, poll_s: float) -> None:
    c("iam").delete_open_id_connect_provider(OpenIDConnectProviderArn=r.id)


IAM_DELETERS: dict[str, Callable[[Clients, Resource, float], None]] = {
    "iam:instance-profile": delete_instance_profile,
    "iam:role": delete_role,
    "iam:policy": delete_policy,
    "iam:oidc-provider": delete_oidc_provider,
}
