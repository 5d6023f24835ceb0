"""Pre-flight's worker checks (stacks.preflight.worker_checks) called in-process on shipped stacks
with one change each, pinned to the exact problems a user reads (field, what is wrong, the fix) and
to what a valid sibling passes. (`make mutate`: group `preflight`.)"""

from __future__ import annotations

import math

import pytest
from preflight_probe import problems_of, stack_with, worker_check
from stack_variants import F

from stacks.catalog.eks_versions import CATALOGUE_DATE
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.errors import Problem, StackError
from stacks.config.loader import load_stack
from stacks.preflight.run import (
    check_stack,
    effective_cluster,
    file_facts,
    load_base,
    require_valid,
    run_preflight,
)
from stacks.preflight.worker_checks import check_workers, draft_weights_bytes, peak_concurrency

# --- workers ---------------------------------------------------------------------------------


def test_workers_need_a_gpu_group_that_exists():
    w0 = F + "serving.workers[0]"
    out, table = worker_check("local-agg", serving__workers__0__nodeGroup="gpu")
    assert out == [Problem(f"{w0}.nodeGroup", "node group 'gpu' does not exist in this stack",
                           "use one of ['p4d']")] and table == []
    out, _ = worker_check("local-agg", serving__frontend={"nodeGroup": "cpu"})
    assert out == [Problem(F + "serving.frontend.nodeGroup", "node group 'cpu' does not exist "
                           "in this stack", "use one of ['p4d']")]
    stack = stack_with("agg-a100", serving__workers__0__nodeGroup="cpu")
    base = load_stack("base-a100")
    out = []
    assert check_workers(stack, effective_cluster(stack, base), out) == []
    assert out == [Problem(f"{w0}.nodeGroup", "node group 'cpu' (m7i.4xlarge) has no GPUs",
                           "place workers on a GPU group")]
    stack = stack_with("agg-a100", serving__workers__0__nodeGroup="gone")
    out = []
    check_workers(stack, effective_cluster(stack, base), out)
    assert out == [Problem(f"{w0}.nodeGroup", "node group 'gone' does not exist in base "
                           "'base-a100'", "use one of ['p4d', 'g6e', 'cpu']")]


@pytest.mark.parametrize("tp, problems", [
    (4, []),
    (8, []),
    (3, [("tensorParallelSize", "TP 3 does not divide the 32 attention heads",
          "use a divisor such as 1, 2, 4 or 8")]),
    (16, [("tensorParallelSize", "TP 16 does not fit one p4d.24xlarge (8 GPUs) x nodeCount 1",
           "use TP <= 8")]),
])
def test_tensor_parallel_size(tp, problems):
    out, _ = worker_check("local-agg", serving__workers__0__tensorParallelSize=tp)
    assert [(p.field.rsplit(".", 1)[1], p.message, p.fix) for p in out
            if p.field == F + "serving.workers[0].tensorParallelSize"] == problems


def test_tp_and_kv_heads_must_divide_each_other():
    # Qwen3-30B-A3B: 32 attention heads, 4 KV heads; TP 32 divides the heads, 32 % 4 == 0
    arch = load_stack("local-agg").model.arch
    assert (arch.attention_heads, arch.kv_heads) == (32, 4)
    odd = arch.model_copy(update={"kv_heads": 3, "attention_heads": 24})
    from stacks.preflight.worker_checks import _check_tp
    inst = INSTANCE_TYPES["p4d.24xlarge"]
    w = load_stack("local-agg").serving.workers[0]
    for tp, says in ((2, True), (4, True), (3, False), (6, False), (1, False)):
        out: list[Problem] = []
        _check_tp(odd, w.model_copy(update={"tensor_parallel_size": tp}), inst, False, "f", out)
        assert [p.message for p in out] == (
            [f"TP {tp} and 3 KV heads: one must divide the other"] if says else []), tp
        assert all(p.fix == "pick a power of two" for p in out)


def test_multinode_workers():
    w0 = F + "serving.workers[0]"
    out, _ = worker_check("local-agg", serving__workers__0__nodeCount=2)
    assert [p for p in out if p.field == f"{w0}.nodeCount"] == [Problem(
        f"{w0}.nodeCount", "multinode workers are off",
        "set cluster.allowMultinode: true or nodeCount: 1")]
    out, _ = worker_check("local-agg", cluster__allowMultinode=True,
                      serving__workers__0__nodeCount=3)
    assert out[0] == Problem(f"{w0}.nodeCount", "TP 4 does not split evenly over 3 nodes (one "
                             "pod per node, TP / nodeCount GPUs each)",
                             "use a nodeCount that divides tensorParallelSize")
    out, _ = worker_check("local-agg", cluster__allowMultinode=True,
                      cluster__nodeGroups__0__count=2,
                      serving__workers__0__nodeCount=2, serving__workers__0__replicas=1,
                      serving__workers__0__tensorParallelSize=16)
    assert [p for p in out if p.field.startswith(w0)] == []      # 16 GPUs over 2 nodes of 8


