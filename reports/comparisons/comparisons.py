"""The comparisons the report draws, gathered from its frames (pure): each pair of stacks on
each figure at each step both ran usably, with the difference and its interval
(reports.comparisons.verdicts judges them as one family).

- agg vs disagg (reports.comparisons.compare.topology_pairs): per concurrency of the sweep, TTFT p50
  and p99, ITL p50 and output tok/s; per prefix share, TTFT p50;
- the router ablation: the hit-rate difference of each one-setting router pair, as
  reports.comparisons.ablation measured it (offload and topology rows there are evidence that KV
  moved, counts without a sampling distribution: they are not in the family);
- the decode tier on another GPU: each disaggregated stack whose decode workers run on another
  instance type than its prefill workers, against each same-model disaggregated stack whose
  tiers share one, per concurrency: $ per 1M output tokens, tok/s per GPU, ITL and TTFT p50;
- cold vs warm cache: each trace step's warm pass against its cold pass (same prompts);
- the B200 recipes (sla.csv best points): each optimized stack against its model's baseline,
  and aggregated against disaggregated, per cache state;
- simulated vs measured: each measured step against the simulation its run kept at start
  (the manifest's `simulation`, reports/comparisons/simulated_vs_measured.py's record): TTFT p50
  (the frontend's, as that table compares it) and ITL p50, their own family (it asks whether the
  model fits the measurement, not what to deploy); `simulated_vs_measured` pairs a simulated
  run's steps with a measured run's by step id, and `paired_by_step` summarises rows across
  steps.

Quantiles compare the pooled completed requests of each side's usable steps (exact
bootstrap; a quantile too few requests pin, a p99 under 368 a side, is not judged); where both
sides repeated the step, Welch's t over the repeats' own figures is computed too and the less
significant of the two is kept. Whole-step figures compare across repeats only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import product

import numpy as np
import pandas as pd

from reports.comparisons import model_bands
from reports.comparisons import simulated_vs_measured as svm
from reports.comparisons.ablation import LEFT_OUT
from reports.comparisons.compare import source_kind, topology_pairs
from reports.comparisons.verdicts import (
    FAMILY_SIMULATION,
    FIGURES,
    Q_CACHE,
    Q_DECODE_TIER,
    Q_PREFIX,
    Q_RECIPE,
    Q_ROUTER,
    Q_SIMULATION,
    Q_SLA_TOPOLOGY,
    Q_TOPOLOGY,
    judge,
    row,
)
from reports.records.runs import STEP_KEY, parse_step_id
from reports.records.stackinfo import StackInfo, rehearsal_timings, unmeasured_word
from reports.tables.intervals import QUANTILE_FIGURES, completed_by_step
from reports.tables.sla import best_points
from reports.tables.tables import share_of
from stacks.sizing.sampling import (
    Difference,
    Estimate,
    estimate_difference,
    mean_interval,
    quantile,
    quantile_difference,
    quantile_se,
)
from workloads.sim.record import step_figures

ByStep = dict[tuple, pd.DataFrame]
TOPOLOGY_FIGURES = ("ttft_p50_ms", "itl_p50_ms", "ttft_p99_ms", "output_tok_s")
TIER_FIGURES = ("usd_per_1m_output_tokens", "output_tok_s_per_gpu", "itl_p50_ms",
                "ttft_p50_ms")
SLA_FIGURES = ("output_tok_s_per_gpu", "ttft_p50_ms")


def stands_on(infos: dict[str, StackInfo], stacks: list[str]) -> str:
    """MEASURED, or what the unmeasured figures are with their timings' short words."""
    words = ["MEASURED"] if any(s in infos and not infos[s].rehearsal for s in stacks) else []
    local = rehearsal_timings(infos, stacks, named=False)
    if local:
        words.append(f"{unmeasured_word(infos, stacks)} ({local})")
    return "; ".join(words)


def _samples(group: pd.DataFrame, by_step: ByStep, column: str) -> list[np.ndarray]:
    return [by_step[k][column].to_numpy(dtype=float) if k in by_step else np.array([])
            for k in group[STEP_KEY].itertuples(index=False, name=None)]


