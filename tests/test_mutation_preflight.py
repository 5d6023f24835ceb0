"""Pre-flight's core checks called in-process on shipped stacks with one change each
(stacks.preflight, stacks.serving_checks, stacks.worker_checks), pinned to the exact problems
a user reads (field, what is wrong, the fix) and to what a valid sibling passes: a check that
fires on everything, or on nothing, or says the wrong thing, fails here. (`make mutate`:
group `preflight`.)"""

from __future__ import annotations

import datetime as dt
import math

import pytest
from stack_variants import F, edit, variant_config

from stacks.catalog import INSTANCE_TYPES
from stacks.eks_versions import CATALOGUE_DATE
from stacks.errors import Problem, StackError
from stacks.loader import STACKS_DIR as STACKS
from stacks.loader import load_stack, parse_config
from stacks.preflight import (
    check_stack,
    effective_cluster,
    file_facts,
    load_base,
    require_valid,
    run_preflight,
)
from stacks.schema import ClusterConfig
from stacks.serving_checks import check_serving
from stacks.worker_checks import check_workers, draft_weights_bytes, peak_concurrency

TYPES = ", ".join(INSTANCE_TYPES)


def _stack(source: str, name: str = "variant", **changes):
    config = variant_config(source, lambda c: None)
    for dotted, value in changes.items():
        edit(dotted.replace("__", "."), value)(config)
    return parse_config(name, config)


def _problems(source: str, base: str | None = None, **changes) -> list[Problem]:
    stack = _stack(source, **changes)
    if base is None and stack.is_attached:
        base = stack.cluster.attach_to
    return run_preflight(stack, load_stack(base) if base else None,
                         on=CATALOGUE_DATE).problems


def _serving(source: str, **changes) -> list[Problem]:
    stack = _stack(source, **changes)
    out: list[Problem] = []
    check_serving(stack.serving, stack.cluster, out)
    return out


# --- attachment ----------------------------------------------------------------------------

def test_a_variant_runs_on_its_bases_cluster():
    variant, base = load_stack("disagg-l40s-decode"), load_stack("base-a100")
    cluster = effective_cluster(variant, base)
    assert [g.name for g in cluster.node_groups] == ["p4d", "g6e", "cpu"]
    assert effective_cluster(base, None) is base.cluster
    extra = _stack("agg-a100", cluster__nodeGroups=[{"name": "x", "instanceType":
                                                     "g6e.12xlarge", "count": 1}],
                   cluster__allowMultinode=True)
    joined = effective_cluster(extra, base)
    assert [g.name for g in joined.node_groups] == ["p4d", "g6e", "cpu", "x"]
    assert joined.allow_multinode is True and base.cluster.allow_multinode is False
    assert effective_cluster(_stack("agg-a100"), base).allow_multinode is False


def test_attaching_to_what_is_no_base():
    where = F + "cluster.attachTo"
    local = _stack("local-agg", cluster={"attachTo": "base-a100"})
    assert run_preflight(local, load_stack("base-a100"), on=CATALOGUE_DATE).problems[:1] == [
        Problem(where, "a local stack runs on the local engine, not on a cluster",
                "remove cluster.attachTo or set target: aws")]
    variant = _stack("agg-a100")
    assert run_preflight(variant, load_stack("agg-a100"), on=CATALOGUE_DATE).problems == [
        Problem(where, "'agg-a100' is itself attached to 'base-a100'",
                "attach to a base stack that owns its cluster")]
    assert run_preflight(variant, load_stack("local-agg"), on=CATALOGUE_DATE).problems == [
        Problem(where, "'local-agg' is a local stack and owns no cluster",
                "attach to an aws base stack")]
    serving = run_preflight(variant, load_stack("agg-a100-standalone"), on=CATALOGUE_DATE)
    assert serving.problems[0] == Problem(
        where, "'agg-a100-standalone' serves a model itself and would compete for its GPUs",
        "attach to a base stack (one without serving)")
    unloaded = run_preflight(variant, None, on=CATALOGUE_DATE)
    assert unloaded.problems == [Problem(where, "base stack 'base-a100' was not given",
                                         "load it with check_stack")]
    assert unloaded.memory == [] and unloaded.notes == []


