"""What a plan can resolve before it runs (stacks/plan/resolution.py): the comparisons its
variants form (the report's pairs), the smallest difference each resolves from the simulated
spread (the report's method, stacks/sizing/sampling.py), what a target difference would cost
at the campaign's own prices, and `stacks plan base-a100` showing it per question."""

from __future__ import annotations

import math

import numpy as np
import pytest
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.config.loader import all_stack_names, load_stack
from stacks.plan.resolution import (
    Q_OFFLOAD,
    Q_ROUTER,
    Q_TIER,
    Q_TOPOLOGY,
    SPREAD_FLOOR,
    Comparison,
    StepCost,
    comparisons,
    resolutions,
    step_costs,
)
from stacks.sizing import sampling

ON = "2026-12-01"


def base_a100():
    variants = [s for s in map(load_stack, all_stack_names())
                if s.cluster.attach_to == "base-a100"]
    return variants, load_stack("base-a100")


def Step(step: str, workload: str, ttft: list[float], itl: list[float] | None = None,
         token_rates: list[float] | None = None, reuse: float = 0.0,
         reuse_se: float | None = None, runs: list[dict] | None = None,
         run_reuse: list[float] | None = None, output_tok_s: float = 1000.0) -> dict:
    """A simulated step as the forecast's record keeps it (workloads/sim/plan_sim.py
    StepFigures.as_dict), made from per-request samples as plan_sim makes it."""
    itl = itl or []
    rates = token_rates or []
    return {"step": step, "workload": workload, "requests": len(ttft),
            "ttft_p50_ms": float(np.median(ttft)),
            "itl_p50_ms": float(np.median(itl)) if itl else None,
            "output_tok_s": output_tok_s, "reuse": reuse,
            "ttft_p50_se_ms": sampling.quantile_se(ttft, 0.5),
            "itl_p50_se_ms": sampling.quantile_se(itl, 0.5) if itl else None,
            "token_rate_cv": float(np.std(rates, ddof=1) / np.mean(rates)) if rates else None,
            "reuse_se": reuse_se, "run_reuse": run_reuse or [],
            "spread": {"runs": runs or []}}


def test_the_plans_comparisons_are_the_pairs_its_report_draws():
    variants, base = base_a100()
    found = {(c.question, c.reference, c.subject) for c in comparisons(variants, base)}
    assert found == {
        (Q_TOPOLOGY, "agg-a100", "disagg-a100"), (Q_TOPOLOGY, "agg-a100-kv", "disagg-a100-kv"),
        (Q_ROUTER, "agg-a100", "agg-a100-kv"), (Q_ROUTER, "disagg-a100", "disagg-a100-kv"),
        (Q_OFFLOAD, "disagg-a100-kv", "disagg-a100-kv-offload"),
        # the L40S decode tier against the disagg variant whose workers alone differ
        (Q_TIER, "disagg-a100", "disagg-l40s-decode")}
    # agg-l40s-fp8 runs another checkpoint: no one-setting pair, no comparison


def _lognormal(seed: int, n: int, sigma: float = 0.12, median: float = 50.0) -> list[float]:
    return list(np.random.default_rng(seed).lognormal(math.log(median), sigma, n))


def _one(ref: Step, sub: Step, figure: str = "ttft_p50_ms", repeats: int = 1,
         costs=(StepCost(0, 0), StepCost(0, 0)), target: float = 0.05):
    c = Comparison(Q_TOPOLOGY, "a", "b", (ref["workload"],), (figure,))
    (row,) = resolutions([c], {"a": {ref["step"]: ref}, "b": {sub["step"]: sub}},
                         {"a": repeats, "b": repeats},
                         {"a": {ref["step"]: costs[0]}, "b": {sub["step"]: costs[1]}}, target)
    return row


def test_the_resolvable_difference_is_the_reports_method_on_the_simulated_requests():
    a, b = (Step("concurrency_sweep/c4", "concurrency_sweep", _lognormal(s, 200))
            for s in (1, 2))
    row = _one(a, b)
    se = math.hypot(a["ttft_p50_se_ms"], b["ttft_p50_se_ms"])
    assert row.mdd == pytest.approx(sampling.relative_mdd(se, a["ttft_p50_ms"]))
    assert row.requests == 200 and 0.02 < row.mdd < 0.06
    # four planned repeats pool four times the requests: half the difference
    assert _one(a, b, repeats=4).mdd == pytest.approx(row.mdd / 2)


def test_a_simulation_without_spread_is_held_at_the_floor():
    """DynoSim gives every c1 request the same TTFT; the plan does not promise a 0 % MDD."""
    flat = Step("concurrency_sweep/c1", "concurrency_sweep", [30.0] * 60)
    row = _one(flat, flat)
    floor = math.sqrt(math.pi / 2) * SPREAD_FLOOR["ttft_p50_ms"] * 30.0 / math.sqrt(60)
    assert row.mdd == pytest.approx(sampling.relative_mdd(math.hypot(floor, floor), 30.0))
    assert row.mdd > 0.02


def test_the_kv_routers_seeded_runs_add_their_spread():
    a = Step("multi_turn/conv8", "multi_turn", _lognormal(3, 300))
    b = Step("multi_turn/conv8", "multi_turn", _lognormal(4, 300))
    quiet = _one(a, b)
    b["spread"] = {"runs": [{"ttft_p50_ms": v} for v in (45.0, 50.0, 55.0)]}
    assert _one(a, b).mdd > quiet.mdd


