"""The B200 recipe stacks: every one passes pre-flight on base-b200, with the recipe's worker
layout and GPU total, the trace workload at the recipe's concurrency and a sweep around it; the
baselines keep the checkpoint at the minimum TP that fits, round-robin, replicas matched."""

from __future__ import annotations

import pytest
from recipe_stacks import BASE, RECIPES, changed, problem_fields
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.catalog.instances import INSTANCE_TYPES, Fabric
from stacks.catalog.model_catalog import SERVING_RULES
from stacks.config.loader import all_stack_names, derived_stack_names, load_stack
from stacks.config.schema import RouterMode, Topology, TransferBackend
from stacks.plan.forecast import base_campaign
from stacks.preflight.run import check_stack
from stacks.sizing.estimate import model_load_seconds

# (role, replicas, TP, expert parallel) per worker group, and the GPU total (issue 7).
LAYOUTS = {
    "agg-b200-axk2": ([("worker", 2, 4, False)], 8),
    "disagg-b200-axk2": ([("prefill", 2, 4, False), ("decode", 1, 4, False)], 12),
    "baseline-b200-axk2": ([("worker", 2, 4, False)], 8),
    "agg-b200-kexaone": ([("worker", 1, 4, False)], 4),
    "disagg-b200-kexaone": ([("prefill", 1, 4, False), ("decode", 1, 4, False)], 8),
    "baseline-b200-kexaone": ([("worker", 1, 4, False)], 4),
    "agg-b200-solar2": ([("worker", 2, 2, False)], 4),
    "disagg-b200-solar2": ([("prefill", 1, 4, True), ("decode", 2, 2, False)], 8),
    "baseline-b200-solar2": ([("worker", 2, 2, False)], 4),
    "agg-b200-motif3": ([("worker", 1, 2, True)], 2),
    "disagg-b200-motif3": ([("prefill", 3, 2, True), ("decode", 1, 2, True)], 8),
    "baseline-b200-motif3": ([("worker", 4, 2, False)], 8),
}
# The recipe's published concurrency (A.X K2 16, K-EXAONE 7, Solar 20, Motif 3 11).
RECIPE_CONCURRENCY = {"axk2": 16, "kexaone": 7, "solar2": 20, "motif3": 11}
# The published optimized figure each baseline is compared with, and its GPU total.
BASELINE_MATCHES = {"axk2": 8, "kexaone": 4, "solar2": 4, "motif3": 8}


def test_the_recipe_set_is_complete() -> None:
    assert set(LAYOUTS) == set(RECIPES) <= set(all_stack_names())


@pytest.mark.parametrize("name", [BASE, *RECIPES])
def test_stack_passes_preflight_within_its_budget(name: str) -> None:
    report = check_stack(name)
    assert report.ok, [str(p) for p in report.problems]
    assert 0 < report.planned_cost <= report.stack.cost.budget_usd
    if name != BASE:
        assert report.stack.cluster.attach_to == BASE


def test_cli_checks_every_stack() -> None:
    result = CliRunner().invoke(app, ["check", "--all"])
    n = len(all_stack_names()) + len(derived_stack_names())   # `<variant>.<base>` pairs too
    assert result.exit_code == 0, result.output
    assert f"{n}/{n} stack(s) valid" in result.output


@pytest.mark.parametrize("name", RECIPES)
def test_worker_layout_and_gpu_total(name: str) -> None:
    serving = load_stack(name).serving
    layout, gpus = LAYOUTS[name]
    assert [(w.role.value, w.replicas, w.tensor_parallel_size, w.expert_parallel)
            for w in serving.workers] == layout
    assert sum(w.gpus for w in serving.workers) == gpus
    assert serving.topology == (Topology.DISAGGREGATED if name.startswith("disagg")
                                else Topology.AGGREGATED)


@pytest.mark.parametrize("name", RECIPES)
def test_nvfp4_checkpoint_fp8_kv_and_full_context(name: str) -> None:
    stack = load_stack(name)
    assert stack.model.precision.value == "nvfp4" == stack.model.arch.checkpoint_precision
    assert stack.serving.kv_cache_dtype == "fp8"
    assert {w.max_model_len for w in stack.serving.workers} == {stack.model.arch.max_context}


@pytest.mark.parametrize("model", RECIPE_CONCURRENCY)
def test_recipe_pair_shares_everything_but_the_topology(model: str) -> None:
    agg, disagg = load_stack(f"agg-b200-{model}"), load_stack(f"disagg-b200-{model}")
    assert agg.model == disagg.model
    for key in ("image", "dynamo_version", "speculative", "kernels", "parsers",
                "startup_budget_minutes", "kv_cache_dtype"):
        assert getattr(agg.serving, key) == getattr(disagg.serving, key), key


