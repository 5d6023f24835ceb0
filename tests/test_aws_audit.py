"""Teardown audit on moto: planted leftovers of every kind for stack s1, the same for another
stack and untagged; the audit lists exactly s1's, --delete removes exactly those. In-process
(mock_aws) and through AWS_ENDPOINT_URL against a moto server on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from aws_moto import REGION, aws_env, moto_server  # noqa: F401 (fixtures)
from botocore.stub import Stubber
from moto import mock_aws
from typer.testing import CliRunner

from reports.audit import Resource, audit, deletion_plan, resource_from_arn
from reports.audit_delete import delete_resources
from reports.aws_cli import aws_app, clients_for

ROOT = Path(__file__).resolve().parents[1]
# What an audit of s1 must find: one of each kind (two subnets).
EXPECTED_KINDS = sorted([
    "eks:nodegroup", "eks:cluster", "elasticloadbalancing:loadbalancer", "elb:loadbalancer",
    "elasticloadbalancing:targetgroup", "ec2:instance", "ec2:natgateway",
    "elasticfilesystem:access-point", "elasticfilesystem:file-system", "ec2:network-interface",
    "ec2:volume", "ec2:elastic-ip", "ec2:launch-template", "ec2:security-group",
    "ec2:internet-gateway", "ec2:route-table", "ec2:subnet", "ec2:subnet", "ec2:vpc"])


def _tags(stack: str | None) -> list[dict[str, str]]:
    name = [{"Key": "Name", "Value": f"{stack or 'untagged'}-leftover"}]
    return [{"Key": "stack", "Value": stack}, *name] if stack else name


def plant(c, stack: str | None, cidr: str) -> dict[str, str]:
    """One leftover of each kind, tagged stack=<stack> (or only a Name tag when None)."""
    ec2, efs, elb, elbv2, eks = (c(s) for s in ("ec2", "efs", "elb", "elbv2", "eks"))
    label, tags = stack or "untagged", _tags(stack)

    def spec(rtype: str) -> list[dict]:
        return [{"ResourceType": rtype, "Tags": tags}]
    vpc = ec2.create_vpc(CidrBlock=cidr, TagSpecifications=spec("vpc"))["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=cidr.replace("0.0/16", f"{i}.0/24"),
                                 AvailabilityZone=f"{REGION}{az}",
                                 TagSpecifications=spec("subnet"))["Subnet"]["SubnetId"]
               for i, az in ((1, "a"), (2, "b"))]
    ids = {"vpc": vpc, "subnet": subnets[0]}
    ids["sg"] = ec2.create_security_group(GroupName=f"{label}-sg", Description="nodes",
                                          VpcId=vpc, TagSpecifications=spec("security-group"))[
        "GroupId"]
    ids["igw"] = ec2.create_internet_gateway(TagSpecifications=spec("internet-gateway"))[
        "InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=ids["igw"], VpcId=vpc)
    ids["rtb"] = ec2.create_route_table(VpcId=vpc, TagSpecifications=spec("route-table"))[
        "RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=ids["rtb"], SubnetId=subnets[0])
    ids["instance"] = ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m7i.4xlarge",
        SubnetId=subnets[0], TagSpecifications=spec("instance"))["Instances"][0]["InstanceId"]
    # What Kubernetes controllers leave: a PVC's EBS volume, a Service's load balancers.
    ids["volume"] = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=100,
                                      TagSpecifications=spec("volume"))["VolumeId"]
    ids["eni"] = ec2.create_network_interface(SubnetId=subnets[0],
                                              TagSpecifications=spec("network-interface"))[
        "NetworkInterface"]["NetworkInterfaceId"]
    ids["eip"] = ec2.allocate_address(Domain="vpc", TagSpecifications=spec("elastic-ip"))[
        "AllocationId"]
    ids["nat"] = ec2.create_nat_gateway(SubnetId=subnets[1], AllocationId=ids["eip"],
                                        TagSpecifications=spec("natgateway"))["NatGateway"][
        "NatGatewayId"]
    ids["lt"] = ec2.create_launch_template(
        LaunchTemplateName=f"{label}-gpu", LaunchTemplateData={"InstanceType": "p4d.24xlarge"},
        TagSpecifications=spec("launch-template"))["LaunchTemplate"]["LaunchTemplateId"]
    ids["efs"] = efs.create_file_system(CreationToken=f"{label}-models", Tags=tags)[
        "FileSystemId"]
    efs.create_mount_target(FileSystemId=ids["efs"], SubnetId=subnets[0])
    ids["fsap"] = efs.create_access_point(FileSystemId=ids["efs"], Tags=tags)["AccessPointId"]
    ids["clb"] = f"{label}-clb"
    elb.create_load_balancer(LoadBalancerName=ids["clb"], Subnets=[subnets[0]], Tags=tags,
                             Listeners=[{"Protocol": "TCP", "LoadBalancerPort": 80,
                                         "InstancePort": 80}])
    ids["nlb"] = elbv2.create_load_balancer(Name=f"{label}-nlb", Subnets=subnets,
                                            Type="network", Tags=tags)["LoadBalancers"][0][
        "LoadBalancerArn"]
    ids["tg"] = elbv2.create_target_group(Name=f"{label}-tg", Protocol="TCP", Port=80,
                                          VpcId=vpc, Tags=tags)["TargetGroups"][0][
        "TargetGroupArn"]
    tag_map = {t["Key"]: t["Value"] for t in tags}
    ids["eks"] = f"{label}-eks"
    eks.create_cluster(name=ids["eks"], roleArn="arn:aws:iam::123456789012:role/eks",
                       resourcesVpcConfig={"subnetIds": subnets}, tags=tag_map)
    eks.create_nodegroup(clusterName=ids["eks"], nodegroupName=f"{label}-gpu", subnets=subnets,
                         nodeRole="arn:aws:iam::123456789012:role/node", tags=tag_map)
    return ids


def still_there(c, ids: dict[str, str]) -> dict[str, bool]:
    """Whether each planted resource of one set still exists (describe by id)."""
    ec2, efs = c("ec2"), c("efs")
    state = ec2.describe_instances(InstanceIds=[ids["instance"]])["Reservations"][0][
        "Instances"][0]["State"]["Name"]
    return {
        "instance": state != "terminated",
        "volume": bool(ec2.describe_volumes(Filters=[{"Name": "volume-id",
                                                      "Values": [ids["volume"]]}])["Volumes"]),
        "eni": bool(ec2.describe_network_interfaces(Filters=[{
            "Name": "network-interface-id", "Values": [ids["eni"]]}])["NetworkInterfaces"]),
        "efs": any(f["FileSystemId"] == ids["efs"]
                   for f in efs.describe_file_systems()["FileSystems"]),
        "clb": any(d["LoadBalancerName"] == ids["clb"] for d in
                   c("elb").describe_load_balancers()["LoadBalancerDescriptions"]),
        "nlb": any(d["LoadBalancerArn"] == ids["nlb"] for d in
                   c("elbv2").describe_load_balancers()["LoadBalancers"]),
        "eks": ids["eks"] in c("eks").list_clusters()["clusters"],
        "vpc": bool(ec2.describe_vpcs(Filters=[{"Name": "vpc-id",
                                                "Values": [ids["vpc"]]}])["Vpcs"]),
    }



def _plant_three(c) -> tuple[dict, dict, dict]:
    return (plant(c, "s1", "10.1.0.0/16"), plant(c, "s2", "10.2.0.0/16"),
            plant(c, None, "10.3.0.0/16"))


@pytest.mark.usefixtures("aws_env")
def test_in_process_audit_lists_only_this_stack_and_delete_removes_only_it():
    runner = CliRunner()
    with mock_aws():
        c = clients_for(REGION)
        mine, other, untagged = _plant_three(c)
        found = audit(c, "s1")
        assert sorted(r.kind for r in found) == EXPECTED_KINDS
        assert all(r.tags["stack"] == "s1" for r in found)
        # The tagging API misses EKS, EIPs and launch templates; direct listings find them.
        by_kind = {r.kind: r for r in found}
        assert "tagging-api" not in by_kind["eks:cluster"].found_by
        assert by_kind["eks:nodegroup"].parent == mine["eks"]
        assert by_kind["ec2:elastic-ip"].found_by == {"ec2"}
        assert {"efs", "tagging-api"} <= by_kind["elasticfilesystem:file-system"].found_by

        listed = runner.invoke(aws_app, ["audit", "s1", "--region", REGION])
        assert listed.exit_code == 1
        assert "19 resource(s) tagged stack=s1" in listed.output and mine["volume"] in \
            listed.output and other["volume"] not in listed.output

        refused = runner.invoke(aws_app, ["audit", "s1", "--region", REGION, "--delete"],
                                input="n\n")
        assert refused.exit_code == 1 and "nothing deleted" in refused.output
        assert all(still_there(c, mine).values())

        done = runner.invoke(aws_app, ["audit", "s1", "--region", REGION, "--delete",
                                       "--yes", "--poll-s", "0"])
        assert done.exit_code == 0, done.output
        assert "19 handled, 0 failed, 0 left" in done.output
        assert not any(still_there(c, mine).values())
        assert all(still_there(c, other).values()) and all(still_there(c, untagged).values())
        assert len(audit(c, "s2")) == 19
        clean = runner.invoke(aws_app, ["audit", "s1", "--region", REGION])
        assert clean.exit_code == 0 and "nothing tagged stack=s1 left" in clean.output


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reports.aws_cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.usefixtures("moto_server")
def test_through_aws_endpoint_url_against_a_moto_server():
    c = clients_for(REGION)
    assert c("ec2").meta.endpoint_url == os.environ["AWS_ENDPOINT_URL"]  # 127.0.0.1:<free>
    mine, other, untagged = _plant_three(c)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    listed = _cli("audit", "s1", "--region", REGION, env=env)
    assert listed.returncode == 1, listed.stderr
    for key in ("instance", "volume", "eni", "efs", "clb", "eks"):
        assert mine[key] in listed.stdout and other[key] not in listed.stdout
    assert "19 resource(s) tagged stack=s1" in listed.stdout

    deleted = _cli("audit", "s1", "--region", REGION, "--delete", "--yes", "--poll-s", "0",
                   env=env)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert not any(still_there(c, mine).values())
    assert all(still_there(c, other).values()) and all(still_there(c, untagged).values())
    assert _cli("audit", "s1", "--region", REGION, env=env).returncode == 0
    assert _cli("audit", "s2", "--region", REGION, env=env).returncode == 1


@pytest.mark.usefixtures("aws_env")
def test_failures_are_reported_and_untagged_input_is_never_deleted():
    ec2 = boto3.client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    stub.add_client_error("delete_volume", "InvalidVolume.NotFound", "gone already",
                          expected_params={"VolumeId": "vol-1"})
    stub.add_client_error("delete_vpc", "DependencyViolation", "has dependencies",
                          expected_params={"VpcId": "vpc-1"})
    ours = {"stack": "s1"}
    resources = [Resource("ec2:vpc", "vpc-1", ours), Resource("ec2:volume", "vol-1", ours),
                 Resource("ec2:volume", "vol-theirs", {"stack": "s2"}),
                 Resource("ec2:volume", "vol-untagged", {}),
                 Resource("sns", "arn:aws:sns:us-east-1:123456789012:alerts", ours)]
    assert [r.id for r in deletion_plan(resources, "s1")][:2] == ["vol-1", "vpc-1"]
    with stub:
        outcomes = delete_resources(lambda service: ec2, resources, "s1", poll_s=0)
        stub.assert_no_pending_responses()
    got = {o.resource.id: (o.status, o.detail) for o in outcomes}
    assert set(got) == {"vol-1", "vpc-1", "arn:aws:sns:us-east-1:123456789012:alerts"}
    assert got["vol-1"] == ("gone", "")
    assert got["vpc-1"][0] == "failed" and "DependencyViolation" in got["vpc-1"][1]
    assert got["arn:aws:sns:us-east-1:123456789012:alerts"] == (
        "failed", "no automatic deletion for sns: delete it by hand (console or CLI)")


@pytest.mark.parametrize("arn,kind,rid,parent", [
    ("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/k8s-web/50dc6c495c0c9188",
     "elasticloadbalancing:loadbalancer",
     "arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/k8s-web/50dc6c495c0c9188", ""),
    ("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/a1b2c3", "elb:loadbalancer",
     "a1b2c3", ""),
    ("arn:aws:eks:us-east-1:1:nodegroup/base-a100/p4d/8ec9e4a2-aa", "eks:nodegroup", "p4d",
     "base-a100"),
    ("arn:aws:ec2:us-east-1:1:elastic-ip/eipalloc-0a1b", "ec2:elastic-ip", "eipalloc-0a1b", ""),
    ("arn:aws:elasticfilesystem:us-east-1:1:access-point/fsap-0a1b",
     "elasticfilesystem:access-point", "fsap-0a1b", ""),
    ("arn:aws:logs:us-east-1:1:log-group:/aws/eks/base-a100/cluster", "logs:log-group",
     "arn:aws:logs:us-east-1:1:log-group:/aws/eks/base-a100/cluster", ""),
])
def test_tagging_api_arns_map_to_listing_kinds(arn, kind, rid, parent):
    r = resource_from_arn(arn, {"stack": "s1"})
    assert (r.kind, r.id, r.parent) == (kind, rid, parent)


@pytest.mark.usefixtures("aws_env")
def test_cli_reports_what_it_could_not_delete_and_exits_non_zero():
    with mock_aws():
        c = clients_for(REGION)
        topic = c("sns").create_topic(Name="alerts", Tags=_tags("s3"))["TopicArn"]
        vol = c("ec2").create_volume(AvailabilityZone=f"{REGION}a", Size=1, TagSpecifications=[
            {"ResourceType": "volume", "Tags": _tags("s3")}])["VolumeId"]
        res = CliRunner().invoke(aws_app, ["audit", "s3", "--region", REGION, "--delete",
                                           "--yes", "--poll-s", "0"])
        out = " ".join(res.output.split())
        assert res.exit_code == 1
        assert f"deleted ec2:volume {vol}" in out
        assert f"failed sns {topic} no automatic deletion for sns" in out
        assert "1 handled, 1 failed, 1 left" in out and "run the audit again" in out
        assert [r.id for r in audit(c, "s3")] == [topic]
