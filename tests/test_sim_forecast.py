"""One prediction the user reads (issue 38, item 3): `stacks plan`'s step durations, the campaign
budget and `stacks predict` stand on DynoSim's simulation of the stack's plan
(workloads/sim/forecast.py, record.py), AIConfigurator's static estimate only where the
simulation cannot run (said, never mixed silently) and, on the concurrency sweep, as a
cross-check with its difference. The simulation is replaced by a made-up record here, so the
figures are known; tests/test_sim_record.py runs the real one."""

from __future__ import annotations

import datetime as dt

import pytest
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.config.loader import load_stack
from stacks.plan.forecast import base_campaign
from stacks.predict import predictor
from stacks.sizing.estimate import AIPERF_FIXED_S, workload_steps_seconds
from stacks.sizing.step_itl import ForecastItl, StepItl, step_itls, steps_seconds, summary
from tests.test_step_itl import SWEEP, WORDS, _prediction
from workloads.sim import forecast as sim_forecast
from workloads.sim.forecast import simulated_itl

ON = dt.date(2026, 7, 1)
LABEL = ("SIMULATED (DynoSim (dynamo.replay, ai-dynamo 1.6.1), timings from AIConfigurator "
         "0.12.0 a100_sxm_40gb/vllm 0.14.0, table sha256 7bec7f1d1f0c)")


@pytest.fixture(scope="module")
def agg():
    return load_stack("agg-a100")


def _figures(step: str, itl: float, window: float, duration: float | None) -> dict:
    c = int(step.split("/c")[1]) if "/c" in step and step.startswith("concurrency") else 16
    return {"step": step, "workload": step.split("/")[0], "concurrency": c, "requests": 100,
            "cancelled": 0, "ttft_p50_ms": 40.0, "ttft_p99_ms": 90.0, "itl_p50_ms": itl,
            "itl_p99_ms": itl * 1.2, "request_latency_p50_ms": 512 * itl + 40,
            "output_tok_s": 1000.0 * c / itl, "tok_s_per_user_p50": 1000.0 / itl,
            "reuse": 0.0, "window_s": window, "duration_s": duration,
            "spread": {"runs": [{}, {}, {}], "itl_p50_ms": {"min": itl, "max": itl * 1.04}}}


def _record(stack, itl: float = 4.0, window: float = 50.0) -> dict:
    """A simulation record of every step of the stack's full plan at `itl` (each count-bounded
    step's window `window` s)."""
    from workloads.steps import plan
    steps = {s.id: _figures(s.id, itl, window if s.duration_s is None else s.duration_s + 1,
                            s.duration_s) for s in plan(stack, "full", repeats=1)}
    return {"label": LABEL, "simulator": "DynoSim", "router": "round_robin",
            "topology": "aggregated", "kv_router_runs": 3, "steps": steps}


def test_the_simulation_prices_each_step_and_a_count_bounded_one_at_its_window(agg):
    """Duration-bounded steps decode at the simulated ITL; a step a request count bounds lasts
    its simulated window (+ AIPerf's fixed cost); a step the simulation lacks falls to the
    predicted ITL, then to cost.assumedItlMs, each figure naming its source."""
    record = _record(agg, itl=4.0, window=50.0)
    del record["steps"]["multi_turn/conv8"]                  # not simulated: falls back
    chain = simulated_itl(record, ForecastItl(WORDS, {"multi_turn/conv8": 9.0}))
    assert chain is not None and chain.source == LABEL
    itls = step_itls(agg, "full", chain)
    assert itls["concurrency_sweep/c16"] == StepItl(4.0, LABEL)
    assert itls["prefix_cache/share050"] == StepItl(4.0, LABEL, 50.0)
    assert itls["multi_turn/conv8"] == StepItl(9.0, WORDS)
    plain = workload_steps_seconds(agg, "full")
    got = steps_seconds(agg, "full", chain)
    assert got["concurrency_sweep/c16"] == pytest.approx(3 * 512 * 0.004 + 120 + AIPERF_FIXED_S)
    for step in ("sequence_distributions/uniform", "prefix_cache/share000"):
        assert got[step] == 50.0 + AIPERF_FIXED_S != plain[step]
    # the simulated figures move the durations (a slower simulation, a longer window)
    slower = steps_seconds(agg, "full", simulated_itl(_record(agg, itl=8.0, window=90.0)))
    assert slower["concurrency_sweep/c16"] > got["concurrency_sweep/c16"]
    assert slower["prefix_cache/share000"] == 90.0 + AIPERF_FIXED_S
    lines = summary(itls)
    assert f"ITL 4.0 ms {LABEL}: 15 step(s), 8 of them at their whole window" in lines
    assert simulated_itl({"steps": {}, "not_simulated": "why"}) is None


