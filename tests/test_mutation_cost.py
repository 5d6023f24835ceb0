"""Cost estimate and campaign forecast details that move a dollar figure (stacks.sizing.estimate,
stacks.plan.forecast): which price wins, which date and EKS version price the control plane, that
a scale reaches every workload, fees and shared lines, what a stack that serves nothing
costs in time. Hand arithmetic in the comments. (`make mutate`: group `cost`.)"""

from __future__ import annotations

import datetime as dt

import pytest
from stack_variants import edit, variant_config

from stacks.catalog.service_prices import AUTO_MODE_FEE
from stacks.config.loader import load_stack, parse_config
from stacks.config.schema import ComputeMode
from stacks.config.workload_config import TraceReplay
from stacks.plan.forecast import gpus_loaded, plan_campaigns, standalone_campaign
from stacks.sizing.estimate import (
    HourlyCost,
    add_storage_and_network,
    checkpoint_read_seconds,
    cluster_hourly_cost,
    cold_restart_seconds,
    cold_restarts,
    eks_fee_line,
    estimated_load_seconds,
    hourly_cost,
    instance_price,
    model_load_seconds,
    node_cost_lines,
    nodes_occupied,
    planned_hours,
    repeat_load_seconds,
    replay_seconds,
    restart_seconds,
    workload_steps_seconds,
)

P4D, M7I_4XL = 21.957642, 0.8064
# EKS 1.35 (the shipped stacks') leaves standard support on 2027-03-27: extended on this day
EXTENDED_DAY = dt.date(2027, 6, 1)
EXTENDED_LABEL = "EKS control plane (EKS 1.35 in extended support on 2027-06-01)"
# prefix cache at full scale: 5 shares, restart before each; quick here: 2 shares
QUICK_SHARES = {"prefixCache": {"quick": {"shares": [0.0, 0.5], "requests": 32, "osl": 64}}}


def _stack(source: str, name: str | None = None, **changes):
    config = variant_config(source, lambda c: None)
    for dotted, value in changes.items():
        edit(dotted.replace("__", "."), value)(config)
    return parse_config(name or source, config)


# --- prices ----------------------------------------------------------------------------------

def test_which_price_wins():
    plain = load_stack("agg-a100-standalone")
    assert instance_price("p4d.24xlarge", plain) == P4D
    assert instance_price("p4d.24xlarge", plain, {"p4d.24xlarge": 20.0}) == 20.0  # recorded
    assert instance_price("p4d.24xlarge", plain, {"g6e.12xlarge": 9.0}) == P4D
    assert instance_price("x9.big", plain, {}) is None
    override = _stack("agg-a100-standalone", cost__priceOverrides={"p4d.24xlarge": 12.5})
    assert instance_price("p4d.24xlarge", override, {"p4d.24xlarge": 20.0}) == 12.5


def test_recorded_prices_reach_every_node_line():
    stack = load_stack("agg-a100-standalone")
    recorded = {"p4d.24xlarge": 20.0, "m7i.4xlarge": 1.0}
    h = cluster_hourly_cost(stack, stack.cluster, 200, recorded=recorded)
    assert h.lines["nodes p4d (2 x p4d.24xlarge)"] == 40.0
    assert h.lines["nodes cpu (2 x m7i.4xlarge)"] == 2.0
    direct = hourly_cost(stack, stack.cluster.node_groups, ComputeMode.NODEGROUPS, 200,
                         recorded=recorded)
    assert direct.lines["nodes p4d (2 x p4d.24xlarge)"] == 40.0
    # a local stack's assumed CPU group is priced from the record too
    local = load_stack("local-agg")
    lh = hourly_cost(local, local.cluster.node_groups, ComputeMode.NODEGROUPS, 200,
                     recorded={"m7i.4xlarge": 1.0})
    assert lh.lines["nodes cpu (2 x m7i.4xlarge, assumed: the CPU group an AWS cluster "
                    "needs)"] == 2.0


def test_an_override_verifies_its_price():
    stack = load_stack("agg-a100-standalone")
    assert cluster_hourly_cost(stack, stack.cluster, 200).unverified_note() == \
        "unverified prices: m7i.4xlarge (catalogue 2025-01-01)"
    own = _stack("agg-a100-standalone", cost__priceOverrides={"m7i.4xlarge": 0.9})
    assert cluster_hourly_cost(own, own.cluster, 200).unverified_note() == ""


# --- the control plane: which date, which version --------------------------------------------

