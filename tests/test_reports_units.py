"""Pure pieces of the reports: step ids, SLO parsing, Pareto front, repeats folding."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from reports.exports import request_rows, summary_row
from reports.goodput import Slo, parse_slo, request_meets
from reports.plots import pareto_front
from reports.runs import parse_step_id
from reports.sla import meets
from reports.tables import fold_repeats, share_of


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


def test_failed_requests_never_meet_an_slo():
    req = pd.DataFrame({"ok": [True, True, False, True], "ttft_ms": [10, 10, 1, 10],
                        "tok_s_per_user": [60, 40, 99, None], "itl_ms": [5, 5, 5, 5]})
    assert request_meets(req, Slo("s", 100, 50)).tolist() == [True, False, False, False]


def test_pareto_front_keeps_only_undominated_points():
    pts = pd.DataFrame({"x": [10, 20, 30, 25, 5], "y": [50, 60, 90, 95, 40]})
    front = pareto_front(pts, "x", "y")
    assert front[["x", "y"]].values.tolist() == [[5, 40], [10, 50], [20, 60], [30, 90]]


def test_fold_repeats_mean_spread_and_counts():
    # two repeats within run x, one in run y: three samples
    steps = pd.DataFrame({"stack": ["a"] * 3, "concurrency": [1, 1, 1], "repeat": [1, 2, 1],
                          "run_id": ["x", "x", "y"],
                          "requests": [10, 12, 11], "errors": [0, 1, 0],
                          "ttft_p50_ms": [10.0, 20.0, 30.0]})
    row = fold_repeats(steps, ["stack", "concurrency"], ["ttft_p50_ms"],
                       ["ttft_p50_ms"]).iloc[0]
    assert (row["ttft_p50_ms"], row["ttft_p50_ms_min"], row["ttft_p50_ms_max"]) == (20, 10, 30)
    assert (row["repeats"], row["requests"], row["errors"]) == (3, 33, 1)


def test_summary_row_counts_missing_error_count_as_zero():
    row = summary_row({"request_count": {"avg": 5.0}, "time_to_first_token": {"p50": 3.0},
                       "input_config": {"phases": [{"kind": "warmup", "concurrency": 9},
                                                   {"kind": "profiling", "concurrency": 4}]}})
    assert (row["errors"], row["requests"], row["concurrency"], row["ttft_p50_ms"]) == \
        (0, 5.0, 4, 3.0)


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
    assert rows[0]["ok"] and rows[0]["ttft_ms"] == 12.5
    assert not rows[1]["ok"] and rows[1]["cancelled"] and rows[1]["error_code"] == 499


def test_sla_step_check_honours_every_bound_of_the_slo():
    slo = Slo("s", ttft_ms=5000, min_tok_s_per_user=50, itl_ms=20)
    assert meets(100, 10, 60, "ok", slo)
    assert not meets(100, 30, 60, "ok", slo)          # ITL p50 over its bound
    assert not meets(6000, 10, 60, "ok", slo)         # TTFT p50 over its bound
    assert not meets(100, 10, 40, "ok", slo)          # too slow per user
    assert not meets(100, 10, 60, "failed", slo)      # a failed step never meets it
    assert not meets(math.nan, 10, 60, "ok", slo)
    assert not meets(100, 10, math.nan, "ok", Slo("t", ttft_ms=5000))
