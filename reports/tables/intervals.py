"""95 % intervals for the figures the tables print (pure: frames in, columns out). The method is
stacks/sizing/sampling.py's, the one the plan's resolvable differences use:

- a latency percentile of a step (TTFT, ITL p50 / p99; per-user tok/s p50) over its completed
  requests: the exact distribution-free order-statistic interval. A p99 from fewer than 368
  requests has none (its upper bound lies beyond the sample): the cell says so.
- a row that folds k >= 2 repeats (the mean of their percentiles): the wider of the request-
  sampling interval (sqrt of the repeats' summed squared standard errors / k, normal) and the
  t-interval over the repeats' own values, so run-to-run noise is never hidden by many requests
  (none where a repeat's requests cannot pin the quantile: a p99 of fewer than 368).
- a whole-step figure (output tok/s, tok/s per GPU): the t-interval over repeats (k >= 2); a
  single run gets none and says so.
- goodput: the share of attempted requests meeting the SLO with Wilson's interval; goodput
  req/s is that interval over the step's window.

Columns `<figure>_ci_low` / `<figure>_ci_high` join each table beside the figure (NaN: no
interval, `intervals` says why); report.md shows them as `value [low, high]`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from reports.records.runs import STEP_KEY
from stacks.sizing.sampling import (
    Estimate,
    mean_interval,
    proportion_interval,
    quantile_interval,
    t_crit,
)

# figure column -> (request column, quantile)
QUANTILE_FIGURES = {"ttft_p50_ms": ("ttft_ms", 0.5), "ttft_p99_ms": ("ttft_ms", 0.99),
                    "itl_p50_ms": ("itl_ms", 0.5), "itl_p99_ms": ("itl_ms", 0.99),
                    "output_tok_s_per_user_p50": ("tok_s_per_user", 0.5)}
# figures of a whole step: only repeats tell their noise
REPEAT_FIGURES = ("output_tok_s", "output_tok_s_per_gpu")
LOW, HIGH = "_ci_low", "_ci_high"
METHODS = "intervals"


def completed_by_step(requests: pd.DataFrame) -> dict[tuple, pd.DataFrame]:
    """{(stack, run_id, step): its completed requests}."""
    if requests.empty:
        return {}
    done = requests[requests["completed"].astype(bool)]
    return {k: g for k, g in done.groupby(STEP_KEY, sort=False)}


def _wider(a: Estimate, b: Estimate) -> Estimate:
    def half(e: Estimate) -> float:
        return (e.high - e.low) / 2 if e.has_interval else -1.0
    return a if half(a) >= half(b) else b


def folded_quantile(samples: list[np.ndarray], q: float) -> Estimate:
    """The mean of the repeats' q-quantiles with its interval (module docstring)."""
    each = [quantile_interval(s, q) for s in samples]
    if len(each) == 1:
        return each[0]
    value = float(np.mean([e.value for e in each]))
    repeats = mean_interval([e.value for e in each])
    repeats = Estimate(value, repeats.low, repeats.high, repeats.se, repeats.df, repeats.n,
                       repeats.method)
    if any(math.isnan(e.se) for e in each):
        # a quantile the requests cannot pin (a p99 of too few) gets no interval, however many
        # repeats: their values would be the same biased estimate (the largest, near p97)
        why = next(e.method for e in each if math.isnan(e.se))
        return Estimate(value, math.nan, math.nan, math.nan, math.nan, repeats.n,
                        f"{why} in a repeat")
    se = math.sqrt(sum(e.se ** 2 for e in each)) / len(each)
    half = t_crit(math.inf) * se
    requests = Estimate(value, value - half, value + half, se, math.inf,
                        sum(e.n for e in each), f"order statistics over {len(each)} repeats")
    return _wider(requests, repeats)


def group_estimate(figure: str, steps: pd.DataFrame,
                   by_step: dict[tuple, pd.DataFrame]) -> Estimate:
    """The figure of the steps (one row each: a step, or the repeats a table row folds) with
    its interval."""
    if figure in QUANTILE_FIGURES:
        column, q = QUANTILE_FIGURES[figure]
        samples = [by_step[k][column].to_numpy(dtype=float) if k in by_step else np.array([])
                   for k in steps[STEP_KEY].itertuples(index=False, name=None)]
        return folded_quantile(samples, q) if samples else mean_interval([])
    return mean_interval(steps[figure].to_numpy(dtype=float) if figure in steps else [])


def _short(e: Estimate) -> str:
    return e.method.split(" (")[0] if e.has_interval else e.method


def add_intervals(table: pd.DataFrame, steps: pd.DataFrame, requests: pd.DataFrame,
                  keys: list[str], figures: Iterable[str]) -> pd.DataFrame:
    """`table` (one row per `keys` and usability, as tables.fold_repeats makes it) with the
    interval of each of `figures` over the steps the row folds (`steps` filtered to the
    table's workload and carrying the `keys` columns)."""
    figures = [f for f in figures if f in table]
    out = table.copy()
    if table.empty or not figures:
        return out
    by_step = completed_by_step(requests)
    usable = steps["usable"].astype(bool) if "usable" in steps else pd.Series(True,
                                                                              steps.index)
    groups = {k: g for k, g in steps.assign(usable=usable).groupby(keys + ["usable"],
                                                                   sort=False, dropna=False)}
    cols: dict[str, list[float]] = {f"{f}{s}": [] for f in figures for s in (LOW, HIGH)}
    methods = []
    for _, row in table.iterrows():
        key = tuple(row[k] for k in keys) + (bool(row.get("usable", True)),)
        group = groups.get(key, steps.iloc[0:0])
        said = []
        for f in figures:
            e = group_estimate(f, group, by_step)
            cols[f"{f}{LOW}"].append(e.low)
            cols[f"{f}{HIGH}"].append(e.high)
            said.append(f"{f}: {_short(e)}")
        methods.append("; ".join(dict.fromkeys(said)))
    for name, values in cols.items():
        out[name] = values
    out[METHODS] = methods
    return out


def goodput_intervals(goodput: pd.DataFrame) -> pd.DataFrame:
    """goodput.csv with Wilson's interval of goodput_fraction (of attempted) and the same
    interval over the window for goodput_req_s."""
    out = goodput.copy()
    if out.empty:
        return out
    est = [proportion_interval(int(k), int(n)) for k, n in
           zip(out["requests_meeting_slo"], out["attempted"], strict=True)]
    out[f"goodput_fraction{LOW}"] = [e.low for e in est]
    out[f"goodput_fraction{HIGH}"] = [e.high for e in est]
    per_s = out["attempted"] / out["window_s"].where(out["window_s"] > 0)
    out[f"goodput_req_s{LOW}"] = out[f"goodput_fraction{LOW}"] * per_s
    out[f"goodput_req_s{HIGH}"] = out[f"goodput_fraction{HIGH}"] * per_s
    return out


def interval_cell(value: object, low: object, high: object) -> str:
    """`48.1 [46.9, 49.8]`; a figure without an interval keeps its value alone."""
    def fmt(v: float) -> str:
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    try:
        v, lo, hi = float(value), float(low), float(high)   # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "n/a"
    if math.isnan(v):
        return "n/a"
    if math.isnan(lo) or math.isnan(hi):
        return fmt(v)
    return f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]"