def test_eks_fee_line_by_date_and_version():
    assert eks_fee_line("1.35", None) == ("EKS control plane", 0.10)
    assert eks_fee_line("1.35", dt.date(2026, 12, 1)) == ("EKS control plane", 0.10)
    assert eks_fee_line("1.35", EXTENDED_DAY) == (EXTENDED_LABEL, 0.60)
    assert eks_fee_line("1.32", dt.date(2026, 12, 1)) == (
        "EKS control plane (EKS 1.32 in extended support on 2026-12-01)", 0.60)


def test_the_estimate_date_and_the_clusters_version_price_the_control_plane():
    stack = load_stack("agg-a100-standalone")
    assert cluster_hourly_cost(stack, stack.cluster, 200, on=EXTENDED_DAY).lines[
        EXTENDED_LABEL] == 0.60
    direct = hourly_cost(stack, stack.cluster.node_groups, ComputeMode.NODEGROUPS, 200,
                         on=EXTENDED_DAY)
    assert direct.lines[EXTENDED_LABEL] == 0.60 and EXTENDED_LABEL in direct.shared
    # a variant runs on its base's cluster: the base's version prices it, not its own default
    variant, base = load_stack("agg-a100"), load_stack("base-a100")
    old_base = base.cluster.model_copy(update={"eks_version": "1.32"})
    h = cluster_hourly_cost(variant, old_base, 200, on=dt.date(2026, 12, 1))
    assert h.lines["EKS control plane (EKS 1.32 in extended support on 2026-12-01)"] == 0.60
    own = hourly_cost(variant, old_base.node_groups, ComputeMode.NODEGROUPS, 200,
                      on=dt.date(2026, 12, 1), eks_version="1.32")
    assert "EKS control plane (EKS 1.32 in extended support on 2026-12-01)" in own.lines
    # without a version the stack's own (1.35) prices it
    assert "EKS control plane" in hourly_cost(variant, old_base.node_groups,
                                              ComputeMode.NODEGROUPS, 200,
                                              on=dt.date(2026, 12, 1)).lines


# --- lines, fees, shares ---------------------------------------------------------------------

def test_storage_and_network_over_several_hours():
    cost = HourlyCost()
    add_storage_and_network(cost, 200, 1, hours=2.0)
    assert cost.lines == pytest.approx({"EFS model cache storage": 2 * 200 * 0.30 / 730,
                                        "NAT gateway + its public IPv4 address": 2 * 0.05})
    none = HourlyCost()
    add_storage_and_network(none, 200, 0)
    assert none.excluded == ["NAT gateway: the cluster uses an existing VPC (cluster.vpc.id), "
                             "whose NAT is not this stack's",
                             "network transfer and NAT data processing"]
    stack = load_stack("agg-a100-standalone")
    assert "NAT gateway + its public IPv4 address" in hourly_cost(
        stack, stack.cluster.node_groups, ComputeMode.NODEGROUPS, 200).lines


def test_auto_mode_fees_their_price_key_and_scope():
    auto = _stack("agg-a100-standalone", cluster__computeMode="auto")
    h = cluster_hourly_cost(auto, auto.cluster, 200)
    assert AUTO_MODE_FEE.key in h.prices
    assert h.excluded == ["network transfer and NAT data processing",
                          "nodes Auto Mode's built-in system / general-purpose NodePools "
                          "launch for pods outside the stack's pools"]
    lines = node_cost_lines(auto, auto.cluster.node_groups, ComputeMode.AUTO)
    assert lines["auto mode fee p4d"] == pytest.approx(2 * P4D * 0.12)
    local = _stack("local-agg", cluster__computeMode="auto")
    lh = cluster_hourly_cost(local, local.cluster, 200)
    assert lh.lines["auto mode fee cpu"] == pytest.approx(2 * M7I_4XL * 0.12)


def test_every_cpu_group_is_a_shared_line():
    groups = [{"name": "p4d", "instanceType": "p4d.24xlarge", "count": 2,
               "availabilityZone": "us-east-1a", "diskGib": 500},
              {"name": "cpu", "instanceType": "m7i.4xlarge", "count": 2},
              {"name": "sys", "instanceType": "m7i.2xlarge", "count": 1}]
    stack = _stack("agg-a100-standalone", cluster__nodeGroups=groups)
    h = cluster_hourly_cost(stack, stack.cluster, 200)
    assert {"nodes cpu (2 x m7i.4xlarge)", "root volumes cpu (2 x 200 GiB gp3)",
            "nodes sys (1 x m7i.2xlarge)", "root volumes sys (1 x 200 GiB gp3)"} <= h.shared
    assert "nodes p4d (2 x p4d.24xlarge)" not in h.shared


