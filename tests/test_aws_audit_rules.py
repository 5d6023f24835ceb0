"""Teardown audit: the attribution rules, --all-regions, what --delete refuses or cannot do, and
an incomplete listing, against a moto server on 127.0.0.1 (CLI in-process) or botocore
Stubbers."""

from __future__ import annotations

import boto3
import pytest
from aws_moto import aws_env, moto_server, placement_groups, three_regions  # noqa: F401
from aws_plant import REGION, exists, plant_iam, stack_tags
from botocore.stub import Stubber
from typer.testing import CliRunner

from components.cluster import cluster_name
from reports.accounting.audit import (
    VIA_STACK_TAG_ONLY,
    Resource,
    attribute,
    cluster_owner,
    deletion_plan,
    merge,
    resource_from_arn,
)
from reports.accounting.audit_cli import EXIT_INCOMPLETE, EXIT_LEFT, EXIT_ORPHANS
from reports.accounting.audit_delete import delete_resources
from reports.accounting.aws_cli import aws_app
from reports.accounting.aws_session import clients_for
from stacks.config.loader import load_stack


def _tags(**kw: str) -> list[dict[str, str]]:
    return [{"Key": k.replace("_", "-"), "Value": v} for k, v in kw.items()]


def _audit(stacks_dir, *args: str, input: str | None = None):
    res = CliRunner().invoke(aws_app, ["audit", *args, "--stacks-dir", str(stacks_dir)],
                             input=input)
    return res, " ".join(res.output.split())


@pytest.fixture
def stacks_dir(tmp_path):
    d = tmp_path / "stacks"
    d.mkdir()
    (d / "Pulumi.s1.yaml").write_text("config: {}\n")
    return d


def test_cluster_name_prefix_is_the_one_components_use():
    # the audit attributes controller-made resources by this name: it must be the real one
    assert cluster_name(load_stack("base-a100")) == "dynamo-bench-base-a100"


@pytest.mark.parametrize("tags,name,owner", [
    ({"eks:cluster-name": "dynamo-bench-s1"}, "", "s1"),
    ({"eks:eks-cluster-name": "dynamo-bench-s1"}, "", "s1"),
    ({"aws:eks:cluster-name": "dynamo-bench-s1"}, "", "s1"),
    ({"cluster.k8s.amazonaws.com/name": "dynamo-bench-s1"}, "", "s1"),
    ({"KubernetesCluster": "dynamo-bench-s1"}, "", "s1"),
    ({"elbv2.k8s.aws/cluster": "dynamo-bench-s1"}, "", "s1"),
    ({"kubernetes.io/cluster/dynamo-bench-s1": "owned"}, "", "s1"),
    # "shared": the cluster only uses it (a subnet): not the cluster's to delete
    ({"kubernetes.io/cluster/dynamo-bench-s1": "shared"}, "", None),
    ({"eks:cluster-name": "someone-elses"}, "", None),
    ({}, "/aws/eks/dynamo-bench-s1/cluster", "s1"),
    ({}, "/aws/containerinsights/dynamo-bench-s1/performance", "s1"),
    ({}, "/aws/eks/other/cluster", None),
])
def test_controller_made_resources_belong_to_the_stack_of_their_cluster(tags, name, owner):
    assert cluster_owner(tags, name)[0] == owner


def test_a_bare_stack_tag_is_listed_but_never_deleted_and_children_inherit_owners():
    bare = attribute(Resource("ec2:volume", "vol-1", {"stack": "s1"}))
    assert (bare.owner, bare.via, bare.project) == ("s1", VIA_STACK_TAG_ONLY, False)
    assert deletion_plan([bare], "s1") == []
    fs = Resource("elasticfilesystem:file-system", "fs-1", {"project": "dynamo-bench",
                                                            "stack": "s1"})
    ap = Resource("elasticfilesystem:access-point", "fsap-1",
                  {"efs.csi.aws.com/cluster": "true"}, parent="fs-1")
    theirs = Resource("elasticfilesystem:access-point", "fsap-2",
                      {"project": "dynamo-bench", "stack": "s2"}, parent="fs-1")
    merged = {r.id: r for r in merge([ap, fs, theirs])}
    assert (merged["fsap-1"].owner, merged["fsap-1"].via) == ("s1", "parent fs-1")
    assert merged["fsap-2"].owner == "s2"   # its own tag wins over its parent's