def test_a_variant_states_only_its_own_cluster_fields():
    assert _problems("agg-a100", cluster__attachTo="base-a100",
                     cluster__region="us-west-2") == [
        Problem(F + "cluster.region", "set on a variant of 'base-a100', whose cluster it is",
                "remove it (change the base)")]
    assert _problems("agg-a100", storage={"modelCacheGib": 300},
                     monitoring={"retention": "7d"}) == [
        Problem(F + "storage", "set on a variant of 'base-a100', which owns the storage",
                "remove it (change the base)"),
        Problem(F + "monitoring", "set on a variant of 'base-a100', which owns the "
                "monitoring", "remove it (change the base)")]
    assert _problems("agg-a100", cluster__allowMultinode=True) == []


# --- cluster ---------------------------------------------------------------------------------

def test_cluster_instance_types_and_groups():
    assert _problems("agg-a100-standalone", cluster__nodeGroups__0__instanceType="p9.big",
                     serving=None) == [
        Problem(F + "cluster.nodeGroups[0].instanceType", "unknown instance type 'p9.big'",
                f"use one of {TYPES}")]
    assert _problems("agg-a100-standalone", cost__priceOverrides={"p9.big": 3.0}) == [
        Problem(F + "cost.priceOverrides.p9.big", "unknown instance type 'p9.big' (its price "
                "would never be used)", f"use one of {TYPES}")]
    assert _problems("agg-a100-standalone",
                     cost__priceOverrides={"p4d.24xlarge": 3.0}) == []
    clash = [{"name": "g6e", "instanceType": "g6e.12xlarge", "count": 1,
              "availabilityZone": "us-east-1a"}]
    assert _problems("agg-a100", cluster__nodeGroups=clash) == [
        Problem(F + "cluster.nodeGroups[0].name", "node group 'g6e' already exists in base "
                "'base-a100'", "give the extra group another name")]


def test_a_base_group_of_unknown_type_is_the_variants_problem_too():
    base = _stack("base-a100", name="b", cluster__nodeGroups__1__instanceType="g9.odd")
    variant = _stack("agg-a100", cluster__attachTo="b")
    problems = run_preflight(variant, base, on=CATALOGUE_DATE).problems
    assert Problem(F + "cluster.attachTo", "base 'b' node group 'g6e' has unknown instance "
                   "type 'g9.odd'", "fix the base (python -m stacks check b)") in problems


def test_a_nodegroup_cluster_needs_a_cpu_group():
    only_gpus = [{"name": "p4d", "instanceType": "p4d.24xlarge", "count": 2,
                  "availabilityZone": "us-east-1a", "diskGib": 500}]
    cpu_gone = [*only_gpus, {"name": "cpu", "instanceType": "m7i.4xlarge", "count": 0}]
    for groups in (only_gpus, cpu_gone):
        assert _problems("agg-a100-standalone", cluster__nodeGroups=groups) == [
            Problem(F + "cluster.nodeGroups", "no CPU node group for system pods, monitoring "
                    "and the load generator", "add a group such as m7i.4xlarge x 2")]
    # a local stack creates no cluster, and an unknown type is reported once, as unknown
    assert _problems("local-agg") == []
    odd = [*only_gpus, {"name": "cpu", "instanceType": "m9.huge", "count": 2}]
    assert [p.field for p in _problems("agg-a100-standalone", cluster__nodeGroups=odd)] == [
        F + "cluster.nodeGroups[1].instanceType", F + "cluster.nodeGroups"]


# --- serving as a whole ------------------------------------------------------------------------

def test_serving_nothing():
    assert _problems("local-agg", serving=None) == [
        Problem(F + "serving", "this stack serves nothing", "add serving")]
    assert _problems("agg-a100", serving=None)[-1] == Problem(
        F + "serving", "this stack serves nothing", "add serving")
    assert _problems("base-a100") == []