def test_model_length_and_precision():
    w0 = F + "serving.workers[0]"
    out, _ = worker_check("local-agg", serving__workers__0__maxModelLen=40961)
    assert out[0] == Problem(f"{w0}.maxModelLen", "40961 exceeds the model's context 40960",
                             "use <= 40960")
    out, _ = worker_check("local-agg", serving__workers__0__maxModelLen=40960)
    assert [p.field for p in out] == []
    out, _ = worker_check("local-agg", model__precision="fp8")
    assert out == [Problem(F + "model.precision", "FP8 on A100-SXM4-40GB (worker 0, "
                           "p4d.24xlarge): no FP8 tensor cores, only a weight-only fallback",
                           "set model.acceptFp8WeightOnlyFallback: true to test that path, or "
                           "use an FP8-capable GPU (L40S, H100, B200)")]
    out, _ = worker_check("local-agg", model__precision="fp8",
                      model__acceptFp8WeightOnlyFallback=True)
    assert out == []


def test_memory_that_does_not_fit_or_holds_too_little():
    out, table = worker_check("local-agg", serving__workers__0__tensorParallelSize=1)
    (mem,) = table
    assert not mem.fits
    assert out == [Problem(F + "serving.workers[0].tensorParallelSize", (
        f"does not fit: weights {mem.weights_gib_per_gpu:.1f} GiB/GPU + overhead 4.0 + KV of "
        f"one 32768-token sequence {mem.full_sequence_kv_gib:.2f} = {mem.needed_gib:.1f} GiB > "
        f"{mem.budget_gib:.1f} GiB (A100-SXM4-40GB x 0.9)"),
        "raise TP, lower maxModelLen, or use a larger GPU")]
    assert mem.weights_gib_per_gpu > 40        # 30.5B params in BF16 on one GPU
    out, table = worker_check("local-agg")
    assert out == [] and table[0].fits and table[0].kv_capacity_tokens >= 32768


def test_libfabric_needs_efa_and_gpudirect():
    base = load_stack("base-a100")

    def transfer_problems(**changes) -> list[Problem]:
        stack = stack_with("disagg-l40s-decode", serving__transfer="nixl-libfabric", **changes)
        out: list[Problem] = []
        check_workers(stack, effective_cluster(stack, base), out)
        return [p for p in out if p.field == F + "serving.transfer"]

    assert transfer_problems() == [Problem(
        F + "serving.transfer", "nixl-libfabric moves KV GPU-to-GPU with GPUDirect RDMA, which "
        "nothing confirms on g6e.12xlarge (worker 1; stacks/catalog/gpudirect.py)",
        "use nixl-ucx (TCP, KV staged through host memory) or a type listed there")]
    small = [{"name": "g6e-small", "instanceType": "g6e.4xlarge", "count": 1,
              "availabilityZone": "us-east-1a"}]
    assert transfer_problems(cluster__nodeGroups=small,
                             serving__workers__1__nodeGroup="g6e-small") == [Problem(
        F + "serving.transfer", "nixl-libfabric needs EFA; g6e.4xlarge (worker 1) has none",
        "use nixl-ucx or an EFA instance type")]
    assert transfer_problems(serving__workers__1__nodeGroup="p4d") == []


def test_peak_concurrency_is_the_largest_any_enabled_workload_keeps():
    stack = load_stack("local-agg")
    w = stack.workloads
    expected = max([1, *w.concurrency_sweep.concurrencies, w.multi_turn.conversations,
                    w.sequence_distributions.concurrency, w.prefix_cache.concurrency])
    assert peak_concurrency(stack) == expected == 64
    only_multi = stack_with("local-agg", workloads={
        "concurrencySweep": {"enabled": False}, "sequenceDistributions": {"enabled": False},
        "prefixCache": {"enabled": False}})
    assert peak_concurrency(only_multi) == only_multi.workloads.multi_turn.conversations == 8
    assert draft_weights_bytes(stack.serving) == 0.0


