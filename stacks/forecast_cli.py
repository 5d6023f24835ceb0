"""What `stacks plan` and `stacks check` print of a campaign forecast: which ITL each stack's
steps are priced at (predicted, or cost.assumedItlMs and why), a base's campaign budget,
judged at the predicted ITL where AIConfigurator predicts the variants
(stacks/predict/forecast_itls.py), with the figure at cost.assumedItlMs beside it, and what
each comparison of the plan can resolve, from its variants' plans simulated by DynoSim
(workloads/sim: this module and stacks/__main__.py are the only ones of stacks/ that run it)."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from stacks.catalog.eks_versions import today
from stacks.config.loader import StackError, all_stack_names, derived_stack_names, load_stack
from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.plan.campaign_cost import BaseCampaign, base_campaign, budget_problems
from stacks.plan.forecast import Campaign
from stacks.plan.plan_view import print_resolution
from stacks.plan.resolution import Comparison, comparisons, resolutions, step_costs
from stacks.predict.forecast_itls import ForecastPredictions, forecast_predictions
from stacks.predict.rows import Prediction
from stacks.preflight.run import PreflightReport, run_preflight
from stacks.sizing.step_itl import PredictedItl, step_itls, summary

console = Console(width=None if sys.stdout.isatty() else 200)


def campaign_stacks(c: Campaign | BaseCampaign, named: dict[str, StackConfig]
                    ) -> list[tuple[StackConfig, StackConfig | None]]:
    """(stack, its base) for every stack a campaign runs (a standalone one: the stack named)."""
    if isinstance(c, BaseCampaign):
        return [(slot.stack, c.base) for slot in c.slots]
    return [(named[r.stack], None) for r in c.runs]


def why_assumed(pred: Prediction | None, predict_: bool) -> str:
    """Why a stack's steps priced at cost.assumedItlMs have no predicted ITL."""
    if not predict_:
        return "predictions off: --no-predict"
    if pred is None:
        return "no predictor: see `predictions:` above"
    if pred.not_predicted:
        return f"nothing predicted: {pred.not_predicted.split(' (')[0]}"
    if not pred.rows:
        return "nothing predicted" + (f": {pred.skipped[0]}" if pred.skipped else "")
    return (f"not predicted: {'; '.join(pred.skipped)}" if pred.skipped
            else "not in the prediction")


def print_itl_sources(c: Campaign | BaseCampaign, scale: Scale,
                      itls: dict[str, PredictedItl], named: dict[str, StackConfig],
                      why: Callable[[str], str]) -> None:
    """Which ITL each stack's step durations stand on: predicted, or assumed and why."""
    for s, _ in campaign_stacks(c, named):
        if s.serving is None:
            continue
        for line in summary(step_itls(s, scale, itls.get(s.name)), why(s.name)):
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
                             on: dt.date | None, predict_: bool) -> list:
    """A base's campaign forecast against its cost.campaignBudgetUsd (every variant that
    attaches to it), each step priced at its predicted ITL where AIConfigurator predicts it
    (as `stacks plan` and `workloads campaign` price it), else at cost.assumedItlMs."""
    s = report.stack
    if not (s.is_base and not s.is_attached and s.target == "aws"):
        return []
    variants = [v for v in known_stacks(stacks_dir) if v.cluster.attach_to == s.name
                and v.serving is not None]
    if not variants:
        return []
    fp = forecast_predictions([(v, s) for v in variants], "full") if predict_ \
        else ForecastPredictions(note="predictions off: --no-predict")
    itls = fp.itls
    at_assumed = base_campaign(s, variants, on=on or today())
    c = base_campaign(s, variants, on=on or today(), itls=itls) if itls else at_assumed
    why = fp.note or "nothing predicted"
    priced = (f"${c.cost_usd:,.2f} with {len(itls)} of {len(variants)} variant(s) at their "
              f"predicted ITL, ${at_assumed.cost_usd:,.2f} all at cost.assumedItlMs"
              if itls else f"${c.cost_usd:,.2f} at cost.assumedItlMs ({why})")
    console.print(f"campaign forecast ({len(variants)} variant(s), `python -m stacks plan "
                  f"{s.name}`): {priced}; " + (
                      f"budget ${s.cost.campaign_budget_usd:,.2f}"
                      if s.cost.campaign_budget_usd is not None
                      else "no cost.campaignBudgetUsd"), markup=False)
    note_assumed_over_budget(c, at_assumed)
    return budget_problems(c)


