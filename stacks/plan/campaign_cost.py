"""Every dollar of a base's campaign, from its schedule (pure).

The schedule (stacks/plan/schedule.py) says when each GPU node of the base bills and what each
variant occupies; this module prices it and splits the total three ways, which add up to it:
- **attributed** to a variant: the base GPU nodes it occupies (instance, root volume, Auto Mode
  fee) during its own turn (start-up, model load, steps), plus node groups of its own;
- **shared**: the base's fixed costs over the whole campaign, base start-up included: the CPU
  group, the EKS control plane, the EFS model cache, the NAT gateway;
- **idle**: GPU nodes billed while no variant occupies them: brought up ahead of need, kept
  between two close variants, released after the last one.
GPU-hours: billed = every GPU node's billed time; under load = each variant's GPUs during its
steps. The base's campaign budget (`cost.campaignBudgetUsd`) bounds the total.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.errors import Problem
from stacks.config.schema import NodeGroup, StackConfig
from stacks.config.workload_config import Scale
from stacks.conventions.worker_identity import same_workers
from stacks.plan.schedule import SameWorkers, Schedule, Slot, gpu_groups, schedule_campaign
from stacks.preflight.run import effective_cluster
from stacks.sizing.estimate import HourlyCost, add_node_costs, cluster_hourly_cost
from stacks.sizing.step_itl import ForecastItl


def _gpus(groups: list[NodeGroup]) -> int:
    return sum(g.count * INSTANCE_TYPES[g.instance_type].gpus_per_node for g in groups
               if g.instance_type in INSTANCE_TYPES)


@dataclass
class BaseCampaign:
    schedule: Schedule
    shared: HourlyCost             # the base's fixed lines, per hour
    per_node: dict[str, float]     # base GPU group -> $/h of one node (instance, disk, fee)
    extras: dict[str, HourlyCost] = field(default_factory=dict)  # a variant's own groups
    unknown: list[str] = field(default_factory=list)
    kind: str = "base"

    # --- time ---
    @property
    def name(self) -> str:
        return self.schedule.base.name

    @property
    def base(self) -> StackConfig:
        return self.schedule.base

    @property
    def slots(self) -> list[Slot]:
        return self.schedule.slots

    @property
    def wall_s(self) -> float:
        return self.schedule.end_s

    # --- dollars ---
    @property
    def shared_usd(self) -> float:
        return self.shared.total * self.wall_s / 3600

    @property
    def base_startup_usd(self) -> float:
        """The shared costs while the base starts (no GPU node is up then)."""
        return self.shared.total * self.schedule.base_ready_s / 3600

    def attributed_usd(self, slot: Slot) -> float:
        per_h = sum(n * self.per_node[g] for g, n in slot.nodes.items())
        extra = self.extras.get(slot.name)
        return (per_h + (extra.total if extra else 0.0)) * slot.wall_s / 3600

    def idle_node_s(self, group: str) -> float:
        plan = self.schedule.groups[group]
        occupied = sum(s.nodes.get(group, 0) * s.wall_s for s in self.slots)
        return plan.billed_node_s - occupied

    @property
    def idle_usd(self) -> float:
        return sum(self.idle_node_s(g) * self.per_node[g] for g in self.schedule.groups) / 3600

    @property
    def cost_usd(self) -> float:
        return self.shared_usd + self.idle_usd + sum(self.attributed_usd(s) for s in self.slots)

    @property
    def over_budget(self) -> bool:
        budget = self.base.cost.campaign_budget_usd
        return budget is not None and self.cost_usd > budget

    # --- GPU-hours ---
    def group_billed_gpu_hours(self, group: str) -> float:
        plan = self.schedule.groups[group]
        return plan.billed_node_s * plan.gpus_per_node / 3600

    def group_loaded_gpu_hours(self, group: str) -> float:
        return sum(s.gpus.get(group, 0) * s.load_window_s for s in self.slots) / 3600

    def _extra_gpus(self, slot: Slot) -> int:
        return _gpus(list(slot.stack.cluster.node_groups))

    @property
    def billed_gpu_hours(self) -> float:
        extra = sum(self._extra_gpus(s) * s.wall_s for s in self.slots) / 3600
        return sum(self.group_billed_gpu_hours(g) for g in self.schedule.groups) + extra

    @property
    def loaded_gpu_hours(self) -> float:
        return sum(s.loaded_gpus * s.load_window_s for s in self.slots) / 3600

    @property
    def billed_over_loaded(self) -> float | None:
        loaded = self.loaded_gpu_hours
        return self.billed_gpu_hours / loaded if loaded else None


def _one_node(group: NodeGroup) -> NodeGroup:
    return group.model_copy(update={"count": 1})


def base_campaign(base: StackConfig, variants: list[StackConfig], scale: Scale = "full",
                  on: dt.date | None = None, same: SameWorkers | None = None,
                  itls: Mapping[str, ForecastItl] | None = None) -> BaseCampaign:
    """Schedule and price `base`'s campaign. `same`: whether a variant can keep the previous
    one's workers (default: the typed-config rule of stacks/conventions/worker_identity.py);
    `itls`: each variant's figures per step (simulated, else predicted:
    stacks/sizing/step_itl.py), else assumed."""
    if same is None:
        def same(a: StackConfig, b: StackConfig) -> bool:
            return same_workers(a, b, effective_cluster(a, base), effective_cluster(b, base))
    schedule = schedule_campaign(base, variants, same, scale, itls=itls)
    hourly = cluster_hourly_cost(base, base.cluster, base.storage.model_cache_gib, on=on)
    shared = HourlyCost(lines={k: v for k, v in hourly.lines.items() if k in hourly.shared},
                        prices=hourly.prices, overrides=hourly.overrides,
                        excluded=hourly.excluded, shared=set(hourly.shared))
    mode = base.cluster.compute_mode
    per_node, unknown = {}, list(hourly.unknown)
    for g in gpu_groups(base):
        one = HourlyCost()
        add_node_costs(one, base, [_one_node(g)], mode)
        per_node[g.name] = one.total
        unknown += one.unknown
    extras = {}
    for v in variants:
        if v.cluster.node_groups:
            cost = HourlyCost()
            add_node_costs(cost, v, list(v.cluster.node_groups), mode)
            extras[v.name] = cost
            unknown += cost.unknown
    return BaseCampaign(schedule=schedule, shared=shared, per_node=per_node, extras=extras,
                        unknown=unknown)


def budget_problems(c: BaseCampaign) -> list[Problem]:
    """The campaign forecast above the base's `cost.campaignBudgetUsd`."""
    budget = c.base.cost.campaign_budget_usd
    if budget is None or c.cost_usd <= budget:
        return []
    return [Problem("dynamo-bench:cost.campaignBudgetUsd",
                    f"the campaign of {c.name} and {len(c.slots)} variant(s) is forecast at "
                    f"${c.cost_usd:,.2f} (base start-up, shared fees and idle GPU time "
                    f"included), above the budget ${budget:,.2f}",
                    "raise cost.campaignBudgetUsd on the base, or plan fewer variants or "
                    "shorter workloads (`python -m stacks plan` shows every dollar)")]
