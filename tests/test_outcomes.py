"""Request outcome classes and the runner's step judgement, on a REAL fault run.

The fixture (tests/fixtures/fault-runs/local-agg/killed-worker, made by
`tests/fixtures/make_fixtures.py --fault`) is local-agg's sweep on the real local engine with
real AIPerf 0.13.0, worker-0 killed with SIGKILL two seconds into c4's profiling phase. The
streams that worker served ended without their usage block; AIPerf counted them as successes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from reports_fixtures import FAULT_RUN, metric, profiling_records, summary

from workloads import results
from workloads.outcomes import (
    CANCELLED,
    COMPLETED,
    FAILED,
    NO_USAGE,
    TRUNCATED,
    Expectations,
    OutcomeCounts,
    classify,
    classify_record,
    expectations,
    step_problems,
)
from workloads.saturation import CpuSampler
from workloads.step_exec import Execution, judge
from workloads.steps import Step

C4 = FAULT_RUN / "concurrency_sweep" / "c4"
FIXED = Expectations(fixed_length=True, server_usage=True)


def _rows(run: Path, step_id: str) -> list[dict]:
    rec = json.loads((run / "manifest.json").read_text())["steps"][step_id]
    return [json.loads(x) for x in (run / rec["dataset"]["path"]).read_text().splitlines()]


def _cut(rec: dict) -> bool:
    """Independent: no error, yet no usage block (the stream never reached its end)."""
    return "error" not in rec and "usage_completion_tokens" not in rec["metrics"]


def test_the_fixture_holds_what_aiperf_miscounts():
    recs = profiling_records(C4)
    cut = [r for r in recs if _cut(r)]
    assert 0 < len(cut) < len(recs)
    # AIPerf's own summary counts the cut streams as successful requests, in its TTFT too
    s = summary(C4)
    assert s["request_count"]["avg"] == len(recs) and "error_request_count" not in s
    assert s["time_to_first_token"]["count"] == len(recs)
    # they streamed tokens (chunks arrived) but carry no count of them
    assert all(metric(r, "http_req_chunks_received") > 1 for r in cut)
    assert all(metric(r, "output_sequence_length") is None for r in cut)


def test_aiperfs_input_config_says_what_every_request_must_show():
    assert expectations(summary(C4)["input_config"]) == FIXED
    assert expectations({"phases": []}) is None    # an export that does not say


def test_streams_cut_by_the_killed_worker_are_truncated_the_rest_completed():
    recs = results.read_records(C4)
    per = results.outcomes(recs, _rows(FAULT_RUN, "concurrency_sweep/c4"), FIXED)
    for rec, r in zip(recs, per, strict=True):
        assert r["outcome"] == (TRUNCATED if _cut(rec) else COMPLETED), r
        if _cut(rec):
            assert r["outcome_reason"] == NO_USAGE
    counts = results.count(recs, per)
    assert counts.truncated == sum(map(_cut, recs)) > 0
    assert counts.completed == len(recs) - counts.truncated and counts.failed == 0


def _execution(command: list[str]) -> Execution:
    return Execution(exit_code=0, cpu=CpuSampler(pid=0), wall_s=1.0, command=command,
                     host_cores=2)


def _judge_copy(tmp_path: Path, name: str, threshold: float) -> tuple[dict, dict, Path]:
    """The runner's judge on a copy of one fixture step: (its verdict, the step's record)."""
    work = tmp_path / name
    shutil.copytree(FAULT_RUN / "concurrency_sweep" / name, work)
    record = json.loads((work / "step.json").read_text())
    step = Step(id=record["id"], workload="concurrency_sweep", name=name, repeat=1,
                concurrency=record["concurrency"], seed=record["seed"], duration_s=6.0,
                cold=False, params=record["params"], eta_s=16.0, rows=list)
    out = judge(work, _rows(FAULT_RUN, record["id"]), step, _execution(record["command"]),
                error_rate_threshold=threshold)
    return out, record, work


def test_runner_judges_a_step_with_truncated_streams_and_no_http_error_not_complete(tmp_path):
    """The old judge (errors only) passed this step: errorRateThreshold 1.0, no HTTP error."""
    out, record, work = _judge_copy(tmp_path, "c4", threshold=1.0)
    n_cut = sum(map(_cut, profiling_records(C4)))
    assert out["status"] == "failed"
    assert out["counts"]["truncated"] == n_cut and out["counts"]["failed"] == 0
    assert out["failure_reasons"] == [f"{n_cut} truncated stream(s) of "
                                      f"{out['counts']['attempted']} requests (the server "
                                      "ended them short of a whole answer)"]
    written = [json.loads(x) for x in (work / "requests.jsonl").read_text().splitlines()]
    assert sum(r["outcome"] == TRUNCATED for r in written) == n_cut
    # the run record of the fixture says the same (the runner made it with this rule)
    assert record["status"] == "failed" and record["counts"]["truncated"] == n_cut


def test_healthy_step_of_the_same_run_is_complete(tmp_path):
    out, _, _ = _judge_copy(tmp_path, "c1", threshold=0.0)
    assert out["status"] == "complete" and out["failure_reasons"] == []
    assert out["counts"]["completed"] == out["counts"]["attempted"] > 0


@pytest.mark.parametrize("case, expected", [
    # (error, cancelled, usage completion tokens, requested, expectations)
    ((False, False, 64, 64, FIXED), COMPLETED),
    ((False, False, 30, 64, FIXED), TRUNCATED),        # short of a fixed length
    ((False, False, 30, 64, Expectations(False, True)), COMPLETED),   # length not fixed
    ((False, False, None, 64, FIXED), TRUNCATED),      # no usage block
    ((False, False, None, 64, Expectations(True, False)), COMPLETED),  # usage not asked
    ((False, False, 30, None, FIXED), COMPLETED),      # requested length unknown
    ((True, False, None, 64, FIXED), FAILED),
    ((True, True, None, 64, FIXED), CANCELLED),        # cancelled records carry an error too
    ((False, False, None, 64, None), COMPLETED),       # the export says nothing: cannot tell
])
def test_classify_rules(case, expected):
    error, cancelled, tokens, requested, expect = case
    outcome, _ = classify(error=error, cancelled=cancelled, completion_tokens=tokens,
                          requested_output_tokens=requested, expect=expect)
    assert outcome == expected


def test_a_thinking_model_is_judged_on_its_whole_completion():
    """AIPerf's output_sequence_length is usage minus reasoning tokens; the request produced
    all it was asked for (reasoning included), so it is not short."""
    rec = {"metadata": {}, "metrics": {"usage_completion_tokens": {"value": 64},
                                       "output_sequence_length": {"value": 40},
                                       "usage_reasoning_tokens": {"value": 24}}}
    assert classify_record(rec, 64, FIXED)[0] == COMPLETED
    del rec["metrics"]["usage_completion_tokens"]
    assert classify_record(rec, 64, FIXED)[0] == COMPLETED
    rec["metrics"]["usage_reasoning_tokens"]["value"] = 4
    assert classify_record(rec, 64, FIXED) == (TRUNCATED, "44 of 64 requested output tokens "
                                                          "(ignore_eos)")


def test_step_problems():
    clean = OutcomeCounts(attempted=10, completed=10, failed=0, truncated=0, cancelled=0)
    assert step_problems(clean, 0.0) == []
    cut = OutcomeCounts(attempted=10, completed=9, failed=0, truncated=1, cancelled=0)
    assert step_problems(cut, 1.0) and "truncated" in step_problems(cut, 1.0)[0]
    # 1 failed of the 9 the benchmark let finish; the cut one is not an error
    errs = OutcomeCounts(attempted=10, completed=8, failed=1, truncated=0, cancelled=1)
    assert step_problems(errs, 0.12) == []
    assert step_problems(errs, 0.1) == ["error rate 11.11% > threshold 10.00%"]
    assert step_problems(OutcomeCounts(0, 0, 0, 0, 0), 1.0) == ["no request records"]


def test_the_recorded_error_rate_keeps_six_places():
    # the run record's figure is what reports read back: 1 failed of 7 finished
    counts = OutcomeCounts(attempted=8, completed=6, failed=1, truncated=0, cancelled=1)
    assert counts.as_dict()["error_rate"] == 0.142857
    assert counts.as_dict()["cancelled"] == 1


def test_the_host_cores_busy_and_at_a_lower_priority_are_read_over_the_load_window():
    """From the host's cumulative CPU seconds (busy, positive nice) sampled beside AIPerf: the
    cores in use between the first and last sample inside the window, not outside it."""
    from workloads.saturation import host_cores

    s = 1_000_000_000
    host = [(0, 100.0, 10.0), (1 * s, 101.0, 10.2), (3 * s, 104.0, 11.8), (9 * s, 200.0, 90.0)]
    assert host_cores(host, 1 * s, 3 * s) == {"host_busy_cores": 1.5,
                                              "host_low_priority_cores": 0.8}
    assert host_cores(host, 0, 1) == {}     # one sample: no rate
