"""A duration-bounded sweep step is simulated on the rows its slots can reach (workloads/sim/
plan_sim.py `first_rounds`): the dataset holds rows for a far faster engine than any (120 s at
2 ms a token: ~116 per slot, where a slot of a c305 step sends ~12), so only the first rounds
are hashed and replayed, and more only when a slot gets through them. The step is the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.config.loader import load_stack
from stacks.preflight.run import run_preflight
from workloads.sim import plan_sim
from workloads.sim.build import make
from workloads.sim.replay import Replayer


def test_only_single_turns_of_one_length_sharing_no_block_are_sent_round_robin():
    rows = [{"session_id": f"req-{i}", "input_length": 8, "output_length": 4,
             "hash_ids": [2 * i, 2 * i + 1]} for i in range(6)]
    assert plan_sim.round_robin_rows(rows)
    assert not plan_sim.round_robin_rows([*rows, {**rows[0], "session_id": "req-x"}])
    assert not plan_sim.round_robin_rows([*rows[:5], {**rows[5], "session_id": "req-0"}])
    assert not plan_sim.round_robin_rows([*rows[:5], {**rows[5], "output_length": 5}])


@pytest.mark.engine
@pytest.mark.parametrize("scale,concurrency", [("quick", 1), ("quick", 16), ("full", 64)])
def test_a_sweep_step_on_the_rows_its_slots_reach_is_the_whole_files_step(
        tmp_path: Path, monkeypatch, scale, concurrency):
    stack = load_stack("local-agg")
    sweep = stack.workloads.concurrency_sweep.model_copy(update={
        "concurrencies": [concurrency], "quick": {"durationS": 12, "osl": 128}})
    stack = stack.model_copy(update={"workloads": stack.workloads.model_copy(
        update={"concurrency_sweep": sweep})})
    report = run_preflight(stack)
    target, ex = make(stack, [m.kv_capacity_tokens for m in report.memory], tmp_path / "hf")
    replayer = Replayer()
    try:
        rounds: list[int | None] = []
        real = plan_sim.first_rounds

        def spy(*a):
            rounds.append(real(*a))
            return rounds[-1]
        monkeypatch.setattr(plan_sim, "first_rounds", spy)
        trimmed = plan_sim.simulate_plan(stack, scale, target, ex.template,
                                         only=["concurrency_sweep"], replayer=replayer)
        monkeypatch.setattr(plan_sim, "first_rounds", lambda *a: None)
        whole = plan_sim.simulate_plan(stack, scale, target, ex.template,
                                       only=["concurrency_sweep"], replayer=replayer)
    finally:
        replayer.close()
    assert rounds[0] is not None          # the step was replayed on its first rounds
    assert trimmed == whole
