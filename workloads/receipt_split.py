"""Where a client's TTFT exceeds the frontend's once the first-data stall is gone (pure): the
time from the client's request start to the frontend's receipt of it, per request.

The Dynamo frontend logs `request received` with the request's `x_request_id` (AIPerf sends one
per request and records it in `profile_export.jsonl`'s metadata) when its metrics guard is
made (Dynamo `lib/llm/src/http/service/metrics.rs` InflightGuard::new, 1.6.1), on the host's
clock at microsecond resolution, before its TTFT timer starts (`create_response_collector`,
just before `engine.generate`). AIPerf's `request_start_ns` is the same host clock
(time.time_ns(), aiperf record_models.py). So, per request joined by id, client start ->
frontend receipt is the transport and the client's own write: time in the client's TTFT and
not in the frontend's (docs/testing.md, "What is left without the stall").
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ID = re.compile(r'x_request_id="([^"]+)"')
_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{1,9})Z")


def frontend_receipts(log_lines: Iterable[str]) -> dict[str, int]:
    """{x_request_id: receipt time (ns since the epoch)} from the frontend's log."""
    out = {}
    for raw in log_lines:
        line = _ANSI.sub("", raw)
        if "request received" not in line:
            continue
        m, t = _ID.search(line), _TS.match(line)
        if not m or not t:
            continue
        whole = dt.datetime.strptime(t[1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)
        out[m[1]] = int(whole.timestamp()) * 10**9 + int(t[2].ljust(9, "0"))
    return out


def before_receipt_ms(export_lines: Iterable[str], receipts: dict[str, int]) -> float | None:
    """The mean client start -> frontend receipt (ms) over a step's profiled requests that the
    log received; None when none could be joined."""
    gaps = []
    for line in export_lines:
        rec = json.loads(line)
        md = rec.get("metadata") or {}
        if md.get("benchmark_phase") != "profiling":
            continue
        t = receipts.get(md.get("x_request_id") or "")
        start = md.get("request_start_ns")
        if t is not None and isinstance(start, int):
            gaps.append((t - start) / 1e6)
    return sum(gaps) / len(gaps) if gaps else None
