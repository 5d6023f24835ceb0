"""Runs -> tables -> files: CSVs, PNGs and report.md in reports/out/<name>/ (the I/O shell)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from reports.comparisons import compare, predicted_vs_measured, simulated_vs_measured, verdicts
from reports.comparisons.ablation import ablation_check
from reports.comparisons.comparisons import all_comparisons
from reports.comparisons.hypotheses import all_hypotheses
from reports.records.flags import judge_steps
from reports.records.routing import routing_table
from reports.records.runs import STEP_KEY, RunFrames, RunRecord, load_run
from reports.records.stackinfo import StackInfo, runs_timing, stack_info, timing_words
from reports.render import explore_section, html, markdown, plots, summary
from reports.render.trace_plot import trace_timeline
from reports.tables import intervals, sim_likely, tables, tables_requests
from reports.tables.cost_efficiency import cost_efficiency
from reports.tables.goodput import DEFAULT_SLOS, Slo, goodput
from reports.tables.sla import sla_table
from reports.tables.trace_report import trace_replay_table
from workloads.attest.checks import first_data_floor
from workloads.targets.mocker_timings import TimingWords


@dataclass
class Report:
    name: str
    out_dir: Path
    tables: dict[str, pd.DataFrame]
    plots: dict[str, Path | None]
    steps: pd.DataFrame
    requests: pd.DataFrame


def combine(runs: list[RunFrames]) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, StackInfo],
                                            dict[tuple[str, str], RunRecord]]:
    """One steps/requests frame over all runs, with each stack's GPUs and per-GPU output, each
    step judged (reports.records.flags) and each request carrying its step's `usable` /
    `step_flag`."""
    infos: dict[str, StackInfo] = {}
    records: dict[tuple[str, str], RunRecord] = {}
    timings: dict[str, dict[str, TimingWords]] = {}
    for r in runs:
        info = infos.setdefault(r.record.stack, stack_info(r.record))
        records[(r.record.stack, r.record.run_id)] = r.record
        timings.setdefault(info.name, {})[r.record.run_id] = timing_words(r.record.extra,
                                                                          info.target)
    # what each stack's figures stand on, over all its runs (stackinfo.runs_timing)
    infos = {s: replace(i, timings=runs_timing(timings[i.name])) for s, i in infos.items()}
    steps = pd.concat([r.steps for r in runs if not r.steps.empty], ignore_index=True)
    requests = pd.concat([r.requests for r in runs], ignore_index=True)
    steps = judge_steps(steps, {s: i.error_rate_threshold for s, i in infos.items()},
                        frozenset(s for s, i in infos.items() if i.topology == "disaggregated"))
    steps["gpus"] = steps["stack"].map(lambda s: infos[s].gpus)
    steps["output_tok_s_per_gpu"] = steps["output_tok_s"] / steps["gpus"].where(
        steps["gpus"] > 0)
    requests = requests.merge(steps[STEP_KEY + ["usable", "step_flag"]], on=STEP_KEY,
                              how="left")
    return steps, requests, infos, records


def latest_configs(records: dict[tuple[str, str], RunRecord]) -> dict[str, dict]:
    """Each stack's recorded config and the scale it ran at (its last run's, as listed), for
    the ablation pairs: runs at different scales are not compared."""
    return {stack: {**rec.config, "scale": rec.extra.get("scale")}
            for (stack, _), rec in records.items() if rec.config}


def with_intervals(sweep: pd.DataFrame, pc: pd.DataFrame, steps: pd.DataFrame,
                   requests: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sweep and prefix-cache tables with the 95 % interval of each figure they print
    (reports.tables.intervals)."""
    sweep = intervals.add_intervals(
        sweep, steps[steps["workload"] == "concurrency_sweep"], requests,
        ["stack", "concurrency"], [*intervals.QUANTILE_FIGURES, *intervals.REPEAT_FIGURES])
    s = steps[steps["workload"] == "prefix_cache"]
    pc = intervals.add_intervals(pc, s.assign(prefix_share=s["variant"].map(tables.share_of)),
                                 requests, ["stack", "prefix_share"],
                                 ["ttft_p50_ms", "ttft_p99_ms"])
    return sweep, pc


