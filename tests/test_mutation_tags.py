"""Cost tags and the AWS rules pre-flight applies before anything is created
(components.tags, stacks.preflight.aws_checks), called directly and pinned to the exact problem a
user reads: which field, what is wrong, the fix. The reserved prefixes are every one of them, on
keys only; the limits are checked at and one past the bound. (`make mutate`: group `tags`.)"""

from __future__ import annotations

import json

import botocore
import pulumi_aws
import pulumi_eks
import pytest
from stack_variants import F, edit, variant_config

from components.tags import (
    ebs_csi_addon_configuration,
    is_taggable,
    launch_template_tag_specifications,
    stack_tags,
)
from stacks.catalog.eks_versions import CATALOGUE_DATE
from stacks.config.errors import Problem
from stacks.config.loader import parse_config
from stacks.preflight.aws_checks import (
    EFA_PLUGIN_IMAGE,
    RESERVED_TAG_PREFIXES,
    check_aws,
    ebs_tag_problem,
    eks_cluster_name,
    eks_regions,
)

RULES = "change it to fit AWS's tag rules"
CHARS = "letters, digits, spaces and _ . : / = + - @"
EBS = ("EBS CSI tag parameters split on the first '=' of 'key=value' and expand '{{': the EBS "
       "volumes would get another tag")


def _stack(source: str = "agg-a100-standalone", name: str = "t", **changes):
    config = variant_config(source, lambda c: None)
    for dotted, value in changes.items():
        edit(dotted.replace("__", "."), value)(config)
    return parse_config(name, config)


def _aws(stack, region: str = "us-east-1", owns: bool = True,
         provider: dict | None = None) -> list[Problem]:
    return check_aws(stack, region, on=CATALOGUE_DATE, owns_cluster=owns,
                     provider_config=provider)


def _extra(**extra) -> list[Problem]:
    return _aws(_stack(tags={"experiment": "e", "extra": extra}))


# --- tag rules ---------------------------------------------------------------------------------

def test_every_reserved_prefix_is_refused_on_a_key():
    assert RESERVED_TAG_PREFIXES == ("aws:", "kubernetes.io/cluster/", "karpenter.sh/",
                                     "eks.amazonaws.com/")
    for prefix in RESERVED_TAG_PREFIXES[1:]:
        key = prefix + "x"
        assert _extra(**{key: "v"}) == [Problem(
            F + f"tags.extra.{key}", f"the key starts with '{prefix}', a prefix Kubernetes / "
            "EKS Auto Mode reserve", RULES)]
        # a value may carry it: only keys are reserved
        assert _extra(team=key) == []


@pytest.mark.parametrize("key, value, why", [
    ("AWS:team", "v", "the key starts with 'AWS:', a prefix AWS reserves in any letter case"),
    ("team", "Aws:x", "the value starts with 'Aws:', a prefix AWS reserves in any letter case"),
    ("", "v", "the key is empty"),
    ("k" * 129, "v", "the key is 129 characters; AWS allows at most 128"),
    ("team", "v" * 257, "the value is 257 characters; AWS allows at most 256"),
    ("a#b!#", "v", f"the key contains '!' '#'; AWS allows {CHARS}"),
    ("team", "a*b", f"the value contains '*'; AWS allows {CHARS}"),
    ("cost=center", "ml", EBS),
])
def test_a_tag_aws_or_the_ebs_driver_refuses(key, value, why):
    assert _extra(**{key: value}) == [Problem(F + f"tags.extra.{key}", why, RULES)]


def test_tags_at_the_limits_pass():
    assert _extra(**{"k" * 128: "v" * 256, "a_b .:/+-@9": "x=y"}) == []
    # 47 extras + project, stack, experiment = 50 tags per resource: allowed; 51 are not
    assert _extra(**{f"k{i}": "v" for i in range(47)}) == []
    assert _extra(**{f"k{i}": "v" for i in range(48)}) == [
        Problem(F + "tags.extra", "51 tags per resource; AWS allows 50", "drop some extra tags")]


def test_reserved_keys_and_the_fixed_tags():
    assert _extra(project="x") == [Problem(F + "tags.extra.project", "tag 'project' is "
                                           "reserved (dynamo-bench sets it)", "use another key")]
    assert _aws(_stack(tags={"experiment": "a*b"})) == [Problem(
        F + "tags.experiment", f"the value of tag 'experiment' contains '*'; AWS allows {CHARS}",
        RULES)]
    long_name = _aws(_stack(name="x" * 257, tags={"experiment": "e"}))
    assert long_name[0] == Problem("stack (the stack name)", "the value of tag 'stack' is 257 "
                                   "characters; AWS allows at most 256", RULES)


def test_ebs_tag_problem_on_its_own():
    assert ebs_tag_problem("a=b", "v") == EBS
    assert ebs_tag_problem("a{{b", "v") == EBS
    assert ebs_tag_problem("a", "{{ .PVName }}") == EBS
    assert ebs_tag_problem("a{b", "v}") is None


