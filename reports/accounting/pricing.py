"""On-demand instance prices: the AWS Price List API, a dated cache on disk, the catalogue.

`resolve_prices` answers every instance type with a `PriceQuote` that says where the figure
came from (stack override, API today, cache of a given date, or the dated catalogue in
`stacks/catalog/instances.py`), so a report can state it. The API is asked only when the cache is
older than `max_age_days`; when it cannot be reached (no credentials, no network, access denied) the
cache is used even if stale, then the catalogue.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from stacks.catalog.instances import INSTANCE_TYPES

DEFAULT_CACHE = Path.home() / ".cache" / "dynamo-bench" / "prices.json"
# The Price List query API is served from us-east-1 (and ap-south-1) whatever region is priced.
PRICING_REGION = "us-east-1"
# Price-list `location` names for the regions this project uses; `regionCode` covers the rest.
LOCATIONS = {"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)",
             "us-west-2": "US West (Oregon)"}


class PriceListError(Exception):
    """The price list answered, but not with exactly one usable on-demand price."""


class PriceUnavailable(Exception):
    """No source has a price for an instance type."""


@dataclass(frozen=True)
class PriceQuote:
    instance_type: str
    region: str
    usd_per_hour: float
    source: str   # "override" | "api" | "cache" | "catalogue"
    date: str     # when the figure was fetched (api/cache) or published (catalogue)
    note: str = ""

    def describe(self) -> str:
        note = f"; {self.note}" if self.note else ""
        flag = "" if self.verified else "; UNVERIFIED"
        return f"{self.source} {self.date}{note}{flag}"

    @property
    def verified(self) -> bool:
        """The pricing API (today or cached) and the stack's own override are; a catalogue
        figure is when the catalogue says so; a price only recorded with a run is not."""
        if self.source in ("override", "api", "cache"):
            return True
        it = INSTANCE_TYPES.get(self.instance_type)
        return self.source == "catalogue" and it is not None and it.price_verified


def price_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """Filters that leave one product: Linux, shared tenancy, no pre-installed software,
    capacity actually used (not unused reservations), plain RunInstances (no capacity blocks,
    no licensed OS variants)."""
    terms = {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux",
             "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
             "operation": "RunInstances"}
    if region in LOCATIONS:
        terms["location"] = LOCATIONS[region]
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in terms.items()]


def _on_demand_hourly(item: Mapping[str, Any]) -> list[float]:
    prices = []
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        for dim in term.get("priceDimensions", {}).values():
            usd = dim.get("pricePerUnit", {}).get("USD")
            if dim.get("unit") == "Hrs" and usd is not None:
                prices.append(float(usd))
    return prices


def parse_price_list(price_list: Iterable[str | Mapping[str, Any]], instance_type: str) -> float:
    """The on-demand USD/hour in a get_products PriceList (items are JSON strings)."""
    found: set[float] = set()
    for raw in price_list:
        item = json.loads(raw) if isinstance(raw, str) else raw
        attrs = item.get("product", {}).get("attributes", {})
        if attrs.get("instanceType") != instance_type:
            continue
        found.update(p for p in _on_demand_hourly(item) if p > 0)
    if len(found) != 1:
        what = "no on-demand hourly price" if not found else f"several prices {sorted(found)}"
        raise PriceListError(f"price list for {instance_type}: {what}")
    return found.pop()


def fetch_price(client: Any, instance_type: str, region: str) -> float:
    """Ask the Price List API (a boto3 `pricing` client) for one instance type."""
    items: list[str] = []
    for page in client.get_paginator("get_products").paginate(
            ServiceCode="AmazonEC2", Filters=price_filters(instance_type, region),
            FormatVersion="aws_v1"):
        items.extend(page.get("PriceList", []))
    return parse_price_list(items, instance_type)


def _read_cache(path: Path) -> dict[str, dict[str, Any]]:
    try:
        return json.loads(path.read_text()).get("prices", {})
    except (OSError, ValueError, AttributeError):
        return {}  # no cache yet, or unreadable: it is rebuilt from the API


def _write_cache(path: Path, prices: dict[str, dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": 1, "prices": prices}, indent=1, sort_keys=True))
    tmp.replace(path)


def _default_client() -> Any:
    import boto3
    from botocore.config import Config

    # Fail over to the cache/catalogue quickly when the API is out of reach.
    return boto3.client("pricing", region_name=PRICING_REGION,
                        config=Config(connect_timeout=5, read_timeout=30,
                                      retries={"mode": "standard", "max_attempts": 2}))


def resolve_prices(instance_types: Iterable[str], region: str, *,
                   client_factory: Callable[[], Any] = _default_client,
                   cache_path: Path = DEFAULT_CACHE, max_age_days: int = 7,
                   today: date | None = None,
                   overrides: Mapping[str, float] | None = None,
                   missing_ok: bool = False) -> dict[str, PriceQuote]:
    """A quote per instance type. A type no source prices raises PriceUnavailable, or, with
    `missing_ok`, is left out of the answer (the caller then says its cost is unknown)."""
    today = today or datetime.now(UTC).date()
    overrides = overrides or {}
    cache = _read_cache(cache_path)
    quotes: dict[str, PriceQuote] = {}
    client, unreachable, dirty = None, "", False
    for it in sorted(set(instance_types)):
        key = f"{region}/{it}"
        if it in overrides:
            quotes[it] = PriceQuote(it, region, overrides[it], "override", today.isoformat(),
                                    "stack cost.priceOverrides")
            continue
        cached = cache.get(key)
        age = (today - date.fromisoformat(cached["date"])).days if cached else None
        if cached and age is not None and age <= max_age_days:
            quotes[it] = PriceQuote(it, region, cached["usdPerHour"], "cache", cached["date"])
            continue
        if not unreachable:
            try:
                client = client or client_factory()
                usd = fetch_price(client, it, region)
                cache[key] = {"usdPerHour": usd, "date": today.isoformat()}
                dirty = True
                quotes[it] = PriceQuote(it, region, usd, "api", today.isoformat())
                continue
            except PriceListError as exc:
                reason = str(exc)
            except (BotoCoreError, ClientError) as exc:
                # one failure to reach the API is enough: do not retry it for every type
                first_line = (str(exc).splitlines() or [""])[0][:200]
                unreachable = reason = f"pricing API unreachable: {first_line}"
        else:
            reason = unreachable
        try:
            quotes[it] = _fallback(it, region, cached, reason)
        except PriceUnavailable:
            if not missing_ok:
                raise
    if dirty:
        _write_cache(cache_path, cache)
    return quotes


def _fallback(it: str, region: str, cached: dict[str, Any] | None, reason: str) -> PriceQuote:
    if cached:
        return PriceQuote(it, region, cached["usdPerHour"], "cache", cached["date"],
                          f"stale; {reason}")
    if it in INSTANCE_TYPES:
        inst = INSTANCE_TYPES[it]
        where = "" if region == "us-east-1" else f"us-east-1 price used for {region}; "
        return PriceQuote(it, region, inst.on_demand_usd_per_hour, "catalogue", inst.price_date,
                          f"{where}{inst.price_source}; {reason}")
    raise PriceUnavailable(f"no price for {it} in {region} ({reason}): add it to the stack's "
                           "cost.priceOverrides or to stacks/catalog/instances.py")
