"""Where each request went, from the Dynamo frontend's own per-request records.

Dynamo's frontend writes one JSON line per finished request when its request trace is on
(`DYN_REQUEST_TRACE=1`, sink `jsonl`, file `DYN_REQUEST_TRACE_OUTPUT_PATH`; sources
ai-dynamo/dynamo lib/llm/src/request_trace/{config,sink,mod}.rs). Checked against the
installed ai-dynamo-runtime 1.6.1 on the local engine, with both router modes and with
disaggregated workers (tests/test_routing_engine.py):

    {"timestamp": ..., "event": {"schema": "dynamo.request.trace.v1",
     "event_type": "request_end", "event_time_unix_ms": ...,
     "request": {"request_id", "input_tokens", "output_tokens", "cached_tokens",
                 "request_received_ms", "ttft_ms", "total_time_ms", ...,
                 "kv_hit_rate" (KV router: the overlap it predicted),
                 "kv_transfer_estimated_latency_ms" (disaggregated),
                 "worker": {"prefill_worker_id", "decode_worker_id", [dp ranks]},
                 "replay": {"trace_block_size", "input_length",
                            "input_sequence_hashes": [one per block of the prompt]}}}}

`worker` names the instance that served the request (the decimal of the `worker_id` label,
in hex, on that worker's /metrics), `cached_tokens` is the prefix the serving worker already
held, and the block hashes let a request be linked to the earlier turn of its conversation
(workloads.routing_evidence). The frontend does not keep AIPerf's X-Request-ID, so records
are matched to a step by time: the runner keeps those received while the step's AIPerf ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

from stacks.conventions import frontend_trace
from workloads.routing_evidence import request_of, requests, summary

STEP_FILE = "request_trace.jsonl"    # the step's records, verbatim lines, in its folder
WAIT_S = 5.0                         # how long the runner waits for the last records
SOURCE = "Dynamo frontend request trace (DYN_REQUEST_TRACE, jsonl sink)"


def frontend_env(path: str) -> dict[str, str]:
    """Env of the frontend process that turns the request trace on, writing to `path`."""
    return frontend_trace.request_trace_env(path)


def lines_in_window(lines: Iterable[str], since_ms: float, until_ms: float) -> list[str]:
    """The finished-request lines whose request arrived within [since_ms, until_ms]."""
    out = []
    for line in lines:
        req = request_of(line)
        received = req.get("request_received_ms") if req else None
        if isinstance(received, int | float) and since_ms <= received <= until_ms:
            out.append(line.rstrip("\n"))
    return out


def collect(read: Callable[[], list[str]], expected: int, wait_s: float = WAIT_S,
            poll_s: float = 0.25) -> list[str]:
    """`read()` until it returns `expected` lines or `wait_s` passes (the sink flushes on a
    timer, so the last requests of a step may land a moment after AIPerf exits)."""
    deadline = time.monotonic() + wait_s
    lines = read()
    while len(lines) < expected and time.monotonic() < deadline:
        time.sleep(poll_s)
        lines = read()
    return lines


def save_step_trace(target, work: Path, since_ms: float, until_ms: float,
                    expected: int) -> dict:
    """Write the step's records to `work/STEP_FILE`; what the step record says about them."""
    reader = getattr(target, "request_trace", None)
    if reader is None:
        return {"source": None, "reason": f"the {target.kind} target keeps no request trace"}
    try:
        lines = collect(lambda: reader(since_ms, until_ms), expected)
    except Exception as exc:  # noqa: BLE001 - evidence is recorded missing, never fatal
        return {"source": SOURCE, "records": 0, "reason": f"could not read it: {exc}"[:300]}
    (work / STEP_FILE).write_text("".join(f"{line}\n" for line in lines))
    figures = summary(requests(lines))
    out = {"source": SOURCE, "file": STEP_FILE, "records": len(lines),
           "expected": expected, "window_ms": [round(since_ms), round(until_ms)],
           "follow_ups": figures["follow_ups"], "prompt_workers": figures["prompt_workers"],
           "same_worker_share": _rounded(figures["same_worker_share"])}
    if len(lines) < expected:
        out["reason"] = (f"{expected - len(lines)} request(s) of the step have no record "
                         f"after {WAIT_S:.0f} s")
    return out


def _rounded(x: float) -> float | None:
    return None if x != x else round(x, 4)
