"""Requests cut by the benchmark's own end are not server errors, and the grace period is sized
so that few are cut (workloads/grace.py, workloads/outcomes.py; runner.md R2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workloads import grace
from workloads.aiperf_args import AiperfInvocation, profile_args
from workloads.outcomes import OutcomeCounts, step_problems
from workloads.saturation import CpuSampler
from workloads.step_exec import Execution, StepContext, hung_limit_s, judge, step_grace
from workloads.steps import Step


def _rows(n: int, osl: int) -> list[dict]:
    return [{"input_length": 1024, "output_length": osl, "hash_ids": [i]} for i in range(n)]


def test_grace_is_sized_from_the_longest_expected_request():
    # OSL 512 at 60 ms per token (an L40S decode tier at c64): 30.7 s, past AIPerf's 30 s
    slow = grace.expected_request_s(_rows(3, 512), itl_ms=60.0)
    assert slow == pytest.approx(511 * 0.060)
    assert grace.grace_period_s(slow) == 62.0          # twice the expectation, whole seconds
    # a fast step keeps AIPerf's own default: never less than it
    assert grace.grace_period_s(grace.expected_request_s(_rows(3, 512), 25.0)) == 30.0
    assert grace.expected_request_s([], 25.0) == 0.0
    mixed = _rows(2, 16) + _rows(1, 2048)              # the longest request decides
    assert grace.expected_request_s(mixed, 20.0, ttft_ms=500.0) == pytest.approx(
        (500 + 2047 * 20) / 1000)


def _inv(duration_s: float | None, grace_s: float) -> AiperfInvocation:
    return AiperfInvocation(model="m", url="http://127.0.0.1:1", tokenizer="t",
                            input_file=Path("d.jsonl"), request_count=10, concurrency=64,
                            seed=1, artifact_dir=Path("a"), duration_s=duration_s,
                            grace_period_s=grace_s)


def test_the_command_line_carries_the_steps_grace_and_the_hang_limit_waits_for_it():
    args = profile_args(_inv(120.0, 62.0))
    assert args[args.index("--benchmark-grace-period") + 1] == "62"
    assert "--benchmark-grace-period" not in profile_args(_inv(None, 62.0))
    step = Step(id="concurrency_sweep/c64", workload="concurrency_sweep", name="c64", repeat=1,
                concurrency=64, seed=1, rows=lambda: [], duration_s=120.0, eta_s=150.0)
    assert hung_limit_s(step, _inv(120.0, 62.0)) - hung_limit_s(step, _inv(120.0, 30.0)) == 32.0


def _ctx(tmp_path: Path, itl_ms: float) -> StepContext:
    return StepContext(run_dir=tmp_path, target=None, executor=None,  # type: ignore[arg-type]
                       tokenizer="t", error_rate_threshold=0.01, request_timeout_s=600.0,
                       expected_itl_ms=itl_ms, expected_itl_source="cost.assumedItlMs")


def test_the_grace_record_says_what_it_was_sized_from(tmp_path):
    step = Step(id="s", workload="concurrency_sweep", name="c64", repeat=1, concurrency=64,
                seed=1, rows=lambda: [], duration_s=120.0)
    assert step_grace(step, _rows(4, 512), _ctx(tmp_path, 60.0)) == {
        "grace_period_s": 62.0, "expected_longest_request_s": 30.66, "itl_ms": 60.0,
        "itl_source": "cost.assumedItlMs"}


def _record(i: int, *, cancelled: bool = False, error: dict | None = None) -> dict:
    rec: dict = {"metadata": {"conversation_id": f"req-{i:06d}", "turn_index": 0,
                              "request_start_ns": i * 1000, "request_end_ns": i * 1000 + 900,
                              "benchmark_phase": "profiling", "was_cancelled": cancelled},
                 "metrics": {"usage_completion_tokens": {"value": 0 if cancelled else 512},
                             "time_to_first_token": {"value": 50.0}}}
    if cancelled:
        rec["error"] = {"code": 499, "type": "RequestCancellationError",
                        "message": "Request was cancelled"}
        del rec["metrics"]["usage_completion_tokens"]
    if error:
        rec["error"] = error
    return rec


def _judge(tmp_path: Path, records: list[dict]) -> dict:
    work = tmp_path / "work"
    work.mkdir()
    (work / "profile_export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    step = Step(id="concurrency_sweep/c64", workload="concurrency_sweep", name="c64", repeat=1,
                concurrency=64, seed=1, rows=lambda: [], duration_s=120.0)
    ex = Execution(exit_code=0, cpu=CpuSampler(0), wall_s=1.0,
                   command=["aiperf", "--extra-inputs", "ignore_eos:true",
                            "--use-server-token-count"], host_cores=2)
    return judge(work, _rows(len(records), 512), step, ex, 0.01)


def test_c64_requests_outlasting_the_grace_are_cut_not_errors(tmp_path):
    # 200 answers, then all 64 in flight at the end cut by AIPerf when the grace ran out
    done = [_record(i) for i in range(200)] + [_record(200 + i, cancelled=True)
                                               for i in range(64)]
    out = _judge(tmp_path, done)
    assert out["status"] == "complete", out["failure_reasons"]
    assert (out["counts"]["cancelled"], out["counts"]["failed"]) == (64, 0)
    assert out["counts"]["completed"] == 200 and out["counts"]["error_rate"] == 0.0


def test_a_step_still_fails_on_real_errors_and_timeouts(tmp_path):
    timeout = {"code": None, "type": "TimeoutError", "message": "request timed out"}
    recs = [_record(i) for i in range(100)] + [_record(100 + i, cancelled=True)
                                               for i in range(64)]
    recs += [_record(164, error=timeout), _record(165, error={"code": 500, "type": "Internal"})]
    out = _judge(tmp_path, recs)
    assert out["status"] == "failed"
    # 2 failed of the 102 the benchmark let finish: cut requests neither dilute nor add
    assert out["failure_reasons"] == ["error rate 1.96% > threshold 1.00%"]
    assert out["counts"]["timeouts"] == 1


def test_error_rate_is_over_the_requests_let_finish():
    counts = OutcomeCounts(attempted=11, completed=8, failed=2, truncated=0, cancelled=1)
    assert counts.error_rate == pytest.approx(0.2)
    everything_cut = OutcomeCounts(attempted=5, completed=0, failed=0, truncated=0, cancelled=5)
    assert everything_cut.error_rate == 1.0
    assert step_problems(everything_cut, 1.0) == [
        "all 5 request(s) were cut at the step's end: none finished"]


def test_bench_splits_the_ttft_gap_into_the_stall_and_the_rest():
    from workloads.bench import stall_columns
    # the quick-ACK pass's engine ran 3 ms slower than the runner pass's: its client is judged
    # against its own engine, not the runner pass's (that would read 42/38 = 1.105)
    cols = stall_columns(ttft_client=50.0, ttft_engine=38.0, ttft_quickack=42.0,
                         ttft_engine_quickack=41.0)
    assert cols["ttft_gap_ms"] == 12.0 and cols["ttft_gap_no_stall_ms"] == 1.0
    assert cols["stall_ms"] == 11.0
    assert cols["stall_share"] == pytest.approx(11 / 12)
    assert cols["ttft_ratio_no_stall"] == pytest.approx(42 / 41)
    for missing in (stall_columns(50.0, 38.0, None, None), stall_columns(50.0, 38.0, 42.0, None)):
        assert missing["stall_ms"] is None and missing["ttft_ratio_no_stall"] is None


_PRED = {"database": {"aiconfigurator": "0.12.0", "backend": "vllm",
                      "backend_versions": {"a100_sxm_40gb": "0.14.0"}},
         "steps": {"concurrency_sweep/c64": {"itl_ms": 13.89, "ttft_ms": 111.9}}}


def test_a_steps_predicted_itl_sizes_its_grace_before_the_assumed_one(tmp_path):
    """With a prediction for the step (and for each of its repeats), the grace period is sized
    from it and the record says so; a step the prediction lacks keeps cost.assumedItlMs."""
    ctx = _ctx(tmp_path, 60.0)
    ctx.predictions = _PRED
    for sid in ("concurrency_sweep/c64", "concurrency_sweep/c64/r2"):
        step = Step(id=sid, workload="concurrency_sweep", name="c64", repeat=1,
                    concurrency=64, seed=1, rows=lambda: [], duration_s=120.0)
        got = step_grace(step, _rows(4, 512), ctx)
        assert got["itl_ms"] == 13.89 and got["grace_period_s"] == 30.0
        assert got["itl_source"] == "predicted (AIConfigurator 0.12.0 a100_sxm_40gb/vllm 0.14.0)"
    other = Step(id="multi_turn/conv8", workload="multi_turn", name="conv8", repeat=1,
                 concurrency=8, seed=1, rows=lambda: [], duration_s=120.0)
    assert step_grace(other, _rows(4, 512), ctx)["itl_ms"] == 60.0


def test_the_choice_of_itl_source():
    from workloads.predictions import ASSUMED_SOURCE, expected_itl
    assert expected_itl(None, "concurrency_sweep/c64", 25.0) == (25.0, ASSUMED_SOURCE)
    assert expected_itl({"not_predicted": "x", "steps": {}}, "concurrency_sweep/c64",
                        25.0) == (25.0, ASSUMED_SOURCE)
    assert expected_itl(_PRED, "concurrency_sweep/c64", 25.0)[0] == 13.89
    # a step whose last part merely starts with r is not a repeat
    assert expected_itl(_PRED, "concurrency_sweep/c64/rx", 25.0) == (25.0, ASSUMED_SOURCE)


@pytest.mark.parametrize("step_id", ["trace_replay/c4", "trace_replay/c4/r2",
                                     "trace_replay/c4-warm", "trace_replay/c4-warm/r3"])
def test_a_traces_warm_pass_and_its_repeats_find_the_traces_prediction(step_id):
    """The runner looks a step's prediction up by the forecast's rule
    (stacks.sizing.step_itl.predicted_id): a repeat `/rN` and a trace's warm pass `-warm`
    stand on the trace's own prediction, so a warm pass's grace is sized from it too."""
    from workloads.predictions import expected_itl, predicted_step
    pred = {**_PRED, "steps": {"trace_replay/c4": {"itl_ms": 7.5, "ttft_ms": 90.0}}}
    assert predicted_step(pred, step_id) == {"itl_ms": 7.5, "ttft_ms": 90.0}
    assert expected_itl(pred, step_id, 25.0) == (
        7.5, "predicted (AIConfigurator 0.12.0 a100_sxm_40gb/vllm 0.14.0)")
    assert predicted_step(pred, "trace_replay/c8-warm") is None     # another trace's: none
