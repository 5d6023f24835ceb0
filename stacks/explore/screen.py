"""The space through the real pre-flight (pure): `stacks.preflight.run.run_preflight(candidate,
base)`, the one function `stacks check` and `pulumi up` run.

First the TP screen: one aggregated replica per (GPU group, precision, TP) is checked, and a TP
pre-flight refuses there (the memory fit, the heads, the precision) is not combined into any
candidate; the rule's field and message say why. Then every candidate the accepted TPs make is
checked whole (node packing, host memory for the CPU KV cache, the transfer, the budget): a
refused candidate is listed with every rule that refused it, the others go on with pre-flight's
memory table (the KV capacity the simulation gives each worker group).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from stacks.config.errors import Problem
from stacks.config.schema import StackConfig
from stacks.explore import space as sp
from stacks.preflight.run import PreflightReport, run_preflight


@dataclass(frozen=True)
class Refusal:
    candidate: sp.Candidate
    problems: tuple[Problem, ...]

    @property
    def rules(self) -> str:
        """Each refusing rule as `field: message`."""
        return "; ".join(f"{p.field}: {p.message}" for p in self.problems)


@dataclass
class Screened:
    space: sp.Space
    accepted: list[tuple[sp.Candidate, PreflightReport]]
    refused: list[Refusal]


def kv_tokens(report: PreflightReport) -> list[int]:
    """KV capacity per worker group, as pre-flight's memory fit gives it."""
    return [m.kv_capacity_tokens for m in report.memory]


def build_space(base: StackConfig, on: dt.date | None = None,
                routers: tuple[str, ...] = sp.ROUTERS,
                offloads: tuple[str, ...] = sp.OFFLOADS) -> sp.Space:
    """The TP screen, then every candidate the accepted TPs make."""
    accepted: dict[tuple[str, str], list[int]] = {}
    refused: list[tuple[str, str, int, list[str]]] = []
    excluded = list(sp.EXCLUDED)
    for g in sp.gpu_groups(base):
        kept, why = sp.precisions(base, g)
        excluded += why
        for precision in kept:
            for tp in sp.tp_values(g.inst):
                report = run_preflight(sp.probe(base, g, precision, tp).stack, base, on=on)
                if report.problems:
                    refused.append((g.name, precision, tp,
                                    [f"{p.field}: {p.message}" for p in report.problems]))
                else:
                    accepted.setdefault((g.name, precision), []).append(tp)
    return sp.Space(base.name, sp.candidates(base, accepted, routers, offloads), excluded,
                    refused)


def screen(space: sp.Space, base: StackConfig, on: dt.date | None = None) -> Screened:
    """Every candidate through pre-flight: accepted (with its report) or refused (its rules)."""
    out = Screened(space, [], [])
    for c in space.candidates:
        report = run_preflight(c.stack, base, on=on)
        if report.problems:
            out.refused.append(Refusal(c, tuple(report.problems)))
        else:
            out.accepted.append((c, report))
    return out