def side_by_side(out: dict[str, pd.DataFrame], infos: dict[str, StackInfo]) -> None:
    """The compare tables (`compare`), each comparison with its interval and verdict."""
    judged = out["comparisons"]
    side = compare.concurrency_side_by_side(out["concurrency_sweep"], infos)
    for fig, col in (("ttft_p50_ms", "ttft_p50_delta_ms"), ("itl_p50_ms", "itl_p50_delta_ms"),
                     ("output_tok_s", "tps_delta")):
        side = verdicts.attach(side, judged, verdicts.Q_TOPOLOGY, fig, col,
                               lambda r: f"c{int(r['concurrency'])}")
    out["compare_concurrency"] = side
    out["compare_prefix_cache"] = verdicts.attach(
        compare.prefix_side_by_side(out["prefix_cache"], infos), judged, verdicts.Q_PREFIX,
        "ttft_p50_ms", "ttft_p50_delta_ms", lambda r: f"share {r['prefix_share']:.0%}")
    out["compare_sla_baseline"] = compare.sla_baseline_ratio(out["sla"], infos)
    out["compare_sla_topology"] = compare.sla_topology_side_by_side(out["sla"], infos)


def compute_tables(steps: pd.DataFrame, requests: pd.DataFrame, infos: dict[str, StackInfo],
                   records: dict[tuple[str, str], RunRecord], slos: tuple[Slo, ...],
                   with_compare: bool, user_speed: str | None = None
                   ) -> dict[str, pd.DataFrame]:
    sweep, pc = with_intervals(tables.concurrency_sweep(steps), tables.prefix_cache(steps),
                               steps, requests)
    # each SIMULATED sweep figure with its error band (AIConfigurator's own measured rows), before
    # the comparisons: between simulated candidates the bands decide what the model resolves
    sweep = sim_likely.add_likely(sweep, requests, {
        stack: rec.extra.get("target_info") or {} for (stack, _), rec in records.items()
        if simulated_vs_measured.is_simulated_run(rec.extra)})
    # each trace step's TTFT and ITL p50 with its interval (a published row has none)
    sla = intervals.add_intervals(sla_table(steps, requests, infos, user_speed=user_speed),
                                  steps, requests, ["stack", "run_id", "step"],
                                  ["ttft_p50_ms", "itl_p50_ms"])
    configs = latest_configs(records)
    out = {
        "concurrency_sweep": sweep,
        "multi_turn": tables_requests.multi_turn(steps, requests),
        "sequence_distribution": tables_requests.sequence_distribution(requests),
        "prefix_cache": pc,
        "goodput": intervals.goodput_intervals(goodput(steps, requests, slos)),
        "sla": sla,
        "trace_replay": trace_replay_table(steps, requests, records),
        "cost_efficiency": cost_efficiency(steps, infos, records),
        "fidelity": tables.fidelity(steps, {
            key: first_data_floor(rec.extra.get("attestations")) for key, rec in records.items()}),
        "reconciliation": tables.reconciliation(steps),
        "ablation": ablation_check(steps, configs),
    }
    # every comparison as one family (Holm), then the router rows judged with it
    out["comparisons"] = all_comparisons(out, steps, requests, infos, {
        key: rec.extra.get("simulation") for key, rec in records.items()
        if not simulated_vs_measured.is_simulated_run(rec.extra)})
    out["ablation"] = ablation_check(steps, configs,
                                     verdicts.adjusted(out["comparisons"], verdicts.Q_ROUTER))
    if with_compare:
        side_by_side(out, infos)
    return out


