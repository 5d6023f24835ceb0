"""A simulated step against an SLO, and a workload's steps as one row's figures (pure).

The SLOs are stacks/predict/rows.py SLOS (the reports' DEFAULT_SLOS, held equal by a test):
p50 TTFT below its bound, p50 per-user output speed at least its bound, p50 ITL at most its
bound, as reports/tables/goodput.py judges a step; a missing figure never meets a bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from stacks.predict.rows import SLOS, PredictSlo

SLO_NAMES = tuple(s.name for s in SLOS)


def slo_named(name: str) -> PredictSlo:
    found = [s for s in SLOS if s.name == name]
    if not found:
        raise ValueError(f"--slo {name}: use one of {', '.join(SLO_NAMES)}")
    return found[0]


@dataclass(frozen=True)
class Figures:
    """One step's simulated figures (workloads/sim/plan_sim.py StepFigures, as a dict)."""
    step: str
    concurrency: int
    ttft_p50_ms: float | None
    itl_p50_ms: float | None
    tok_s_per_user: float | None
    output_tok_s: float | None
    window_s: float
    requests: int

    @classmethod
    def of(cls, d: dict[str, Any]) -> Figures:
        return cls(d["step"], int(d["concurrency"]), d.get("ttft_p50_ms"), d.get("itl_p50_ms"),
                   d.get("tok_s_per_user_p50"), d.get("output_tok_s"),
                   float(d.get("window_s") or 0.0), int(d.get("requests") or 0))


def meets(slo: PredictSlo, f: Figures) -> bool:
    if f.requests == 0 or f.ttft_p50_ms is None or not f.ttft_p50_ms < slo.ttft_ms:
        return False
    if slo.min_tok_s_per_user is not None and not (
            f.tok_s_per_user is not None and f.tok_s_per_user >= slo.min_tok_s_per_user):
        return False
    return slo.itl_ms is None or (f.itl_p50_ms is not None and f.itl_p50_ms <= slo.itl_ms)


def margin(slo: PredictSlo, f: Figures) -> float:
    """How far inside the SLO the step is, in log units of its tightest bound (> 0: inside);
    it only guides where the search probes next, `meets` decides."""
    terms = []
    for value, bound, above in ((f.ttft_p50_ms, slo.ttft_ms, False),
                                (f.tok_s_per_user, slo.min_tok_s_per_user, True),
                                (f.itl_p50_ms, slo.itl_ms, False)):
        if bound is None:
            continue
        if value is None or value <= 0:
            return -math.inf
        terms.append(math.log(value / bound) if above else math.log(bound / value))
    return min(terms) if terms else math.inf


def itl_limit_ms(slo: PredictSlo) -> float:
    """The per-request ITL an SLO allows: its ITL bound, or 1000 / its per-user speed."""
    limits = [slo.itl_ms] if slo.itl_ms is not None else []
    if slo.min_tok_s_per_user is not None:
        limits.append(1000.0 / slo.min_tok_s_per_user)
    return min(limits) if limits else math.inf


@dataclass(frozen=True)
class Row:
    """A workload's figures for one candidate: one step (the sweep's operating point), or a
    fixed workload's steps together (tokens over their windows; the worst step's p50s)."""
    concurrency: int
    ttft_p50_ms: float | None
    itl_p50_ms: float | None
    tok_s_per_user: float | None
    output_tok_s: float | None
    steps: tuple[Figures, ...]

    def meets(self, slo: PredictSlo) -> bool:
        return bool(self.steps) and all(meets(slo, f) for f in self.steps)


def _worst(values: list[float | None], high: bool) -> float | None:
    if any(v is None for v in values) or not values:
        return None
    return (max if high else min)(v for v in values if v is not None)


def row_of(steps: list[Figures]) -> Row:
    window = sum(f.window_s for f in steps)
    tokens = sum((f.output_tok_s or 0.0) * f.window_s for f in steps)
    return Row(max(f.concurrency for f in steps),
               _worst([f.ttft_p50_ms for f in steps], True),
               _worst([f.itl_p50_ms for f in steps], True),
               _worst([f.tok_s_per_user for f in steps], False),
               tokens / window if window > 0 else None, tuple(steps))


def usd_per_1m(usd_per_hour: float | None, tok_s: float | None) -> float | None:
    """$ per 1M output tokens at `tok_s`: the GPUs' share of their nodes' hourly price."""
    if usd_per_hour is None or not tok_s:
        return None
    return usd_per_hour / (tok_s * 3600) * 1e6