def compare_groups(ref: pd.DataFrame, sub: pd.DataFrame, by_step: ByStep,
                   figure: str, sub_by_step: ByStep | None = None
                   ) -> tuple[float, float, Difference]:
    """(reference value, subject value, difference) of one figure between two groups of steps
    (each a step or its repeats), values as the tables fold them (the repeats' mean);
    `sub_by_step`: the subject's requests when they come from another set of runs."""
    if figure in QUANTILE_FIGURES:
        column, q = QUANTILE_FIGURES[figure]
        ra = _samples(ref, by_step, column)
        sa = _samples(sub, by_step if sub_by_step is None else sub_by_step, column)
        each_r, each_s = [quantile(x, q) for x in ra], [quantile(x, q) for x in sa]
        d = quantile_difference(np.concatenate(ra), np.concatenate(sa), q)
        # a quantile the requests cannot pin (a p99 of too few) is not judged, repeats or not
        if d.judged and len(ra) >= 2 and len(sa) >= 2:
            w = estimate_difference(mean_interval(each_r), mean_interval(each_s))
            if w.judged and w.p_value > d.p_value:
                d = Difference(w.value, w.low, w.high, w.p_value, w.se,
                               f"{w.method} over repeats (wider than the requests' bootstrap)")
        return float(np.nanmean(each_r)), float(np.nanmean(each_s)), d
    rv = ref[figure].to_numpy(dtype=float) if figure in ref else np.array([])
    sv = sub[figure].to_numpy(dtype=float) if figure in sub else np.array([])
    er, es = mean_interval(rv), mean_interval(sv)
    return er.value, es.value, estimate_difference(er, es)


def _usable(steps: pd.DataFrame, workload: str) -> pd.DataFrame:
    s = steps[steps["workload"] == workload]
    return s[s["usable"].astype(bool)] if "usable" in s else s


def _pairwise(question: str, reference: str, subject: str, groups_r: dict,
              groups_s: dict, figures: tuple[str, ...], label, by_step: ByStep,
              infos: dict[str, StackInfo]) -> list[dict]:
    out = []
    on = stands_on(infos, [reference, subject])
    for key in sorted(set(groups_r) & set(groups_s)):
        for fig in figures:
            rv, sv, d = compare_groups(groups_r[key], groups_s[key], by_step, fig)
            out.append(row(question, reference, subject, label(key), FIGURES[fig], rv, sv,
                           d, on))
    return out


def _by(frame: pd.DataFrame, stack: str, column: str) -> dict:
    return {k: g for k, g in frame[frame["stack"] == stack].groupby(column)}


def topology(steps: pd.DataFrame, by_step: ByStep, infos: dict[str, StackInfo]) -> list[dict]:
    sweep = _usable(steps, "concurrency_sweep")
    pc = _usable(steps, "prefix_cache")
    pc = pc.assign(prefix_share=pc["variant"].map(share_of))
    out = []
    for agg, dis in topology_pairs(infos):
        out += _pairwise(Q_TOPOLOGY, agg, dis, _by(sweep, agg, "concurrency"),
                         _by(sweep, dis, "concurrency"), TOPOLOGY_FIGURES,
                         lambda c: f"c{int(c)}", by_step, infos)
        out += _pairwise(Q_PREFIX, agg, dis, _by(pc, agg, "prefix_share"),
                         _by(pc, dis, "prefix_share"), ("ttft_p50_ms",),
                         lambda s: f"share {s:.0%}", by_step, infos)
    return out


def _tier(info: StackInfo, role: str) -> str:
    return next((gpu for r, gpu in info.tiers if r == role), "")