def test_topology_rules():
    w = F + "serving.workers"
    agg_worker = {"role": "worker", "replicas": 1, "tensorParallelSize": 4, "nodeGroup": "p4d",
                  "maxModelLen": 32768}
    assert _serving("disagg-a100", serving__workers=[agg_worker]) == [
        Problem(w, "disaggregated needs a prefill worker", "add a worker with role: prefill"),
        Problem(w, "disaggregated needs a decode worker", "add a worker with role: decode"),
        Problem(w, "disaggregated has aggregated (role: worker) workers",
                "use roles prefill and decode")]
    assert _serving("disagg-a100", serving__transfer="none") == [
        Problem(F + "serving.transfer", "disaggregated needs a KV transfer backend",
                "set transfer: nixl-ucx or nixl-libfabric")]
    assert _serving("disagg-a100") == []
    assert _serving("local-agg", serving__workers__0__role="prefill") == [
        Problem(w, "aggregated has prefill/decode workers",
                "use role: worker, or topology: disaggregated")]
    assert _serving("local-agg", serving__workers__0__role="decode")[0].message == \
        "aggregated has prefill/decode workers"
    assert _serving("local-agg", serving__transfer="nixl-ucx") == [
        Problem(F + "serving.transfer", "aggregated moves no KV between workers",
                "set transfer: none")]
    assert _serving("local-agg", serving__router="kv", serving__prefixCaching=False) == [
        Problem(F + "serving.prefixCaching", "the KV router needs prefix caching (and the "
                "workers' KV events) to route on cache hits",
                "set prefixCaching: true or router: round-robin")]
    assert _serving("local-agg", serving__router="kv") == []
    assert _serving("local-agg", serving__prefixCaching=False) == []


def test_kv_events_rules():
    events = F + "serving.kvEvents"
    assert _serving("local-agg", serving__router="kv", serving__kvEvents=False) == [
        Problem(events, "the KV router scores workers from their KV events; without them it "
                "routes blind", "remove kvEvents: false or use router: round-robin")]
    # round-robin ignores KV events: turning them off is fine
    assert _serving("local-agg", serving__router="round-robin", serving__kvEvents=False) == []
    assert _serving("local-agg", serving__router="round-robin", serving__kvEvents=True,
                    serving__prefixCaching=False) == [
        Problem(events, "KV events exist only with prefix caching",
                "set prefixCaching: true or remove kvEvents")]
    assert _serving("local-agg", serving__router="round-robin", serving__kvEvents=True) == []


def test_image_tags_follow_the_pinned_dynamo_version():
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"
    assert _serving("local-agg", serving__image=f"{image}:1.5.0") == [
        Problem(F + "serving.image", "image tag 1.5.0 is not the pinned dynamoVersion 1.6.1",
                "use the image of that version, or change dynamoVersion")]
    assert _serving("local-agg", serving__frontend={"image": f"{image}:1.5.0-extra"}) == [
        Problem(F + "serving.frontend.image", "image tag 1.5.0-extra is not the pinned "
                "dynamoVersion 1.6.1", "use the image of that version, or change dynamoVersion")]
    for ok in (f"{image}:1.6.1-custom", f"{image}:nightly", f"{image}@sha256:{'a' * 64}",
               "registry:5000/vllm-runtime:1.6.1"):
        assert _serving("local-agg", serving__image=ok) == [], ok
    # the registry's port is no tag
    assert _serving("local-agg", serving__image="registry:5000/vllm-runtime:1.5.0")[0].message \
        == "image tag 1.5.0 is not the pinned dynamoVersion 1.6.1"


def test_disk_offload_needs_kvbm():
    disk = {"kind": "disk", "cpuGb": 40, "diskGb": 100}
    assert _serving("local-agg", serving__kvOffload=disk) == [
        Problem(F + "serving.kvOffload.kind", "disk offload needs KVBM, and dynamoVersion 1.6.1 "
                "uses vLLM's native offloading, which has no disk tier in Dynamo yet",
                "use kind: cpu, or a dynamoVersion (and image) below 1.6")]
    assert _serving("local-agg", serving__kvOffload={"kind": "cpu", "cpuGb": 40}) == []


