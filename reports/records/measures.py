"""One step's figures, each with one definition, from its classified requests (pure).

- requests: `attempted` is every profiling-phase request; `completed`, `failed`, `truncated`
  and `cancelled` are workloads.outcomes' classes (the runner judges steps with the same);
- latency percentiles (p50, p90, p99 of TTFT, ITL, request latency) and per-user speed come
  from completed requests only, and `percentile_samples` says how many stood behind them;
- the measurement window is the first request start to the last request end of the step's
  attempted requests: output tok/s (completed requests' output tokens / window), request
  throughput (completed / window), goodput and the cost period all divide by it;
- achieved concurrency: workloads.results.concurrency_of_spans over the attempted requests,
  the definition the runner's client verdict uses;
- server vs client output tokens: the frontend's `dynamo_frontend_output_tokens_total` over the
  profiling window against the usage counts the client received. A stream cut before its
  usage block still had its tokens counted by the frontend: the gap is how truncation shows on
  the server side.

AIPerf's own figures stay beside these as `aiperf_*` columns (reports.records.exports).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from workloads.outcomes import COMPLETED, OUTCOMES, Expectations, classify
from workloads.results import concurrency_of_spans

PERCENTILES = (50, 90, 99)
# A pXX needs at least 100 / (100 - XX) samples before it is more than the largest value.
NEEDED_SAMPLES = {q: math.ceil(100 / (100 - q)) for q in PERCENTILES}
LATENCIES = {"ttft": "ttft_ms", "itl": "itl_ms", "request_latency": "request_latency_ms"}
COUNT_COLUMNS = ["attempted", *OUTCOMES]


def pct(values: pd.Series | np.ndarray, q: float) -> float:
    """Percentile with linear interpolation (numpy's default, as AIPerf computes its own)."""
    v = pd.Series(values, dtype=float).dropna()
    return float(np.percentile(v, q)) if len(v) else math.nan


def percentiles(values: pd.Series, prefix: str) -> dict[str, float]:
    return {f"{prefix}_p{q}_ms": pct(values, q) for q in PERCENTILES}


def too_few(samples: float, q: int) -> bool:
    """True when a pXX from `samples` values is below what it needs (NaN samples: unknown)."""
    return bool(pd.isna(samples)) or samples < NEEDED_SAMPLES[q]


def classify_requests(req: pd.DataFrame, expect: Expectations | None) -> pd.DataFrame:
    """`outcome`, `outcome_reason` and `completed` per request (workloads.outcomes.classify)."""
    pairs = [classify(error=bool(e), cancelled=bool(c), completion_tokens=t,
                      requested_output_tokens=r, expect=expect)
             for e, c, t, r in zip(req["has_error"], req["cancelled"], req["completion_tokens"],
                                   req["requested_osl"], strict=True)]
    out = req.assign(outcome=[p[0] for p in pairs], outcome_reason=[p[1] for p in pairs])
    out["completed"] = out["outcome"] == COMPLETED
    return out


def outcome_counts(req: pd.DataFrame) -> dict[str, int]:
    counts = req["outcome"].value_counts() if len(req) else pd.Series(dtype=int)
    return {"attempted": len(req), **{o: int(counts.get(o, 0)) for o in OUTCOMES}}


def window(req: pd.DataFrame) -> tuple[int, int] | None:
    """(first request start, last request end) ns of the attempted requests."""
    starts, ends = req["start_ns"].dropna(), req["end_ns"].dropna()
    return (int(starts.min()), int(ends.max())) if len(starts) and len(ends) else None


def client_figures(req: pd.DataFrame, requested_concurrency: Any,
                   per_conversation: bool = False) -> dict[str, Any]:
    """The step's client-side columns from its classified requests (achieved concurrency in
    conversations for a multi-turn step, as the runner judges it)."""
    done = req[req["completed"]]
    win = window(req)
    window_s = (win[1] - win[0]) / 1e9 if win else math.nan
    tokens = float(done["osl"].sum())
    row: dict[str, Any] = {**outcome_counts(req), "percentile_samples": len(done),
                           "window_start_ns": win[0] if win else None,
                           "window_end_ns": win[1] if win else None,
                           "window_s": window_s}
    for name, col in LATENCIES.items():
        row.update(percentiles(done[col], name))
    row["ttft_mean_ms"] = float(done["ttft_ms"].mean()) if len(done) else math.nan
    row["itl_mean_ms"] = float(done["itl_ms"].mean()) if len(done) else math.nan
    row["output_tok_s_per_user_p50"] = pct(done["tok_s_per_user"], 50)
    row["output_tokens"] = tokens
    row["output_tok_s"] = tokens / window_s if window_s > 0 else math.nan
    row["request_throughput"] = len(done) / window_s if window_s > 0 else math.nan
    timed = req[req["start_ns"].notna() & req["end_ns"].notna()]
    timed = timed[timed["end_ns"] >= timed["start_ns"]]
    if per_conversation:
        timed = timed.groupby("conversation_id").agg(start_ns=("start_ns", "min"),
                                                     end_ns=("end_ns", "max"))
    spans = [(int(s), int(e)) for s, e in zip(timed["start_ns"], timed["end_ns"], strict=True)]
    requested = None if pd.isna(requested_concurrency) else int(requested_concurrency)
    row["achieved_concurrency"] = (concurrency_of_spans(spans, requested)
                                   if requested else None)
    return row


def reconcile(req: pd.DataFrame, server: dict[str, Any]) -> dict[str, Any]:
    """Output tokens as the frontend counted them vs as the client's usage blocks did."""
    client = float(req["completion_tokens"].sum())
    truncated = req[req["outcome"] == "truncated"]
    no_usage = truncated[truncated["completion_tokens"].isna()]
    chunks = float(no_usage["client_chunks"].sum()) if no_usage["client_chunks"].notna().any() \
        else math.nan
    srv = server.get("server_output_tokens", math.nan)
    gap = srv - client
    return {"client_output_tokens": client, "truncated_chunks_received": chunks,
            "output_token_gap": gap,
            "gap_explanation": explain_gap(gap, len(truncated), len(no_usage), chunks,
                                           int((req["outcome"] == "failed").sum())
                                           + int((req["outcome"] == "cancelled").sum()))}


def explain_gap(gap: float, truncated: int, no_usage: int, chunks: float,
                failed: int) -> str:
    if math.isnan(gap):
        return "not measured: no frontend output-token counter in the server export"
    if gap == 0:
        return "agree"
    parts = [f"the frontend counted {gap:+.0f} output tokens against the client's usage"]
    if no_usage:
        got = f", ~{chunks:.0f} chunks received on them" if not math.isnan(chunks) else ""
        parts.append(f"{no_usage} truncated stream(s) ended before their usage block, so the "
                     f"client counted none of their tokens{got}")
    elif truncated:
        parts.append(f"{truncated} truncated stream(s)")
    if failed:
        parts.append(f"{failed} failed or cancelled request(s): the server streamed tokens "
                     "the client never counted (timeouts, errors after the first token)")
    if len(parts) == 1:
        parts.append("no client-side cause: requests straddling the profiling window's "
                     "scrape boundaries, or a server fault")
    return "; ".join(parts)
