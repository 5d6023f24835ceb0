"""What a finished AIPerf step says, read from its exports (pure: records in, numbers out).

- `profile_export.jsonl`: one record per request; only `benchmark_phase == "profiling"` counts.
  Each request is classified completed / failed / truncated / cancelled by
  workloads.outcomes (timeouts counted apart among the failed); all are kept and counted.
- achieved concurrency: the time-weighted number of requests in flight once the first
  `concurrency` requests have started, until the last request start (while the client was
  issuing), from the per-request timestamps.
- per request: requested lengths (from the dataset row, matched by session id and turn) next
  to the server-counted ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from workloads.outcomes import (
    FAILED,
    Expectations,
    OutcomeCounts,
    classify_record,
    expectations,
    expectations_from_args,
    is_timeout,
)

RECORDS = "profile_export.jsonl"
SUMMARY = "profile_export_aiperf.json"


def read_records(artifact_dir: Path) -> list[dict]:
    path = artifact_dir / RECORDS
    if not path.exists():
        return []
    out = []
    with path.open() as f:
        for line in f:
            if line.strip():
                rec = json.loads(line)
                if rec.get("metadata", {}).get("benchmark_phase", "profiling") == "profiling":
                    out.append(rec)
    return out


def outcomes(records: list[dict], rows: list[dict], expect: Expectations | None
             ) -> list[dict]:
    """Per request: requested vs server-counted lengths (`request_lengths`) and its outcome
    class with the reason (workloads.outcomes, the one classifier)."""
    out = []
    for rec, lengths in zip(records, request_lengths(records, rows), strict=True):
        outcome, why = classify_record(rec, lengths["requested_output_tokens"], expect)
        out.append({**lengths, "outcome": outcome, "outcome_reason": why})
    return out


def count(records: list[dict], per_request: list[dict]) -> OutcomeCounts:
    """The step's requests by outcome (`outcomes` of the same records), timeouts counted apart
    among the failed."""
    timeouts = sum(1 for rec, r in zip(records, per_request, strict=True)
                   if r["outcome"] == FAILED and is_timeout(rec["error"]))
    return OutcomeCounts.of([r["outcome"] for r in per_request], timeouts=timeouts)


def error_summary(records: list[dict], limit: int = 5) -> list[dict]:
    """The most frequent error kinds: [{code, type, message, count}]."""
    seen: dict[tuple, int] = {}
    for rec in records:
        err = rec.get("error")
        if err:
            key = (err.get("code"), err.get("type"), str(err.get("message", ""))[:200])
            seen[key] = seen.get(key, 0) + 1
    top = sorted(seen.items(), key=lambda kv: -kv[1])[:limit]
    return [{"code": c, "type": t, "message": m, "count": n} for (c, t, m), n in top]


def request_spans(records: list[dict]) -> list[tuple[int, int]]:
    """(start, end) ns of every request with both timestamps."""
    spans = []
    for rec in records:
        md = rec.get("metadata", {})
        start, end = md.get("request_start_ns"), md.get("request_end_ns")
        if start is not None and end is not None and end >= start:
            spans.append((int(start), int(end)))
    return spans


def conversation_spans(records: list[dict]) -> list[tuple[int, int]]:
    """(first turn's start, last turn's end) ns of every multi-turn conversation."""
    by_conv: dict[str, tuple[int, int]] = {}
    for rec in records:
        md = rec.get("metadata", {})
        start, end = md.get("request_start_ns"), md.get("request_end_ns")
        conv = md.get("conversation_id")
        if conv is None or start is None or end is None or end < start:
            continue
        lo, hi = by_conv.get(conv, (int(start), int(end)))
        by_conv[conv] = (min(lo, int(start)), max(hi, int(end)))
    return list(by_conv.values())


def achieved_concurrency(records: list[dict], requested: int,
                         per_conversation: bool = False) -> float | None:
    """Requests in flight; for multi-turn steps conversations in flight: AIPerf holds a
    conversation's concurrency slot from its first turn to its last, think time included,
    so `--concurrency` is conversations there, and requests in flight are fewer by design."""
    spans = conversation_spans(records) if per_conversation else request_spans(records)
    return concurrency_of_spans(spans, requested)


def concurrency_of_spans(spans: list[tuple[int, int]], requested: int) -> float | None:
    """Mean requests in flight while the client was issuing, from request timestamps: the one
    definition of achieved concurrency (the runner's client verdict and the reports use it).

    The window runs from the `requested`-th request start (the initial ramp is over) to the
    last request start (after that the load only drains). None when there are too few
    requests to have a steady state.
    """
    if requested < 1 or len(spans) <= requested:
        return None
    starts = sorted(s for s, _ in spans)
    lo, hi = starts[requested - 1], starts[-1]
    if hi <= lo:
        return None
    busy = sum(max(0, min(e, hi) - max(s, lo)) for s, e in spans)
    return busy / (hi - lo)


def load_window_ns(records: list[dict]) -> tuple[int, int] | None:
    """(first request start, last request end) in wall-clock ns."""
    starts = [r["metadata"]["request_start_ns"] for r in records
              if r.get("metadata", {}).get("request_start_ns")]
    ends = [r["metadata"]["request_end_ns"] for r in records
            if r.get("metadata", {}).get("request_end_ns")]
    return (min(starts), max(ends)) if starts and ends else None


def _metric(rec: dict, name: str):
    value = rec.get("metrics", {}).get(name)
    return value.get("value") if isinstance(value, dict) else None


def request_lengths(records: list[dict], rows: list[dict]) -> list[dict]:
    """Requested vs server-counted lengths per request, matched by (session_id, turn)."""
    turns: dict[tuple[str, int], dict] = {}
    counter: dict[str, int] = {}
    for row in rows:
        sid = row.get("session_id")
        if sid is None:
            continue
        t = counter.get(sid, 0)
        counter[sid] = t + 1
        turns[(sid, t)] = row
    out = []
    for rec in records:
        md = rec.get("metadata", {})
        key = (md.get("conversation_id"), md.get("turn_index", 0))
        row = turns.get(key, {})
        out.append({
            "conversation_id": key[0], "turn_index": key[1],
            "requested_input_tokens": row.get("input_length"),
            "requested_output_tokens": row.get("output_length"),
            "input_tokens": _metric(rec, "input_sequence_length"),
            "output_tokens": _metric(rec, "output_sequence_length"),
            "cached_tokens": _metric(rec, "usage_prompt_cache_read_tokens"),
            "ttft_ms": _metric(rec, "time_to_first_token"),
            "itl_ms": _metric(rec, "inter_token_latency"),
            "latency_ms": _metric(rec, "request_latency"),
            "start_ns": md.get("request_start_ns"), "end_ns": md.get("request_end_ns"),
            "cancelled": bool(md.get("was_cancelled")),
            "error": rec.get("error"),
        })
    return out


def step_expectations(artifact_dir: Path, command: list[str]) -> Expectations:
    """What the step's requests must show: from AIPerf's own record of its input config, else
    from the command line the runner gave it."""
    path = artifact_dir / SUMMARY
    if path.exists():
        found = expectations(json.loads(path.read_text()).get("input_config"))
        if found is not None:
            return found
    return expectations_from_args(command)


def summary_metric(artifact_dir: Path, name: str, stat: str = "avg") -> float | None:
    """One statistic of AIPerf's summary export (e.g. time_to_first_token p50)."""
    path = artifact_dir / SUMMARY
    if not path.exists():
        return None
    value = json.loads(path.read_text()).get(name)
    return value.get(stat) if isinstance(value, dict) else None
