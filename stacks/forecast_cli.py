"""What `stacks plan` and `stacks check` print of a campaign forecast: which figures each
stack's steps are priced at (simulated by DynoSim, else predicted by AIConfigurator, else
cost.assumedItlMs, and why: workloads/sim/forecast.py makes them), a base's campaign
budget, judged at those figures, with the figure at cost.assumedItlMs beside it, and what each
comparison of the plan can resolve from the same simulation (stacks/plan/resolution.py)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

from rich.console import Console

from stacks.catalog.eks_versions import today
from stacks.config.loader import StackError, all_stack_names, derived_stack_names, load_stack
from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.plan.campaign_cost import BaseCampaign, base_campaign, budget_problems
from stacks.plan.forecast import Campaign
from stacks.plan.plan_view import print_resolution
from stacks.plan.resolution import comparisons, resolutions, step_costs
from stacks.preflight.run import PreflightReport
from stacks.sizing.step_itl import step_itls, summary
from workloads.sim.forecast import Forecast, forecast

console = Console(width=None if sys.stdout.isatty() else 200)


def campaign_stacks(c: Campaign | BaseCampaign, named: dict[str, StackConfig]
                    ) -> list[tuple[StackConfig, StackConfig | None]]:
    """(stack, its base) for every stack a campaign runs (a standalone one: the stack named)."""
    if isinstance(c, BaseCampaign):
        return [(slot.stack, c.base) for slot in c.slots]
    return [(named[r.stack], None) for r in c.runs]


def print_forecast_notes(fc: Forecast) -> None:
    """Why there is no prediction at all (the predictor is missing)."""
    if fc.predictor_note:
        console.print(f"predictions: {fc.predictor_note}", markup=False)


def print_itl_sources(c: Campaign | BaseCampaign, scale: Scale, fc: Forecast,
                      named: dict[str, StackConfig]) -> None:
    """Which figures each stack's step durations stand on: simulated, predicted, or assumed,
    and why a stack is not simulated."""
    for s, _ in campaign_stacks(c, named):
        if s.serving is None:
            continue
        why_not = fc.not_simulated(s.name)
        if why_not and not fc.off:
            console.print(f"{s.name}: not simulated ({why_not})", markup=False)
        for line in summary(step_itls(s, scale, fc.itls.get(s.name)), fc.why(s.name)):
            console.print(f"{s.name}: step durations at {line}", markup=False)


def known_stacks(stacks_dir: Path) -> list[StackConfig]:
    """Every stack file that loads (`stacks check` reports the others)."""
    known = []
    for n in [*all_stack_names(stacks_dir), *derived_stack_names(stacks_dir)]:
        try:
            known.append(load_stack(n, stacks_dir))
        except StackError:
            continue
    return known


def campaign_budget_problems(report: PreflightReport, stacks_dir: Path,
                             on: dt.date | None, predict_: bool, simulate: bool = True) -> list:
    """A base's campaign forecast against its cost.campaignBudgetUsd (every variant that
    attaches to it), each step priced at its simulated figures where DynoSim runs the variant,
    else its predicted ITL, else cost.assumedItlMs (as `stacks plan` and `workloads campaign`
    price it)."""
    s = report.stack
    if not (s.is_base and not s.is_attached and s.target == "aws"):
        return []
    variants = [v for v in known_stacks(stacks_dir) if v.cluster.attach_to == s.name
                and v.serving is not None]
    if not variants:
        return []
    fc = forecast([(v, s) for v in variants], "full", predict_, simulate)
    itls = fc.itls
    at_assumed = base_campaign(s, variants, on=on or today())
    c = base_campaign(s, variants, on=on or today(), itls=itls) if itls else at_assumed
    simulated = sum(1 for v in variants if not fc.not_simulated(v.name))
    why = fc.off or fc.predictor_note or "nothing simulated or predicted"
    priced = (f"${c.cost_usd:,.2f} with {len(itls)} of {len(variants)} variant(s) at their "
              f"simulated or predicted figures ({simulated} simulated), "
              f"${at_assumed.cost_usd:,.2f} all at cost.assumedItlMs"
              if itls else f"${c.cost_usd:,.2f} at cost.assumedItlMs ({why})")
    console.print(f"campaign forecast ({len(variants)} variant(s), `python -m stacks plan "
                  f"{s.name}`): {priced}; " + (
                      f"budget ${s.cost.campaign_budget_usd:,.2f}"
                      if s.cost.campaign_budget_usd is not None
                      else "no cost.campaignBudgetUsd"), markup=False)
    note_assumed_over_budget(c, at_assumed)
    return budget_problems(c)


def note_assumed_over_budget(c: BaseCampaign, at_assumed: BaseCampaign) -> None:
    """The budget is judged at the simulated or predicted figures; say when the assumed ITL
    would exceed it."""
    if at_assumed is not c and budget_problems(at_assumed) and not budget_problems(c):
        console.print(f"[yellow]{c.name}: within its budget at the simulated or predicted "
                      f"figures, but ${at_assumed.cost_usd:,.2f} at cost.assumedItlMs: should "
                      "the GPUs decode slower than simulated (`stacks predict` lists how the "
                      "prediction departs from the stack), the campaign costs more[/yellow]")


def print_plan_resolution(c: Campaign | BaseCampaign, named: dict[str, StackConfig],
                          scale: Scale, fc: Forecast, target: float) -> None:
    """What each comparison the campaign's variants form can resolve, and what the target
    would cost (stacks/plan/resolution.py), from the forecast's simulation of their plans."""
    stacks = campaign_stacks(c, named)
    base = c.base if isinstance(c, BaseCampaign) else None
    plan = comparisons([s for s, _ in stacks], base, scale)
    if not plan:
        console.print(f"{c.name}: resolvable differences: no two variants form a comparison "
                      "(one setting apart, or a decode tier on another GPU)", markup=False)
        return
    compared = sorted({n for cmp in plan for n in (cmp.reference, cmp.subject)})
    unsimulated = [f"{n}: {why}" for n in compared if (why := fc.not_simulated(n))]
    simulated = {n: (fc.simulations.get(n) or {}).get("steps") or {} for n in compared}
    if isinstance(c, BaseCampaign):
        costs = {s.name: step_costs(s.steps_s, c.attributed_usd(s) / s.wall_s if s.wall_s
                                    else 0.0) for s in c.slots}
    else:
        costs = {r.stack: step_costs(r.steps_s, r.hourly.total / 3600) for r in c.runs}
    rows = resolutions(plan, simulated, {s.name: s.workloads.repeats for s, _ in stacks},
                       costs, target)
    print_resolution(console, c.name, rows, target,
                     note="not simulated, so not resolved: " + "; ".join(unsimulated)
                     if unsimulated else "")
