"""The trace replay section: what a replayed trace could reuse, what the server hit, and how the
arrivals and requests in flight went (pure tables, one plot).

One row per replayed step (`trace_replay` steps whose run record holds a `trace`: a public
trace or a user's file; the seeded generator's steps are in sla.csv). From the run record: the
trace and its sha256, the window, the speed-up, the rows dropped or clipped for the context
limit, and the two reuse upper bounds of the rows really sent (an infinite cache):
`reuse_upper_bound_blocks` counts 512-token trace blocks whose id appeared before (the
definition stacks/catalog/traces/README.md uses), `reuse_upper_bound_tokens` counts prompt tokens in
whole engine blocks of an already-seen prefix, the figure the server's hit rate (cached /
prompt tokens, `reports.records.server`) can be read against: `hit_rate_gap` = bound - measured,
what eviction, routing and capacity lost. From the per-request records: the achieved arrival rate
and requests in flight (time-weighted mean and peak), over all attempted requests. From
AIPerf's own summary: the send lag behind the schedule (`aiperf_replay_sched_lag_*`, anchored
at the least-late request) and its `aiperf_replay_sched_degraded` flag (p99 lag over 500 ms:
the in-flight cap or the engine held the schedule back, so the arrivals were not the trace's).
Request counts, latency percentiles (completed requests only) and `step_flag` / `usable` are
the step's own (reports.records.measures, reports.records.flags).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from reports.records.runs import STEP_KEY, RunRecord

WORKLOAD = "trace_replay"
COUNTS = ["attempted", "completed", "failed", "truncated", "cancelled"]
LATENCIES = ["ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms",
             "itl_p99_ms", "request_latency_p50_ms", "request_latency_p90_ms",
             "request_latency_p99_ms", "percentile_samples", "output_tok_s"]
LAG = ["aiperf_replay_sched_lag_p50_ms", "aiperf_replay_sched_lag_p99_ms",
       "aiperf_replay_sched_degraded"]
COLUMNS = ["stack", "run_id", "step", "step_flag", "usable", "source", "trace_sha256", "cache",
           "in_flight_cap", "speed_up", "window_start_s", "window_s", "max_requests",
           "requests_in_window", "sent", "excluded_over_context", "clipped_over_context",
           *COUNTS, "engine_block", "reuse_upper_bound_blocks", "reuse_upper_bound_tokens",
           "measured_hit_rate", "hit_rate_gap", "offered_rate_rps", "achieved_rate_rps",
           "in_flight_mean", "in_flight_max", *LAG, *LATENCIES]
MD_COLUMNS = ["stack", "step", "step_flag", "source", "cache", "in_flight_cap", "speed_up",
              "sent", "excluded_over_context", "clipped_over_context", "completed", "failed",
              "truncated", "reuse_upper_bound_blocks", "reuse_upper_bound_tokens",
              "measured_hit_rate", "hit_rate_gap", "offered_rate_rps", "achieved_rate_rps",
              "in_flight_mean", "in_flight_max", "aiperf_replay_sched_lag_p99_ms",
              "ttft_p50_ms", "itl_p50_ms"]


def scheduled_ms(path: Path) -> dict[str, float]:
    """Session id -> scheduled arrival (ms) from the dataset file AIPerf replayed."""
    out = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            row = orjson.loads(line)
            out[str(row["session_id"])] = float(row["timestamp"])
    return out


def in_flight(starts_ns: np.ndarray, ends_ns: np.ndarray,
              zero_ns: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(times in s from `zero_ns` (default: the first start), requests in flight from each
    time on): a step function, +1 per start and -1 per end; ends sort first at a tie."""
    t0 = starts_ns.min() if zero_ns is None else zero_ns
    events = sorted([(e, -1) for e in ends_ns] + [(s, 1) for s in starts_ns])
    times = np.array([(t - t0) / 1e9 for t, _ in events])
    return times, np.cumsum([d for _, d in events])


