"""Zones by ID (aws.md R2): EKS refuses cluster subnets in use1-az3, usw1-az2 and cac1-az3
(awsdocs/amazon-eks-user-guide latest/ug/networking/network-reqs.adoc), and zone names map to
IDs per account. The offline mocks answer getAvailabilityZones with us-east-1a..f as
use1-az1..6, so us-east-1c is the refused use1-az3 there."""

from __future__ import annotations

import pytest
from pulumi_harness import raw_config, run, run_config

from components.node_specs import eks_usable_zones
from stacks.catalog.eks_zones import refused_zone_ids

NAMES = [f"us-east-1{c}" for c in "abcdef"]
IDS = ["use1-az1", "use1-az2", "use1-az3", "use1-az4", "use1-az5", "use1-az6"]


def test_the_refused_zone_ids_are_the_documented_three() -> None:
    assert refused_zone_ids("us-east-1") == ("use1-az3",)
    assert refused_zone_ids("us-west-1") == ("usw1-az2",)
    assert refused_zone_ids("ca-central-1") == ("cac1-az3",)
    assert refused_zone_ids("eu-west-1") == ()


def test_a_zone_name_is_judged_by_its_id_in_this_account() -> None:
    assert eks_usable_zones(NAMES, IDS, "us-east-1") == [
        "us-east-1a", "us-east-1b", "us-east-1d", "us-east-1e", "us-east-1f"]
    # another account: us-east-1a is use1-az3
    other = ["use1-az3", *IDS[:2], *IDS[3:]]
    assert "us-east-1a" not in eks_usable_zones(NAMES, other, "us-east-1")
    with pytest.raises(ValueError, match=r"us-east-1a.*use1-az3.*availabilityZone"):
        eks_usable_zones(NAMES, other, "us-east-1", pinned=["us-east-1a"])
    assert eks_usable_zones(NAMES, IDS, "eu-west-1") == NAMES


def test_no_subnet_of_a_shipped_stack_lands_in_a_refused_zone() -> None:
    for stack in ("base-a100", "base-b200", "agg-a100-standalone"):
        zones = {r.inputs["availabilityZone"] for r in run(stack).of_type("aws:ec2/subnet:Subnet")}
        assert zones and "us-east-1c" not in zones, (stack, zones)


def test_a_group_pinned_to_a_refused_zone_is_refused_before_any_subnet() -> None:
    raw = raw_config("base-a100")
    for group in raw["cluster"]["nodeGroups"]:
        if "availabilityZone" in group:
            group["availabilityZone"] = "us-east-1c"
    result = run_config("base-a100-az3", raw)
    assert result.error is not None and "use1-az3" in str(result.error)
    assert not result.of_type("aws:ec2/subnet:Subnet")


# --- the frontend and the load generator share the workers' zone (aws.md S1, runner.md R5) ---

def _frontend_zone_terms(stack: str) -> list:
    from test_infra_graph import dgd_of

    front = next(c for c in dgd_of(stack)["spec"]["components"] if c["type"] == "frontend")
    affinity = front["podTemplate"]["spec"].get("affinity") or {}
    return (affinity.get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuring"
                                                 "Execution", {}).get("nodeSelectorTerms", []))


@pytest.mark.parametrize("stack", ["agg-a100", "disagg-a100", "agg-l40s-fp8", "agg-b200-axk2",
                                   "agg-a100-standalone"])
def test_the_frontend_requires_the_zone_its_workers_are_pinned_to(stack: str) -> None:
    from k8s_validation import validate_dgd, validate_pod_templates
    from test_infra_graph import dgd_of

    assert _frontend_zone_terms(stack) == [{"matchExpressions": [{
        "key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]}]
    validate_dgd(dgd_of(stack))
    validate_pod_templates(dgd_of(stack))


@pytest.mark.parametrize("base", ["base-a100", "base-b200", "agg-a100-standalone"])
def test_the_cpu_group_joins_the_gpu_groups_zone(base: str) -> None:
    groups = {g.inputs["nodeGroupName"]: g.inputs["subnetIds"]
              for g in run(base).of_type("eks:index:ManagedNodeGroup")}
    gpu = {tuple(s) for name, s in groups.items() if name != "cpu"}
    assert len(gpu) == 1 and tuple(groups["cpu"]) in gpu, groups


def test_the_auto_mode_cpu_pool_joins_the_gpu_pools_zone() -> None:
    from pulumi_harness import k8s_objects

    pools = {o["metadata"]["name"]: o for _, o in k8s_objects(run("base-a100-auto"))
             if o["kind"] == "NodePool"}
    reqs = {r["key"]: r.get("values") for r in
            pools["dynamo-bench-cpu"]["spec"]["template"]["spec"]["requirements"]}
    assert reqs["topology.kubernetes.io/zone"] == ["us-east-1a"]