# --- region, zones, VPC, cluster name, EKS version, provider config ------------------------

def test_an_unknown_region_gets_the_nearest_ones():
    regions = eks_regions()
    assert "us-east-1" in regions and regions == tuple(sorted(regions))
    assert _aws(_stack(), region="us-east-7") == [Problem(
        F + "cluster.region", f"'us-east-7' is not an AWS region where EKS and EFS are offered "
        f"(botocore {botocore.__version__} endpoint data, {len(regions)} regions)",
        "use one such as us-east-2, us-east-1, us-west-2")]
    far = _aws(_stack(), region="mars-1")
    assert [(p.field, p.fix) for p in far] == [(F + "cluster.region",
                                                "use one such as us-east-1")]


def test_zones_must_be_of_the_stacks_region():
    bad = _stack(cluster__nodeGroups__0__availabilityZone="us-west-2a")
    expected = Problem(F + "cluster.nodeGroups[0].availabilityZone", "'us-west-2a' is not a zone "
                       "of region us-east-1 (its zones are us-east-1a, us-east-1b, ...)",
                       "use a zone of us-east-1, such as us-east-1a")
    assert _aws(bad) == [expected]
    assert _aws(bad, owns=False) == [expected]        # a variant's extra groups too
    for zone in ("us-east-1", "us-east-1ab", "xus-east-1a"):
        assert len(_aws(_stack(cluster__nodeGroups__0__availabilityZone=zone))) == 1
    assert _aws(_stack(cluster__nodeGroups__0__availabilityZone="us-east-1f")) == []
    # in an unknown region no zone is judged (the region problem says it all)
    assert len(_aws(bad, region="us-east-7")) == 1



def test_efa_groups_outside_the_aws_partition_are_refused_naming_each_group():
    """The EFA device plugin's image is in the aws partition's ECR (aws.md M4): in aws-us-gov a
    node-group base's EFA groups (a base gives every EFA-capable GPU group EFA) are refused one
    by one, its CPU group is not; in the aws partition, and with Auto Mode (AWS's own plugin),
    nothing is. (tests/test_infra_aws_iam_network.py runs the same through the program.)"""
    gov = "us-gov-west-1"
    in_gov = {f"cluster__nodeGroups__{i}__availabilityZone": f"{gov}a" for i in (0, 1)}
    fix = "use a region of the aws partition, or a group without EFA (no NIXL over LIBFABRIC)"

    def refused(i: int, name: str) -> Problem:
        return Problem(F + f"cluster.nodeGroups[{i}]", f"{name} gets EFA, whose device plugin "
                       f"image {EFA_PLUGIN_IMAGE} is in the aws partition's ECR: {gov} is in "
                       "aws-us-gov, whose nodes cannot pull it", fix)

    assert _aws(_stack("base-a100", **in_gov), region=gov) == [refused(0, "p4d"),
                                                                refused(1, "g6e")]
    assert _aws(_stack("base-a100")) == []
    assert _aws(_stack("base-a100-auto", **in_gov), region=gov) == []
    # only the stack's own cluster is judged: a variant's extra groups join a running one
    assert _aws(_stack("base-a100", **in_gov), region=gov, owns=False) == []

@pytest.mark.parametrize("vpc, problems", [
    ({"cidr": "10.42.0.0/16"}, []),
    ({"cidr": "10.42.0.0/22"}, []),
    ({"cidr": "10.42.0.0/15"}, [("/15 is outside /16../22: AWS allows a VPC of /16 to /28, and "
                                 "the subnet plan needs 8 private eighths plus public subnets of "
                                 "1/64 (at least /28 each)",
                                 "use a prefix from /16 to /22, e.g. 10.42.0.0/16")]),
    ({"cidr": "10.42.0.0/23"}, [("/23 is outside /16../22: AWS allows a VPC of /16 to /28, and "
                                 "the subnet plan needs 8 private eighths plus public subnets of "
                                 "1/64 (at least /28 each)",
                                 "use a prefix from /16 to /22, e.g. 10.42.0.0/16")]),
    ({"cidr": "8.8.0.0/16"}, [("8.8.0.0/16 is a public (internet-routable) range: pods and "
                               "nodes would shadow real addresses on the internet",
                               "use a private range (10.0.0.0/8, 172.16.0.0/12, "
                               "192.168.0.0/16)")]),
    ({"cidr": "10.42.0.1/16"}, [("'10.42.0.1/16' is not an IPv4 network: 10.42.0.1/16 has "
                                 "host bits set", "write an IPv4 network with no host bits set, "
                                 "e.g. 10.42.0.0/16")]),
    ({"id": "vpc-0123456789abcdef0", "cidr": "10.9.0.0/16",
      "privateSubnetIds": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]},
     [("is ignored with vpc.id vpc-0123456789abcdef0: the existing VPC's own CIDR is used",
       "remove cidr, or drop vpc.id")]),
    ({"id": "vpc-0123456789abcdef0", "privateSubnetIds": ["subnet-0123456789abcdef0",
                                                          "subnet-0123456789abcdef1"]}, []),
])
def test_vpc_cidr_rules(vpc, problems):
    assert _aws(_stack(cluster__vpc=vpc)) == [Problem(F + "cluster.vpc.cidr", why, fix)
                                              for why, fix in problems]


