"""Prices of what a stack pays for besides its instances, each dated and sourced, and the one
question a report asks of any price it used: was it verified?

"Verified" means the figure was read, on the date given, in a source that states it: an AWS
page, AWS's own price-list files or an AWS-authored repository, directly or as transcribed by
a named third party with its reading date (the AWS pages themselves are not reachable from the
build machine). Anything else is unverified, and reports say so beside the figure. Prices are
us-east-1 on-demand; the AWS pricing API is the authority at run time.

Instance prices live in `stacks.catalog.instances` (`InstanceType.price_verified`); the EKS fees too
(`EKS_CONTROL_PLANE_USD_PER_HOUR`, `EKS_AUTO_MODE_FEE_FRACTION`) and EFS storage; this module
adds the network and root-volume prices and the verification of all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stacks.catalog.instances import (
    EFS_STANDARD_USD_PER_GB_MONTH,
    EKS_AUTO_MODE_FEE_FRACTION,
    EKS_CONTROL_PLANE_USD_PER_HOUR,
    HOURS_PER_MONTH,
    INSTANCE_TYPES,
)


@dataclass(frozen=True)
class ServicePrice:
    key: str
    usd: float
    unit: str
    date: str
    source: str
    verified: bool

    def describe(self) -> str:
        state = "verified" if self.verified else "UNVERIFIED"
        return f"{self.key} ${self.usd:g} {self.unit} ({state}, {self.date}: {self.source})"


NAT_GATEWAY = ServicePrice(
    "NAT gateway", 0.045, "per gateway-hour", "2026-09-20",
    "aws.amazon.com/vpc/pricing pricing example ($0.045 per NAT gateway-hour, data processing "
    "$0.045/GB), as transcribed on 2026-09-20 (api-evangelist/amazon-vpc plans)", True)
PUBLIC_IPV4 = ServicePrice(
    "public IPv4 address", 0.005, "per address-hour", "2026-10-16",
    "AWS public IPv4 charge since 2024-02-01, read from AWS's price-list files on 2026-10-16 "
    "(ChiefGyk3D/Clouds-Against-Humanity wiki, Provider AWS Cost Lesson)", True)
EBS_GP3 = ServicePrice(
    "EBS gp3 storage", 0.08, "per GiB-month", "2026-10-16",
    "aws/agent-toolkit-for-aws ebs-optimization.md ($0.08/GB-month gp3, us-east-1, early "
    "2026); AWS price-list files as read 2026-10-16 (ChiefGyk3D/Clouds-Against-Humanity)", True)
EKS_CONTROL_PLANE = ServicePrice(
    "EKS control plane", EKS_CONTROL_PLANE_USD_PER_HOUR, "per cluster-hour", "2026-07-28",
    "AWS price list published 2026-07-28 (design brief), standard support", True)
EFS_STANDARD = ServicePrice(
    "EFS Standard storage", EFS_STANDARD_USD_PER_GB_MONTH, "per GB-month", "2026-06-13",
    "aws.amazon.com/efs/pricing ($0.30/GB-month); factualminds.com EFS pricing, us-east-1, "
    "June 2026", True)
# AWS publishes the Auto Mode management fee per instance type, per hour, in the AmazonEKS
# price list (products with eksproducttype "AutoMode", operation "EKSAutoUsage": awslabs/
# eks-node-viewer pkg/aws/pricing.go updateAutoManagementPricing; vantage-sh/ec2instances.info
# scraper/aws/ec2/eks_auto_mode.go, merged 2026-07-20). Searched on 2026-12-01: no stored copy
# of that table or of the EKS pricing page gives the figure of any type we use (p4d, g6e, m7i,
# p6-b200); third parties quote ~12 % of on-demand (factualminds.com, June 2026; awslabs/
# eks-node-viewer#368), and the one per-type figure found, m5.large $0.01152 against $0.096
# on-demand, is 12 % exactly but sits in a test fixture, not a price source. So the fee stays
# this UNVERIFIED fraction until the pricing API (or your bill) says otherwise.
AUTO_MODE_FEE = ServicePrice(
    "EKS Auto Mode fee", EKS_AUTO_MODE_FEE_FRACTION, "x instance price", "2026-12-01",
    "approximation: 12 % of the on-demand price per instance-hour; AWS's per-type fee "
    "(AmazonEKS price list, operation EKSAutoUsage) was not reachable", False)

SERVICE_PRICES: dict[str, ServicePrice] = {p.key: p for p in (
    NAT_GATEWAY, PUBLIC_IPV4, EBS_GP3, EKS_CONTROL_PLANE, EFS_STANDARD, AUTO_MODE_FEE)}


def gp3_usd_per_hour(gib: float) -> float:
    """EBS gp3 storage (baseline IOPS and throughput, which are free) prorated to one hour."""
    return gib * EBS_GP3.usd / HOURS_PER_MONTH


def nat_usd_per_hour(gateways: int = 1) -> float:
    """NAT gateways and their public IPv4 addresses (one Elastic IP each); data processing
    ($0.045/GB) is network transfer, outside the hourly figure."""
    return gateways * (NAT_GATEWAY.usd + PUBLIC_IPV4.usd)


def price_is_verified(key: str, overrides: Iterable[str] = ()) -> bool:
    """Whether a price a figure used is verified: an instance type of the catalogue, a
    SERVICE_PRICES key, or a key the stack overrides (its own figure, stated by the user)."""
    if key in set(overrides):
        return True
    if key in INSTANCE_TYPES:
        return INSTANCE_TYPES[key].price_verified
    price = SERVICE_PRICES.get(key)
    return price is not None and price.verified


def unverified(keys: Iterable[str], overrides: Mapping[str, float] | Iterable[str] = ()
               ) -> list[str]:
    """'m7i.4xlarge (catalogue 2025-01-01)' for each unverified price among `keys`."""
    out = []
    for key in sorted(set(keys)):
        if price_is_verified(key, overrides):
            continue
        if key in INSTANCE_TYPES:
            out.append(f"{key} (catalogue {INSTANCE_TYPES[key].price_date})")
        elif key in SERVICE_PRICES:
            out.append(f"{key} ({SERVICE_PRICES[key].unit}, approximation)")
        else:
            out.append(f"{key} (no source)")
    return out


def unverified_note(keys: Iterable[str], overrides: Mapping[str, float] | Iterable[str] = ()
                    ) -> str:
    """'' when every price is verified, else the sentence a report puts beside the figure."""
    found = unverified(keys, overrides)
    return f"unverified prices: {', '.join(found)}" if found else ""


def price_record(prices: Mapping[str, float], overrides: Iterable[str] = ()
                 ) -> dict[str, dict[str, object]]:
    """What a run record keeps of the instance prices it was planned with (so a report can
    price the run even after the catalogue drops a type): usdPerHour, source, verified."""
    out: dict[str, dict[str, object]] = {}
    for key, usd in sorted(prices.items()):
        source = ("stack cost.priceOverrides" if key in set(overrides) else
                  f"catalogue {INSTANCE_TYPES[key].price_date}" if key in INSTANCE_TYPES
                  else "unknown")
        out[key] = {"usdPerHour": usd, "source": source,
                    "verified": price_is_verified(key, overrides)}
    return out


def recorded_prices(doc: Mapping[str, object]) -> dict[str, float]:
    """Instance prices a run record carries (`prices`: {type: usd} or {type: {usdPerHour}})."""
    raw = doc.get("prices") or {}
    out: dict[str, float] = {}
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            usd = value.get("usdPerHour") if isinstance(value, Mapping) else value
            if isinstance(usd, int | float):
                out[str(key)] = float(usd)
    return out
