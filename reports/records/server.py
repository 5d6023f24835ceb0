"""Server-side figures of a step from AIPerf's scrape of the frontend and worker /metrics.

Prefix hits, KV usage, preemptions and queues come from here and never from client data. The
hit rate is cached prompt tokens over prompt tokens, both counted by the Dynamo frontend
(`dynamo_frontend_cached_tokens` and `dynamo_frontend_input_sequence_tokens` histograms over
the step's profiling window). The two histograms are observed at slightly different moments of
a request, so a scrape boundary can cut one request into one and not the other; the rate is
therefore taken per request (mean cached / mean prompt tokens), which equals the plain ratio of
sums whenever both count the same requests. A real vLLM worker also exports
`vllm:prefix_cache_hits` / `vllm:prefix_cache_queries`; that ratio is reported beside it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from stacks.catalog import metrics as m


def family(name: str) -> str:
    """Prometheus counter family name: AIPerf exports counters without the `_total` suffix."""
    return name.removesuffix("_total")


def _series(srv: pd.DataFrame, metric: str, stat: str) -> pd.Series:
    if srv.empty:
        return pd.Series(dtype=float)
    sel = srv[(srv["metric"].isin({metric, family(metric)})) & (srv["stat"] == stat)]
    return sel["value"]


def histogram_mean(srv: pd.DataFrame, metric: str) -> float:
    """sum / count of a histogram over all its series (endpoints, labels) in the window."""
    total, count = _series(srv, metric, "sum").sum(), _series(srv, metric, "count").sum()
    return float(total / count) if count else math.nan


def counter_total(srv: pd.DataFrame, metric: str) -> float:
    s = _series(srv, metric, "total")
    return float(s.sum()) if len(s) else math.nan


def counter_where(srv: pd.DataFrame, metric: str, label: str, value: str,
                  negate: bool = False) -> float:
    """A counter's total over the series whose `label` is (or, negated, is not) `value`."""
    if srv.empty:
        return math.nan
    sel = srv[srv["metric"].isin({metric, family(metric)}) & (srv["stat"] == "total")]
    if sel.empty:
        return math.nan
    match = sel["labels"].map(lambda text: json.loads(text).get(label) == value)
    return float(sel[~match if negate else match]["value"].sum())


def _histogram_count(srv: pd.DataFrame, metric: str) -> float:
    s = _series(srv, metric, "count")
    return float(s.sum()) if len(s) else math.nan


def offload_bytes(srv: pd.DataFrame) -> float:
    """KV bytes moved to and from the offload tier: vLLM's flat store + load counters, or,
    from a vLLM that exports only the older one, its total over both directions (never both:
    the versions that export both count the same bytes twice)."""
    flat = [counter_total(srv, names[0]) for names in (m.WORKER_KV_OFFLOAD_STORE_BYTES,
                                                        m.WORKER_KV_OFFLOAD_LOAD_BYTES)]
    flat = [x for x in flat if not math.isnan(x)]
    return float(sum(flat)) if flat else counter_total(srv, m.WORKER_KV_OFFLOAD_TOTAL_BYTES)


def gauge_stat(srv: pd.DataFrame, metric: str, stat: str = "avg") -> float:
    s = _series(srv, metric, stat)
    if not len(s):
        return math.nan
    return float(s.max() if stat == "max" else s.mean())


def hit_rate(srv: pd.DataFrame) -> float:
    cached = histogram_mean(srv, m.FRONTEND_CACHED_TOKENS)
    prompt = histogram_mean(srv, m.FRONTEND_INPUT_SEQUENCE_TOKENS)
    if math.isnan(cached) or math.isnan(prompt) or prompt <= 0:
        return math.nan
    return cached / prompt


def worker_hit_rate(srv: pd.DataFrame) -> float:
    hits = counter_total(srv, m.WORKER_PREFIX_CACHE_HITS)
    queries = counter_total(srv, m.WORKER_PREFIX_CACHE_QUERIES)
    return hits / queries if queries and not math.isnan(queries) else math.nan


def step_figures(srv: pd.DataFrame) -> dict[str, Any]:
    """One step's server-side columns (NaN where the server exported nothing)."""
    return {
        "server_ttft_mean_ms": histogram_mean(srv, m.FRONTEND_TTFT) * 1000,
        "server_itl_mean_ms": histogram_mean(srv, m.FRONTEND_ITL) * 1000,
        "server_cached_tokens_mean": histogram_mean(srv, m.FRONTEND_CACHED_TOKENS),
        "server_prompt_tokens_mean": histogram_mean(srv, m.FRONTEND_INPUT_SEQUENCE_TOKENS),
        "server_hit_rate": hit_rate(srv),
        "server_hit_rate_workers": worker_hit_rate(srv),
        "server_router_kv_hit_rate_mean": histogram_mean(srv, m.ROUTER_KV_HIT_RATE),
        "server_kv_usage_avg": gauge_stat(srv, m.WORKER_KV_CACHE_USAGE),
        "server_kv_usage_max": gauge_stat(srv, m.WORKER_KV_CACHE_USAGE, "max"),
        "server_preemptions": counter_total(srv, m.WORKER_PREEMPTIONS),
        "server_queue_avg": gauge_stat(srv, m.WORKER_REQUESTS_WAITING),
        "server_gpu_util_avg": gauge_stat(srv, m.DCGM_GPU_UTIL),
        # KV moved between workers (NIXL) and to/from the offload tier (real vLLM only)
        "server_kv_transfers": _histogram_count(srv, m.WORKER_NIXL_XFER_TIME),
        "server_kv_transfer_bytes": _series(srv, m.WORKER_NIXL_BYTES_TRANSFERRED, "sum").sum()
        if len(_series(srv, m.WORKER_NIXL_BYTES_TRANSFERRED, "sum")) else math.nan,
        "server_offload_bytes": offload_bytes(srv),
        "server_offload_hits": counter_total(srv, m.WORKER_EXTERNAL_PREFIX_CACHE_HITS),
        # the frontend's own request and token accounting, for the reconciliation
        "server_output_tokens": counter_total(srv, m.FRONTEND_OUTPUT_TOKENS),
        "server_requests_started": counter_total(srv, m.FRONTEND_REQUESTS_STARTED),
        "server_requests_succeeded": counter_where(srv, m.FRONTEND_REQUESTS, "status",
                                                   "success"),
        "server_requests_failed": counter_where(srv, m.FRONTEND_REQUESTS, "status", "success",
                                                negate=True),
    }
