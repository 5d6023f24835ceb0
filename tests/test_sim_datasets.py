"""A step's rows, their sha256 and their index are made once for every candidate that
simulates the same step (workloads/sim/plan_sim.py `Datasets`: `stacks explore` probes the same
concurrencies of many candidates): what is kept equals what the step makes anew, anything that
decides the rows decides the key, a replayed trace (whose rows the engine's blocks decide) is
never kept, the row budget holds, and one index serves every engine alike."""

from __future__ import annotations

import hashlib

from stacks.config.loader import load_stack
from stacks.explore.search import at_concurrency
from workloads import step_exec
from workloads.datasets import jsonl_bytes
from workloads.sim.plan_sim import Datasets
from workloads.sim.prompt_layout import BlockHasher, ChatTemplate, RowIndex, StepLayout
from workloads.steps import plan


def _probe(stack, c=16, scale="quick"):
    """The explore's probe: the candidate's stack with its sweep cut to one concurrency, that
    step, and the scale."""
    stack = at_concurrency(stack, c)
    return stack, plan(stack, scale, only=["concurrency_sweep"])[0], scale


def test_the_kept_rows_are_the_steps_own_and_a_second_candidate_gets_them():
    memo = Datasets()
    kept = memo.get(*_probe(load_stack("agg-a100")))
    fresh, _ = step_exec.step_dataset(_probe(load_stack("agg-a100"))[1])
    assert kept.rows == fresh and kept.sha256 == hashlib.sha256(jsonl_bytes(fresh)).hexdigest()
    assert kept.index == RowIndex.of(fresh)
    assert memo.get(*_probe(load_stack("disagg-a100"))) is kept   # the same sweep settings


def test_what_decides_the_rows_decides_the_key():
    base = load_stack("agg-a100")
    memo = Datasets()
    kept = memo.get(*_probe(base))
    w = base.workloads
    reseeded = base.model_copy(update={"workloads": w.model_copy(update={"seed": w.seed + 1})})
    longer = base.model_copy(update={"workloads": w.model_copy(update={
        "concurrency_sweep": w.concurrency_sweep.model_copy(update={
            "quick": {**w.concurrency_sweep.quick, "isl": 2048}})})})
    for stack in (reseeded, longer):
        got = memo.get(*_probe(stack))
        assert got is not kept and got.sha256 != kept.sha256
        assert got.rows == step_exec.step_dataset(_probe(stack)[1])[0]
    assert memo.get(*_probe(base, 4)).sha256 != kept.sha256          # another concurrency


def test_a_replayed_trace_is_never_kept():
    stack = load_stack("local-recipe-motif3")
    step = plan(stack, "quick", only=["trace_replay"])[0]
    assert step.finish is not None and Datasets.key(stack, step, "quick") is None
    memo = Datasets()
    first = memo.get(stack, step, "quick")
    assert memo.get(stack, step, "quick") is not first and not memo.kept


def test_a_quick_and_a_full_step_are_apart_and_an_unknown_scale_is_never_kept():
    """The same step id and seed at both scales: other durations, other rows."""
    memo = Datasets()
    quick = memo.get(*_probe(load_stack("agg-a100"), 64, "quick"))
    full = memo.get(*_probe(load_stack("agg-a100"), 64, "full"))
    assert len(full.rows) > len(quick.rows)
    assert full.rows == step_exec.step_dataset(_probe(load_stack("agg-a100"), 64, "full")[1])[0]
    stack, step, _ = _probe(load_stack("agg-a100"), 4)
    assert Datasets.key(stack, step, None) is None
    assert memo.get(stack, step, None) is not memo.get(stack, step, None)


def test_the_row_budget_drops_the_least_recently_used():
    probes = {c: _probe(load_stack("agg-a100"), c) for c in (1, 4, 16)}
    sizes = {c: len(step_exec.step_dataset(step)[0]) for c, (_, step, _) in probes.items()}
    memo = Datasets(budget=sizes[4] + sizes[16])
    memo.get(*probes[4])
    memo.get(*probes[1])
    kept_4 = memo.get(*probes[4])                      # 4 is now the most recently used
    memo.get(*probes[16])                              # over budget: 1 goes, then 4 fits
    assert [Datasets.key(*probes[c]) for c in (4, 16)] == list(memo.kept)
    assert memo.get(*probes[4]) is kept_4
    assert sum(len(d.rows) for d in memo.kept.values()) <= memo.budget


def test_one_index_serves_every_engine_alike():
    """Layouts on one kept index (candidates with other KV blocks, one after another) lay out
    the requests a layout of their own would."""
    kept = Datasets().get(*_probe(load_stack("agg-a100"), 4))
    template = ChatTemplate(user_open=4, close=2, assistant_open=3)
    for block in (16, 64, 16):
        shared = StepLayout(kept.rows, 512, "scope", template, BlockHasher(block),
                            index=kept.index)
        own = StepLayout(kept.rows, 512, "scope", template, BlockHasher(block))
        assert shared.take(12) == own.take(12)
