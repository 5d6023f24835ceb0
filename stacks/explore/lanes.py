"""Candidates searched two at a time (stacks/explore/search.py `Explorer.sweep`): DynoSim's
replay runs one process per lane (workloads/sim/on_base.py keeps one per thread), and the
replay is most of a probe's cost (py-spy on base-a100's explore: 84 % of the replay process's
samples in dynamo.replay's `run_trace_replay`), so two lanes use both cores of the machine.

What the search finds does not depend on the lanes' timing: both candidates of a pair start
from the same state (the ledger of the top K so far, the operating points found so far, which
decide the first probe), each works on its own copy, and what each found is merged after both
finish, in the visiting order. Pruning stays sound (a candidate is pruned only by a bound above
the K-th best it was shown; a stale K-th is higher, so it prunes less, never wrongly).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol


class Ledger(Protocol):
    """search.Ledger as the lanes use it (search.py imports this module, not the reverse)."""
    k: int
    exhaustive: bool
    best: dict[str, dict[str, float]]

    def add(self, slo: str, usd: float, setup: str) -> None: ...


class Explorer(Protocol):
    """search.Explorer as the lanes use it: its state, and the search of one candidate."""
    _found: dict[tuple[str, str], list[float]]
    _families: dict[tuple[str, tuple], float]
    stats: Any
    note: Callable[[str], None]

    def _sweep_one(self, s: Any, lbs: dict[str, float | None], ledger: Any) -> list[Any]: ...

# Fixed, not the host's core count: how many candidates start from one state decides what is
# pruned, and so which candidates a report shows simulated; it must not depend on the machine.
LANES = 2


@dataclass
class Lane:
    explorer: Explorer
    ledger: Ledger
    notes: list[str] = field(default_factory=list)


def lane(ex: Explorer, ledger: Ledger) -> Lane:
    """A copy of the search's state for one candidate: shared caches (the steps simulated, the
    bounds), its own ledger, operating points found and statistics."""
    mine = copy.copy(ex)
    mine._found = copy.deepcopy(ex._found)
    mine._families = dict(ex._families)
    mine.stats = type(ex.stats)()
    own = copy.copy(ledger)
    own.best = copy.deepcopy(ledger.best)
    out = Lane(mine, own)
    mine.note = out.notes.append
    return out


def merge(ex: Explorer, ledger: Ledger, done: Lane) -> None:
    """What one lane found, into the search's state (called in the visiting order)."""
    for slo, setups in done.ledger.best.items():
        for setup, usd in setups.items():
            ledger.add(slo, usd, setup)
    for key, points in done.explorer._found.items():
        ex._found.setdefault(key, []).extend(points[len(ex._found.get(key, [])):])
    for family, point in done.explorer._families.items():
        ex._families.setdefault(family, point)
    s = done.explorer.stats
    ex.stats.probes += s.probes
    ex.stats.cache_hits += s.cache_hits
    ex.stats.checks += [c for c in s.checks if c not in ex.stats.checks]
    for slo, ratio in s.a2_ratio.items():
        ex.stats.a2_ratio[slo] = max(ex.stats.a2_ratio.get(slo, 0.0), ratio)
    for line in done.notes:
        ex.note(line)


def sweep_together(ex: Explorer, batch: list[Any], lbs: dict[int, dict[str, float | None]],
                   ledger: Ledger) -> list[Any]:
    """The operating points of `batch` (at most LANES candidates), searched at once."""
    lanes = [lane(ex, ledger) for _ in batch]
    with ThreadPoolExecutor(max_workers=len(batch)) as pool:
        futures = [pool.submit(ln.explorer._sweep_one, s, lbs[id(s)], ln.ledger)
                   for ln, s in zip(lanes, batch, strict=True)]
        found = [f.result() for f in futures]
    out: list[Any] = []
    for ln, outcomes in zip(lanes, found, strict=True):
        merge(ex, ledger, ln)
        out += outcomes
    return out
