"""What each comparison a plan draws can resolve before anything runs, and what resolving a
target difference would cost (pure: the plan's stacks, their simulated steps and the
campaign's prices in; rows out). The CLI's forecast simulates (workloads/sim/forecast.py, the
figures of workloads/sim/plan_sim.py per step), this room judges; the method is the report's
(stacks/sizing/sampling.py), so what the plan promises is what the report's verdicts can find.

The comparisons are the ones the report will draw between the plan's variants:
- agg vs disagg: each pair one topology apart (stacks/conventions/one_setting.py), per sweep
  step: TTFT p50, ITL p50, output tok/s;
- KV router, KV offload: each pair one router / offload setting apart, per multi-turn and trace
  step: the reuse (the server's prefix hit rate, in points) and TTFT p50;
- the decode tier on another GPU: each disaggregated variant whose decode workers run on
  another instance type than its prefill workers, against each same-model disaggregated
  variant whose tiers share one, per sweep step: output tok/s ($ per 1M output tokens moves
  with it, the hourly price being fixed), ITL p50 and TTFT p50.

The smallest resolvable difference (MDD) of a comparison at 95 % / 80 % power is
(z + z) x its standard error x sampling.BOOTSTRAP_MARGIN: each side's quantile standard error
from its simulated requests (the sd of the exact bootstrap: `ttft_p50_se_ms`, `itl_p50_se_ms`
of the step's figures), pooled over the planned repeats, plus, for the KV router's seeded runs,
the spread of the figure across runs (`spread.runs`, `run_reuse`). The simulation has
no client, network or GPU noise, so each side's spread is held at least at SPREAD_FLOOR.
Output tok/s is a whole-step figure: only repeats judge it (Welch's t, two or more a side).
Resolving a target takes (MDD / target)^2 times the requests: extra repeats of the step, whose
hours and dollars are the campaign's own (its slot's price per second while it runs).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import product
from typing import Any

from stacks.config.schema import StackConfig
from stacks.conventions.one_setting import pairs
from stacks.preflight.run import effective_cluster
from stacks.sizing import sampling

Q_TOPOLOGY = "agg vs disagg"
Q_ROUTER = "KV router"
Q_OFFLOAD = "KV offload"
Q_TIER = "decode tier on another GPU"
SWEEP = ("concurrency_sweep",)
ROUTED = ("multi_turn", "trace_replay")
QUANTILES = {"ttft_p50_ms": "ttft_p50_se_ms", "itl_p50_ms": "itl_p50_se_ms"}
LABELS = {"ttft_p50_ms": "TTFT p50", "itl_p50_ms": "ITL p50", "output_tok_s": "output tok/s",
          "reuse": "prefix hit rate"}
# The per-request spread (relative sd) and the run-to-run spread of output tok/s the simulation
# does not have, at least: the demo rehearsal's quietest steps (local-disagg c1, 2026-12-06:
# TTFT log-sd 0.05, ITL cv 0.007) and the fixture runs' three repeats of local-agg and
# local-disagg at c1 and c4 (output tok/s cv 0.8-2.3 %). Real GPUs and networks add to them.
SPREAD_FLOOR = {"ttft_p50_ms": 0.05, "itl_p50_ms": 0.007, "output_tok_s": 0.02}
# a median's standard error from a relative spread: sqrt(pi / 2) sd / sqrt(n)
_MEDIAN_SE = math.sqrt(math.pi / 2)


# A simulated step: workloads/sim/plan_sim.py StepFigures.as_dict() as the forecast's record
# keeps it (workload, requests, ttft_p50_ms, itl_p50_ms, output_tok_s, reuse, ttft_p50_se_ms,
# itl_p50_se_ms, token_rate_cv, reuse_se, run_reuse, spread.runs), by step id.
SimulatedStep = Mapping[str, Any]


@dataclass(frozen=True)
class Comparison:
    question: str
    reference: str
    subject: str
    workloads: tuple[str, ...]
    figures: tuple[str, ...]


@dataclass(frozen=True)
class StepCost:
    """One repeat of a step: its planned seconds and what the stack costs per second then."""

    seconds: float
    usd_per_s: float


@dataclass(frozen=True)
class Resolution:
    question: str
    reference: str
    subject: str
    step: str
    figure: str
    requests: int              # completed requests a side (the fewer), per repeat
    repeats: int               # planned
    value: float               # the reference's simulated figure
    mdd: float                 # share of `value` (reuse: points as a share, absolute)
    target: float
    needed_repeats: int | None  # repeats a side that resolve the target (None: beyond 20)
    extra_s: float             # the campaign's added step time, both sides
    extra_usd: float
    note: str = ""

    @property
    def resolved(self) -> bool:
        return not math.isnan(self.mdd) and self.mdd <= self.target

    @property
    def needed_requests(self) -> int | None:
        return None if self.needed_repeats is None else self.requests * self.needed_repeats


# What a decode-tier pair shares: only the workers (their GPUs), transfer and flags differ.
TIER_SAME = ("model", "workloads", "scale", "serving.router", "serving.kvOffload")


def _part(config: dict, key: str) -> object:
    value: object = config
    for k in key.split("."):
        value = value.get(k) if isinstance(value, dict) else None
    return value


def _decode_gpu(stack: StackConfig, base: StackConfig | None, role: str) -> str:
    groups = {g.name: g.instance_type for g in effective_cluster(stack, base).node_groups}
    workers = stack.serving.workers if stack.serving else []
    return next((groups.get(w.node_group, "?") for w in workers if w.role.value == role), "")


def comparisons(stacks: list[StackConfig], base: StackConfig | None = None,
                scale: str = "full") -> list[Comparison]:
    """The pairs the plan's variants form, as the report will pair their runs."""
    configs = {s.name: {**s.model_dump(mode="json", by_alias=True), "scale": scale}
               for s in stacks if s.serving is not None}
    out = []
    for p in pairs(configs):
        if p.setting == "topology":
            out.append(Comparison(Q_TOPOLOGY, p.baseline, p.changed, SWEEP,
                                  ("ttft_p50_ms", "itl_p50_ms", "output_tok_s")))
        else:
            out.append(Comparison(Q_ROUTER if p.setting == "router" else Q_OFFLOAD,
                                  p.baseline, p.changed, ROUTED, ("reuse", "ttft_p50_ms")))
    dis = [s for s in stacks if s.serving is not None
           and s.serving.topology.value == "disaggregated"]
    tiers = {s.name: (_decode_gpu(s, base, "prefill"), _decode_gpu(s, base, "decode"))
             for s in dis}
    mixed = [s for s in dis if tiers[s.name][0] != tiers[s.name][1]]
    same = [s for s in dis if tiers[s.name][0] == tiers[s.name][1]]
    for m, s in product(mixed, same):
        # against the variant serving the same model on the same prompts with the same router
        # and offload (its workers, transfer and their engine flags aside)
        if all(_part(configs[s.name], k) == _part(configs[m.name], k) for k in TIER_SAME):
            out.append(Comparison(Q_TIER, s.name, m.name, SWEEP,
                                  ("output_tok_s", "itl_p50_ms", "ttft_p50_ms")))
    return out


