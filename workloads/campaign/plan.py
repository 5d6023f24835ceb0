"""The campaign's plan as the record keeps it (pure): one entry per slot, in order.

An aws campaign's plan is its schedule (stacks/plan/schedule.py) with the forecast of every figure
the timeline later measures. A local campaign's is its order (kept mockers, prompt epochs) and
the same forecast on the mocker: slots one after another, a new mocker set starting in about a
second (LOCAL_RESTART_S, no model load), kept mockers not at all, each step as `stacks check`
estimates it at the campaign's scale; its GPU-hours are those of the hardware the mockers
imitate, billed while they run. No dollars: nothing local bills.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.plan.campaign_cost import BaseCampaign
from stacks.plan.schedule import chains
from stacks.sizing.estimate import LOCAL_RESTART_S
from stacks.sizing.step_itl import ForecastItl, steps_seconds
from workloads.steps import plan as steps_plan


def _r(x: float) -> float:
    return round(x, 3)


def aws_plan(c: BaseCampaign, scale: Scale) -> dict:
    sch = c.schedule
    slots = []
    for s in sch.slots:
        ups = {e.group: e.nodes for e in sch.events if e.slot == s.name and e.when == "before"}
        downs = {e.group: e.nodes for e in sch.events if e.slot == s.name and e.when == "after"}
        slots.append({
            "name": s.name, "kept_from": s.kept_from, "hands_over_to": s.hands_over_to,
            "graph": s.graph, "prompt_epoch": s.prompt_epoch, "nodes": s.nodes, "gpus": s.gpus,
            "loaded_gpus": s.loaded_gpus, "scale_before": ups, "scale_after": downs,
            "forecast": {"start_s": _r(s.start_s), "startup_s": _r(s.startup_s),
                         "load_s": _r(s.load_s), "load_kind": s.load_kind,
                         "load_window_s": _r(s.load_window_s), "wall_s": _r(s.wall_s),
                         "skipped_restarts": s.skipped_restarts,
                         "attributed_usd": round(c.attributed_usd(s), 2)}})
    groups = {g: {"instance_type": p.group.instance_type, "count": p.group.count,
                  "gpus_per_node": p.gpus_per_node,
                  "billed_gpu_hours": round(c.group_billed_gpu_hours(g), 3),
                  "loaded_gpu_hours": round(c.group_loaded_gpu_hours(g), 3)}
              for g, p in sch.groups.items()}
    return {"kind": "aws", "base": c.name, "scale": scale, "slots": slots, "groups": groups,
            "node_ready_s": sch.assumptions.node_ready_s,
            "forecast": {"wall_s": _r(c.wall_s), "cost_usd": round(c.cost_usd, 2),
                         "shared_usd": round(c.shared_usd, 2),
                         "idle_usd": round(c.idle_usd, 2),
                         "billed_gpu_hours": round(c.billed_gpu_hours, 3),
                         "loaded_gpu_hours": round(c.loaded_gpu_hours, 3),
                         "billed_over_loaded": round(c.billed_over_loaded or 0, 3),
                         "budget_usd": c.base.cost.campaign_budget_usd}}


def local_nodes(stack: StackConfig) -> tuple[dict[str, int], dict[str, int]]:
    """Nodes and GPUs of the hardware a local stack's mockers imitate, per group."""
    # a local campaign's stacks serve (run.plan_local refuses any other)
    assert stack.serving is not None
    nodes: dict[str, int] = {}
    gpus: dict[str, int] = {}
    for g in stack.cluster.node_groups:
        n = sum(w.gpus for w in stack.serving.workers if w.node_group == g.name)
        it = INSTANCE_TYPES.get(g.instance_type)
        if n and it and it.gpus_per_node:
            gpus[g.name] = n
            nodes[g.name] = min(g.count, math.ceil(n / it.gpus_per_node))
    return nodes, gpus


def local_plan(stacks: list[StackConfig], same: Callable[[StackConfig, StackConfig], bool],
               scale: Scale, itls: Mapping[str, ForecastItl] | None = None) -> dict:
    """Local stacks one after another (they share the host's cores), identical mockers kept;
    a step lasts its decode at its simulated ITL, or its simulated window where a request count
    bounds it, else at the predicted ITL (`itls`: the mockers run on the prediction's timing
    tables, as the simulation does), else at cost.assumedItlMs."""
    slots, t = [], 0.0
    billed: dict[str, float] = {}
    loaded: dict[str, float] = {}
    for chain in chains(stacks, same):
        for i, v in enumerate(chain):
            served = v.serving
            assert served is not None  # a local campaign's stacks serve (run.plan_local)
            nodes, gpus = local_nodes(v)
            skipped = sum(1 for s in steps_plan(v, scale) if s.cold)
            start = 0.0 if i else LOCAL_RESTART_S
            window = sum(steps_seconds(v, scale, (itls or {}).get(v.name)).values())
            for g, n in nodes.items():
                group = v.cluster.group(g)
                assert group is not None  # g is one of v's node groups (local_nodes)
                gpn = INSTANCE_TYPES[group.instance_type].gpus_per_node
                billed[g] = billed.get(g, 0.0) + n * gpn * (start + window)
                loaded[g] = loaded.get(g, 0.0) + gpus[g] * window
            slots.append({
                "name": v.name, "kept_from": chain[i - 1].name if i else None,
                "hands_over_to": chain[i + 1].name if i + 1 < len(chain) else None,
                "graph": None, "prompt_epoch": i, "nodes": nodes, "gpus": gpus,
                "loaded_gpus": sum(w.gpus for w in served.workers),
                "scale_before": {}, "scale_after": {},
                "forecast": {"start_s": _r(t), "startup_s": _r(start), "load_s": 0.0,
                             "load_kind": "kept" if i else "first",
                             "load_window_s": _r(window), "wall_s": _r(start + window),
                             "skipped_restarts": skipped}})
            t += start + window
    groups: dict[str, dict] = {}
    for v in stacks:
        for ng in v.cluster.node_groups:
            it = INSTANCE_TYPES.get(ng.instance_type)
            if it and it.gpus_per_node:
                # the imitated hardware, by group name: local stacks run one at a time
                groups.setdefault(ng.name, {
                    "instance_type": ng.instance_type, "gpus_per_node": it.gpus_per_node,
                    "billed_gpu_hours": round(billed.get(ng.name, 0.0) / 3600, 3),
                    "loaded_gpu_hours": round(loaded.get(ng.name, 0.0) / 3600, 3)})
    total_b, total_l = sum(billed.values()) / 3600, sum(loaded.values()) / 3600
    return {"kind": "local", "base": "local", "scale": scale, "slots": slots,
            "groups": groups,
            "forecast": {"wall_s": _r(t), "billed_gpu_hours": round(total_b, 3),
                         "loaded_gpu_hours": round(total_l, 3),
                         "billed_over_loaded": round(total_b / total_l, 3) if total_l else 0}}
