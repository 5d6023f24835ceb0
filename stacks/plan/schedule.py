"""The schedule of a base's campaign: which variant runs when, on which nodes (pure).

`python -m workloads campaign` runs it and `python -m stacks plan` prices it
(stacks/plan/forecast.py), so the forecast is the plan the campaign executes. The rules:

- **Kept workers.** Variants whose workers are the same (`same_workers`,
  stacks/conventions/worker_identity.py; e.g. agg-a100 and agg-a100-kv, which differ in the
  frontend's router) run back to back: the second keeps the running workers and only its frontend is
  replaced. No model load; the variant's start-up assumption (cost.setupHours minus the model load)
  still counts in full. Every later variant on the same workers gets its own prompt epoch (a
  different AIPerf seed for the same datasets), so no prompt a previous variant sent can hit their
  caches.
- **Concurrency.** A variant starts when the node groups it uses are free: variants on disjoint
  GPU groups (the A100 campaign's p4d and g6e) run side by side; a variant on several groups
  waits for all of them, so it is placed after the single-group ones.
- **Cold restarts.** None. A deployment starts cold (the model was just loaded, no prompt has
  reached it), and every step brings fresh hash ids (its own seed, and an epoch per variant on
  kept workers), so none of a step's prefixes can be cached before it runs: a restart would
  reload the model to empty a cache that holds nothing the step asks for. What the stack's
  coldRestart policy would have restarted is kept as `skipped_restarts`, with the reason.
- **Loads.** The first load of a configuration (model, image, layout: the compile-cache key) is
  the stack's model-load assumption; a later load of the same key reads vLLM's compile and
  autotune caches from the model volume and is the repeat-load assumption
  (stacks/sizing/estimate.py), shown apart.
- **Scaling.** The base's GPU groups start at zero while the base starts (the download Job and
  the platform run on the CPU group). Each node of a group comes up `node_ready_s` before the
  first variant that needs it, once the base is ready, and goes when no scheduled variant needs
  it again soon: kept when the next use starts within `node_ready_s + release` of the last one,
  otherwise scaled down (billed `release` longer) and back up ahead of need. Managed node
  groups change their desired size; an Auto Mode NodePool its limits (components/
  auto_mode_specs.pool_capacity): a parked pool (0 nodes) lets its empty nodes go at once, a
  dynamic pool lowered but not parked only after its empty-node grace, billed here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.schema import ComputeMode, NodeGroup, Provisioning, StackConfig
from stacks.config.workload_config import Scale
from stacks.conventions.k8s_names import deployment_name
from stacks.conventions.worker_identity import compile_cache_key
from stacks.preflight.auto_mode import EMPTY_NODE_GRACE_S, provisioning
from stacks.preflight.run import effective_cluster
from stacks.sizing.estimate import (
    cold_restarts,
    model_load_seconds,
    repeat_load_seconds,
)
from stacks.sizing.step_itl import ForecastItl, steps_seconds

# Assumptions (printed by `stacks plan`): a GPU node asked for is Ready this long after (EC2
# launch, EKS join, NVIDIA device plugin advertising its GPUs), and a node let go bills this
# long after (drain and termination).
NODE_READY_S = 600.0
NODE_RELEASE_S = 120.0

SameWorkers = Callable[[StackConfig, StackConfig], bool]


@dataclass(frozen=True)
class Assumptions:
    node_ready_s: float = NODE_READY_S
    node_release_s: float = NODE_RELEASE_S

    def release_s(self, group: NodeGroup, mode: ComputeMode, parked: bool) -> float:
        """How long a let-go node bills: its drain and termination, and on a dynamic Auto Mode
        NodePool lowered but not parked, the empty-node grace before Auto Mode removes it
        (consolidateAfter; a parked pool's is 0s, a static pool removes to match replicas)."""
        grace = (mode == ComputeMode.AUTO and not parked
                 and provisioning(group) == Provisioning.DYNAMIC)
        return self.node_release_s + (EMPTY_NODE_GRACE_S if grace else 0.0)


@dataclass(frozen=True)
class Slot:
    """One variant's turn."""

    stack: StackConfig
    nodes: dict[str, int]          # base GPU group -> nodes it occupies
    gpus: dict[str, int]           # base GPU group -> GPUs its workers use
    start_s: float
    startup_s: float
    load_s: float
    load_kind: str                 # "first", "repeat" or "kept"
    steps_s: dict[str, float]
    graph: str                     # the graph name it deploys under (shared on kept workers)
    prompt_epoch: int = 0
    kept_from: str | None = None
    hands_over_to: str | None = None
    skipped_restarts: int = 0
    warning: str = ""

    @property
    def name(self) -> str:
        return self.stack.name

    @property
    def load_window_s(self) -> float:
        return sum(self.steps_s.values())

    @property
    def wall_s(self) -> float:
        return self.startup_s + self.load_s + self.load_window_s

    @property
    def end_s(self) -> float:
        return self.start_s + self.wall_s

    @property
    def loaded_gpus(self) -> int:
        return sum(w.gpus for w in self.stack.serving.workers) if self.stack.serving else 0


@dataclass(frozen=True)
class ScaleEvent:
    t_s: float
    group: str
    nodes: int            # the group's size from t_s on
    reason: str
    # The slot it serves: scaled up `node_ready_s` before `slot` starts, or down when it ends.
    slot: str = ""
    when: str = ""        # "before" or "after"


@dataclass
class GroupPlan:
    """When each node of one base GPU group bills."""

    group: NodeGroup
    # per node index: [(billed from, billed until)], scale-up asked at `from`, down at `until -
    # release`
    intervals: list[list[tuple[float, float]]] = field(default_factory=list)

    @property
    def gpus_per_node(self) -> int:
        it = INSTANCE_TYPES.get(self.group.instance_type)
        return it.gpus_per_node if it else 0

    @property
    def billed_node_s(self) -> float:
        return sum(b - a for node in self.intervals for a, b in node)


@dataclass
class Schedule:
    base: StackConfig
    slots: list[Slot]
    groups: dict[str, GroupPlan]
    events: list[ScaleEvent]
    base_ready_s: float
    assumptions: Assumptions

    @property
    def end_s(self) -> float:
        return max((s.end_s for s in self.slots), default=self.base_ready_s)

    def slot(self, name: str) -> Slot:
        return next(s for s in self.slots if s.name == name)


def gpu_groups(base: StackConfig) -> list[NodeGroup]:
    return [g for g in base.cluster.node_groups
            if (it := INSTANCE_TYPES.get(g.instance_type)) is not None and it.gpus_per_node]


def _needs(v: StackConfig, groups: list[NodeGroup]) -> tuple[dict[str, int], dict[str, int]]:
    """Nodes and GPUs of each base GPU group the variant's workers use."""
    assert v.serving is not None  # schedule_campaign refuses a variant that serves nothing
    nodes: dict[str, int] = {}
    gpus: dict[str, int] = {}
    for g in groups:
        n = sum(w.gpus for w in v.serving.workers if w.node_group == g.name)
        if n:
            gpus[g.name] = n
            nodes[g.name] = min(g.count, math.ceil(n / INSTANCE_TYPES[g.instance_type]
                                                   .gpus_per_node))
    return nodes, gpus


def chains(variants: list[StackConfig], same: SameWorkers) -> list[list[StackConfig]]:
    """Variants in runs of identical workers, in the order named otherwise."""
    out, placed = [], set()
    for v in variants:
        if v.name in placed:
            continue
        chain = [v]
        placed.add(v.name)
        while (nxt := next((w for w in variants if w.name not in placed
                            and same(chain[-1], w)), None)) is not None:
            chain.append(nxt)
            placed.add(nxt.name)
        out.append(chain)
    return out


class _Timeline:
    """Per node index of each group: the end of its last use, to decide keep or scale."""

    def __init__(self, groups: list[NodeGroup], base_ready_s: float, a: Assumptions,
                 mode: ComputeMode):
        self.a, self.ready, self.mode = a, base_ready_s, mode
        self.groups = {g.name: g for g in groups}
        self.uses: dict[str, list[list[tuple[float, float, str]]]] = {
            g.name: [[] for _ in range(g.count)] for g in groups}
        self.free: dict[str, float] = {}

    def earliest_start(self, nodes: dict[str, int]) -> float:
        start = max([self.ready, *(self.free.get(g, self.ready) for g in nodes)])
        for g, n in nodes.items():
            for k in range(n):
                if not self.uses[g][k]:   # this node has never been up: ask for it first
                    start = max(start, self.ready + self.a.node_ready_s)
        return start

    def occupy(self, nodes: dict[str, int], start: float, end: float, slot: str) -> None:
        for g, n in nodes.items():
            for k in range(n):
                self.uses[g][k].append((start, end, slot))
            self.free[g] = end

    def merged(self, g: str) -> list[list[tuple[float, float, str, str]]]:
        """Per node: its uses merged where keeping it is no dearer than asking for it again:
        (first start, last end, the slot it comes up for, the slot it goes after)."""
        out = []
        for uses in self.uses[g]:
            merged: list[tuple[float, float, str, str]] = []
            for a, b, slot in sorted(uses):
                # kept when asking for it again would start before it is gone (a node of a
                # dynamic Auto Mode pool, lowered, is reused within its grace)
                release = self.a.release_s(self.groups[g], self.mode, parked=False)
                if merged and a - self.a.node_ready_s <= merged[-1][1] + release:
                    first = merged[-1]
                    merged[-1] = (first[0], max(first[1], b), first[2],
                                  slot if b >= first[1] else first[3])
                else:
                    merged.append((a, b, slot, slot))
            out.append(merged)
        return out

    def intervals(self, g: str) -> list[list[tuple[float, float]]]:
        """Billed intervals per node: from `node_ready_s` before its first use to its release
        after its last (parked when no other node of the group is asked for or in use then)."""
        nodes, ready = self.merged(g), self.a.node_ready_s
        out = []
        for k, node in enumerate(nodes):
            spans = []
            for a, b, _, _ in node:
                parked = not any(a2 - ready <= b < b2 for j, other in enumerate(nodes)
                                 if j != k for a2, b2, _, _ in other)
                spans.append((a - ready, b + self.a.release_s(self.groups[g], self.mode,
                                                               parked)))
            out.append(spans)
        return out


def _events(line: _Timeline, groups: list[NodeGroup]) -> list[ScaleEvent]:
    """Size changes of each group: up `node_ready_s` before the slot a node comes up for, down
    when the slot it goes after ends."""
    out = []
    for g in groups:
        changes: dict[tuple[float, str, str], int] = {}
        for node in line.merged(g.name):
            for a, b, up_for, down_after in node:
                up = (a - line.a.node_ready_s, up_for, "before")
                down = (b, down_after, "after")
                changes[up] = changes.get(up, 0) + 1
                changes[down] = changes.get(down, 0) - 1
        size = 0
        for (t, slot, when), n in sorted(changes.items()):
            if n:
                size += n
                out.append(ScaleEvent(t, g.name, size, "ahead of need" if n > 0 else
                                      "no scheduled variant needs it", slot, when))
    return sorted(out, key=lambda e: (e.t_s, e.group))


def schedule_campaign(base: StackConfig, variants: list[StackConfig], same: SameWorkers,
                      scale: Scale = "full", assumptions: Assumptions | None = None,
                      itls: Mapping[str, ForecastItl] | None = None) -> Schedule:
    """The campaign of `base` and `variants` (every variant attached to it); a variant's steps
    last as long as its decode at its ITL per step (`itls`: simulated, else predicted), else
    the assumed one."""
    a = assumptions or Assumptions()
    strays = [v.name for v in variants if v.cluster.attach_to != base.name or v.serving is None]
    if strays:
        raise ValueError(f"{', '.join(strays)} not serving variants of {base.name}: plan apart")
    groups = gpu_groups(base)
    mode = base.cluster.compute_mode
    ready = base.cost.setup_hours * 3600
    line = _Timeline(groups, ready, a, mode)
    runs = chains(variants, same)
    # single-group runs first (they share no node and run side by side), then the rest
    order = sorted(runs, key=lambda c: (len(_needs(c[0], groups)[0]) > 1, runs.index(c)))
    slots: list[Slot] = []
    loaded_keys: set[str] = set()
    for chain in order:
        for i, v in enumerate(chain):
            assert v.serving is not None  # strays (variants that serve nothing) refused above
            nodes, gpus = _needs(v, groups)
            start = line.earliest_start(nodes)
            cluster = effective_cluster(v, base)
            keys = {compile_cache_key(v, cluster, j) for j in range(len(v.serving.workers))}
            first = model_load_seconds(v)
            if i:
                kind, load = "kept", 0.0
            elif keys <= loaded_keys:
                kind, load = "repeat", repeat_load_seconds(v)
            else:
                kind, load = "first", first
            loaded_keys |= keys
            setup = v.cost.setup_hours * 3600
            warning = "" if first <= setup else (
                f"cost.setupHours {v.cost.setup_hours:g} h is shorter than the assumed model "
                f"load {first / 60:.0f} min: raise it")
            slot = Slot(stack=v, nodes=nodes, gpus=gpus, start_s=start,
                        startup_s=max(setup - first, 0.0), load_s=load, load_kind=kind,
                        steps_s=steps_seconds(v, scale, (itls or {}).get(v.name)),
                        graph=deployment_name(chain[0]),
                        prompt_epoch=i, kept_from=chain[i - 1].name if i else None,
                        hands_over_to=chain[i + 1].name if i + 1 < len(chain) else None,
                        skipped_restarts=cold_restarts(v, scale), warning=warning)
            line.occupy(nodes, start, slot.end_s, v.name)
            slots.append(slot)
    plans = {g.name: GroupPlan(g, line.intervals(g.name)) for g in groups}
    return Schedule(base=base, slots=slots, groups=plans, events=_events(line, groups),
                    base_ready_s=ready, assumptions=a)