def flight_stats(starts_ns: np.ndarray, ends_ns: np.ndarray) -> dict[str, float]:
    """Time-weighted mean and peak of requests in flight from the first start to the last end."""
    times, level = in_flight(starts_ns, ends_ns)
    span = times[-1] - times[0]
    if span <= 0:
        return {"in_flight_mean": math.nan, "in_flight_max": float(level.max())}
    mean = float(np.sum(level[:-1] * np.diff(times)) / span)
    return {"in_flight_mean": mean, "in_flight_max": float(level.max())}


def schedule_zero_ns(req: pd.DataFrame, schedule: dict[str, float]) -> float | None:
    """The wall-clock instant (ns) of the first scheduled row, anchored as AIPerf anchors its
    send lag: the least-late request is taken as on time (None: no request matches a row)."""
    known = req[req["conversation_id"].isin(schedule)]
    if known.empty:
        return None
    asked_ns = known["conversation_id"].map(schedule).astype(float) * 1e6
    offset = (known["start_ns"].astype(float) - asked_ns).min()
    return float(offset + min(schedule.values()) * 1e6)


def _replay_row(st: pd.Series, rec: dict[str, Any], req: pd.DataFrame) -> dict[str, Any]:
    ds = rec.get("dataset") or {}
    tr, limit = ds["trace"], ds.get("context_limit") or {}
    window = tr.get("window") or {}
    measured = st.get("server_hit_rate")
    bound = tr.get("reuse_upper_bound_tokens")
    row = {"stack": st["stack"], "run_id": st["run_id"], "step": st["step"],
           "source": tr.get("source"), "trace_sha256": tr.get("sha256"),
           "cache": tr.get("cache", st.get("cache")), "in_flight_cap": st.get("concurrency"),
           "speed_up": tr.get("speed_up"), "window_start_s": window.get("start_s"),
           "window_s": window.get("length_s"), "max_requests": window.get("max_requests"),
           "requests_in_window": tr.get("requests_in_window"), "sent": tr.get("sent"),
           "excluded_over_context": limit.get("dropped"),
           "clipped_over_context": limit.get("clipped"),
           "engine_block": (tr.get("block_mapping") or {}).get("engine_block"),
           "reuse_upper_bound_blocks": tr.get("reuse_upper_bound_blocks"),
           "reuse_upper_bound_tokens": bound, "measured_hit_rate": measured,
           "hit_rate_gap": bound - measured if bound is not None and measured is not None
           and not pd.isna(measured) else math.nan,
           "offered_rate_rps": tr.get("offered_rate_rps")}
    row |= {k: st.get(k) for k in ("step_flag", "usable", *COUNTS, *LAG, *LATENCIES)}
    timed = req.dropna(subset=["start_ns", "end_ns"])
    if len(timed) > 1:
        starts = timed["start_ns"].to_numpy(dtype=float)
        span_s = (starts.max() - starts.min()) / 1e9
        row["achieved_rate_rps"] = (len(starts) - 1) / span_s if span_s > 0 else math.nan
        row |= flight_stats(starts, timed["end_ns"].to_numpy(dtype=float))
    return row


def trace_replay_table(steps: pd.DataFrame, requests: pd.DataFrame,
                       records: dict[tuple[str, str], RunRecord]) -> pd.DataFrame:
    """One row per replayed trace step (see the module doc); empty without any."""
    rows = []
    by_step = {k: g for k, g in requests.groupby(STEP_KEY, sort=False)}
    for _, st in steps[steps["workload"] == WORKLOAD].iterrows():
        record = records.get((st["stack"], st["run_id"]))
        rec = record.steps.get(st["step"], {}) if record else {}
        if "trace" not in (rec.get("dataset") or {}):
            continue   # the seeded generator: no trace, no schedule
        req = by_step.get(tuple(st[k] for k in STEP_KEY), requests.iloc[0:0])
        rows.append(_replay_row(st, rec, req))
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.sort_values(["stack", "run_id", "in_flight_cap", "cache", "step"]
                           ).reset_index(drop=True)
