"""Cost and wall-time estimates against hand arithmetic (prices from
stacks/catalog/instances.py)."""

from __future__ import annotations

import datetime as dt

import pytest

from stacks.config.loader import load_stack, parse_config, read_stack_file, stack_file
from stacks.config.schema import StackConfig
from stacks.preflight.run import check_stack, run_preflight
from stacks.sizing.estimate import (
    cold_restarts,
    model_load_seconds,
    planned_hours,
    restart_seconds,
    workload_steps_seconds,
)

P4D, M7I_4XL, G6E_12XL = 21.957642, 0.8064, 10.49264  # $/h on-demand, us-east-1
EKS = 0.10
# EKS 1.35 (the shipped stacks) is in standard support that day (stacks.catalog.eks_versions):
# $0.10/h.
ON = dt.date(2026, 7, 1)
EFS_200_GIB = 200 * 0.30 / 730  # $0.30 per GB-month, 730 h per month -> $0.0822/h
GP3 = 0.08 / 730                # EBS gp3 $0.08 per GiB-month, per GiB-hour
NAT = 0.045 + 0.005             # NAT gateway-hour + its public IPv4 address-hour


def test_hourly_cost_lines_of_an_attached_variant() -> None:
    report = check_stack("agg-a100", on=ON)
    # 4 workers x TP4 = 16 GPUs = both p4d nodes (500 GiB root volumes each); plus the base's
    # CPU group (200 GiB root volumes), EKS fee, EFS and the NAT gateway with its address
    h = report.hourly
    assert h.lines == pytest.approx({
        "nodes p4d (2 x p4d.24xlarge)": 2 * P4D,          # 43.915284
        "root volumes p4d (2 x 500 GiB gp3)": 1000 * GP3,  # 0.109589
        "nodes cpu (2 x m7i.4xlarge)": 2 * M7I_4XL,       # 1.6128
        "root volumes cpu (2 x 200 GiB gp3)": 400 * GP3,   # 0.043836
        "EKS control plane": EKS,
        "EFS model cache storage": EFS_200_GIB,           # 0.082192
        "NAT gateway + its public IPv4 address": NAT,     # 0.05
    })
    assert h.total == pytest.approx(45.913701, abs=1e-6)
    # what the variant shares with its base vs the GPU nodes it occupies
    assert h.shared == set(h.lines) - {"nodes p4d (2 x p4d.24xlarge)",
                                       "root volumes p4d (2 x 500 GiB gp3)"}
    assert h.total - h.shared_total == pytest.approx(2 * P4D + 1000 * GP3)
    assert h.excluded == ["network transfer and NAT data processing"]
    assert h.unverified_note() == "unverified prices: m7i.4xlarge (catalogue 2025-01-01)"


def test_planned_hours_by_hand() -> None:
    stack = load_stack("agg-a100")
    steps = workload_steps_seconds(stack, "full")
    itl = 0.025  # cost.assumedItlMs 25 ms; every AIPerf step also pays a fixed 10 s
    # concurrency sweep: 7 steps x (warm-up 2 x 512 tokens x 25 ms = 25.6 s + 120 s + grace
    # 12.8 s + 10 s) = 7 x 168.4 = 1178.8 s
    assert steps["concurrency_sweep/c64"] == pytest.approx(3 * 512 * itl + 120 + 10)
    # multi-turn: 300 s + grace 5 turns x 256 x 25 ms = 32 s, + 10 s = 342 s, named by its
    # conversations in flight as the runner names it
    conv = stack.workloads.multi_turn.at_scale("full").conversations
    assert steps[f"multi_turn/conv{conv}"] == pytest.approx(342.0)
    # distributions: ceil(320 / 16) = 20 waves x mean OSL (64 + 2048) / 2 = 1056 x 25 ms
    # = 528 s, + 10 s = 538 s, for each of 3 distributions = 1614 s
    assert steps["sequence_distributions/zipf"] == pytest.approx(538.0)
    # prefix cache: ceil(160 / 16) = 10 waves x 512 x 25 ms = 128 s + 10 s = 138 s, x 5 shares
    assert steps["prefix_cache/share075"] == pytest.approx(138.0)
    assert "trace_replay/c16" not in steps  # disabled by default
    assert len(steps) == 7 + 1 + 3 + 5
    total_s = 1178.8 + 342 + 1614 + 690  # = 3824.8 s
    assert sum(steps.values()) == pytest.approx(total_s)
    # prefix cache restarts the workers before each of its 5 shares (coldRestart every-step);
    # on aws each restart is one model load: 61.0e9 B = 56.81 GiB at 0.5 GiB/s + 240 s
    load = 30.5e9 * 2 / 1024**3 / 0.5 + 240            # 353.62 s
    assert cold_restarts(stack) == 5 and restart_seconds(stack) == pytest.approx(load)
    # setupHours 0.25 + (3824.8 + 5 x 353.62) / 3600 = 1.803585 h; x $45.913701/h = $82.81
    report = check_stack("agg-a100", on=ON)
    assert report.planned_hours == pytest.approx(0.25 + (total_s + 5 * load) / 3600)
    assert report.planned_cost == pytest.approx(45.913701 * 1.803585, abs=1e-3)


