"""The simulation record (workloads/sim/record.py) through the real DynoSim (Dynamo 1.6.1's
dynamo.replay in .venv-engine): what `stacks predict`, the forecasts and a run's manifest keep
of a stack's steps, kept by what decides it so the same stack, scale and code simulate once,
and why there is none where DynoSim cannot run the stack."""

from __future__ import annotations

import pytest

from stacks.config.schema import RouterMode
from stacks.preflight.run import check_stack
from workloads.sim import record as sim_record
from workloads.steps import plan

pytestmark = pytest.mark.engine
SIMULATED = "SIMULATED (DynoSim (dynamo.replay, ai-dynamo 1.6.1), "


@pytest.fixture
def simulating(monkeypatch, tmp_path):
    monkeypatch.setenv(sim_record.SIMULATE_VAR, "on")
    monkeypatch.setenv(sim_record.CACHE_VAR, str(tmp_path / "sim"))
    return tmp_path / "sim"


def _kv(name: str):
    report = check_stack(name)
    return report.stack, [m.kv_capacity_tokens for m in report.memory]


def test_a_plan_is_simulated_once_and_every_step_carries_its_figures(simulating, monkeypatch):
    stack, kv = _kv("local-agg")
    rec = sim_record.simulate_plan(stack, "quick", kv)
    assert rec["label"].startswith(SIMULATED) and rec["simulator"] == "DynoSim"
    assert rec["label"] == sim_record.simulate_plan(stack, "quick", kv)["label"]
    steps = plan(stack, "quick", repeats=1)
    assert list(rec["steps"]) == [s.id for s in steps]
    for s in steps:
        f = rec["steps"][s.id]
        assert f["duration_s"] == s.duration_s and f["requests"] > 0, s.id
        assert f["itl_p50_ms"] > 0 and f["ttft_p50_ms"] > 0 and f["window_s"] > 0, s.id
        assert f["spread"]["runs"], s.id
    assert rec["cache"]["kept"] is False and rec["kv_router_runs"] == 1
    # the same stack, scale and code: kept, DynoSim not run again
    monkeypatch.setattr("workloads.sim.plan_sim.simulate_steps",
                        lambda *a, **k: pytest.fail("simulated twice"))
    again = sim_record.simulate_plan(stack, "quick", kv)
    assert again["cache"]["kept"] is True and again["steps"] == rec["steps"]
    # another KV capacity is another simulation
    with pytest.raises(pytest.fail.Exception, match="simulated twice"):
        sim_record.simulate_plan(stack, "quick", [k // 2 for k in kv])


def test_what_dynosim_cannot_run_is_said_not_simulated(simulating, monkeypatch):
    stack, kv = _kv("local-agg")
    assert stack.serving is not None
    rand = stack.model_copy(update={"serving": stack.serving.model_copy(
        update={"router": RouterMode.RANDOM})})
    rec = sim_record.simulate_plan(rand, "quick", kv)
    assert rec["steps"] == {} and "serving.router random" in rec["not_simulated"]
    # a refusal the same stack and code meet again is kept too: said at once the next time
    monkeypatch.setattr("workloads.sim.build.make", lambda *a, **k: pytest.fail("made"))
    again = sim_record.simulate_plan(rand, "quick", kv)
    assert again["cache"]["kept"] is True and again["not_simulated"] == rec["not_simulated"]
    monkeypatch.setenv("DYNAMO_BENCH_ENGINE_PYTHON", "/nonexistent/python")
    monkeypatch.setenv(sim_record.CACHE_VAR, "")
    rec = sim_record.simulate_plan(stack, "quick", kv)
    assert "is missing: run `make engine`" in rec["not_simulated"]
    monkeypatch.setenv(sim_record.SIMULATE_VAR, "off")
    assert sim_record.simulate_plan(stack, "quick", kv)["not_simulated"] == \
        "simulation switched off (DYNAMO_BENCH_SIMULATE=off)"


def test_a_run_keeps_the_simulation_of_its_own_steps_beside_the_prediction(simulating,
                                                                            tmp_path,
                                                                            monkeypatch):
    """`workloads run` on the fake cluster (tests/test_aws_target_run.py): the manifest keeps,
    at run start, DynoSim's figures of every step the run plans, beside AIConfigurator's
    record (which alone sizes the steps' grace and ramp), and the report puts them beside the
    measured ones. A second run of the same stack, scale and code reads the kept record."""
    import json

    from reports.build import build_report
    from tests.aws_target_deploy import connect_runner, deploy
    from workloads.runner import RunOptions, run

    d = connect_runner(monkeypatch, deploy(tmp_path, "agg-a100"))

    def go(run_id: str) -> dict:
        result = run(RunOptions(stack="agg-a100", scale="quick", run_id=run_id,
                                only=["concurrency_sweep"], runs_dir=tmp_path / "runs",
                                outputs_file=d.outputs, show_progress=False))
        assert result.status == "complete", result.steps
        return json.loads((result.run_dir / "manifest.json").read_text())

    m = go("first")
    sim = m["simulation"]
    assert sim["label"].startswith(SIMULATED), sim.get("not_simulated")
    assert list(sim["steps"]) == list(m["steps"]) and sim["cache"]["kept"] is False
    for step, f in sim["steps"].items():
        assert f["itl_p50_ms"] > 0 and f["output_tok_s"] > 0 and f["spread"]["runs"], step
    assert m["predictions"]["steps"] or m["predictions"]["not_predicted"]
    again = go("second")["simulation"]
    assert again["cache"]["kept"] is True and again["steps"] == sim["steps"]
    report = build_report([tmp_path / "runs" / "agg-a100" / "first"], tmp_path / "out",
                          name="aws")
    compared = report.tables["simulated_vs_measured"]
    assert sorted(compared["step"]) == sorted(m["steps"])
    assert compared["itl_p50_ms_simulated"].tolist() == [
        sim["steps"][s]["itl_p50_ms"] for s in compared["step"]]
