"""Side-by-side tables of aggregated vs disaggregated stacks (the plan's comparison tables).

Every aggregated stack is paired with every disaggregated one among the runs compared; a pair
contributes the rows (concurrencies, prefix shares) both stacks measured.
"""

from __future__ import annotations

from itertools import product

import pandas as pd

from reports.stackinfo import StackInfo


def topology_pairs(infos: dict[str, StackInfo]) -> list[tuple[str, str]]:
    agg = sorted(s for s, i in infos.items() if i.topology == "aggregated")
    dis = sorted(s for s, i in infos.items() if i.topology == "disaggregated")
    return list(product(agg, dis))


def _side_by_side(table: pd.DataFrame, key: str, cols: dict[str, str],
                  pairs: list[tuple[str, str]]) -> pd.DataFrame:
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
    """concurrency, aggregated/disaggregated TTFT p50 and TPS (aggregate output tok/s)."""
    out = _side_by_side(sweep, "concurrency",
                        {"ttft_p50_ms": "ttft_p50_ms", "output_tok_s": "tps",
                         "repeats": "repeats"}, topology_pairs(infos))
    if not out.empty:
        out["ttft_p50_delta_ms"] = out["disaggregated_ttft_p50_ms"] - \
            out["aggregated_ttft_p50_ms"]
    return out


def prefix_side_by_side(pc: pd.DataFrame, infos: dict[str, StackInfo]) -> pd.DataFrame:
    """share, aggregated/disaggregated TTFT p50 and hit rate, and disagg's TTFT improvement."""
    out = _side_by_side(pc, "prefix_share",
                        {"ttft_p50_ms": "ttft_p50_ms", "server_hit_rate": "server_hit_rate"},
                        topology_pairs(infos))
    if not out.empty:
        out["improvement_pct"] = (out["aggregated_ttft_p50_ms"]
                                  - out["disaggregated_ttft_p50_ms"]) \
            / out["aggregated_ttft_p50_ms"] * 100
    return out