def test_quick_scale_steps() -> None:
    steps = workload_steps_seconds(load_stack("agg-a100"), "quick")
    # quick sweep: concurrencies 1, 4, 16; warm-up 2 x 128 tokens x 25 ms (6.4 s) + 12 s +
    # grace 3.2 s + 10 s = 31.6 s
    assert {k: v for k, v in steps.items() if k.startswith("concurrency_sweep")} == \
        pytest.approx({f"concurrency_sweep/c{c}": 31.6 for c in (1, 4, 16)})


def test_variant_pays_only_the_base_nodes_it_fills() -> None:
    # prefill 2 x TP4 = 8 GPUs = 1 p4d; decode 1 x TP4 = 4 GPUs = 1 g6e.12xlarge
    lines = check_stack("disagg-l40s-decode", on=ON).hourly.lines
    assert lines["nodes p4d (1 x p4d.24xlarge)"] == pytest.approx(P4D)
    assert lines["nodes g6e (1 x g6e.12xlarge)"] == pytest.approx(G6E_12XL)


def test_variant_pays_all_of_an_extra_group_it_creates() -> None:
    raw = read_stack_file(stack_file("agg-l40s-fp8"))
    raw["cluster"] = {**raw["cluster"], "nodeGroups": [
        {"name": "l40s-extra", "instanceType": "g6e.12xlarge", "count": 3}]}
    raw["serving"]["workers"][0]["nodeGroup"] = "l40s-extra"
    report = run_preflight(parse_config("extra", raw), load_stack("base-a100"), on=ON)
    assert report.ok, report.problems
    # 2 x TP2 fills one node, but the variant created all three
    assert report.hourly.lines["nodes l40s-extra (3 x g6e.12xlarge)"] == \
        pytest.approx(3 * G6E_12XL)


def test_auto_mode_adds_its_management_fee() -> None:
    raw = read_stack_file(stack_file("agg-a100-standalone"))
    raw["cluster"]["computeMode"] = "auto"
    lines = run_preflight(parse_config("auto", raw), on=ON).hourly.lines
    assert lines["auto mode fee p4d"] == pytest.approx(2 * P4D * 0.12)
    assert lines["auto mode fee cpu"] == pytest.approx(2 * M7I_4XL * 0.12)


def test_price_override_replaces_the_list_price() -> None:
    raw = read_stack_file(stack_file("agg-a100-standalone"))
    raw["cost"] = {**raw["cost"], "priceOverrides": {"p4d.24xlarge": 12.5}}
    lines = run_preflight(parse_config("override", raw), on=ON).hourly.lines
    assert lines["nodes p4d (2 x p4d.24xlarge)"] == pytest.approx(25.0)


def _with_workloads(name: str, **workloads) -> StackConfig:
    raw = read_stack_file(stack_file(name))
    w = raw.setdefault("workloads", {})
    for key, value in workloads.items():
        w[key] = {**w.get(key, {}), **value} if isinstance(value, dict) else value
    return parse_config(name, raw)


