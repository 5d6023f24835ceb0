"""Step durations at the predicted ITL where AIConfigurator predicts the step, else at the
stack's cost.assumedItlMs (stacks/sizing/step_itl.py, issue 27), through the forecast, the
campaign schedule and `stacks plan`."""

from __future__ import annotations

import datetime as dt
import shutil

import pytest
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.config.loader import STACKS_DIR, all_stack_names, derived_stack_names, load_stack
from stacks.plan.forecast import base_campaign, plan_campaigns, standalone_campaign
from stacks.predict import predictor
from stacks.predict.rows import PredictedRow, Prediction, database_words, predicted_itl
from stacks.sizing.estimate import workload_steps_seconds
from stacks.sizing.step_itl import (
    ASSUMED_SOURCE,
    ForecastItl,
    StepItl,
    predicted_id,
    step_itls,
    steps_seconds,
    summary,
)

ON = dt.date(2026, 7, 1)
# the suite runs with the simulation off (tests/conftest.py): these steps fall back to the
# prediction and say so (tests/test_sim_forecast.py runs them simulated)
OFF = "not simulated: simulation switched off (DYNAMO_BENCH_SIMULATE=off); "
DB = {"aiconfigurator": "0.12.0", "aiconfigurator_core": "0.12.0", "backend": "vllm",
      "systems": ["a100_sxm_40gb"], "backend_versions": {"a100_sxm_40gb": "0.14.0"}}
WORDS = "predicted (AIConfigurator 0.12.0 a100_sxm_40gb/vllm 0.14.0)"
SWEEP = [f"concurrency_sweep/c{c}" for c in (1, 2, 4, 8, 16, 32, 64)]


def _sweep_at(ms: float) -> ForecastItl:
    return ForecastItl(WORDS, {step: ms for step in SWEEP})


@pytest.fixture(scope="module")
def agg():
    s = load_stack("agg-a100")
    assert s.cost.assumed_itl_ms == 25.0
    assert s.workloads.concurrency_sweep.at_scale("full").osl == 512
    return s


@pytest.mark.parametrize("step, want", [
    ("concurrency_sweep/c16", "concurrency_sweep/c16"),
    ("concurrency_sweep/c16/r2", "concurrency_sweep/c16"),          # a repeat: its step's
    ("concurrency_sweep/c16/r12", "concurrency_sweep/c16"),
    ("trace_replay/c4-warm", "trace_replay/c4"),                    # the warm pass: its trace's
    ("trace_replay/c4-warm/r3", "trace_replay/c4"),
    ("concurrency_sweep/c16/rx", "concurrency_sweep/c16/rx"),       # not a repeat
    ("multi_turn/conv8", "multi_turn/conv8"),
])
def test_predicted_id(step, want):
    assert predicted_id(step) == want


def test_step_itls_fall_back_per_step(agg):
    pred = ForecastItl(WORDS, {**{s: 6.0 for s in SWEEP}, "concurrency_sweep/c16": 0.0,
                                "multi_turn/conv8": 9.5})
    got = step_itls(agg, "full", pred)
    assert list(got) == list(workload_steps_seconds(agg, "full"))
    assumed = StepItl(25.0, ASSUMED_SOURCE)
    assert got["concurrency_sweep/c1"] == StepItl(6.0, WORDS)
    assert got["multi_turn/conv8"] == StepItl(9.5, WORDS)
    assert got["concurrency_sweep/c16"] == assumed          # a non-positive figure is no figure
    assert got["prefix_cache/share050"] == assumed          # a step the prediction lacks
    assert set(step_itls(agg, "full", None).values()) == {assumed}
    assert got["concurrency_sweep/c1"].words == f"ITL 6.0 ms {WORDS}"


def test_repeats_and_warm_passes_take_their_steps_prediction():
    s = load_stack("local-recipe-motif3")       # trace_replay with a warm pass
    pred = ForecastItl(WORDS, {"trace_replay/c6": 7.0})
    got = step_itls(s, "full", pred, repeats=2)
    for step in ("trace_replay/c6/r1", "trace_replay/c6/r2", "trace_replay/c6-warm/r1",
                 "trace_replay/c6-warm/r2"):
        assert got[step] == StepItl(7.0, WORDS), step
    assert got["trace_replay/c8/r1"].source == ASSUMED_SOURCE


