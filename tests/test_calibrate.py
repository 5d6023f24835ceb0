"""Calibration without the engine: scaled timing tables, the fit on synthetic steps whose true
factors are known, and measured steps read back from run records (the live known-truth
rehearsal is tests/test_calibrate_engine.py)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from stacks.config.loader import load_stack
from stacks.predict.mocker_table import MockerTable
from stacks.predict.table_scale import TableError, scale_table, scaled_arrays
from workloads.manifest import stack_record
from workloads.sim import calibrate_fit as cf
from workloads.sim.calibrate import informing, keys_of
from workloads.sim.measured import (
    DISPATCHED,
    RECEIVED,
    NotMeasured,
    frontend_figures,
    invocation,
    read_run,
    run_dirs,
)
from workloads.targets import mocker_timings
from workloads.targets.mocker_timings import MockerTimings, from_tables, generic, label, words

# --- scaled tables ---------------------------------------------------------------------------


def _arrays() -> dict[str, np.ndarray]:
    return {"prefill_isl": np.array([1.0, 1024.0, 4096.0]),
            "prefill_ttft_ms": np.array([5.0, 30.0, 95.0]),
            "decode_active_kv_tokens": np.array([0.0, 64.0]),
            "decode_context_length": np.array([1.0, 64.0, 128.0]),
            "decode_itl": np.array([[3.0, 3.5, 4.0], [3.2, 3.7, 4.2]])}


def _source(tmp_path: Path) -> tuple[Path, dict]:
    path = tmp_path / "aic-a100-tp4.npz"
    np.savez(path, **_arrays())
    record = {"source": "SIMULATED from AIConfigurator 0.12.0", "system": "a100_sxm_40gb",
              "tp": 4, "model": "Qwen/Qwen3-30B-A3B", "aiconfigurator": "0.12.0",
              "backend": "vllm", "backend_version": "0.14.0",
              "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "file": path.name}
    return path, record


def test_a_scaled_table_multiplies_prefill_and_decode_times_and_keeps_the_axes():
    out = scaled_arrays(_arrays(), 0.8, 1.25)
    src = _arrays()
    assert np.allclose(out["prefill_ttft_ms"], src["prefill_ttft_ms"] * 0.8)
    assert np.allclose(out["decode_itl"], src["decode_itl"] * 1.25)
    for axis in ("prefill_isl", "decode_active_kv_tokens", "decode_context_length"):
        assert np.array_equal(out[axis], src[axis])


def test_a_scaled_table_is_the_same_bytes_every_time_and_records_where_it_came_from(tmp_path):
    source, record = _source(tmp_path)
    a = scale_table(source, 0.8, 1.25, tmp_path / "a", ["runs/x/r2", "runs/x/r1"], record)
    b = scale_table(source, 0.8, 1.25, tmp_path / "b", ["runs/x/r1", "runs/x/r2"], record)
    assert a.path.read_bytes() == b.path.read_bytes() and a.path.name == b.path.name
    assert a.record["sha256"] == hashlib.sha256(a.path.read_bytes()).hexdigest()
    assert a.record["calibration"] == {
        "source_sha256": record["sha256"], "source_file": source.name, "prefill_factor": 0.8,
        "decode_factor": 1.25, "fitted_from": ["runs/x/r1", "runs/x/r2"]}
    assert a.record["system"] == "a100_sxm_40gb" and a.record["tp"] == 4
    assert json.loads(a.path.with_suffix(".json").read_text()) == a.record
    with np.load(a.path) as z:
        assert np.allclose(z["prefill_ttft_ms"], _arrays()["prefill_ttft_ms"] * 0.8)
    other = scale_table(source, 0.8, 1.2, tmp_path / "a", ["runs/x/r1"], record)
    assert other.path != a.path and other.record["sha256"] != a.record["sha256"]


@pytest.mark.parametrize("factor", [0.0, -1.0, math.nan, math.inf])
def test_a_factor_that_is_no_scale_is_refused_naming_it(factor):
    with pytest.raises(TableError, match="prefill factor"):
        scaled_arrays(_arrays(), factor, 1.0)


def test_a_file_without_the_tables_keys_is_refused():
    arrays = _arrays()
    del arrays["decode_itl"]
    with pytest.raises(TableError, match="missing decode_itl"):
        scaled_arrays(arrays, 1.0, 1.0)


def test_calibrated_timings_scale_only_the_roles_given_and_say_so(tmp_path):
    source, record = _source(tmp_path)
    timings = from_tables([MockerTable("prefill", source, record),
                           MockerTable("decode", source, {**record, "sha256": "cd" * 32})])
    cal = mocker_timings.scaled(timings, {"decode": (1.0, 1.25)}, tmp_path / "cal",
                                ["runs/x/r1"])
    assert cal.tables["prefill"] == source and cal.tables["decode"] != source
    text = label(cal.record)
    assert "decode: timings from AIConfigurator 0.12.0 a100_sxm_40gb/vllm 0.14.0 x " \
           "calibrated (prefill x1.000, decode x1.250, fitted to 1 measured run)" in text
    assert text.count("calibrated") == 1       # the prefill table is AIConfigurator's own
    assert words(cal.record).short.endswith(", calibrated")
    assert "fitted to measured runs" in words(cal.record).meaning
    assert "calibrated" not in words(timings.record).short


def test_generic_timings_have_no_table_to_calibrate(tmp_path):
    with pytest.raises(TableError, match="generic"):
        mocker_timings.scaled(generic("not in the database"), {"worker": (1.0, 1.0)},
                              tmp_path, [])


# --- the fit on synthetic steps whose truth is known -------------------------------------------

AGG = cf.Key("a100_sxm_40gb", 4, "worker", "m")
PRE, DEC = cf.Key("a100_sxm_40gb", 4, "prefill", "m"), cf.Key("a100_sxm_40gb", 4, "decode", "m")


class Model:
    """A step as a linear timing model: own prefill A (ms at factor 1), waiting behind other
    requests' steps B (at decode factor 1), decode step D, prefill interference I per token;
    the live engine adds a transport `c` and, on queue-heavy steps, `live_queue` of its own."""

    def __init__(self, a: float, b: float, d: float, i: float, live_queue: float = 0.0):
        self.a, self.b, self.d, self.i, self.live_queue = a, b, d, i, live_queue

    def sim(self, p: float, dec: float) -> cf.SimFigures:
        ttft = p * self.a + dec * self.b
        return cf.SimFigures(ttft, dec * self.d + p * self.i, p * self.a / ttft, p * self.a)


def _setup(steps: dict[tuple[str, str], Model], truth: dict[cf.Key, tuple[float, float]],
           transport: dict[str, float], ttft_key: cf.Key = AGG, itl_key: cf.Key = AGG):
    evidence = []
    for (run, step), m in steps.items():
        live = m.sim(truth[ttft_key][0], truth[itl_key][1])
        evidence.append(cf.Evidence(run, step, ttft_key, itl_key,
                                    live.ttft_ms + transport[run] + m.live_queue, live.itl_ms))

    def simulate(factors):
        return {k: m.sim(factors[ttft_key][0], factors[itl_key][1]) for k, m in steps.items()}
    return evidence, simulate


SWEEP = {("r", "c1-1k"): Model(30.0, 0.0, 4.0, 0.0),
         ("r", "c1-4k"): Model(95.0, 0.0, 4.2, 0.0),
         ("r", "c4"): Model(30.0, 9.0, 4.5, 1.0, live_queue=5.0),
         ("r", "c16"): Model(30.0, 40.0, 7.0, 2.0, live_queue=20.0)}


def test_the_fit_recovers_known_factors_and_the_runs_transport():
    evidence, simulate = _setup(SWEEP, {AGG: (0.8, 1.25)}, {"r": 1.5})
    fit = cf.fit(evidence, simulate)
    assert fit.converged and fit.iterations <= 5
    assert fit.prefill[AGG].value == pytest.approx(0.8, rel=1e-3)
    assert fit.decode[AGG].value == pytest.approx(1.25, rel=1e-3)
    assert fit.intercepts["r"] == pytest.approx(1.5, abs=0.01)
    assert fit.intercept_mode[AGG] == cf.PER_RUN
    assert fit.prefill_steps[AGG] == cf.PREFILL_DOMINATED
    assert {s.step for s in fit.steps if s.informs_prefill} == {"c1-1k", "c1-4k"}
    assert fit.decode[AGG].rms == pytest.approx(0.0, abs=1e-3)
    c16 = next(s for s in fit.steps if s.step == "c16")
    assert c16.ttft_error < -0.1          # the live queueing the replay lacks, shown


def test_queue_heavy_steps_would_bias_the_prefill_factor(monkeypatch):
    """The rule that keeps them out, broken: the same steps miss the truth by more than the
    3 % issue 38 allows."""
    monkeypatch.setattr(cf, "PREFILL_SHARE", 0.0)
    evidence, simulate = _setup(SWEEP, {AGG: (0.8, 1.25)}, {"r": 1.5})
    fit = cf.fit(evidence, simulate)
    assert abs(fit.prefill[AGG].value / 0.8 - 1) > 0.03


def test_one_prompt_length_cannot_tell_transport_from_prefill_and_says_so():
    steps = {("r", "c1"): Model(30.0, 0.0, 4.0, 0.0), ("r", "c2"): Model(31.0, 0.0, 4.1, 0.0)}
    evidence, simulate = _setup(steps, {AGG: (0.8, 1.25)}, {"r": 1.5})
    fit = cf.fit(evidence, simulate)
    assert fit.intercept_mode[AGG] == cf.NONE and fit.intercepts == {}
    # a plain ratio: the transport read as prefill (1.5 ms on 24 ms)
    assert fit.prefill[AGG].value == pytest.approx(0.8 + 1.5 / 30.0, rel=0.01)


def test_runs_of_one_step_each_share_one_pooled_intercept():
    steps = {("r1", "short"): Model(30.0, 0.0, 4.0, 0.0),
             ("r2", "long"): Model(95.0, 0.0, 4.0, 0.0)}
    evidence, simulate = _setup(steps, {AGG: (1.3, 0.9)}, {"r1": 2.0, "r2": 2.0})
    fit = cf.fit(evidence, simulate)
    assert fit.intercept_mode[AGG] == cf.POOLED
    assert fit.prefill[AGG].value == pytest.approx(1.3, rel=1e-3)
    assert fit.intercepts == pytest.approx({"r1": 2.0, "r2": 2.0}, abs=0.01)


def test_disaggregated_steps_fit_the_prefill_roles_prefill_and_the_decode_roles_decode():
    steps = {("r", "c1-1k"): Model(30.0, 0.0, 4.0, 0.0),
             ("r", "c1-4k"): Model(95.0, 0.0, 4.0, 0.0)}
    evidence, simulate = _setup(steps, {PRE: (1.1, 1.0), DEC: (1.0, 0.95)}, {"r": 1.0},
                                ttft_key=PRE, itl_key=DEC)
    fit = cf.fit(evidence, simulate)
    assert fit.prefill[PRE].value == pytest.approx(1.1, rel=1e-3) and fit.prefill[PRE].fitted
    assert fit.decode[DEC].value == pytest.approx(0.95, rel=1e-3) and fit.decode[DEC].fitted
    assert not fit.decode[PRE].fitted and fit.decode[PRE].value == 1.0
    assert not fit.prefill[DEC].fitted and fit.prefill[DEC].value == 1.0
    assert fit.factors() == pytest.approx({PRE: (fit.prefill[PRE].value, 1.0),
                                           DEC: (1.0, fit.decode[DEC].value)})


def test_nothing_to_fit_is_refused():
    with pytest.raises(cf.FitError, match="no measured step"):
        cf.fit([], lambda factors: {})


def test_the_roles_each_figure_informs():
    keys = {"prefill": PRE, "decode": DEC}
    assert informing(keys) == (PRE, DEC)
    assert informing({"worker": AGG}) == (AGG, AGG)
    t = MockerTimings({"worker": Path("/t.npz")}, {"tables": [
        {"role": "worker", "system": "a100_sxm_40gb", "tp": 4, "model": "m"}]})
    assert keys_of(t) == {"worker": AGG}


def test_a_stacks_tables_take_the_factors_of_their_own_key_only():
    from workloads.sim.calibrate import Calibration
    evidence, simulate = _setup(SWEEP, {AGG: (0.8, 1.25)}, {"r": 1.5})
    cal = Calibration(cf.fit(evidence, simulate), ["runs/x/r"], [])

    def timings(model: str, tp: int) -> MockerTimings:
        return MockerTimings({"worker": Path("/t.npz")}, {"tables": [
            {"role": "worker", "system": "a100_sxm_40gb", "tp": tp, "model": model}]})
    assert cal.scales(timings("m", 4)) == {"worker": cal.fit.factors()[AGG]}
    assert cal.scales(timings("m-FP8", 4)) == {} and cal.scales(timings("m", 2)) == {}


# --- measured steps read back from a run record ------------------------------------------------


def _trace_line(ttft: float, wait: float | None, itl: float, out: int) -> str:
    req = {"request_id": "x", "ttft_ms": ttft, "avg_itl_ms": itl, "output_tokens": out,
           **({"prefill_wait_time_ms": wait} if wait is not None else {})}
    return json.dumps({"event": {"schema": "dynamo.request.trace.v1",
                                 "event_type": "request_end", "request": req}})


def test_the_frontends_figures_take_ttft_from_dispatch_only_where_every_request_says_when():
    lines = [_trace_line(30.0, 2.0, 5.0, 64), _trace_line(32.0, 3.0, 5.5, 1), "not json"]
    ttft, itl, dispatched = frontend_figures(lines)
    assert ttft == [30.0, 32.0] and itl == [5.0] and dispatched == [28.0, 29.0]
    _, _, none = frontend_figures([*lines, _trace_line(31.0, None, 5.0, 64)])
    assert none == []


def _run(tmp_path: Path, kind: str = "local", name: str = "local-agg") -> Path:
    stack = load_stack("local-agg")
    config, digest = stack_record(stack)
    run = tmp_path / "runs" / name / "r1"
    (run / "datasets" / "concurrency_sweep").mkdir(parents=True)
    (run / "concurrency_sweep" / "c1").mkdir(parents=True)
    data = b'{"input_length": 1024, "output_length": 64, "hash_ids": [0, 1]}\n' * 3
    (run / "datasets" / "concurrency_sweep" / "c1.jsonl").write_bytes(data)
    (run / "concurrency_sweep" / "c1" / "request_trace.jsonl").write_text(
        "\n".join(_trace_line(30.0 + i, 2.0, 5.0, 64) for i in range(2)) + "\n")
    record = {"id": "concurrency_sweep/c1", "status": "complete", "concurrency": 1,
              "seed": 7, "duration_s": 12.0, "params": {"block_size": 512},
              "dataset": {"path": "datasets/concurrency_sweep/c1.jsonl", "rows": 3,
                          "sha256": hashlib.sha256(data).hexdigest()},
              "grace": {"grace_period_s": 31.0}, "ramp": {"concurrency_ramp_s": 0.5},
              "aiperf_warmup_requests": 1, "artifact_dir": "concurrency_sweep/c1"}
    failed = {**record, "id": "concurrency_sweep/c4", "status": "failed"}
    manifest = {"stack": "local-agg", "target": "local", "stack_config": config,
                "stack_config_sha256": digest, "target_info": {"kind": kind},
                "steps": {record["id"]: record, failed["id"]: failed}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_a_step_record_gives_the_invocation_the_replay_needs(tmp_path):
    run = read_run(_run(tmp_path))
    (step,) = run.steps
    inv = step.invocation
    assert (inv.concurrency, inv.seed, inv.warmup_requests, inv.request_count) == (1, 7, 1, 2)
    assert (inv.duration_s, inv.grace_period_s, inv.concurrency_ramp_s) == (12.0, 31.0, 0.5)
    assert inv.block_size == 512 and not inv.fixed_schedule
    assert step.fit_ttft_ms == (28.0, 29.0) and step.ttft_basis == DISPATCHED
    assert run.skipped == [("concurrency_sweep/c4", "status failed")]
    assert RECEIVED != DISPATCHED


def test_a_dataset_changed_since_the_run_is_refused(tmp_path):
    run = _run(tmp_path)
    (run / "datasets" / "concurrency_sweep" / "c1.jsonl").write_bytes(b"{}\n")
    record = json.loads((run / "manifest.json").read_text())["steps"]["concurrency_sweep/c1"]
    with pytest.raises(NotMeasured, match="not the ones step concurrency_sweep/c1 sent"):
        invocation(record, run, load_stack("local-agg"))


def test_a_simulated_run_is_refused(tmp_path):
    with pytest.raises(NotMeasured, match="simulated run"):
        read_run(_run(tmp_path, kind="sim"))


def test_a_campaign_directory_names_its_variants_runs(tmp_path):
    run = _run(tmp_path)
    campaign = tmp_path / "runs" / "campaigns" / "local" / "r1"
    campaign.mkdir(parents=True)
    (campaign / "campaign.json").write_text(json.dumps({
        "plan": {"slots": [{"name": "local-agg"}, {"name": "local-disagg"}]},
        "slots": {"local-agg": {"run_dir": "/moved/away"}, "local-disagg": {}}}))
    assert run_dirs([campaign, run]) == [run.resolve()]
    with pytest.raises(NotMeasured, match="neither a run directory"):
        run_dirs([tmp_path])


def test_the_cli_refuses_what_is_no_measured_run_before_replaying_anything(tmp_path):
    from typer.testing import CliRunner

    from workloads.__main__ import app
    done = CliRunner().invoke(app, ["calibrate", str(tmp_path)])
    assert done.exit_code == 2
    assert "neither a run directory" in done.output
    done = CliRunner().invoke(app, ["calibrate", str(_run(tmp_path, kind="sim"))])
    assert done.exit_code == 2 and "simulated run" in done.output
    failed = _run(tmp_path / "f")
    manifest = json.loads((failed / "manifest.json").read_text())
    manifest["steps"]["concurrency_sweep/c1"]["status"] = "failed"
    (failed / "manifest.json").write_text(json.dumps(manifest))
    done = CliRunner().invoke(app, ["calibrate", str(failed)])
    assert done.exit_code == 2
    assert "no measured step to fit (local-agg/r1 concurrency_sweep/c1: status failed" in \
        " ".join(done.output.split())


def test_explore_ranks_on_the_calibrated_tables_where_the_fit_has_their_key(tmp_path):
    """`stacks explore --calibrate`: the simulator's tables whose (GPU, TP, role, model) the fit
    informed are scaled by its factors (a new table, so a new fingerprint and a fresh
    simulation); a table no measured step informed stays AIConfigurator's."""
    from types import SimpleNamespace

    from workloads.sim.calibrate import Calibration
    from workloads.sim.on_base import BaseSimulator
    source, record = _source(tmp_path)
    tables = [MockerTable("prefill", source, {**record, "tp": 2}),
              MockerTable("decode", source, {**record, "sha256": "cd" * 32})]
    decode_key = cf.Key("a100_sxm_40gb", 4, "decode", "Qwen/Qwen3-30B-A3B")
    fit = SimpleNamespace(factors=lambda: {decode_key: (0.8, 1.25)})
    sim = BaseSimulator(load_stack("base-a100"), "full", tmp_path, tmp_path / "tables",
                        calibration=Calibration(fit, ["runs/x/r1"], []))   # type: ignore[arg-type]
    prefill, decode = sim._calibrated(tables)
    assert prefill.path == source and "calibration" not in prefill.record
    z, orig = np.load(decode.path), _arrays()
    assert decode.path != source and decode.record["calibration"]["decode_factor"] == 1.25
    assert np.allclose(z["decode_itl"], orig["decode_itl"] * 1.25)
    assert np.allclose(z["prefill_ttft_ms"], orig["prefill_ttft_ms"] * 0.8)
    sim.calibration = None
    assert sim._calibrated(tables) == tables
