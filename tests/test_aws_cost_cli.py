"""`reports cost` end to end against a moto server on 127.0.0.1 (AWS_ENDPOINT_URL): instances
tagged with the stack, Cost Explorer results seeded through moto's API, prices from the
catalogue because the pricing API is not there."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta

import moto.ec2.models.instances as moto_instances
import pytest
import requests
from aws_moto import aws_env, moto_server  # noqa: F401 (fixtures)
from typer.testing import CliRunner

from reports.accounting.aws_cli import aws_app, clients_for

T0 = datetime(2026, 8, 1, 0, 0)



def _run(ec2, monkeypatch, at_h: float, itype: str, stack: str, group: str = "") -> str:
    """An instance launched at T0 + at_h h; `group`: its node group, as EKS tags it."""
    monkeypatch.setattr(moto_instances, "utcnow", lambda: T0 + timedelta(hours=at_h))
    tags = [{"Key": "stack", "Value": stack}]
    tags += [{"Key": "eks:nodegroup-name", "Value": group}] if group else []
    return ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType=itype,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"][0][
        "InstanceId"]


@pytest.mark.usefixtures("moto_server")
def test_cost_shows_computed_beside_billed(monkeypatch, tmp_path):
    ec2 = clients_for("us-east-1")("ec2")
    _run(ec2, monkeypatch, 0, "p4d.24xlarge", "agg-a100-standalone", "p4d")
    gone = _run(ec2, monkeypatch, 0, "p4d.24xlarge", "agg-a100-standalone", "p4d")
    _run(ec2, monkeypatch, 0, "m7i.4xlarge", "agg-a100-standalone", "cpu")
    _run(ec2, monkeypatch, 0, "p4d.24xlarge", "agg-a100")          # another stack's
    monkeypatch.setattr(moto_instances, "utcnow", lambda: T0 + timedelta(hours=2))
    ec2.terminate_instances(InstanceIds=[gone])
    seeded = {"results": [{"ResultsByTime": [{
        "TimePeriod": {"Start": "2026-08-01", "End": "2026-08-02"}, "Estimated": True,
        "Total": {}, "Groups": [
            {"Keys": ["stack$agg-a100-standalone"],
             "Metrics": {"UnblendedCost": {"Amount": "133.10", "Unit": "USD"}}},
            {"Keys": ["stack$agg-a100"],
             "Metrics": {"UnblendedCost": {"Amount": "88.00", "Unit": "USD"}}}]}]}]}
    moto_url = os.environ["AWS_ENDPOINT_URL"]
    assert requests.post(f"{moto_url}/moto-api/static/ce/cost-and-usage-results",
                         json=seeded, timeout=10).status_code == 201

    res = CliRunner().invoke(aws_app, [
        "cost", "agg-a100-standalone", "--start", "2026-08-01T00:00:00",
        "--end", "2026-08-01T04:00:00", "--price-cache", str(tmp_path / "prices.json")])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    # By hand, 00:00-04:00: p4d 4 h + 2 h (terminated 02:00) = 6 x 21.957642 = 131.75;
    # m7i 4 x 0.8064 = 3.23; root volumes 6 node-h x 500 GiB + 4 x 200 GiB = 3,800 GiB-h x
    # $0.08 / 730 = 0.42; EKS 1.35 is in standard support on 2026-08-01 (until 2027-03-27):
    # 4 x 0.10 = 0.40; EFS 200 GiB x 0.30 / 730 x 4 = 0.33; NAT gateway + its IPv4 address
    # 4 x (0.045 + 0.005) = 0.20. Total 136.32.
    assert "agg-a100-standalone: computed $136.32 vs billed $133.10" in out
    assert "EKS control plane" in out and "extended support on" not in out
    # GPU nodes 131.7459 + their root volumes 0.3288 = 132.07; shared: m7i 3.2256 + its root
    # volume 0.0877 + EKS 0.40 + EFS 0.3288 + NAT 0.20 = 4.24
    assert "│ GPU nodes │ │ 132.07 │" in out and "│ shared fixed costs │ │ 4.24 │" in out
    assert "unverified prices: m7i.4xlarge (catalogue 2025-01-01)" in out
    assert "lags usage by up to 24 h" in out
    assert "price p4d.24xlarge: $21.9576/h (catalogue 2026-07-28" in out
    assert not (tmp_path / "prices.json").exists()   # nothing from the API to cache

    attached = CliRunner().invoke(aws_app, ["cost", "agg-a100"])
    assert attached.exit_code == 2 and "pass --nodes" in " ".join(attached.output.split())
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"nodes": [
        {"node": "ip-10-42-1-7.ec2.internal", "instanceType": "p4d.24xlarge",
         "nodeGroup": "p4d", "start": "2026-08-01T01:00:00Z", "end": "2026-08-01T02:00:00Z"}]}))
    res = CliRunner().invoke(aws_app, ["cost", "agg-a100", "--nodes", str(manifest),
                                       "--price-cache", str(tmp_path / "prices.json")])
    out = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    # 1 node-h x 21.957642 + its 500 GiB-h root volume 0.054795 + 1 h x (EKS 0.10, standard
    # support + EFS 200 GiB x 0.30 / 730 + NAT 0.05) = 22.24
    assert "agg-a100: computed $22.24 vs billed $88.00" in out
    assert "bill under the base's tag (base-a100)" in out


def _table(output: str) -> dict[str, str]:
    """{'what' or subtotal label: USD cell} of the computed-cost table."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == 3 and line.startswith("│"):
            rows[cells[0]] = cells[2]
    return rows


