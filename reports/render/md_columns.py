"""Which columns report.md shows of each table: at most MAX_COLUMNS, the ones that answer the
table's question; the CSV beside report.md keeps every column (pure: frames in, frames out).

Three display columns are made from others so the counts stay honest in fewer columns:
- `completed/attempted`: "28/30 (1 failed, 1 truncated)" from the outcome counts (with the
  `aggregated `/`disaggregated ` prefix in side-by-side tables);
- `flag`: the first word of each of the step's flags (FAILED, CLIENT-BOUND, ...); the note under
  the table gives the whole reason;
- `sla_verdict`: best point / meets / misses, from meets_sla and best_point;
- `<figure> [95 % CI]`: the figure with its interval, `48.1 [46.9, 49.8]`, from its
  `_ci_low` / `_ci_high` columns (reports/tables/intervals.py; the value alone where none exists);
- `compared`: `subject - reference` of a side-by-side table (the difference's sign).
A table without a list here shows the first MAX_COLUMNS of its wide selection, with the same
columns folded and the secondary ones (p90s, AIPerf's own figures, spreads) left to the CSV.
"""

from __future__ import annotations

import re

import pandas as pd

from reports.records.measures import COUNT_COLUMNS
from reports.tables.intervals import interval_cell

MAX_COLUMNS = 10
REQUESTS = "completed/attempted"
FLAG = "flag"
SLA_VERDICT = "sla_verdict"
COMPARED = "compared"


def ci(column: str) -> str:
    """The display column of a figure with its 95 % interval."""
    return f"{column} [95 % CI]"


def _verdict(column: str) -> str:
    return f"{column}_verdict"


_SIDES = ("", "aggregated_", "disaggregated_")

SHORT = {
    "concurrency_sweep": ["stack", "concurrency", FLAG, REQUESTS, ci("ttft_p50_ms"),
                          ci("ttft_p99_ms"), ci("itl_p50_ms"), ci("itl_p99_ms"),
                          ci("output_tok_s"), "output_tok_s_per_gpu"],
    # the differences with their intervals and verdicts (reports.comparisons.verdicts)
    "compare_concurrency": ["concurrency", COMPARED, ci("ttft_p50_delta_ms"),
                            _verdict("ttft_p50_delta_ms"), ci("itl_p50_delta_ms"),
                            _verdict("itl_p50_delta_ms"), ci("tps_delta"), _verdict("tps_delta"),
                            f"aggregated {REQUESTS}", f"disaggregated {REQUESTS}"],
    # the router's question: the hit rate beside where the turns went and what chance gives
    "multi_turn": ["stack", "turn", FLAG, REQUESTS, "ttft_p50_ms", "usage_hit_rate",
                   "server_hit_rate", "same_worker_share", "chance_same_worker",
                   "conversation_latency_p50_ms"],
    "sequence_distribution": ["stack", "distribution", FLAG, REQUESTS, "requested_isl_mean",
                              "actual_isl_mean", "requested_osl_mean", "actual_osl_mean",
                              "ttft_p50_ms", "ttft_p99_over_p50"],
    "prefix_cache": ["stack", "prefix_share", FLAG, REQUESTS, "server_hit_rate",
                     ci("ttft_p50_ms"), ci("ttft_p99_ms"), "ttft_reduction_vs_0pct", "repeats"],
    "compare_prefix_cache": ["prefix_share", COMPARED, "aggregated_server_hit_rate",
                             "disaggregated_server_hit_rate", "aggregated_ttft_p50_ms",
                             "disaggregated_ttft_p50_ms", ci("ttft_p50_delta_ms"),
                             _verdict("ttft_p50_delta_ms"), f"aggregated {REQUESTS}",
                             f"disaggregated {REQUESTS}"],
    "goodput": ["stack", "run_id", "step", "slo", FLAG, REQUESTS, ci("goodput_fraction"),
                ci("goodput_req_s"), "step_meets_slo", "best_point"],
    "sla": ["row_kind", "stack", "step", "cache", FLAG, REQUESTS, ci("ttft_p50_ms"), "user_tok_s",
            "output_tok_s_per_gpu", SLA_VERDICT],
    # request counts of these steps: the SLA table's completed/attempted
    "trace_replay": ["stack", "step", FLAG, "cache", "excluded_over_context",
                     "reuse_upper_bound_blocks", "reuse_upper_bound_tokens",
                     "measured_hit_rate", "hit_rate_gap", "in_flight_max"],
    "compare_sla_baseline": ["model", "cache", "optimized_stack", "optimized_tok_s_per_gpu",
                             "baseline_stack", "baseline_tok_s_per_gpu", "ratio",
                             "published_ratio", "note"],
    "compare_sla_topology": ["model", "cache", "aggregated_stack", "aggregated_tok_s_per_gpu",
                             "disaggregated_stack", "disaggregated_tok_s_per_gpu",
                             "disaggregated_over_aggregated", "published_aggregated",
                             "published_disaggregated"],
    "routing": ["stack", "step", FLAG, "worker", "prompts", "decodes", "hit_rate", "follow_ups",
                "same_worker_follow_ups", "same_worker_share"],
    "ablation": ["setting", "baseline_stack", "changed_stack", "step", "signal", "baseline",
                 "changed", ci("delta"), "verdict", "likely_cause"],
    "comparisons": ["question", "subject_stack", "reference_stack", "step", "figure",
                    "reference_value", "subject_value", ci("difference"), "verdict", "p_holm"],
    "cost_efficiency": ["stack", "run_id", "step", FLAG, REQUESTS, "gpus", "period_s",
                        "period_cost_usd", "successful_output_tokens",
                        "usd_per_1m_output_tokens"],
    "fidelity": ["stack", "run_id", "step", FLAG, "requested_concurrency",
                 "achieved_concurrency", "client_bound", "ttft_gap_ms", "ttft_ratio",
                 "itl_ratio"],
    "reconciliation": ["stack", "run_id", "step", FLAG, REQUESTS, "client_output_tokens",
                       "server_output_tokens", "output_token_gap", "server_requests_unfinished",
                       "gap_explanation"],
}
# Left to the CSV when a table has no list above.
_SECONDARY = re.compile(r"(_p90|^aiperf_|_min$|_max$|_ci_low$|_ci_high$|^intervals$|^p_value$|"
                        r"^p_holm$|^interval_method$|^percentile_samples$|^usable$|"
                        r"^cost_scope$|^period$)")


