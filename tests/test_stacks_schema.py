"""The typed schema and the loader: shipped stack files, the plan's one-change rule, edge cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stacks.config.loader import (
    PROJECT,
    StackError,
    all_stack_names,
    load_stack,
    parse_config,
    read_stack_file,
    stack_file,
)
from stacks.config.schema import CapacityType, Precision, Role, Topology, TransferBackend

PLAN = {
    "base-a100", "base-a100-auto", "agg-a100", "agg-a100-standalone", "disagg-a100", "agg-a100-kv",
    "disagg-a100-kv", "disagg-a100-kv-offload", "disagg-l40s-decode", "agg-l40s-fp8",
    "local-agg", "local-disagg", "local-agg-kv",
    # B200 recipes (issue 7): a base, and per model a recipe pair plus a baseline
    "base-b200", *(f"{kind}-b200-{model}" for kind in ("agg", "disagg", "baseline")
                   for model in ("axk2", "kexaone", "solar2", "motif3")),
    # the local rehearsal of one recipe's layout (3 prefill + 1 decode mockers)
    "local-recipe-motif3",
}


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else k))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def changed_fields(a: str, b: str) -> set[str]:
    fa, fb = (flatten(read_stack_file(stack_file(n))) for n in (a, b))
    return {k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k)}


def test_the_plan_ships_as_stack_files() -> None:
    assert set(all_stack_names()) == PLAN


@pytest.mark.parametrize(("before", "after", "change"), [
    ("agg-a100", "agg-a100-kv", {"serving.router"}),
    ("disagg-a100", "disagg-a100-kv", {"serving.router"}),
    ("disagg-a100-kv", "disagg-a100-kv-offload", {"serving.kvOffload.kind",
                                                  "serving.kvOffload.cpuGb"}),
    ("local-agg", "local-agg-kv", {"serving.router"}),
])
def test_each_variant_is_one_change_from_its_neighbour(before: str, after: str,
                                                        change: set[str]) -> None:
    assert changed_fields(before, after) == change


def test_standalone_is_agg_a100_with_its_own_cluster() -> None:
    variant, standalone = load_stack("agg-a100"), load_stack("agg-a100-standalone")
    base = load_stack("base-a100")
    assert standalone.serving == variant.serving
    assert standalone.model == variant.model
    assert not standalone.is_attached and variant.cluster.attach_to == "base-a100"
    assert [g.name for g in standalone.cluster.node_groups] == ["p4d", "cpu"]
    assert standalone.cluster.group("p4d") == base.cluster.group("p4d")


def test_shipped_stacks_say_what_the_plan_says() -> None:
    base = load_stack("base-a100")
    assert base.is_base and base.target == "aws"
    assert {(g.name, g.instance_type, g.count) for g in base.cluster.node_groups} == {
        ("p4d", "p4d.24xlarge", 2), ("g6e", "g6e.12xlarge", 1), ("cpu", "m7i.4xlarge", 2)}
    agg = load_stack("agg-a100").serving
    assert (agg.topology, agg.transfer) == (Topology.AGGREGATED, TransferBackend.NONE)
    assert [(w.role, w.replicas, w.tensor_parallel_size) for w in agg.workers] == [
        (Role.WORKER, 4, 4)]
    disagg = load_stack("disagg-a100").serving
    assert [(w.role, w.replicas, w.tensor_parallel_size) for w in disagg.workers] == [
        (Role.PREFILL, 2, 4), (Role.DECODE, 2, 4)]
    hetero = load_stack("disagg-l40s-decode").serving
    assert [w.node_group for w in hetero.workers] == ["p4d", "g6e"]
    fp8 = load_stack("agg-l40s-fp8")
    assert fp8.model.precision == Precision.FP8 and fp8.serving.workers[0].node_group == "g6e"
    for name in ("local-agg", "local-disagg", "local-agg-kv"):
        local = load_stack(name)
        assert local.target == "local" and not local.is_attached
        assert sum(w.replicas for w in local.serving.workers) == 2


def test_attached_variants_hold_only_attach_to_in_their_cluster() -> None:
    for name in all_stack_names():
        stack = load_stack(name)
        if stack.is_attached:
            assert stack.cluster.model_fields_set == {"attach_to"}, name


def test_camel_case_keys_and_defaults() -> None:
    stack = parse_config("x", {"serving": {"workers": [
        {"role": "worker", "nodeGroup": "p4d", "tensorParallelSize": 2}]}})
    w = stack.serving.workers[0]
    assert (w.tensor_parallel_size, w.max_model_len, w.gpu_memory_utilization) == (2, 32768, 0.9)
    assert stack.cluster.node_groups == [] and stack.cluster.region == "us-east-1"
    assert stack.model.arch.layers == 48


def test_pods_per_node_counts_each_pod_of_a_multinode_replica() -> None:
    stack = parse_config("x", {"serving": {"workers": [
        {"role": "worker", "nodeGroup": "p4d", "replicas": 3, "tensorParallelSize": 8,
         "nodeCount": 2},
        {"role": "worker", "nodeGroup": "p4d", "replicas": 3, "tensorParallelSize": 2}]}})
    multinode, single = stack.serving.workers
    # TP 8 over 2 nodes: pods of 4 GPUs, two to an 8-GPU node (pre-flight's host-memory checks
    # and the graph's pod packing both count this).
    assert (multinode.gpus_per_pod, multinode.pods_per_node(8)) == (4, 2)
    assert (single.gpus_per_pod, single.pods_per_node(8), single.pods_per_node(1)) == (2, 3, 1)


def test_reservation_group_with_its_id_is_valid() -> None:
    stack = parse_config("x", {"cluster": {"nodeGroups": [
        {"name": "p4d", "instanceType": "p4d.24xlarge", "count": 2,
         "capacityType": "capacity-block", "capacityReservationId": "cr-0123456789abcdef0"}]}})
    assert stack.cluster.node_groups[0].capacity_type == CapacityType.CAPACITY_BLOCK


def test_image_digest_is_allowed() -> None:
    digest = "nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:" + "a" * 64
    stack = parse_config("x", {"serving": {"image": digest, "workers": [
        {"role": "worker", "nodeGroup": "p4d"}]}})
    assert stack.serving.image_is_digest


def test_quick_scale_merges_overrides_and_keeps_full_values() -> None:
    sweep = load_stack("agg-a100").workloads.concurrency_sweep
    quick = sweep.at_scale("quick")
    assert (quick.concurrencies, quick.duration_s, quick.osl) == ([1, 4, 16], 12, 128)
    assert quick.isl == sweep.isl == 1024
    assert sweep.at_scale("full") is sweep


def test_all_problems_of_a_stack_are_reported_together() -> None:
    with pytest.raises(StackError) as err:
        parse_config("x", {"cluster": {"vpc": {"cidr": 10}},
                           "serving": {"workers": [{"role": "boss", "nodeGroup": "p4d"}]}})
    assert [p.field for p in err.value.problems] == [
        f"{PROJECT}:cluster.vpc.cidr", f"{PROJECT}:serving.workers[0].role"]
    assert "stack 'x' has 2 problem(s)" in str(err.value)


def test_resource_tags_carry_project_stack_and_experiment() -> None:
    stack = parse_config("x", {"tags": {"experiment": "e1", "extra": {"team": "infra"}}})
    assert stack.resource_tags() == {"project": "dynamo-bench", "stack": "x",
                                     "experiment": "e1", "team": "infra"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text(text)
    return path


def test_loader_keeps_only_the_project_namespace(tmp_path: Path) -> None:
    path = write(tmp_path, "config:\n  aws:region: us-west-2\n"
                           "  dynamo-bench:hfToken:\n    secure: AAAB\n"
                           "  dynamo-bench:target: local\n")
    assert read_stack_file(path) == {"target": "local"}


def test_loader_rejects_bad_yaml_and_a_config_that_is_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="not valid YAML"):
        read_stack_file(write(tmp_path, "config: [unclosed\n"))
    with pytest.raises(StackError) as err:
        read_stack_file(write(tmp_path, "config:\n  - dynamo-bench:target\n"))
    assert err.value.problems[0].message == "`config:` is a list, not a mapping of config keys"


def test_missing_stack_file_lists_the_known_ones(tmp_path: Path) -> None:
    write(tmp_path, "config: {}\n")
    with pytest.raises(StackError) as err:
        load_stack("nope", tmp_path)
    (problem,) = err.value.problems
    assert "no stack file Pulumi.nope.yaml" in problem.message
    assert problem.fix == "create it or use one of: s"