def make_plots(t: dict[str, pd.DataFrame], requests: pd.DataFrame, slo: Slo,
               out_dir: Path, infos: dict[str, StackInfo],
               records: dict[tuple[str, str], RunRecord]) -> dict[str, Path | None]:
    tag = plots.rehearsal_tag(infos)
    return {
        "trace_replay_timeline": trace_timeline(t["trace_replay"], requests, records,
                                                out_dir / "trace_replay_timeline.png", tag),
        "pareto": plots.pareto(t["concurrency_sweep"], slo, out_dir / "pareto.png", tag),
        "latency_vs_concurrency": plots.latency_vs_concurrency(
            t["concurrency_sweep"], out_dir / "latency_vs_concurrency.png", tag),
        "throughput_vs_concurrency": plots.throughput_vs_concurrency(
            t["concurrency_sweep"], out_dir / "throughput_vs_concurrency.png", tag),
        "ttft_per_turn": plots.ttft_per_turn(t["multi_turn"], out_dir / "ttft_per_turn.png",
                                             tag),
        "prefix_share": plots.prefix_share(t["prefix_cache"], out_dir / "prefix_share.png",
                                           tag),
        "length_distributions": plots.length_distributions(
            requests, out_dir / "length_distributions.png", tag),
    }


def default_name(runs: list[RunFrames], with_compare: bool) -> str:
    if len(runs) == 1:
        return f"{runs[0].record.stack}-{runs[0].record.run_id}"
    stacks = sorted({r.record.stack for r in runs})
    return ("compare-" if with_compare else "") + "-vs-".join(stacks)


def build_report(run_dirs: list[Path], out_root: Path, *, name: str | None = None,
                 slos: tuple[Slo, ...] = DEFAULT_SLOS, with_compare: bool = False,
                 use_cache: bool = True, user_speed: str | None = None,
                 explore: Path | None = None) -> Report:
    explored = explore_section.read(explore) if explore is not None else None
    runs = [load_run(d, use_cache=use_cache) for d in run_dirs]
    steps, requests, infos, records = combine(runs)
    t = compute_tables(steps, requests, infos, records, slos, with_compare, user_speed)
    t["routing"] = routing_table(pd.concat([r.workers for r in runs], ignore_index=True),
                                 steps)
    # measured beside simulated per step, from each measured run's own simulation (its
    # manifest); a simulated run is the simulation and is not compared with itself
    measured = [r for r in runs if not simulated_vs_measured.is_simulated_run(r.record.extra)]
    t["simulated_vs_measured"] = simulated_vs_measured.table(
        steps, {(r.record.stack, r.record.run_id): r.record.extra.get("simulation")
                for r in measured}, requests,
        frozenset(s for s, i in infos.items() if i.rehearsal))
    # AIConfigurator's static estimate as the cross-check where it applies: the measured runs'
    # concurrency sweep, over the prediction each run kept
    kept = {(r.record.stack, r.record.run_id) for r in measured}
    sweep = steps[(steps["workload"] == "concurrency_sweep") & pd.Series(
        [k in kept for k in zip(steps["stack"], steps["run_id"], strict=True)],
        index=steps.index)]
    t["predicted_vs_measured"] = predicted_vs_measured.table(
        sweep, {r.record.stack: r.record.extra.get("predictions") or {} for r in measured},
        simulated={r.record.stack for r in measured
                   if predicted_vs_measured.on_table(r.record.extra)})
    name = name or default_name(runs, with_compare)
    out_dir = out_root / name
    out_dir.mkdir(parents=True, exist_ok=True)
    for key, table in t.items():
        table.to_csv(out_dir / f"{key}.csv", index=False)
    steps.to_csv(out_dir / "steps.csv", index=False)
    figs = make_plots(t, requests, slos[0], out_dir, infos, records)
    hyps = all_hypotheses(t, steps, infos)
    records_used = [r.record for r in runs]
    f = summary.facts(t, steps, records_used, infos, slos[0])
    extra = ""
    if explore is not None and explored is not None:
        explore_section.copy_into(explore, out_dir)
        extra = explore_section.section(*explored)
    (out_dir / "report.md").write_text(markdown.render(
        name, summary.render(f), t, figs, hyps, records_used, infos, slos, glance=f.glance,
        extra=extra))
    html.write_html(out_dir)   # index.html: the same report, self-contained, for a browser
    return Report(name, out_dir, t, figs, steps, requests)
