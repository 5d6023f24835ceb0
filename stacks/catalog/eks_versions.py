"""The EKS Kubernetes versions EKS offers, with their dated support windows, and what the
control plane costs on a given day. One place: pre-flight, the estimates and (later) the
reports' cost code all price the control plane from `control_plane_usd_per_hour`.

Lifecycle: a minor version gets 14 months of standard support from its EKS release, then 12
months of extended support; "Billing for extended support starts at the beginning of the day
that the version reaches end of standard support, in the UTC+0 timezone"; after the end of
extended support no new cluster can be created on it. Source: AWS, "Understand the Kubernetes
version lifecycle on EKS", release calendar (awsdocs/amazon-eks-user-guide,
latest/ug/versioning/kubernetes-versions.adoc, commit 013856044148: rows 1.29-1.34). The 1.35
row was not in that stored page; its dates come from two third-party copies of the calendar
(endoflife.date/amazon-eks, and aws-samples' sample-apex-skills cluster-lifecycle reference,
"last verified 2026-04-24"), which agree with each other and with the 14 + 12 month rule; EKS
offered 1.35 from early 2026 (awslabs/mountpoint-s3-csi-driver#685, 2026-02-04: "EKS now
supports v1.35"; awslabs/cdk-eks-blueprints#1246 maps its add-on defaults, e.g.
aws-ebs-csi-driver v1.57.1-eksbuild.1, eks-pod-identity-agent v1.3.10-eksbuild.2).

Price: "clusters running on a Kubernetes version in the extended support window will be
charged a total of $0.60 per cluster per hour ... Pricing for clusters running Kubernetes
versions in standard support is unchanged — you will continue to pay $0.10 per cluster per
hour" (AWS Containers blog, "Amazon EKS extended support for Kubernetes versions pricing",
effective April 2024; us-east-1). The EKS pricing page itself was not in the searchable store;
third-party summaries of it dated March-June 2026 give the same two rates.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from enum import Enum

CATALOGUE_DATE = dt.date(2026, 12, 1)
LIFECYCLE_SOURCE = ("AWS EKS user guide, Kubernetes version lifecycle, release calendar "
                    "(awsdocs/amazon-eks-user-guide kubernetes-versions.adoc @013856044148; 1.35 "
                    "from endoflife.date and aws-samples/sample-apex-skills, 2026-04-24)")
STANDARD_USD_PER_HOUR = 0.10
EXTENDED_USD_PER_HOUR = 0.60
PRICE_SOURCE = ("AWS Containers blog 'Amazon EKS extended support for Kubernetes versions "
                "pricing' (2024): $0.10 standard, $0.60 total in extended support")


class SupportStatus(str, Enum):
    NOT_RELEASED = "not yet released on EKS"
    STANDARD = "standard support"
    EXTENDED = "extended support"
    ENDED = "no longer offered"


@dataclass(frozen=True)
class EksVersion:
    version: str
    eks_release: dt.date
    end_of_standard: dt.date
    end_of_extended: dt.date

    def status(self, on: dt.date) -> SupportStatus:
        if on < self.eks_release:
            return SupportStatus.NOT_RELEASED
        if on < self.end_of_standard:
            return SupportStatus.STANDARD
        if on < self.end_of_extended:
            return SupportStatus.EXTENDED
        return SupportStatus.ENDED

    def describe(self, on: dt.date) -> str:
        return f"EKS {self.version}: " + {
            SupportStatus.STANDARD: f"standard support until {self.end_of_standard} (extended "
                                    f"until {self.end_of_extended})",
            SupportStatus.EXTENDED: f"extended support since {self.end_of_standard}, until "
                                    f"{self.end_of_extended}; control plane "
                                    f"${EXTENDED_USD_PER_HOUR:.2f}/h instead of "
                                    f"${STANDARD_USD_PER_HOUR:.2f}/h",
            SupportStatus.NOT_RELEASED: f"released on EKS {self.eks_release}",
            SupportStatus.ENDED: f"extended support ended {self.end_of_extended}",
        }[self.status(on)]


def _d(text: str) -> dt.date:
    return dt.date.fromisoformat(text)


EKS_VERSIONS: dict[str, EksVersion] = {v.version: v for v in (
    EksVersion("1.29", _d("2024-01-23"), _d("2025-03-23"), _d("2026-03-23")),
    EksVersion("1.30", _d("2024-05-23"), _d("2025-07-23"), _d("2026-07-23")),
    EksVersion("1.31", _d("2024-09-26"), _d("2025-11-26"), _d("2026-11-26")),
    EksVersion("1.32", _d("2025-01-23"), _d("2026-03-23"), _d("2027-03-23")),
    EksVersion("1.33", _d("2025-05-29"), _d("2026-07-29"), _d("2027-07-29")),
    EksVersion("1.34", _d("2025-10-02"), _d("2026-12-02"), _d("2027-12-02")),
    EksVersion("1.35", _d("2026-01-27"), _d("2027-03-27"), _d("2028-03-27")),
)}


# Pins the estimate date of every command and of the Pulumi program (which has no --as-of):
# a YYYY-MM-DD day. The tests set it so no test changes with the calendar.
AS_OF_ENV = "DYNAMO_BENCH_AS_OF"


def today() -> dt.date:
    """The estimate date: $DYNAMO_BENCH_AS_OF when set, else today in UTC (EKS bills extended
    support by UTC days)."""
    pinned = os.environ.get(AS_OF_ENV, "").strip()
    if pinned:
        try:
            return dt.date.fromisoformat(pinned)
        except ValueError:
            raise ValueError(f"{AS_OF_ENV}={pinned!r} is not a date: write YYYY-MM-DD or "
                             "unset it") from None
    return dt.datetime.now(dt.UTC).date()


def offered(on: dt.date) -> list[str]:
    """Versions a new cluster can be created on, `on` that day (standard or extended)."""
    return [v for v, e in EKS_VERSIONS.items()
            if e.status(on) in (SupportStatus.STANDARD, SupportStatus.EXTENDED)]


def control_plane_usd_per_hour(version: str, on: dt.date) -> float:
    """The EKS control-plane rate of a cluster on `version` on day `on` (us-east-1)."""
    entry = EKS_VERSIONS.get(version)
    if entry is not None and entry.status(on) in (SupportStatus.EXTENDED, SupportStatus.ENDED):
        return EXTENDED_USD_PER_HOUR
    return STANDARD_USD_PER_HOUR


def version_problem(version: str, on: dt.date) -> str | None:
    """Why EKS would refuse a new cluster on `version` on day `on`, or None."""
    listing = ", ".join(offered(on)) or "none in the catalogue"
    entry = EKS_VERSIONS.get(version)
    if entry is None:
        return (f"'{version}' is not an EKS version of the catalogue (dated {CATALOGUE_DATE}); "
                f"EKS offers {listing} on {on}")
    why = {SupportStatus.ENDED: f"EKS no longer offers {version}: its extended support ended "
                                f"{entry.end_of_extended}",
           SupportStatus.NOT_RELEASED: f"{version} is released on EKS only on "
                                       f"{entry.eks_release}"}.get(entry.status(on))
    return None if why is None else f"{why}; on {on} EKS offers {listing}"
