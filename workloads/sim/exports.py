"""A simulated step written as AIPerf 0.13.0 writes a measured one (pure).

The runner judges a step, and the reports read it, from AIPerf's two exports
(`profile_export.jsonl`, one record per request; `profile_export_aiperf.json`, the step's
statistics and its input config). A step DynoSim replayed is written in the same shapes, with
the same field names and units (reports/records/exports.py lists what is read), so every rule that
classifies requests, counts outcomes and computes figures applies to it unchanged. Nothing in
them can pass for a measurement: the summary names the simulator where AIPerf names itself
(`aiperf_version` null, `simulated_by` set), every record's metadata says `simulated: true`,
and the run's manifest labels every figure SIMULATED (workloads/sim/target.py).

Per request (DynoSim's per-request report, Dynamo 1.6.1): TTFT = first token - arrival; ITL =
the request's mean gap between its output tokens (AIPerf's per-request `inter_token_latency`
is the same mean); request latency = last token - arrival; the server's token counts are the
simulated ones (`usage_*`), its cached prompt tokens the engine's reused ones. A request still
running one grace period after a duration-bounded step's end is cancelled, as AIPerf cancels
it, and carries what it had received by then.
"""

from __future__ import annotations

import statistics
from typing import Any

from workloads.sim.dispatch import Plan, SendPattern

NS = 1_000_000   # ns per ms


def ttft_itl(r: dict) -> tuple[float, float | None]:
    """TTFT and the mean gap between output tokens as the client sees them: from arrival to
    the first token the client gets, then from it to the last over output_length - 1 gaps
    (AIPerf's per-request inter_token_latency). Disaggregated, the client's first token is the
    decode worker's, after the KV transfer (seen live on local-disagg with a 17,681-token
    prompt: the client's first token at 850-905 ms, the frontend's ttft_ms 419-443 ms, the
    transfer 348 ms), which is DynoSim's `first_token_ms`."""
    first = r["first_token_ms"]
    n = r["output_length"]
    itl = (r["last_token_ms"] - first) / (n - 1) if n > 1 else None
    return first - r["arrival_time_ms"], itl


def frontend_ttft_itl(r: dict) -> tuple[float, float | None]:
    """The same request as the Dynamo frontend's own request trace records it (`ttft_ms`,
    `avg_itl_ms`): disaggregated, its TTFT ends when the prefill worker answers (the live
    trace's ttft_ms = prefill_wait_time_ms + prefill_time_ms, before any transfer or decode
    step), and its ITL runs from there; aggregated, as the client sees it. What the
    simulation is compared with the live frontend on (reports' simulated vs measured)."""
    held = r.get("source_held_ms")
    if held is None:
        return ttft_itl(r)
    n = r["output_length"]
    return held - r["arrival_time_ms"], (r["last_token_ms"] - held) / (n - 1) if n > 1 else None


def _metric(value: float, unit: str) -> dict[str, Any]:
    return {"value": value, "unit": unit}


def request_record(r: dict, plan: Plan, epoch_ns: int, cut_ms: float | None) -> dict:
    """One replayed request as an AIPerf profiling record (`cut_ms`: when the step cancels
    what is still running, relative to its start)."""
    req = plan.origin[r["session_id"], r["turn_index"]]
    arrival, first, last = r["arrival_time_ms"], r["first_token_ms"], r["last_token_ms"]
    cancelled = cut_ms is not None and last > cut_ms
    end = cut_ms if cut_ms is not None and cancelled else last
    meta = {"conversation_id": req.conversation, "turn_index": req.turn,
            "x_request_id": f"sim-{req.conversation}-{req.turn}",
            "request_start_ns": epoch_ns + round(arrival * NS),
            "request_end_ns": epoch_ns + round(end * NS),
            "benchmark_phase": "profiling", "was_cancelled": cancelled, "simulated": True,
            "prefill_worker_idx": r.get("prefill_worker_idx"),
            "decode_worker_idx": r.get("decode_worker_idx")}
    record: dict[str, Any] = {"metadata": meta, "metrics": {}}
    if cancelled:
        record["error"] = {"code": 499, "type": "RequestCancelledError",
                           "message": "simulated: still running at the step's grace end"}
        if first <= end:
            record["metrics"]["time_to_first_token"] = _metric(first - arrival, "ms")
        return record
    out_tokens = r["output_length"]
    ttft, itl = ttft_itl(r)
    m = record["metrics"]
    m["time_to_first_token"] = _metric(ttft, "ms")
    if itl is not None:
        m["inter_token_latency"] = _metric(itl, "ms")
        m["output_token_throughput_per_user"] = _metric(1000.0 / itl, "tokens/sec/user")
    m["request_latency"] = _metric(last - arrival, "ms")
    m["input_sequence_length"] = _metric(r["input_length"], "tokens")
    m["output_sequence_length"] = _metric(out_tokens, "tokens")
    m["usage_prompt_tokens"] = _metric(r["input_length"], "tokens")
    m["usage_completion_tokens"] = _metric(out_tokens, "tokens")
    m["usage_prompt_cache_read_tokens"] = _metric(r.get("reused_input_tokens") or 0, "tokens")
    m["http_req_chunks_received"] = _metric(out_tokens, "chunks")
    return record