def test_cluster_name_version_and_provider_region():
    assert eks_cluster_name(_stack(name="agg")) == "dynamo-bench-agg"
    assert _aws(_stack(name="agg.a100")) == [Problem(
        "stack (the stack name)", "the EKS cluster name 'dynamo-bench-agg.a100' breaks EKS's "
        "rule: up to 100 letters, digits, '-' and '_', starting with a letter or digit",
        "rename the stack file (letters, digits, '-')")]
    assert _aws(_stack(name="a" * 87)) == []                 # 13 + 87 = 100 characters
    assert len(_aws(_stack(name="a" * 88))) == 1
    assert _aws(_stack(cluster__eksVersion="1.29")) == [Problem(
        F + "cluster.eksVersion", "EKS no longer offers 1.29: its extended support ended "
        "2026-03-23; on 2026-12-01 EKS offers 1.32, 1.33, 1.34, 1.35",
        "use a version EKS offers")]
    assert _aws(_stack(), provider={"aws:region": "us-west-2"}) == [Problem(
        "aws:region", "says us-west-2, but the stack builds in us-east-1 (cluster.region): one "
        "file, two regions", "remove aws:region or set it to us-east-1")]
    assert _aws(_stack(), provider={"aws:region": "us-east-1"}) == []
    # a variant (no cluster of its own): no region, VPC, name or version checks
    variant = _stack(name="agg.a100", cluster__eksVersion="1.29",
                     cluster__vpc={"cidr": "8.8.0.0/16"},
                     cluster__nodeGroups__0__availabilityZone=None)
    assert _aws(variant, region="us-east-7", owns=False) == []


# --- components.tags -------------------------------------------------------------------------

def test_stack_tags_and_the_reserved_prefix_guard():
    stack = _stack(name="agg", tags={"experiment": "e", "extra": {"team": "ml"}})
    assert stack_tags(stack) == {"project": "dynamo-bench", "stack": "agg", "experiment": "e",
                                 "team": "ml"}
    for prefix in RESERVED_TAG_PREFIXES:
        bad = _stack(tags={"experiment": "e", "extra": {prefix + "x": "v", "ok": "v"}})
        with pytest.raises(ValueError) as err:
            stack_tags(bad)
        assert str(err.value) == (f"tags ['{prefix}x'] use a reserved prefix: rename them in "
                                  "tags.extra")


def test_tags_reach_what_controllers_create():
    tags = {"stack": "s", "project": "p"}
    specs = launch_template_tag_specifications(tags)
    assert specs == [{"resource_type": kind, "tags": tags}
                     for kind in ("instance", "volume", "network-interface")]
    specs[0]["tags"]["x"] = "y"
    assert tags == {"stack": "s", "project": "p"}         # each spec has its own copy
    assert json.loads(ebs_csi_addon_configuration(tags)) == {"controller": {
        "extraVolumeTags": tags}}
    assert ebs_csi_addon_configuration(tags) == \
        '{"controller": {"extraVolumeTags": {"project": "p", "stack": "s"}}}'


@pytest.mark.parametrize("token, taggable", [
    ("aws:ec2/vpc:Vpc", True), ("aws:efs/fileSystem:FileSystem", True),
    ("aws:ec2/routeTableAssociation:RouteTableAssociation", False),
    ("eks:index:Cluster", True),
    ("kubernetes:core/v1:Pod", False), ("aws:ec2:Vpc:extra", False), ("nonsense", False),
    ("aws:nosuchmodule/x:Thing", False), ("aws:ec2/vpc:NoSuchClass", False),
    ("aws:ec2/vpc:get_vpc", False),
])
def test_which_resource_types_take_tags(token, taggable):
    assert is_taggable(token) is taggable


def test_resource_classes_come_from_the_pulumi_sdks():
    from components.tags import _resource_class
    assert _resource_class("aws:ec2/vpc:Vpc") is pulumi_aws.ec2.Vpc
    assert _resource_class("eks:index:Cluster") is pulumi_eks.Cluster
    # uncached (is_taggable caches): every way a token names no SDK class
    for token in ("aws:ec2/vpc:get_vpc", "aws:ec2/vpc:NoSuchClass", "aws:nosuchmodule/x:Thing",
                  "kubernetes:core/v1:Pod", "nonsense", "aws:ec2:Vpc:extra"):
        assert _resource_class(token) is None, token


def test_a_reserved_key_does_not_hide_the_next_keys_problem():
    assert _extra(project="x", **{"bad#": "v"}) == [
        Problem(F + "tags.extra.project", "tag 'project' is reserved (dynamo-bench sets it)",
                "use another key"),
        Problem(F + "tags.extra.bad#", f"the key contains '#'; AWS allows {CHARS}", RULES)]
