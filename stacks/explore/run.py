"""`explore(base, simulator, ...)`: the space, pre-flight's screen, the search, in one call (the
CLI's one entry; everything it does is in the modules it names)."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stacks.config.schema import StackConfig
from stacks.explore import bounds as bd
from stacks.explore.cache import StepCache
from stacks.explore.screen import Refusal, Screened, build_space, kv_tokens, screen
from stacks.explore.search import SWEEP, Explorer, Ledger, Outcome, Simulator, Stats, Subject
from stacks.predict.rows import PredictSlo
from stacks.predict.shapes import layout


@dataclass
class Exploration:
    base: str
    scale: str
    screened: Screened
    subjects: list[Subject]
    outcomes: list[Outcome]
    slos: list[PredictSlo]
    k: int
    exhaustive: bool
    workloads: list[str]
    stats: Stats
    labels: list[str] = field(default_factory=list)   # the timing sources simulated on
    seconds: float = 0.0
    # --calibrate: the factors the tables were scaled by, one line per table key, and the runs
    calibration: list[str] = field(default_factory=list)

    @property
    def refused(self) -> list[Refusal]:
        return self.screened.refused

    @property
    def unsimulated(self) -> list[Subject]:
        return [s for s in self.subjects if s.unsimulated is not None]


def subjects(screened: Screened, base: StackConfig, simulator: Simulator,
             note: Callable[[str], None]) -> list[Subject]:
    """The accepted candidates made ready to simulate (timing tables loaded for the bounds)."""
    out, loaded = [], {}
    if (make_tables := getattr(simulator, "make_tables", None)) is not None:
        make_tables([c.stack for c, _ in screened.accepted])
    for c, report in screened.accepted:
        lay = layout(c.stack, base)
        s = Subject(c, kv_tokens(report), None if isinstance(lay, str) else lay.gpu_usd_per_hour)
        prepared = simulator.prepare(c.stack, s.kv_tokens)
        if isinstance(prepared, str):
            s.unsimulated = prepared
        else:
            s.prepared = prepared
            for role, path in prepared.tables.items():
                if path not in loaded:
                    loaded[path] = bd.load_table(Path(path))
                s.tables[role] = loaded[path]
            if set(s.tables) != {t.role for t in c.tiers}:
                s.prepared, s.unsimulated = None, (
                    "no timing table for every role: the bounds and the ranking need the "
                    "same timing source for all candidates")
        out.append(s)
    note(f"{len(out)} candidate(s) pre-flight accepts, {sum(s.prepared is not None for s in out)}"
         " with timing tables")
    return out


def explore(base: StackConfig, simulator: Simulator, slos: list[PredictSlo], k: int = 5,
            exhaustive: bool = False, cache: StepCache | None = None, on: dt.date | None = None,
            only: list[str] | None = None, space_filter: Callable | None = None,
            note: Callable[[str], None] = lambda _: None) -> Exploration:
    t0 = time.monotonic()
    space = build_space(base, on=on)
    if space_filter is not None:
        space.candidates = [c for c in space.candidates if space_filter(c)]
    note(f"space: {space.size} candidate(s)")
    screened = screen(space, base, on=on)
    subs = subjects(screened, base, simulator, note)
    explorer = Explorer(simulator, slos, k, exhaustive, cache, note=note)
    workloads = _workloads(subs, only)
    outcomes: list[Outcome] = []
    for w in workloads:
        note(f"searching {w}")
        if w == SWEEP:
            found = explorer.sweep(subs, Ledger(k, exhaustive))
            if any(c.startswith("A2 broken") for c in explorer.stats.checks) and not exhaustive:
                explorer.stats.checks.append("A2 broken: the sweep searched again without the "
                                             "table bounds")
                found = explorer.sweep(subs, Ledger(k, exhaustive), use_bound=False)
            outcomes += found
        else:
            outcomes += explorer.fixed(subs, w, Ledger(k, exhaustive))
    for s in subs:
        if s.unsimulated is not None:
            outcomes += [Outcome(s, w, slo.name, "unsimulated", note=s.unsimulated)
                         for w in workloads for slo in slos]
    labels = sorted({s.prepared.label for s in subs if s.prepared is not None})
    return Exploration(base.name, simulator.scale, screened, subs, outcomes, slos, k,
                       exhaustive, workloads, explorer.stats, labels, time.monotonic() - t0)


def _workloads(subs: list[Subject], only: list[str] | None) -> list[str]:
    if not subs:
        return []
    enabled = subs[0].candidate.stack.workloads.enabled()
    return [w for w in enabled if only is None or w in only]

