"""The plan's four hypotheses, each with the figures from the compared runs that bear on it.

Only what the data shows: figures with their spread and sample counts, each difference between
two stacks with its 95 % interval and verdict (reports.comparisons.verdicts, judged with the
report's other comparisons), and "not measured" naming the run that is missing. Only usable steps
take part (reports.records.flags); each hypothesis ends with the failed, interrupted or client-bound
steps of its workloads that were left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

import pandas as pd

from reports.comparisons.compare import topology_pairs
from reports.comparisons.verdicts import Q_TOPOLOGY, phrase
from reports.records.flags import left_out
from reports.records.runs import parse_step_id
from reports.records.stackinfo import StackInfo


@dataclass
class Hypothesis:
    title: str
    question: str
    findings: list[str] = field(default_factory=list)


def _f(x: float | None, fmt: str = ".1f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _spread(row: pd.Series, col: str) -> str:
    lo, hi, n = row.get(f"{col}_min"), row.get(f"{col}_max"), row.get("repeats", 1)
    return (f"{_f(row[col])} ms (min {_f(lo)}, max {_f(hi)}; {int(n)} repeat(s), "
            f"{int(row['completed'])} completed requests)")


def short_inputs_low_load(sweep: pd.DataFrame, infos: dict[str, StackInfo],
                          steps: pd.DataFrame,
                          comparisons: pd.DataFrame | None = None) -> Hypothesis:
    h = Hypothesis("H1: short inputs at low load",
                   "Does disaggregation add transfer and scheduling cost (TTFT, ITL, KV "
                   "transfer time) when inputs are short and load is low?")
    pairs = topology_pairs(infos)
    for agg, dis in pairs:
        a, d = sweep[sweep["stack"] == agg], sweep[sweep["stack"] == dis]
        common = sorted(set(a["concurrency"]) & set(d["concurrency"]))
        if not common:
            continue
        c = common[0]
        ra = a[a["concurrency"] == c].iloc[0]
        rd = d[d["concurrency"] == c].iloc[0]
        said = {fig: phrase(comparisons, Q_TOPOLOGY, agg, dis, f"c{int(c)}", fig)
                for fig in ("ttft_p50_ms", "itl_p50_ms")}
        h.findings += [
            f"c{c}: {dis} minus {agg} TTFT p50 = {_f(rd['ttft_p50_ms'] - ra['ttft_p50_ms'])} ms"
            f"{said['ttft_p50_ms']} ({agg}: {_spread(ra, 'ttft_p50_ms')}; {dis}: "
            f"{_spread(rd, 'ttft_p50_ms')})",
            f"c{c}: {dis} minus {agg} ITL p50 = {_f(rd['itl_p50_ms'] - ra['itl_p50_ms'], '.2f')}"
            f" ms{said['itl_p50_ms']} ({agg} {_f(ra['itl_p50_ms'], '.2f')} ms, {dis} "
            f"{_f(rd['itl_p50_ms'], '.2f')} ms)"]
    if not h.findings:
        h.findings.append("not measured: needs a concurrency sweep of an aggregated and a "
                          "disaggregated stack at a common concurrency")
    h.findings.append(_transfer_time(steps, infos))
    return h


def _transfer_time(steps: pd.DataFrame, infos: dict[str, StackInfo]) -> str:
    """The frontend's own estimate of each disaggregated stack's KV transfer (request trace)."""
    est = steps[steps["stack"].map(lambda s: infos[s].topology == "disaggregated")
                & steps.get("kv_transfer_est_ms_mean", pd.Series(dtype=float)).notna()] \
        if "kv_transfer_est_ms_mean" in steps else steps.iloc[0:0]
    if est.empty:
        return ("KV transfer time: not measured (no transfer-time figure in the server "
                "export or request trace of these runs)")
    parts = [f"{stack} {_f(g['kv_transfer_est_ms_mean'].mean())} ms over {len(g)} step(s)"
             for stack, g in est.groupby("stack")]
    return ("KV transfer time, the frontend's estimate per request (its request trace, not a "
            "measured transfer): " + "; ".join(parts))


def multi_turn_reuse(mt: pd.DataFrame, steps: pd.DataFrame, infos: dict[str, StackInfo],
                     ablation: pd.DataFrame | None = None) -> Hypothesis:
    h = Hypothesis("H2: multi-turn conversations",
                   "Does routing / offload cut recomputation (server hit/miss, eviction) in "
                   "aggregated and disaggregated mode?")
    # a group key types as any Scalar; these are the `stack` column's names
    for stack, s in (mt.groupby("stack") if not mt.empty else []):
        turns = s[s["turn"] != "all"]
        allrow = s[s["turn"] == "all"].iloc[0]
        st = steps[(steps["stack"] == stack) & (steps["workload"] == "multi_turn")]
        first, last = turns.iloc[0], turns.iloc[-1]
        h.findings.append(
            f"{infos[cast(str, stack)].label}: server prefix hit rate "
            f"{_f(allrow['server_hit_rate'] * 100)} %"
            f" over the step (per-request usage: turn {first['turn']} "
            f"{_f(first['usage_hit_rate'] * 100)} % -> turn {last['turn']} "
            f"{_f(last['usage_hit_rate'] * 100)} %); TTFT p50 turn {first['turn']} "
            f"{_f(first['ttft_p50_ms'])} ms -> turn {last['turn']} {_f(last['ttft_p50_ms'])} ms"
            f" ({int(allrow['completed'])} of {int(allrow['attempted'])} requests completed, "
            f"{int(allrow['conversations'])} whole conversations); preemptions (server) "
            f"{_f(st['server_preemptions'].sum(), '.0f')}; follow-up turns on the previous "
            f"turn's worker {_f(allrow.get('same_worker_share', math.nan) * 100)} % (chance "
            f"{_f(allrow.get('chance_same_worker', math.nan) * 100)} %)")
    for _, r in (ablation if ablation is not None else pd.DataFrame()).iterrows():
        if r["setting"] in ("router", "offload"):
            why = r["likely_cause"] or r["evidence"]
            h.findings.append(f"{r['setting']}, {r['baseline_stack']} -> {r['changed_stack']} "
                              f"({r['step']}): {r['verdict']}; {why} (ablation check)")
    if not h.findings:
        h.findings.append("not measured: no multi-turn step in these runs")
    else:
        h.findings.append("eviction counts: not measured (the engines export no eviction "
                          "counter; preemptions are shown instead)")
    return h


def long_inputs_high_load(sweep: pd.DataFrame, seq: pd.DataFrame, goodput: pd.DataFrame,
                          steps: pd.DataFrame, infos: dict[str, StackInfo],
                          comparisons: pd.DataFrame | None = None) -> Hypothesis:
    h = Hypothesis("H3: long inputs at high load",
                   "Does disaggregation cut prefill interference while decode becomes the "
                   "bottleneck (per-stage queues, GPU use, SLO attainment)?")
    for agg, dis in topology_pairs(infos):
        a, d = sweep[sweep["stack"] == agg], sweep[sweep["stack"] == dis]
        common = sorted(set(a["concurrency"]) & set(d["concurrency"]))
        if common:
            c = common[-1]
            ra, rd = a[a["concurrency"] == c].iloc[0], d[d["concurrency"] == c].iloc[0]
            step = f"c{int(c)}"
            h.findings.append(
                f"c{c} (highest common): TTFT p99 {agg} {_f(ra['ttft_p99_ms'])} ms vs {dis} "
                f"{_f(rd['ttft_p99_ms'])} ms"
                f"{phrase(comparisons, Q_TOPOLOGY, agg, dis, step, 'ttft_p99_ms')}; ITL p50 "
                f"{_f(ra['itl_p50_ms'], '.2f')} vs {_f(rd['itl_p50_ms'], '.2f')} ms"
                f"{phrase(comparisons, Q_TOPOLOGY, agg, dis, step, 'itl_p50_ms')}")
    for _, r in seq.iterrows():
        h.findings.append(
            f"{r['stack']} {r['distribution']}: TTFT p50 {_f(r['ttft_p50_ms'])} ms overall, "
            f"{_f(r['long_ttft_p50_ms'])} ms for the longest decile of requested ISL "
            f"(>= {_f(r['long_isl_threshold'], '.0f')} tokens, {int(r['long_requests'])} "
            f"requests); failures: {r['failures']}")
    if not goodput.empty:
        first = goodput["slo"].iloc[0]
        g = goodput[(goodput["slo"] == first) & (goodput["workload"] != "multi_turn")]
        for stack, s in g.groupby("stack"):
            share = s["requests_meeting_slo"].sum() / max(1, s["attempted"].sum()) * 100
            h.findings.append(f"{stack}: {int(s['step_meets_slo'].sum())}/{len(s)} steps meet "
                              f"SLO {first}; request goodput {_f(share)} %")
    q = steps[steps["usable"].astype(bool)].groupby("stack")["server_queue_avg"].mean()
    for stack, v in q.items():
        h.findings.append(f"{stack}: mean worker queue (vllm:num_requests_waiting) "
                          f"{_f(v, '.2f')} over all steps")
    if steps["server_gpu_util_avg"].isna().all():
        h.findings.append("GPU utilisation: not measured (no DCGM metrics in these runs)")
    if len(h.findings) <= 1:
        h.findings.insert(0, "not measured: needs sweeps or sequence-distribution steps of "
                          "both topologies")
    return h


def cost_at_slo(goodput: pd.DataFrame, cost: pd.DataFrame,
                infos: dict[str, StackInfo]) -> Hypothesis:
    h = Hypothesis("H4: cost",
                   "Does a load range favour mixed GPUs (period cost and successful tokens at "
                   "an equal SLO)?")
    if not goodput.empty and not cost.empty:
        first = goodput["slo"].iloc[0]
        best = goodput[(goodput["slo"] == first) & goodput["best_point"]]
        for _, b in best.iterrows():
            group = parse_step_id(b["step"])["group"]
            c = cost[(cost["stack"] == b["stack"])
                     & (cost["step"].map(lambda s: parse_step_id(s)["group"]) == group)]
            usd = c["usd_per_1m_output_tokens"]
            basis = c["cost_basis"].iloc[0] if len(c) else "no cost row"
            h.findings.append(
                f"{infos[b['stack']].label}: best point meeting {first} is {group} "
                f"({b['step']} of run {b['run_id']}: {_f(b['output_tok_s_per_gpu'])} output "
                f"tok/s per GPU); ${_f(usd.mean(), '.3f')} per 1M output tokens over its "
                f"{len(c)} sample(s) (min {_f(usd.min(), '.3f')}, max {_f(usd.max(), '.3f')}; "
                f"{basis})")
        missing = sorted(set(infos) - set(best["stack"]))
        for s in missing:
            h.findings.append(f"{s}: no step meets {first}: no cost at this SLO")
    gpu_types = {t for i in infos.values() for t in i.gpu_types.split(", ") if t}
    if len(gpu_types) < 2:
        h.findings.append("mixed-GPU configuration: not measured (all compared stacks use "
                          f"{', '.join(sorted(gpu_types)) or 'no GPUs'})")
    return h


def _usable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["usable"].astype(bool)] if "usable" in frame else frame


# The workloads each hypothesis reads, for its note of what was left out.
READS = {"H1": ("concurrency_sweep",), "H2": ("multi_turn",),
         "H3": ("concurrency_sweep", "sequence_distributions"), "H4": None}


def all_hypotheses(tables: dict[str, pd.DataFrame], steps: pd.DataFrame,
                   infos: dict[str, StackInfo]) -> list[Hypothesis]:
    t = {k: _usable(v) for k, v in tables.items()}
    good = _usable(steps)
    judged = tables.get("comparisons")
    out = [short_inputs_low_load(t["concurrency_sweep"], infos, good, judged),
           multi_turn_reuse(t["multi_turn"], good, infos, tables.get("ablation")),
           long_inputs_high_load(t["concurrency_sweep"], t["sequence_distribution"],
                                 t["goodput"], good, infos, judged),
           cost_at_slo(t["goodput"], t["cost_efficiency"], infos)]
    for h in out:
        workloads = READS[h.title.split(":")[0]]
        read = steps if workloads is None else steps[steps["workload"].isin(workloads)]
        note = left_out(read, "this hypothesis")
        if note:
            h.findings.append(note)
    return out