def test_budget_and_notes():
    report = run_preflight(load_stack("agg-a100-standalone"), on=CATALOGUE_DATE)
    assert report.ok and report.planned_cost == pytest.approx(report.hourly.total
                                                              * report.planned_hours)
    eks, *capacity = report.notes
    assert eks == "EKS 1.35: standard support until 2027-03-27 (extended until 2028-03-27)"
    # the on-demand p4d warning of the capacity rules (stacks/preflight/capacity_checks.py)
    assert [n.split(";")[0] for n in capacity] == [
        "WARNING: node group 'p4d' asks for 2 x p4d.24xlarge on demand"]
    budget = math.ceil(report.planned_cost)
    assert problems_of("agg-a100-standalone", cost__budgetUsd=budget) == []
    over = problems_of("agg-a100-standalone", cost__budgetUsd=budget - 1)
    assert over == [Problem(F + "cost.budgetUsd", f"estimated ${report.hourly.total:,.2f}/h x "
                            f"{report.planned_hours:.2f} h = ${report.planned_cost:,.0f} exceeds "
                            f"the ceiling ${budget - 1:,.0f}",
                            "raise the budget or plan fewer/shorter workloads")]
    # a local stack has no AWS bill to refuse
    assert problems_of("local-agg", cost__budgetUsd=0.01) == []


def test_loading_a_stack_and_its_base(tmp_path):
    assert load_base(load_stack("local-agg")) is None
    assert load_base(load_stack("agg-a100")).name == "base-a100"
    report = check_stack("agg-a100")
    assert report.ok and report.stack.name == "agg-a100"
    assert require_valid("agg-a100").ok
    (tmp_path / "Pulumi.v.yaml").write_text(
        "config:\n  dynamo-bench:target: aws\n  dynamo-bench:cluster:\n    attachTo: nope\n")
    with pytest.raises(StackError) as err:
        check_stack("v", tmp_path)
    assert [str(p) for p in err.value.problems] == [
        F + "cluster.attachTo: there is no base stack 'nope' (no file Pulumi.nope.yaml in "
        f"{tmp_path}) -> fix: attach to one of the bases: none: create a base stack first"]
    (tmp_path / "Pulumi.nope.yaml").write_text("config:\n  dynamo-bench:target: aws\n"
                                               "  dynamo-bench:cost: {budgetUsd: -1}\n")
    with pytest.raises(StackError) as err:
        check_stack("v", tmp_path)
    assert err.value.problems[0].field == F + "cluster.attachTo"
    assert err.value.problems[0].message.startswith("base stack 'nope' cannot be loaded: ")
    assert err.value.problems[0].fix == "fix it (python -m stacks check nope)"
    file = type("File", (), {"config": {"target": "aws"}, "provider_config":
                             {"aws:region": "us-east-1"}, "hf_token": "secure:abc",
                             "api_access": "public", "campaign": None,
                             "node_group_sizes": None})()
    facts = file_facts(file)
    assert (facts.config_keys, facts.provider_config, facts.hf_token, facts.api_access) == (
        ("dynamo-bench:target", "aws:region"), {"aws:region": "us-east-1"}, "secure:abc",
        "public")


def test_the_stack_files_campaign_keys_reach_their_checks():
    # what `workloads campaign` sets in the stack file, here malformed: pre-flight must see it
    file = type("File", (), {"config": {"target": "aws"}, "provider_config": {},
                             "hf_token": None, "api_access": None,
                             "campaign": '{"nope": 1}', "node_group_sizes": "[1]"})()
    report = run_preflight(load_stack("base-a100"), facts=file_facts(file), on=CATALOGUE_DATE)
    assert [p.field for p in report.problems] == [F + "campaign.graphName", F + "campaign.nope",
                                                  F + "nodeGroupSizes"]


# --- NIXL host staging (stacks.preflight.host_staging, dynamo.md F11) ---------------------------

def _l40s_decode_cluster(p4d_nodes: int):
    stack = load_stack("disagg-l40s-decode")
    cluster = effective_cluster(stack, load_stack("base-a100"))
    groups = [g.model_copy(update={"count": p4d_nodes}) if g.name == "p4d" else g
              for g in cluster.node_groups]
    return cluster.model_copy(update={"node_groups": groups})


def test_the_worker_checks_pack_the_host_staging():
    # two prefill pods with a 400 GiB CPU KV tier share one p4d (1152 GiB, 90 %: 1036.8) at
    # 2 x 464 GiB; their ~71 GiB of host staging each (TP4 x ~17.8 GiB of KV pool on an
    # A100 40 GB) no longer fit beside it
    out, _ = worker_check("disagg-l40s-decode", _l40s_decode_cluster(1),
                          serving__kvOffload={"kind": "cpu", "cpuGb": 400})
    assert [p.field for p in out] == ["dynamo-bench:serving.kvOffload.cpuGb"]
    assert "more memory than one p4d.24xlarge allows" in out[0].message
    fits, _ = worker_check("disagg-l40s-decode", _l40s_decode_cluster(1),
                           serving__kvOffload={"kind": "cpu", "cpuGb": 300})
    assert fits == []


def test_the_worker_checks_refuse_an_own_request_below_the_staging():
    out, _ = worker_check("disagg-l40s-decode", _l40s_decode_cluster(2),
                          serving__workers__1__hostMemoryGib=64)
    assert [p.field for p in out] == ["dynamo-bench:serving.workers[1].hostMemoryGib"]
