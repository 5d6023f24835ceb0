"""Prices from a stubbed Price List API response (moto has no pricing API), the dated cache and
the catalogue fallback."""

from __future__ import annotations

import json
from datetime import date

import boto3
import pytest
from botocore.stub import Stubber

from reports.accounting.pricing import (
    PriceListError,
    PriceUnavailable,
    parse_price_list,
    price_filters,
    resolve_prices,
)


def price_list_item(instance_type: str, usd: str, region: str = "us-east-1") -> str:
    """One PriceList entry as get_products returns it: a JSON string, with the OnDemand term
    and a Reserved term (which must be ignored), shaped like the real AmazonEC2 offer."""
    return json.dumps({
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": instance_type, "regionCode": region,
                "location": "US East (N. Virginia)", "locationType": "AWS Region",
                "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                "capacitystatus": "Used", "operation": "RunInstances",
                "licenseModel": "No License required", "marketoption": "OnDemand",
                "usagetype": f"BoxUsage:{instance_type}", "vcpu": "96", "gpu": "8",
                "memory": "1152 GiB", "servicecode": "AmazonEC2",
            },
            "sku": "9JGE8M4KQ2V7XDTX",
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {"9JGE8M4KQ2V7XDTX.JRTCKXETXF": {
                "offerTermCode": "JRTCKXETXF", "sku": "9JGE8M4KQ2V7XDTX",
                "effectiveDate": "2026-07-01T00:00:00Z", "termAttributes": {},
                "priceDimensions": {"9JGE8M4KQ2V7XDTX.JRTCKXETXF.6YS6EN2CT7": {
                    "rateCode": "9JGE8M4KQ2V7XDTX.JRTCKXETXF.6YS6EN2CT7", "unit": "Hrs",
                    "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                    "beginRange": "0", "endRange": "Inf", "appliesTo": [],
                    "pricePerUnit": {"USD": usd}}}}},
            "Reserved": {"9JGE8M4KQ2V7XDTX.4NA7Y494T4": {
                "offerTermCode": "4NA7Y494T4", "sku": "9JGE8M4KQ2V7XDTX",
                "effectiveDate": "2026-07-01T00:00:00Z",
                "termAttributes": {"LeaseContractLength": "1yr", "OfferingClass": "standard",
                                   "PurchaseOption": "No Upfront"},
                "priceDimensions": {"9JGE8M4KQ2V7XDTX.4NA7Y494T4.6YS6EN2CT7": {
                    "unit": "Hrs", "pricePerUnit": {"USD": "13.8334000000"},
                    "description": "Linux/UNIX (Amazon VPC), p4d.24xlarge reserved instance",
                    "beginRange": "0", "endRange": "Inf", "appliesTo": [],
                    "rateCode": "9JGE8M4KQ2V7XDTX.4NA7Y494T4.6YS6EN2CT7"}}}},
        },
        "version": "20260728201611",
        "publicationDate": "2026-07-28T20:16:11Z",
    })


TODAY = date(2026, 8, 3)


def stubbed_pricing(responses: dict[str, list[str]]):
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    stub = Stubber(client)
    for it, items in responses.items():
        stub.add_response("get_products",
                          {"PriceList": items, "FormatVersion": "aws_v1"},
                          {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1",
                           "Filters": price_filters(it, "us-east-1")})
    stub.activate()
    return client, stub


def test_filters_pin_one_linux_on_demand_product():
    f = {x["Field"]: x["Value"] for x in price_filters("p4d.24xlarge", "us-east-1")}
    assert f == {"instanceType": "p4d.24xlarge", "regionCode": "us-east-1",
                 "location": "US East (N. Virginia)", "operatingSystem": "Linux",
                 "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
                 "operation": "RunInstances"}
    assert "location" not in {x["Field"] for x in price_filters("g6e.12xlarge", "ap-south-2")}


def test_parse_reads_on_demand_not_reserved():
    assert parse_price_list([price_list_item("p4d.24xlarge", "21.9576420000")],
                            "p4d.24xlarge") == pytest.approx(21.957642)
    with pytest.raises(PriceListError, match="several prices"):
        parse_price_list([price_list_item("p4d.24xlarge", "21.96"),
                          price_list_item("p4d.24xlarge", "30.00")], "p4d.24xlarge")
    with pytest.raises(PriceListError, match="no on-demand"):
        parse_price_list([price_list_item("g6e.12xlarge", "10.49")], "p4d.24xlarge")


def test_api_result_is_cached_with_its_date_then_served_from_cache(tmp_path):
    cache = tmp_path / "prices.json"
    client, stub = stubbed_pricing({"p4d.24xlarge": [price_list_item("p4d.24xlarge",
                                                                     "21.9576420000")]})
    q = resolve_prices(["p4d.24xlarge"], "us-east-1", client_factory=lambda: client,
                       cache_path=cache, today=TODAY)["p4d.24xlarge"]
    stub.assert_no_pending_responses()
    assert (q.usd_per_hour, q.source, q.date) == (pytest.approx(21.957642), "api", "2026-08-03")
    assert json.loads(cache.read_text())["prices"]["us-east-1/p4d.24xlarge"] == {
        "usdPerHour": 21.957642, "date": "2026-08-03"}
    # Within max age: no API call at all (an unstubbed call would raise).
    later = date(2026, 8, 9)
    q = resolve_prices(["p4d.24xlarge"], "us-east-1", client_factory=lambda: client,
                       cache_path=cache, today=later, max_age_days=7)["p4d.24xlarge"]
    assert (q.source, q.describe()) == ("cache", "cache 2026-08-03")


def test_unreachable_api_falls_back_to_stale_cache_then_catalogue(tmp_path):
    cache = tmp_path / "prices.json"
    cache.write_text(json.dumps({"version": 1, "prices": {
        "us-east-1/g6e.12xlarge": {"usdPerHour": 10.0, "date": "2026-05-01"}}}))
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    stub = Stubber(client)
    stub.add_client_error("get_products", "AccessDeniedException", "not allowed")
    stub.activate()
    quotes = resolve_prices(["g6e.12xlarge", "p4d.24xlarge"], "us-east-1",
                            client_factory=lambda: client, cache_path=cache, today=TODAY,
                            overrides={"m7i.4xlarge": 0.5})
    stale, cat = quotes["g6e.12xlarge"], quotes["p4d.24xlarge"]
    assert (stale.usd_per_hour, stale.source, stale.date) == (10.0, "cache", "2026-05-01")
    assert "stale" in stale.note and "AccessDeniedException" in stale.note
    # One failed call is enough: the second type goes to the catalogue without a new call.
    assert (cat.usd_per_hour, cat.source, cat.date) == (21.957642, "catalogue", "2026-07-28")
    assert "unreachable" in cat.note


def test_override_wins_and_unknown_type_names_the_fix(tmp_path):
    def no_api():
        raise AssertionError("an override must not ask the API")
    q = resolve_prices(["p4d.24xlarge"], "us-east-1", client_factory=no_api,
                       cache_path=tmp_path / "p.json", today=TODAY,
                       overrides={"p4d.24xlarge": 11.0})["p4d.24xlarge"]
    assert (q.usd_per_hour, q.source) == (11.0, "override")
    client, _ = stubbed_pricing({"x9.huge": []})
    with pytest.raises(PriceUnavailable, match="cost.priceOverrides"):
        resolve_prices(["x9.huge"], "us-east-1", client_factory=lambda: client,
                       cache_path=tmp_path / "p.json", today=TODAY)