def note_assumed_over_budget(c: BaseCampaign, at_assumed: BaseCampaign) -> None:
    """The budget is judged at the predicted ITL; say when the assumed one would exceed it."""
    if at_assumed is not c and budget_problems(at_assumed) and not budget_problems(c):
        console.print(f"[yellow]{c.name}: within its budget at the predicted ITL, but "
                      f"${at_assumed.cost_usd:,.2f} at cost.assumedItlMs: should the GPUs "
                      "decode slower than predicted (`stacks predict` lists how the "
                      "prediction departs from the stack), the campaign costs more[/yellow]")


def simulate_for_resolution(plan: list[Comparison], stacks: list[tuple[StackConfig,
                                                                       StackConfig | None]],
                            scale: Scale, predict_: bool) -> tuple[dict[str, list], list[str]]:
    """Each stack a comparison names, its plan's compared workloads replayed by DynoSim
    (workloads/sim: one replay process for all), with what could not be simulated and why."""
    from workloads.sim.build import for_plan
    from workloads.sim.plan_sim import simulate_plan
    from workloads.sim.replay import Replayer

    wanted: dict[str, set[str]] = {}
    for c in plan:
        for name in (c.reference, c.subject):
            wanted.setdefault(name, set()).update(c.workloads)
    out: dict[str, list] = {}
    skipped: list[str] = []
    replayer = Replayer()
    try:
        for stack, base in stacks:
            if stack.name not in wanted:
                continue
            only = sorted(wanted[stack.name] & set(stack.workloads.enabled()))
            report = run_preflight(stack, base)
            if report.problems or not only:
                skipped.append(f"{stack.name}: " + ("fails pre-flight" if report.problems
                                                    else "runs none of the compared workloads"))
                continue
            try:
                target, template = for_plan(stack, [m.kv_capacity_tokens for m in
                                                    report.memory], base, predict_)
                out[stack.name] = simulate_plan(stack, scale, target, template, only=only,
                                                replayer=replayer)
            except (ValueError, OSError, RuntimeError) as exc:   # Unsimulated, no engine
                skipped.append(f"{stack.name}: not simulated ({exc})")
    finally:
        replayer.close()
    return out, skipped


def print_plan_resolution(c: Campaign | BaseCampaign, named: dict[str, StackConfig],
                          scale: Scale, predict_: bool, target: float) -> None:
    """What each comparison the campaign's variants form can resolve, and what the target
    would cost (stacks/plan/resolution.py), from their simulated plans."""
    stacks = campaign_stacks(c, named)
    base = c.base if isinstance(c, BaseCampaign) else None
    plan = comparisons([s for s, _ in stacks], base, scale)
    if not plan:
        console.print(f"{c.name}: resolvable differences: no two variants form a comparison "
                      "(one setting apart, or a decode tier on another GPU)", markup=False)
        return
    simulated, skipped = simulate_for_resolution(plan, stacks, scale, predict_)
    if isinstance(c, BaseCampaign):
        costs = {s.name: step_costs(s.steps_s, c.attributed_usd(s) / s.wall_s if s.wall_s
                                    else 0.0) for s in c.slots}
    else:
        costs = {r.stack: step_costs(r.steps_s, r.hourly.total / 3600) for r in c.runs}
    rows = resolutions(plan, simulated, {s.name: s.workloads.repeats for s, _ in stacks},
                       costs, target)
    print_resolution(console, c.name, rows, target,
                     note="; ".join(skipped) if skipped else "")