def _stats(values: list[float], unit: str) -> dict[str, Any] | None:
    if not values:
        return None
    xs = sorted(values)
    cuts = statistics.quantiles(xs, n=100, method="inclusive") if len(xs) > 1 else xs * 99
    out: dict[str, Any] = {"unit": unit, "avg": statistics.fmean(xs), "min": xs[0],
                           "max": xs[-1], "std": statistics.pstdev(xs), "count": len(xs)}
    for p in (1, 5, 10, 25, 50, 75, 90, 95, 99):
        out[f"p{p}"] = cuts[p - 1]
    return out


def summary(records: list[dict], pattern: SendPattern, dataset_path: str,
            simulated_by: dict[str, Any]) -> dict[str, Any]:
    """The step's `profile_export_aiperf.json`: the statistics the reports read, over the
    completed requests (AIPerf's own rule: request_count counts successes only)."""
    ok = [r for r in records if "error" not in r]
    m = [r["metrics"] for r in ok]

    def values(name: str) -> list[float]:
        return [x[name]["value"] for x in m if name in x]
    starts = [r["metadata"]["request_start_ns"] for r in records]
    ends = [r["metadata"]["request_end_ns"] for r in records]
    duration_s = (max(ends) - min(starts)) / 1e9 if records else 0.0
    tokens = sum(values("output_sequence_length"))
    out: dict[str, Any] = {
        "aiperf_version": None, "simulated_by": simulated_by,
        "time_to_first_token": _stats(values("time_to_first_token"), "ms"),
        "inter_token_latency": _stats(values("inter_token_latency"), "ms"),
        "request_latency": _stats(values("request_latency"), "ms"),
        "output_sequence_length": _stats(values("output_sequence_length"), "tokens"),
        "request_count": {"unit": "requests", "avg": len(ok)},
        "total_output_tokens": {"unit": "tokens", "avg": tokens},
        "benchmark_duration": {"unit": "sec", "avg": duration_s},
        "output_token_throughput": {"unit": "tokens/sec",
                                    "avg": tokens / duration_s if duration_s else None},
        "request_throughput": {"unit": "requests/sec",
                               "avg": len(ok) / duration_s if duration_s else None},
        "input_config": {
            "endpoint": {"extra": {"ignore_eos": True}, "use_server_token_count": True},
            "phases": [{"kind": "profiling", "concurrency": pattern.concurrency}],
            "datasets": [{"type": "file", "path": dataset_path, "format": "mooncake_trace"}]},
    }
    errors = len(records) - len(ok)
    if errors:
        out["error_request_count"] = {"unit": "requests", "avg": errors}
        out["error_summary"] = [{"error_details": {"type": "RequestCancelledError"},
                                 "count": errors}]
    return {k: v for k, v in out.items() if v is not None or k == "aiperf_version"}


def trace_lines(sim, epoch_ns: int) -> list[str]:
    """The step's simulated requests as the Dynamo frontend's request-trace lines
    (workloads/request_trace.py: schema dynamo.request.trace.v1, `request_end`): which worker
    served each, the prompt tokens it found cached and the prompt's block hashes, so the
    routing evidence of a simulated step is read as a live one's. Worker ids are DynoSim's
    worker indexes (prefill and decode pools numbered apart); every line says `simulated`."""
    import json

    lines = []
    for r in sim.requests:
        req = sim.plan.origin[r["session_id"], r["turn_index"]]
        decode = r.get("decode_worker_idx")
        prefill = r.get("prefill_worker_idx")
        received = epoch_ns / NS + r["arrival_time_ms"]
        request = {
            "request_id": f"sim-{req.conversation}-{req.turn}",
            "input_tokens": r["input_length"], "output_tokens": r["output_length"],
            "cached_tokens": r.get("reused_input_tokens") or 0,
            "request_received_ms": round(received),
            "ttft_ms": frontend_ttft_itl(r)[0], "avg_itl_ms": frontend_ttft_itl(r)[1],
            "total_time_ms": r["e2e_latency_ms"],
            "worker": {"prefill_worker_id": 1000 + (prefill if prefill is not None else decode),
                       "decode_worker_id": 1000 + decode if prefill is None else 2000 + decode},
            "replay": {"trace_block_size": sim.block_size,
                       "input_length": r["input_length"],
                       "input_sequence_hashes": list(req.hash_ids)}}
        event = {"schema": "dynamo.request.trace.v1", "event_type": "request_end",
                 "event_time_unix_ms": round(received + r["e2e_latency_ms"]),
                 "request": request}
        lines.append(json.dumps({"timestamp": round(r["arrival_time_ms"]), "event": event,
                                 "simulated": True}))
    return lines