def decode_tier(steps: pd.DataFrame, cost: pd.DataFrame, by_step: ByStep,
                infos: dict[str, StackInfo]) -> list[dict]:
    dis = {s: i for s, i in infos.items() if i.topology == "disaggregated"}
    mixed = sorted(s for s, i in dis.items() if _tier(i, "decode") != _tier(i, "prefill"))
    same = sorted(s for s, i in dis.items() if _tier(i, "decode") == _tier(i, "prefill"))
    sweep = _usable(steps, "concurrency_sweep")
    if not cost.empty and "usd_per_1m_output_tokens" in cost:
        sweep = sweep.merge(cost[STEP_KEY + ["usd_per_1m_output_tokens"]], on=STEP_KEY,
                            how="left")
    out = []
    for m, s in product(mixed, same):
        a, b = infos[m], infos[s]
        # like with like: one model, one kind of source, the same prefill GPU and router, so
        # the decode tier is the only difference
        if a.model != b.model or source_kind(a) != source_kind(b) or \
                _tier(a, "prefill") != _tier(b, "prefill") or a.router != b.router:
            continue
        out += _pairwise(Q_DECODE_TIER, s, m, _by(sweep, s, "concurrency"),
                         _by(sweep, m, "concurrency"), TIER_FIGURES,
                         lambda c: f"c{int(c)}", by_step, infos)
    return out


def cold_vs_warm(steps: pd.DataFrame, by_step: ByStep,
                 infos: dict[str, StackInfo]) -> list[dict]:
    trace = _usable(steps, "trace_replay")
    if trace.empty or "cache" not in trace:
        return []
    out = []
    for (stack, c), g in trace.groupby(["stack", "concurrency"]):
        c = float(c)   # type: ignore[arg-type]  # a group key types as Hashable
        cold, warm = g[g["cache"] == "cold"], g[g["cache"] == "warm"]
        if cold.empty or warm.empty:
            continue
        for fig in SLA_FIGURES:
            rv, sv, d = compare_groups(cold, warm, by_step, fig)
            out.append(row(Q_CACHE, f"{stack} cold", f"{stack} warm", f"c{int(c)}",
                           FIGURES[fig], rv, sv, d, stands_on(infos, [str(stack)])))
    return out


def _best_group(sla: pd.DataFrame, steps: pd.DataFrame, stack: str, cache: str
                ) -> pd.DataFrame | None:
    """The usable repeats of a stack's best SLA step in one cache state (None: no best)."""
    best = best_points(sla, cache)
    best = best[best["stack"] == stack]
    if best.empty:
        return None
    group = parse_step_id(str(best["step"].iloc[0]))["group"]
    s = _usable(steps, "trace_replay")
    return s[(s["stack"] == stack) & (s["group"] == group) & (s["cache"] == cache)]


def recipes(sla: pd.DataFrame, steps: pd.DataFrame, by_step: ByStep,
            infos: dict[str, StackInfo]) -> list[dict]:
    if sla.empty:
        return []
    out = []
    for model in sorted({i.model for i in infos.values()}):
        mine = {s: i for s, i in infos.items() if i.model == model}
        base = sorted(s for s, i in mine.items() if i.recipe == "baseline")
        opt = sorted(s for s, i in mine.items() if i.recipe == "optimized")
        agg = sorted(s for s in opt if mine[s].topology == "aggregated")
        dis = sorted(s for s in opt if mine[s].topology == "disaggregated")
        for question, pairs in ((Q_RECIPE, product(base, opt)),
                                (Q_SLA_TOPOLOGY, product(agg, dis))):
            for (r, s), cache in product(pairs, ("cold", "warm")):
                gr, gs = (_best_group(sla, steps, x, cache) for x in (r, s))
                if gr is None or gs is None:
                    continue
                for fig in SLA_FIGURES:
                    rv, sv, d = compare_groups(gr, gs, by_step, fig)
                    out.append(row(question, r, s, f"{cache} best point", FIGURES[fig], rv,
                                   sv, d, stands_on(infos, [r, s]),
                                   note=f"{s} {gs['step'].iloc[0]} vs {r} "
                                        f"{gr['step'].iloc[0]}"))
    return out


