"""What the deployer's AWS account says before `pulumi up` (a thin boto3 shell; the judging is
pure: stacks/preflight/capacity_checks.py and components.node_specs.eks_usable_zones' table,
stacks/catalog/eks_zones.py).

- zone IDs: DescribeAvailabilityZones (zone names map to IDs per account, and EKS refuses
  cluster subnets by ID);
- offerings: DescribeInstanceTypeOfferings with LocationType availability-zone-id, mapped back
  to this account's zone names through DescribeAvailabilityZones (a zone name is a per-account
  alias of a zone ID, so the ID is what EC2's offering is about: EC2 user guide, "AZ IDs";
  moto 5.2.5's own two tables disagree by name and agree by ID, tests/test_aws_account_facts.py);
- vCPU and regional quotas: Service Quotas GetServiceQuota; vCPUs in use per quota: the running
  and pending instances of DescribeInstances (CpuOptions cores x threads); VPCs, internet
  gateways and Elastic IPs in use: DescribeVpcs / DescribeInternetGateways / DescribeAddresses.

`check_account` is what the deploy path calls before `pulumi up` (the campaign's AWS platform,
`python -m workloads account`): with no AWS credentials it says once that none of this was
checked, and the deploy goes on with the offline checks only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from stacks.catalog.aws_quotas import ON_DEMAND_VCPUS, REGIONAL, SPOT_VCPUS, family_letter
from stacks.catalog.eks_zones import SOURCE as EKS_ZONES_SOURCE
from stacks.catalog.eks_zones import refused_zone_ids
from stacks.config.errors import Problem
from stacks.config.schema import StackConfig
from stacks.config.stack_file import PROJECT
from stacks.preflight.capacity_checks import offering_problems, quota_notes, regional_quota_notes

NOT_CHECKED = ("NOTE: no AWS credentials here: instance offerings in the pinned zones, zone IDs "
               "EKS refuses, vCPU quotas and VPC / internet gateway / Elastic IP quotas were not "
               "checked against the account (give boto3 credentials to check them)")


@dataclass
class AccountFacts:
    zone_ids: dict[str, str] = field(default_factory=dict)          # name -> zone ID
    offerings: dict[str, set[str]] = field(default_factory=dict)    # type -> zone names
    quotas: dict[str, float] = field(default_factory=dict)          # quota code -> value
    usage: dict[str, int] = field(default_factory=dict)             # quota code -> in use


def fetch(stack: StackConfig, session: Any) -> AccountFacts:
    """Ask the account (boto3 `session`) about the stack's region and instance types."""
    region = stack.cluster.region
    ec2 = session.client("ec2", region_name=region)
    facts = AccountFacts()
    for z in ec2.describe_availability_zones()["AvailabilityZones"]:
        facts.zone_ids[z["ZoneName"]] = z["ZoneId"]
    name_of = {zone_id: name for name, zone_id in facts.zone_ids.items()}
    types = sorted({g.instance_type for g in stack.cluster.node_groups})
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone-id",
        Filters=[{"Name": "instance-type", "Values": types}])
    for page in pages:
        for o in page["InstanceTypeOfferings"]:
            if o["Location"] in name_of:   # a zone ID this account has no name for: unusable
                facts.offerings.setdefault(o["InstanceType"], set()).add(name_of[o["Location"]])
    for t in types:
        facts.offerings.setdefault(t, set())
    quotas = session.client("service-quotas", region_name=region)
    for q in [*ON_DEMAND_VCPUS.values(), *SPOT_VCPUS.values(), *REGIONAL]:
        try:
            answer = quotas.get_service_quota(ServiceCode=q.service, QuotaCode=q.code)
            facts.quotas[q.code] = float(answer["Quota"]["Value"])
        except Exception:  # noqa: BLE001 - no permission or no such quota: judged as unknown
            continue
    facts.usage = {"L-F678F1CE": len(ec2.describe_vpcs()["Vpcs"]),
                   "L-A4707A72": len(ec2.describe_internet_gateways()["InternetGateways"]),
                   "L-0263D0A3": len(ec2.describe_addresses()["Addresses"]),
                   **vcpus_in_use(ec2)}
    return facts


