"""What `stacks plan` and `stacks check` print of a campaign forecast: which ITL each stack's
steps are priced at (predicted, or cost.assumedItlMs and why), and a base's campaign budget,
judged at the predicted ITL where AIConfigurator predicts the variants
(stacks/predict/forecast_itls.py), with the figure at cost.assumedItlMs beside it."""

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
from stacks.predict.forecast_itls import ForecastPredictions, forecast_predictions
from stacks.predict.rows import Prediction
from stacks.preflight.run import PreflightReport
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
