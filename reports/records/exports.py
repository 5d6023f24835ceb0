"""Parse one step's AIPerf 0.13.0 exports into tidy rows (pure functions + thin file readers).

Structures verified in the installed AIPerf source and on real runs against the local engine:
- `profile_export_aiperf.json`: one stats object per metric, {unit, avg, p1..p99, min, max,
  std, count, sum}; `request_count` counts successes only, `error_request_count` is present
  only when errors happened, `input_config.phases[kind=profiling].concurrency` is the requested
  concurrency and `input_config.datasets[0]` names the dataset (synthetic ISL/OSL or a file).
- `profile_export.jsonl`: one request per line, {metadata: {conversation_id, turn_index,
  x_request_id, request_start_ns, request_end_ns, benchmark_phase, was_cancelled, ...},
  metrics: {name: {value, unit}}}; warm-up rows are kept by AIPerf (benchmark_phase "warmup")
  and dropped here; failed/cancelled rows carry `error` {code, type, message} and few metrics;
  a stream cut before its usage block carries no usage_* and no output_sequence_length (with
  --use-server-token-count); no finish reason is recorded at this export level.
- `server_metrics_export.json`: {summary, metrics: {name: {type, unit, series: [{endpoint_url,
  labels, stats}]}}}; stats are deltas over the profiling window: counters {total, rate},
  histograms {count, sum, avg, p50_estimate, ...}, gauges {avg, min, max, p50, ...}.
  AIPerf always scrapes the inference URL's /metrics besides the `--server-metrics` URLs
  (aiperf/server_metrics/manager.py, deduplicated by normalized URL only). On a cluster the
  inference URL is the frontend Service while the runner names the frontend pods, so one
  frontend appears twice under two URLs: `runner_endpoints` says which series to keep.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson

from stacks.conventions.k8s_names import FRONTEND_COMPONENT
from workloads.outcomes import completion_tokens, expectations

AIPERF_SUMMARY = "profile_export_aiperf.json"
AIPERF_RECORDS = "profile_export.jsonl"
SERVER_METRICS = "server_metrics_export.json"

# Per-request metrics kept from the JSONL (AIPerf name -> column). Everything in ms / tokens.
# The usage_* values are the server's own counts, returned in each response's usage block
# (absent when the stream ended before it: see workloads.outcomes).
REQUEST_METRICS = {
    "time_to_first_token": "ttft_ms",
    "inter_token_latency": "itl_ms",
    "request_latency": "request_latency_ms",
    "input_sequence_length": "isl",
    "output_sequence_length": "osl",
    "output_token_throughput_per_user": "tok_s_per_user",
    "usage_prompt_tokens": "usage_prompt_tokens",
    "usage_prompt_cache_read_tokens": "usage_cached_tokens",
    # chunks the client received: on a stream cut before its usage block, about the tokens
    # it got (one token per chunk on the engines measured here)
    "http_req_chunks_received": "client_chunks",
}

# AIPerf's own step statistics, kept beside the project's for comparison and named so:
# AIPerf counts a stream cut short as a success, so these can include truncated requests.
SUMMARY_STATS = {
    ("time_to_first_token", "p50"): "aiperf_ttft_p50_ms",
    ("time_to_first_token", "p99"): "aiperf_ttft_p99_ms",
    ("inter_token_latency", "p50"): "aiperf_itl_p50_ms",
    ("inter_token_latency", "p99"): "aiperf_itl_p99_ms",
    ("request_latency", "p99"): "aiperf_request_latency_p99_ms",
    ("output_token_throughput", "avg"): "aiperf_output_tok_s",
    ("request_throughput", "avg"): "aiperf_request_throughput",
    ("request_count", "avg"): "aiperf_request_count",
    ("error_request_count", "avg"): "aiperf_error_count",
    ("total_output_tokens", "avg"): "aiperf_total_output_tokens",
    ("benchmark_duration", "avg"): "aiperf_duration_s",
    ("effective_concurrency", "avg"): "aiperf_effective_concurrency",
    # fixed-schedule (trace) replays only: send lag behind the schedule, anchored at the
    # least-late request, and AIPerf's flag for a p99 lag over 500 ms
    # (aiperf 0.13.0 metrics/types/replay_sched_lag_metrics.py)
    ("replay_sched_lag_p50", "avg"): "aiperf_replay_sched_lag_p50_ms",
    ("replay_sched_lag_p99", "avg"): "aiperf_replay_sched_lag_p99_ms",
    ("replay_sched_degraded", "avg"): "aiperf_replay_sched_degraded",
}


def read_json(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def summary_row(summary: dict[str, Any]) -> dict[str, Any]:
    """Step-level figures exactly as AIPerf computed them (None where AIPerf has none)."""
    row: dict[str, Any] = {}
    for (metric, stat), col in SUMMARY_STATS.items():
        obj = summary.get(metric)
        row[col] = obj.get(stat) if isinstance(obj, dict) else None
    # AIPerf omits error_request_count when it is zero
    row["aiperf_error_count"] = row["aiperf_error_count"] or 0
    row["aiperf_request_count"] = row["aiperf_request_count"] or 0
    row["error_types"] = "; ".join(
        f"{e.get('error_details', {}).get('type', '?')} x{e.get('count', 0)}"
        for e in summary.get("error_summary") or [])
    config = summary.get("input_config") or {}
    row["concurrency"] = profiling_concurrency(config)
    row.update(dataset_spec(config))
    expect = expectations(config)
    row["fixed_length"] = expect.fixed_length if expect else None
    row["server_usage"] = expect.server_usage if expect else None
    row["aiperf_version"] = summary.get("aiperf_version")
    row["benchmark_id"] = summary.get("benchmark_id")
    row["was_cancelled"] = bool(summary.get("was_cancelled"))
    return row


def profiling_concurrency(input_config: dict[str, Any]) -> int | None:
    for phase in input_config.get("phases") or []:
        if phase.get("kind") == "profiling" and phase.get("concurrency") is not None:
            return int(phase["concurrency"])
    return None


def dataset_spec(input_config: dict[str, Any]) -> dict[str, Any]:
    """What was asked of the dataset: synthetic ISL/OSL means, or the input file."""
    ds = (input_config.get("datasets") or [{}])[0]
    prompts = ds.get("prompts") or {}
    return {
        "dataset_type": ds.get("type"),
        "dataset_path": ds.get("path"),
        "dataset_format": ds.get("format"),
        "requested_isl_mean": (prompts.get("isl") or {}).get("mean"),
        "requested_osl_mean": (prompts.get("osl") or {}).get("mean"),
    }


def request_rows(lines: bytes) -> list[dict[str, Any]]:
    """Profiling-phase requests from AIPerf's JSONL, successes and failures alike."""
    rows = []
    for line in lines.splitlines():
        if not line.strip():
            continue
        rec = orjson.loads(line)
        meta = rec.get("metadata") or {}
        if meta.get("benchmark_phase") != "profiling":
            continue
        metrics = rec.get("metrics") or {}
        err = rec.get("error")
        row = {
            "conversation_id": meta.get("conversation_id"),
            "turn_index": meta.get("turn_index"),
            "x_request_id": meta.get("x_request_id"),
            "start_ns": meta.get("request_start_ns"),
            "end_ns": meta.get("request_end_ns"),
            "cancelled": bool(meta.get("was_cancelled")),
            "has_error": err is not None,
            "error_type": (err or {}).get("type"),
            "error_code": (err or {}).get("code"),
            "completion_tokens": completion_tokens(rec),
        }
        for name, col in REQUEST_METRICS.items():
            m = metrics.get(name)
            row[col] = m.get("value") if isinstance(m, dict) else None
        rows.append(row)
    return rows


