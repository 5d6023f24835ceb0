"""Dollars per million output tokens, per stack and step.

$/1M output tokens = (cost of the period) / (successful output tokens in the period) x 1e6.
The period is the step's measurement window (first request start to last request end of its
attempted requests, reports.records.measures: the window its throughput and goodput divide by);
successful output tokens are the output tokens of its completed requests (failed, truncated
and cancelled ones produce no counted tokens). Failed, interrupted or client-bound steps keep
their row, marked in `step_flag`.

Two bases for the cost of the period, stated on every row:
- measured: the run record lists the nodes that served the run (`nodes`, written by the aws
  runner) and `reports.accounting.node_hours.period_cost` prices their overlap with the window, plus
  the fixed fees; prices from the record's `prices` or the catalogue;
- estimate: the stack's hourly cost from the price catalogue (`stacks.sizing.estimate.hourly_cost`)
  x the window. Local runs are always estimates: what the same layout would cost on AWS.

The scope line says what the cost covers and what it leaves out; `unverified_prices` names
the prices used that nobody confirmed (stacks.catalog.service_prices); a node whose instance type
nobody prices (not in the catalogue, not overridden, not recorded with the run) makes the
period cost and $/1M unknown (NaN), and the scope line says which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from reports.records.measures import COUNT_COLUMNS
from reports.records.runs import RunRecord
from reports.records.stackinfo import StackInfo
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.catalog.service_prices import recorded_prices, unverified_note


@dataclass(frozen=True)
class StepCost:
    lines: dict[str, float]     # USD over the period, by what it pays for
    basis: str
    prices: frozenset[str] = frozenset()      # price keys used
    unknown: tuple[str, ...] = ()             # what has no price: the total is unknown
    excluded: tuple[str, ...] = ()            # what the cost leaves out
    shared: frozenset[str] = frozenset()      # lines that are the cluster's fixed costs

    @property
    def total(self) -> float:
        return sum(self.lines.values()) if not self.unknown else math.nan


def _is_gpu_node_line(name: str, cost: StepCost) -> bool:
    return name.startswith(("nodes ", "auto mode fee")) and name not in cost.shared


def scope_of(cost: StepCost, overrides: dict[str, float]) -> str:
    """What the cost covers, what it leaves out, which prices nobody confirmed."""
    parts = [*cost.lines]
    if cost.unknown:
        parts.append("PRICE UNKNOWN (cost and $/1M not computed): " + ", ".join(cost.unknown))
    parts += [f"not included: {e}" for e in cost.excluded]
    if note := unverified_note(cost.prices, overrides):
        parts.append(note)
    return "; ".join(parts)


def estimated_cost(info: StackInfo, period_s: float) -> StepCost:
    hours, h = period_s / 3600, info.hourly
    return StepCost({k: v * hours for k, v in h.lines.items()}, info.cost_basis,
                    frozenset(h.prices), tuple(h.unknown), tuple(h.excluded),
                    frozenset(h.shared))


def measured_cost(record: RunRecord, info: StackInfo, start_ns: int, end_ns: int
                  ) -> StepCost | None:
    """Cost from the nodes the run record says served it; None when it names none.

    Prices: the record's own (`prices`), else the stack's (overrides, catalogue); Auto Mode fee
    and EFS size from the cluster and storage the run really used (the base's for a variant).
    """
    nodes = record.extra.get("nodes")
    if not nodes:
        return None
    from reports.accounting import node_hours  # the aws runner's accounting (issue 6)

    usage = node_hours.usage_from_manifest(record.extra)
    prices = {**info.prices, **recorded_prices(record.extra)}
    for n in usage:
        price = instance_price(n.instance_type, info)
        if price is not None:
            prices.setdefault(n.instance_type, price)
    start = datetime.fromtimestamp(start_ns / 1e9, UTC)
    end = datetime.fromtimestamp(end_ns / 1e9, UTC)
    pc = node_hours.period_cost(usage, start, end, prices, auto_mode=info.auto_mode,
                                efs_gib=info.efs_gib, nat_gateways=info.nat_gateways,
                                root_gib=info.root_gib, eks_version=info.eks_version or None)
    unknown = tuple(f"{h:.2f} node-h of {it}" for it, h in sorted(pc.unknown.items()))
    return StepCost(dict(pc.lines), "measured: node-hours of the run record x prices",
                    frozenset(pc.prices), unknown, tuple(pc.excluded), frozenset(pc.shared))


def instance_price(instance_type: str, info: StackInfo) -> float | None:
    """A run node's price when its type is not in the stack's groups: the catalogue's."""
    it = INSTANCE_TYPES.get(instance_type)
    return info.overrides.get(instance_type, it.on_demand_usd_per_hour if it else None)


def usd_per_million(period_cost_usd: float, output_tokens: float) -> float:
    return period_cost_usd / output_tokens * 1e6 if output_tokens > 0 else math.nan


def cost_efficiency(steps: pd.DataFrame, infos: dict[str, StackInfo],
                    records: dict[tuple[str, str], RunRecord]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for _, st in steps.iterrows():
        if pd.isna(st["window_start_ns"]) or not st["window_s"] > 0:
            continue
        start_ns, end_ns = int(st["window_start_ns"]), int(st["window_end_ns"])
        period_s = (end_ns - start_ns) / 1e9
        info = infos[st["stack"]]
        cost = measured_cost(records[(st["stack"], st["run_id"])], info, start_ns, end_ns) or \
            estimated_cost(info, period_s)
        out_tokens = float(st["output_tokens"])
        gpu = sum(v for k, v in cost.lines.items() if _is_gpu_node_line(k, cost)) \
            if not cost.unknown else math.nan
        rows.append({
            "configuration": info.label, "stack": st["stack"], "run_id": st["run_id"],
            "step": st["step"], "step_flag": st["step_flag"],
            "workload": st["workload"], "concurrency": st["concurrency"],
            **{c: st[c] for c in COUNT_COLUMNS},
            "gpus": info.gpus, "gpu_types": info.gpu_types,
            "gpu_cost_usd_per_h": gpu / period_s * 3600 if period_s else math.nan,
            "other_cost_usd_per_h": (cost.total - gpu) / period_s * 3600 if period_s
            else math.nan,
            "cost_scope": scope_of(cost, info.overrides), "cost_basis": cost.basis,
            "unverified_prices": unverified_note(cost.prices, info.overrides).removeprefix(
                "unverified prices: "),
            "period": f"measurement window of {st['step']} "
                      f"({datetime.fromtimestamp(start_ns / 1e9, UTC):%Y-%m-%d %H:%M:%S} UTC, "
                      f"{period_s:.2f} s)",
            "period_s": period_s, "period_cost_usd": cost.total,
            "successful_output_tokens": out_tokens,
            "output_tok_s": st["output_tok_s"],
            "usd_per_1m_output_tokens": usd_per_million(cost.total, out_tokens),
            "usable": st["usable"]})
    return pd.DataFrame(rows)
