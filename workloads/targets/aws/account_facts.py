"""What the deployer's AWS account says before `pulumi up` (a thin boto3 shell; the judging is
pure: stacks/preflight/capacity_checks.py and components.node_specs.eks_usable_zones' table,
stacks/catalog/eks_zones.py).

- zone IDs: DescribeAvailabilityZones (zone names map to IDs per account, and EKS refuses
  cluster subnets by ID);
- offerings: DescribeInstanceTypeOfferings with LocationType availability-zone;
- vCPU and regional quotas: Service Quotas GetServiceQuota; VPCs, internet gateways and
  Elastic IPs in use: DescribeVpcs / DescribeInternetGateways / DescribeAddresses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stacks.catalog.aws_quotas import ON_DEMAND_VCPUS, REGIONAL, SPOT_VCPUS
from stacks.catalog.eks_zones import SOURCE as EKS_ZONES_SOURCE
from stacks.catalog.eks_zones import refused_zone_ids
from stacks.config.errors import Problem
from stacks.config.schema import StackConfig
from stacks.config.stack_file import PROJECT
from stacks.preflight.capacity_checks import offering_problems, quota_notes, regional_quota_notes


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
    types = sorted({g.instance_type for g in stack.cluster.node_groups})
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone",
        Filters=[{"Name": "instance-type", "Values": types}])
    for page in pages:
        for o in page["InstanceTypeOfferings"]:
            facts.offerings.setdefault(o["InstanceType"], set()).add(o["Location"])
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
                   "L-0263D0A3": len(ec2.describe_addresses()["Addresses"])}
    return facts


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
    notes = quota_notes(stack.cluster, stack.cluster.region, facts.quotas)
    if owns_cluster:
        notes += regional_quota_notes(stack.cluster.region, 1, facts.usage, facts.quotas)
    return problems, notes
