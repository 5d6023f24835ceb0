"""What run_preflight hands each check, and the checks that need the base (stacks.preflight.run),
called in-process on shipped stacks with one change each and pinned to the exact problems a user
reads. (`make mutate`: group `preflight`.)"""

from __future__ import annotations

import datetime as dt

import pytest
from preflight_probe import problems_of, serving_problems, stack_with, worker_check
from stack_variants import F

from stacks.catalog.eks_versions import CATALOGUE_DATE
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.errors import Problem, StackError
from stacks.config.loader import STACKS_DIR as STACKS
from stacks.config.loader import load_stack
from stacks.preflight.run import (
    check_stack,
    effective_cluster,
    require_valid,
    run_preflight,
)
from stacks.preflight.worker_checks import check_workers, draft_weights_bytes, peak_concurrency

# --- what run_preflight hands each check ---------------------------------------------------------

EXTENDED_DAY = dt.date(2027, 6, 1)   # EKS 1.35 in extended support


def test_a_trace_problem_reaches_the_report(tmp_path):
    missing = str(tmp_path / "absent.jsonl")
    problems = problems_of("local-agg", workloads={"traceReplay": {
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
    exact = stack_with("agg-a100-standalone", cost__budgetUsd=report.planned_cost)
    assert run_preflight(exact, on=CATALOGUE_DATE).problems == []


def test_one_cpu_node_is_a_cpu_group():
    assert problems_of("agg-a100-standalone", cluster__nodeGroups__1__count=1) == []


def test_checks_that_need_the_base():
    base = load_stack("base-a100")
    # the graph goes into the base's Dynamo namespace
    other_ns = stack_with("agg-a100", serving__namespace="other")
    assert any(p.field == F + "serving.namespace" for p in
               run_preflight(other_ns, base, on=CATALOGUE_DATE).problems)
    # the base's model cache holds the variant's checkpoint
    small = stack_with("base-a100", name="b", storage__modelCacheGib=10)
    cache = [p for p in run_preflight(stack_with("agg-a100", cluster__attachTo="b"), small,
                                      on=CATALOGUE_DATE).problems
             if p.field == F + "storage.modelCacheGib"]
    assert len(cache) == 1 and cache[0].message.startswith("base 'b' model cache 10 GiB")
    # a base that serves nothing still downloads its model
    assert [p.field for p in run_preflight(small, on=CATALOGUE_DATE).problems] == [
        F + "storage.modelCacheGib"]
    # the base's Kubernetes version picks the node AMI
    no_ami = stack_with("base-a100", name="b", cluster__eksVersion="1.29")
    driver = run_preflight(stack_with("agg-a100", cluster__attachTo="b"), no_ami,
                           on=CATALOGUE_DATE).problems
    assert [p.field for p in driver] == [F + "cluster.eksVersion"]
    assert driver[0].message.startswith("no AL2023 NVIDIA AMI release is pinned for Kubernetes "
                                        "1.29")


def test_an_auto_mode_base_decides_for_its_variants():
    static = stack_with("base-a100-auto", name="ba", cluster__nodeGroups__0__provisioning="static")
    variant = stack_with("disagg-a100", cluster__attachTo="ba")
    report = run_preflight(variant, static, on=CATALOGUE_DATE)
    assert [p.field for p in report.problems] == [F + "serving.workers[0].nodeGroup",
                                                  F + "serving.workers[1].nodeGroup"]
    assert report.problems[0].message.startswith("NIXL over LIBFABRIC needs EFA, and group "
                                                 "'p4d' is a static-capacity Auto Mode NodePool")
    # after the KV path and the Kubernetes version's support window (stacks/catalog/releases)
    assert report.notes[1].startswith("EKS 1.35: standard support until")
    assert [n.split(" ")[0:3] for n in report.notes[2:]] == [["EKS", "Auto", "Mode"],
                                                            ["EFA", "on", "Auto"]]
    # a provisioning mode on a variant's own group: fine on an Auto Mode base only
    extra = [{"name": "x", "instanceType": "g6e.12xlarge", "count": 1,
              "provisioning": "dynamic"}]
    auto_base = load_stack("base-a100-auto")
    on_auto = stack_with("agg-a100", cluster__attachTo="base-a100-auto", cluster__nodeGroups=extra)
    assert run_preflight(on_auto, auto_base, on=CATALOGUE_DATE).problems == []
    on_groups = stack_with("agg-a100", cluster__nodeGroups=extra)
    assert [p.field for p in run_preflight(on_groups, load_stack("base-a100"),
                                           on=CATALOGUE_DATE).problems] == [
        F + "cluster.nodeGroups[0].provisioning"]


def test_the_rdma_plugin_of_a_cluster_is_checked_where_the_cluster_is_owned():
    bad = stack_with("agg-a100-standalone", cluster__rdma={"nodeGroups": ["cpu"]})
    assert [p.field for p in run_preflight(bad, on=CATALOGUE_DATE).problems] == [
        F + "cluster.rdma.nodeGroups[0]"]


def test_kubernetes_names_are_checked_on_aws_only():
    long = "d" * 60
    aws = [p.field for p in problems_of("agg-a100-standalone", serving__deploymentName=long)]
    assert aws and all(f.startswith(F + "serving.") for f in aws)
    assert problems_of("local-agg", serving__deploymentName=long) == []


def test_the_stack_files_facts_reach_preflight(tmp_path):
    (tmp_path / "Pulumi.s.yaml").write_text(
        (STACKS / "Pulumi.agg-a100-standalone.yaml").read_text().replace(
            "config:\n", "config:\n  aws:region: us-west-2\n", 1))
    assert [p.field for p in check_stack("s", tmp_path).problems] == ["aws:region"]
    assert problems_of("agg-a100-standalone") == []


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
    assert serving_problems("local-agg", serving__image=f"{image}:1.5.0{digest}") == []
    # a digest on the runtime image does not end the check: the frontend's is checked too
    assert [p.field for p in serving_problems("local-agg", serving__image=image + digest,
                                      serving__frontend={"image": f"{image}:1.5.0"})] == [
        F + "serving.frontend.image"]
    # an image without a registry path
    bare = serving_problems("local-agg", serving__image="vllm-runtime:1.5.0")
    assert [p.message for p in bare] == ["image tag 1.5.0 is not the pinned dynamoVersion 1.6.1"]


def test_worker_rows_carry_the_workers_settings():
    out, (row,) = worker_check("local-agg", serving__kvCacheDtype="fp8")
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
        _, table = worker_check("local-agg", cluster__nodeGroups=groups,
                            serving__workers=[{**good, "nodeGroup": first}, good])
        assert len(table) == 1, first
    base = load_stack("base-a100")
    stack = stack_with("agg-a100", serving__workers=[{**good, "nodeGroup": "cpu"}, good])
    out: list[Problem] = []
    assert len(check_workers(stack, effective_cluster(stack, base), out)) == 1
    # a frontend on a group that exists is fine
    out, _ = worker_check("local-agg", serving__frontend={"nodeGroup": "p4d"})
    assert out == []


def test_nvfp4_needs_fp4_tensor_cores_and_kv_head_problems_name_the_field():
    out, _ = worker_check("local-agg", model__precision="nvfp4")
    assert out == [Problem(F + "model.precision", "NVFP4 on A100-SXM4-40GB (worker 0) has no "
                           "FP4 tensor cores", "use a B200 node group")]
    from stacks.preflight.worker_checks import _check_tp
    arch = load_stack("local-agg").model.arch.model_copy(update={"kv_heads": 3,
                                                                  "attention_heads": 24})
    w = load_stack("local-agg").serving.workers[0]
    out = []
    _check_tp(arch, w, INSTANCE_TYPES["p4d.24xlarge"], False, "f", out)
    assert out == [Problem("f.tensorParallelSize", "TP 4 and 3 KV heads: one must divide the "
                           "other", "pick a power of two")]


def test_kv_capacity_below_one_sequence():
    from stacks.preflight.worker_checks import _check_memory
    from stacks.sizing.memory import WorkerMemory
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
    assert peak_concurrency(stack_with("local-agg", workloads=workloads)) == peak


def test_the_kernel_rules_judge_an_aws_stack_at_its_own_cluster_and_not_a_local_one():
    """A MoE backend the A100 cannot run is refused through run_preflight, at the GPU of the
    worker's group in the cluster pre-flight resolved; the local engine runs no vLLM kernel."""
    kernels = {"moeBackend": "flashinfer_trtllm", "delivery": "flags"}
    found = problems_of("agg-a100-standalone", serving__kernels=kernels)
    assert [p.field for p in found] == [F + "serving.kernels.moeBackend"]
    assert "(p4d): the flashinfer_trtllm MoE kernel" in found[0].message
    assert problems_of("local-agg", serving__kernels=kernels) == []


def test_the_report_keeps_the_cluster_the_engine_parse_reads():
    """consult_engine hands the engine parse each report's cluster (a variant's is its base's
    groups plus its own): the report must keep the one pre-flight resolved."""
    stack = load_stack("agg-a100")
    report = run_preflight(stack, load_stack(stack.cluster.attach_to), on=CATALOGUE_DATE)
    assert report.cluster is not None
    assert [g.name for g in report.cluster.node_groups] == \
        [g.name for g in effective_cluster(stack, load_stack(stack.cluster.attach_to)).node_groups]
