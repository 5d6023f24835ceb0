"""report.md: tables, plots, cost scope, hypotheses, fidelity and the run records used."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from reports.goodput import Slo
from reports.hypotheses import Hypothesis
from reports.runs import RunRecord
from reports.sla import RECIPE_SLA
from reports.stackinfo import StackInfo
from workloads.attest_checks import summary_line


def _cell(v: object) -> str:
    if v is None or v is pd.NA:
        return "n/a"
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(df: pd.DataFrame, columns: list[str] | None = None) -> str:
    if df.empty:
        return "_not measured: no step of this kind in the runs_\n"
    cols = [c for c in (columns or list(df.columns)) if c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |"
              for row in df[cols].itertuples(index=False)]
    return "\n".join(lines) + "\n"


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
                     "config sha256": r.config_hash[:16], "started": r.started_at or "?",
                     "ended": r.ended_at or "?", "dynamo-bench": str(commit)[:12],
                     "AIPerf": v.get("aiperf", "?"), "Dynamo": v.get("dynamo", "?"),
                     "Python": v.get("python", "?"), "datasets (sha256)": ds,
                     # the deployment checked against the stack before any load
                     "attestation": summary_line(r.extra.get("attestations")),
                     "folder": str(r.path)})
    return md_table(pd.DataFrame(rows))


SECTIONS = [
    ("concurrency_sweep", "Concurrency sweep",
     "AIPerf's own percentiles per step; repeats folded into mean with min/max; "
     "output_tok_s is the aggregate, output_tok_s_per_user_p50 the per-request speed."),
    ("compare_concurrency", "Aggregated vs disaggregated, per concurrency", ""),
    ("multi_turn", "Multi-turn", "TTFT per turn pooled over conversations (and repeats); "
     "server hit rate only for the whole step (turns overlap in time)."),
    ("sequence_distribution", "Sequence distributions",
     "Requested lengths from the dataset, actual ones as the server counted them."),
    ("prefix_cache", "Prefix cache", "prefix_share is what the dataset asked; server_hit_rate "
     "is what the frontend measured (cached / prompt tokens). They are not the same thing."),
    ("compare_prefix_cache", "Prefix share, aggregated vs disaggregated", ""),
    ("goodput", "Goodput under SLO", ""),
    ("sla", "SLA: output tok/s per GPU at the best point (trace workload)",
     f"A step meets the SLA ({RECIPE_SLA.definition}) on its p50 TTFT and the "
     "per-user speed its row names (the definition the model's published figure used); "
     "best_point marks, per stack and cache state, the SLA step with the most tok/s per GPU. "
     "Cold steps start on restarted workers (empty KV caches), warm ones replay the same "
     "prompts on the kept caches. excluded/clipped: trace rows dropped or shortened for "
     "exceeding maxModelLen, never sent. nominal_reuse is what the trace was shaped to, "
     "trace_block_reuse what its rows carry, measured_kv_reuse what the server hit (cached / "
     "prompt tokens). Rows marked 'published figure, not a measurement' are the sources' own "
     "numbers, for reading a run against them (full columns in sla.csv)."),
    ("compare_sla_baseline", "Optimized / baseline tok/s per GPU at the SLA",
     "Each recipe stack's best SLA point over its model's baseline stack (tags.extra.recipe), "
     "per cache state, beside the ratio the sources published."),
    ("compare_sla_topology", "Aggregated vs disaggregated tok/s per GPU at the SLA",
     "Best SLA points of the same model's aggregated and disaggregated recipe stacks with the "
     "GPUs behind each, and the published figures with theirs."),
    ("cost_efficiency", "Cost efficiency", ""),
    ("fidelity", "Harness fidelity", "ratio = client mean / server (frontend) mean; a ratio far "
     "above 1 or a saturated client means the harness distorted the figure."),
]

# Tables too wide for report.md show these columns; their CSV keeps every column.
MD_COLUMNS = {"sla": ["row_kind", "stack", "step", "cache", "gpus", "concurrency",
                      "excluded_over_context", "clipped_over_context", "ttft_p50_ms",
                      "user_speed_definition", "user_tok_s", "output_tok_s_per_gpu",
                      "meets_sla", "best_point", "nominal_reuse", "trace_block_reuse",
                      "measured_kv_reuse", "speculative_acceptance", "source"]}

PLOTS = {"concurrency_sweep": ["latency_vs_concurrency", "pareto"],
         "multi_turn": ["ttft_per_turn"], "prefix_cache": ["prefix_share"],
         "sequence_distribution": ["length_distributions"]}


def render(name: str, tables: dict[str, pd.DataFrame], plots: dict[str, Path | None],
           hypotheses: list[Hypothesis], records: list[RunRecord],
           infos: dict[str, StackInfo], slos: tuple[Slo, ...]) -> str:
    out = [f"# dynamo-bench report: {name}\n",
           "Every figure below comes from the run records listed at the end; CSVs with the "
           "same tables sit beside this file.\n", "## Stacks\n",
           md_table(pd.DataFrame([{"stack": i.name, "target": i.target,
                                   "topology": i.topology, "router": i.router,
                                   "workers": i.workers, "GPUs": i.gpus,
                                   "instance types": i.gpu_types} for i in infos.values()])),
           "## SLOs\n"]
    out += [f"- `{s.name}`: {s.definition} (a step meets it on its p50s)\n" for s in slos]
    for key, title, note in SECTIONS:
        table = tables.get(key)
        if table is None:
            continue
        out.append(f"\n## {title}\n")
        if note:
            out.append(f"{note}\n\n")
        if key == "cost_efficiency" and not table.empty:
            out.append(_cost_note(table))
        out.append(md_table(table.drop(columns=[c for c in ("cost_scope", "period")
                                                if c in table.columns]), MD_COLUMNS.get(key)))
        for p in PLOTS.get(key, []):
            out.append("\n" + _img(plots.get(p), p.replace("_", " ")))
    out.append("\n## Hypotheses\n")
    for h in hypotheses:
        out.append(f"\n### {h.title}\n{h.question}\n\n")
        out += [f"- {f}\n" for f in h.findings]
    out += ["\n## Run records used\n", _records(records, infos)]
    return "".join(out)


def _cost_note(cost: pd.DataFrame) -> str:
    lines = ["$/1M output tokens = period cost / successful output tokens x 1e6.\n\n"]
    for stack, c in cost.groupby("stack"):
        lines.append(f"- `{stack}`: basis: {c['cost_basis'].iloc[0]}; scope: "
                     f"{c['cost_scope'].iloc[0]}; period: each step's AIPerf profiling window "
                     "(first request start to last request end; `period` in the CSV)\n")
    return "".join(lines) + "\n"