def test_what_resolving_the_target_costs_at_the_campaigns_prices():
    """An MDD twice the target needs four times the requests: four repeats a side where one
    was planned, three more of each side's step at its own price per second."""
    a, b = (Step("concurrency_sweep/c1", "concurrency_sweep", _lognormal(s, 21, 0.3))
            for s in (5, 6))
    costs = (StepCost(120.0, 0.01), StepCost(150.0, 0.02))
    row = _one(a, b, costs=costs, target=0.05)
    scale = (row.mdd / 0.05) ** 2
    assert not row.resolved and row.needed_repeats == math.ceil(scale)
    extra = row.needed_repeats - 1
    assert row.extra_s == pytest.approx(extra * 270.0)
    assert row.extra_usd == pytest.approx(extra * (120 * 0.01 + 150 * 0.02))
    assert row.needed_requests == 21 * row.needed_repeats
    loose = _one(a, b, costs=costs, target=row.mdd * 1.01)
    assert loose.resolved and loose.needed_repeats == 1 and loose.extra_usd == 0


def test_throughput_is_judged_only_over_repeats():
    a = Step("concurrency_sweep/c4", "concurrency_sweep", _lognormal(7, 100),
             token_rates=_lognormal(8, 100, 0.1, 100.0))   # cv 0.1 / 10: under the 2 % floor
    one = _one(a, a, figure="output_tok_s")
    assert math.isnan(one.mdd) and ">= 2" in one.note
    assert one.needed_repeats == sampling.repeats_to_resolve(0.02, 0.02, 0.05)
    three = _one(a, a, figure="output_tok_s", repeats=3)
    assert three.mdd == pytest.approx(sampling.mdd_over_repeats(0.02, 0.02, 3))


def test_step_costs_are_one_repeat_of_each_step():
    costs = step_costs({"concurrency_sweep/c1/r1": 100.0, "concurrency_sweep/c1/r2": 100.0,
                        "multi_turn/conv8": 300.0}, 0.5)
    assert costs == {"concurrency_sweep/c1": StepCost(100.0, 0.5),
                     "multi_turn/conv8": StepCost(300.0, 0.5)}


def _record(name: str, i: int) -> dict:
    """A stubbed simulation record of a base-a100 variant: every compared step."""
    steps = {"concurrency_sweep": [f"concurrency_sweep/c{c}" for c in (1, 64)],
             "multi_turn": ["multi_turn/conv8"]}
    return {"label": "SIMULATED (stub)", "steps": {
        st: Step(st, w, _lognormal(i * 10 + j, 120), _lognormal(j, 120, 0.05),
                 _lognormal(j, 120, 0.1, 100.0), reuse=0.4, reuse_se=0.01)
        for j, (w, names) in enumerate(steps.items()) for st in names}}


def _no_predictor(monkeypatch) -> None:
    """AIConfigurator out of the way (its own tests cover it): no prediction, generic timings."""
    from stacks.predict.forecast_itls import ForecastPredictions
    from workloads.sim import forecast as fc_module
    from workloads.targets import mocker_timings
    monkeypatch.setattr(fc_module, "forecast_predictions",
                        lambda pairs, scale: ForecastPredictions(note="stubbed"))
    monkeypatch.setattr(mocker_timings, "resolve",
                        lambda stack, folder=None, base=None: mocker_timings.generic("test"))


def test_stacks_plan_prints_each_questions_resolvable_difference(monkeypatch):
    """The CLI's table from the forecast's simulation records (stubbed here: the engine run is
    the next test's), every question the variants form with its resolvable difference."""
    from workloads.sim import forecast as fc_module

    def simulated(pairs, scale, predictions=None):
        return {s.name: _record(s.name, i) for i, (s, _) in enumerate(pairs)}
    _no_predictor(monkeypatch)
    monkeypatch.setattr(fc_module, "simulate_stacks", simulated)
    res = CliRunner().invoke(app, ["plan", "base-a100", "--as-of", ON,
                                   "--target-difference", "5"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "the smallest difference each comparison resolves" in out
    for question in (Q_TOPOLOGY, Q_ROUTER, Q_OFFLOAD, Q_TIER):
        assert f"│ {question}" in res.output, question
    assert "to resolve 5%" in out and "prefix hit rate" in out and "points" in out


def test_without_a_simulation_the_plan_says_nothing_is_resolved(monkeypatch):
    res = CliRunner().invoke(app, ["plan", "base-a100", "--as-of", ON, "--no-predict"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "not simulated, so not resolved" in out and "--no-predict" in out


@pytest.mark.engine
def test_stacks_plan_base_a100_simulates_and_shows_the_resolvable_differences(monkeypatch,
                                                                                tmp_path):
    """The whole path on DynoSim (.venv-engine), at quick scale on the generic timings."""
    _no_predictor(monkeypatch)
    monkeypatch.setenv("DYNAMO_BENCH_SIMULATE", "on")
    monkeypatch.setenv("DYNAMO_BENCH_SIM_CACHE", str(tmp_path / "sim"))
    res = CliRunner().invoke(app, ["plan", "base-a100", "--scale", "quick", "--as-of", ON])
    assert res.exit_code == 0, res.output
    rows = [line for line in res.output.splitlines() if line.startswith("│ ")]
    for question in (Q_TOPOLOGY, Q_ROUTER, Q_OFFLOAD, Q_TIER):
        mine = [r for r in rows if r.startswith(f"│ {question}")]
        assert mine, question
        # a resolvable difference (a share or points) on every compared figure
        assert all("%" in r or "points" in r or "not judged" in r for r in mine), mine
    assert "not simulated, so not resolved" not in res.output
