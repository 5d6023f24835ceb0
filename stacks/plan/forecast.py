"""Forecast of a campaign before `pulumi up`: wall time, dollars, billed vs loaded GPU-hours (pure).

A campaign is what runs while nodes bill:
- a standalone stack: its start-up, model load, cold restarts (its coldRestart policies: one
  model load each on a cluster, about a second locally) and workload steps, on its own nodes,
  as `python -m workloads run` makes them;
- a base and its variants: the schedule `python -m workloads campaign` runs
  (stacks/plan/schedule.py), priced by stacks/plan/campaign_cost.py (`BaseCampaign`,
  `base_campaign`).
GPU-hours under load are the GPUs a stack's workers use, during its workload steps only, so
billed / loaded says how much of the paid GPU time carried load. The campaign's timeline gives
the same ratio measured after the fact (workloads/campaign/timeline.py).

Start-up is the stack's `cost.setupHours` minus the assumed model load, which that budget
includes (see `stacks.sizing.estimate.model_load_seconds`).

A step's duration prices its decode at the step's simulated ITL (and a count-bounded step at
its simulated window), else AIConfigurator's predicted ITL, where the caller passes them in
(`itls`: stack name -> stacks.sizing.step_itl.ForecastItl; the CLI runs the simulation and the
predictor, this module does not), else at the stack's `cost.assumedItlMs`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.schema import NodeGroup, StackConfig
from stacks.config.workload_config import Scale
from stacks.plan.campaign_cost import BaseCampaign, base_campaign
from stacks.sizing.estimate import (
    HourlyCost,
    cluster_hourly_cost,
    cold_restarts,
    model_load_seconds,
    restart_seconds,
)
from stacks.sizing.step_itl import ForecastItl, steps_seconds

# stack name -> its figures per step (None or a missing stack: every step assumed)
StackItls = Mapping[str, ForecastItl]


def gpus_in(groups: list[NodeGroup]) -> int:
    """GPUs on every node of `groups` (what bills, loaded or not)."""
    return sum(g.count * INSTANCE_TYPES[g.instance_type].gpus_per_node for g in groups
               if g.instance_type in INSTANCE_TYPES)


def gpus_loaded(stack: StackConfig) -> int:
    """GPUs the stack's workers run on."""
    return sum(w.gpus for w in stack.serving.workers) if stack.serving else 0


@dataclass(frozen=True)
class StackRun:
    """One stack's turn in a campaign."""

    stack: str
    startup_s: float
    model_load_s: float
    steps_s: dict[str, float]
    gpus_loaded: int
    # What the stack is charged per hour (its nodes and fixed fees).
    hourly: HourlyCost
    # Set when cost.setupHours is shorter than the assumed model load.
    warning: str = ""
    # Worker restarts before cold-cache steps, and what one costs (a model load on a cluster).
    restarts: int = 0
    restart_s: float = 0.0

    @property
    def load_s(self) -> float:
        return sum(self.steps_s.values())

    @property
    def restarts_s(self) -> float:
        return self.restarts * self.restart_s

    @property
    def wall_s(self) -> float:
        return self.startup_s + self.model_load_s + self.restarts_s + self.load_s

    @property
    def attributed_usd(self) -> float:
        return self.hourly.total * self.wall_s / 3600

    @property
    def loaded_gpu_hours(self) -> float:
        return self.gpus_loaded * self.load_s / 3600


@dataclass(frozen=True)
class Campaign:
    """A standalone stack: its start-up, model load, restarts and steps on its own nodes."""

    name: str
    hourly: HourlyCost
    billed_gpus: int
    runs: list[StackRun] = field(default_factory=list)
    kind: str = "standalone"

    @property
    def wall_s(self) -> float:
        return sum(r.wall_s for r in self.runs)

    @property
    def cost_usd(self) -> float:
        return self.hourly.total * self.wall_s / 3600

    @property
    def billed_gpu_hours(self) -> float:
        return self.billed_gpus * self.wall_s / 3600

    @property
    def loaded_gpu_hours(self) -> float:
        return sum(r.loaded_gpu_hours for r in self.runs)

    @property
    def billed_over_loaded(self) -> float | None:
        loaded = self.loaded_gpu_hours
        return self.billed_gpu_hours / loaded if loaded else None


def _stack_run(stack: StackConfig, scale: Scale, on: dt.date | None = None,
               itls: StackItls | None = None) -> StackRun:
    load = model_load_seconds(stack)
    setup = stack.cost.setup_hours * 3600
    warning = ""
    if load > setup:
        warning = (f"cost.setupHours {stack.cost.setup_hours:g} h is shorter than the assumed "
                   f"model load {load / 60:.0f} min: raise it")
    return StackRun(
        stack=stack.name, startup_s=max(setup - load, 0.0), model_load_s=load,
        steps_s=steps_seconds(stack, scale, (itls or {}).get(stack.name))
        if stack.serving else {},
        gpus_loaded=gpus_loaded(stack),
        hourly=cluster_hourly_cost(stack, stack.cluster, stack.storage.model_cache_gib, on=on),
        warning=warning, restarts=cold_restarts(stack, scale) if stack.serving else 0,
        restart_s=restart_seconds(stack))


def standalone_campaign(stack: StackConfig, scale: Scale = "full",
                        on: dt.date | None = None, itls: StackItls | None = None) -> Campaign:
    if stack.is_attached:
        raise ValueError(f"{stack.name} is attached to {stack.cluster.attach_to}: "
                         "plan it with its base (base_campaign)")
    run = _stack_run(stack, scale, on, itls)
    return Campaign(name=stack.name, hourly=run.hourly,
                    billed_gpus=gpus_in(stack.cluster.node_groups), runs=[run])


def plan_campaigns(stacks: list[StackConfig], bases: dict[str, StackConfig],
                   known: list[StackConfig], scale: Scale = "full",
                   on: dt.date | None = None,
                   itls: StackItls | None = None) -> list[Campaign | BaseCampaign]:
    """Group the named stacks into campaigns, in the order they were named.

    Variants go with their base (`bases` maps each attachTo name to its config); a base named
    without any of its variants brings every variant among `known` that attaches to it.
    """
    order: list[str] = []
    variants: dict[str, list[StackConfig]] = {}
    for s in stacks:
        key = s.cluster.attach_to or s.name  # attachTo, when set, is a non-empty name
        if key not in variants:
            order.append(key)
            variants[key] = []
        if s.is_attached:
            variants[key].append(s)
    named = {s.name: s for s in stacks}
    campaigns: list[Campaign | BaseCampaign] = []
    for key in order:
        if key in named and not named[key].is_base:
            campaigns.append(standalone_campaign(named[key], scale, on, itls))
            continue
        base = named.get(key) or bases[key]
        runs = variants[key] or [v for v in known if v.cluster.attach_to == key]
        campaigns.append(base_campaign(base, runs, scale, on, itls=itls))
    return campaigns
