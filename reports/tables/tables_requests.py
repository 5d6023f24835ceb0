"""The plan's per-request tables (multi-turn, sequence distributions), pooled over repeats.

`requests` carries each request's outcome class and its step's `usable` / `step_flag`
(reports.build). Latency percentiles pool completed requests only; requests of usable steps
pool together and a flagged step's requests form rows of their own, marked in `step_flag`.
"""

from __future__ import annotations

import math
from typing import cast

import pandas as pd

from reports.records.measures import PERCENTILES, outcome_counts, pct, percentiles
from reports.tables.tables import join_flags


def _usage_hit_rate(done: pd.DataFrame) -> float:
    """Cached / prompt tokens as the server reported them in each response's usage block."""
    cached, prompt = done["usage_cached_tokens"], done["usage_prompt_tokens"]
    both = cached.notna() & prompt.notna()
    total = float(prompt[both].sum())
    return float(cached[both].sum()) / total if both.any() and total > 0 else math.nan


def multi_turn(steps: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """TTFT and the server's prefix hit rate per turn, and whole-conversation latency.

    The per-turn hit rate (`usage_hit_rate`) is cached / prompt tokens from each response's
    usage block (the server's own per-request counts), when the export has them. The frontend's
    histograms cover the whole step (turns of different conversations overlap in time), so
    `server_hit_rate` (the frontend's, as in every other table) is on the `all` row only.
    """
    r = requests[requests["workload"] == "multi_turn"]
    rows = []
    for (stack, usable), sr in r.groupby(["stack", "usable"], sort=True):
        done = sr[sr["completed"]]
        # a conversation counts when every turn it sent completed
        whole = sr.groupby(["run_id", "step", "conversation_id"])["completed"].transform("all")
        conv = sr[whole].groupby(["run_id", "step", "conversation_id"]).agg(
            start=("start_ns", "min"), end=("end_ns", "max"))
        conv_ms = (conv["end"] - conv["start"]) / 1e6
        st = steps[(steps["workload"] == "multi_turn") & (steps["stack"] == stack)
                   & (steps["usable"] == usable)]
        common = {"stack": stack, "step_flag": join_flags(st["step_flag"]), "usable": usable,
                  "conversations": len(conv),
                  **{f"conversation_latency_p{q}_ms": pct(conv_ms, q) for q in PERCENTILES},
                  "repeats": len(st)}
        for turn, tr in sr.groupby("turn_index", sort=True):
            tdone = tr[tr["completed"]]
            # a group key types as any Scalar; turn_index is an Int64 column
            # (reports/records/runs.py)
            rows.append({**common, "turn": str(int(cast(int, turn))), **outcome_counts(tr),
                         "percentile_samples": len(tdone), **percentiles(tdone["ttft_ms"], "ttft"),
                         "usage_hit_rate": _usage_hit_rate(tdone),
                         "server_hit_rate": math.nan})
        rows.append({**common, "turn": "all", **outcome_counts(sr),
                     "percentile_samples": len(done), **percentiles(done["ttft_ms"], "ttft"),
                     "usage_hit_rate": _usage_hit_rate(done),
                     "server_hit_rate": float(st["server_hit_rate"].mean()),
                     **pooled_routing(st)})
    return pd.DataFrame(rows)


def pooled_routing(st: pd.DataFrame) -> dict[str, object]:
    """Where the steps' turns went (reports.records.routing), pooled: follow-up turns and the share
    that went back to the worker holding the conversation's previous turn."""
    if "follow_ups" not in st or not st["follow_ups"].notna().any():
        return {"follow_ups": math.nan, "same_worker_share": math.nan,
                "chance_same_worker": math.nan, "requests_per_worker": ""}
    has = st[st["follow_ups"].notna()]
    n = float(has["follow_ups"].sum())
    same = float((has["follow_ups"] * has["same_worker_share"].fillna(0)).sum())
    return {"follow_ups": n, "same_worker_share": same / n if n else math.nan,
            "chance_same_worker": float(has["chance_same_worker"].mean()),
            "requests_per_worker": "; ".join(str(x) for x in has["requests_per_worker"]
                                             if isinstance(x, str) and x)}


def _lengths(frame: pd.DataFrame, col: str, prefix: str) -> dict[str, float]:
    v = frame[col]
    return {f"{prefix}_mean": float(v.mean()) if v.notna().any() else math.nan,
            **{f"{prefix}_p{q}": pct(v, q) for q in PERCENTILES}}


def sequence_distribution(requests: pd.DataFrame) -> pd.DataFrame:
    """Requested vs actual lengths, latency and its spread, per distribution.

    Long-sequence behaviour: TTFT p50 of the requests whose requested ISL is in the top decile
    of that distribution, against the whole distribution's.
    """
    r = requests[requests["workload"] == "sequence_distributions"]
    rows = []
    for (stack, dist, usable), d in r.groupby(["stack", "variant", "usable"], sort=True):
        done = d[d["completed"]]
        ttft, tps = done["ttft_ms"], done["tok_s_per_user"]
        long_cut = pct(d["requested_isl"], 90)
        long = done[done["requested_isl"] >= long_cut] if not math.isnan(long_cut) \
            else done.iloc[0:0]
        others = d[~d["completed"]]
        kinds = (others["outcome"] + ": " + others["error_type"].fillna(
            others["outcome_reason"])).value_counts()
        rows.append({
            "stack": stack, "distribution": dist, "step_flag": join_flags(d["step_flag"]),
            **outcome_counts(d), "percentile_samples": len(done),
            **_lengths(d, "requested_isl", "requested_isl"),
            **_lengths(done, "isl", "actual_isl"),
            **_lengths(d, "requested_osl", "requested_osl"),
            **_lengths(done, "osl", "actual_osl"),
            **percentiles(ttft, "ttft"), "tok_s_per_user_p50": pct(tps, 50),
            "ttft_cv": float(ttft.std(ddof=0) / ttft.mean()) if len(ttft) else math.nan,
            "ttft_p99_over_p50": pct(ttft, 99) / pct(ttft, 50) if len(ttft) else math.nan,
            "tok_s_per_user_cv": float(tps.std(ddof=0) / tps.mean()) if len(tps) else math.nan,
            "long_isl_threshold": long_cut, "long_requests": len(long),
            "long_ttft_p50_ms": pct(long["ttft_ms"], 50),
            "failures": "; ".join(f"{k} x{v}" for k, v in kinds.items()) or "none",
            "repeats": d[["run_id", "repeat"]].drop_duplicates().shape[0], "usable": usable})
    return pd.DataFrame(rows)
