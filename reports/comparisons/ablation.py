"""Ablation sanity check: does a one-setting change show on the server signal it should move?

Pairs are two stacks whose recorded configs (the run manifests) differ in exactly one of the
settings below and in nothing else that shapes the measurement (model, cluster, storage,
workloads and the scale they ran at, the rest of serving; names, tags, cost and monitoring
aside). For each pair the
check compares, on usable steps both ran, the server-side signal that setting should move:

- router (`serving.router`): the frontend's prefix hit rate on multi-turn (and trace) steps,
  explained by the same-worker share of follow-up turns (reports.records.routing);
- topology (`serving.topology` with its workers and transfer): KV handed from a prefill to a
  decode worker (the frontend's records), and NIXL transfers where vLLM exports them;
- offload (`serving.kvOffload`): bytes moved to/from the offload tier and prefix hits it served.

A router change is judged on the hit-rate difference's 95 % interval (a normal interval from
each side's standard error, measured from the request trace: reports.records.routing) and its
p-value, Holm-adjusted with every other comparison of the report (reports.comparisons.verdicts); it
counts when that p-value is below 5 % and the follow-up turns were placed differently. Anything less
is reported as "NO MEASURABLE DIFFERENCE" with the likely cause, never as a finding: a
comparison that cannot show the effect says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

# Which stacks are one setting apart: the plan draws the same pairs (stacks/plan/resolution.py).
from stacks.conventions.one_setting import (  # noqa: F401 (SETTINGS, setting_between: its API)
    SETTINGS,
    Pair,
    pairs,
    setting_between,
)
from stacks.sizing.sampling import ALPHA, Difference, Estimate, estimate_difference

ROUTED_WORKLOADS = ("multi_turn", "trace_replay")
# A router change counts when the hit-rate difference is significant (its Holm-adjusted
# p-value below ALPHA) and follow-up turns were placed differently (same-worker share apart by
# MIN_PLACEMENT_DELTA).
MIN_PLACEMENT_DELTA = 0.1
# Round-robin keeping this much more than chance of the follow-ups on their worker: lockstep.
AFFINITY_OVER_CHANCE = 0.15
NO_DIFFERENCE = "NO MEASURABLE DIFFERENCE"
# a step a side ran but not usably (reports.records.flags): no verdict
LEFT_OUT = "NOT COMPARED"
COLUMNS = ["setting", "baseline_stack", "changed_stack", "step", "signal", "baseline",
           "changed", "delta", "delta_ci_low", "delta_ci_high", "p_value", "p_holm", "verdict",
           "evidence",
           "likely_cause", "interval_method"]
# {(baseline, changed, step): Holm-adjusted p-value} from the report's family of comparisons
Adjusted = dict[tuple[str, str, str], float]


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _pct(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{v:.1%}"


def _lockstep(config: dict[str, Any], workers: int) -> str:
    """The workload settings that let conversations move in lockstep, at the run's scale."""
    mt = ((config.get("workloads") or {}).get("multiTurn") or {})
    ran = {**mt, **(mt.get("quick") or {})} if config.get("scale") == "quick" else mt
    sigma, convs = ran.get("turnDelaySigma"), ran.get("conversations")
    if sigma == 0 and convs and workers and convs % workers == 0:
        return (f" (the workload's pauses are fixed and its {convs} conversations are a "
                f"multiple of the {workers} workers)")
    return ""


def accidental_affinity(b: pd.Series, c: pd.Series) -> bool:
    """Round-robin (the baseline `b`) kept follow-up turns on their worker well above chance,
    and the KV router (`c`) did not place them clearly better: the pair then compares the
    workload's lockstep, not the routers, whatever the hit rates say."""
    sb, sc = _f(b.get("same_worker_share")), _f(c.get("same_worker_share"))
    chance = _f(b.get("chance_same_worker"))
    return not math.isnan(sb) and sb >= chance + AFFINITY_OVER_CHANCE \
        and (math.isnan(sc) or sb >= sc - MIN_PLACEMENT_DELTA)


