"""Cost and wall-time estimates against hand arithmetic (prices from stacks/catalog.py)."""

from __future__ import annotations

import pytest

from stacks.estimate import workload_steps_seconds
from stacks.loader import load_stack, parse_config, read_stack_file, stack_file
from stacks.preflight import check_stack, run_preflight

P4D, M7I_4XL, G6E_12XL = 21.957642, 0.8064, 10.49264  # $/h on-demand, us-east-1
EKS = 0.10
EFS_200_GIB = 200 * 0.30 / 730  # $0.30 per GB-month, 730 h per month -> $0.0822/h


def test_hourly_cost_lines_of_an_attached_variant() -> None:
    report = check_stack("agg-a100")
    # 4 workers x TP4 = 16 GPUs = both p4d nodes; plus the base's CPU group, EKS fee and EFS
    assert report.hourly.lines == pytest.approx({
        "nodes p4d (2 x p4d.24xlarge)": 2 * P4D,          # 43.915284
        "nodes cpu (2 x m7i.4xlarge)": 2 * M7I_4XL,       # 1.6128
        "EKS control plane": EKS,
        "EFS model cache storage": EFS_200_GIB,           # 0.082192
    })
    assert report.hourly.total == pytest.approx(45.710276, abs=1e-6)


def test_planned_hours_by_hand() -> None:
    stack = load_stack("agg-a100")
    steps = workload_steps_seconds(stack, "full")
    itl = 0.025  # cost.assumedItlMs 25 ms; every AIPerf step also pays a fixed 10 s
    # concurrency sweep: 7 steps x (120 s + grace 512 tokens x 25 ms = 12.8 s + 10 s) = 999.6 s
    assert steps["concurrency_sweep/c64"] == pytest.approx(120 + 512 * itl + 10)
    # multi-turn: 300 s + grace 5 turns x 256 x 25 ms = 32 s, + 10 s = 342 s
    assert steps["multi_turn/main"] == pytest.approx(342.0)
    # distributions: ceil(320 / 16) = 20 waves x mean OSL (64 + 2048) / 2 = 1056 x 25 ms
    # = 528 s, + 10 s = 538 s, for each of 3 distributions = 1614 s
    assert steps["sequence_distributions/zipf"] == pytest.approx(538.0)
    # prefix cache: ceil(160 / 16) = 10 waves x 512 x 25 ms = 128 s + 10 s = 138 s, x 5 shares
    assert steps["prefix_cache/share075"] == pytest.approx(138.0)
    assert "trace_replay/c16" not in steps  # disabled by default
    assert len(steps) == 7 + 1 + 3 + 5
    total_s = 999.6 + 342 + 1614 + 690  # = 3645.6 s
    assert sum(steps.values()) == pytest.approx(total_s)
    # setupHours 0.25 + 3645.6 / 3600 = 1.262667 h; x $45.710276/h = $57.72
    report = check_stack("agg-a100")
    assert report.planned_hours == pytest.approx(0.25 + total_s / 3600)
    assert report.planned_cost == pytest.approx(57.717, abs=1e-3)


def test_quick_scale_steps() -> None:
    steps = workload_steps_seconds(load_stack("agg-a100"), "quick")
    # quick sweep: concurrencies 1, 4, 16; 12 s + 128 tokens x 25 ms (3.2 s) + 10 s = 25.2 s
    assert {k: v for k, v in steps.items() if k.startswith("concurrency_sweep")} == \
        pytest.approx({f"concurrency_sweep/c{c}": 25.2 for c in (1, 4, 16)})


def test_variant_pays_only_the_base_nodes_it_fills() -> None:
    # prefill 2 x TP4 = 8 GPUs = 1 p4d; decode 1 x TP4 = 4 GPUs = 1 g6e.12xlarge
    lines = check_stack("disagg-l40s-decode").hourly.lines
    assert lines["nodes p4d (1 x p4d.24xlarge)"] == pytest.approx(P4D)
    assert lines["nodes g6e (1 x g6e.12xlarge)"] == pytest.approx(G6E_12XL)


def test_variant_pays_all_of_an_extra_group_it_creates() -> None:
    raw = read_stack_file(stack_file("agg-l40s-fp8"))
    raw["cluster"] = {**raw["cluster"], "nodeGroups": [
        {"name": "l40s-extra", "instanceType": "g6e.12xlarge", "count": 3}]}
    raw["serving"]["workers"][0]["nodeGroup"] = "l40s-extra"
    report = run_preflight(parse_config("extra", raw), load_stack("base-a100"))
    assert report.ok, report.problems
    # 2 x TP2 fills one node, but the variant created all three
    assert report.hourly.lines["nodes l40s-extra (3 x g6e.12xlarge)"] == \
        pytest.approx(3 * G6E_12XL)


def test_auto_mode_adds_its_management_fee() -> None:
    raw = read_stack_file(stack_file("agg-a100-standalone"))
    raw["cluster"]["computeMode"] = "auto"
    lines = run_preflight(parse_config("auto", raw)).hourly.lines
    assert lines["auto mode fee p4d"] == pytest.approx(2 * P4D * 0.12)
    assert lines["auto mode fee cpu"] == pytest.approx(2 * M7I_4XL * 0.12)


def test_price_override_replaces_the_list_price() -> None:
    raw = read_stack_file(stack_file("agg-a100-standalone"))
    raw["cost"] = {**raw["cost"], "priceOverrides": {"p4d.24xlarge": 12.5}}
    lines = run_preflight(parse_config("override", raw)).hourly.lines
    assert lines["nodes p4d (2 x p4d.24xlarge)"] == pytest.approx(25.0)
