"""Pre-flight through the CLI: each invalid configuration is a shipped stack with one change.

Every case copies the shipped stack files into a temporary stacks dir, writes the changed stack
as `Pulumi.variant.yaml`, runs `python -m stacks check variant --stacks-dir <tmp>` (typer's
CliRunner) and asserts exit 2 and a problem line that starts with the exact field path. It then
checks a valid sibling in the same dir (the unchanged stack, or the change plus its fix) and
asserts exit 0, so a check that fires on everything cannot pass.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from stack_variants import (
    F,
    Mutation,
    append,
    both,
    check,
    copy_shipped,
    drop,
    edit,
    read_config,
    rename,
    variant_config,
    write_stack,
)

from stacks.config.loader import STACKS_DIR, StackError, load_stack
from stacks.preflight.run import require_valid, run_preflight


@pytest.fixture
def stacks_dir(tmp_path: Path) -> Path:
    return copy_shipped(tmp_path)


# --- the invalid configurations ------------------------------------------------------------

def base_without_g6e(stacks_dir: Path) -> None:
    config = read_config(stacks_dir, "base-a100")
    config["cluster"]["nodeGroups"] = [g for g in config["cluster"]["nodeGroups"]
                                       if g["name"] != "g6e"]
    write_stack(stacks_dir, "base-no-g6e", config)


# FP8 on L40S, prefill TP2 on g6e.12xlarge (EFA) and decode TP1 on g6e.4xlarge (no EFA).
L40S_SPLIT = both(
    edit("cluster.nodeGroups", [{"name": "l40s-single", "instanceType": "g6e.4xlarge",
                                 "count": 1}]),
    edit("serving.topology", "disaggregated"),
    edit("serving.transfer", "nixl-libfabric"),
    edit("serving.workers", [
        {"role": "prefill", "replicas": 1, "tensorParallelSize": 2, "nodeGroup": "g6e",
         "maxModelLen": 32768},
        {"role": "decode", "replicas": 1, "tensorParallelSize": 1, "nodeGroup": "l40s-single",
         "maxModelLen": 32768}]),
)

WORKER0 = "serving.workers.0"
NO_CHANGE: Mutation = both()


@dataclass(frozen=True)
class Case:
    id: str
    source: str          # the shipped stack it is derived from
    mutate: Mutation     # the one change
    field: str           # the exact field path the problem must name
    says: str            # part of the message
    fix: Mutation | None = None      # applied after `mutate`, must pass; default: unchanged
    setup: Callable[[Path], None] | None = None


CASES = [
    # the examples
    Case("bf16_tp1_on_a100_40gb", "agg-a100", edit(f"{WORKER0}.tensorParallelSize", 1),
         F + "serving.workers[0].tensorParallelSize", "does not fit: weights 56.8 GiB/GPU",
         fix=edit(f"{WORKER0}.tensorParallelSize", 2)),
    Case("tp3", "agg-a100", edit(f"{WORKER0}.tensorParallelSize", 3),
         F + "serving.workers[0].tensorParallelSize", "TP 3 does not divide the 32 attention"),
    Case("five_tp4_workers_on_16_gpus", "agg-a100", edit(f"{WORKER0}.replicas", 5),
         F + "serving.workers[0].replicas", "take 20 GPUs in whole TP groups; 2 x p4d.24xlarge "
         "provide 16"),
    Case("fp8_on_a100_without_fallback_flag", "agg-a100",
         edit("model", {"id": "Qwen/Qwen3-30B-A3B-FP8", "precision": "fp8"}),
         F + "model.precision", "FP8 on A100-SXM4-40GB (worker 0, p4d.24xlarge)",
         fix=edit("model.acceptFp8WeightOnlyFallback", True)),
    Case("disaggregated_without_decode", "disagg-a100", drop("serving.workers.1"),
         F + "serving.workers", "disaggregated needs a decode worker"),
    Case("disaggregated_without_prefill", "disagg-a100", drop("serving.workers.0"),
         F + "serving.workers", "disaggregated needs a prefill worker"),
    Case("prefix_share_1_5", "agg-a100",
         edit("workloads", {"prefixCache": {"shares": [0.0, 0.5, 1.5]}}),
         F + "workloads.prefixCache.shares[2]", "less than or equal to 1"),
    Case("isl_min_over_max", "agg-a100",
         edit("workloads", {"sequenceDistributions": {"islMin": 4096, "islMax": 1024}}),
         F + "workloads.sequenceDistributions.islMin", "islMin 4096 > islMax 1024: swap them"),
    Case("unknown_instance_type", "agg-a100-standalone",
         edit("cluster.nodeGroups.0.instanceType", "p4d.48xlarge"),
         F + "cluster.nodeGroups[0].instanceType", "unknown instance type 'p4d.48xlarge'"),
    Case("budget_exceeded", "agg-a100", edit("cost.budgetUsd", 20),
         F + "cost.budgetUsd", "exceeds the ceiling $20"),
    # keys and types
    Case("unknown_config_key", "agg-a100", rename("serving", "servng"),
         F + "servng", "unknown config key"),
    Case("project_namespace_typo", "agg-a100", rename("serving", "dynamo_bench:serving"),
         "dynamo_bench:serving", "namespace 'dynamo_bench' is not the project's"),
    Case("typo_in_worker_field", "agg-a100",
         rename(f"{WORKER0}.tensorParallelSize", "tensorParalelSize"),
         F + "serving.workers[0].tensorParalelSize", "Extra inputs are not permitted"),
    Case("unknown_topology_value", "agg-a100", edit("serving.topology", "disagg"),
         F + "serving.topology", "'aggregated' or 'disaggregated'"),
    Case("replicas_zero", "agg-a100", edit(f"{WORKER0}.replicas", 0),
         F + "serving.workers[0].replicas", "greater than or equal to 1"),
    Case("no_workers", "agg-a100", edit("serving.workers", []),
         F + "serving.workers", "at least 1 item"),
    Case("gpu_memory_utilization_over_limit", "agg-a100",
         edit(f"{WORKER0}.gpuMemoryUtilization", 1.2),
         F + "serving.workers[0].gpuMemoryUtilization", "less than or equal to 0.98"),
    Case("model_not_in_catalogue", "agg-a100", edit("model.id", "acme/Unknown-7B"),
         F + "model.id", "not in the catalogue"),
    # topology, router, transfer
    Case("aggregated_with_transfer_backend", "agg-a100", edit("serving.transfer", "nixl-ucx"),
         F + "serving.transfer", "aggregated moves no KV between workers"),
    Case("disaggregated_without_transfer", "disagg-a100", edit("serving.transfer", "none"),
         F + "serving.transfer", "disaggregated needs a KV transfer backend"),
    Case("aggregated_with_prefill_role", "agg-a100", edit(f"{WORKER0}.role", "prefill"),
         F + "serving.workers", "aggregated has prefill/decode workers"),
    Case("disaggregated_with_aggregated_worker", "disagg-a100",
         append("serving.workers", {"role": "worker", "tensorParallelSize": 4,
                                    "nodeGroup": "p4d"}),
         F + "serving.workers", "disaggregated has aggregated (role: worker) workers"),
    Case("kv_router_without_prefix_caching", "agg-a100-kv",
         edit("serving.prefixCaching", False),
         F + "serving.prefixCaching", "the KV router needs prefix caching"),
    Case("libfabric_on_instance_without_efa", "agg-l40s-fp8", L40S_SPLIT,
         F + "serving.transfer", "nixl-libfabric needs EFA; g6e.4xlarge (worker 1) has none",
         fix=edit("serving.transfer", "nixl-ucx")),
    # workers against the model and the hardware
    Case("max_model_len_over_model_context", "agg-a100",
         edit(f"{WORKER0}.maxModelLen", 65536),
         F + "serving.workers[0].maxModelLen", "65536 exceeds the model's context 40960"),
    Case("tp_over_one_node", "agg-l40s-fp8", edit(f"{WORKER0}.tensorParallelSize", 8),
         F + "serving.workers[0].tensorParallelSize", "TP 8 does not fit one g6e.12xlarge"),
    Case("multinode_without_allow_multinode", "agg-a100", edit(f"{WORKER0}.nodeCount", 2),
         F + "serving.workers[0].nodeCount", "multinode workers are off"),
    Case("nvfp4_on_a100", "agg-a100", edit("model.precision", "nvfp4"),
         F + "model.precision", "NVFP4 on A100-SXM4-40GB (worker 0) has no FP4 tensor cores"),
    Case("image_tag_not_the_pinned_version", "agg-a100",
         edit("serving.image", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0"),
         F + "serving.image", "image tag 1.5.0 is not the pinned dynamoVersion 1.6.1"),
    Case("bad_image_reference", "agg-a100",
         edit("serving.image", "nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:abc"),
         F + "serving.image", "is not an image reference"),
    # node groups and attachment
    Case("node_group_missing", "agg-a100", edit(f"{WORKER0}.nodeGroup", "p5"),
         F + "serving.workers[0].nodeGroup", "node group 'p5' does not exist in base "
         "'base-a100'"),
    Case("worker_on_cpu_group", "agg-a100", edit(f"{WORKER0}.nodeGroup", "cpu"),
         F + "serving.workers[0].nodeGroup", "'cpu' (m7i.4xlarge) has no GPUs"),
    Case("frontend_on_missing_group", "agg-a100", edit("serving.frontend", {"nodeGroup": "cpus"}),
         F + "serving.frontend.nodeGroup", "node group 'cpus' does not exist"),
    Case("base_lacks_the_node_group", "agg-l40s-fp8", edit("cluster.attachTo", "base-no-g6e"),
         F + "serving.workers[0].nodeGroup", "'g6e' does not exist in base 'base-no-g6e'",
         setup=base_without_g6e),
    Case("base_is_itself_attached", "agg-a100", edit("cluster.attachTo", "agg-a100-kv"),
         F + "cluster.attachTo", "'agg-a100-kv' is itself attached to 'base-a100'"),
    Case("base_serves_a_model_itself", "agg-a100",
         edit("cluster.attachTo", "agg-a100-standalone"),
         F + "cluster.attachTo", "'agg-a100-standalone' serves a model itself"),
    Case("missing_base_file", "agg-a100", edit("cluster.attachTo", "base-h100"),
         F + "cluster.attachTo", "there is no base stack 'base-h100'"),
    Case("variant_without_serving", "agg-a100", drop("serving"),
         F + "serving", "this stack serves nothing"),
    Case("variant_sets_the_base_region", "agg-a100", edit("cluster.region", "us-west-2"),
         F + "cluster.region", "set on a variant of 'base-a100'"),
    Case("variant_sets_the_base_storage", "agg-a100", edit("storage", {"modelCacheGib": 500}),
         F + "storage", "set on a variant of 'base-a100', which owns the storage"),
    Case("local_stack_attached_to_a_cluster", "local-agg",
         edit("cluster", {"attachTo": "base-a100"}),
         F + "cluster.attachTo", "a local stack runs on the local engine"),
    Case("extra_group_named_like_a_base_group", "agg-a100",
         edit("cluster.nodeGroups", [{"name": "p4d", "instanceType": "p4d.24xlarge",
                                      "count": 1}]),
         F + "cluster.nodeGroups[0].name", "node group 'p4d' already exists in base"),
    Case("duplicate_node_group_names", "agg-a100-standalone",
         append("cluster.nodeGroups", {"name": "cpu", "instanceType": "m7i.2xlarge",
                                       "count": 1}),
         F + "cluster.nodeGroups[2].name", "node group name 'cpu' is repeated"),
    Case("no_cpu_group_on_aws_standalone", "agg-a100-standalone", drop("cluster.nodeGroups.1"),
         F + "cluster.nodeGroups", "no CPU node group"),
    Case("reservation_without_id", "base-a100",
         edit("cluster.nodeGroups.0.capacityType", "reservation"),
         F + "cluster.nodeGroups[0].capacityReservationId",
         "capacityType reservation needs capacityReservationId",
         fix=edit("cluster.nodeGroups.0.capacityReservationId", "cr-0123456789abcdef0")),
    Case("reservation_id_on_on_demand_group", "base-a100",
         edit("cluster.nodeGroups.0.capacityReservationId", "cr-0123456789abcdef0"),
         F + "cluster.nodeGroups[0].capacityType", "set capacityType: reservation"),
    Case("bad_region", "agg-a100-standalone", edit("cluster.region", "us-east"),
         F + "cluster.region", "'us-east' is not an AWS region where EKS and EFS are offered"),
    Case("unsupported_eks_version", "agg-a100-standalone", edit("cluster.eksVersion", "1.20"),
         F + "cluster.eksVersion", "'1.20' is not an EKS version of the catalogue"),
    # KV offload
    Case("kv_offload_cpu_without_size", "disagg-a100-kv-offload",
         edit("serving.kvOffload", {"kind": "cpu"}),
         F + "serving.kvOffload.cpuGb", "kvOffload kind cpu needs cpuGb > 0"),
    Case("kv_offload_disk_without_size", "disagg-a100-kv-offload",
         edit("serving.kvOffload.kind", "disk"),
         F + "serving.kvOffload.diskGb", "kvOffload kind disk needs diskGb > 0"),
    Case("kv_offload_sizes_with_kind_none", "disagg-a100-kv-offload",
         edit("serving.kvOffload.kind", "none"),
         F + "serving.kvOffload.kind", "sizes are set but kind is none"),
    Case("cpu_offload_over_host_memory", "disagg-a100-kv-offload",
         edit("serving.kvOffload.cpuGb", 1000),
         F + "serving.kvOffload.cpuGb", "2 x p4d.24xlarge of node group 'p4d' hold 80% of "
         "1152 GiB each for CPU cache (worker 0 (prefill): 2 pod(s) x 4 GPU, 1064 GiB, 1000 "
         "GiB CPU cache", fix=edit("serving.kvOffload.cpuGb", 600)),
    Case("disk_offload_over_node_disk", "disagg-a100-kv-offload",
         both(edit("serving.kvOffload", {"kind": "disk", "cpuGb": 50, "diskGb": 450}),
              edit("serving.dynamoVersion", "1.5.1"),
              edit("serving.image", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1")),
         F + "serving.kvOffload.diskGb", "do not fit 80% of diskGib 500 GiB per node",
         fix=edit("serving.kvOffload.diskGb", 150)),
    Case("disk_offload_on_dynamo_1_6", "disagg-a100-kv-offload",
         edit("serving.kvOffload", {"kind": "disk", "cpuGb": 50, "diskGb": 100}),
         F + "serving.kvOffload.kind", "disk offload needs KVBM, and dynamoVersion 1.6.1",
         fix=both(edit("serving.dynamoVersion", "1.5.1"),
                  edit("serving.image", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.1"))),
    # workloads
    Case("concurrency_zero", "agg-a100",
         edit("workloads", {"concurrencySweep": {"concurrencies": [0, 1]}}),
         F + "workloads.concurrencySweep.concurrencies[0]", "greater than or equal to 1"),
    Case("concurrency_list_empty", "agg-a100",
         edit("workloads", {"concurrencySweep": {"concurrencies": []}}),
         F + "workloads.concurrencySweep.concurrencies", "at least 1 item"),
    Case("duration_zero", "agg-a100", edit("workloads", {"concurrencySweep": {"durationS": 0}}),
         F + "workloads.concurrencySweep.durationS", "greater than 0"),
    Case("duration_negative", "agg-a100", edit("workloads", {"multiTurn": {"durationS": -30}}),
         F + "workloads.multiTurn.durationS", "greater than 0"),
    Case("prefix_isl_not_whole_blocks", "agg-a100",
         edit("workloads", {"prefixCache": {"isl": 2000}}),
         F + "workloads.prefixCache.isl", "isl 2000 must be a multiple of blockSize 512"),
    Case("quick_override_out_of_range", "agg-a100",
         edit("workloads", {"concurrencySweep": {"quick": {"durationS": 0}}}),
         F + "workloads.concurrencySweep.quick.durationS", "greater than 0"),
    Case("quick_override_typo", "agg-a100",
         edit("workloads", {"multiTurn": {"quick": {"conversatons": 2}}}),
         F + "workloads.multiTurn.quick.conversatons", "Extra inputs are not permitted"),
    Case("quick_override_of_enabled", "agg-a100",
         edit("workloads", {"multiTurn": {"quick": {"enabled": False}}}),
         F + "workloads.multiTurn.quick.enabled", "quick may override parameters, not "
         "'enabled'"),
    Case("workload_longer_than_max_model_len", "agg-a100",
         edit(f"{WORKER0}.maxModelLen", 4096),
         F + "workloads.sequenceDistributions.islMax", "needs 6144 tokens but the smallest "
         "worker maxModelLen is 4096"),
    # cost and tags
    Case("price_override_for_unknown_type", "agg-a100",
         edit("cost.priceOverrides", {"p4d.24xl": 15.0}),
         F + "cost.priceOverrides.p4d.24xl", "unknown instance type 'p4d.24xl'",
         fix=edit("cost.priceOverrides", {"p4d.24xlarge": 15.0})),
    Case("reserved_tag_key", "agg-a100", edit("tags.extra", {"project": "other"}),
         F + "tags.extra.project", "tag 'project' is reserved"),
]


def test_at_least_30_distinct_invalid_configurations() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    configs = {json.dumps(variant_config(c.source, c.mutate), sort_keys=True) for c in CASES}
    originals = {json.dumps(read_config(STACKS_DIR, c.source), sort_keys=True) for c in CASES}
    assert len(configs) == len(CASES) >= 30
    assert not configs & originals  # every case really changes its stack


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_configuration_is_rejected_naming_the_field(case: Case,
                                                            stacks_dir: Path) -> None:
    if case.setup:
        case.setup(stacks_dir)
    write_stack(stacks_dir, "variant", variant_config(case.source, case.mutate))
    code, out = check(stacks_dir, "variant")
    assert code == 2, out
    assert f"- {case.field}: " in out, out
    assert case.says in out, out

    fixed = both(case.mutate, case.fix) if case.fix else NO_CHANGE
    write_stack(stacks_dir, "sibling", variant_config(case.source, fixed))
    code, out = check(stacks_dir, "sibling")
    assert code == 0, out
    assert "1/1 stack(s) valid" in out


# --- pre-flight as a library ---------------------------------------------------------------

def test_every_problem_is_listed_not_just_the_first(stacks_dir: Path) -> None:
    change = both(edit(f"{WORKER0}.tensorParallelSize", 3), edit("serving.transfer", "nixl-ucx"),
                  edit("cost.budgetUsd", 1))
    write_stack(stacks_dir, "variant", variant_config("agg-a100", change))
    code, out = check(stacks_dir, "variant")
    assert code == 2
    for path in ("serving.workers[0].tensorParallelSize", "serving.transfer", "cost.budgetUsd"):
        assert f"- {F}{path}: " in out
    assert "3 problem(s)" in out


def test_attached_stack_without_its_base_is_refused() -> None:
    report = run_preflight(load_stack("agg-a100"), base=None)
    assert [p.field for p in report.problems] == [F + "cluster.attachTo"]


def test_require_valid_raises_with_every_problem(stacks_dir: Path) -> None:
    write_stack(stacks_dir, "variant", variant_config(
        "disagg-a100", both(drop("serving.workers.1"), edit("serving.transfer", "none"))))
    with pytest.raises(StackError) as err:
        require_valid("variant", stacks_dir)
    fields = [p.field for p in err.value.problems]
    assert fields.count(F + "serving.workers") == 1  # no decode worker
    assert F + "serving.transfer" in fields
    assert require_valid("disagg-a100", stacks_dir).ok


def test_problem_names_field_and_fix() -> None:
    report = run_preflight(load_stack("agg-a100").model_copy(
        update={"cost": load_stack("agg-a100").cost.model_copy(update={"budget_usd": 1.0})}),
        load_stack("base-a100"), on=dt.date(2026, 7, 1))  # EKS 1.35 in standard support
    (problem,) = report.problems
    assert str(problem).startswith(f"{F}cost.budgetUsd: estimated $45.91/h x 1.80 h = $83 "
                                   "exceeds the ceiling $1")
    assert str(problem).endswith("-> fix: raise the budget or plan fewer/shorter workloads")


def test_libfabric_on_a_type_without_confirmed_gpudirect_rdma_is_refused():
    # NIXL LIBFABRIC moves KV GPU-to-GPU over EFA with GPUDirect RDMA; nothing confirms it on
    # g6e (stacks/catalog/gpudirect.py), so the L40S decode trial ships with nixl-ucx (TCP).
    from graph_stacks import variant
    stack = variant("disagg-l40s-decode", transfer="nixl-libfabric")
    problems = run_preflight(stack, load_stack("base-a100")).problems
    assert [p.field for p in problems] == ["dynamo-bench:serving.transfer"]
    assert "g6e.12xlarge" in problems[0].message and "nixl-ucx" in problems[0].fix
    assert run_preflight(load_stack("disagg-l40s-decode"), load_stack("base-a100")).ok
    assert run_preflight(load_stack("disagg-a100"), load_stack("base-a100")).ok  # p4d: yes