def test_nodes_a_stack_occupies():
    base, variant = load_stack("base-a100"), load_stack("agg-a100")
    p4d, g6e, cpu = base.cluster.node_groups
    assert nodes_occupied(variant, p4d) == 2       # 4 x TP4 = 16 GPUs = 2 nodes of 8
    assert nodes_occupied(variant, g6e) == 0       # no worker there
    assert nodes_occupied(variant, cpu) == 0       # a CPU group holds no GPU worker
    idle = _stack("agg-a100", serving=None)
    assert nodes_occupied(idle, p4d) == 2          # serving nothing: the whole group
    lone = load_stack("agg-a100-standalone")
    assert nodes_occupied(lone, g6e) == 1          # not attached: all of any group


# --- time: scale, restarts, stacks that serve nothing ------------------------------------------

def test_the_scale_reaches_every_restart_and_step():
    stack = _stack("agg-a100", workloads=QUICK_SHARES)
    assert (cold_restarts(stack), cold_restarts(stack, "full"), cold_restarts(stack, "quick")) \
        == (5, 5, 2)
    load = model_load_seconds(stack)
    assert cold_restart_seconds(stack) == pytest.approx(5 * load)
    assert cold_restart_seconds(stack, "quick") == pytest.approx(2 * load)
    steps = sum(workload_steps_seconds(stack, "full").values())
    assert planned_hours(stack) == pytest.approx(0.25 + (steps + 5 * load) / 3600)
    quick_steps = sum(workload_steps_seconds(stack, "quick").values())
    assert planned_hours(stack, "quick") == pytest.approx(0.25 + (quick_steps + 2 * load) / 3600)


def test_restarts_of_every_workload_add_up():
    both = _stack("agg-a100", workloads={"traceReplay": {"enabled": True,
                                                         "coldRestart": "every-step",
                                                         "concurrencies": [8, 16]}})
    assert cold_restarts(both) == 5 + 2
    trace_quick = _stack("agg-a100", workloads={"prefixCache": {"enabled": False},
                                                "traceReplay": {"enabled": True,
                                                                "coldRestart": "every-step",
                                                                "concurrencies": [8, 16],
                                                                "quick": {"concurrencies": [4]}}})
    assert (cold_restarts(trace_quick), cold_restarts(trace_quick, "quick")) == (2, 1)
    steps = workload_steps_seconds(trace_quick, "full")
    assert sorted(steps) == ["concurrency_sweep/c1", "concurrency_sweep/c16",
                             "concurrency_sweep/c2", "concurrency_sweep/c32",
                             "concurrency_sweep/c4", "concurrency_sweep/c64",
                             "concurrency_sweep/c8", "multi_turn/conv8",
                             "sequence_distributions/lognormal",
                             "sequence_distributions/uniform", "sequence_distributions/zipf",
                             "trace_replay/c16", "trace_replay/c8"]


def test_repeats_multiply_every_step():
    once = workload_steps_seconds(load_stack("agg-a100"), "full")
    twice = workload_steps_seconds(_stack("agg-a100", workloads={"repeats": 2}), "full")
    # one step per repeat, named as the runner names it, each as long as the single one
    assert twice == pytest.approx({f"{k}/r{r}": v for k, v in once.items() for r in (1, 2)})


def test_a_stack_that_serves_nothing_takes_no_load_time():
    base = load_stack("base-a100")
    assert (estimated_load_seconds(base), model_load_seconds(base), restart_seconds(base)) == \
        (0.0, 0.0, 0.0)
    assert (checkpoint_read_seconds(base), repeat_load_seconds(base)) == (0.0, 0.0)
    assert gpus_loaded(base) == 0
    run = standalone_campaign(base).runs[0]
    assert (run.steps_s, run.restarts, run.gpus_loaded, run.model_load_s) == ({}, 0, 0, 0.0)
    assert run.startup_s == 3600.0 and run.warning == ""


# --- forecast --------------------------------------------------------------------------------

def test_plan_campaigns_keeps_going_after_a_standalone():
    lone, variant = load_stack("agg-a100-standalone"), load_stack("agg-a100")
    stack = _stack("agg-a100-standalone", "quick-one", workloads=QUICK_SHARES)
    campaigns = plan_campaigns([lone, variant, stack], {"base-a100": load_stack("base-a100")},
                               [])
    assert [(c.name, c.kind) for c in campaigns] == [("agg-a100-standalone", "standalone"),
                                                      ("base-a100", "base"),
                                                      ("quick-one", "standalone")]
    quick = plan_campaigns([stack], {}, [], "quick")[0]
    assert quick.runs[0].restarts == 2
    full = plan_campaigns([stack], {}, [])[0]
    assert full.runs[0].restarts == 5


