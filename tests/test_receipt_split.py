"""The part of a client's TTFT before the Dynamo frontend received the request (pure), from the
frontend's log and AIPerf's per-request records joined by x_request_id (workloads/
receipt_split.py); and make bench's columns built on it."""

from __future__ import annotations

import json

import pytest

from workloads import bench
from workloads.receipt_split import before_receipt_ms, frontend_receipts

# Two lines as the 1.6.1 frontend writes them (tracing's ANSI colours included), and an
# unrelated one
LOG = [
    "\x1b[2m2026-12-04T18:25:18.072947Z\x1b[0m \x1b[32m INFO\x1b[0m \x1b[1mhttp-request\x1b[0m: "
    "\x1b[2mdynamo_llm::http::service::metrics\x1b[0m\x1b[2m:\x1b[0m request received "
    "\x1b[3mrequest_id\x1b[0m\x1b[2m=\x1b[0m5c63 \x1b[3mx_request_id\x1b[0m\x1b[2m=\x1b[0m"
    '"aaa" \x1b[3mmodel\x1b[0m\x1b[2m=\x1b[0mQwen/Qwen3-30B-A3B',
    '2026-12-04T18:25:19.141573Z  INFO http-request: request received x_request_id="bbb"',
    '2026-12-04T18:25:19.200000Z  INFO http-request: request completed x_request_id="bbb" '
    'ttft_ms="33.1"',
]


def _rec(xid: str, start_ns: int, phase: str = "profiling") -> str:
    return json.dumps({"metadata": {"x_request_id": xid, "request_start_ns": start_ns,
                                    "benchmark_phase": phase}, "metrics": {}})


def test_receipts_are_read_at_microseconds_through_the_logs_colours():
    got = frontend_receipts(LOG)
    assert got == {"aaa": 1_796_408_718_072_947_000, "bbb": 1_796_408_719_141_573_000}


def test_the_time_before_receipt_is_the_mean_over_joined_profiled_requests():
    receipts = frontend_receipts(LOG)
    lines = [_rec("aaa", receipts["aaa"] - 1_500_000), _rec("bbb", receipts["bbb"] - 2_500_000),
             _rec("ccc", 0),                                   # not in the log: left out
             _rec("aaa", receipts["aaa"] - 90_000_000, "warmup")]
    assert before_receipt_ms(lines, receipts) == 2.0
    assert before_receipt_ms([_rec("ccc", 0)], receipts) is None


def test_bench_shows_it_and_the_ratio_from_receipt(tmp_path):
    receipts = frontend_receipts(LOG)
    (tmp_path / "profile_export.jsonl").write_text(
        _rec("aaa", receipts["aaa"] - 2_000_000) + "\n")
    cols = bench.receipt_columns(tmp_path, receipts, ttft_quickack=36.0,
                                 ttft_engine_quickack=33.0)
    assert cols["before_receipt_ms"] == 2.0
    assert cols["ttft_ratio_after_receipt"] == pytest.approx(36.0 / 35.0)
    assert bench.receipt_columns(None, receipts, 36.0, 33.0) == {
        "before_receipt_ms": None, "ttft_ratio_after_receipt": None}
    heads = [h for _, h, _ in bench.COLUMNS]
    assert heads.index("of it before the frontend's receipt ms") == \
        heads.index("ratio w/o stall") + 1