@pytest.mark.parametrize("model", RECIPE_CONCURRENCY)
def test_trace_workload_at_the_recipe_concurrency_and_around_it(model: str) -> None:
    for kind in ("agg", "disagg", "baseline"):
        workloads = load_stack(f"{kind}-b200-{model}").workloads
        assert list(workloads.enabled()) == ["trace_replay"]
        trace = workloads.trace_replay
        # the public Mooncake conversation trace, shipped in stacks/catalog/traces/ (not a synthetic
        # 8K / 70 % stand-in for the recipes' own trace): its first 5 minutes, same for all
        assert (trace.source, trace.window_start_s, trace.window_s, trace.speed_up) == \
            ("mooncake-conversation", 0.0, 300.0, 1.0)
        c = RECIPE_CONCURRENCY[model]
        assert c in trace.concurrencies
        assert min(trace.concurrencies) < c < max(trace.concurrencies)


@pytest.mark.parametrize("model", RECIPE_CONCURRENCY)
def test_baseline_is_the_checkpoint_at_minimum_tp_round_robin_replicas_matched(model: str):
    name = f"baseline-b200-{model}"
    baseline, agg = load_stack(name), load_stack(f"agg-b200-{model}")
    s = baseline.serving
    assert baseline.model == agg.model and s.image == agg.serving.image
    assert s.router == RouterMode.ROUND_ROBIN and s.speculative is None
    # no kernel pin, except the attention backend a checkpoint cannot run without (A.X K2)
    required = SERVING_RULES[baseline.model.id].required_attention_backends
    assert s.block_size is None
    assert (s.kernels.attention_backend is None) == (not required)
    assert s.kernels.attention_backend in (None, *required)
    assert not any(w.expert_parallel for w in s.workers)
    (worker,) = s.workers
    assert worker.gpus == BASELINE_MATCHES[model]
    # half the TP (replicas doubled, same GPUs) does not fit: the TP is the minimum
    smaller = changed(name, {"serving.workers.0.tensorParallelSize":
                             worker.tensor_parallel_size // 2,
                             "serving.workers.0.replicas": worker.replicas * 2})
    assert "serving.workers[0].tensorParallelSize" in problem_fields(smaller)


def test_base_b200_owns_nodes_storage_monitoring_and_no_rdma_plugin_on_efa() -> None:
    base = load_stack(BASE)
    assert base.is_base and not base.is_attached
    gpu = base.cluster.group("b200")
    assert (gpu.instance_type, gpu.count) == ("p6-b200.48xlarge", 2)
    cpu = [g for g in base.cluster.node_groups if INSTANCE_TYPES[g.instance_type].gpu is None]
    assert cpu and all(g.count >= 1 for g in cpu)
    # >= 700 GB for K-EXAONE's ~530 GB checkpoint and >= 1200Gi for Solar's cache
    assert base.storage.model_cache_gib * 2**30 >= 700e9 and base.storage.model_cache_gib >= 1200
    assert base.monitoring.enabled and base.monitoring.dcgm_exporter
    # p6-b200's fabric is EFA: the RDMA shared device plugin would advertise nothing there
    assert INSTANCE_TYPES[gpu.instance_type].fabric == Fabric.EFA
    assert base.cluster.rdma is None


@pytest.mark.parametrize("model", RECIPE_CONCURRENCY)
def test_disaggregated_recipes_move_kv_over_efa_not_infiniband(model: str) -> None:
    serving = load_stack(f"disagg-b200-{model}").serving
    assert serving.transfer == TransferBackend.NIXL_LIBFABRIC
    assert serving.rdma is None
    # UCX transport pins of the InfiniBand recipes would only mislead on EFA
    assert not [k for k in serving.env if k.startswith("UCX_")]


def test_p6_b200_price_stays_marked_unverified() -> None:
    assert INSTANCE_TYPES["p6-b200.48xlarge"].price_source.startswith("unverified")


def test_forecast_plans_the_start_up_budget_and_setup_covers_it() -> None:
    agg = load_stack("agg-b200-kexaone")
    assert agg.serving.startup_budget_minutes == 120
    assert model_load_seconds(agg) == 120 * 60
    # without a budget: ~530 GB read at 0.5 GiB/s + 240 s engine start
    unbudgeted = changed("agg-b200-kexaone", {"serving.startupBudgetMinutes": None})
    assert model_load_seconds(unbudgeted) == pytest.approx(530e9 / 2**30 / 0.5 + 240)
    variants = [load_stack(n) for n in RECIPES]
    campaign = base_campaign(load_stack(BASE), variants)
    assert [s.warning for s in campaign.slots] == [""] * len(RECIPES)
    assert {s.name: s.load_s for s in campaign.slots}["agg-b200-solar2"] == 40 * 60


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_role_tag_pairs_each_recipe_with_its_baseline(name: str) -> None:
    # reports compare optimized/baseline tok/s per GPU by model, using this tag
    want = "baseline" if name.startswith("baseline-") else "optimized"
    assert load_stack(name).tags.extra == {"recipe": want}