def test_efa_workers_share_one_zone():
    base = load_stack("base-a100")
    two_zones = base.cluster.model_copy(update={"node_groups": [
        base.cluster.node_groups[0],
        base.cluster.node_groups[1].model_copy(update={"availability_zone": "us-east-1b"}),
        base.cluster.node_groups[2]]})
    stack = load_stack("disagg-l40s-decode")
    libfabric = stack.serving.model_copy(update={"transfer": "nixl-libfabric"})
    out: list[Problem] = []
    check_serving(libfabric, two_zones, out)
    assert out == [Problem(F + "serving.transfer", "nixl-libfabric workers sit in node groups "
                           "pinned to different zones (us-east-1a, us-east-1b); EFA traffic "
                           "stays in one AZ", "pin those groups to one zone, or use nixl-ucx")]
    for cluster, serving in ((base.cluster, libfabric), (two_zones, stack.serving)):
        out = []
        check_serving(serving, cluster, out)
        assert out == []
    unpinned = two_zones.model_copy(update={"node_groups": [
        two_zones.node_groups[0].model_copy(update={"availability_zone": None}),
        *two_zones.node_groups[1:]]})
    out = []
    check_serving(libfabric, unpinned, out)
    assert out == []


# --- workers ---------------------------------------------------------------------------------

def _workers(source: str, cluster: ClusterConfig | None = None, **changes):
    stack = _stack(source, **changes)
    out: list[Problem] = []
    table = check_workers(stack, cluster or stack.cluster, out)
    return out, table


def test_workers_need_a_gpu_group_that_exists():
    w0 = F + "serving.workers[0]"
    out, table = _workers("local-agg", serving__workers__0__nodeGroup="gpu")
    assert out == [Problem(f"{w0}.nodeGroup", "node group 'gpu' does not exist in this stack",
                           "use one of ['p4d']")] and table == []
    out, _ = _workers("local-agg", serving__frontend={"nodeGroup": "cpu"})
    assert out == [Problem(F + "serving.frontend.nodeGroup", "node group 'cpu' does not exist "
                           "in this stack", "use one of ['p4d']")]
    stack = _stack("agg-a100", serving__workers__0__nodeGroup="cpu")
    base = load_stack("base-a100")
    out = []
    assert check_workers(stack, effective_cluster(stack, base), out) == []
    assert out == [Problem(f"{w0}.nodeGroup", "node group 'cpu' (m7i.4xlarge) has no GPUs",
                           "place workers on a GPU group")]
    stack = _stack("agg-a100", serving__workers__0__nodeGroup="gone")
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
    out, _ = _workers("local-agg", serving__workers__0__tensorParallelSize=tp)
    assert [(p.field.rsplit(".", 1)[1], p.message, p.fix) for p in out
            if p.field == F + "serving.workers[0].tensorParallelSize"] == problems


def test_tp_and_kv_heads_must_divide_each_other():
    # Qwen3-30B-A3B: 32 attention heads, 4 KV heads; TP 32 divides the heads, 32 % 4 == 0
    arch = load_stack("local-agg").model.arch
    assert (arch.attention_heads, arch.kv_heads) == (32, 4)
    odd = arch.model_copy(update={"kv_heads": 3, "attention_heads": 24})
    from stacks.worker_checks import _check_tp
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
    out, _ = _workers("local-agg", serving__workers__0__nodeCount=2)
    assert [p for p in out if p.field == f"{w0}.nodeCount"] == [Problem(
        f"{w0}.nodeCount", "multinode workers are off",
        "set cluster.allowMultinode: true or nodeCount: 1")]
    out, _ = _workers("local-agg", cluster__allowMultinode=True,
                      serving__workers__0__nodeCount=3)
    assert out[0] == Problem(f"{w0}.nodeCount", "TP 4 does not split evenly over 3 nodes (one "
                             "pod per node, TP / nodeCount GPUs each)",
                             "use a nodeCount that divides tensorParallelSize")
    out, _ = _workers("local-agg", cluster__allowMultinode=True,
                      cluster__nodeGroups__0__count=2,
                      serving__workers__0__nodeCount=2, serving__workers__0__replicas=1,
                      serving__workers__0__tensorParallelSize=16)
    assert [p for p in out if p.field.startswith(w0)] == []      # 16 GPUs over 2 nodes of 8