def normalized_metrics_url(url: str) -> str:
    """A /metrics URL as AIPerf 0.13.0 writes it (aiperf.common.metric_utils): with a scheme,
    no trailing slash, ending in /metrics."""
    url = url if url.startswith(("http://", "https://")) else f"http://{url}"
    url = url.rstrip("/")
    return url if url.endswith("/metrics") else f"{url}/metrics"


def runner_endpoints(named: dict[str, str] | None) -> set[str] | None:
    """The /metrics URLs whose series count for a step, from the endpoints the runner passed
    (`{component: url}`, the step record's `server_metrics`).

    When the runner named a frontend's own endpoint (`frontend`, `frontend-0`, ...), only the
    runner's URLs count: AIPerf's automatic scrape of the inference URL is then that frontend
    again (a cluster's Service) or one of the runner's URLs (the local engine). Otherwise
    (an old record, or no frontend pod was ready) nothing is dropped: None keeps every series.
    """
    named = named or {}
    if not any(re.fullmatch(rf"{FRONTEND_COMPONENT}(-\d+)?", key) for key in named):
        return None
    return {normalized_metrics_url(url) for url in named.values() if url}


def server_metric_rows(export: dict[str, Any], keep: set[str] | None = None
                       ) -> list[dict[str, Any]]:
    """The server-metrics export as tidy rows: one per (metric, series, stat); with `keep`,
    only the series scraped from those (normalized) /metrics URLs."""
    rows = []
    for name, metric in (export.get("metrics") or {}).items():
        for series in metric.get("series") or []:
            url = series.get("endpoint_url")
            if keep is not None and (not url or normalized_metrics_url(url) not in keep):
                continue
            labels = json.dumps(series.get("labels") or {}, sort_keys=True)
            for stat, value in (series.get("stats") or {}).items():
                if isinstance(value, (int, float)):
                    rows.append({"metric": name, "type": metric.get("type"),
                                 "endpoint": series.get("endpoint_url"), "labels": labels,
                                 "stat": stat, "value": float(value)})
    return rows


def dataset_lengths(path: Path) -> list[dict[str, Any]]:
    """Requested lengths per (conversation, turn) of a Mooncake-style dataset.

    Rows carrying `session_id` are that session's turns in file order; rows without one are
    single-turn sessions that AIPerf names session_000000, session_000001, ... in file order
    (checked on real runs).
    """
    rows = []
    turns: dict[str, int] = {}
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    for i, line in enumerate(lines):
        rec = orjson.loads(line)
        sid = str(rec.get("session_id") or f"session_{i:06d}")
        turn = turns.get(sid, 0)
        turns[sid] = turn + 1
        rows.append({"conversation_id": sid, "turn_index": turn,
                     "requested_isl": rec.get("input_length"),
                     "requested_osl": rec.get("output_length")})
    return rows


def synthetic_requested_osl(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """Requested output length per (conversation, turn) from AIPerf's inputs.json payloads."""
    rows = []
    for session in inputs.get("data") or []:
        for turn, payload in enumerate(session.get("payloads") or []):
            osl = payload.get("max_completion_tokens", payload.get("max_tokens"))
            rows.append({"conversation_id": session.get("session_id"), "turn_index": turn,
                         "requested_osl": osl})
    return rows