@pytest.mark.parametrize("arn,kind,rid,parent", [
    ("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/k8s-web/50dc6c495c0c9188",
     "elasticloadbalancing:loadbalancer",
     "arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/app/k8s-web/50dc6c495c0c9188", ""),
    ("arn:aws:elasticloadbalancing:us-east-1:1:loadbalancer/a1b2c3", "elb:loadbalancer",
     "a1b2c3", ""),
    ("arn:aws:eks:us-east-1:1:nodegroup/base-a100/p4d/8ec9e4a2-aa", "eks:nodegroup", "p4d",
     "base-a100"),
    ("arn:aws:eks:us-east-1:1:addon/dynamo-bench-s1/aws-efs-csi-driver/8ec9", "eks:addon",
     "arn:aws:eks:us-east-1:1:addon/dynamo-bench-s1/aws-efs-csi-driver/8ec9",
     "dynamo-bench-s1"),
    ("arn:aws:ec2:us-east-1:1:elastic-ip/eipalloc-0a1b", "ec2:elastic-ip", "eipalloc-0a1b", ""),
    ("arn:aws:ec2:us-east-1:1:placement-group/s1-efa", "ec2:placement-group", "s1-efa", ""),
    ("arn:aws:elasticfilesystem:us-east-1:1:access-point/fsap-0a1b",
     "elasticfilesystem:access-point", "fsap-0a1b", ""),
    ("arn:aws:logs:us-east-1:1:log-group:/aws/eks/base-a100/cluster", "logs:log-group",
     "arn:aws:logs:us-east-1:1:log-group:/aws/eks/base-a100/cluster", ""),
    ("arn:aws:autoscaling:us-east-1:1:autoScalingGroup:9c6b-11:autoScalingGroupName/eks-gpu-1",
     "autoscaling:autoScalingGroup", "eks-gpu-1", ""),
    ("arn:aws:iam::1:role/s1-node-role", "iam:role", "arn:aws:iam::1:role/s1-node-role", ""),
])
def test_tagging_api_arns_map_to_listing_kinds(arn, kind, rid, parent):
    r = resource_from_arn(arn, {"stack": "s1"})
    assert (r.kind, r.id, r.parent) == (kind, rid, parent)


@pytest.mark.usefixtures("aws_env")
def test_failures_are_reported_and_other_stacks_input_is_never_deleted():
    ec2 = boto3.client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    stub.add_client_error("delete_volume", "InvalidVolume.NotFound", "gone already",
                          expected_params={"VolumeId": "vol-1"})
    stub.add_client_error("delete_vpc", "DependencyViolation", "has dependencies",
                          expected_params={"VpcId": "vpc-1"})
    ours = {"stack": "s1", "project": "dynamo-bench"}
    topic = "arn:aws:sns:us-east-1:123456789012:alerts"
    resources = [Resource("ec2:vpc", "vpc-1", ours), Resource("ec2:volume", "vol-1", ours),
                 Resource("ec2:volume", "vol-theirs", {**ours, "stack": "s2"}),
                 Resource("ec2:volume", "vol-project-only", {"project": "dynamo-bench"}),
                 Resource("ec2:volume", "vol-untagged", {}),
                 Resource("ec2:volume", "vol-bare", {"stack": "s1"}),
                 Resource("sns", topic, ours)]
    assert [r.id for r in deletion_plan(resources, "s1")][:2] == ["vol-1", "vpc-1"]
    with stub:
        outcomes = delete_resources(lambda service: ec2, resources, "s1", poll_s=0)
        stub.assert_no_pending_responses()
    got = {o.resource.id: (o.status, o.detail) for o in outcomes}
    assert set(got) == {"vol-1", "vpc-1", topic, "vol-bare"}
    assert got["vol-1"] == ("gone", "")
    assert got["vpc-1"][0] == "failed" and "DependencyViolation" in got["vpc-1"][1]
    assert got[topic] == ("failed", "no automatic deletion for sns: delete it by hand "
                                    "(console or CLI)")
    assert got["vol-bare"][0] == "failed" and "not project=dynamo-bench" in got["vol-bare"][1]