def test_steps_seconds_is_the_estimate_at_each_steps_itl(agg):
    plain = workload_steps_seconds(agg, "full")
    assert steps_seconds(agg, "full", None) == plain
    assert steps_seconds(agg, "full", ForecastItl(WORDS, {})) == plain
    lower, higher = steps_seconds(agg, "full", _sweep_at(5.0)), \
        steps_seconds(agg, "full", _sweep_at(40.0))
    for step in SWEEP:   # 120 s + 512 tokens x ITL (the grace) + 10 s AIPerf
        assert plain[step] == pytest.approx(3 * 512 * 0.025 + 120 + 10)
        assert lower[step] == pytest.approx(3 * 512 * 0.005 + 120 + 10)
        assert higher[step] == pytest.approx(3 * 512 * 0.040 + 120 + 10)
        assert lower[step] < plain[step] < higher[step]
    others = [k for k in plain if k not in SWEEP]
    assert others and all(lower[k] == higher[k] == plain[k] for k in others)
    mixed = steps_seconds(agg, "full", ForecastItl(WORDS, {"concurrency_sweep/c1": 5.0,
                                                            "concurrency_sweep/c2": 40.0}))
    assert (mixed["concurrency_sweep/c1"], mixed["concurrency_sweep/c2"]) == \
        (lower["concurrency_sweep/c1"], higher["concurrency_sweep/c2"])
    assert mixed["concurrency_sweep/c4"] == plain["concurrency_sweep/c4"]


def test_the_schedule_and_the_forecast_price_steps_at_the_predicted_itl(agg):
    base = load_stack("base-a100")
    plain = base_campaign(base, [agg], on=ON)
    assert base_campaign(base, [agg], on=ON, itls={"disagg-a100": _sweep_at(5.0)}).cost_usd \
        == plain.cost_usd                       # another stack's prediction changes nothing
    fast = base_campaign(base, [agg], on=ON, itls={"agg-a100": _sweep_at(5.0)})
    slow = base_campaign(base, [agg], on=ON, itls={"agg-a100": _sweep_at(40.0)})
    (p,), (f,), (s,) = plain.slots, fast.slots, slow.slots
    # warm-up (2 request latencies) and grace (1) at each ITL: 215.04 s over the 7 steps
    saved = 7 * 3 * 512 * (0.025 - 0.005)
    assert p.load_window_s - f.load_window_s == pytest.approx(saved)
    assert s.load_window_s - p.load_window_s == pytest.approx(7 * 3 * 512 * 0.015)
    assert f.steps_s == steps_seconds(agg, "full", _sweep_at(5.0))
    assert fast.wall_s < plain.wall_s < slow.wall_s
    assert fast.cost_usd < plain.cost_usd < slow.cost_usd
    lone = load_stack("agg-a100-standalone")
    alone = standalone_campaign(lone, on=ON)
    quick = standalone_campaign(lone, on=ON, itls={lone.name: _sweep_at(5.0)})
    assert alone.runs[0].load_s - quick.runs[0].load_s == pytest.approx(saved)
    assert alone.wall_s - quick.wall_s == pytest.approx(saved)
    assert quick.cost_usd < alone.cost_usd
    planned = plan_campaigns([agg, lone], {"base-a100": base}, [], "full", ON,
                             {"agg-a100": _sweep_at(5.0), lone.name: _sweep_at(5.0)})
    assert [c.cost_usd for c in planned] == [fast.cost_usd, quick.cost_usd]


