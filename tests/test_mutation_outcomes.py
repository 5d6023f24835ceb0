"""Request and step classification and error counting, pinned exactly (workloads.outcomes,
workloads.results, reports.records.flags): what a wrong timeout rule, a dropped record field, an
off-by-one in the achieved-concurrency window or a mislabelled step would change. Expected
values are worked out by hand from the records below. (`make mutate`: group `outcomes`.)"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from reports.records.flags import aiperf_provenance, judge, judge_steps, left_out
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
    completion_tokens,
    expectations,
    expectations_from_args,
    is_timeout,
    step_problems,
)

FIXED = Expectations(fixed_length=True, server_usage=True)


# --- workloads.outcomes ---------------------------------------------------------------------

@pytest.mark.parametrize("error, timeout", [
    ({"code": 408}, True),
    ({"code": 504}, True),                                   # gateway timeout
    ({"code": 409}, False), ({"code": 505}, False), ({"code": 500}, False),
    ({"code": 504, "type": "HTTPError", "message": "Bad gateway"}, True),
    ({"type": "ReadTimeout"}, True),                         # the type alone says it
    ({"type": "ClientError", "message": "request TIMEOUT"}, True),   # any letter case
    ({"message": "Request timed out after 600 s"}, True),    # "timed out", no "timeout"
    ({"type": "Timed Out"}, True),
    ({"code": 500, "type": "ServerError", "message": "worker died"}, False),
    ({}, False),
])
def test_timeouts_by_code_type_or_message(error, timeout):
    assert is_timeout(error) is timeout


def test_each_outcome_carries_its_reason():
    base = {"completion_tokens": 64, "requested_output_tokens": 64, "expect": FIXED}
    assert classify(error=True, cancelled=True, **base) == (
        CANCELLED, "cancelled by AIPerf (still in flight when the step ended)")
    assert classify(error=True, cancelled=False, **base) == (FAILED, "AIPerf recorded an error")
    assert classify(error=False, cancelled=False, **base) == (COMPLETED, "")
    assert classify(error=False, cancelled=False, **{**base, "completion_tokens": None}) == (
        TRUNCATED, NO_USAGE)
    assert classify(error=False, cancelled=False, **{**base, "completion_tokens": math.nan}) \
        == (TRUNCATED, NO_USAGE)
    assert classify(error=False, cancelled=False, **{**base, "completion_tokens": 63.0}) == (
        TRUNCATED, "63 of 64 requested output tokens (ignore_eos)")
    # a NaN requested length is unknown: nothing to be short of
    assert classify(error=False, cancelled=False,
                    **{**base, "completion_tokens": 10, "requested_output_tokens": math.nan}
                    ) == (COMPLETED, "")


def _rec(**metrics) -> dict:
    return {"metadata": {}, "metrics": {k: {"value": v} for k, v in metrics.items()}}


def test_completion_tokens_prefer_the_usage_block():
    # the usage count wins over output length + reasoning, even when they disagree
    assert completion_tokens(_rec(usage_completion_tokens=70, output_sequence_length=40,
                                  usage_reasoning_tokens=24)) == 70.0
    assert completion_tokens(_rec(output_sequence_length=40, usage_reasoning_tokens=24)) == 64.0
    assert completion_tokens(_rec(output_sequence_length=40)) == 40.0   # no reasoning: + 0
    assert completion_tokens(_rec()) is None
    assert completion_tokens({"metrics": {"output_sequence_length": 5}}) is None  # not {value}
    assert classify_record({"error": {"code": 500}, "metrics": {}}, 8, FIXED)[0] == FAILED
    assert classify_record({"metadata": {"was_cancelled": True}}, 8, FIXED)[0] == CANCELLED


def test_expectations_from_the_summary_and_from_the_command_line():
    assert expectations(None) is None
    assert expectations({"endpoint": "chat"}) is None
    assert expectations({"endpoint": {}}) == Expectations(False, False)
    assert expectations({"endpoint": {"extra": {"ignore_eos": True},
                                      "use_server_token_count": True}}) == FIXED
    args = ["--extra-inputs", "ignore_eos:true", "--use-server-token-count"]
    assert expectations_from_args(args) == FIXED
    assert expectations_from_args(args[:2]) == Expectations(True, False)
    assert expectations_from_args(args[2:]) == Expectations(False, True)
    assert expectations_from_args([]) == Expectations(False, False)


def test_outcome_counts_and_their_record():
    counts = OutcomeCounts.of([COMPLETED, FAILED, CANCELLED])
    assert counts == OutcomeCounts(attempted=3, completed=1, failed=1, truncated=0,
                                   cancelled=1, timeouts=0)
    # the cut request (cancelled at the step's end) is out of the error rate: 1 of 2
    assert counts.as_dict() == {"attempted": 3, "completed": 1, "failed": 1, "truncated": 0,
                                "cancelled": 1, "timeouts": 0, "error_rate": 0.5}
    assert OutcomeCounts.of([FAILED], timeouts=1).timeouts == 1
    # no request at all is no evidence of health: the error rate is 100 %, never 0 %
    assert OutcomeCounts.of([]).error_rate == 1.0


def test_step_problems_at_and_over_the_threshold():
    # 2 failed of the 10 let finish (the 11th was cut at the step's end)
    two_of_ten = OutcomeCounts(attempted=11, completed=8, failed=2, truncated=0, cancelled=1)
    assert step_problems(two_of_ten, 0.2) == []                 # at the threshold: not over
    assert step_problems(two_of_ten, 0.19) == ["error rate 20.00% > threshold 19.00%"]
    # every request cut at the step's end: nothing finished, which is no evidence of health
    all_cut = OutcomeCounts(attempted=4, completed=0, failed=0, truncated=0, cancelled=4)
    assert all_cut.error_rate == 1.0
    assert step_problems(all_cut, 1.0) == [
        "all 4 request(s) were cut at the step's end: none finished"]
    one_left = OutcomeCounts(attempted=4, completed=1, failed=0, truncated=0, cancelled=3)
    assert one_left.error_rate == 0.0 and step_problems(one_left, 0.0) == []
    cut = OutcomeCounts(attempted=10, completed=9, failed=0, truncated=1, cancelled=0)
    assert step_problems(cut, 1.0) == [
        "1 truncated stream(s) of 10 requests (the server ended them short of a whole answer)"]


# --- workloads.results ------------------------------------------------------------------------

RECORD = {"metadata": {"conversation_id": "s1", "turn_index": 1, "request_start_ns": 100,
                       "request_end_ns": 900, "was_cancelled": False},
          "metrics": {"input_sequence_length": {"value": 512},
                      "output_sequence_length": {"value": 30},
                      "usage_completion_tokens": {"value": 30},
                      "usage_prompt_cache_read_tokens": {"value": 256},
                      "time_to_first_token": {"value": 12.5},
                      "inter_token_latency": {"value": 3.25},
                      "request_latency": {"value": 110.0}},
          "error": None}
ROWS = [{"session_id": "s1", "input_length": 500, "output_length": 32},
        {"input_length": 1, "output_length": 1},                 # no session id: skipped
        {"session_id": "s1", "input_length": 512, "output_length": 32}]


def test_request_lengths_keep_every_field_of_a_request():
    assert results.request_lengths([RECORD], ROWS) == [{
        "conversation_id": "s1", "turn_index": 1,
        "requested_input_tokens": 512, "requested_output_tokens": 32,
        "input_tokens": 512, "output_tokens": 30, "cached_tokens": 256,
        "ttft_ms": 12.5, "itl_ms": 3.25, "latency_ms": 110.0,
        "start_ns": 100, "end_ns": 900, "cancelled": False, "error": None}]
    # turn 0 when AIPerf gives none; a record without metadata still gets a row
    first = {"metadata": {"conversation_id": "s1"}, "metrics": {}}
    bare = results.request_lengths([first, {"metrics": {}}], ROWS)
    assert (bare[0]["turn_index"], bare[0]["requested_input_tokens"]) == (0, 500)
    assert bare[1]["conversation_id"] is None and bare[1]["requested_output_tokens"] is None


def test_outcomes_judge_each_request_on_its_own_requested_length():
    per_request = results.outcomes([RECORD], ROWS, FIXED)
    assert per_request[0]["outcome"] == TRUNCATED          # 30 of the 32 asked
    assert per_request[0]["outcome_reason"] == "30 of 32 requested output tokens (ignore_eos)"
    assert per_request[0]["requested_output_tokens"] == 32


def test_count_keeps_timeouts_among_the_failed():
    recs = [{"error": {"code": 504}}, {"error": {"code": 500}}, {"error": None}]
    per = [{"outcome": FAILED}, {"outcome": FAILED}, {"outcome": COMPLETED}]
    assert results.count(recs, per) == OutcomeCounts(3, 1, 2, 0, 0, timeouts=1)
    with pytest.raises(ValueError):                 # a request without its verdict
        results.count(recs, per[:2])


def test_read_records_keeps_the_profiling_phase(tmp_path):
    lines = [{"metadata": {"benchmark_phase": "warmup"}, "n": 1},
             {"metadata": {"benchmark_phase": "profiling"}, "n": 2},
             {"metadata": {}, "n": 3},            # no phase: a profiling record
             {"n": 4}]                            # no metadata at all: the same
    (tmp_path / results.RECORDS).write_text("\n".join(json.dumps(r) for r in lines) + "\n\n")
    assert [r["n"] for r in results.read_records(tmp_path)] == [2, 3, 4]
    assert results.read_records(tmp_path / "missing") == []


def test_error_summary_counts_kinds_most_frequent_first():
    def err(code, message="boom", kind="HTTPError"):
        return {"error": {"code": code, "type": kind, "message": message}}
    recs = ([err(500)] * 3 + [err(504, "timed out")] * 4 + [err(500, kind="Other")]
            + [{"error": {"code": 400}}] + [{"error": None}, {}])
    assert results.error_summary(recs) == [
        {"code": 504, "type": "HTTPError", "message": "timed out", "count": 4},
        {"code": 500, "type": "HTTPError", "message": "boom", "count": 3},
        {"code": 500, "type": "Other", "message": "boom", "count": 1},
        {"code": 400, "type": None, "message": "", "count": 1}]
    # messages are compared on their first 200 characters; five kinds by default
    long = [err(500, "x" * 200 + tail) for tail in ("a", "b")]
    assert [e["count"] for e in results.error_summary(long)] == [2]
    many = [err(c) for c in range(500, 507)]
    assert len(results.error_summary(many)) == 5 and len(results.error_summary(many, 6)) == 6


def test_request_spans_need_both_timestamps_in_order():
    def rec(start, end):
        return {"metadata": {"request_start_ns": start, "request_end_ns": end}}
    recs = [rec(1, 5), rec(7, 7), rec(9, 8), rec(None, 3), rec(2, None), {}]
    assert results.request_spans(recs) == [(1, 5), (7, 7)]


def test_conversation_spans_from_first_start_to_last_end_of_whole_turns():
    def rec(conv, start, end):
        return {"metadata": {"conversation_id": conv, "request_start_ns": start,
                             "request_end_ns": end}}
    recs = [{}, rec(None, 10, 20),                      # no metadata; no conversation id
            rec("a", 100, 200), rec("a", 150, 300),     # two turns of one conversation
            rec("a", 50, 40), rec("a", None, 500), rec("a", 5, None),   # broken timestamps
            rec("b", 70, 70)]                           # an instant turn still counts
    assert results.conversation_spans(recs) == [(100, 300), (70, 70)]


def test_achieved_concurrency_window_and_edges():
    spans = [(0, 100), (10, 100), (20, 30), (40, 100)]
    # requested 2: from the 2nd start (10) to the last start (40), 30 ns; in flight:
    # (0,100) 30 + (10,100) 30 + (20,30) 10 + (40,100) 0 = 70 -> 70 / 30
    assert results.concurrency_of_spans(spans, 2) == pytest.approx(70 / 30)
    # requested 1: from 0 to 40: 40 + 30 + 10 + 0 = 80 / 40
    assert results.concurrency_of_spans(spans, 1) == pytest.approx(2.0)
    # a span that ended before the window (5..20) counts 0, not negative (nor 1)
    assert results.concurrency_of_spans([(0, 1), (5, 50), (10, 50), (20, 50)], 2) == \
        pytest.approx((0 + 15 + 10 + 0) / 15)
    assert results.concurrency_of_spans(spans, 4) is None           # no steady state
    assert results.concurrency_of_spans(spans[:3], 3) is None
    assert results.concurrency_of_spans(spans, 0) is None
    assert results.concurrency_of_spans([(5, 9), (5, 9), (5, 9)], 2) is None   # no window
    recs = [{"metadata": {"request_start_ns": s, "request_end_ns": e}} for s, e in spans]
    assert results.achieved_concurrency(recs, 2) == pytest.approx(70 / 30)


def test_load_window_spans_first_start_to_last_end():
    recs = [{"metadata": {"request_start_ns": 50, "request_end_ns": 70}},
            {"metadata": {"request_start_ns": 20}}, {"metrics": {}},
            {"metadata": {"request_end_ns": 90}}]
    assert results.load_window_ns(recs) == (20, 90)
    assert results.load_window_ns([{"metadata": {"request_start_ns": 5}}]) is None
    assert results.load_window_ns([{"metadata": {"request_end_ns": 5}}]) is None
    assert results.load_window_ns([]) is None


def test_step_expectations_and_summary_metrics(tmp_path):
    args = ["--use-server-token-count"]
    assert results.step_expectations(tmp_path, args) == Expectations(False, True)  # no summary
    summary = tmp_path / results.SUMMARY
    summary.write_text(json.dumps({"time_to_first_token": {"avg": 9.5, "p50": 8.0},
                                   "request_count": 12}))
    assert results.step_expectations(tmp_path, args) == Expectations(False, True)  # no config
    summary.write_text(json.dumps({"input_config": {"endpoint": {"extra": {"ignore_eos": True},
                                                                 "use_server_token_count": True}},
                                   "time_to_first_token": {"avg": 9.5, "p50": 8.0},
                                   "request_count": 12}))
    assert results.step_expectations(tmp_path, []) == FIXED   # the summary wins
    assert results.summary_metric(tmp_path, "time_to_first_token") == 9.5
    assert results.summary_metric(tmp_path, "time_to_first_token", "p50") == 8.0
    assert results.summary_metric(tmp_path, "request_count") is None      # not a stats object
    assert results.summary_metric(tmp_path, "absent") is None
    assert results.summary_metric(tmp_path / "missing", "time_to_first_token") is None


# --- reports.records.flags ------------------------------------------------------------------------

def _step(**kw) -> pd.Series:
    row = {"stack": "s", "attempted": 10, "completed": 10, "failed": 0, "truncated": 0,
           "cancelled": 0, "recorded_status": "complete", "recorded_reasons": None,
           "concurrency": 4, "host_cores": 2, "achieved_concurrency": 4.0,
           "client_cpu_cores_mean": 0.5}
    return pd.Series({**row, **kw})


def test_a_healthy_step_is_usable():
    assert judge(_step(), 0.01) == {"status": "complete", "status_reasons": "",
                                    "client_bound": False, "client_bound_reasons": "",
                                    "usable": True, "step_flag": ""}


def test_exports_overrule_a_complete_record():
    out = judge(_step(completed=9, failed=1), 0.01)
    assert out["status"] == "failed" and out["usable"] is False
    assert out["status_reasons"] == ("error rate 10.00% > threshold 1.00% (judged from the "
                                     "exports; the run record said complete)")
    assert out["step_flag"] == "FAILED: " + out["status_reasons"]
    # no record at all: the exports' reasons alone
    none = judge(_step(completed=9, failed=1, recorded_status=None), 0.01)
    assert none["status_reasons"] == "error rate 10.00% > threshold 1.00%"
    nan = judge(_step(completed=9, failed=1, recorded_status=math.nan), 0.01)
    assert nan["status_reasons"] == none["status_reasons"]
    assert judge(_step(completed=9, failed=1), 0.2)["status"] == "complete"


def test_a_recorded_failure_keeps_its_own_status_and_reasons():
    out = judge(_step(recorded_status="interrupted", recorded_reasons="Ctrl-C"), 0.01)
    assert (out["status"], out["status_reasons"], out["step_flag"], out["usable"]) == (
        "interrupted", "Ctrl-C", "INTERRUPTED: Ctrl-C", False)
    bare = judge(_step(recorded_status="failed", recorded_reasons=math.nan), 0.01)
    assert (bare["status_reasons"], bare["step_flag"]) == ("", "FAILED")


def test_client_bound_steps_are_flagged_not_usable():
    low = judge(_step(achieved_concurrency=3.5), 0.01)      # 3.5 < 90 % of 4
    assert low["client_bound"] is True and low["usable"] is False
    assert low["client_bound_reasons"] == "achieved concurrency 3.50 < 90% of requested 4"
    assert low["step_flag"] == "CLIENT-BOUND: achieved concurrency 3.50 < 90% of requested 4"
    cpu = judge(_step(client_cpu_cores_mean=1.9), 0.01)     # 1.9 of 2 cores
    assert cpu["client_bound_reasons"] == "AIPerf used 1.90 of 2 cores on average"
    # without the host's core count the CPU half cannot be judged
    assert judge(_step(client_cpu_cores_mean=1.9, host_cores=None), 0.01)["client_bound"] \
        is False
    both = judge(_step(completed=9, failed=1, achieved_concurrency=1.0), 0.01)
    assert both["step_flag"].startswith("FAILED: error rate 10.00%")
    assert both["step_flag"].endswith("; CLIENT-BOUND: achieved concurrency 1.00 < 90% of "
                                      "requested 4")
    # a replayed trace's concurrency is a cap: arrivals, not the client, set what is in
    # flight, so a low achieved concurrency says nothing; the CPU half still holds
    fixed = judge(_step(schedule="fixed", achieved_concurrency=0.1), 0.01)
    assert (fixed["client_bound"], fixed["usable"]) == (False, True)
    assert judge(_step(schedule="fixed", achieved_concurrency=0.1, client_cpu_cores_mean=1.9),
                 0.01)["client_bound_reasons"] == "AIPerf used 1.90 of 2 cores on average"
    assert judge(_step(schedule=math.nan, achieved_concurrency=0.1), 0.01)["client_bound"]
    # no requested concurrency (a trace replayed on a schedule): never client-bound
    assert judge(_step(concurrency=None, achieved_concurrency=0.1), 0.01)["client_bound"] \
        is False


def test_a_step_whose_aiperf_ran_another_client_is_flagged_not_usable():
    """The step record's `aiperf_patches` (JSON in the steps frame): the slot wait applied (or
    already applied) keeps the step usable; not applied, no status line, or the bench's
    quick-ACK client flags it AIPERF UNPATCHED with the reason; no record judges nothing."""
    why = ("(its TTFT and throughput stand on another client: docs/testing.md measured the "
           "client / engine TTFT at 1.264 on c64 without the slot wait, 1.047 with it)")
    for ok in ('{"aiperf_slot_wait": "applied"}', '{"aiperf_slot_wait": "already applied"}',
               None, math.nan):
        out = judge(_step(aiperf_patches=ok), 0.01)
        assert (out["usable"], out["step_flag"]) == (True, ""), ok
    old = judge(_step(aiperf_patches=json.dumps({"aiperf_slot_wait": "not applied: aiperf "
                                                 "0.14.0"})), 0.01)
    assert (old["status"], old["client_bound"], old["usable"]) == ("complete", False, False)
    assert old["step_flag"] == f"AIPERF UNPATCHED: slot wait not applied: aiperf 0.14.0 {why}"
    none = judge(_step(aiperf_patches="{}"), 0.01)
    assert none["step_flag"].startswith("AIPERF UNPATCHED: slot wait not applied: AIPerf's log "
                                        "has no status line")
    quick = judge(_step(aiperf_patches=json.dumps({"aiperf_slot_wait": "applied",
                                                   "aiperf_quickack": "applied"})), 0.01)
    assert quick["step_flag"] == ("AIPERF UNPATCHED: quick-ACK client applied: the bench's "
                                  f"diagnostic client ran, not AIPerf's own {why}")
    both = judge(_step(aiperf_patches=json.dumps({"aiperf_quickack": "applied"}),
                       completed=9, failed=1, achieved_concurrency=1.0,
                       recorded_status=None), 0.01)
    parts = both["step_flag"].split("; ")
    assert [p.split(":")[0] for p in parts] == ["FAILED", "CLIENT-BOUND", "AIPERF UNPATCHED"]
    assert ", and quick-ACK client applied" in parts[2]


def test_the_provenance_names_the_client_only_where_every_recorded_step_ran_it():
    ok, old = {"aiperf_slot_wait": "applied"}, {"aiperf_slot_wait": "not applied: x"}
    assert aiperf_provenance("0.13.0", {"a": {}, "b": {"status": "failed"}}) == \
        "AIPerf 0.13.0 (its patches not recorded)"
    assert aiperf_provenance("0.13.0", {"a": {"aiperf_patches": ok}, "b": {}}) == \
        "AIPerf 0.13.0 + slot wait"
    assert aiperf_provenance("0.13.0", {"a": {"aiperf_patches": ok},
                                        "b": {"aiperf_patches": old},
                                        "c": {"aiperf_patches": {}}}) == \
        "AIPerf 0.13.0, its patches not as measured on 2 of 3 steps (AIPERF UNPATCHED)"


def test_judge_steps_uses_each_stacks_threshold():
    steps = pd.DataFrame([_step(stack="a", completed=9, failed=1, status="stale"),
                          _step(stack="b", completed=9, failed=1)], index=[7, 9])
    judged = judge_steps(steps, {"a": 0.2})
    assert list(judged.index) == [7, 9]
    assert list(judged["status"]) == ["complete", "failed"]      # b: the default 1 %
    assert judged.columns.tolist().count("status") == 1


def test_left_out_names_each_flagged_row_once():
    frame = pd.DataFrame([
        {"stack": "a", "concurrency": 4, "usable": False, "step_flag": "FAILED"},
        {"stack": "a", "concurrency": 4, "usable": False, "step_flag": "FAILED"},
        {"stack": "b", "concurrency": math.nan, "prefix_share": 0.25, "usable": False,
         "step_flag": "CLIENT-BOUND"},
        {"stack": "c", "concurrency": math.nan, "usable": True, "step_flag": ""},
        {"stack": "d", "concurrency": math.nan, "step": "zipf", "usable": False,
         "step_flag": "FAILED"},
        {"stack": "e", "concurrency": math.nan, "usable": False, "step_flag": "X"},
        {"stack": "p", "concurrency": 2, "usable": None, "step_flag": ""}])   # published row
    assert left_out(frame, "the best points") == (
        "Left out of the best points: a c4 (FAILED); b share 25% (CLIENT-BOUND); d zipf "
        "(FAILED); e (X). These rows stay in the table, marked in `step_flag`.")
    assert left_out(frame[frame["usable"].eq(True)], "x") == ""
    assert left_out(frame.drop(columns="usable"), "x") == ""
    assert left_out(frame.iloc[0:0], "x") == "" and left_out(None, "x") == ""


def test_judge_lists_every_reason():
    out = judge(_step(completed=7, failed=2, truncated=1, recorded_status=None), 0.01)
    assert out["status_reasons"] == (
        "error rate 20.00% > threshold 1.00%; 1 truncated stream(s) of 10 requests (the server "
        "ended them short of a whole answer)")
    # a truncated stream alone fails a step the record called complete
    assert judge(_step(completed=9, truncated=1), 0.5)["status"] == "failed"
    both = judge(_step(achieved_concurrency=1.0, client_cpu_cores_mean=1.9), 0.01)
    assert both["client_bound_reasons"] == ("achieved concurrency 1.00 < 90% of requested 4; "
                                            "AIPerf used 1.90 of 2 cores on average")
    assert both["step_flag"] == "CLIENT-BOUND: " + both["client_bound_reasons"]


def test_judge_steps_of_no_step_still_has_the_flag_columns():
    judged = judge_steps(pd.DataFrame(columns=["stack", "attempted"]), {})
    assert judged.empty and all(c in judged.columns for c in
                                ["status", "status_reasons", "client_bound",
                                 "client_bound_reasons", "usable", "step_flag"])


def test_records_without_metrics_and_with_errors():
    rec = {"metadata": {"conversation_id": "s1", "turn_index": 0, "was_cancelled": True},
           "error": {"code": 499, "type": "Cancelled", "message": "grace period over"}}
    (row,) = results.request_lengths([rec], ROWS)
    assert (row["cancelled"], row["error"], row["ttft_ms"], row["output_tokens"]) == (
        True, {"code": 499, "type": "Cancelled", "message": "grace period over"}, None, None)
    assert results.concurrency_of_spans([(0, 9), (1, 9), (2, 9), (3, 9)], -1) is None
