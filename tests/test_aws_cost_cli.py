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

from reports.aws_cli import aws_app, clients_for

T0 = datetime(2026, 8, 1, 0, 0)



def _run(ec2, monkeypatch, at_h: float, itype: str, stack: str) -> str:
    monkeypatch.setattr(moto_instances, "utcnow", lambda: T0 + timedelta(hours=at_h))
    return ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType=itype,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "stack", "Value": stack}]}])["Instances"][0]["InstanceId"]


@pytest.mark.usefixtures("moto_server")
def test_cost_shows_computed_beside_billed(monkeypatch, tmp_path):
    ec2 = clients_for("us-east-1")("ec2")
    _run(ec2, monkeypatch, 0, "p4d.24xlarge", "agg-a100-standalone")
    gone = _run(ec2, monkeypatch, 0, "p4d.24xlarge", "agg-a100-standalone")
    _run(ec2, monkeypatch, 0, "m7i.4xlarge", "agg-a100-standalone")
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
    # m7i 4 x 0.8064 = 3.23; EKS 4 x 0.10 = 0.40; EFS 200 GiB x 0.30 / 730 x 4 = 0.33.
    assert "agg-a100-standalone: computed $135.70 vs billed $133.10" in out
    assert "lags usage by up to 24 h" in out
    assert "price p4d.24xlarge: $21.9576/h (catalogue 2026-07-28" in out
    assert not (tmp_path / "prices.json").exists()   # nothing from the API to cache

    attached = CliRunner().invoke(aws_app, ["cost", "agg-a100"])
    assert attached.exit_code == 2 and "pass --nodes" in " ".join(attached.output.split())
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"nodes": [
        {"node": "ip-10-42-1-7.ec2.internal", "instanceType": "p4d.24xlarge",
         "start": "2026-08-01T01:00:00Z", "end": "2026-08-01T02:00:00Z"}]}))
    res = CliRunner().invoke(aws_app, ["cost", "agg-a100", "--nodes", str(manifest),
                                       "--price-cache", str(tmp_path / "prices.json")])
    out = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    # 1 node-h x 21.957642 + 1 h x 0.10 + 200 GiB x 0.30 / 730 x 1 h = 22.14
    assert "agg-a100: computed $22.14 vs billed $88.00" in out
    assert "bill under the base's tag (base-a100)" in out