@pytest.mark.usefixtures("moto_server")
def test_base_and_variant_split_the_same_bill_without_counting_nodes_twice(monkeypatch,
                                                                           tmp_path):
    ec2 = clients_for("us-east-1")("ec2")
    for itype, group in (("p4d.24xlarge", "p4d"), ("p4d.24xlarge", "p4d"),
                         ("g6e.12xlarge", "g6e"), ("m7i.4xlarge", "cpu"),
                         ("m7i.4xlarge", "cpu")):
        _run(ec2, monkeypatch, 0, itype, "base-a100", group)
    window = ["--start", "2026-08-01T01:00:00", "--end", "2026-08-01T02:00:00",
              "--price-cache", str(tmp_path / "prices.json")]
    base = CliRunner().invoke(aws_app, ["cost", "base-a100", *window])
    assert base.exit_code == 0, base.output
    b = _table(base.output)
    # 1 h of the whole base: GPU nodes 2 x 21.957642 + 10.49264 + root volumes 1,500 GiB-h x
    # 0.08 / 730 = 54.57; shared: 2 x 0.8064 + 400 GiB-h 0.0438 + EKS 0.10 (1.35 in standard
    # support on 2026-08-01) + EFS 0.0822 + NAT 0.05 = 1.89; total 56.46 (the base's hourly
    # estimate on that day: `stacks plan --as-of 2026-08-01` agrees)
    assert (b["GPU nodes"], b["shared fixed costs"], b["total"]) == ("54.57", "1.89", "56.46")
    assert "they are not additions to it" in " ".join(base.output.split())

    # the variant's run record: one p4d for its workers, one CPU node for its frontend
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"nodes": [
        {"node": "ip-10-42-1-7.ec2.internal", "instanceType": "p4d.24xlarge",
         "nodeGroup": "p4d", "start": "2026-08-01T01:00:00Z", "end": "2026-08-01T02:00:00Z"},
        {"node": "ip-10-42-9-3.ec2.internal", "instanceType": "m7i.4xlarge",
         "nodeGroup": "cpu", "start": "2026-08-01T01:00:00Z", "end": "2026-08-01T02:00:00Z"}]}))
    variant = CliRunner().invoke(aws_app, ["cost", "agg-a100", "--nodes", str(manifest),
                                           *window])
    assert variant.exit_code == 0, variant.output
    v = _table(variant.output)
    shared = "shared (base-a100's fixed costs)"
    # its own part: the p4d node-hour 21.957642 + its 500 GiB-h root volume 0.0548 = 22.01;
    # the base's fixed costs over its hour: CPU node 0.8064 + 0.0219 + EKS 0.10 (1.35, standard
    # support) + EFS 0.0822 + NAT 0.05 = 1.06
    assert (v["this variant"], v[shared], v["total"]) == ("22.01", "1.06", "23.07")
    assert v["nodes p4d.24xlarge (1.00 node-h x $21.9576)"] == "21.96"
    # a part of the base's bill, never more than it, and said so
    assert float(v["this variant"]) <= float(b["GPU nodes"])
    assert float(v[shared]) <= float(b["shared fixed costs"])
    out = " ".join(variant.output.split())
    assert "is inside `reports cost base-a100` for the same period" in out
    assert "never add this figure to base-a100's or to another variant's" in out


@pytest.mark.usefixtures("moto_server")
def test_an_instance_type_missing_from_the_catalogue_never_crashes(tmp_path):
    nodes = [{"node": "i-0new", "instanceType": "g7e.48xlarge", "nodeGroup": "p4d",
              "start": "2026-08-01T01:00:00Z", "end": "2026-08-01T03:00:00Z"}]
    manifest = tmp_path / "manifest.json"
    args = ["cost", "agg-a100", "--nodes", str(manifest), "--price-cache",
            str(tmp_path / "prices.json")]
    manifest.write_text(json.dumps({"nodes": nodes}))
    res = CliRunner().invoke(aws_app, args)
    out = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "nodes g7e.48xlarge (2.00 node-h, no price) │ this variant │ unknown" in out
    assert "price unknown for g7e.48xlarge" in out and "the total is a lower bound" in out
    assert "agg-a100: computed at least $" in out
    # the price the run record carries is used (and flagged: nobody verified it)
    manifest.write_text(json.dumps({"nodes": nodes, "prices": {
        "g7e.48xlarge": {"usdPerHour": 40.0, "source": "stack cost.priceOverrides"}}}))
    res = CliRunner().invoke(aws_app, args)
    out = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "nodes g7e.48xlarge (2.00 node-h x $40.0000) │ this variant │ 80.00" in out
    assert "price g7e.48xlarge: $40.0000/h (recorded with the run" in out
    assert "unverified prices: g7e.48xlarge (recorded with the run)" in out
