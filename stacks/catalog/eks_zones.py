"""Availability Zones EKS refuses for a cluster's subnets, by zone ID (data with provenance).

awsdocs/amazon-eks-user-guide latest/ug/networking/network-reqs.adoc (@101184ec), "Subnet
requirements for clusters": "The subnets can't reside in the following Availability Zones":
us-east-1 `use1-az3`, us-west-1 `usw1-az2`, ca-central-1 `cac1-az3`. CreateCluster answers a
subnet there with UnsupportedAvailabilityZoneException. The list is by zone ID because zone
NAMES map to IDs per account (`us-east-1a` is use1-az3 in some accounts): only
DescribeAvailabilityZones (or the provider's getAvailabilityZones) can say which name is refused.
"""

from __future__ import annotations

EKS_REFUSED_ZONE_IDS: dict[str, tuple[str, ...]] = {
    "us-east-1": ("use1-az3",),
    "us-west-1": ("usw1-az2",),
    "ca-central-1": ("cac1-az3",),
}
SOURCE = "awsdocs/amazon-eks-user-guide latest/ug/networking/network-reqs.adoc"


def refused_zone_ids(region: str) -> tuple[str, ...]:
    """The zone IDs of `region` where EKS refuses a cluster subnet (often none)."""
    return EKS_REFUSED_ZONE_IDS.get(region, ())
