"""The plan: ids, order, repeats, scales, seeds and dataset sizes of a stack's steps."""

from __future__ import annotations

import pytest

from stacks.config.loader import StackError, load_stack, parse_config
from workloads import datasets as ds
from workloads.step_exec import dataset_path, write_dataset
from workloads.steps import FASTEST_REQUEST_S, FASTEST_TOKEN_S, plan, rows_for_duration


@pytest.fixture(scope="module")
def local_agg():
    return load_stack("local-agg")


def test_quick_plan_has_every_enabled_workload_in_order(local_agg):
    ids = [s.id for s in plan(local_agg, "quick")]
    assert ids == ["concurrency_sweep/c1", "concurrency_sweep/c4", "concurrency_sweep/c16",
                   "multi_turn/conv5", "sequence_distributions/uniform",
                   "sequence_distributions/zipf", "sequence_distributions/lognormal",
                   "prefix_cache/share000", "prefix_cache/share050", "prefix_cache/share100"]


def test_full_plan_uses_the_plans_values(local_agg):
    steps = {s.id: s for s in plan(local_agg, "full")}
    assert [s.split("/")[1] for s in steps if s.startswith("concurrency_sweep")] == [
        "c1", "c2", "c4", "c8", "c16", "c32", "c64"]
    c64 = steps["concurrency_sweep/c64"]
    assert (c64.duration_s, c64.params["isl"], c64.params["osl"]) == (120, 1024, 512)
    mt = steps["multi_turn/conv8"]
    assert (mt.concurrency, mt.params["turns"], mt.duration_s) == (8, 5, 300)
    assert (mt.params["turn_delay_ms"], mt.params["turn_delay_sigma"]) == (2000, 0.6)
    assert steps["prefix_cache/share050"].params["isl"] == 2048


def test_repeats_suffix_every_step_and_give_fresh_seeds(local_agg):
    steps = plan(local_agg, "quick", only=["prefix_cache"], repeats=2)
    assert [s.id for s in steps][:2] == ["prefix_cache/share000/r1", "prefix_cache/share050/r1"]
    assert steps[-1].id == "prefix_cache/share100/r2"
    seeds = [s.seed for s in steps]
    assert len(seeds) == len(set(seeds))
    r1 = {h for r in steps[0].rows() for h in r["hash_ids"]}
    r2 = {h for r in steps[3].rows() for h in r["hash_ids"]}
    assert steps[3].id == "prefix_cache/share000/r2" and r1.isdisjoint(r2)


def test_prefix_steps_are_cold_and_exact(local_agg):
    for s in plan(local_agg, "quick", only=["prefix_cache"]):
        rows = s.rows()
        assert s.cold and len(rows) == s.params["rows"]
        assert ds.shared_prefix_fraction(rows) == s.params["share"]


def test_duration_steps_have_rows_enough_for_their_duration(local_agg):
    for s in plan(local_agg, "full", only=["concurrency_sweep", "multi_turn"]):
        turns = s.params.get("turns", 1)
        per_request = s.params["osl"] * FASTEST_TOKEN_S + FASTEST_REQUEST_S
        assert s.params["rows"] / turns >= s.concurrency * s.duration_s / (per_request * turns)
        assert len(s.rows()) == s.params["rows"]


def test_rows_for_duration_grows_with_load():
    assert rows_for_duration(64, 120, 512) > rows_for_duration(8, 120, 512)
    assert rows_for_duration(8, 120, 128) > rows_for_duration(8, 120, 512)


def test_same_stack_same_datasets(local_agg):
    a = [ds.jsonl_bytes(s.rows()) for s in plan(local_agg, "quick")]
    b = [ds.jsonl_bytes(s.rows()) for s in plan(load_stack("local-agg"), "quick")]
    assert a == b