def test_a_standalone_campaign_flags_a_setup_shorter_than_the_load():
    # the forecast plans for the whole startup budget: 61 min = 3660 s > setupHours 1 h
    short = _stack("agg-a100-standalone", serving__startupBudgetMinutes=61,
                   cost__setupHours=1.0)
    run = standalone_campaign(short).runs[0]
    assert run.warning == ("cost.setupHours 1 h is shorter than the assumed model load 61 min: "
                           "raise it")
    assert (run.startup_s, run.model_load_s) == (0.0, 3660.0)
    # a budget exactly as long as the load (30 min = 0.5 h) leaves no start-up and no warning
    exact = _stack("agg-a100-standalone", serving__startupBudgetMinutes=30,
                   cost__setupHours=0.5)
    run = standalone_campaign(exact).runs[0]
    assert (run.warning, run.startup_s, run.model_load_s) == ("", 0.0, 1800.0)


def test_the_forecast_date_prices_every_campaigns_control_plane():
    lone, variant = load_stack("agg-a100-standalone"), load_stack("agg-a100")
    assert EXTENDED_LABEL in standalone_campaign(lone, on=EXTENDED_DAY).hourly.lines
    alone, based = plan_campaigns([lone, variant], {"base-a100": load_stack("base-a100")}, [],
                                  on=EXTENDED_DAY)
    assert alone.hourly.lines[EXTENDED_LABEL] == 0.60
    assert based.shared.lines[EXTENDED_LABEL] == 0.60
    # without a date the standard rate
    assert standalone_campaign(lone).hourly.lines["EKS control plane"] == 0.10


def test_a_variant_is_refused_as_a_standalone_campaign():
    with pytest.raises(ValueError) as err:
        standalone_campaign(load_stack("agg-a100"))
    assert str(err.value) == ("agg-a100 is attached to base-a100: plan it with its base "
                              "(base_campaign)")


# A user trace of 3 rows: arrivals at 1 s, 2 s and 5 s of trace time, outputs 10, 20, 60 tokens.
TRACE = "".join(f'{{"timestamp": {t}, "input_length": 100, "output_length": {o}, '
                f'"hash_ids": [{i}]}}\n' for i, (t, o) in enumerate(((1000, 10), (2000, 20),
                                                                      (5000, 60))))


def test_a_replayed_trace_step_lasts_its_span_or_its_capped_decode(tmp_path):
    trace = tmp_path / "mine.jsonl"
    trace.write_text(TRACE)
    stack = _stack("agg-a100", workloads={
        "traceReplay": {"enabled": True, "source": "file", "file": str(trace), "speedUp": 2,
                        "concurrencies": [1, 4], "warmPass": True}})
    # span (5000 - 1000) ms / 1000 / speed-up 2 = 2.0 s; mean output 30 tokens at the assumed
    # 25 ms ITL = 0.75 s per request, and the last request's decode (0.75 s) comes on top.
    # cap 1: 3 requests one after another, 3 x 0.75 = 2.25 s > the span -> 2.25 + 0.75 = 3.0
    # cap 4: all in flight at once -> the span, 2.0 + 0.75 = 2.75; +10 s AIPerf per step
    steps = workload_steps_seconds(stack, "full")
    assert {k: v for k, v in steps.items() if k.startswith("trace_replay/")} == pytest.approx(
        {"trace_replay/c1": 13.0, "trace_replay/c1-warm": 13.0,
         "trace_replay/c4": 12.75, "trace_replay/c4-warm": 12.75})


def test_a_trace_that_cannot_be_read_or_an_empty_window_takes_no_time(tmp_path):
    # pre-flight refuses both; the estimate must not invent a duration meanwhile
    missing = TraceReplay(enabled=True, source="file", file=str(tmp_path / "absent.jsonl"))
    assert replay_seconds(missing, 4, 25.0) == 0.0
    trace = tmp_path / "mine.jsonl"
    trace.write_text(TRACE)
    past_the_end = TraceReplay(enabled=True, source="file", file=str(trace),
                               window_start_s=60.0)
    assert replay_seconds(past_the_end, 4, 25.0) == 0.0