def router_cause(b: pd.Series, c: pd.Series, config: dict[str, Any], diff: Difference,
                 p_value: float) -> str:
    """Why a router change showed no measurable difference (the first cause that fits)."""
    hb, hc = _f(b.get("server_hit_rate")), _f(c.get("server_hit_rate"))
    sb, sc = _f(b.get("same_worker_share")), _f(c.get("same_worker_share"))
    workers = _f(b.get("prompt_workers"))
    chance = _f(b.get("chance_same_worker"))
    if math.isnan(hb) or math.isnan(hc):
        return "a side has no server hit rate (its frontend was not scraped)"
    if workers == 1:
        return "one worker served every prompt: there was nothing to route between"
    if accidental_affinity(b, c):
        return (f"accidental session affinity: round-robin sent {sb:.0%} of follow-up turns "
                f"back to the worker of the previous turn (chance {_pct(chance)}; the KV "
                f"router {_pct(sc)}), so conversations advanced in lockstep"
                + _lockstep(config, int(workers) if not math.isnan(workers) else 0))
    if max(hb, hc) < 0.05:
        return "the workload re-used nothing: no prefix for either router to hit"
    if any(_f(s.get("server_preemptions")) > 0 or _f(s.get("server_kv_usage_max")) > 0.95
           for s in (b, c)):
        return ("KV cache full (preemptions or usage > 95 %): evictions erase the history "
                "either router could re-use")
    if math.isnan(sb) or math.isnan(sc):
        return "no routing evidence (request trace) in a run: where turns went is unknown"
    if sc < chance + MIN_PLACEMENT_DELTA:
        return (f"the KV router kept only {sc:.0%} of follow-up turns on their worker (chance "
                f"{_pct(chance)}): load balancing outweighed the overlap, or KV events did "
                "not reach the router")
    if abs(sc - sb) < MIN_PLACEMENT_DELTA:
        return (f"the router placed follow-up turns as round-robin did ({sb:.0%} vs {sc:.0%} "
                "on the previous turn's worker): a hit-rate difference is not routing's")
    if not diff.judged:
        return (f"{diff.method}: the step's noise is unknown, so no difference can be told "
                "from it")
    return (f"indistinguishable at this sample: {diff.value * 100:+.1f} points, 95 % interval "
            f"[{diff.low * 100:+.1f}, {diff.high * 100:+.1f}], p {p_value:.2g} after Holm over "
            "the report's comparisons; a longer step would tell (`stacks plan` says how long)")


def hit_rate_difference(b: pd.Series, c: pd.Series) -> Difference:
    """changed - baseline server hit rate, each side's standard error from its request trace
    (workloads/routing_evidence.py hit_rate_se)."""
    def side(s: pd.Series) -> Estimate:
        se = _f(s.get("trace_hit_rate_se"))
        why = "request trace" if not math.isnan(se) else \
            "no standard error (no request trace in the run)"
        return Estimate(_f(s.get("server_hit_rate")), math.nan, math.nan, se, math.inf, 0, why)
    return estimate_difference(side(b), side(c))


def _router_rows(pair: Pair, st: pd.DataFrame, config: dict[str, Any],
                 adjusted: Adjusted) -> list[dict]:
    rows = []
    base, changed = (st[st["stack"] == s].set_index("step") for s in (pair.baseline,
                                                                       pair.changed))
    for step in sorted(set(base.index) & set(changed.index)):
        b, c = base.loc[step], changed.loc[step]
        if b["workload"] not in ROUTED_WORKLOADS:
            continue
        hb, hc = _f(b.get("server_hit_rate")), _f(c.get("server_hit_rate"))
        sb, sc = _f(b.get("same_worker_share")), _f(c.get("same_worker_share"))
        d = hit_rate_difference(b, c)
        p = adjusted.get((pair.baseline, pair.changed, str(step)), d.p_value)
        same_placement = abs(sc - sb) < MIN_PLACEMENT_DELTA      # False when unknown (NaN)
        # a hit-rate change over round-robin's accidental affinity is the lockstep's, not a
        # finding about the router, even when it clears the noise
        ok = d.judged and p < ALPHA and not same_placement and not accidental_affinity(b, c)
        evidence = (f"same-worker share of follow-up turns {_pct(sb)} -> {_pct(sc)} (chance "
                    f"{_pct(_f(b.get('chance_same_worker')))}); prompts per worker: "
                    f"{b.get('requests_per_worker') or 'n/a'} -> "
                    f"{c.get('requests_per_worker') or 'n/a'}")
        rows.append({"step": step, "signal": "server prefix hit rate", "baseline": hb,
                     "changed": hc, "delta": d.value, "delta_ci_low": d.low,
                     "delta_ci_high": d.high,
                     "p_value": d.p_value, "p_holm": p if adjusted else math.nan,
                     "verdict": (f"{'raised' if d.value > 0 else 'lowered'} by "
                                 f"{abs(d.value) * 100:.1f} points [95 % CI "
                                 f"{d.low * 100:+.1f}, {d.high * 100:+.1f}]") if ok
                     else NO_DIFFERENCE,
                     "evidence": evidence, "interval_method": d.method,
                     "likely_cause": "" if ok else router_cause(b, c, config, d, p)})
    return rows