def router(ablation: pd.DataFrame, infos: dict[str, StackInfo]) -> list[dict]:
    """The router pairs' hit-rate differences as the ablation check measured them."""
    if ablation is None or ablation.empty or "p_value" not in ablation:
        return []
    rows = ablation[(ablation["setting"] == "router") & (ablation["verdict"] != LEFT_OUT)]
    out = []
    for _, r in rows.iterrows():
        d = Difference(float(r["delta"]), float(r["delta_ci_low"]), float(r["delta_ci_high"]),
                       float(r["p_value"]), math.nan, str(r.get("interval_method") or ""))
        out.append(row(Q_ROUTER, r["baseline_stack"], r["changed_stack"], str(r["step"]),
                       FIGURES["server_hit_rate"], float(r["baseline"]),
                       float(r["changed"]), d,
                       stands_on(infos, [r["baseline_stack"], r["changed_stack"]]),
                       note=str(r.get("likely_cause") or "")))
    return out


def all_comparisons(tables: dict[str, pd.DataFrame], steps: pd.DataFrame,
                    requests: pd.DataFrame, infos: dict[str, StackInfo],
                    simulations: Mapping[tuple[str, str], dict | None] | None = None
                    ) -> pd.DataFrame:
    """comparisons.csv: every comparison of the report, judged as one family, then each
    measured step against its run's simulation (`simulations`: {(stack, run_id): the
    manifest's record}), judged as a family of its own. `tables["concurrency_sweep"]` with its
    SIMULATED rows' bands (reports/tables/sim_likely.py) decides which differences between two
    simulated candidates the timing model resolves (reports/comparisons/model_bands.py)."""
    by_step = completed_by_step(requests)
    rows = topology(steps, by_step, infos)
    rows += router(tables.get("ablation", pd.DataFrame()), infos)
    rows += decode_tier(steps, tables.get("cost_efficiency", pd.DataFrame()), by_step, infos)
    rows += cold_vs_warm(steps, by_step, infos)
    rows += recipes(tables.get("sla", pd.DataFrame()), steps, by_step, infos)
    # between two simulated candidates, whether the timing model's bands resolve each one
    rows = model_bands.mark(rows, tables.get("concurrency_sweep", pd.DataFrame()), infos)
    sim = judge(record_vs_measured(steps, by_step, simulations or {}, infos),
                family=FAMILY_SIMULATION)
    mine = judge(rows)
    if sim.empty or mine.empty:
        return mine if sim.empty else sim
    return pd.concat([mine, sim], ignore_index=True)


# 2.5 x (p60 - p40) / sqrt(n): the median's standard error from the density its p40-p60 span
# shows (20 % of the mass: f ~ 0.2 / span; se = 0.5 / (f sqrt(n))), where only those are kept
_SPAN_SE = 0.5 / 0.2


def _measured(step: pd.Series, by_step: ByStep, figure: str) -> Estimate:
    """A measured step's figure as simulated_vs_measured.py compares it (the frontend's TTFT
    and ITL p50 from its request trace, else the client's), with a standard error: TTFT's from
    the span of the frontend's p40 to p60, ITL's from the completed requests' per-request ITL
    (the client's, which the frontend's matches but for transport)."""
    key = (step["stack"], step["run_id"], step["step"])
    done = by_step.get(key)
    n = len(done) if done is not None else 0
    value = float(step.get(svm.MEASURED_COLUMN[figure], math.nan))
    if math.isnan(value):
        value = float(step.get(figure, math.nan))
    if figure == "itl_p50_ms":
        values = done["itl_ms"].to_numpy(dtype=float) if done is not None else np.array([])
        return Estimate(value, math.nan, math.nan,
                        quantile_se(values, 0.5) if n else math.nan, math.inf, n, "requests")
    lo, hi = (float(step.get(f"frontend_ttft_p{q}_ms", math.nan)) for q in (40, 60))
    se = _SPAN_SE * (hi - lo) / math.sqrt(n) if n and not math.isnan(hi - lo) else math.nan
    return Estimate(value, math.nan, math.nan, se, math.inf, n,
                    "the frontend's request trace" if not math.isnan(se)
                    else "no frontend TTFT p40 / p60 (no request trace)")


