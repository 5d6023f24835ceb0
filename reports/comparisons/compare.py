"""Side-by-side tables of aggregated vs disaggregated stacks (the plan's comparison tables).

Every aggregated stack is paired with every disaggregated one among the runs compared; a pair
contributes the rows (concurrencies, prefix shares) both stacks measured. For the B200 recipes
(sla.csv) stacks pair by model: each optimized recipe stack with its model's baseline stack
(`tags.extra.recipe`), and aggregated with disaggregated, each at its best SLA point and never
across cold and warm caches.
"""

from __future__ import annotations

import math
from itertools import product
from typing import cast

import pandas as pd

from reports.records.measures import COUNT_COLUMNS
from reports.records.stackinfo import StackInfo
from reports.tables.published import published_figure
from reports.tables.sla import best_points

# Each side's requests by outcome class, as in every table.
COUNTS = {c: c for c in COUNT_COLUMNS}


def source_kind(info: StackInfo) -> str:
    """What a stack's figures stand on, as a comparison must match it: DynoSim's virtual time,
    the local engine's real time, or a cluster."""
    return "simulated" if info.simulated else "rehearsal" if info.target == "local" else \
        "measured"


def like_with_like(a: StackInfo, b: StackInfo) -> bool:
    """Whether an aggregated and a disaggregated stack answer "does disaggregation help on the
    same GPUs": their figures stand on the same kind of source (a simulated stack against a
    rehearsed or measured one is the simulated-vs-measured table's question, not this one),
    their workers run on the same GPU types (a decode tier on another GPU is its own question)
    and route alike (the router is the ablation's)."""
    return (source_kind(a) == source_kind(b) and a.gpu_types == b.gpu_types
            and a.router == b.router)


def topology_pairs(infos: dict[str, StackInfo]) -> list[tuple[str, str]]:
    agg = sorted(s for s, i in infos.items() if i.topology == "aggregated")
    dis = sorted(s for s, i in infos.items() if i.topology == "disaggregated")
    return [(a, d) for a, d in product(agg, dis) if like_with_like(infos[a], infos[d])]