def test_model_length_and_precision():
    w0 = F + "serving.workers[0]"
    out, _ = _workers("local-agg", serving__workers__0__maxModelLen=40961)
    assert out[0] == Problem(f"{w0}.maxModelLen", "40961 exceeds the model's context 40960",
                             "use <= 40960")
    out, _ = _workers("local-agg", serving__workers__0__maxModelLen=40960)
    assert [p.field for p in out] == []
    out, _ = _workers("local-agg", model__precision="fp8")
    assert out == [Problem(F + "model.precision", "FP8 on A100-SXM4-40GB (worker 0, "
                           "p4d.24xlarge): no FP8 tensor cores, only a weight-only fallback",
                           "set model.acceptFp8WeightOnlyFallback: true to test that path, or "
                           "use an FP8-capable GPU (L40S, H100, B200)")]
    out, _ = _workers("local-agg", model__precision="fp8",
                      model__acceptFp8WeightOnlyFallback=True)
    assert out == []


def test_memory_that_does_not_fit_or_holds_too_little():
    out, table = _workers("local-agg", serving__workers__0__tensorParallelSize=1)
    (mem,) = table
    assert not mem.fits
    assert out == [Problem(F + "serving.workers[0].tensorParallelSize", (
        f"does not fit: weights {mem.weights_gib_per_gpu:.1f} GiB/GPU + overhead 4.0 + KV of "
        f"one 32768-token sequence {mem.full_sequence_kv_gib:.2f} = {mem.needed_gib:.1f} GiB > "
        f"{mem.budget_gib:.1f} GiB (A100-SXM4-40GB x 0.9)"),
        "raise TP, lower maxModelLen, or use a larger GPU")]
    assert mem.weights_gib_per_gpu > 40        # 30.5B params in BF16 on one GPU
    out, table = _workers("local-agg")
    assert out == [] and table[0].fits and table[0].kv_capacity_tokens >= 32768


