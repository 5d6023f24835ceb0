"""The account shell (aws.md R2, R3, R7): moto answers EC2 (zones, offerings, VPCs); moto 5.2.5
has no Service Quotas values for these codes, so a botocore Stubber answers those."""

from __future__ import annotations

import boto3
from aws_moto import aws_env  # noqa: F401 - fixture
from botocore.stub import Stubber
from moto import mock_aws

from stacks.catalog.aws_quotas import ON_DEMAND_VCPUS, REGIONAL, SPOT_VCPUS
from stacks.config.loader import load_stack
from workloads.targets.aws.account_facts import AccountFacts, fetch, judge


class _Session:
    """boto3 session whose service-quotas client is stubbed (P on-demand quota 96)."""

    def __init__(self) -> None:
        self.real = boto3.session.Session(region_name="us-east-1")

    def client(self, name: str, region_name: str):
        client = self.real.client(name, region_name=region_name)
        if name != "service-quotas":
            return client
        stub = Stubber(client)
        for q in [*ON_DEMAND_VCPUS.values(), *SPOT_VCPUS.values(), *REGIONAL]:
            value = 96.0 if q.code == "L-417A185B" else 1000.0
            stub.add_response("get_service_quota", {"Quota": {"Value": value}},
                              {"ServiceCode": q.service, "QuotaCode": q.code})
        stub.activate()
        return client


def test_the_shell_fetches_zones_offerings_quotas_and_usage(aws_env) -> None:  # noqa: F811
    with mock_aws():
        facts = fetch(load_stack("base-b200"), _Session())
    assert facts.zone_ids["us-east-1a"].startswith("use1-az")
    assert "p6-b200.48xlarge" in facts.offerings and "m7i.4xlarge" in facts.offerings
    assert facts.quotas["L-417A185B"] == 96.0
    assert facts.usage["L-F678F1CE"] >= 1          # moto's default VPC
    problems, notes = judge(load_stack("base-b200"), facts, owns_cluster=True)
    assert any("384 vCPUs" in n and "L-417A185B" in n for n in notes)


def test_a_pinned_zone_that_is_a_refused_id_in_this_account_is_refused() -> None:
    stack = load_stack("base-b200")
    facts = AccountFacts(zone_ids={"us-east-1a": "use1-az3", "us-east-1b": "use1-az1"},
                         offerings={"p6-b200.48xlarge": {"us-east-1a"},
                                    "m7i.4xlarge": {"us-east-1a", "us-east-1b"}})
    problems, _ = judge(stack, facts, owns_cluster=True)
    (p,) = problems
    assert p.field == "dynamo-bench:cluster.nodeGroups[0].availabilityZone"
    assert "use1-az3" in p.message and p.fix == "use one of us-east-1b"
