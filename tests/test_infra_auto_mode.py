"""EKS Auto Mode under Pulumi mocks: base-a100-auto and the A100 variants derived onto it.

What is pinned here comes from AWS's and Karpenter's own definitions
(stacks/preflight/auto_mode.py): NodePools valid against Karpenter's published CRD and NodeClasses
against the EKS user guide's specification, dynamic GPU pools (EFA) and a static CPU pool, the GPU
taint and our group label, no device plugin or driver of ours on an Auto Mode cluster (Auto Mode
ships NVIDIA and EFA), capacity reservations through the NodeClass, variants that own only their
graph, and the pool fields a campaign scheduler patches to park a group and bring it back.
"""

from __future__ import annotations

import pytest
from pulumi_harness import k8s_objects, raw_config, run, run_config
from test_infra_k8s_objects import validate_object

from components.auto_mode_specs import pool_capacity
from stacks.config.loader import derived_stack_names, load_stack
from stacks.config.schema import Provisioning

BASE = "base-a100-auto"
# Charts that would put a second device plugin or driver beside Auto Mode's own.
DEVICE_PLUGIN_CHARTS = {"nvidia-device-plugin", "aws-efa-k8s-device-plugin", "gpu-operator",
                        "k8s-rdma-shared-dev-plugin"}


def _by_kind(result, kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for _, o in k8s_objects(result) if o["kind"] == kind}


def test_the_auto_mode_base_has_the_node_group_bases_gpus() -> None:
    auto, groups = load_stack(BASE), load_stack("base-a100").cluster.node_groups
    assert auto.cluster.compute_mode.value == "auto"
    assert [(g.name, g.instance_type, g.count) for g in auto.cluster.node_groups] == \
        [(g.name, g.instance_type, g.count) for g in groups]
    assert auto.cluster.variants_of == "base-a100"
    names = derived_stack_names()
    for variant in ("agg-a100", "disagg-a100", "agg-a100-kv", "disagg-a100-kv",
                    "disagg-a100-kv-offload", "disagg-l40s-decode", "agg-l40s-fp8"):
        assert f"{variant}.{BASE}" in names
    assert not any(n.startswith("agg-b200") for n in names)   # B200 recipes have their base