def _side_by_side(table: pd.DataFrame, key: str, cols: dict[str, str],
                  pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """Usable rows only: a failed, interrupted or client-bound step is never compared (the
    report names what was left out)."""
    if "usable" in table:
        table = table[table["usable"].astype(bool)]
    frames = []
    for agg, dis in pairs:
        a = table[table["stack"] == agg].set_index(key)
        d = table[table["stack"] == dis].set_index(key)
        common = sorted(set(a.index) & set(d.index))
        if not common:
            continue
        f = pd.DataFrame({key: common, "aggregated_stack": agg, "disaggregated_stack": dis})
        for col, name in cols.items():
            f[f"aggregated_{name}"] = a.loc[common, col].to_numpy()
            f[f"disaggregated_{name}"] = d.loc[common, col].to_numpy()
        frames.append(f)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def concurrency_side_by_side(sweep: pd.DataFrame, infos: dict[str, StackInfo]) -> pd.DataFrame:
    """concurrency, aggregated/disaggregated TTFT and ITL p50 and TPS (aggregate output
    tok/s); the differences' intervals and verdicts join in reports.build
    (reports.comparisons.verdicts)."""
    out = _side_by_side(sweep, "concurrency",
                        {"ttft_p50_ms": "ttft_p50_ms", "itl_p50_ms": "itl_p50_ms",
                         "output_tok_s": "tps", "repeats": "repeats", **COUNTS},
                        topology_pairs(infos))
    if not out.empty:
        out["ttft_p50_delta_ms"] = out["disaggregated_ttft_p50_ms"] - \
            out["aggregated_ttft_p50_ms"]
    return out


def prefix_side_by_side(pc: pd.DataFrame, infos: dict[str, StackInfo]) -> pd.DataFrame:
    """share, aggregated/disaggregated TTFT p50 and hit rate, and disagg's TTFT improvement."""
    out = _side_by_side(pc, "prefix_share",
                        {"ttft_p50_ms": "ttft_p50_ms", "server_hit_rate": "server_hit_rate",
                         **COUNTS}, topology_pairs(infos))
    if not out.empty:
        out["improvement_pct"] = (out["aggregated_ttft_p50_ms"]
                                  - out["disaggregated_ttft_p50_ms"]) \
            / out["aggregated_ttft_p50_ms"] * 100
    return out


# --- the B200 recipes: ratios of SLA best points (from sla.csv) -----------------------------

def _published_ratio(model: str, kind: str) -> float:
    opt, base = published_figure(model, kind), published_figure(model, "baseline")
    return opt.tok_s_per_gpu / base.tok_s_per_gpu if opt and base else math.nan


BASELINE_RATIO_COLUMNS = ["model", "cache", "optimized_stack", "optimized_topology",
                          "optimized_gpus", "optimized_tok_s_per_gpu", "baseline_stack",
                          "baseline_gpus", "baseline_tok_s_per_gpu", "ratio", "published_ratio",
                          "note"]
TOPOLOGY_COLUMNS = ["model", "cache", "aggregated_stack", "aggregated_gpus",
                    "aggregated_concurrency", "aggregated_tok_s_per_gpu", "disaggregated_stack",
                    "disaggregated_gpus", "disaggregated_concurrency",
                    "disaggregated_tok_s_per_gpu", "disaggregated_over_aggregated",
                    "published_aggregated", "published_aggregated_gpus",
                    "published_disaggregated", "published_disaggregated_gpus"]


def sla_baseline_ratio(sla: pd.DataFrame, infos: dict[str, StackInfo]) -> pd.DataFrame:
    """Per model and cache state: each optimized recipe stack's best SLA tok/s/GPU over its
    baseline stack's (same checkpoint), beside the ratio the sources published."""
    best = best_points(sla).set_index(["stack", "cache"])
    rows = []
    for model in sorted({i.model for i in infos.values()}):
        base = sorted(s for s, i in infos.items() if i.model == model and i.recipe == "baseline")
        opt = sorted(s for s, i in infos.items() if i.model == model and i.recipe == "optimized")
        for (o, b), cache in product(product(opt, base), ("cold", "warm")):
            have = [(s, cache) in best.index for s in (o, b)]
            if not any(have):
                continue
            # pandas-stubs types a .loc cell as any Scalar; this column holds floats (sla.csv)
            o_tps = cast(float, best.loc[(o, cache), "output_tok_s_per_gpu"]) if have[0] \
                else math.nan
            b_tps = cast(float, best.loc[(b, cache), "output_tok_s_per_gpu"]) if have[1] \
                else math.nan
            missing = [s for s, h in zip((o, b), have, strict=True) if not h]
            rows.append({
                "model": model, "cache": cache, "optimized_stack": o,
                "optimized_topology": infos[o].topology, "optimized_gpus": infos[o].gpus,
                "optimized_tok_s_per_gpu": o_tps, "baseline_stack": b,
                "baseline_gpus": infos[b].gpus, "baseline_tok_s_per_gpu": b_tps,
                "ratio": o_tps / b_tps if b_tps else math.nan,
                "published_ratio": _published_ratio(model, infos[o].topology),
                "note": f"no step of {', '.join(missing)} met the SLA" if missing else ""})
    return pd.DataFrame(rows, columns=BASELINE_RATIO_COLUMNS)


def sla_topology_side_by_side(sla: pd.DataFrame, infos: dict[str, StackInfo]) -> pd.DataFrame:
    """Per model and cache state: aggregated vs disaggregated best SLA tok/s/GPU with the GPU
    totals behind them (baselines left out), and the published figures of both."""
    best = best_points(sla).set_index(["stack", "cache"])
    rows = []
    for model in sorted({i.model for i in infos.values()}):
        mine = {s: i for s, i in infos.items() if i.model == model and i.recipe != "baseline"}
        agg = sorted(s for s, i in mine.items() if i.topology == "aggregated")
        dis = sorted(s for s, i in mine.items() if i.topology == "disaggregated")
        for (a, d), cache in product(product(agg, dis), ("cold", "warm")):
            if (a, cache) not in best.index or (d, cache) not in best.index:
                continue
            # pandas-stubs reads a 2-tuple under .loc as (row, column), a cell; on this
            # (stack, cache) index it is one whole row key, and best_points keeps one row a key
            ra = cast(pd.Series, best.loc[(a, cache)])
            rd = cast(pd.Series, best.loc[(d, cache)])
            pub_a = published_figure(model, "aggregated")
            pub_d = published_figure(model, "disaggregated")
            rows.append({
                "model": model, "cache": cache,
                "aggregated_stack": a, "aggregated_gpus": infos[a].gpus,
                "aggregated_concurrency": ra["concurrency"],
                "aggregated_tok_s_per_gpu": ra["output_tok_s_per_gpu"],
                "disaggregated_stack": d, "disaggregated_gpus": infos[d].gpus,
                "disaggregated_concurrency": rd["concurrency"],
                "disaggregated_tok_s_per_gpu": rd["output_tok_s_per_gpu"],
                "disaggregated_over_aggregated": rd["output_tok_s_per_gpu"]
                / ra["output_tok_s_per_gpu"],
                "published_aggregated": pub_a.tok_s_per_gpu if pub_a else math.nan,
                "published_aggregated_gpus": pub_a.gpus if pub_a else None,
                "published_disaggregated": pub_d.tok_s_per_gpu if pub_d else math.nan,
                "published_disaggregated_gpus": pub_d.gpus if pub_d else None})
    return pd.DataFrame(rows, columns=TOPOLOGY_COLUMNS)
