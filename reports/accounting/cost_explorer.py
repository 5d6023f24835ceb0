"""What AWS billed, per `stack` tag, from Cost Explorer (for reconciliation with the computed
cost).

Cost Explorer sees a tag only after it is activated as a cost allocation tag (once per payer
account; `activate_cost_allocation_tags`), counts whole UTC days, and lags usage by up to a
day; costs from before activation, or of untagged resources, land in the empty-value group.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

# Cost Explorer is a global service answered from us-east-1.
CE_REGION = "us-east-1"
BILLING_LAG_NOTE = ("Cost Explorer lags usage by up to 24 h and counts whole UTC days; "
                    "the last day may be incomplete or estimated.")
UNTAGGED = "(no stack tag)"


@dataclass
class BilledCosts:
    start: date
    end: date              # exclusive, as Cost Explorer counts
    metric: str
    by_stack: dict[str, float] = field(default_factory=dict)
    unit: str = "USD"
    estimated: bool = False

    def for_stack(self, stack: str) -> float:
        return self.by_stack.get(stack, 0.0)


def stack_of(group_key: str, tag_key: str = "stack") -> str:
    """'stack$agg-a100' -> 'agg-a100'; 'stack$' (untagged) -> UNTAGGED."""
    prefix = f"{tag_key}$"
    value = group_key[len(prefix):] if group_key.startswith(prefix) else group_key
    return value or UNTAGGED


def parse_cost_and_usage(pages: Iterable[dict[str, Any]], start: date, end: date,
                         metric: str, tag_key: str = "stack") -> BilledCosts:
    """Sum the TAG-grouped results of get_cost_and_usage pages per stack."""
    billed = BilledCosts(start, end, metric)
    for page in pages:
        for period in page.get("ResultsByTime", []):
            billed.estimated |= bool(period.get("Estimated"))
            for group in period.get("Groups", []):
                amount = group["Metrics"][metric]
                billed.unit = amount.get("Unit", billed.unit)
                name = stack_of(group["Keys"][0], tag_key)
                billed.by_stack[name] = billed.by_stack.get(name, 0.0) + float(amount["Amount"])
    return billed


def billed_by_stack(ce: Any, start: date, end: date, *, metric: str = "UnblendedCost",
                    tag_key: str = "stack") -> BilledCosts:
    """get_cost_and_usage over [start, end) grouped by the tag, all pages."""
    if end <= start:
        raise ValueError(f"end {end} must be after start {start} (Cost Explorer's end is "
                         "exclusive)")
    request = {"TimePeriod": {"Start": start.isoformat(), "End": end.isoformat()},
               "Granularity": "DAILY", "Metrics": [metric],
               "GroupBy": [{"Type": "TAG", "Key": tag_key}]}
    pages = []
    token = None
    while True:
        page = ce.get_cost_and_usage(**request, **({"NextPageToken": token} if token else {}))
        pages.append(page)
        token = page.get("NextPageToken")
        if not token:
            break
    return parse_cost_and_usage(pages, start, end, metric, tag_key)


def activate_cost_allocation_tags(ce: Any, keys: Iterable[str] = ("stack", "project",
                                                                   "experiment")) -> list[str]:
    """Activate the tags for Cost Explorer; returns one message per tag AWS refused (a tag
    must have appeared on a billed resource before it can be activated)."""
    resp = ce.update_cost_allocation_tags_status(
        CostAllocationTagsStatus=[{"TagKey": k, "Status": "Active"} for k in keys])
    return [f"{e.get('TagKey')}: {e.get('Code')} {e.get('Message')}".strip()
            for e in resp.get("Errors", [])]
