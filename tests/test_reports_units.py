"""Pure pieces of the reports: step ids, SLO parsing, Pareto front, repeats folding."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from reports.records.exports import request_rows, summary_row
from reports.records.runs import parse_step_id
from reports.render.plots import pareto_front
from reports.tables.goodput import Slo, parse_slo, request_meets
from reports.tables.sla import meets
from reports.tables.tables import fold_repeats, share_of


@pytest.mark.parametrize("step_id, expected", [
    ("concurrency_sweep/c4", ("concurrency_sweep", "c4", 1, "concurrency_sweep/c4")),
    ("concurrency_sweep/c4/r3", ("concurrency_sweep", "c4", 3, "concurrency_sweep/c4")),
    ("prefix_cache/share050", ("prefix_cache", "share050", 1, "prefix_cache/share050")),
    ("multi_turn", ("multi_turn", "main", 1, "multi_turn")),
])
def test_parse_step_id(step_id, expected):
    got = parse_step_id(step_id)
    assert (got["workload"], got["variant"], got["repeat"], got["group"]) == expected


def test_share_of_variant():
    assert share_of("share050") == 0.5 and share_of("share100") == 1.0
    assert math.isnan(share_of("main"))


def test_parse_slo_forms_and_errors():
    assert parse_slo("a:ttft_ms=5000,tok_s_per_user=50") == Slo("a", 5000, 50)
    assert parse_slo("b:ttft_ms=200,itl_ms=25") == Slo("b", 200, itl_ms=25)
    with pytest.raises(ValueError, match="ttft_ms is required"):
        parse_slo("c:itl_ms=3")
    with pytest.raises(ValueError, match="needs a number"):
        parse_slo("c:ttft_ms=fast")
    with pytest.raises(ValueError, match="write it as"):
        parse_slo("ttft_ms=5")


def test_only_completed_requests_meet_an_slo():
    # completed, too slow, failed, no speed, truncated (fast as a cut stream looks)
    req = pd.DataFrame({"completed": [True, True, False, True, False],
                        "ttft_ms": [10, 10, 1, 10, 1], "tok_s_per_user": [60, 40, 99, None, 99],
                        "itl_ms": [5, 5, 5, 5, 1]})
    assert request_meets(req, Slo("s", 100, 50)).tolist() == [True, False, False, False, False]


def test_pareto_front_keeps_only_undominated_points():
    pts = pd.DataFrame({"x": [10, 20, 30, 25, 5], "y": [50, 60, 90, 95, 40]})
    front = pareto_front(pts, "x", "y")
    assert front[["x", "y"]].values.tolist() == [[5, 40], [10, 50], [20, 60], [30, 90]]


def test_fold_repeats_mean_spread_and_counts():
    # two repeats within run x, one in run y: three samples; a fourth failed in run z
    steps = pd.DataFrame({"stack": ["a"] * 4, "concurrency": [1, 1, 1, 1],
                          "repeat": [1, 2, 1, 1], "run_id": ["x", "x", "y", "z"],
                          "attempted": [10, 12, 11, 9], "completed": [10, 11, 11, 5],
                          "failed": [0, 1, 0, 0], "truncated": [0, 0, 0, 4],
                          "cancelled": [0, 0, 0, 0], "percentile_samples": [10, 11, 11, 5],
                          "ttft_p50_ms": [10.0, 20.0, 30.0, 1.0],
                          "usable": [True, True, True, False],
                          "step_flag": ["", "", "", "FAILED: 4 truncated"]})
    out = fold_repeats(steps, ["stack", "concurrency"], ["ttft_p50_ms"], ["ttft_p50_ms"])
    row, bad = out.iloc[0], out.iloc[1]
    assert (row["ttft_p50_ms"], row["ttft_p50_ms_min"], row["ttft_p50_ms_max"]) == (20, 10, 30)
    assert (row["repeats"], row["attempted"], row["completed"], row["failed"]) == (3, 33, 32, 1)
    assert row["percentile_samples"] == 10 and row["step_flag"] == "" and row["usable"]
    # the failed step never enters the mean: a row of its own, marked
    assert (bad["ttft_p50_ms"], bad["truncated"], bad["usable"]) == (1.0, 4, False)
    assert bad["step_flag"] == "FAILED: 4 truncated"


def test_summary_row_keeps_aiperfs_figures_apart_and_reads_what_was_asked():
    row = summary_row({"request_count": {"avg": 5.0}, "time_to_first_token": {"p50": 3.0},
                       "input_config": {"phases": [{"kind": "warmup", "concurrency": 9},
                                                   {"kind": "profiling", "concurrency": 4}],
                                        "endpoint": {"use_server_token_count": True,
                                                     "extra": {"ignore_eos": True}}}})
    assert (row["aiperf_error_count"], row["aiperf_request_count"], row["concurrency"],
            row["aiperf_ttft_p50_ms"]) == (0, 5.0, 4, 3.0)
    assert "ttft_p50_ms" not in row    # the project's own figure comes from the requests
    assert row["fixed_length"] and row["server_usage"]


def test_request_rows_keep_failures_and_drop_warmup():
    lines = b"\n".join([
        b'{"metadata":{"benchmark_phase":"warmup","conversation_id":"w"},"metrics":{}}',
        b'{"metadata":{"benchmark_phase":"profiling","conversation_id":"a","turn_index":0},'
        b'"metrics":{"time_to_first_token":{"value":12.5,"unit":"ms"}}}',
        b'{"metadata":{"benchmark_phase":"profiling","conversation_id":"b","turn_index":0,'
        b'"was_cancelled":true},"metrics":{},"error":{"code":499,"type":"Cancel"}}',
    ])
    rows = request_rows(lines)
    assert [r["conversation_id"] for r in rows] == ["a", "b"]
    assert not rows[0]["has_error"] and rows[0]["ttft_ms"] == 12.5
    assert rows[0]["completion_tokens"] is None     # no usage block on this record
    assert rows[1]["has_error"] and rows[1]["cancelled"] and rows[1]["error_code"] == 499


def test_sla_step_check_honours_every_bound_of_the_slo():
    slo = Slo("s", ttft_ms=5000, min_tok_s_per_user=50, itl_ms=20)
    assert meets(100, 10, 60, True, slo)
    assert not meets(100, 30, 60, True, slo)          # ITL p50 over its bound
    assert not meets(6000, 10, 60, True, slo)         # TTFT p50 over its bound
    assert not meets(100, 10, 40, True, slo)          # too slow per user
    assert not meets(100, 10, 60, False, slo)         # a flagged step never meets it
    assert not meets(math.nan, 10, 60, True, slo)
    assert not meets(100, 10, math.nan, True, Slo("t", ttft_ms=5000))


def test_summary_cost_warnings_name_what_the_cost_table_used():
    """The summary's cost warnings come from the cost rows: each unverified price once per
    stack, and a stack with an unpriced instance type is named; verified prices are not."""
    from reports.render.summary import price_warnings

    cost = pd.DataFrame([
        {"stack": "a", "unverified_prices": "m7i.4xlarge (catalogue 2025-01-01)",
         "cost_scope": "covers: nodes"},
        {"stack": "a", "unverified_prices": "m7i.4xlarge (catalogue 2025-01-01)",
         "cost_scope": "covers: nodes; PRICE UNKNOWN: 1.00 node-h of x9.large"},
        {"stack": "b", "unverified_prices": "", "cost_scope": "covers: nodes"},
    ])
    warnings = price_warnings(cost)
    assert warnings == [
        "a: $ figures use unverified prices: m7i.4xlarge (catalogue 2025-01-01)",
        "a: some instance prices are unknown: its cost and $/1M are left empty (see the cost "
        "scope)"]
    assert price_warnings(pd.DataFrame()) == []


def test_a_request_without_the_figure_a_bound_needs_is_not_good():
    """A one-token answer has no ITL and no per-user speed: under an SLO that bounds them it
    is not good (AIPerf's good-request count does the same); under a TTFT-only SLO it is."""
    req = pd.DataFrame({"completed": [True, True], "ttft_ms": [100.0, 100.0],
                        "tok_s_per_user": [80.0, math.nan], "itl_ms": [10.0, math.nan]})
    assert request_meets(req, Slo("u", ttft_ms=5000, min_tok_s_per_user=50)).tolist() == \
        [True, False]
    assert request_meets(req, Slo("i", ttft_ms=5000, itl_ms=20)).tolist() == [True, False]
    assert request_meets(req, Slo("t", ttft_ms=5000)).tolist() == [True, True]