def vcpus_in_use(ec2: Any) -> dict[str, int]:
    """vCPUs of the region's running and pending instances, by the quota code they count
    against (a spot instance under its family's spot quota, any other under on-demand). Each
    counts its type's DefaultVCpus (DescribeInstanceTypes): at least what it runs, so the
    warning errs on the early side when CPU options turned cores off."""
    running: dict[tuple[str, bool], int] = {}
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
    for page in pages:
        for reservation in page["Reservations"]:
            for i in reservation["Instances"]:
                key = (i["InstanceType"], i.get("InstanceLifecycle") == "spot")
                running[key] = running.get(key, 0) + 1
    if not running:
        return {}
    vcpus = {t["InstanceType"]: t["VCpuInfo"]["DefaultVCpus"] for t in ec2.describe_instance_types(
        InstanceTypes=sorted({t for t, _ in running}))["InstanceTypes"]}
    out: dict[str, int] = {}
    for (instance_type, spot), n in running.items():
        code = (SPOT_VCPUS if spot else ON_DEMAND_VCPUS)[family_letter(instance_type)].code
        out[code] = out.get(code, 0) + n * vcpus.get(instance_type, 1)
    return out


def judge(stack: StackConfig, facts: AccountFacts, *,
          owns_cluster: bool) -> tuple[list[Problem], list[str]]:
    """(problems, warnings) of `stack` in this account."""
    problems = offering_problems(stack, facts.offerings)
    refused = set(refused_zone_ids(stack.cluster.region))
    for i, g in enumerate(stack.cluster.node_groups):
        zone = g.availability_zone
        if zone is None:
            continue
        if zone not in facts.zone_ids:
            problems.append(Problem(f"{PROJECT}:cluster.nodeGroups[{i}].availabilityZone",
                                    f"'{zone}' is not an available zone of this account",
                                    f"use one of {', '.join(sorted(facts.zone_ids))}"))
        elif facts.zone_ids[zone] in refused:
            ok = sorted(n for n, z in facts.zone_ids.items() if z not in refused)
            problems.append(Problem(f"{PROJECT}:cluster.nodeGroups[{i}].availabilityZone",
                                    f"'{zone}' is zone ID {facts.zone_ids[zone]} in this "
                                    f"account, where EKS refuses cluster subnets "
                                    f"({EKS_ZONES_SOURCE})", f"use one of {', '.join(ok)}"))
    notes = quota_notes(stack.cluster, stack.cluster.region, facts.quotas, facts.usage)
    if owns_cluster:
        notes += regional_quota_notes(stack.cluster.region, 1, facts.usage, facts.quotas)
    return problems, notes


def credentials(session: Any) -> bool:
    """Whether boto3 found credentials (environment, profile, SSO, instance role ...)."""
    return session.get_credentials() is not None


def check_account(stacks: list[tuple[StackConfig, bool]],
                  session: Any = None) -> tuple[list[Problem], list[str]]:
    """(problems, notes) of each (stack, owns its cluster) in the deployer's account; offline
    (no credentials) one note that the account was not asked. A variant is judged in its
    base's region (the caller passes it so)."""
    import boto3

    session = session or boto3.session.Session()
    problems: list[Problem] = []
    notes: list[str] = []
    if not credentials(session):
        return problems, [NOT_CHECKED]
    for stack, owns in stacks:
        if not stack.cluster.node_groups and not owns:
            continue
        try:
            facts = fetch(stack, session)
        except (BotoCoreError, ClientError) as exc:   # no permission, no endpoint: say so
            notes.append(f"NOTE: {stack.name}: the account could not be asked about offerings "
                         f"and quotas ({type(exc).__name__}: {exc}); not checked")
            continue
        p, n = judge(stack, facts, owns_cluster=owns)
        problems += p
        notes += [f"{stack.name}: {note}" for note in n]
    return problems, notes


def campaign_stacks(base: StackConfig,
                    variants: list[StackConfig]) -> list[tuple[StackConfig, bool]]:
    """What a campaign deploys in the account: the base (owns the cluster) and each variant's
    own node groups, judged in the base's region."""
    region = base.cluster.region
    return [(base, True), *((v.model_copy(update={"cluster": v.cluster.model_copy(
        update={"region": region})}), False) for v in variants if v.cluster.node_groups)]
