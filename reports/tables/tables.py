"""The plan's step-level tables, as pure functions of the tidy frames.

`steps` has one row per step: the project's own figures from completed requests
(reports.records.measures), AIPerf's as `aiperf_*`, server figures, manifest fields, the judged
status and flags (reports.records.flags) and stack facts. Repeats of a step (`.../r2`, or the same
step in several runs) are folded into one row: the mean of the repeats, their min and max, and the
number of repeats and of requests behind it. Only usable steps fold together; a failed,
interrupted or client-bound step keeps a row of its own, marked in `step_flag`.
"""

from __future__ import annotations

import math

import pandas as pd

from reports.records.measures import COUNT_COLUMNS, PERCENTILES

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


# When a step's client TTFT over the frontend's own is material (ttft_gap): the gap exceeds
# both bounds. GAP_MATERIAL_MS: without the first-data stall the gap `make bench` measured is
# +1.1 to +2.3 ms at c1..c64 (transport and the client's own write and read, which any client
# pays; docs/testing.md), so 5 ms (the attestation's stall bound, first_data.STALL_BOUND_MS) is
# more than twice what is left without it. GAP_MATERIAL_SHARE: 5 % of the frontend's TTFT, the
# fidelity the harness is held to (client / engine TTFT within 1.05 without the stall,
# docs/testing.md): a smaller gap moves no TTFT figure more than the harness may. So a 6 ms gap
# on a 500 ms TTFT (1.2 %) is not material, and neither is 3 ms on 30 ms (10 %).
GAP_MATERIAL_MS = 5.0
GAP_MATERIAL_SHARE = 0.05


def ttft_gap(fid: pd.DataFrame, floors: dict[tuple[str, str], float | None]) -> pd.DataFrame:
    """Per step, the client's TTFT over the frontend's own, measured from the step's own
    records: the client's mean over its completed requests (AIPerf's per-request TTFT) minus
    the frontend's mean over the same profiling window (its TTFT histogram, which AIPerf's
    scrape opens after the warm-up). A per-request join is not possible: the frontend's
    request trace keeps no X-Request-ID on a plain request (Dynamo lib/llm/src/request_trace/
    record.rs, emit_request_end: `x_request_id: None`), so a step's gap is its mean's.

    `floors` ({(stack, run_id): ms}): the plain first data of the run's attestation where it
    flagged a stall (checks.first_data_floor). The client sees a first token at about
    max(frontend TTFT, that floor), so `stall_estimate_ms` = max(0, floor - the step's
    frontend TTFT): zero on a step whose first tokens take longer (workloads/attest/
    first_data.py). `ttft_gap_material`: the gap exceeds GAP_MATERIAL_MS and
    GAP_MATERIAL_SHARE of the frontend's TTFT."""
    out = fid.copy()
    gap = out["client_ttft_mean_ms"] - out["server_ttft_mean_ms"]
    out["ttft_gap_ms"] = gap
    out["ttft_gap_share"] = gap / out["server_ttft_mean_ms"].where(
        out["server_ttft_mean_ms"] > 0)
    out["first_data_floor_ms"] = [
        math.nan if (f := floors.get((str(st), str(run)))) is None else float(f)
        for st, run in zip(out["stack"], out["run_id"], strict=True)]
    out["stall_estimate_ms"] = (out["first_data_floor_ms"]
                                - out["server_ttft_mean_ms"]).clip(lower=0.0)
    out["ttft_gap_material"] = ((gap > GAP_MATERIAL_MS)
                                & (out["ttft_gap_share"] > GAP_MATERIAL_SHARE)).fillna(False)
    return out


def fidelity(steps: pd.DataFrame,
             floors: dict[tuple[str, str], float | None] | None = None) -> pd.DataFrame:
    """Harness fidelity per step: the client's TTFT/ITL over the server's (with the TTFT gap
    in ms and whether it is material, ttft_gap), and whether the client held the load.
    `achieved_concurrency` and `client_bound` are one computation (the runner's definition);
    AIPerf's own `effective_concurrency` is shown apart and not judged."""
    out = steps[["stack", "run_id", "step", "workload", *COUNT_COLUMNS, "concurrency",
                 "achieved_concurrency",
                 "aiperf_effective_concurrency", "client_cpu_cores_mean", "host_cores",
                 "client_bound", "client_bound_reasons", "ttft_mean_ms", "server_ttft_mean_ms",
                 "ttft_p50_ms", "itl_mean_ms", "server_itl_mean_ms", "status", "step_flag",
                 "usable"]].copy()
    out["ttft_ratio"] = out["ttft_mean_ms"] / out["server_ttft_mean_ms"]
    out["itl_ratio"] = out["itl_mean_ms"] / out["server_itl_mean_ms"]
    out = out.rename(columns={"ttft_mean_ms": "client_ttft_mean_ms",
                              "ttft_p50_ms": "client_ttft_p50_ms",
                              "itl_mean_ms": "client_itl_mean_ms",
                              "concurrency": "requested_concurrency"})
    return ttft_gap(out, floors or {}).sort_values(
        ["stack", "workload", "requested_concurrency", "step"]
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