def test_only_rejects_unknown_and_disabled_workloads(local_agg):
    with pytest.raises(ValueError, match="unknown workload"):
        plan(local_agg, "quick", only=["concurrency"])
    with pytest.raises(ValueError, match="disabled"):
        plan(local_agg, "quick", only=["trace_replay"])


def test_trace_replay_when_enabled(local_agg):
    raw = local_agg.model_dump(by_alias=True, exclude={"name"})
    raw["workloads"]["traceReplay"]["enabled"] = True
    stack = parse_config("x", raw)
    steps = plan(stack, "quick", only=["trace_replay"])
    assert [s.id for s in steps] == ["trace_replay/c16"]
    assert abs(ds.block_reuse(steps[0].rows()) - 0.7) < 0.06


def _trace_stack(local_agg, **trace):
    raw = local_agg.model_dump(by_alias=True, exclude={"name"})
    raw["workloads"]["traceReplay"] |= {"enabled": True, "concurrencies": [4, 8, 16], **trace}
    return parse_config("x", raw)


def test_first_step_restarts_only_before_the_first_trace_step(local_agg):
    stack = _trace_stack(local_agg, warmPass=True)
    assert stack.workloads.trace_replay.cold_restart == "first-step"   # the trace default
    steps = plan(stack, "quick", only=["trace_replay"], repeats=2)
    assert [s.id for s in steps if s.cold] == ["trace_replay/c4/r1"]
    # every first pass still starts on prompts no earlier step sent: its cache is cold
    assert [s.params["cache"] for s in steps[:6]] == ["cold", "warm"] * 3
    every = plan(_trace_stack(local_agg, warmPass=True, coldRestart="every-step"), "quick",
                 only=["trace_replay"])
    assert [s.id for s in every if s.cold] == [f"trace_replay/c{c}" for c in (4, 8, 16)]
    never = plan(_trace_stack(local_agg, coldRestart="never"), "quick", only=["trace_replay"])
    assert not any(s.cold for s in never)


def test_prefix_cache_restarts_before_every_share_by_default(local_agg):
    steps = plan(local_agg, "quick", only=["prefix_cache"])
    assert local_agg.workloads.prefix_cache.cold_restart == "every-step"
    assert len(steps) == 3 and all(s.cold and s.params["cache"] == "cold" for s in steps)


def test_cold_restart_policy_is_typed(local_agg):
    raw = local_agg.model_dump(by_alias=True, exclude={"name"})
    raw["workloads"]["prefixCache"]["coldRestart"] = "sometimes"
    with pytest.raises(StackError, match="coldRestart"):
        parse_config("x", raw)


def test_a_warm_replay_sends_its_cold_steps_dataset_file(local_agg, tmp_path):
    """AIPerf reuses the prompts it built for the cold pass only for the same file name, bytes
    and seed (aiperf/dataset/mmap_cache.py): the warm replay names its cold step's file."""
    steps = {s.id: s for s in plan(_trace_stack(local_agg, warmPass=True), "quick",
                                   only=["trace_replay"], repeats=2)}
    warm, cold = steps["trace_replay/c8-warm/r2"], steps["trace_replay/c8/r2"]
    assert dataset_path(tmp_path, warm) == dataset_path(tmp_path, cold) == \
        tmp_path / "datasets" / "trace_replay" / "c8" / "r2.jsonl"
    assert warm.seed == cold.seed
    assert dataset_path(tmp_path, steps["trace_replay/c8-warm/r1"]) != \
        dataset_path(tmp_path, warm)
    # every other step keeps its own file
    others = plan(local_agg, "quick")
    assert len({dataset_path(tmp_path, s) for s in others}) == len(others)
    rows = cold.rows()
    first = write_dataset(rows, dataset_path(tmp_path, cold))
    assert write_dataset(rows, dataset_path(tmp_path, warm)).sha256 == first.sha256
    with pytest.raises(RuntimeError, match="other rows than this step sends"):
        write_dataset(rows[1:], dataset_path(tmp_path, warm))
