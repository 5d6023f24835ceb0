"""The summary report.md opens with: where it ran, what was measured, the headline answers and
every warning, before any table (pure: tables in, markdown out).

`facts` gathers them; `render` writes them. The ablation check (reports.comparisons.ablation) adds a
headline for each one-setting pair whose signal moved and a warning, with the likely cause, for
each that did not. Two inputs can come from elsewhere:
`attestations` ({stack: one line}; default: each run record's own) says how a run proved what
it ran on, and
`cost_warnings` lists the caveats of the dollar figures; when not given, a run without
attestation says so and the unverified or unknown prices the cost table used are named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from reports.comparisons.ablation import glance_lines, summary_lines
from reports.comparisons.verdicts import headline_lines
from reports.records.measures import NEEDED_SAMPLES, too_few
from reports.records.runs import RunRecord
from reports.records.stackinfo import StackInfo, rehearsal_timings, unmeasured_word
from reports.render.md_columns import flag_words
from reports.tables.goodput import Slo
from reports.tables.tables import GAP_MATERIAL_MS, GAP_MATERIAL_SHARE
from workloads.attest.checks import summary_line
from workloads.manifest import COMPLETE


@dataclass
class SummaryFacts:
    where: list[str] = field(default_factory=list)
    measured: list[str] = field(default_factory=list)
    headlines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    glance: list[str] = field(default_factory=list)   # one short line per kind of warning
    rehearsal: bool = False
    rehearsal_timings: str = ""     # stackinfo.rehearsal_timings: the rehearsals' timings
    unmeasured_word: str = "REHEARSAL"   # stackinfo.unmeasured_word of those stacks


def where_it_ran(info: StackInfo, attestation: str | None) -> str:
    proof = f"attestation: {attestation}" if attestation else \
        "no attestation recorded in the run record"
    if info.rehearsal:
        return (f"`{info.name}`: **{info.unmeasured}, {info.timing.label}**: "
                f"{info.timing.meaning}. It imitates {info.workers} on "
                f"{info.gpu_types or 'no GPUs'}; dollar figures price that layout as if it ran "
                f"on AWS; {proof}")
    return f"`{info.name}`: real cluster ({info.gpu_types}, {info.workers}); {proof}"


def attestation_lines(records: list[RunRecord]) -> dict[str, str]:
    """{stack: the attestation line of each of its runs} from the run records."""
    out: dict[str, list[str]] = {}
    for r in records:
        line = summary_line(r.extra.get("attestations"))
        out.setdefault(r.stack, []).append(line if len(records) == 1 else
                                           f"run {r.run_id}: {line}")
    return {stack: "; ".join(lines) for stack, lines in out.items()}


def ttft_gap_warnings(fidelity: pd.DataFrame, slo: Slo) -> list[str]:
    return [detail for _, detail in ttft_gaps(fidelity, slo)]


def ttft_gaps(fidelity: pd.DataFrame, slo: Slo) -> list[tuple[str, str]]:
    """One warning per run with a step whose client TTFT exceeds the frontend's own by a
    material gap (reports/tables/tables.py ttft_gap) or by enough to turn its `slo` TTFT verdict
    (its p50 misses the bound by less than the gap), naming each such step with its gap and the part
    the attested first-data floor accounts for. A run without such a step gets no sentence: the
    first-data stall is a floor under short TTFTs, not a constant on every figure."""
    if fidelity.empty or "ttft_gap_material" not in fidelity:
        return []
    p50, gap = fidelity["client_ttft_p50_ms"], fidelity["ttft_gap_ms"]
    turns = (p50 >= slo.ttft_ms) & (p50 - gap < slo.ttft_ms)
    shown = fidelity.assign(turns=turns)[fidelity["ttft_gap_material"].astype(bool) | turns]
    out = []
    for (stack, run_id), rows in shown.groupby(["stack", "run_id"], sort=True):
        parts = []
        for _, r in rows.iterrows():
            est = r["stall_estimate_ms"]
            stall = "" if pd.isna(est) else f"; first-data stall est. {est:.1f} ms"
            parts.append(f"{r['step']} {r['ttft_gap_ms']:+.1f} ms "
                         f"({r['ttft_gap_share']:+.0%}{stall})")
        floor_ms = rows["first_data_floor_ms"].dropna()
        why = (f"; the attestation's client saw its first data at {floor_ms.iloc[0]:.1f} ms on "
               "a short prompt: a floor (the frontend holds the first SSE data until the "
               "client ACKs the headers, docs/testing.md) under any step whose frontend TTFT "
               "is shorter" if len(floor_ms) else "")
        flipped = rows[rows["turns"]]["step"].astype(str).tolist()
        verdict = (f"; `{slo.name}`'s TTFT verdict of {', '.join(flipped)} turns on the gap"
                   if flipped else "")
        steps = int(((fidelity["stack"] == stack) & (fidelity["run_id"] == run_id)).sum())
        out.append((f"TTFT gap: the client's above the frontend's at {len(rows)} of {steps} "
                    f"step(s) of {stack} (run {run_id})",
                    f"TTFT of {stack} (run {run_id}): the client's exceeds the frontend's own "
                   f"by more than {GAP_MATERIAL_MS:g} ms and {GAP_MATERIAL_SHARE:.0%}, or by "
                   f"enough to turn a verdict, at {len(rows)} of {steps} step(s): "
                   f"{'; '.join(parts)} (fidelity.csv `ttft_gap_ms`){why}{verdict}"))
    return out


def price_warnings(cost: pd.DataFrame) -> list[str]:
    """The caveats of the dollar figures, from what the cost table really used: prices nobody
    verified (`unverified_prices`) and instance types without any price (PRICE UNKNOWN)."""
    if cost.empty:
        return []
    out = []
    for stack, rows in cost.groupby("stack", sort=True):
        names = sorted({n.strip() for v in rows["unverified_prices"].dropna() if v
                        for n in str(v).split(", ")})
        if names:
            out.append(f"{stack}: $ figures use unverified prices: {', '.join(names)}")
        if rows["cost_scope"].astype(str).str.contains("PRICE UNKNOWN").any():
            out.append(f"{stack}: some instance prices are unknown: its cost and $/1M are left "
                       "empty (see the cost scope)")
    return out


def _steps_without_data(records: list[RunRecord], steps: pd.DataFrame) -> list[str]:
    have = set(zip(steps["stack"], steps["run_id"], steps["step"], strict=True))
    return [f"{r.stack} {step} (run {r.run_id}): {rec.get('status')}, no exports"
            for r in records for step, rec in r.steps.items()
            if rec.get("status") != COMPLETE and (r.stack, r.run_id, step) not in have]


def _headlines(t: dict[str, pd.DataFrame], infos: dict[str, StackInfo], slo: Slo) -> list[str]:
    out = []
    g, cost = t.get("goodput", pd.DataFrame()), t.get("cost_efficiency", pd.DataFrame())
    best = g[(g["slo"] == slo.name) & g["best_point"]] if not g.empty else g
    for _, b in best.iterrows():
        c = cost[(cost["stack"] == b["stack"]) & (cost["run_id"] == b["run_id"])
                 & (cost["step"] == b["step"])] if not cost.empty else cost
        usd = c["usd_per_1m_output_tokens"].iloc[0] if len(c) else math.nan
        basis = c["cost_basis"].iloc[0] if len(c) else "no cost row"
        out.append(f"{infos[b['stack']].label}: best step meeting `{slo.name}` is "
                   f"{b['step']} at {b['output_tok_s_per_gpu']:.1f} output tok/s per GPU, "
                   f"${usd:.3f} per 1M output tokens ({basis})")
    for s in sorted(set(infos) - set(best["stack"] if len(best) else [])):
        if not g.empty and s in set(g["stack"]):
            out.append(f"{infos[s].label}: no usable step meets `{slo.name}`")
    # every comparison by its verdict, never a bare difference (reports.comparisons.verdicts)
    out += headline_lines(t.get("comparisons", pd.DataFrame()))
    sla = t.get("sla")
    if sla is not None and not sla.empty:
        for _, b in sla[sla["best_point"].astype(bool)].iterrows():
            out.append(f"SLA best point of {b['stack']} ({b['cache']} cache): {b['step']}, "
                       f"{b['output_tok_s_per_gpu']:.1f} tok/s per GPU ({b['row_kind']})")
    return out


def _small_samples(steps: pd.DataFrame) -> str | None:
    small = {q: int(sum(too_few(n, q) for n in steps["percentile_samples"]))
             for q in NEEDED_SAMPLES}
    parts = [f"p{q} of {n} step(s) from fewer than {NEEDED_SAMPLES[q]} completed requests"
             for q, n in small.items() if n]
    return ("small samples: " + "; ".join(parts) + " (marked `*` in the tables)") \
        if parts else None


def facts(t: dict[str, pd.DataFrame], steps: pd.DataFrame, records: list[RunRecord],
          infos: dict[str, StackInfo], slo: Slo, attestations: dict[str, str] | None = None,
          cost_warnings: list[str] | None = None) -> SummaryFacts:
    f = SummaryFacts(rehearsal=any(i.rehearsal for i in infos.values()),
                     rehearsal_timings=rehearsal_timings(infos),
                     unmeasured_word=unmeasured_word(infos) or "REHEARSAL")
    attested = attestation_lines(records) if attestations is None else attestations
    f.where = [where_it_ran(i, attested.get(s)) for s, i in infos.items()]
    n = {c: int(steps[c].sum()) for c in ("attempted", "completed", "failed", "truncated",
                                          "cancelled")}
    workloads = ", ".join(f"{w} ({k} step(s))" for w, k in
                          steps["workload"].value_counts().sort_index().items())
    f.measured = [f"{len(records)} run(s) of {len(infos)} stack(s): {workloads}",
                  f"{n['attempted']} requests attempted: {n['completed']} completed, "
                  f"{n['failed']} failed, {n['truncated']} truncated, {n['cancelled']} "
                  "cut by the step's own end (not errors); only completed requests enter "
                  "latency, throughput, goodput and cost"]
    f.headlines = _headlines(t, infos, slo)
    # one-setting pairs: a difference is a headline, its absence a warning with the cause
    ablation = t.get("ablation", pd.DataFrame())
    findings, no_difference = summary_lines(ablation)
    f.headlines += [f"ablation: {x}" for x in findings]
    bad = steps[~steps["usable"].astype(bool)]
    f.warnings = [f"left out of best points, Pareto fronts, SLA verdicts and hypotheses: "
                  f"{r['stack']} {r['step']} (run {r['run_id']}): {r['step_flag']}"
                  for _, r in bad.iterrows()]
    f.glance = [f"left out: {r['stack']} {r['step']} (run {r['run_id']}): "
                f"{flag_words(r['step_flag'])}" for _, r in bad.iterrows()]
    missing = _steps_without_data(records, steps)
    f.warnings += [f"not measured: {x}" for x in missing]
    f.glance += [f"not measured: {x}" for x in missing]
    f.warnings += no_difference
    f.glance += glance_lines(ablation)
    for short, detail in ttft_gaps(t.get("fidelity", pd.DataFrame()), slo):
        f.warnings.append(detail)
        f.glance.append(short)
    if n["truncated"]:
        f.warnings.append(f"{n['truncated']} truncated stream(s): AIPerf counted them as "
                          "successes; here they are excluded (see the reconciliation table)")
        f.glance.append(f"{n['truncated']} truncated stream(s) excluded from every figure")
    small = _small_samples(steps)
    if small:
        f.warnings.append(small)
        f.glance.append("percentiles from too few requests (marked `*` in the tables)")
    priced = cost_warnings if cost_warnings is not None else price_warnings(
        t.get("cost_efficiency", pd.DataFrame()))
    f.warnings += priced
    f.glance += [":".join(w.split(":")[:2]) for w in priced]
    return f


def render(f: SummaryFacts) -> str:
    label = f" — {f.unmeasured_word} ({f.rehearsal_timings})" if f.rehearsal else ""
    what = "simulated" if f.rehearsal and all("SIMULATION by DynoSim" in w
                                              for w in f.where) else "measured"
    out = ["\n## Summary\n", "\n**Where it ran**\n\n", *[f"- {w}\n" for w in f.where],
           f"\n**What was {what}**\n\n", *[f"- {m}\n" for m in f.measured],
           f"\n**Headline answers{label}**\n\n",
           *[f"- {h}\n" for h in f.headlines or ["none: no usable step answers them"]],
           "\n**Warnings**\n\n", *[f"- {w}\n" for w in f.warnings or ["none"]]]
    return "".join(out)