def test_summary_names_each_source(agg):
    pred = ForecastItl(WORDS, {**{s: 4.0 + i for i, s in enumerate(SWEEP)}})
    lines = summary(step_itls(agg, "full", pred), "not predicted: why")
    assert lines[0] == f"ITL 4.0-10.0 ms {WORDS}: 7 step(s)"
    assert lines[1].startswith("ITL 25.0 ms assumed (cost.assumedItlMs): multi_turn/conv8, "
                               "sequence_distributions/uniform")
    assert lines[1].endswith("prefix_cache/share100 (not predicted: why)")
    assert summary(step_itls(agg, "full", None), "off") == \
        ["ITL 25.0 ms assumed (cost.assumedItlMs): every step (16) (off)"]
    every = ForecastItl(WORDS, {k: 5.0 for k in workload_steps_seconds(agg, "full")})
    assert summary(step_itls(agg, "full", every), "unused") == \
        [f"ITL 5.0 ms {WORDS}: every step (16)"]


def _row(step: str, itl: float) -> PredictedRow:
    return PredictedRow(step=step, workload=step.split("/")[0], concurrency=1, isl=1024,
                        osl=512, ttft_ms=60.0, itl_ms=itl, request_latency_ms=2000.0,
                        output_tok_s=200.0, tok_s_per_gpu=12.5, tok_s_per_user=200.0,
                        usd_per_1m_output=None, prefix=0)


def _prediction(stack: str, itl: float = 5.0) -> Prediction:
    return Prediction(stack, database=dict(DB), rows=[_row(s, itl) for s in SWEEP])


def test_a_prediction_gives_its_itl_per_step_or_none():
    assert database_words(DB) == WORDS
    got = predicted_itl(_prediction("agg-a100"))
    assert got == ForecastItl(WORDS, {s: 5.0 for s in SWEEP})
    assert predicted_itl(Prediction("x", not_predicted="no model")) is None
    nothing = _prediction("x")
    nothing.not_predicted = "the model is not in the database"
    assert predicted_itl(nothing) is None
    assert predicted_itl(Prediction("x", database=dict(DB))) is None      # no rows


def _plan(monkeypatch, predict, *args: str) -> tuple[int, str]:
    monkeypatch.setattr(predictor, "predict", predict)
    res = CliRunner().invoke(app, ["plan", *args, "--as-of", ON.isoformat(), "--no-resolution"])
    return res.exit_code, " ".join(res.output.split())


def test_plan_prices_steps_at_the_prediction_by_default(monkeypatch, agg):
    asked: list[str] = []

    def fake(stack, scale, base=None):
        asked.append(stack.name)
        return _prediction(stack.name)

    code, out = _plan(monkeypatch, fake, "agg-a100")
    assert code == 0, out
    assert asked == ["agg-a100"]                         # predictions are on unless --no-predict
    assert "base-a100: step durations" not in out        # the base serves nothing
    fast = base_campaign(load_stack("base-a100"), [agg], on=ON,
                         itls={"agg-a100": _sweep_at(5.0)})
    assert f"campaign base-a100: wall {fast.wall_s / 3600:.2f} h, ${fast.cost_usd:,.2f}" in out
    assert (f"agg-a100: step durations at ITL 5.0 ms {WORDS}: 7 step(s) agg-a100: step "
            "durations at ITL 25.0 ms assumed (cost.assumedItlMs): multi_turn/conv8") in out
    assert f"prefix_cache/share100 ({OFF}not in the prediction)" in out

    code, off = _plan(monkeypatch, fake, "agg-a100", "--no-predict")
    assert code == 0 and asked == ["agg-a100"], off      # not asked again
    plain = base_campaign(load_stack("base-a100"), [agg], on=ON)
    assert f"campaign base-a100: wall {plain.wall_s / 3600:.2f} h, ${plain.cost_usd:,.2f}" in off
    assert ("agg-a100: step durations at ITL 25.0 ms assumed (cost.assumedItlMs): every step "
            "(16) (predictions off: --no-predict)") in off


