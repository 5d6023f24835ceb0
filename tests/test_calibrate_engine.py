"""Calibration recovers a known truth (issue 38): a live local rehearsal whose mockers run on the
stack's AIConfigurator table scaled by known factors (decode x1.25, prefill x0.8) is measured
with the REAL AIPerf CLI on the REAL local Dynamo engine, then `calibrate` fits it against the
unscaled table by replaying every measured step in DynoSim: both factors within 3 %.

The steps are short (about 20 s of load): the sweep at c1 and c4 (ISL 1024) and one c1 step
of 4096-token prompts (the prefix workload at share 0), so the runs' TTFTs span 1024 and 4096
prompt tokens and the frontend's own per-request time is fitted as an intercept, not taken for
prefill (workloads/sim/calibrate_fit.py).
"""

from __future__ import annotations

import json

import pytest
from engine_support import needs_engine, write_stack

from stacks.preflight.run import check_stack
from workloads.model_folder import build_model_folder
from workloads.runner import RunOptions, run
from workloads.sim.calibrate import calibrate
from workloads.sim.calibrate_fit import Key
from workloads.targets.local import LocalTarget
from workloads.targets.mocker_timings import resolve, scaled

pytestmark = [pytest.mark.engine, pytest.mark.predictor, pytest.mark.load(2), needs_engine]

PREFILL, DECODE = 0.8, 1.25
WORKLOADS = {
    "warmupRequests": 2, "errorRateThreshold": 0.0,
    "concurrencySweep": {"quick": {"concurrencies": [1, 4], "durationS": 6, "isl": 1024,
                                   "osl": 64}},
    "multiTurn": {"enabled": False},
    "sequenceDistributions": {"enabled": False},
    "prefixCache": {"shares": [0.0], "coldRestart": "never",
                    "quick": {"isl": 4096, "osl": 32, "concurrency": 1, "requests": 12}},
}


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """The live run on the scaled table, and its calibration."""
    root = tmp_path_factory.mktemp("calibrate")
    stacks = root / "stacks"
    name = write_stack(stacks, "cal-agg", router="round-robin",
                       workers=[{"role": "worker", "replicas": 1}], workloads=WORKLOADS)
    report = check_stack(name, stacks)
    assert report.ok, report.problems
    truth = scaled(resolve(report.stack), {"worker": (PREFILL, DECODE)}, root / "truth",
                   [f"rehearsal: known factors prefill x{PREFILL}, decode x{DECODE}"])
    model = build_model_folder(root / "hf", report.stack.model.id, report.stack.model.arch)
    target = LocalTarget(report.stack, root / "engine", model=model, timings=truth,
                         kv_capacity_tokens=[m.kv_capacity_tokens for m in report.memory])
    target.start()
    try:
        result = run(RunOptions(stack=name, stacks_dir=stacks, runs_dir=root / "runs",
                                run_id="live", hf_home=root / "hf", show_progress=False,
                                target=target))
    finally:
        target.stop()
    assert result.status == "complete", result.steps
    cal = calibrate([result.run_dir], stacks_dir=stacks, hf_home=root / "hf",
                    folder=root / "calibrated")
    print(json.dumps(cal.as_dict(), indent=1, default=str))   # the figures, with -s
    return result.run_dir, cal, report.stack


def test_the_rehearsal_ran_on_the_scaled_table_and_says_so(rehearsal):
    run_dir, _, _ = rehearsal
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (table,) = manifest["target_info"]["timings"]["tables"]
    assert table["calibration"]["prefill_factor"] == PREFILL
    assert table["calibration"]["decode_factor"] == DECODE
    assert "x calibrated (prefill x0.800, decode x1.250" in manifest["target_info"]["timings"][
        "label"]


def test_ttft_from_dispatch_is_the_frontends_ttft_less_its_own_wait(rehearsal):
    """What measured.py reads: Dynamo 1.6.1's request trace splits each request's TTFT into
    the frontend's wait before dispatch and the time from dispatch to the first token."""
    run_dir, _, _ = rehearsal
    for trace in run_dir.glob("*/*/request_trace.jsonl"):
        for line in trace.read_text().splitlines():
            req = json.loads(line)["event"]["request"]
            assert req["ttft_ms"] == pytest.approx(
                req["prefill_wait_time_ms"] + req["prefill_time_ms"], abs=0.01), trace


def test_calibration_recovers_the_known_factors_within_3_percent(rehearsal):
    _, cal, stack = rehearsal
    (key,) = cal.fit.prefill
    assert key == Key("a100_sxm_40gb", 4, "worker", stack.model.id)
    assert cal.fit.prefill[key].fitted and cal.fit.decode[key].fitted
    assert cal.fit.prefill[key].value == pytest.approx(PREFILL, rel=0.03)
    assert cal.fit.decode[key].value == pytest.approx(DECODE, rel=0.03)
    assert cal.fit.intercept_mode[key] == "per run"
    assert [s.step for s in cal.fit.steps] == ["concurrency_sweep/c1", "concurrency_sweep/c4",
                                               "prefix_cache/share000"]


def test_the_calibrated_table_is_the_reference_scaled_by_the_fit(rehearsal):
    _, cal, stack = rehearsal
    import numpy as np
    (key,) = cal.tables
    table = cal.tables[key]
    source = resolve(stack).tables["worker"]
    with np.load(source) as a, np.load(table.path) as b:
        assert np.allclose(b["prefill_ttft_ms"], a["prefill_ttft_ms"] *
                           cal.fit.prefill[key].value)
        assert np.allclose(b["decode_itl"], a["decode_itl"] * cal.fit.decode[key].value)
    assert table.record["calibration"]["fitted_from"] == cal.runs