def test_pools_and_classes_validate_and_follow_auto_modes_rules() -> None:
    result = run(BASE)
    assert result.error is None, result.error
    pools, classes = _by_kind(result, "NodePool"), _by_kind(result, "NodeClass")
    assert set(pools) == set(classes) == {"dynamo-bench-p4d", "dynamo-bench-g6e",
                                          "dynamo-bench-cpu"}
    for obj in [*pools.values(), *classes.values()]:
        validate_object(obj, "1.35.0")
    p4d = pools["dynamo-bench-p4d"]["spec"]
    reqs = {r["key"]: r["values"] for r in p4d["template"]["spec"]["requirements"]}
    assert reqs["eks.amazonaws.com/instance-family"] == ["p4d"]
    assert reqs["node.kubernetes.io/instance-type"] == ["p4d.24xlarge"]
    assert reqs["karpenter.sh/capacity-type"] == ["on-demand"]
    assert reqs["topology.kubernetes.io/zone"] == ["us-east-1a"]
    assert p4d["template"]["metadata"]["labels"] == {"dynamo-bench.io/node-group": "p4d"}
    assert p4d["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    # GPU pools are dynamic (EFA only comes to dynamically provisioned nodes), capped at the
    # stack's count; running nodes are never drifted or consolidated away, empty ones go.
    assert "replicas" not in p4d
    assert p4d["limits"] == {"nodes": "2", "nvidia.com/gpu": "16"}
    assert p4d["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30m",
                                 "budgets": [{"nodes": "0",
                                              "reasons": ["Drifted", "Underutilized"]}]}
    cpu = pools["dynamo-bench-cpu"]["spec"]
    # static: nodes only, one over the replicas for replacements (auto-static-capacity.adoc)
    assert cpu["replicas"] == 2 and cpu["limits"] == {"nodes": "3"}
    assert "taints" not in cpu["template"]["spec"]
    for c in classes.values():
        assert c["spec"]["role"] and c["spec"]["securityGroupSelectorTerms"]
    assert classes["dynamo-bench-p4d"]["spec"]["ephemeralStorage"] == {"size": "500Gi"}
    eks = result.of_type("eks:index:Cluster")[0].inputs
    assert eks["autoMode"]["enabled"] is True and eks["version"] == "1.35"
    assert result.outputs["computeMode"] == "auto"
    assert "nodeAmiRelease" not in result.outputs    # Auto Mode owns the AMI


def test_nothing_of_ours_installs_a_second_device_plugin_or_driver() -> None:
    for name in (BASE, f"disagg-a100.{BASE}", f"disagg-l40s-decode.{BASE}"):
        result = run(name)
        assert not set(result.helm_charts()) & DEVICE_PLUGIN_CHARTS, name
        daemonsets = [o["metadata"]["name"] for _, o in k8s_objects(result)
                      if o["kind"] == "DaemonSet"]
        assert not [d for d in daemonsets if "device-plugin" in d or "driver" in d], name
    base = run(BASE)
    addons = {r.inputs["addonName"] for r in base.of_type("aws:eks/addon:Addon")}
    assert addons == {"aws-efs-csi-driver"}   # EBS CSI and Pod Identity are Auto Mode's
    # DCGM exporter only reads metrics: no device plugin, driver or toolkit part in its values
    dcgm = [r for r in base.resources if "dcgm-exporter" in r.name]
    assert dcgm and "devicePlugin" not in str(dcgm[0].inputs)


@pytest.mark.parametrize("variant", ["agg-a100", "disagg-a100", "disagg-l40s-decode"])
def test_a_derived_variant_owns_only_its_graph_on_the_auto_mode_base(variant: str) -> None:
    result = run(f"{variant}.{BASE}")
    assert result.error is None, result.error
    types = {r.type for r in result.resources}
    assert not types & {"eks:index:Cluster", "aws:ec2/vpc:Vpc", "aws:efs/fileSystem:FileSystem",
                        "eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup"}
    assert not _by_kind(result, "NodePool")
    assert result.outputs["baseStack"] == BASE
    graph = next(iter(_by_kind(result, "DynamoGraphDeployment").values()))
    efa = ["vpc.amazonaws.com/efa" in str(c["podTemplate"]) for c in graph["spec"]["components"]
           if c["type"] != "frontend"]
    # NIXL over LIBFABRIC asks for EFA, which Auto Mode attaches to dynamic p4d nodes
    assert all(efa) if variant == "disagg-a100" else not any(efa)


def test_a_variants_extra_group_on_auto_mode_is_a_pool_without_plugins() -> None:
    raw = raw_config("disagg-l40s-decode")
    raw["cluster"]["attachTo"] = BASE
    raw["cluster"]["nodeGroups"] = [{"name": "g6e-extra", "instanceType": "g6e.12xlarge",
                                     "count": 1, "availabilityZone": "us-east-1a"}]
    raw["serving"]["workers"][1]["nodeGroup"] = "g6e-extra"
    result = run_config("disagg-l40s-extra-auto", raw)
    assert result.error is None, result.error
    assert set(_by_kind(result, "NodePool")) == {"dynamo-bench-g6e-extra"}
    assert not set(result.helm_charts()) & DEVICE_PLUGIN_CHARTS
    assert not result.of_type("aws:eks/nodeGroup:NodeGroup")
    for obj in [*_by_kind(result, "NodePool").values(), *_by_kind(result, "NodeClass").values()]:
        validate_object(obj, "1.35.0")


def test_a_capacity_reservation_is_selected_by_the_node_class() -> None:
    raw = raw_config(BASE)
    raw["cluster"]["nodeGroups"][0].update(capacityType="reservation",
                                           capacityReservationId="cr-0123456789abcdef0")
    result = run_config("base-a100-auto-odcr", raw)
    assert result.error is None, result.error
    pools, classes = _by_kind(result, "NodePool"), _by_kind(result, "NodeClass")
    assert classes["dynamo-bench-p4d"]["spec"]["capacityReservationSelectorTerms"] == [
        {"id": "cr-0123456789abcdef0"}]
    assert "capacityReservationSelectorTerms" not in classes["dynamo-bench-g6e"]["spec"]
    reqs = {r["key"]: r["values"]
            for r in pools["dynamo-bench-p4d"]["spec"]["template"]["spec"]["requirements"]}
    assert reqs["karpenter.sh/capacity-type"] == ["reserved"]
    for obj in [*pools.values(), *classes.values()]:
        validate_object(obj, "1.35.0")


def test_a_scheduler_parks_and_restores_a_group_through_the_pool() -> None:
    base = load_stack(BASE)
    p4d, cpu = base.cluster.group("p4d"), base.cluster.group("cpu")
    assert p4d is not None and cpu is not None
    pool = next(o for _, o in k8s_objects(run(BASE))
                if o["metadata"]["name"] == "dynamo-bench-p4d" and o["kind"] == "NodePool")
    parked = pool_capacity(p4d, 0)
    assert parked["limits"] == {"nodes": "0", "nvidia.com/gpu": "0"}
    assert parked["disruption"]["consolidateAfter"] == "0s"   # empty nodes go at once
    assert pool_capacity(p4d, p4d.count) == {k: pool["spec"][k] for k in ("limits",
                                                                          "disruption")}
    static = pool_capacity(cpu, 0)
    assert static["replicas"] == 0 and static["limits"] == {"nodes": "0"}
    for patch in (parked, static, pool_capacity(p4d.model_copy(
            update={"provisioning": Provisioning.STATIC}), 1)):
        validate_object({**pool, "spec": {**pool["spec"], **patch}}, "1.35.0")


def test_dynamic_efa_pools_are_in_a_cluster_placement_group() -> None:
    # aws.md M1: EKS device-management-efa.adoc @43d79bdb, "use placement groups with EKS Auto
    # Mode", its NodeClass example `placementGroupSelector: {name: ...}`
    result = run(BASE)
    assert result.error is None, result.error
    classes = _by_kind(result, "NodeClass")
    groups = {r.name: r for r in result.of_type("aws:ec2/placementGroup:PlacementGroup")}
    assert set(groups) == {"auto-p4d", "auto-g6e"}
    assert all(g.inputs["strategy"] == "cluster" for g in groups.values())
    names = {n: r.inputs.get("name", n) for n, r in groups.items()}   # the mock: name = its own
    for group in ("p4d", "g6e"):
        selector = classes[f"dynamo-bench-{group}"]["spec"]["placementGroupSelector"]
        assert selector == {"name": names[f"auto-{group}"]} and selector["name"]
    assert "placementGroupSelector" not in classes["dynamo-bench-cpu"]["spec"]


def test_a_reserved_efa_pool_has_no_placement_group_of_ours() -> None:
    # a reservation is not in a placement group this program just made (node_specs R5)
    raw = raw_config(BASE)
    raw["cluster"]["nodeGroups"][0].update(capacityType="reservation",
                                           capacityReservationId="cr-0123456789abcdef0")
    result = run_config("base-a100-auto-odcr-pg", raw)
    assert result.error is None, result.error
    classes = _by_kind(result, "NodeClass")
    assert "placementGroupSelector" not in classes["dynamo-bench-p4d"]["spec"]
    assert "placementGroupSelector" in classes["dynamo-bench-g6e"]["spec"]