def test_plan_falls_back_to_the_assumed_itl_and_says_why(monkeypatch):
    def missing(stack, scale, base=None):
        raise predictor.PredictorUnavailable("the predictor is not installed")

    code, out = _plan(monkeypatch, missing, "agg-a100", "agg-a100-standalone")
    assert code == 0, out
    assert "predictions: the predictor is not installed" in out
    for name in ("agg-a100", "agg-a100-standalone"):
        assert (f"{name}: step durations at ITL 25.0 ms assumed (cost.assumedItlMs): every "
                f"step (16) ({OFF}no predictor: see `predictions:` above)") in out

    def unknown(stack, scale, base=None):
        return Prediction(stack.name, not_predicted=f"{stack.model.id} is not in AIConfigurator "
                          "0.12.0's database (it ships ...): nothing predicted")

    code, out = _plan(monkeypatch, unknown, "agg-b200-motif3")
    assert code == 0, out
    assert ("agg-b200-motif3: step durations at ITL 15.0 ms assumed (cost.assumedItlMs): every "
            f"step (5) ({OFF}nothing predicted: Motif-Technologies/Motif-3-NVFP4 is not in "
            "AIConfigurator 0.12.0's database)") in out


def test_plan_check_and_campaign_judge_the_budget_at_the_predicted_itl(monkeypatch, tmp_path):
    """A budget between the forecast at the predicted ITL and at cost.assumedItlMs: `stacks
    plan`, `stacks check` and `workloads campaign` all price it at the prediction and accept
    it, each saying the assumed figure is above; with --no-predict all three refuse it."""
    from workloads.campaign.run import CampaignOptions, CampaignRefused, plan_aws

    base = load_stack("base-a100")
    variants = [load_stack(n) for n in [*all_stack_names(), *derived_stack_names()]
                if load_stack(n).cluster.attach_to == base.name]

    def ids(stack):
        return list(dict.fromkeys(map(predicted_id, workload_steps_seconds(stack, "full"))))

    itls = {v.name: ForecastItl(WORDS, {i: 2.0 for i in ids(v)}) for v in variants}
    assumed = base_campaign(base, variants, on=ON).cost_usd
    predicted = base_campaign(base, variants, on=ON, itls=itls).cost_usd
    assert predicted < assumed - 20
    for f in STACKS_DIR.glob("Pulumi.*.yaml"):
        shutil.copy(f, tmp_path / f.name)
    path = tmp_path / f"Pulumi.{base.name}.yaml"
    text = path.read_text()
    old = next(line for line in text.splitlines() if "campaignBudgetUsd:" in line)
    path.write_text(text.replace(old, f"    campaignBudgetUsd: {round((assumed + predicted) / 2)}"))

    def fake(stack, scale, base=None):
        return Prediction(stack.name, database=dict(DB), rows=[_row(i, 2.0) for i in ids(stack)])

    warned = (f"base-a100: within its budget at the simulated or predicted figures, but "
              f"${assumed:,.2f} at cost.assumedItlMs: should the GPUs decode slower than "
              "simulated")
    code, out = _plan(monkeypatch, fake, base.name, "--stacks-dir", str(tmp_path))
    assert code == 0, out
    assert "campaign base-a100: wall" in out and f"${predicted:,.2f} billed" in out
    assert warned in out
    code, off = _plan(monkeypatch, fake, base.name, "--stacks-dir", str(tmp_path), "--no-predict")
    assert code == 2 and "above the budget" in off, off
    for extra, want in (([], 0), (["--no-predict"], 2)):
        res = CliRunner().invoke(app, ["check", base.name, "--stacks-dir", str(tmp_path),
                                       "--as-of", ON.isoformat(), *extra])
        out = " ".join(res.output.split())
        assert res.exit_code == want, out
        assert ("above the budget" in out) == bool(extra)
    assert (f"${predicted:,.2f} with 7 of 7 variant(s) at their simulated or predicted "
            f"figures (0 simulated), ${assumed:,.2f} all at cost.assumedItlMs") in " ".join(
        CliRunner().invoke(app, ["check", base.name, "--stacks-dir", str(tmp_path)]).output.split())
    # the campaign's plan (its budget gate and load windows) stands on the same prediction
    monkeypatch.setattr("workloads.campaign.run.today", lambda: ON)
    opts = CampaignOptions(base=base.name, stacks_dir=tmp_path, scale="full")
    plan, _ = plan_aws(opts)
    assert plan["slots"] and all(s["forecast"]["load_window_s"] for s in plan["slots"])
    opts.predict = False
    with pytest.raises(CampaignRefused, match="above the budget"):
        plan_aws(opts)


