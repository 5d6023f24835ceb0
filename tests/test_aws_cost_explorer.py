"""Cost Explorer results seeded through moto's API come back grouped by stack."""

from __future__ import annotations

from datetime import date

import boto3
import pytest
import requests
from aws_moto import aws_env  # noqa: F401 (fixtures)
from botocore.stub import Stubber
from moto import mock_aws

from reports.accounting.cost_explorer import (
    UNTAGGED,
    activate_cost_allocation_tags,
    billed_by_stack,
)

# moto 5.2.5: get_cost_and_usage answers from a queue filled by POSTing to this endpoint
# (moto/moto_api/_internal/urls.py, moto/ce/models.py).
MOTO_CE = "http://motoapi.amazonaws.com/moto-api/static/ce/cost-and-usage-results"


def _group(stack: str, usd: str) -> dict:
    return {"Keys": [f"stack${stack}"], "Metrics": {"UnblendedCost": {"Amount": usd,
                                                                        "Unit": "USD"}}}


def _day(day: str, nxt: str, groups: list[dict], estimated: bool = False) -> dict:
    return {"TimePeriod": {"Start": day, "End": nxt}, "Total": {}, "Groups": groups,
            "Estimated": estimated}


SEEDED = {"results": [{"ResultsByTime": [
    _day("2026-08-01", "2026-08-02", [_group("base-a100", "1210.50"),
                                      _group("agg-a100", "3.25"), _group("", "0.75")]),
    _day("2026-08-02", "2026-08-03", [_group("base-a100", "980.00"),
                                      _group("agg-a100", "1.75")], estimated=True),
], "DimensionValueAttributes": [], "GroupDefinitions": [{"Type": "TAG", "Key": "stack"}]}]}



@pytest.mark.usefixtures("aws_env")
def test_seeded_results_come_back_grouped_by_stack():
    with mock_aws():
        assert requests.post(MOTO_CE, json=SEEDED, timeout=10).status_code == 201
        ce = boto3.client("ce", region_name="us-east-1")
        billed = billed_by_stack(ce, date(2026, 8, 1), date(2026, 8, 3))
    assert billed.by_stack == pytest.approx({"base-a100": 2190.50, "agg-a100": 5.00,
                                             UNTAGGED: 0.75})
    assert billed.for_stack("agg-a100") == pytest.approx(5.0)
    assert billed.for_stack("never-ran") == 0.0
    assert billed.estimated and billed.unit == "USD"


def test_request_groups_by_tag_follows_pages_and_activation_reports_refusals():
    ce = boto3.client("ce", region_name="us-east-1", aws_access_key_id="x",
                      aws_secret_access_key="x")
    stub = Stubber(ce)
    request = {"TimePeriod": {"Start": "2026-08-01", "End": "2026-08-02"},
               "Granularity": "DAILY", "Metrics": ["UnblendedCost"],
               "GroupBy": [{"Type": "TAG", "Key": "stack"}]}
    stub.add_response("get_cost_and_usage", {"ResultsByTime": [
        _day("2026-08-01", "2026-08-02", [_group("agg-a100", "2.00")])],
        "NextPageToken": "page-2"}, request)
    stub.add_response("get_cost_and_usage", {"ResultsByTime": [
        _day("2026-08-01", "2026-08-02", [_group("agg-a100", "0.50")])]},
        {**request, "NextPageToken": "page-2"})
    stub.add_response("update_cost_allocation_tags_status", {"Errors": [
        {"TagKey": "experiment", "Code": "TagKeysNotFoundException",
         "Message": "tag key not found in billing data"}]},
        {"CostAllocationTagsStatus": [{"TagKey": k, "Status": "Active"}
                                      for k in ("stack", "project", "experiment")]})
    with stub:
        billed = billed_by_stack(ce, date(2026, 8, 1), date(2026, 8, 2))
        problems = activate_cost_allocation_tags(ce)
        stub.assert_no_pending_responses()
    assert billed.by_stack == {"agg-a100": 2.5}
    assert problems == ["experiment: TagKeysNotFoundException tag key not found in billing data"]
    with pytest.raises(ValueError, match="exclusive"):
        billed_by_stack(ce, date(2026, 8, 2), date(2026, 8, 2))
