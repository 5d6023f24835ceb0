"""Where a step's requests went and what that bought, from the frontend's request trace (pure).

Each finished request names the worker that processed its prompt (`prefill_worker_id`; the
same as `decode_worker_id` when aggregated), the prompt tokens that worker already held
(`cached_tokens`) and the hash of every block of its prompt. A request *follows* an earlier
one of the same step when that request's whole blocks are a prefix of its own prompt: the
next turn of a conversation (AIPerf sends the history with every turn), or the same prompt
again. `same_worker_share` is the share of follow-ups whose prompt went to the worker that
processed the earlier prompt: what a KV router should raise, what round-robin leaves at
about 1 / workers unless conversations move in lockstep.

`handoff_share` is the share of requests whose prompt and decode ran on different workers
(a disaggregated KV transfer), with the frontend's estimate of that transfer's latency.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

SCHEMA = "dynamo.request.trace.v1"
COLUMNS = ["request_id", "received_ms", "prefill_worker", "decode_worker", "input_tokens",
           "cached_tokens", "output_tokens", "predicted_overlap", "transfer_ms", "follows",
           "turn", "follows_worker", "same_worker"]


def request_of(line: str) -> dict | None:
    """The `request` of one finished-request line; None for other lines (a half-written last
    line, another event type or schema)."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    event = doc.get("event") if isinstance(doc, dict) else None
    if not isinstance(event, dict) or event.get("schema") != SCHEMA \
            or event.get("event_type") != "request_end":
        return None
    req = event.get("request")
    return req if isinstance(req, dict) else None


def _num(v: Any) -> float:
    return float(v) if isinstance(v, int | float) else math.nan


def _chain(hashes: list[int]) -> list[int]:
    """One key per prefix length: key k stands for hashes[:k + 1] (collisions are checked)."""
    keys, key = [], 0
    for h in hashes:
        key = hash((key, h))
        keys.append(key)
    return keys


def requests(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The step's requests in arrival order, each linked to the one it follows (if any)."""
    parsed: list[tuple[dict[str, Any], list[int], int]] = []
    for line in lines:
        req = request_of(line)
        if req is None:
            continue
        worker = req.get("worker") or {}
        replay = req.get("replay") or {}
        hashes = [int(h) for h in replay.get("input_sequence_hashes") or []]
        block = replay.get("trace_block_size") or 0
        length = replay.get("input_length") or req.get("input_tokens") or 0
        parsed.append(({
            "request_id": str(req.get("request_id")),
            "received_ms": _num(req.get("request_received_ms")),
            "prefill_worker": str(worker.get("prefill_worker_id", "")) or None,
            "decode_worker": str(worker.get("decode_worker_id", "")) or None,
            "input_tokens": _num(req.get("input_tokens")),
            "cached_tokens": _num(req.get("cached_tokens")),
            "output_tokens": _num(req.get("output_tokens")),
            "predicted_overlap": _num(req.get("kv_hit_rate")),
            "transfer_ms": _num(req.get("kv_transfer_estimated_latency_ms")),
        }, hashes, min(len(hashes), int(length) // int(block)) if block else 0))
    parsed.sort(key=lambda p: p[0]["received_ms"])
    whole: dict[int, tuple[dict, list[int]]] = {}   # key of a request's whole blocks -> it
    out = []
    for row, hashes, full in parsed:
        keys = _chain(hashes)
        earlier = None
        for k in range(len(hashes) - 1, -1, -1):     # the longest earlier prompt it extends
            hit = whole.get(keys[k])
            if hit is not None and hit[1] == hashes[:k + 1]:
                earlier = hit[0]
                break
        row["follows"] = earlier["request_id"] if earlier else None
        row["turn"] = earlier["turn"] + 1 if earlier else 0       # place in its chain
        row["follows_worker"] = earlier["prefill_worker"] if earlier else None
        row["same_worker"] = (earlier["prefill_worker"] == row["prefill_worker"]) \
            if earlier else None
        if full:
            whole[keys[full - 1]] = (row, hashes[:full])
        out.append(row)
    return out


def summary(reqs: list[dict[str, Any]]) -> dict[str, Any]:
    """The step's routing figures (NaN where the trace has nothing to say)."""
    n = len(reqs)
    follow = [r for r in reqs if r["follows"] is not None]
    same = sum(1 for r in follow if r["same_worker"])
    workers = {r["prefill_worker"] for r in reqs if r["prefill_worker"]}
    decoders = {r["decode_worker"] for r in reqs if r["decode_worker"]}
    handed = [r for r in reqs if r["prefill_worker"] and r["decode_worker"]
              and r["prefill_worker"] != r["decode_worker"]]
    transfer = [r["transfer_ms"] for r in reqs if not math.isnan(r["transfer_ms"])]
    prompt = sum(r["input_tokens"] for r in reqs if not math.isnan(r["input_tokens"]))
    cached = sum(r["cached_tokens"] for r in reqs if not math.isnan(r["cached_tokens"]))
    return {
        "traced_requests": n,
        "prompt_workers": len(workers),
        "decode_workers": len(decoders),
        "follow_ups": len(follow),
        "same_worker_share": same / len(follow) if follow else math.nan,
        "chance_same_worker": 1 / len(workers) if workers else math.nan,
        "trace_hit_rate": cached / prompt if prompt else math.nan,
        "trace_hit_rate_se": hit_rate_se(reqs),
        "handoff_share": len(handed) / n if n else math.nan,
        "kv_transfer_est_ms_mean": sum(transfer) / len(transfer) if transfer else math.nan,
    }


def hit_rate_se(reqs: list[dict[str, Any]]) -> float:
    """Standard error of the step's hit rate (cached / prompt tokens, a ratio of sums).

    Linearised: each request contributes e = cached - R x prompt. Requests are grouped by
    their place in a conversation (`turn`: the first turn never hits, later ones mostly do),
    so the error is what placement and timing leave, not the turn mix, which compared stacks
    share (same datasets). Within a group the e's are taken as independent.
    """
    ok = [r for r in reqs if not (math.isnan(r["input_tokens"])
                                  or math.isnan(r["cached_tokens"]))]
    prompt = sum(r["input_tokens"] for r in ok)
    if len(ok) < 2 or not prompt:
        return math.nan
    rate = sum(r["cached_tokens"] for r in ok) / prompt
    groups: dict[int, list[float]] = {}
    for r in ok:
        groups.setdefault(r["turn"], []).append(r["cached_tokens"] - rate * r["input_tokens"])
    var = 0.0
    for e in groups.values():
        if len(e) > 1:
            mean = sum(e) / len(e)
            var += len(e) / (len(e) - 1) * sum((x - mean) ** 2 for x in e)
    return math.sqrt(var) / prompt