def _num(v: object) -> float:
    try:
        return math.nan if v is None else float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _run_sd(step: SimulatedStep, figure: str) -> float:
    """The figure's sd across the step's seeded runs (0 with one run)."""
    if figure == "reuse":
        vals = [_num(v) for v in step.get("run_reuse") or []]
    else:
        vals = [_num(r.get(figure)) for r in (step.get("spread") or {}).get("runs") or []]
    vals = [v for v in vals if not math.isnan(v)]
    return statistics.stdev(vals) if len(vals) >= 2 else 0.0


def _value(step: SimulatedStep, figure: str) -> float:
    return _num(step.get(figure))


def side_se(step: SimulatedStep, figure: str, repeats: int) -> float:
    """A side's standard error of a request-level figure over `repeats` (floored)."""
    n = max(int(_num(step.get("requests")) or 0), 1)
    if figure == "reuse":
        se = _num(step.get("reuse_se"))
    else:
        floor = _MEDIAN_SE * SPREAD_FLOOR[figure] * abs(_value(step, figure)) / math.sqrt(n)
        se = max(_num(step.get(QUANTILES[figure])), floor)   # NaN: the floor
        se = floor if math.isnan(se) else se
    return math.sqrt(se ** 2 / repeats + _run_sd(step, figure) ** 2 / repeats)


