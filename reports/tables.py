"""The plan's step-level tables, as pure functions of the tidy frames.

`steps` has one row per step: the project's own figures from completed requests
(reports.measures), AIPerf's as `aiperf_*`, server figures, manifest fields, the judged status
and flags (reports.flags) and stack facts. Repeats of a step (`.../r2`, or the same step in
several runs) are folded into one row: the mean of the repeats, their min and max, and the
number of repeats and of requests behind it. Only usable steps fold together; a failed,
interrupted or client-bound step keeps a row of its own, marked in `step_flag`.
"""

from __future__ import annotations

import math

import pandas as pd

from reports.measures import COUNT_COLUMNS, PERCENTILES

LATENCY_PCTS = [f"{m}_p{q}_ms" for m in ("ttft", "itl", "request_latency") for q in PERCENTILES]
SWEEP_COLUMNS = ["stack", "concurrency", "step_flag", *COUNT_COLUMNS, "percentile_samples",
                 *LATENCY_PCTS, "output_tok_s", "output_tok_s_per_user_p50",
                 "output_tok_s_per_gpu", "aiperf_ttft_p50_ms", "aiperf_output_tok_s",
                 "aiperf_request_count"]


def join_flags(values: pd.Series) -> str:
    return "; ".join(dict.fromkeys(v for v in values if isinstance(v, str) and v))


def fold_repeats(steps: pd.DataFrame, keys: list[str], mean_cols: list[str],
                 spread_cols: list[str]) -> pd.DataFrame:
    """One row per `keys` and usability: mean of `mean_cols` over repeats, min/max of
    `spread_cols`, summed request counts, the fewest samples behind a percentile, and the
    number of repeats (within a run as `.../r2` and across runs of the same stack alike)."""
    counts = [c for c in COUNT_COLUMNS if c in steps]
    if steps.empty:  # same columns as a folded table, so callers can select them
        return pd.DataFrame(columns=keys + mean_cols + counts + ["repeats", "usable",
                                                                "step_flag"])
    steps = steps.assign(sample=steps["run_id"].astype(str) + "#" + steps["repeat"].astype(str))
    if "usable" not in steps:
        steps = steps.assign(usable=True, step_flag="")
    g = steps.groupby(keys + ["usable"], sort=True, dropna=False)
    out = g[mean_cols].mean()
    for c in counts:
        out[c] = g[c].sum().astype(int)
    if "percentile_samples" in steps:
        out["percentile_samples"] = g["percentile_samples"].min()
    out["repeats"] = g["sample"].nunique()
    out["step_flag"] = g["step_flag"].agg(join_flags)
    for c in spread_cols:
        out[f"{c}_min"] = g[c].min()
        out[f"{c}_max"] = g[c].max()
    return out.reset_index().sort_values(keys + ["usable"], ascending=[True] * len(keys)
                                         + [False]).reset_index(drop=True)


def concurrency_sweep(steps: pd.DataFrame) -> pd.DataFrame:
    s = steps[steps["workload"] == "concurrency_sweep"]
    metric_cols = SWEEP_COLUMNS[SWEEP_COLUMNS.index("percentile_samples") + 1:]
    out = fold_repeats(s, ["stack", "concurrency"], metric_cols,
                       ["ttft_p50_ms", "itl_p50_ms", "output_tok_s"])
    extra = [c for c in out.columns if c not in SWEEP_COLUMNS]
    return out[[c for c in SWEEP_COLUMNS if c in out] + extra]


def share_of(variant: str) -> float:
    """`share050` -> 0.50 (the prefix share a prefix-cache step asked for)."""
    digits = "".join(ch for ch in variant if ch.isdigit())
    return int(digits) / 100 if digits else math.nan


def prefix_cache(steps: pd.DataFrame) -> pd.DataFrame:
    s = steps[steps["workload"] == "prefix_cache"].copy()
    s["prefix_share"] = s["variant"].map(share_of)
    out = fold_repeats(s, ["stack", "prefix_share"],
                       ["server_hit_rate", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms"],
                       ["ttft_p50_ms", "server_hit_rate"])
    good = out[out["usable"].astype(bool)] if len(out) else out
    base = good[good["prefix_share"] == 0].set_index("stack")["ttft_p50_ms"]
    out["ttft_reduction_vs_0pct"] = [
        (1 - t / base[st]) * 100 if ok and st in base.index else math.nan
        for st, t, ok in zip(out["stack"], out["ttft_p50_ms"], out["usable"], strict=True)]
    first = ["stack", "prefix_share", "step_flag", *COUNT_COLUMNS, "server_hit_rate",
             "ttft_p50_ms", "ttft_reduction_vs_0pct"]
    return out[first + [c for c in out.columns if c not in first]]


def fidelity(steps: pd.DataFrame) -> pd.DataFrame:
    """Harness fidelity per step: the client's TTFT/ITL over the server's, and whether the
    client held the load. `achieved_concurrency` and `client_bound` are one computation (the
    runner's definition); AIPerf's own `effective_concurrency` is shown apart and not judged."""
    out = steps[["stack", "run_id", "step", "workload", *COUNT_COLUMNS, "concurrency",
                 "achieved_concurrency",
                 "aiperf_effective_concurrency", "client_cpu_cores_mean", "host_cores",
                 "client_bound", "client_bound_reasons", "ttft_mean_ms", "server_ttft_mean_ms",
                 "itl_mean_ms", "server_itl_mean_ms", "status", "step_flag", "usable"]].copy()
    out["ttft_ratio"] = out["ttft_mean_ms"] / out["server_ttft_mean_ms"]
    out["itl_ratio"] = out["itl_mean_ms"] / out["server_itl_mean_ms"]
    return out.rename(columns={"ttft_mean_ms": "client_ttft_mean_ms",
                               "itl_mean_ms": "client_itl_mean_ms",
                               "concurrency": "requested_concurrency"}
                      ).sort_values(["stack", "workload", "requested_concurrency", "step"]
                                    ).drop(columns="workload").reset_index(drop=True)


RECONCILIATION_COLUMNS = [
    "stack", "run_id", "step", "step_flag", *COUNT_COLUMNS, "client_output_tokens",
    "server_output_tokens", "output_token_gap", "truncated_chunks_received",
    "server_requests_started", "server_requests_succeeded", "server_requests_failed",
    "server_requests_unfinished", "gap_explanation", "usable"]


def reconciliation(steps: pd.DataFrame) -> pd.DataFrame:
    """Per step: output tokens the frontend counted vs the client's usage counts, and the
    frontend's requests against the client's outcome classes; a gap is explained."""
    out = steps.copy()
    out["server_requests_unfinished"] = (out["server_requests_started"]
                                         - out["server_requests_succeeded"]
                                         - out["server_requests_failed"])
    return out[RECONCILIATION_COLUMNS].sort_values(["stack", "run_id", "step"]
                                                   ).reset_index(drop=True)
