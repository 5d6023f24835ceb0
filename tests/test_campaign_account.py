"""The campaign asks the deployer's account before its first `pulumi up` (aws.md R3, R7): a type
EC2 does not offer in a pinned zone refuses the campaign; quotas are warnings with the numbers;
with no credentials one note says none of it was checked.

moto 5.2.5 answers EC2 (zones with their IDs, offerings by zone ID, instances, VPCs); it has no
Service Quotas values for these codes (tests/test_aws_account_facts.py), so a botocore Stubber
answers GetServiceQuota here and nothing else is faked."""

from __future__ import annotations

import shutil

import boto3
import pytest
from aws_moto import aws_env  # noqa: F401 - fixture
from botocore.stub import Stubber
from campaign_fake import FakeWorkspace, fake_cluster
from moto import mock_aws
from rich.console import Console

from stacks.catalog.aws_quotas import ON_DEMAND_VCPUS, REGIONAL, SPOT_VCPUS
from stacks.config.loader import STACKS_DIR, load_stack
from workloads.campaign.run import CampaignOptions, CampaignRefused, run_campaign
from workloads.targets.aws.account_facts import NOT_CHECKED, campaign_stacks, check_account

P_QUOTA = "L-417A185B"   # Running On-Demand P instances


class _Session:
    """A boto3 session on moto whose service-quotas client is stubbed (P on-demand: 96)."""

    def __init__(self) -> None:
        self.real = boto3.session.Session(region_name="us-east-1")

    def get_credentials(self):
        return self.real.get_credentials()

    def client(self, name: str, region_name: str):
        client = self.real.client(name, region_name=region_name)
        if name == "service-quotas":
            stub = Stubber(client)
            for q in [*ON_DEMAND_VCPUS.values(), *SPOT_VCPUS.values(), *REGIONAL]:
                stub.add_response("get_service_quota",
                                  {"Quota": {"Value": 96.0 if q.code == P_QUOTA else 1000.0}},
                                  {"ServiceCode": q.service, "QuotaCode": q.code})
            stub.activate()
        return client


class _NoCredentials:
    def get_credentials(self):
        return None

    def client(self, *a, **k):  # pragma: no cover - must not be reached
        raise AssertionError("asked AWS without credentials")


def _pinned(name: str, zone: str, tmp_path):
    """A copy of the stacks folder whose `name` pins its first group to `zone`."""
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS_DIR, stacks)
    f = stacks / f"Pulumi.{name}.yaml"
    f.write_text(f.read_text().replace("availabilityZone: us-east-1a",
                                       f"availabilityZone: {zone}", 1))
    return stacks


def test_offerings_are_asked_by_zone_id_and_mapped_to_this_accounts_names(aws_env) -> None:  # noqa: F811
    # moto: us-east-1a is use1-az6 here, which offers p6-b200.48xlarge by zone ID (moto's
    # by-name table lists only us-east-1c: names are per-account aliases, IDs are not)
    with mock_aws():
        problems, notes = check_account([(load_stack("base-b200"), True)], _Session())
    assert problems == []
    (quota,) = [n for n in notes if P_QUOTA in n]
    assert "need 384 vCPUs" in quota and "0 are in use" in quota and "is 96" in quota


def test_vcpus_of_running_instances_count_against_the_quota(aws_env) -> None:  # noqa: F811
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        ec2.run_instances(ImageId="ami-12345678", InstanceType="p4d.24xlarge", MinCount=1,
                          MaxCount=1)
        _, notes = check_account([(load_stack("base-b200"), True)], _Session())
    (quota,) = [n for n in notes if P_QUOTA in n]
    # a p4d.24xlarge has 96 vCPUs (DescribeInstanceTypes DefaultVCpus)
    assert "need 384 vCPUs" in quota and "96 are in use" in quota
    assert "--desired-value 480" in quota


def test_a_type_not_offered_in_the_pinned_zone_refuses(aws_env, tmp_path) -> None:  # noqa: F811
    # us-east-1b is use1-az1 in moto's account: no p6-b200.48xlarge there
    stack = load_stack("base-b200", _pinned("base-b200", "us-east-1b", tmp_path))
    with mock_aws():
        problems, _ = check_account([(stack, True)], _Session())
    (p,) = problems
    assert p.field == "dynamo-bench:cluster.nodeGroups[0].availabilityZone"
    assert "p6-b200.48xlarge" in p.message and "us-east-1b" in p.message
    assert "us-east-1a" in p.fix


def test_without_credentials_it_says_once_that_nothing_was_checked() -> None:
    stacks = campaign_stacks(load_stack("base-a100"), [load_stack("agg-a100")])
    assert check_account(stacks, _NoCredentials()) == ([], [NOT_CHECKED])


def test_the_campaign_is_refused_before_any_pulumi_up(aws_env, tmp_path) -> None:  # noqa: F811
    # us-east-1e is use1-az3 in moto's account: p4d is not offered there (and EKS refuses it)
    stacks_dir = _pinned("base-a100", "us-east-1e", tmp_path)
    cluster = fake_cluster(tmp_path)
    ws = FakeWorkspace(cluster)
    opts = CampaignOptions(base="base-a100", variants=["agg-a100"], scale="quick",
                           run_id="c1", runs_dir=tmp_path / "runs", stacks_dir=stacks_dir,
                           show_progress=False)
    with mock_aws(), pytest.raises(CampaignRefused) as exc:
        run_campaign(opts, Console(file=open("/dev/null", "w")), stacks=ws,  # noqa: SIM115
                     clock=cluster.clock, aws_session=_Session())
    assert "nodeGroups[0].availabilityZone" in str(exc.value) and "p4d.24xlarge" in str(exc.value)
    assert ws.ops("up") == []


def test_the_account_command_refuses_with_exit_2_and_says_why(aws_env, tmp_path) -> None:  # noqa: F811
    from typer.testing import CliRunner

    from workloads.__main__ import app

    stacks_dir = _pinned("base-b200", "us-east-1b", tmp_path)
    with mock_aws():   # Service Quotas unstubbed: a quota moto cannot answer is left unjudged
        result = CliRunner().invoke(app, ["account", "base-b200", "--stacks-dir",
                                          str(stacks_dir)])
    assert result.exit_code == 2, result.output
    assert "nodeGroups[0].availabilityZone" in result.output
