"""The plan's result tables, as pure functions of the tidy frames.

`steps` has one row per step (AIPerf's own summary statistics + server figures + manifest
fields + stack facts); `requests` one row per profiling-phase request. Repeats of a step
(`.../r2`) are folded into one row: the mean of the repeats, their min and max, and the number
of repeats and of requests behind it, never a single number pretending to be stable.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

SWEEP_COLUMNS = ["stack", "concurrency", "requests", "errors", "ttft_p50_ms", "ttft_p99_ms",
                 "itl_p50_ms", "itl_p99_ms", "request_latency_p50_ms", "request_latency_p99_ms",
                 "output_tok_s", "output_tok_s_per_user_p50", "output_tok_s_per_gpu"]


def pct(values: pd.Series | np.ndarray, q: float) -> float:
    """Percentile with linear interpolation (numpy's default, as AIPerf computes its own)."""
    v = pd.Series(values, dtype=float).dropna()
    return float(np.percentile(v, q)) if len(v) else math.nan


def fold_repeats(steps: pd.DataFrame, keys: list[str], mean_cols: list[str],
                 spread_cols: list[str]) -> pd.DataFrame:
    """One row per `keys`: mean of `mean_cols` over repeats, min/max of `spread_cols`,
    summed request/error counts, and the number of repeats (within a run as `.../r2` and
    across runs of the same stack alike)."""
    if steps.empty:  # same columns as a folded table, so callers can select them
        return pd.DataFrame(columns=keys + mean_cols + ["requests", "errors", "repeats"])
    steps = steps.assign(sample=steps["run_id"].astype(str) + "#" + steps["repeat"].astype(str))
    g = steps.groupby(keys, sort=True, dropna=False)
    out = g[mean_cols].mean()
    out["requests"] = g["requests"].sum().astype(int)
    out["errors"] = g["errors"].sum().astype(int)
    out["repeats"] = g["sample"].nunique()
    for c in spread_cols:
        out[f"{c}_min"] = g[c].min()
        out[f"{c}_max"] = g[c].max()
    return out.reset_index()


def concurrency_sweep(steps: pd.DataFrame) -> pd.DataFrame:
    s = steps[steps["workload"] == "concurrency_sweep"]
    metric_cols = [c for c in SWEEP_COLUMNS[4:]]
    out = fold_repeats(s, ["stack", "concurrency"], metric_cols,
                       ["ttft_p50_ms", "itl_p50_ms", "output_tok_s"])
    extra = [c for c in out.columns if c not in SWEEP_COLUMNS]
    return out[SWEEP_COLUMNS + extra]


def multi_turn(steps: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """TTFT per turn (pooled over repeats) and whole-conversation latency per stack.

    The server's metrics are aggregated over the whole step and turns of different
    conversations overlap in time, so a per-turn hit rate is not separable: the per-turn rows
    say NaN and the `all` row carries the step's measured hit rate.
    """
    r = requests[requests["workload"] == "multi_turn"]
    rows = []
    for stack, sr in r.groupby("stack", sort=True):
        ok = sr[sr["ok"]]
        conv = ok.groupby(["run_id", "step", "conversation_id"]).agg(  # within one stack
            start=("start_ns", "min"), end=("end_ns", "max"))
        conv_ms = (conv["end"] - conv["start"]) / 1e6
        conv_cols = {"conversations": len(conv),
                     "conversation_latency_p50_ms": pct(conv_ms, 50),
                     "conversation_latency_p99_ms": pct(conv_ms, 99)}
        st = steps[(steps["workload"] == "multi_turn") & (steps["stack"] == stack)]
        conv_cols["repeats"] = len(st)
        for turn, tr in sr.groupby("turn_index", sort=True):
            tok = tr[tr["ok"]]
            rows.append({"stack": stack, "turn": str(int(turn)), "requests": len(tok),
                         "errors": int((~tr["ok"]).sum()),
                         "ttft_p50_ms": pct(tok["ttft_ms"], 50),
                         "ttft_p99_ms": pct(tok["ttft_ms"], 99),
                         "server_hit_rate": math.nan, **conv_cols})
        rows.append({"stack": stack, "turn": "all", "requests": len(ok),
                     "errors": int((~sr["ok"]).sum()),
                     "ttft_p50_ms": pct(ok["ttft_ms"], 50), "ttft_p99_ms": pct(ok["ttft_ms"], 99),
                     "server_hit_rate": float(st["server_hit_rate"].mean()), **conv_cols})
    return pd.DataFrame(rows)


def _lengths(frame: pd.DataFrame, col: str, prefix: str) -> dict[str, float]:
    v = frame[col]
    return {f"{prefix}_mean": float(v.mean()) if v.notna().any() else math.nan,
            f"{prefix}_p50": pct(v, 50), f"{prefix}_p99": pct(v, 99)}


def sequence_distribution(requests: pd.DataFrame) -> pd.DataFrame:
    """Requested vs actual lengths, latency and its spread, per distribution.

    Long-sequence behaviour: TTFT p50 of the requests whose requested ISL is in the top decile
    of that distribution, against the whole distribution's.
    """
    r = requests[requests["workload"] == "sequence_distributions"]
    rows = []
    for (stack, dist), d in r.groupby(["stack", "variant"], sort=True):
        ok = d[d["ok"]]
        ttft, tps = ok["ttft_ms"], ok["tok_s_per_user"]
        long_cut = pct(d["requested_isl"], 90)
        long = ok[ok["requested_isl"] >= long_cut] if not math.isnan(long_cut) else ok.iloc[0:0]
        failures = d[~d["ok"]]
        rows.append({
            "stack": stack, "distribution": dist, "requests": len(ok),
            "errors": len(failures),
            **_lengths(d, "requested_isl", "requested_isl"), **_lengths(ok, "isl", "actual_isl"),
            **_lengths(d, "requested_osl", "requested_osl"), **_lengths(ok, "osl", "actual_osl"),
            "ttft_p50_ms": pct(ttft, 50), "ttft_p99_ms": pct(ttft, 99),
            "tok_s_per_user_p50": pct(tps, 50),
            "ttft_cv": float(ttft.std(ddof=0) / ttft.mean()) if len(ttft) else math.nan,
            "ttft_p99_over_p50": pct(ttft, 99) / pct(ttft, 50) if len(ttft) else math.nan,
            "tok_s_per_user_cv": float(tps.std(ddof=0) / tps.mean()) if len(tps) else math.nan,
            "long_isl_threshold": long_cut, "long_requests": len(long),
            "long_ttft_p50_ms": pct(long["ttft_ms"], 50),
            "failures": "; ".join(f"{k} x{v}" for k, v in
                                  failures["error_type"].value_counts().items()) or "none",
            "repeats": d[["run_id", "repeat"]].drop_duplicates().shape[0]})
    return pd.DataFrame(rows)


def share_of(variant: str) -> float:
    """`share050` -> 0.50 (the prefix share a prefix-cache step asked for)."""
    digits = "".join(ch for ch in variant if ch.isdigit())
    return int(digits) / 100 if digits else math.nan


def prefix_cache(steps: pd.DataFrame) -> pd.DataFrame:
    s = steps[steps["workload"] == "prefix_cache"].copy()
    s["prefix_share"] = s["variant"].map(share_of)
    out = fold_repeats(s, ["stack", "prefix_share"], ["server_hit_rate", "ttft_p50_ms"],
                       ["ttft_p50_ms", "server_hit_rate"])
    base = out[out["prefix_share"] == 0].set_index("stack")["ttft_p50_ms"]
    out["ttft_reduction_vs_0pct"] = [
        (1 - t / base[st]) * 100 if st in base.index else math.nan
        for st, t in zip(out["stack"], out["ttft_p50_ms"], strict=True)]
    first = ["stack", "prefix_share", "server_hit_rate", "ttft_p50_ms", "ttft_reduction_vs_0pct"]
    return out[first + [c for c in out.columns if c not in first]]


def fidelity(steps: pd.DataFrame) -> pd.DataFrame:
    """Harness fidelity per step: the client's TTFT/ITL over the server's, and saturation."""
    out = steps[["stack", "run_id", "step", "workload", "concurrency", "achieved_concurrency",
                 "ttft_mean_ms", "server_ttft_mean_ms", "itl_mean_ms", "server_itl_mean_ms",
                 "client_cpu_cores_mean", "client_saturated", "client_saturation_reasons",
                 "status"]].copy()
    out["ttft_ratio"] = out["ttft_mean_ms"] / out["server_ttft_mean_ms"]
    out["itl_ratio"] = out["itl_mean_ms"] / out["server_itl_mean_ms"]
    return out.rename(columns={"ttft_mean_ms": "client_ttft_mean_ms",
                               "itl_mean_ms": "client_itl_mean_ms",
                               "concurrency": "requested_concurrency"}
                      ).sort_values(["stack", "workload", "requested_concurrency", "step"]
                                    ).drop(columns="workload").reset_index(drop=True)
