"""report.md: the summary first, then tables, plots, cost scope, hypotheses, fidelity, the
server/client reconciliation and the run records used.

Every table and section title that holds rehearsal figures says so; every table with a
`step_flag` ends with a note naming the steps left out of its best points and comparisons; a
latency percentile from fewer samples than it needs (p90 < 10, p99 < 100) is marked `*`."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from reports.comparisons import predicted_vs_measured as pvm
from reports.comparisons import simulated_vs_measured as svm
from reports.comparisons.ablation import ROUTED_WORKLOADS
from reports.comparisons.hypotheses import Hypothesis
from reports.comparisons.verdicts import family_note
from reports.records.flags import aiperf_provenance, left_out
from reports.records.measures import NEEDED_SAMPLES, too_few
from reports.records.runs import RunRecord
from reports.records.stackinfo import StackInfo, rehearsal_timings, unmeasured_word
from reports.render import first_screen
from reports.render.md_columns import short_columns, with_display_columns
from reports.tables.goodput import Slo
from reports.tables.sla import RECIPE_SLA
from reports.tables.tables import GAP_MATERIAL_MS, GAP_MATERIAL_SHARE
from reports.tables.trace_report import MD_COLUMNS as TRACE_MD_COLUMNS
from workloads.attest.checks import summary_line

_LATENCY_PCT = re.compile(r"^(ttft|itl|request_latency|conversation_latency|tok_s_per_user|"
                          r"output_tok_s_per_user|long_ttft)_p(\d+)(_ms)?$")
SMALL_SAMPLE_NOTE = ("`*`: a percentile from fewer samples than it needs ("
                     + ", ".join(f"p{q} < {n}" for q, n in NEEDED_SAMPLES.items())
                     + "); the samples behind each row are in `percentile_samples`.\n")


def _cell(v: object) -> str:
    if v is None or v is pd.NA:
        return "n/a"
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def _samples(df: pd.DataFrame, col: str) -> pd.Series | None:
    if col.startswith("conversation_latency") and "conversations" in df:
        return df["conversations"]
    if col.startswith("long_") and "long_requests" in df:
        return df["long_requests"]
    for name in ("percentile_samples", "completed"):
        if name in df:
            return df[name]
    return None


def mark_small_samples(df: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """Latency percentile cells from too few samples as text with `*`; (frame, any marked)."""
    out, marked = df.copy(), False
    for col in df.columns:
        m = _LATENCY_PCT.match(col)
        n = _samples(df, col) if m else None
        if m is None or n is None or int(m.group(2)) not in NEEDED_SAMPLES:
            continue
        small = [too_few(v, int(m.group(2))) and not pd.isna(x)
                 for v, x in zip(n, df[col], strict=True)]
        if any(small):
            marked = True
            out[col] = [_cell(x) + ("*" if f else "") for x, f in zip(df[col], small,
                                                                        strict=True)]
    return out, marked


def md_table(df: pd.DataFrame, columns: list[str] | None = None) -> str:
    if df.empty:
        return "_not measured: no step of this kind in the runs_\n"
    df, marked = mark_small_samples(df)
    cols = [c for c in (columns or list(df.columns)) if c in df.columns and c != "usable"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |"
              for row in df[cols].itertuples(index=False)]
    return "\n".join(lines) + "\n" + ("\n" + SMALL_SAMPLE_NOTE if marked else "")


def _img(path: Path | None, alt: str) -> str:
    return f"![{alt}]({path.name})\n" if path else f"_{alt}: not measured_\n"


def _sha(entry: object) -> str:
    """A dataset entry is {path, sha256} (keyed by step) or the bare digest (keyed by path)."""
    return str(entry.get("sha256") if isinstance(entry, dict) else entry)


def _records(records: list[RunRecord], infos: dict[str, StackInfo]) -> str:
    rows = []
    for r in records:
        v = r.versions
        commit = v.get("dynamo_bench")
        commit = commit.get("commit") if isinstance(commit, dict) else commit
        ds = ", ".join(f"{Path(str(k)).name}={_sha(val)[:12]}" for k, val in r.datasets.items()
                       ) or "synthetic only (AIPerf seeds)"
        rows.append({"stack": r.stack, "run id": r.run_id, "layout": infos[r.stack].workers,
                     "config sha256": r.config_hash[:16],
                     "window": f"{r.started_at or '?'} to {r.ended_at or '?'}",
                     "versions": f"dynamo-bench {str(commit)[:12]}, "
                                 + ("no client (DynoSim replayed every step), "
                                    if infos[r.stack].simulated else
                                    f"{aiperf_provenance(v.get('aiperf', '?'), r.steps)}, ") +
                                 f"Dynamo {v.get('dynamo', '?')}, "
                                 f"Python {v.get('python', '?')}",
                     "datasets (sha256)": ds,
                     # the deployment checked against the stack before any load
                     "attestation": summary_line(r.extra.get("attestations")),
                     "folder": str(r.path)})
    return md_table(pd.DataFrame(rows))


# Issue 39's rule, "where no row is near, say so instead of inventing a band": AIConfigurator's
# measured rows (stacks/predict/bands.py) are fixed-shape runs of unique prompts.
NO_BAND = ("A SIMULATED figure here has no error band: AIConfigurator's measured rows, which "
           "give the concurrency sweep's, are fixed-shape runs of unique prompts, with no "
           "prefix reuse, think time or length mix near this workload.")

SECTIONS = [
    ("concurrency_sweep", "Concurrency sweep",
     "Per step: attempted requests and their outcome classes (completed, failed = AIPerf "
     "error, truncated = the stream ended short of a whole answer, cancelled = cut by the "
     "step's own end, not an error and out of the error rate); latency percentiles, output "
     "tok/s and per-user speed from completed requests only, throughput "
     "over the step's measurement window (first request start to last request end). Repeats "
     "folded into the mean with min/max. aiperf_* columns are AIPerf's own figures, which "
     "count truncated streams as successes. A SIMULATED TTFT or ITL p50 carries \"true likely "
     "lo-hi\": how far AIConfigurator's timing tables are off at that shape, from its own "
     "measured rows (stacks/predict/bands.py; the rows in concurrency_sweep.csv "
     "*_likely_source); a measured or rehearsed figure has none."),
    ("compare_concurrency", "Aggregated vs disaggregated, per concurrency", ""),
    ("multi_turn", "Multi-turn", "TTFT per turn pooled over conversations (and repeats), "
     "completed requests only; usage_hit_rate is cached / prompt tokens as the server "
     "reported them in each response's usage block (per turn); server_hit_rate is the "
     "frontend's for the whole step (turns overlap in time). A conversation counts when all "
     "its turns completed. Where the turns went, from the frontend's own request records: "
     "same_worker_share is the share of follow-up turns whose prompt went to the worker that "
     "processed the conversation's previous turn (what a KV router raises), "
     "chance_same_worker what placing turns at random would give (1 / workers), "
     "requests_per_worker the prompts each worker processed. " + NO_BAND),
    ("sequence_distribution", "Sequence distributions",
     "Requested lengths from the dataset, actual ones as the server counted them (completed "
     "requests). " + NO_BAND),
    ("prefix_cache", "Prefix cache", "prefix_share is what the dataset asked; server_hit_rate "
     "is what the frontend measured (cached / prompt tokens). They are not the same thing. "
     + NO_BAND),
    ("compare_prefix_cache", "Prefix share, aggregated vs disaggregated", ""),
    ("goodput", "Goodput under SLO", "A request meets an SLO only when it completed; "
     "goodput_fraction is over attempted requests, goodput_req_s over the measurement "
     "window (the one throughput and cost use)."),
    ("sla", "SLA: output tok/s per GPU at the best point (trace workload)",
     f"A step meets the SLA ({RECIPE_SLA.definition}) on its p50 TTFT and the "
     "per-user speed its row names (the definition the model's published figure used); "
     "best_point marks, per stack and cache state, the SLA step with the most tok/s per GPU. "
     "Cold steps start on restarted workers (empty KV caches), warm ones replay the same "
     "prompts on the kept caches. excluded/clipped: trace rows dropped or shortened for "
     "exceeding maxModelLen, never sent. nominal_reuse is what the trace was shaped to, "
     "trace_block_reuse what its rows carry, measured_kv_reuse what the server hit (cached / "
     "prompt tokens). row_kind says what each row is: a measurement on a cluster, a "
     "rehearsal on the local mocker, a simulation by DynoSim, or a source's published figure "
     "(full columns in sla.csv)."),
    ("trace_replay", "Trace replay: reuse upper bound, measured hit rate, arrivals",
     "One row per replayed trace step (trace and sha256 in the run records). "
     "reuse_upper_bound_blocks: share of the sent rows' 512-token trace blocks whose id "
     "appeared in an earlier row (an infinite cache); reuse_upper_bound_tokens: prompt tokens "
     "in whole engine blocks of an already-seen prefix, the same bound in the server's units; "
     "measured_hit_rate: cached / prompt tokens from the Dynamo frontend; hit_rate_gap = bound "
     "- measured (eviction, routing, capacity). excluded/clipped: rows dropped or shortened for "
     "maxModelLen, never sent. Arrival rates in requests/s; in_flight time-weighted over the "
     "step; aiperf_replay_sched_lag: AIPerf's send lag behind the schedule (anchored at the "
     "least-late request; degraded = a p99 over 500 ms: the in-flight cap or the engine held "
     "the schedule back). Latencies from completed requests. Full columns in "
     "trace_replay.csv."),
    ("compare_sla_baseline", "Optimized / baseline tok/s per GPU at the SLA",
     "Each recipe stack's best SLA point over its model's baseline stack (tags.extra.recipe), "
     "per cache state, beside the ratio the sources published."),
    ("compare_sla_topology", "Aggregated vs disaggregated tok/s per GPU at the SLA",
     "Best SLA points of the same model's aggregated and disaggregated recipe stacks with the "
     "GPUs behind each, and the published figures with theirs."),
    ("routing", "Routing: where the multi-turn requests went",
     "From the Dynamo frontend's own per-request records (its request trace): per step and "
     "worker, the prompts it processed and the requests it decoded, its own count of requests "
     "(requests_counted, the worker's /metrics), prompt and cached tokens (hit_rate), and the "
     "follow-up turns it processed, with how many came back to it from the conversation's "
     "previous turn. Multi-turn and trace steps here; every step in routing.csv."),
    ("ablation", "Ablation check: does each one-setting change show where it should?",
     "Stacks whose recorded configs differ in one setting (router, topology, offload) are "
     "compared on the server signal that setting should move, over usable steps both ran. "
     "A router change counts when the hit-rate difference is significant with the report's "
     "other comparisons (its 95 % interval from the request trace's standard errors, Holm's "
     "adjustment: see Comparisons) and follow-up turns were placed differently; anything less "
     "is NO MEASURABLE DIFFERENCE with its likely cause, not a finding. A step flagged or "
     "failed on either side is NOT COMPARED: it gets no verdict."),
    ("comparisons", "Comparisons: every difference with its 95 % interval and verdict", ""),
    ("cost_efficiency", "Cost efficiency", ""),
    ("fidelity", "Harness fidelity", "ratio = client mean / server (frontend) mean; a ratio far "
     "above 1 or a client-bound step means the harness distorted the figure. ttft_gap_ms = "
     "client mean - frontend mean TTFT of the step: material above "
     f"{GAP_MATERIAL_MS:g} ms and {GAP_MATERIAL_SHARE:.0%} of the frontend's (the summary "
     "names those steps); stall_estimate_ms (fidelity.csv) is the part the attested "
     "first-data floor accounts for, max(0, floor - frontend TTFT). "
     "achieved_concurrency (mean requests in flight while the client was issuing, from the "
     "request timestamps) is the figure client_bound is judged on; "
     "aiperf_effective_concurrency is AIPerf's own, different definition, shown only for "
     "comparison."),
    ("reconciliation", "Server vs client output tokens",
     "Output tokens the Dynamo frontend counted over the profiling window against the usage "
     "counts the client received, and the frontend's requests (started, succeeded, failed, "
     "never finished) against the client's outcome classes. A stream cut before its usage "
     "block was counted by the frontend but not by the client: the gap is how truncation "
     "shows on the server side."),
]

# The wide selection of each table; report.md shows at most ten of them
# (reports/render/md_columns.py) and the CSV keeps every column.
_COUNTS = ["attempted", "completed", "failed", "truncated", "cancelled"]
MD_COLUMNS = {
    "concurrency_sweep": ["stack", "concurrency", "step_flag", *_COUNTS, "percentile_samples",
                          "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms",
                          "itl_p90_ms", "itl_p99_ms", "request_latency_p50_ms",
                          "request_latency_p90_ms", "request_latency_p99_ms", "output_tok_s",
                          "output_tok_s_per_user_p50", "output_tok_s_per_gpu",
                          "aiperf_output_tok_s", "aiperf_ttft_p50_ms", "repeats"],
    "multi_turn": ["stack", "turn", "step_flag", *_COUNTS, "percentile_samples", "ttft_p50_ms",
                   "ttft_p90_ms", "ttft_p99_ms", "usage_hit_rate", "server_hit_rate",
                   "same_worker_share", "chance_same_worker", "requests_per_worker",
                   "conversations", "conversation_latency_p50_ms",
                   "conversation_latency_p90_ms", "conversation_latency_p99_ms", "repeats"],
    "sequence_distribution": ["stack", "distribution", "step_flag", *_COUNTS,
                              "percentile_samples", "requested_isl_mean", "actual_isl_mean",
                              "requested_osl_mean", "actual_osl_mean", "ttft_p50_ms",
                              "ttft_p90_ms", "ttft_p99_ms", "tok_s_per_user_p50",
                              "ttft_p99_over_p50", "long_requests", "long_ttft_p50_ms",
                              "failures", "repeats"],
    "goodput": ["stack", "run_id", "step", "step_flag", "slo", *_COUNTS,
                "requests_meeting_slo", "goodput_fraction", "goodput_req_s", "step_meets_slo",
                "output_tok_s_per_gpu", "best_point"],
    "sla": ["row_kind", "stack", "step", "step_flag", "cache", "gpus", "concurrency",
            *_COUNTS, "excluded_over_context", "clipped_over_context", "ttft_p50_ms",
            "user_speed_definition", "user_tok_s", "output_tok_s_per_gpu", "meets_sla",
            "best_point", "nominal_reuse", "trace_block_reuse", "measured_kv_reuse",
            "speculative_acceptance", "source"],
    "trace_replay": TRACE_MD_COLUMNS,
    "routing": ["stack", "step", "step_flag", "worker", "prompts", "decodes",
                "requests_counted", "prompt_tokens", "cached_tokens", "hit_rate", "follow_ups",
                "same_worker_follow_ups", "same_worker_share", "server_hit_rate"],
    "ablation": ["setting", "baseline_stack", "changed_stack", "step", "signal", "baseline",
                 "changed", "delta", "verdict", "evidence", "likely_cause"],
    "reconciliation": ["stack", "run_id", "step", "step_flag", *_COUNTS,
                       "client_output_tokens", "server_output_tokens", "output_token_gap",
                       "truncated_chunks_received", "server_requests_started",
                       "server_requests_succeeded", "server_requests_failed",
                       "server_requests_unfinished", "gap_explanation"]}

# (the Pareto plot opens the report: reports/render/first_screen.py)
PLOTS = {"concurrency_sweep": ["throughput_vs_concurrency", "latency_vs_concurrency"],
         "trace_replay": ["trace_replay_timeline"],
         "multi_turn": ["ttft_per_turn"], "prefix_cache": ["prefix_share"],
         "sequence_distribution": ["length_distributions"]}
# Comparison tables are built from these tables' usable rows.
COMPARED_FROM = {"compare_concurrency": "concurrency_sweep",
                 "compare_prefix_cache": "prefix_cache"}
# What a flagged row of each table is left out of.
LEFT_OUT_OF = {"concurrency_sweep": "the folded means, Pareto front and comparisons",
               "multi_turn": "the pooled rows and hypotheses",
               "sequence_distribution": "the pooled rows and hypotheses",
               "prefix_cache": "the folded means, the 0 % baseline and comparisons",
               "goodput": "SLO verdicts and best points",
               "sla": "SLA verdicts and best points",
               "trace_replay": "the SLA verdicts and best points (sla.csv)",
               "cost_efficiency": "the cost headline and H4",
               "fidelity": "best points, Pareto fronts, SLA rows and hypotheses",
               "reconciliation": "best points, Pareto fronts, SLA rows and hypotheses",
               "routing": "the ablation check"}


def title_of(title: str, table: pd.DataFrame, infos: dict[str, StackInfo]) -> str:
    """The section title, labelled when the table holds rehearsal figures."""
    stacks = set(table["stack"]) if "stack" in table else set()
    for col in ("aggregated_stack", "disaggregated_stack", "optimized_stack",
                "baseline_stack", "changed_stack"):
        if col in table:
            stacks |= set(table[col])
    local = rehearsal_timings(infos, sorted(stacks))
    return f"{title} — {unmeasured_word(infos, sorted(stacks))} ({local})" if local else title


def _stacks(infos: dict[str, StackInfo]) -> str:
    """The Stacks table with short cells (what the timings are in their short words, a caveat
    as its first word), each long sentence in full below it."""
    caveats = any(x.caveat for x in infos.values())
    table = md_table(pd.DataFrame([{"stack": i.name, "target": i.target,
                                    "what the timings are": i.timing.short,
                                    "topology": i.topology, "router": i.router,
                                    "workers": i.workers, "GPUs": i.gpus,
                                    "instance types": i.gpu_types,
                                    **({"upstream caveat": i.caveat.split(":")[0] + " (below)"
                                        if i.caveat else "-"} if caveats else {})}
                                   for i in infos.values()]))
    below = [f"- `{i.name}`: {i.timing.label}" + (f"; {i.caveat}" if i.caveat else "") + "\n"
             for i in infos.values()]
    return table + ("\n" + "".join(below) if below else "")


def render(name: str, head: str, tables: dict[str, pd.DataFrame],
           plots: dict[str, Path | None], hypotheses: list[Hypothesis],
           records: list[RunRecord], infos: dict[str, StackInfo],
           slos: tuple[Slo, ...], glance: list[str] | None = None, extra: str = "") -> str:
    # the answers' title names each stack's timings only when they differ
    label = rehearsal_timings(infos, named=len({i.timing.short for i in infos.values()
                                                if i.rehearsal}) > 1)
    out = [f"# dynamo-bench report: {name}\n",
           first_screen.render(tables.get("comparisons"), plots.get("pareto"), glance or [],
                               f" — {unmeasured_word(infos)} ({label})" if label else ""),
           head,
           "\nEvery figure below comes from the run records listed at the end; CSVs with the "
           "same tables sit beside this file.\n", "## Stacks\n", _stacks(infos), "## SLOs\n"]
    out += [f"- `{s.name}`: {s.definition} (a step meets it on its p50s)\n" for s in slos]
    for key, title, note in SECTIONS:
        table = tables.get(key)
        if table is None:
            continue
        out.append(f"\n## {title_of(title, table, infos)}\n")
        if note:
            out.append(f"{note}\n\n")
        if key == "cost_efficiency" and not table.empty:
            out.append(_cost_note(table))
        if key == "comparisons":
            out.append(family_note(table) + "\n\n")
        if key == "routing" and "workload" in table:   # the rest is in routing.csv
            table = table[table["workload"].isin(ROUTED_WORKLOADS)]
        shown = short_columns(key, table, MD_COLUMNS.get(key))
        out.append(md_table(with_display_columns(table), shown) + _csv_link(key, table, shown))
        source = tables.get(COMPARED_FROM.get(key, key))
        note = left_out(source, LEFT_OUT_OF.get(key, "this comparison")) \
            if source is not None else ""
        if note:
            out.append(f"\n{note}\n")
        for p in PLOTS.get(key, []):
            out.append("\n" + _img(plots.get(p), p.replace("_", " ")))
    out.append(_simulated_vs_measured(tables.get("simulated_vs_measured"), records))
    out.append(_predicted_vs_measured(tables.get("predicted_vs_measured"), records, infos))
    rehearsal = rehearsal_timings(infos)
    out.append("\n## Hypotheses" + (f" — {unmeasured_word(infos)} figures ({rehearsal})"
                                     if rehearsal else "") + "\n")
    for h in hypotheses:
        out.append(f"\n### {h.title}\n{h.question}\n\n")
        out += [f"- {f}\n" for f in h.findings]
    out.append(extra)     # a section built outside the run records (the explore's)
    out += ["\n## Run records used\n", _records(records, infos)]
    return "".join(out)


def _simulated_vs_measured(compared: pd.DataFrame | None, records: list[RunRecord]) -> str:
    """Per measured step, measured beside SIMULATED (DynoSim, from the run's record), a ratio
    outside its band marked `!` with its cause; a simulated run is not compared with itself."""
    measured = [r for r in records if not svm.is_simulated_run(r.extra)]
    labels = sorted({svm.simulation_words(r.extra.get("simulation")) for r in measured})
    out = ["\n## Simulated vs measured — " + ("; ".join(labels) or "no measured run") + "\n"]
    if len(measured) < len(records):
        out.append("A simulated run is the simulation: it is not compared with itself.\n\n")
    if compared is None or compared.empty:
        return "".join(out + ["No measured step of these runs has a simulation.\n"])
    return "".join(out + [svm.band_note() + "\n\n", md_table(svm.display(compared))])


def _predicted_vs_measured(compared: pd.DataFrame | None, records: list[RunRecord],
                           infos: dict[str, StackInfo]) -> str:
    """Per concurrency-sweep step, measured / predicted (PREDICTED by AIConfigurator's static
    estimate, from the run's record: the cross-check where it applies), a ratio outside its
    band marked `!`, and the known causes of each larger TTFT gap."""
    out = ["\n## AIConfigurator cross-check: predicted vs measured (concurrency sweep)\n"]
    if compared is None or compared.empty:
        measured = [r for r in records if not svm.is_simulated_run(r.extra)]
        why = sorted({str((r.extra.get("predictions") or {}).get("not_predicted"))
                      for r in measured
                      if (r.extra.get("predictions") or {}).get("not_predicted")})
        return "".join(out + ["No measured sweep step of these runs has a prediction" + (
            f" ({'; '.join(why)})" if why else " (their records predate predictions)"
            if measured else " (a simulated run: `stacks predict` shows AIConfigurator's "
            "estimate beside the simulation)") + ".\n"])
    rows = []
    for _, r in compared.iterrows():
        row = {"stack": r["stack"], "step": r["step"]}
        for col in pvm.BANDS:
            ratio, ok = r[f"{col}_ratio"], r[f"{col}_in_band"]
            name = col.removesuffix("_ms")
            row[f"{name} measured"] = r[f"{col}_measured"] if col not in pvm.LIKELY_FIELD \
                else _predicted_cell(r[f"{col}_measured"], pvm.likely_words(r, col, 2, True))
            row[f"{name} PREDICTED"] = r[f"{col}_predicted"] if col not in pvm.LIKELY_FIELD \
                else _predicted_cell(r[f"{col}_predicted"], pvm.likely_words(r, col, 2))
            row[f"{name} ratio"] = "n/a" if ratio is None or pd.isna(ratio) else \
                f"{ratio:.2f}" + ("" if ok else " !")
        rows.append(row)
    out += [pvm.band_note() + "\n\n", md_table(pd.DataFrame(rows))]
    stalls = {r.stack: pvm.first_data_stall_ms(r.extra) for r in records}
    on_table = {r.stack for r in records if pvm.on_table(r.extra)}
    labels = {name: info.timing.label for name, info in infos.items()}
    out += [f"\n- {c}\n" for c in pvm.ttft_causes(compared, stalls, on_table, labels)]
    return "".join(out)


def _predicted_cell(value: object, likely: str) -> object:
    """A predicted (or SIMULATED) figure, with its likely range where it has one."""
    if not likely or not isinstance(value, (int, float)) or pd.isna(value):
        return value
    return f"{value:,.2f}{likely}"


def _csv_link(key: str, table: pd.DataFrame, shown: list[str]) -> str:
    if table.empty or len(table.columns) <= len(shown):
        return ""
    return f"\nAll {len(table.columns)} columns: [{key}.csv]({key}.csv)\n"


def _cost_note(cost: pd.DataFrame) -> str:
    lines = ["$/1M output tokens = period cost / output tokens of completed requests x 1e6.\n\n"]
    for stack, c in cost.groupby("stack"):
        lines.append(f"- `{stack}`: basis: {c['cost_basis'].iloc[0]}; scope: "
                     f"{c['cost_scope'].iloc[0]}; period: each step's measurement window "
                     "(first request start to last request end, the window of its "
                     "throughput; `period` in the CSV)\n")
    return "".join(lines) + "\n"
