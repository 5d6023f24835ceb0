"""EC2 and VPC Service Quotas a stack's `pulumi up` draws on (codes with their names, as
Service Quotas lists them: service `ec2` / `vpc`; the codes are what
`aws service-quotas get-service-quota --service-code <s> --quota-code <c>` takes).

vCPU quotas are per instance family letter and purchase option ("Running On-Demand P
instances" counts the vCPUs of every running p* instance in the region). The VPC-side ones
default to 5 per region (VPC user guide, "Amazon VPC quotas": VPCs per Region 5, Internet
gateways per Region 5; EC2 "Elastic IP addresses per Region" 5): every stack that owns its
cluster creates one VPC, one internet gateway and one Elastic IP (components/network.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Quota:
    service: str
    code: str
    name: str
    default: float | None = None   # the documented account default, where there is one


ON_DEMAND_VCPUS = {
    "P": Quota("ec2", "L-417A185B", "Running On-Demand P instances"),
    "G": Quota("ec2", "L-DB2E81BA", "Running On-Demand G and VT instances"),
    "standard": Quota("ec2", "L-1216C47A",
                      "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
}
SPOT_VCPUS = {
    "P": Quota("ec2", "L-7212CCBC", "All P Spot Instance Requests"),
    "G": Quota("ec2", "L-3819A6DF", "All G and VT Spot Instance Requests"),
    "standard": Quota("ec2", "L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot "
                                           "Instance Requests"),
}
VPCS = Quota("vpc", "L-F678F1CE", "VPCs per Region", 5)
INTERNET_GATEWAYS = Quota("vpc", "L-A4707A72", "Internet gateways per Region", 5)
ELASTIC_IPS = Quota("ec2", "L-0263D0A3", "EC2-VPC Elastic IPs", 5)
REGIONAL = (VPCS, INTERNET_GATEWAYS, ELASTIC_IPS)

# Types EC2 sells as Capacity Blocks for ML (EC2 user guide, capacity-blocks: "p6-b200-, p5-,
# p5e-, p5en-, p4d-, p4de- ..."), for which on-demand launches commonly fail with
# InsufficientInstanceCapacity (field report modelplaneai/modelplane#113, 2026-06-08:
# "On-demand launches of p5en, p5, p5e, p4d, and p4de all returned InsufficientInstanceCapacity
# across us-east-1, us-east-2, and us-west-2").
CAPACITY_BLOCK_FAMILIES = ("p6-b200", "p5", "p5e", "p5en", "p4d", "p4de")


def family_letter(instance_type: str) -> str:
    """The quota family of an instance type: P, G (G and VT share one), or standard."""
    family = instance_type.split(".")[0]
    if family.startswith("p"):
        return "P"
    if family.startswith(("g", "vt")):
        return "G"
    return "standard"