def _pooled(st: pd.DataFrame, stack: str, steps: set[str], col: str, how: str) -> float:
    v = st[(st["stack"] == stack) & st["step"].isin(steps)][col].map(_f).dropna() \
        if col in st else pd.Series(dtype=float)
    if v.empty:
        return math.nan
    return float(v.sum() if how == "sum" else v.mean())


@dataclass(frozen=True)
class Moving:
    """A setting whose signal is something moving: KV between workers, to the offload tier.
    It moved when `column` (pooled over the common steps) passes `above`, or `also` > 0."""

    signal: str
    column: str
    how: str              # how steps pool: "mean" (a share) or "sum" (a count)
    above: float
    also: str             # a second counter of the same movement (a metric), summed
    also_label: str
    detail: str           # a figure shown as evidence, averaged over steps
    verdict: str
    unseen: str           # the cause when no metric showed anything
    still: str            # the cause when the metrics were there and showed nothing


MOVING = {
    "topology": Moving(
        "requests handed from a prefill to a decode worker", "handoff_share", "mean", 0.5,
        "server_kv_transfers", "NIXL transfers", "kv_transfer_est_ms_mean",
        "KV moved between workers",
        "no request trace and no NIXL metrics: the transfer cannot be seen",
        "prompts were decoded where they were prefilled: the disaggregated stack served "
        "aggregated (no prefill worker registered, or a local prefill fallback)"),
    "offload": Moving(
        "KV bytes moved to/from the offload tier", "server_offload_bytes", "sum", 0.0,
        "server_offload_hits", "prefix hits served by the offload tier",
        "server_kv_usage_max", "offload tier used",
        "not exported: the workers' /metrics have no vLLM offload counters (KVBM serves its "
        "own port, not scraped)",
        "nothing was offloaded: the working set fit the GPU KV cache (usage max {detail}), so "
        "no block left it; offload shows only beyond GPU capacity"),
}


def _moving_rows(pair: Pair, st: pd.DataFrame, common: set[str]) -> list[dict]:
    spec = MOVING[pair.setting]
    base = _pooled(st, pair.baseline, common, spec.column, spec.how)
    changed = _pooled(st, pair.changed, common, spec.column, spec.how)
    also = _pooled(st, pair.changed, common, spec.also, "sum")
    detail = _pooled(st, pair.changed, common, spec.detail, "mean")
    shown = _pct(detail) if spec.detail.endswith("_max") else \
        "n/a" if math.isnan(detail) else f"{detail:.1f} ms"
    moved = (not math.isnan(changed) and changed > spec.above) \
        or (not math.isnan(also) and also > 0)
    seen = not (math.isnan(changed) and math.isnan(also))
    return [{"step": f"{len(common)} common step(s)", "signal": spec.signal, "baseline": base,
             "changed": changed, "delta": changed - base,
             "verdict": spec.verdict if moved else NO_DIFFERENCE,
             "evidence": f"{spec.also_label}: "
                         f"{'not exported' if math.isnan(also) else f'{also:,.0f}'}; "
                         f"{spec.detail}: {shown}",
             "likely_cause": "" if moved else (spec.still.format(detail=shown) if seen
                                               else spec.unseen)}]