def _plan(monkeypatch, tmp_path, record_of, *args: str) -> tuple[int, str]:
    monkeypatch.setenv("DYNAMO_BENCH_SIMULATE", "on")
    monkeypatch.setattr(predictor, "predict", lambda s, scale, base=None: _prediction(s.name))
    monkeypatch.setattr(sim_forecast, "simulate_plan",
                        lambda s, scale, kv, **kw: record_of(s))
    res = CliRunner().invoke(app, ["plan", *args, "--as-of", ON.isoformat()])
    return res.exit_code, " ".join(res.output.split())


def test_plan_prices_the_campaign_at_the_simulation(monkeypatch, tmp_path, agg):
    code, out = _plan(monkeypatch, tmp_path, lambda s: _record(s, 4.0, 50.0), "agg-a100")
    assert code == 0, out
    base = load_stack("base-a100")
    at_sim = base_campaign(base, [agg], on=ON, itls={"agg-a100": simulated_itl(
        _record(agg, 4.0, 50.0), ForecastItl(WORDS, {s: 5.0 for s in SWEEP}))})
    assert f"campaign base-a100: wall {at_sim.wall_s / 3600:.2f} h, ${at_sim.cost_usd:,.2f}" \
        in out
    assert f"agg-a100: step durations at ITL 4.0 ms {LABEL}: every step (16), 8 of them at " \
        "their whole window" in out
    # the plan's sweep is the simulated one, AIConfigurator's beside it
    assert "agg-a100: SIMULATED per step" in out and "agg-a100: cross-check, PREDICTED" in out
    code, slower = _plan(monkeypatch, tmp_path, lambda s: _record(s, 8.0, 90.0), "agg-a100")
    at_slower = base_campaign(base, [agg], on=ON, itls={"agg-a100": simulated_itl(
        _record(agg, 8.0, 90.0))})
    assert code == 0 and at_slower.cost_usd > at_sim.cost_usd
    assert f"${at_slower.cost_usd:,.2f}" in slower


def test_a_stack_dynosim_refuses_falls_back_to_the_prediction_and_says_why(monkeypatch,
                                                                           tmp_path):
    why = "serving.router random: DynoSim routes round-robin or with its KV router only"
    code, out = _plan(monkeypatch, tmp_path,
                      lambda s: {"steps": {}, "not_simulated": why}, "agg-a100")
    assert code == 0, out
    assert f"agg-a100: not simulated ({why})" in out
    assert f"agg-a100: step durations at ITL 5.0 ms {WORDS}: 7 step(s)" in out
    assert LABEL not in out and "SIMULATED per step" not in out
    assert f"agg-a100: not simulated ({why}); PREDICTED figures instead" in out