def _simulated(rec: Mapping, figure: str) -> Estimate:
    """The record's figure as simulated_vs_measured.py compares it, with its standard error."""
    column = svm.SIMULATED_COLUMN[figure]
    value, se = rec.get(column), rec.get(column.replace("_ms", "_se_ms"))
    if value is None:
        value, se = rec.get(figure), rec.get(figure.replace("_ms", "_se_ms"))
    return Estimate(math.nan if value is None else float(value), math.nan, math.nan,
                    math.nan if se is None else float(se), math.inf, 0,
                    "the simulation record keeps no standard error (made before them)")


def record_vs_measured(steps: pd.DataFrame, by_step: ByStep,
                       simulations: Mapping[tuple[str, str], dict | None],
                       infos: dict[str, StackInfo]) -> list[dict]:
    """Each usable measured step against its run's simulation record: TTFT and ITL p50 as
    reports/comparisons/simulated_vs_measured.py compares them, measured - simulated with a normal
    interval from both standard errors (the record's: workloads/sim/plan_sim.py; a record made
    before them is not judged)."""
    out = []
    usable = steps[steps["usable"].astype(bool)] if "usable" in steps else steps
    for _, st in usable.iterrows():
        rec = step_figures(simulations.get((str(st["stack"]), str(st["run_id"]))),
                           str(st["step"]))
        if not rec:
            continue
        for fig in ("ttft_p50_ms", "itl_p50_ms"):
            sim, meas = _simulated(rec, fig), _measured(st, by_step, fig)
            out.append(row(Q_SIMULATION, f"{st['stack']} (simulated)",
                           f"{st['stack']} (measured)", str(st["step"]), FIGURES[fig],
                           sim.value, meas.value, estimate_difference(sim, meas),
                           stands_on(infos, [str(st["stack"])])))
    return out


# --- simulated vs measured (for the caller holding both runs) -----------------------------

def simulated_vs_measured(simulated_steps: pd.DataFrame, simulated_requests: pd.DataFrame,
                          measured_steps: pd.DataFrame, measured_requests: pd.DataFrame,
                          stands: str, figures: tuple[str, ...] = ("ttft_p50_ms",
                                                                    "itl_p50_ms",
                                                                    "output_tok_s")
                          ) -> list[dict]:
    """Comparison rows (Q_SIMULATION: reference the simulation, subject the measurement) per
    step group both ran usably, matched by stack and step id without its repeat; pass them to
    reports.comparisons.verdicts.judge (alone or with the report's other rows) for their
    verdicts."""
    sim_requests = completed_by_step(simulated_requests)
    measured = completed_by_step(measured_requests)
    out = []
    def groups(frame: pd.DataFrame, stack: str) -> dict:
        s = frame[(frame["stack"] == stack)]
        s = s[s["usable"].astype(bool)] if "usable" in s else s
        return {k: g for k, g in s.groupby("group")}
    for stack in sorted(set(simulated_steps["stack"]) & set(measured_steps["stack"])):
        sim, meas = groups(simulated_steps, stack), groups(measured_steps, stack)
        for group in sorted(set(sim) & set(meas)):
            for fig in figures:
                rv, sv, d = compare_groups(sim[group], meas[group], sim_requests, fig,
                                           measured)
                out.append(row(Q_SIMULATION, f"{stack} (simulated)", f"{stack} (measured)",
                               group, FIGURES[fig], rv, sv, d, stands))
    return out


def paired_by_step(table: pd.DataFrame, figure: str) -> dict[str, object]:
    """Across the steps of judged rows of one figure, the mean relative difference (subject /
    reference - 1) with its t-interval over the steps (paired by step: each step is its own
    reference), e.g. how far a simulation sits from the measurement over a whole plan."""
    rows = table[table["figure"] == figure]
    est = mean_interval(rows["relative_difference"].to_numpy(dtype=float))
    return {"figure": figure, "steps": est.n, "mean_relative_difference": est.value,
            "ci_low": est.low, "ci_high": est.high}