def _left_out_rows(pair: Pair, steps: pd.DataFrame, usable: pd.DataFrame) -> list[dict]:
    """Steps both stacks ran that the check may not judge: flagged or failed on a side (the
    step flags of reports.records.flags), one row each (for a router pair, its multi-turn and trace
    steps only: the others carry no router signal)."""
    ran = {s: steps[steps["stack"] == s].set_index("step") for s in (pair.baseline,
                                                                        pair.changed)}
    both = set(ran[pair.baseline].index) & set(ran[pair.changed].index)
    judged = set(usable[usable["stack"] == pair.baseline]["step"]) \
        & set(usable[usable["stack"] == pair.changed]["step"])
    out = []
    for step in sorted(both - judged):
        if pair.setting == "router" \
                and ran[pair.baseline].loc[step]["workload"] not in ROUTED_WORKLOADS:
            continue
        why = "; ".join(f"{s}: {_flag(ran[s].loc[step])}" for s in ran
                        if not bool(ran[s].loc[step].get("usable", True)))
        out.append({"step": step, "signal": "", "verdict": LEFT_OUT,
                    "likely_cause": f"left out, not judged ({why})"})
    return out


def _flag(row: pd.Series) -> str:
    flag = row.get("step_flag")
    return flag if isinstance(flag, str) and flag else "not usable"


def ablation_check(steps: pd.DataFrame, configs: dict[str, dict[str, Any]],
                   adjusted: Adjusted | None = None) -> pd.DataFrame:
    """One row per compared signal of every one-setting pair, over usable steps only; a step
    both ran that is flagged or failed on a side gets a NOT COMPARED row, never a verdict.
    `adjusted`: the router rows' Holm-adjusted p-values from the report's family of
    comparisons (reports.comparisons.verdicts.adjusted); without it each row stands alone."""
    st = steps[steps["usable"].astype(bool)] if "usable" in steps else steps
    rows = []
    for pair in pairs(configs):
        common = set(st[st["stack"] == pair.baseline]["step"]) \
            & set(st[st["stack"] == pair.changed]["step"])
        head = {"setting": pair.setting, "baseline_stack": pair.baseline,
                "changed_stack": pair.changed}
        left_out = _left_out_rows(pair, steps, st)
        if not common and not left_out:
            rows.append({**head, "step": "none", "signal": "", "verdict": LEFT_OUT,
                         "likely_cause": "no step both stacks ran"})
        elif common:
            found = (_router_rows(pair, st, configs[pair.baseline], adjusted or {})
                     if pair.setting == "router"
                     else _moving_rows(pair, st, common))
            rows += [{**head, **r} for r in found]
        rows += [{**head, **r} for r in left_out]
    return pd.DataFrame(rows, columns=COLUMNS)


def summary_lines(table: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(findings for the headlines, warnings) from the check's rows."""
    findings: list[str] = []
    warnings: list[str] = []
    if table is None or table.empty:
        return findings, warnings
    for _, r in table.iterrows():
        what = (f"{r['changed_stack']} vs {r['baseline_stack']} ({r['setting']}), "
                f"{r['step']}")
        if r["verdict"] == LEFT_OUT:
            warnings.append(f"ablation check: {what}: {r['likely_cause']}")
        elif r["verdict"] == NO_DIFFERENCE:
            values = "" if pd.isna(r["baseline"]) and pd.isna(r["changed"]) else \
                f" ({_fmt(r['baseline'])} vs {_fmt(r['changed'])})"
            warnings.append(f"ablation check: {what}: no measurable difference in "
                            f"{r['signal'] or 'its signal'}{values}; likely cause: "
                            f"{r['likely_cause']}")
        else:
            findings.append(f"{what}: {r['signal']} {_fmt(r['baseline'])} -> "
                            f"{_fmt(r['changed'])} ({r['verdict']}); {r['evidence']}")
    return findings, warnings


def _fmt(v: Any) -> str:
    x = _f(v)
    if math.isnan(x):
        return "n/a"
    return f"{x:.1%}" if abs(x) <= 1 else f"{x:,.0f}"


def glance_lines(table: pd.DataFrame) -> list[str]:
    """One short line per pair and step the check could not call a finding (the summary's
    warning lines say why)."""
    if table is None or table.empty:
        return []
    out = []
    for _, r in table[table["verdict"].isin([LEFT_OUT, NO_DIFFERENCE])].iterrows():
        what = "not compared" if r["verdict"] == LEFT_OUT else "no measurable difference"
        cause = str(r["likely_cause"] or "").split(":")[0].split(" (")[0]
        out.append(f"ablation: {r['changed_stack']} vs {r['baseline_stack']} "
                   f"({r['setting']}), {r['step']}: {what}" + (f" ({cause})" if cause else ""))
    return out