def _predict(monkeypatch, record, *args: str) -> str:
    monkeypatch.setenv("DYNAMO_BENCH_SIMULATE", "on")
    monkeypatch.setattr(predictor, "predict", lambda s, scale, base=None: _prediction(s.name))
    monkeypatch.setattr(sim_forecast, "simulate_plan", lambda s, scale, kv, **kw: record)
    res = CliRunner().invoke(app, ["predict", "agg-a100", *args], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    return res.output


def test_predict_shows_the_simulation_with_aiconfigurator_beside_the_sweep(monkeypatch, agg):
    out = _predict(monkeypatch, _record(agg, itl=4.0))
    assert f"agg-a100: {LABEL} (aggregated, router round_robin, 16 GPUs)" in out
    def cells(line: str) -> list[str]:
        return [c.strip() for c in line.split("│") if c.strip()]
    table, check = [cells(line) for line in out.splitlines() if "concurrency_sweep/c16 " in line]
    # simulated: TTFT p50 40.0, ITL 4.00 (each with its band's cell: none on this record's
    # timings), 4,000 out tok/s, 250 tok/s/GPU (16 GPUs)
    assert (table[3], table[5]) == ("40.0", "4.00") and table[8:10] == ["4,000", "250.0"]
    # AIConfigurator beside it: TTFT 60 (+50 %), ITL 5.0 (+25 %), 200 tok/s (-95 %)
    assert check == ["concurrency_sweep/c16", "40.00", "60.00 (+50%)", "4.00", "5.00 (+25%)",
                     "4,000", "200 (-95%)"]
    # off the sweep no cross-check row
    assert sum("multi_turn/conv8 " in line for line in out.splitlines()) == 1
    assert "cross-check, PREDICTED by AIConfigurator's static estimate on the concurrency " \
        "sweep (difference: predicted / simulated - 1)" in " ".join(out.split())
    assert "SIMULATED SLA best point (sla-tps50-ttft5s): concurrency_sweep/c64" in out
    assert "PREDICTED SLA best point (sla-tps50-ttft5s)" in out
    assert "KV router runs of concurrency_sweep/c16: ITL 4.00-4.16 ms over 3 runs" in out


def test_predict_says_when_it_cannot_simulate_and_shows_the_prediction_labelled(monkeypatch):
    out = _predict(monkeypatch, {"steps": {}, "not_simulated": "the engine environment "
                                 "(/opt/engine/bin/python) is missing: run `make engine`"})
    flat = " ".join(out.split())
    assert ("agg-a100: not simulated (the engine environment (/opt/engine/bin/python) is "
            "missing: run `make engine`); PREDICTED figures instead") in flat
    assert "agg-a100: PREDICTED per step" in flat and "SIMULATED" not in flat


def test_a_campaigns_run_reads_the_simulation_its_plan_made():
    """`workloads campaign` simulates each variant's plan for its forecast; the variant's run
    then simulates its own steps (campaign=True: no restarts) under the same key, so it reads
    the kept record, while a kept worker's new prompt epoch (new seeds) is simulated anew."""
    from stacks.config.loader import load_stack
    from workloads.sim.record import cache_key
    from workloads.steps import plan

    s = load_stack("local-agg")
    key = cache_key(s, None, plan(s, "quick", repeats=1), [777_577] * 2, None)
    assert cache_key(s, None, plan(s, "quick", None, 1, campaign=True), [777_577] * 2,
                     None) == key
    assert cache_key(s, None, plan(s, "quick", None, 1, prompt_epoch=1, campaign=True),
                     [777_577] * 2, None) != key
    assert cache_key(s, None, plan(s, "quick", repeats=1), [777_577, 1], None) != key


def test_check_and_the_campaign_judge_the_budget_at_the_simulation(monkeypatch):
    """`stacks check <base>` and `workloads campaign`'s plan price every variant's steps at its
    simulation, as `stacks plan` does; a variant DynoSim cannot run falls back to its
    prediction, and the check's line counts how many were simulated."""
    from stacks.config.loader import all_stack_names, derived_stack_names
    from workloads.campaign.run import CampaignOptions, plan_aws

    base = load_stack("base-a100")
    variants = [v for v in map(load_stack, [*all_stack_names(), *derived_stack_names()])
                if v.cluster.attach_to == base.name and v.serving is not None]
    refused = "disagg-l40s-decode"

    def record_of(s):
        return ({"steps": {}, "not_simulated": "refused"} if s.name == refused
                else _record(s, 3.0, 20.0))
    monkeypatch.setenv("DYNAMO_BENCH_SIMULATE", "on")
    monkeypatch.setattr(predictor, "predict", lambda s, scale, base=None: _prediction(s.name))
    monkeypatch.setattr(sim_forecast, "simulate_plan", lambda s, scale, kv, **kw: record_of(s))
    itls = {v.name: simulated_itl(record_of(v), ForecastItl(WORDS, {s: 5.0 for s in SWEEP}))
            for v in variants}
    want = base_campaign(base, variants, on=ON, itls=itls).cost_usd
    assert want < base_campaign(base, variants, on=ON).cost_usd
    res = CliRunner().invoke(app, ["check", base.name, "--as-of", ON.isoformat()])
    out = " ".join(res.output.split())
    assert f"${want:,.2f} with 7 of 7 variant(s) at their simulated or predicted figures " \
        "(6 simulated)" in out, out
    monkeypatch.setattr("workloads.campaign.run.today", lambda: ON)
    plan, _ = plan_aws(CampaignOptions(base=base.name, scale="full"))
    assert plan["forecast"]["cost_usd"] == round(want, 2)