def test_cold_restarts_follow_each_workloads_policy() -> None:
    # B200 recipe: 5 trace concurrencies, coldRestart first-step: one restart = one model load
    # of the startup budget (K-EXAONE 120 min), not five
    kexaone = load_stack("agg-b200-kexaone")
    assert kexaone.workloads.trace_replay.cold_restart == "first-step"
    assert cold_restarts(kexaone) == 1 and restart_seconds(kexaone) == 120 * 60
    steps_s = sum(workload_steps_seconds(kexaone, "full").values())
    assert planned_hours(kexaone) == pytest.approx(2.25 + (steps_s + 7200) / 3600)
    every = _with_workloads("agg-b200-kexaone", traceReplay={"coldRestart": "every-step",
                                                              "warmPass": True})
    # warm replays never restart: still 5 restarts for 10 steps
    assert len(workload_steps_seconds(every, "full")) == 10 and cold_restarts(every) == 5
    never = _with_workloads("agg-a100", prefixCache={"coldRestart": "never"})
    assert cold_restarts(never) == 0
    twice = _with_workloads("agg-a100", prefixCache={"coldRestart": "first-step"}, repeats=2)
    assert cold_restarts(twice) == 1   # the first step of the first repeat only
    assert cold_restarts(_with_workloads("agg-a100", repeats=2)) == 10
    # the local engine restarts its workers in about a second, not a model load
    local = load_stack("local-agg")
    assert cold_restarts(local) == 5 and restart_seconds(local) == 1.0
    assert model_load_seconds(local) > 1.0


def test_existing_vpc_leaves_the_nat_out_and_says_so() -> None:
    raw = read_stack_file(stack_file("agg-a100-standalone"))
    raw["cluster"]["vpc"] = {"id": "vpc-0123456789abcdef0",
                             "privateSubnetIds": ["subnet-0123456789abcdef0",
                                                  "subnet-0123456789abcdef1"]}
    h = run_preflight(parse_config("own-vpc", raw), on=ON).hourly
    assert "NAT gateway + its public IPv4 address" not in h.lines
    assert h.excluded[0].startswith("NAT gateway: the cluster uses an existing VPC")
    own = run_preflight(load_stack("agg-a100-standalone"), on=ON).hourly
    assert own.total - h.total == pytest.approx(NAT)


def test_local_estimate_adds_the_cpu_group_aws_would_need_once() -> None:
    local = check_stack("local-agg", on=ON).hourly
    assert local.lines["nodes cpu (2 x m7i.4xlarge, assumed: the CPU group an AWS cluster "
                       "needs)"] == pytest.approx(2 * M7I_4XL)
    raw = read_stack_file(stack_file("local-agg"))
    raw["cluster"]["nodeGroups"].append({"name": "sys", "instanceType": "m7i.2xlarge",
                                         "count": 1})
    with_cpu = run_preflight(parse_config("local-with-cpu", raw), on=ON).hourly
    assert not any("assumed" in k for k in with_cpu.lines)
    assert with_cpu.lines["nodes sys (1 x m7i.2xlarge)"] == pytest.approx(0.4032)


def test_an_unknown_instance_type_is_unknown_not_dropped() -> None:
    raw = read_stack_file(stack_file("agg-a100-standalone"))
    raw["cluster"]["nodeGroups"][0]["instanceType"] = "g7e.48xlarge"
    h = run_preflight(parse_config("new-type", raw), on=ON).hourly
    assert not h.complete and h.unknown == [
        "nodes p4d (2 x g7e.48xlarge): no price (not in the catalogue, no override, none "
        "recorded)"]
    # pre-flight refuses the stack anyway; a report of an old run prices it from its record
    assert any(p.field.endswith("instanceType") for p in run_preflight(
        parse_config("new-type", raw), on=ON).problems)


@pytest.mark.parametrize("name", ["agg-a100", "disagg-a100-kv", "agg-b200-motif3",
                                  "local-agg", "local-recipe-motif3"])
@pytest.mark.parametrize("scale", ["quick", "full"])
def test_one_estimator_names_and_times_every_step_as_the_runner_plans_it(name, scale) -> None:
    """`workloads plan` (the runner's steps, its progress ETA and hung-AIPerf limit) and
    `stacks plan` (the forecast) read the same estimate: the same step ids, the same seconds,
    repeats included."""
    from workloads.steps import plan

    stack = load_stack(name)
    for repeats in (1, 2):
        planned = {s.id: s.eta_s for s in plan(stack, scale, repeats=repeats)}
        assert planned == workload_steps_seconds(stack, scale, repeats)
    assert sum(workload_steps_seconds(stack, scale, 2).values()) == \
        pytest.approx(2 * sum(workload_steps_seconds(stack, scale, 1).values()))
