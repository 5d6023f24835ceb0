"""Pre-flight checks of workload values that would only fail later, mid-run (pure).

Checked at both scales (full, and quick = full + its overrides), each naming the field that
sets the value (`workloads.<workload>[.quick].<field>`):
- every planned request fits the smallest worker's maxModelLen;
- prefix-cache shares are whole blocks: the dataset shares `share x isl / blockSize` leading
  blocks (workloads.datasets.prefix_blocks refuses anything else when the step is built);
- step ids are unique: `c<concurrency>` (sweep, trace), `share<round(100 x share)>`, the
  distribution names (workloads.steps); a repeat would overwrite the other step's results.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Any, cast

from pydantic.alias_generators import to_camel

from stacks.config.errors import Problem
from stacks.config.schema import StackConfig
from stacks.config.stack_file import PROJECT
from stacks.config.workload_config import WORKLOAD_NAMES, MultiTurn, Scale, Workload

P = f"{PROJECT}:"
SCALES: tuple[tuple[Scale, str], ...] = (("full", ""), ("quick", ".quick"))

# The longest context (tokens) one request of a workload needs, and the field that sets it.
_LONGEST_REQUEST: dict[str, tuple[str, Callable[[Any], int]]] = {
    "concurrency_sweep": ("isl", lambda x: x.isl + x.osl),
    "multi_turn": ("turns", lambda x: x.turns * (x.isl + x.osl)),  # history grows per turn
    "sequence_distributions": ("islMax", lambda x: x.isl_max + x.osl_max),
    "prefix_cache": ("isl", lambda x: x.isl + x.osl),
    # a replayed trace brings its own lengths: rows over the limit are dropped and counted
    # (stacks.preflight.trace_checks refuses a window that would send nothing)
    "trace_replay": ("isl", lambda x: 0 if x.replays_trace else x.isl + x.osl),
}
assert set(_LONGEST_REQUEST) == set(WORKLOAD_NAMES)
# The list each workload's step ids come from, and how a value becomes its id.
_STEP_IDS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "concurrency_sweep": ("concurrencies", lambda c: f"c{c}"),
    "sequence_distributions": ("distributions", str),
    "prefix_cache": ("shares", lambda s: f"share{round(s * 100):03d}"),
    "trace_replay": ("concurrencies", lambda c: f"c{c}"),
}


def _where(name: str, sub: str, field: str) -> str:
    return f"{P}workloads.{to_camel(name)}{sub}.{field}"


def _check_lengths(stack: StackConfig, out: list[Problem]) -> None:
    assert stack.serving is not None
    limit = min(w.max_model_len for w in stack.serving.workers)
    for name, wl in stack.workloads.enabled().items():
        field, longest = _LONGEST_REQUEST[name]
        for scale, sub in SCALES:
            need = longest(wl.at_scale(scale))
            if need > limit:
                out.append(Problem(_where(name, sub, field), f"longest request ({scale} "
                                   f"scale) needs {need} tokens but the smallest worker "
                                   f"maxModelLen is {limit}",
                                   "shorten the workload or raise maxModelLen"))
                break


def _check_step_ids(name: str, wl: Workload, sub: str, out: list[Problem]) -> None:
    field, step_id = _STEP_IDS[name]
    values = getattr(wl, field)
    ids = [step_id(v) for v in values]
    counts = Counter(ids)
    for i, sid in enumerate(ids):
        if counts[sid] > 1 and ids.index(sid) < i:
            first = values[ids.index(sid)]
            out.append(Problem(f"{_where(name, sub, field)}[{i}]", f"{values[i]} repeats "
                               f"{first} (both are step {sid}): the second step would "
                               "overwrite the first one's results", "list each value once"))


def _check_prefix_shares(wl: Any, sub: str, out: list[Problem]) -> None:
    if wl.isl % wl.block_size:
        return  # the schema refuses it (isl must be whole blocks)
    blocks = wl.isl // wl.block_size
    for i, share in enumerate(wl.shares):
        shared = share * blocks
        if abs(shared - round(shared)) > 1e-9:
            step = Fraction(1, blocks)
            out.append(Problem(_where("prefix_cache", sub, "shares") + f"[{i}]",
                               f"{share:g} of {blocks} blocks ({wl.isl}/{wl.block_size} "
                               f"tokens) is {shared:g} blocks, not a whole number: the "
                               "dataset builder would stop the run there",
                               f"use a multiple of {step} ({float(step):g}), or change isl or "
                               "blockSize"))


def check_workloads(stack: StackConfig, out: list[Problem]) -> None:
    _check_lengths(stack, out)
    for name, wl in stack.workloads.enabled().items():
        for scale, sub in SCALES:
            scaled = wl.at_scale(scale)
            # at quick scale only what the quick block changes (the rest is reported once)
            changed = set(wl.quick) if scale == "quick" else None
            if name in _STEP_IDS and (changed is None or to_camel(_STEP_IDS[name][0]) in changed):
                _check_step_ids(name, scaled, sub, out)
            if name == "prefix_cache" and (changed is None
                                           or {"shares", "isl", "blockSize"} & changed):
                _check_prefix_shares(scaled, sub, out)


def routed_workers(stack: StackConfig) -> int:
    """Workers the frontend picks among for a new request: the aggregated workers, or the
    prefill workers of a disaggregated stack (the prefill hop is the one a prefix can hit)."""
    assert stack.serving is not None
    roles = {"worker", "prefill"}
    return sum(w.replicas for w in stack.serving.workers if w.role.value in roles)


def lockstep_notes(stack: StackConfig) -> list[str]:
    """A multi-turn workload that can advance in lockstep: fixed pauses and equal lengths,
    and a conversation count that is a multiple of the routed workers. Under round-robin each
    conversation then returns to the same worker every turn (accidental session affinity),
    and a KV router shows no gain over it. A note, not a refusal: the reports' ablation check
    flags the pair if it happens."""
    # enabled() maps each name to its own field: "multi_turn" to the MultiTurn workload
    wl = cast(MultiTurn | None, stack.workloads.enabled().get("multi_turn"))
    workers = routed_workers(stack) if stack.serving else 0
    if wl is None or workers < 2:
        return []
    out = []
    for scale, sub in SCALES:
        w = wl.at_scale(scale)
        if w.lockstep_prone and w.conversations % workers == 0:
            out.append(f"{_where('multi_turn', sub, 'conversations')}: {w.conversations} "
                       f"conversations with fixed pauses over {workers} routed workers can "
                       "advance in lockstep (round-robin then keeps each on one worker by "
                       "accident); set turnDelaySigma > 0 or a count that is not a multiple "
                       f"of {workers}")
    return out
