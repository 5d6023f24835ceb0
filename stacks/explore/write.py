"""`stacks explore --write`: the top K of the concurrency sweep at each SLO as variant stack files
attached to the base (stacks/Pulumi.explore-<base>-<short id>.yaml), which `stacks check` checks,
`stacks plan <base>` forecasts and `workloads campaign <base>` runs like a hand-written variant.

Each file is the candidate's own config (space.py builds it as the shipped variants are written)
plus its operating points as extra concurrency-sweep steps, so the campaign measures the
concurrency the explore chose; the header says what it is and what the simulation showed. The
files are generated: git ignores them (.gitignore: stacks/Pulumi.explore-*.yaml).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from stacks.config.loader import PROJECT, stack_file
from stacks.explore.results import grouped, ranked
from stacks.explore.run import Exploration
from stacks.explore.search import SWEEP, Subject, simulated_label
from stacks.explore.space import Candidate


def chosen(ex: Exploration) -> dict[str, tuple[Candidate, list[str], dict[str, int]]]:
    """{stack name: (candidate, why it was chosen, its operating point per SLO)} for the top K
    of the sweep at every SLO explored (one candidate per engine setup; a candidate's
    operating points are every SLO's it has, chosen at that SLO or not)."""
    out: dict[str, tuple[Candidate, list[str], dict[str, int]]] = {}
    for slo in ex.slos:
        for r, twins in grouped([r for r in ranked(ex, SWEEP, slo.name)
                                 if r.rank is not None and r.rank <= ex.k]):
            c, row = r.candidate, r.outcome.row
            assert row is not None
            _, why, _ = out.setdefault(c.name, (c, [], _points(ex, c)))
            why.append(f"rank {r.rank} at {slo.name}: c{row.concurrency}, "
                       f"{r.tok_s_per_gpu or 0:,.0f} tok/s/GPU, {r.tok_s_per_user or 0:.1f} "
                       f"tok/s/user, ${r.outcome.usd or 0:.3f} per 1M output tokens")
            if twins:
                why.append(f"(its twins on the same simulated engine, not written: "
                           f"{', '.join(t.candidate.label for t in twins)})")
    return out


def _points(ex: Exploration, c: Candidate) -> dict[str, int]:
    return {o.slo: o.row.concurrency for o in ex.outcomes
            if o.subject.candidate is c and o.workload == SWEEP and o.status == "simulated"
            and o.meets and o.row is not None}


def config(c: Candidate, points: dict[str, int], scale_plan: list[int]) -> dict[str, Any]:
    """The candidate's stack config with its operating points added to the sweep."""
    steps = sorted(set(scale_plan) | set(points.values()))
    return {**c.config, "workloads": {"concurrencySweep": {"concurrencies": steps}}}


def text(ex: Exploration, c: Candidate, why: list[str], points: dict[str, int]) -> str:
    plan = list(c.stack.workloads.concurrency_sweep.concurrencies)
    body = {f"{PROJECT}:{k}": v for k, v in config(c, points, plan).items()}
    head = [f"# {c.label}: written by `python -m stacks explore {ex.base} --write` (scale "
            f"{ex.scale}).", *[f"# {w}" for w in why],
            f"# Figures: {simulated_label([_subject(ex, c)])}.",
            "# The operating point(s) are extra concurrency-sweep steps: " + ", ".join(
                f"c{p} ({s})" for s, p in points.items()) + ".",
            "# Generated (git-ignored): run it with the base's campaign "
            f"(`python -m workloads campaign {ex.base}`) or on its own like any variant."]
    return "\n".join(head) + "\n" + yaml.safe_dump({"config": body}, sort_keys=False)


def _subject(ex: Exploration, c: Candidate) -> Subject:
    return next(s for s in ex.subjects if s.candidate is c)


def write(ex: Exploration, stacks_dir: Path) -> list[Path]:
    out = []
    for c, why, points in chosen(ex).values():
        path = stack_file(c.name, stacks_dir)
        path.write_text(text(ex, c, why, points))
        out.append(path)
    return out