def _requests_cell(row: pd.Series, side: str) -> str:
    done, tried = row[f"{side}completed"], row[f"{side}attempted"]
    if pd.isna(done) or pd.isna(tried):
        return "n/a"
    # "cancelled" requests were cut by the step's own end (workloads.outcomes): not errors
    labels = {"failed": "failed", "truncated": "truncated", "cancelled": "cut at end"}
    others = [f"{int(row[f'{side}{k}'])} {labels[k]}" for k in labels
              if f"{side}{k}" in row and not pd.isna(row[f"{side}{k}"])
              and int(row[f"{side}{k}"])]
    return f"{int(done)}/{int(tried)}" + (f" ({', '.join(others)})" if others else "")


def flag_words(flag: object) -> str:
    """The first word of each of a step's flags (FAILED; CLIENT-BOUND)."""
    return _flag_cell(flag)


def _flag_cell(flag: object) -> str:
    if not isinstance(flag, str) or not flag:
        return ""
    return "; ".join(dict.fromkeys(part.split(":")[0].strip() for part in flag.split("; ")))


def _verdict_cell(row: pd.Series) -> str:
    if bool(row.get("best_point")) is True and not pd.isna(row.get("best_point")):
        return "best point"
    meets = row.get("meets_sla")
    if meets is None or pd.isna(meets):
        return "n/a"
    return "meets" if bool(meets) else "misses"


def likely_words(lo: object, hi: object) -> str:
    """"; true likely lo-hi" of a SIMULATED figure's band, "" where it has none."""
    if not (isinstance(lo, int | float) and isinstance(hi, int | float)) or \
            lo != lo or hi != hi:      # NaN: no band
        return ""
    def num(x: float) -> str:
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"
    return f"; true likely {num(lo)}-{num(hi)}"


def with_display_columns(table: pd.DataFrame) -> pd.DataFrame:
    """`table` plus the display columns its own columns allow (never changes the others)."""
    out = table.copy()
    for side in _SIDES:
        if {f"{side}completed", f"{side}attempted"} <= set(out.columns):
            name = f"{side.rstrip('_').replace('_', ' ')} {REQUESTS}".strip()
            out[name] = [_requests_cell(r, side) for _, r in out.iterrows()]
    if "step_flag" in out:
        out[FLAG] = out["step_flag"].map(_flag_cell)
    if "meets_sla" in out and "best_point" in out:
        out[SLA_VERDICT] = [_verdict_cell(r) for _, r in out.iterrows()]
    for col in [c for c in table.columns if f"{c}_ci_low" in table and f"{c}_ci_high" in table]:
        out[ci(col)] = [interval_cell(v, lo, hi) for v, lo, hi in
                        zip(out[col], out[f"{col}_ci_low"], out[f"{col}_ci_high"],
                            strict=True)]
        if f"{col}_likely_lo" in table:    # a SIMULATED figure's model error band
            out[ci(col)] = [cell + likely_words(lo, hi) for cell, lo, hi in
                            zip(out[ci(col)], out[f"{col}_likely_lo"], out[f"{col}_likely_hi"],
                                strict=True)]
    if {"aggregated_stack", "disaggregated_stack"} <= set(out.columns):
        out[COMPARED] = [f"{d} - {a}" for a, d in zip(out["aggregated_stack"],
                                                      out["disaggregated_stack"], strict=True)]
    return out


def _folded(columns: list[str]) -> list[str]:
    """A wide selection with the counts and the flag folded and secondary columns left out."""
    out: list[str] = []
    for c in columns:
        side = next((s for s in reversed(_SIDES) if c.startswith(s)), "")
        base = c[len(side):]
        if base in COUNT_COLUMNS:
            c = f"{side.rstrip('_').replace('_', ' ')} {REQUESTS}".strip()
        elif c == "step_flag":
            c = FLAG
        elif _SECONDARY.search(c):
            continue
        if c not in out:
            out.append(c)
    return out


def short_columns(key: str, table: pd.DataFrame, wide: list[str] | None = None) -> list[str]:
    """The columns report.md shows of table `key` (display columns included), at most
    MAX_COLUMNS, only those the table has."""
    shown = with_display_columns(table.iloc[0:0]).columns
    chosen = SHORT.get(key) or _folded(wide or list(table.columns))
    return [c for c in chosen if c in shown][:MAX_COLUMNS]