def test_libfabric_needs_efa_and_gpudirect():
    base = load_stack("base-a100")

    def transfer_problems(**changes) -> list[Problem]:
        stack = _stack("disagg-l40s-decode", serving__transfer="nixl-libfabric", **changes)
        out: list[Problem] = []
        check_workers(stack, effective_cluster(stack, base), out)
        return [p for p in out if p.field == F + "serving.transfer"]

    assert transfer_problems() == [Problem(
        F + "serving.transfer", "nixl-libfabric moves KV GPU-to-GPU with GPUDirect RDMA, which "
        "nothing confirms on g6e.12xlarge (worker 1; stacks/gpudirect.py)",
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
    only_multi = _stack("local-agg", workloads={
        "concurrencySweep": {"enabled": False}, "sequenceDistributions": {"enabled": False},
        "prefixCache": {"enabled": False}})
    assert peak_concurrency(only_multi) == only_multi.workloads.multi_turn.conversations == 7
    assert draft_weights_bytes(stack.serving) == 0.0


def test_budget_and_notes():
    report = run_preflight(load_stack("agg-a100-standalone"), on=CATALOGUE_DATE)
    assert report.ok and report.planned_cost == pytest.approx(report.hourly.total
                                                              * report.planned_hours)
    assert report.notes == ["EKS 1.35: standard support until 2027-03-27 (extended until "
                            "2028-03-27)"]
    budget = math.ceil(report.planned_cost)
    assert _problems("agg-a100-standalone", cost__budgetUsd=budget) == []
    over = _problems("agg-a100-standalone", cost__budgetUsd=budget - 1)
    assert over == [Problem(F + "cost.budgetUsd", f"estimated ${report.hourly.total:,.2f}/h x "
                            f"{report.planned_hours:.2f} h = ${report.planned_cost:,.0f} exceeds "
                            f"the ceiling ${budget - 1:,.0f}",
                            "raise the budget or plan fewer/shorter workloads")]
    # a local stack has no AWS bill to refuse
    assert _problems("local-agg", cost__budgetUsd=0.01) == []


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


# --- what run_preflight hands each check ---------------------------------------------------------

EXTENDED_DAY = dt.date(2027, 6, 1)   # EKS 1.35 in extended support


def test_a_trace_problem_reaches_the_report(tmp_path):
    missing = str(tmp_path / "absent.jsonl")
    problems = _problems("local-agg", workloads={"traceReplay": {
        "enabled": True, "source": "file", "file": missing}})
    assert [(p.field, p.message) for p in problems] == [
        (F + "workloads.traceReplay.file", f"{missing} does not exist")]


def test_the_estimate_date_reaches_the_report_and_the_cost():
    report = run_preflight(load_stack("agg-a100-standalone"), on=EXTENDED_DAY)
    assert report.on == EXTENDED_DAY
    assert "EKS control plane (EKS 1.35 in extended support on 2027-06-01)" in report.hourly.lines
    checked = check_stack("agg-a100-standalone", on=EXTENDED_DAY)
    assert checked.on == EXTENDED_DAY and checked.notes[0].startswith("EKS 1.35: extended")


def test_a_budget_exactly_met_passes():
    report = run_preflight(load_stack("agg-a100-standalone"), on=CATALOGUE_DATE)
    exact = _stack("agg-a100-standalone", cost__budgetUsd=report.planned_cost)
    assert run_preflight(exact, on=CATALOGUE_DATE).problems == []


def test_one_cpu_node_is_a_cpu_group():
    assert _problems("agg-a100-standalone", cluster__nodeGroups__1__count=1) == []


def test_checks_that_need_the_base():
    base = load_stack("base-a100")
    # the graph goes into the base's Dynamo namespace
    other_ns = _stack("agg-a100", serving__namespace="other")
    assert any(p.field == F + "serving.namespace" for p in
               run_preflight(other_ns, base, on=CATALOGUE_DATE).problems)
    # the base's model cache holds the variant's checkpoint
    small = _stack("base-a100", name="b", storage__modelCacheGib=10)
    cache = [p for p in run_preflight(_stack("agg-a100", cluster__attachTo="b"), small,
                                      on=CATALOGUE_DATE).problems
             if p.field == F + "storage.modelCacheGib"]
    assert len(cache) == 1 and cache[0].message.startswith("base 'b' model cache 10 GiB")
    # a base that serves nothing still downloads its model
    assert [p.field for p in run_preflight(small, on=CATALOGUE_DATE).problems] == [
        F + "storage.modelCacheGib"]
    # the base's Kubernetes version picks the node AMI
    no_ami = _stack("base-a100", name="b", cluster__eksVersion="1.29")
    driver = run_preflight(_stack("agg-a100", cluster__attachTo="b"), no_ami,
                           on=CATALOGUE_DATE).problems
    assert [p.field for p in driver] == [F + "cluster.eksVersion"]
    assert driver[0].message.startswith("no AL2023 NVIDIA AMI release is pinned for Kubernetes "
                                        "1.29")


def test_an_auto_mode_base_decides_for_its_variants():
    static = _stack("base-a100-auto", name="ba", cluster__nodeGroups__0__provisioning="static")
    variant = _stack("disagg-a100", cluster__attachTo="ba")
    report = run_preflight(variant, static, on=CATALOGUE_DATE)
    assert [p.field for p in report.problems] == [F + "serving.workers[0].nodeGroup",
                                                  F + "serving.workers[1].nodeGroup"]
    assert report.problems[0].message.startswith("NIXL over LIBFABRIC needs EFA, and group "
                                                 "'p4d' is a static-capacity Auto Mode NodePool")
    assert [n.split(" ")[0:3] for n in report.notes[1:]] == [["EKS", "Auto", "Mode"],
                                                            ["EFA", "on", "Auto"]]
    # a provisioning mode on a variant's own group: fine on an Auto Mode base only
    extra = [{"name": "x", "instanceType": "g6e.12xlarge", "count": 1,
              "provisioning": "dynamic"}]
    auto_base = load_stack("base-a100-auto")
    on_auto = _stack("agg-a100", cluster__attachTo="base-a100-auto", cluster__nodeGroups=extra)
    assert run_preflight(on_auto, auto_base, on=CATALOGUE_DATE).problems == []
    on_groups = _stack("agg-a100", cluster__nodeGroups=extra)
    assert [p.field for p in run_preflight(on_groups, load_stack("base-a100"),
                                           on=CATALOGUE_DATE).problems] == [
        F + "cluster.nodeGroups[0].provisioning"]


def test_the_rdma_plugin_of_a_cluster_is_checked_where_the_cluster_is_owned():
    bad = _stack("agg-a100-standalone", cluster__rdma={"nodeGroups": ["cpu"]})
    assert [p.field for p in run_preflight(bad, on=CATALOGUE_DATE).problems] == [
        F + "cluster.rdma.nodeGroups[0]"]


def test_kubernetes_names_are_checked_on_aws_only():
    long = "d" * 60
    aws = [p.field for p in _problems("agg-a100-standalone", serving__deploymentName=long)]
    assert aws and all(f.startswith(F + "serving.") for f in aws)
    assert _problems("local-agg", serving__deploymentName=long) == []


def test_the_stack_files_facts_reach_preflight(tmp_path):
    (tmp_path / "Pulumi.s.yaml").write_text(
        (STACKS / "Pulumi.agg-a100-standalone.yaml").read_text().replace(
            "config:\n", "config:\n  aws:region: us-west-2\n", 1))
    assert [p.field for p in check_stack("s", tmp_path).problems] == ["aws:region"]
    assert _problems("agg-a100-standalone") == []


def test_missing_and_broken_bases_name_the_variant(tmp_path):
    for name in ("base-one", "base-two"):
        (tmp_path / f"Pulumi.{name}.yaml").write_text(
            (STACKS / "Pulumi.base-a100.yaml").read_text())
    (tmp_path / "Pulumi.v.yaml").write_text(
        "config:\n  dynamo-bench:target: aws\n  dynamo-bench:cluster:\n    attachTo: nope\n")
    with pytest.raises(StackError) as err:
        check_stack("v", tmp_path)
    assert err.value.stack == "v"
    assert err.value.problems[0].fix == "attach to one of the bases: base-one, base-two"
    (tmp_path / "Pulumi.nope.yaml").write_text("config:\n  dynamo-bench:target: aws\n"
                                               "  dynamo-bench:cost: {budgetUsd: -1}\n")
    with pytest.raises(StackError) as err:
        check_stack("v", tmp_path)
    assert err.value.stack == "v"
    (tmp_path / "Pulumi.bad.yaml").write_text(
        (STACKS / "Pulumi.agg-a100-standalone.yaml").read_text().replace("budgetUsd: 500",
                                                                        "budgetUsd: 1"))
    with pytest.raises(StackError) as err:
        require_valid("bad", tmp_path)
    assert err.value.stack == "bad" and err.value.problems[0].field == F + "cost.budgetUsd"


def test_image_tags_more_forms():
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"
    digest = "@sha256:" + "a" * 64
    # a digest pins the image whatever tag it carries
    assert _serving("local-agg", serving__image=f"{image}:1.5.0{digest}") == []
    # a digest on the runtime image does not end the check: the frontend's is checked too
    assert [p.field for p in _serving("local-agg", serving__image=image + digest,
                                      serving__frontend={"image": f"{image}:1.5.0"})] == [
        F + "serving.frontend.image"]
    # an image without a registry path
    assert [p.message for p in _serving("local-agg", serving__image="vllm-runtime:1.5.0")] == [
        "image tag 1.5.0 is not the pinned dynamoVersion 1.6.1"]


def test_worker_rows_carry_the_workers_settings():
    out, (row,) = _workers("local-agg", serving__kvCacheDtype="fp8")
    # 2 replicas share the sweep's peak of 64 requests: 32 sequences each; FP8 KV halves the
    # 24,576 B per token of TP4 BF16
    assert (row.role, row.replicas, row.concurrent_sequences) == ("worker", 2, 32)
    assert row.kv_bytes_per_token_per_gpu == 12_288
    # an EAGLE3 draft's weights (3e9 params x 2 B) sit beside the target's on every TP rank
    axk2 = load_stack("agg-b200-axk2")
    assert draft_weights_bytes(axk2.serving) == 6e9
    report = run_preflight(axk2, load_stack("base-b200"), on=CATALOGUE_DATE)
    (mem,) = report.memory
    tp = axk2.serving.workers[0].tensor_parallel_size
    assert mem.weights_gib_per_gpu * 2**30 == pytest.approx((398e9 + 6e9) / tp)
    no_draft = axk2.serving.model_copy(update={"speculative": axk2.serving.speculative
                                               .model_copy(update={"draft_model": None})})
    assert draft_weights_bytes(no_draft) == 0.0


def test_every_worker_is_checked_after_a_bad_one():
    groups = [{"name": "odd", "instanceType": "x9.big", "count": 1},
              {"name": "p4d", "instanceType": "p4d.24xlarge", "count": 1}]
    good = {"role": "worker", "replicas": 1, "tensorParallelSize": 4, "nodeGroup": "p4d",
            "maxModelLen": 32768}
    for first in ("gone", "odd"):
        _, table = _workers("local-agg", cluster__nodeGroups=groups,
                            serving__workers=[{**good, "nodeGroup": first}, good])
        assert len(table) == 1, first
    base = load_stack("base-a100")
    stack = _stack("agg-a100", serving__workers=[{**good, "nodeGroup": "cpu"}, good])
    out: list[Problem] = []
    assert len(check_workers(stack, effective_cluster(stack, base), out)) == 1
    # a frontend on a group that exists is fine
    out, _ = _workers("local-agg", serving__frontend={"nodeGroup": "p4d"})
    assert out == []


def test_nvfp4_needs_fp4_tensor_cores_and_kv_head_problems_name_the_field():
    out, _ = _workers("local-agg", model__precision="nvfp4")
    assert out == [Problem(F + "model.precision", "NVFP4 on A100-SXM4-40GB (worker 0) has no "
                           "FP4 tensor cores", "use a B200 node group")]
    from stacks.worker_checks import _check_tp
    arch = load_stack("local-agg").model.arch.model_copy(update={"kv_heads": 3,
                                                                  "attention_heads": 24})
    w = load_stack("local-agg").serving.workers[0]
    out = []
    _check_tp(arch, w, INSTANCE_TYPES["p4d.24xlarge"], False, "f", out)
    assert out == [Problem("f.tensorParallelSize", "TP 4 and 3 KV heads: one must divide the "
                           "other", "pick a power of two")]


def test_kv_capacity_below_one_sequence():
    from stacks.memory import WorkerMemory
    from stacks.worker_checks import _check_memory
    w = load_stack("local-agg").serving.workers[0]

    def mem(capacity: int) -> WorkerMemory:
        return WorkerMemory(role="worker", replicas=1, tensor_parallel_size=4,
                            instance_type="p4d.24xlarge", gpu="A100-SXM4-40GB",
                            gpu_memory_gib=40.0, budget_gib=36.0, weights_gib_per_gpu=14.0,
                            overhead_gib=4.0, kv_bytes_per_token_per_gpu=24_576,
                            full_sequence_tokens=32768, full_sequence_kv_gib=0.75,
                            kv_capacity_tokens=capacity, sequence_fixed_bytes_per_gpu=2**29,
                            concurrent_sequences=8)
    out: list[Problem] = []
    _check_memory(mem(32768), w, "f", out)
    assert out == []                                 # exactly one sequence: enough
    _check_memory(mem(32767), w, "f", out)
    assert out == [Problem("f.replicas", "8 concurrent sequences per replica hold 4.0 GiB/GPU "
                           "of fixed state, leaving KV for 32767 tokens, less than one "
                           "32768-token sequence", "add replicas or lower the concurrency")]


@pytest.mark.parametrize("workloads, peak", [
    ({"concurrencySweep": {"enabled": False}, "multiTurn": {"enabled": False},
      "sequenceDistributions": {"enabled": False}, "prefixCache": {"enabled": False}}, 1),
    ({"concurrencySweep": {"concurrencies": [2]}, "sequenceDistributions": {"concurrency": 70}},
     70),
    ({"concurrencySweep": {"concurrencies": [2]}, "prefixCache": {"concurrency": 80}}, 80),
    ({"concurrencySweep": {"concurrencies": [2]},
      "traceReplay": {"enabled": True, "concurrencies": [90, 3]}}, 90),
    # a trace replay's caps below another workload's peak leave that peak
    ({"concurrencySweep": {"concurrencies": [2, 64]},
      "traceReplay": {"enabled": True, "concurrencies": [8]}}, 64),
])
def test_peak_concurrency_of_each_workload(workloads, peak):
    assert peak_concurrency(_stack("local-agg", workloads=workloads)) == peak
