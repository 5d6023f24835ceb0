"""What a report's cost says when a price is missing or unverified: a run whose record names
an instance type the catalogue does not know (a newer type, or one dropped since) is priced
from the record or reported unknown, never a crash and never a silently smaller figure."""

from __future__ import annotations

import math

import pytest
from reports_fixtures import cost_row

NEW_TYPE = "g7e.48xlarge"   # not in stacks/catalog/instances.py
GP3, NAT = 0.08 / 730, 0.045 + 0.005   # $ per GiB-hour of gp3; NAT gateway + IPv4 per hour


def _with(tmp_path, *, group_type: str = "p4d.24xlarge", **fields) -> dict:
    """local-agg's fixture run with its imitated node group of `group_type` and extra record
    fields: the concurrency_sweep/c4 cost row, its window in hours, report.md."""
    def edit(doc: dict) -> None:
        doc["stack_config"]["cluster"]["nodeGroups"][0]["instanceType"] = group_type
        doc.update(fields)
    row, hours, out = cost_row(tmp_path, edit)
    return {**row, "hours": hours, "md": (out / "report.md").read_text()}


def test_estimate_with_an_unknown_instance_type_says_unknown(tmp_path):
    row = _with(tmp_path, group_type=NEW_TYPE)
    assert math.isnan(row["period_cost_usd"]) and math.isnan(row["usd_per_1m_output_tokens"])
    assert math.isnan(row["gpu_cost_usd_per_h"])
    assert f"PRICE UNKNOWN (cost and $/1M not computed): nodes p4d (1 x {NEW_TYPE}): no price" \
        in row["cost_scope"]
    assert row["successful_output_tokens"] > 0   # the measurement itself is still there


def test_estimate_uses_the_price_recorded_with_the_run(tmp_path):
    row = _with(tmp_path, group_type=NEW_TYPE, prices={NEW_TYPE: {"usdPerHour": 40.0}})
    # EKS 0.60: the fixture run (2026-11-30) is past EKS 1.33's standard support (2026-07-29)
    hourly = (40.0 + 2 * 0.8064 + 3 * 200 * GP3 + 0.60 + 200 * 0.30 / 730 + NAT)
    assert row["period_cost_usd"] == pytest.approx(hourly * row["hours"], rel=1e-6)
    assert row["gpu_cost_usd_per_h"] == pytest.approx(40.0)
    # nobody verified a price only the record carries: the row and report.md say so
    assert NEW_TYPE in row["unverified_prices"] and "m7i.4xlarge" in row["unverified_prices"]
    assert f"unverified prices: {NEW_TYPE} (no source)" in row["md"]


def test_measured_nodes_of_an_unknown_type_make_the_cost_unknown_or_use_the_record(tmp_path):
    nodes = [{"node": "i-0new", "instanceType": NEW_TYPE, "nodeGroup": "p4d",
              "start": "2020-01-01T00:00:00Z", "end": None}]
    row = _with(tmp_path / "a", nodes=nodes)
    assert row["cost_basis"].startswith("measured") and math.isnan(row["period_cost_usd"])
    assert f"node-h of {NEW_TYPE}" in row["cost_scope"]
    priced = _with(tmp_path / "b", nodes=nodes, prices={NEW_TYPE: 40.0})
    # the node and its 200 GiB root volume (group p4d of the record's cluster), EKS (extended
    # support on the run's day: 0.60), EFS, NAT
    hourly = 40.0 + 200 * GP3 + 0.60 + 200 * 0.30 / 730 + NAT
    assert priced["period_cost_usd"] == pytest.approx(hourly * priced["hours"], rel=1e-6)
