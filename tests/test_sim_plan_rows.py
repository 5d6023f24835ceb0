"""A duration-bounded step is simulated on the conversations its duration can send
(workloads/sim/step_sim.py `simulate` with a Profiled provider): the dataset holds rows for a far
faster engine than any (120 s at 2 ms a token: ~116 per slot, where a slot of a c64 step sends
~30), so only the first conversations are laid out and replayed, more only when a slot gets
through them. The step is the same as replaying the whole file."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.config.loader import load_stack
from stacks.preflight.run import run_preflight
from workloads.sim import plan_sim, step_sim
from workloads.sim.build import make
from workloads.sim.replay import Replayer


@pytest.mark.engine
@pytest.mark.parametrize("scale,concurrency,workload", [
    ("quick", 1, "concurrency_sweep"), ("quick", 16, "concurrency_sweep"),
    ("full", 64, "concurrency_sweep"), ("quick", 5, "multi_turn")])
def test_a_step_on_the_conversations_it_sends_is_the_whole_files_step(
        tmp_path: Path, monkeypatch, scale, concurrency, workload):
    stack = load_stack("local-agg")
    sweep = stack.workloads.concurrency_sweep.model_copy(update={
        "concurrencies": [concurrency], "quick": {"durationS": 12, "osl": 128}})
    stack = stack.model_copy(update={"workloads": stack.workloads.model_copy(
        update={"concurrency_sweep": sweep})})
    report = run_preflight(stack)
    target, ex = make(stack, [m.kv_capacity_tokens for m in report.memory], tmp_path / "hf")
    replayer = Replayer()
    taken: list[int | None] = []
    real = step_sim.simulate

    def lazy(requests, *a, **kw):
        sim = real(requests, *a, **kw)
        taken.append((requests.layout.done, requests.layout.conversations))
        return sim

    def whole(requests, *a, **kw):   # every conversation of the file laid out and offered
        return real(requests(None), *a, **kw)
    try:
        monkeypatch.setattr(plan_sim, "simulate", lazy)
        trimmed = plan_sim.simulate_plan(stack, scale, target, ex.template, only=[workload],
                                         replayer=replayer)
        monkeypatch.setattr(plan_sim, "simulate", whole)
        every = plan_sim.simulate_plan(stack, scale, target, ex.template, only=[workload],
                                       replayer=replayer)
    finally:
        replayer.close()
    assert trimmed == every
    laid_out, in_file = taken[0]
    assert laid_out < in_file     # only the conversations the duration could send