@pytest.mark.usefixtures("moto_server", "placement_groups")
def test_delete_reports_each_resource_it_could_not_delete_whole(stacks_dir):
    c = clients_for(REGION)
    topic = c("sns").create_topic(Name="alerts", Tags=_tags(project="dynamo-bench",
                                                            stack="s1"))["TopicArn"]
    bare = c("ec2").create_volume(AvailabilityZone=f"{REGION}a", Size=1, TagSpecifications=[
        {"ResourceType": "volume", "Tags": _tags(stack="s1")}])["VolumeId"]
    vol = c("ec2").create_volume(AvailabilityZone=f"{REGION}a", Size=1, TagSpecifications=[
        {"ResourceType": "volume", "Tags": _tags(project="dynamo-bench", stack="s1")}])[
        "VolumeId"]
    iam = plant_iam(c("iam"), "s1", _tags(project="dynamo-bench", stack="s1"))
    refused, out = _audit(stacks_dir, "s1", "--region", REGION, "--delete", input="n\n")
    assert refused.exit_code == EXIT_LEFT and "nothing deleted" in out
    assert exists(c, "role", iam["role"])
    res, out = _audit(stacks_dir, "s1", "--region", REGION, "--delete", "--yes",
                      "--poll-s", "0")
    assert res.exit_code == EXIT_LEFT
    assert f"deleted ec2:volume {vol}" in out and not exists(c, "volume", vol)
    iam_kinds = {"role": "role", "policy": "policy", "profile": "instance-profile",
                 "oidc": "oidc-provider"}
    for key, arn in iam.items():   # IAM deleted too (role with policies and profile)
        assert f"deleted iam:{iam_kinds[key]} {arn}" in out and not exists(c, key, arn)
    could_not = res.output.split("could not delete (2):")[1]
    assert f" {topic}  " in could_not and "no automatic deletion for sns" in could_not
    assert f" {bare}  " in could_not and "not project=dynamo-bench" in could_not
    assert "5 handled, 2 failed, 2 left" in out and "run the audit again" in out
    assert exists(c, "volume", bare)


@pytest.mark.usefixtures("moto_server", "placement_groups", "three_regions")
def test_all_regions_finds_what_one_region_misses(stacks_dir):
    east, west = clients_for("us-east-1"), clients_for("eu-west-1")
    mine = {region: c("ec2").create_volume(
        AvailabilityZone=f"{region}a", Size=1, TagSpecifications=[
            {"ResourceType": "volume", "Tags": _tags(**stack_tags("s1"))}])["VolumeId"]
        for region, c in (("us-east-1", east), ("eu-west-1", west))}
    orphan = clients_for("us-west-2")("ec2").create_volume(
        AvailabilityZone="us-west-2a", Size=1, TagSpecifications=[
            {"ResourceType": "volume", "Tags": _tags(**stack_tags("old"))}])["VolumeId"]
    one, out = _audit(stacks_dir, "s1", "--region", "us-east-1")
    assert one.exit_code == EXIT_LEFT and mine["eu-west-1"] not in out
    every, out = _audit(stacks_dir, "s1", "--all-regions")
    assert every.exit_code == EXIT_LEFT and "in 3 regions" in out
    assert f"eu-west-1 ec2:volume {mine['eu-west-1']}" in out
    assert f"us-east-1 ec2:volume {mine['us-east-1']}" in out
    assert f"us-west-2 ec2:volume {orphan}" in out.split("orphan(s)")[1]
    inventory, out = _audit(stacks_dir, "--all-regions")
    assert inventory.exit_code == EXIT_LEFT
    assert "old 1 resource(s) stack file: no us-west-2" in out
    assert "s1 2 resource(s) stack file: yes eu-west-1, us-east-1" in out
    done, out = _audit(stacks_dir, "s1", "--all-regions", "--delete", "--yes", "--poll-s", "0")
    assert done.exit_code == EXIT_ORPHANS and "2 handled, 0 failed, 0 left" in out
    assert not exists(east, "volume", mine["us-east-1"])
    assert not exists(west, "volume", mine["eu-west-1"])


@pytest.mark.usefixtures("moto_server")
def test_a_kind_that_cannot_be_listed_makes_the_audit_incomplete_never_clean(stacks_dir):
    # moto has no placement-group API (no shim here): that listing fails
    res, out = _audit(stacks_dir, "s1", "--region", REGION)
    assert res.exit_code == EXIT_INCOMPLETE, out
    assert "could not list ec2:placement-group in us-east-1" in out
    assert "the audit is incomplete" in out