def run_sd(step: SimulatedStep) -> float:
    """Output tok/s run-to-run sd, relative: the requests' own (their token rates' cv over the
    square root of their number), the seeded runs' spread, or the floor, whichever is
    largest."""
    n = max(int(_num(step.get("requests")) or 0), 1)
    cv = _num(step.get("token_rate_cv"))
    request = 0.0 if math.isnan(cv) else cv / math.sqrt(n)
    value = _value(step, "output_tok_s")
    runs = _run_sd(step, "output_tok_s") / value if value and not math.isnan(value) else 0.0
    return max(request, runs, SPREAD_FLOOR["output_tok_s"])


def resolve(c: Comparison, step: str, ref: SimulatedStep, sub: SimulatedStep, figure: str,
            repeats: int, target: float, costs: tuple[StepCost, StepCost]) -> Resolution:
    """One comparison at one step on one figure: its MDD and what the target would cost."""
    value = _value(ref, figure)
    n = int(min(_num(ref.get("requests")), _num(sub.get("requests"))))
    per_repeat = sum(cost.seconds for cost in costs)
    usd_per_repeat = sum(cost.seconds * cost.usd_per_s for cost in costs)
    note = ""
    if figure == "output_tok_s":
        sd_a, sd_b = run_sd(ref), run_sd(sub)
        mdd = sampling.mdd_over_repeats(sd_a, sd_b, repeats)
        needed = sampling.repeats_to_resolve(sd_a, sd_b, target)
        if repeats < 2:
            note = "one repeat planned: a whole-step figure needs >= 2 to be judged"
    else:
        se = math.hypot(side_se(ref, figure, repeats), side_se(sub, figure, repeats))
        mdd = sampling.minimal_detectable(se) if figure == "reuse" \
            else sampling.relative_mdd(se, value)
        scale = sampling.scale_to_resolve(mdd, target)
        needed = repeats if math.isnan(scale) or scale <= 1 else math.ceil(repeats * scale)
        if needed > 20:
            note = f"needs {needed} repeats a side (workloads.repeats allows 20): longer steps"
    extra = max(0, (needed or repeats) - repeats)
    return Resolution(c.question, c.reference, c.subject, step, figure, n, repeats, value,
                      mdd, target, needed, extra * per_repeat, extra * usd_per_repeat, note)


def resolutions(plan: list[Comparison],
                simulated: Mapping[str, Mapping[str, SimulatedStep]],
                repeats: Mapping[str, int], costs: Mapping[str, Mapping[str, StepCost]],
                target: float = 0.05) -> list[Resolution]:
    """Every comparison at every step both sides simulated (`simulated[stack][step id]`: the
    step's figures; `costs[stack][step]`: one repeat of the step as the campaign prices it)."""
    out = []
    for c in plan:
        ref = {k: s for k, s in (simulated.get(c.reference) or {}).items()
               if s.get("workload") in c.workloads}
        sub = {k: s for k, s in (simulated.get(c.subject) or {}).items()
               if s.get("workload") in c.workloads}
        k = min(repeats.get(c.reference, 1), repeats.get(c.subject, 1))
        for step in sorted(set(ref) & set(sub), key=lambda s: (len(s), s)):
            pair = (costs.get(c.reference, {}).get(step, StepCost(0.0, 0.0)),
                    costs.get(c.subject, {}).get(step, StepCost(0.0, 0.0)))
            out += [resolve(c, step, ref[step], sub[step], f, k, target, pair)
                    for f in c.figures]
    return out


def _group(step: str) -> str:
    """`concurrency_sweep/c4/r2` -> `concurrency_sweep/c4` (the simulated step's id)."""
    head, _, last = step.rpartition("/")
    return head if head and last[:1] == "r" and last[1:].isdigit() else step


def step_costs(steps_s: Mapping[str, float], usd_per_s: float) -> dict[str, StepCost]:
    """One repeat of each step, as the campaign schedules it (`steps_s` by the runner's step
    ids, repeats as `/rN`), priced at what the stack costs per second while it runs."""
    out: dict[str, StepCost] = {}
    for step, seconds in steps_s.items():
        out.setdefault(_group(step), StepCost(seconds, usd_per_s))
    return out
