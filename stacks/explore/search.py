"""The search over the screened candidates: every workload of the plan, every SLO, ranked by $ per
1M output tokens (pure but for the `Simulator` it is given and the results cache).

Per workload and SLO a candidate's row is
- concurrency_sweep: its operating point (bracket.py) on the sweep's request shape;
- every other workload: its plan steps at their own concurrency, as one row (judge.row_of).
Candidates are visited cheapest-bound first, and a candidate is simulated only while it can
still enter the top K of some SLO: its $ per 1M cannot be below `bounds.py`'s bound, nor, once
a probe misses the SLO at concurrency c, below its own $ at c (ASSUMED (A3): output tok/s does
not fall as concurrency rises to the operating point; the search checks A3 on every candidate's
probes and never prunes on a probe once they break it). `exhaustive` simulates everything:
the test of the guarantee compares the two (tests/test_explore_search.py).
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.explore import bounds as bd
from stacks.explore.bracket import Search, grid, operating_point
from stacks.explore.cache import StepCache, step_key
from stacks.explore.judge import Figures, Row, itl_limit_ms, row_of, usd_per_1m
from stacks.explore.lanes import LANES, sweep_together
from stacks.explore.space import Candidate
from stacks.predict.rows import PredictSlo

SWEEP = "concurrency_sweep"
# The first probe of an operating point when none was found yet: this share of the bound's
# decode batches (base-a100's first operating points lay at 0.85-0.93 of them).
FIRST_GUESS = 0.85
# A3 is broken when a higher concurrency's output falls more than this below a lower one's.
A3_TOLERANCE = 0.01


class Prepared(Protocol):
    """A candidate made ready to simulate: what decides its results, and its timing source."""
    fingerprint: str
    label: str                       # the run record's words for its figures (SIMULATED ...)
    engine: str                      # the simulator, with its version
    timings: tuple[str, ...]         # its timing tables' sources (database, system, backend)
    tables: dict[str, Path]          # role -> the timing table (npz) its workers run on
    records: dict[str, dict]         # role -> that table's record (its band: bands.py)


class Simulator(Protocol):
    scale: Scale

    def prepare(self, stack: StackConfig, kv_tokens: list[int]) -> Prepared | str:
        """Ready to simulate, or why not (no timing table, a setup DynoSim refuses)."""

    def run(self, prepared: Prepared, stack: StackConfig, workload: str
            ) -> list[dict[str, Any]]:
        """The figures of every step of `stack`'s `workload` (plan_sim StepFigures dicts)."""


@dataclass
class Subject:
    """A screened candidate as the search sees it."""
    candidate: Candidate
    kv_tokens: list[int]
    usd_per_hour: float | None
    prepared: Prepared | None = None
    unsimulated: str | None = None
    tables: dict[str, bd.Table] = field(default_factory=dict)


@dataclass
class Outcome:
    """One candidate x workload x SLO."""
    subject: Subject
    workload: str
    slo: str
    status: str                     # simulated | pruned | unsimulated
    row: Row | None = None
    meets: bool | None = None
    usd: float | None = None        # $ per 1M output tokens at the row
    bound_usd: float | None = None  # the lowest $ per 1M the bounds allow
    note: str = ""
    search: Search | None = None


@dataclass
class Ledger:
    """Per SLO, the $ per 1M of the K cheapest engine setups meeting it so far (twins on one
    setup, such as offload candidates the simulation runs on the same engine, count once)."""
    k: int
    exhaustive: bool
    best: dict[str, dict[str, float]] = field(default_factory=dict)

    def kth(self, slo: str) -> float:
        got = sorted(self.best.get(slo, {}).values())
        return got[self.k - 1] if len(got) >= self.k and not self.exhaustive else math.inf

    def add(self, slo: str, usd: float, setup: str) -> None:
        mine = self.best.setdefault(slo, {})
        mine[setup] = min(usd, mine.get(setup, math.inf))

    def beaten(self, slo: str, bound_usd: float | None) -> bool:
        return bound_usd is not None and bound_usd > self.kth(slo)


@dataclass
class Stats:
    probes: int = 0                 # steps the simulator was asked for (cache misses)
    cache_hits: int = 0
    checks: list[str] = field(default_factory=list)     # A1 / A2 / A3 findings
    # per SLO, the highest simulated output / its A2 bound seen (how much room A2 had)
    a2_ratio: dict[str, float] = field(default_factory=dict)


def sweep_shape(stack: StackConfig, scale: str) -> tuple[int, int, list[int]]:
    w = stack.workloads.concurrency_sweep.at_scale(scale)  # type: ignore[arg-type]
    return w.isl, w.osl, list(w.concurrencies)


def at_concurrency(stack: StackConfig, c: int) -> StackConfig:
    """The stack with its sweep reduced to one step at `c` (the step's rows, seed and shape are
    the plan's: workloads/steps.py draws each concurrency's rows on their own)."""
    w = stack.workloads
    sweep = w.concurrency_sweep.model_copy(update={"concurrencies": [c], "quick": {
        k: v for k, v in w.concurrency_sweep.quick.items() if k != "concurrencies"}})
    return stack.model_copy(update={"workloads": w.model_copy(
        update={"concurrency_sweep": sweep})})


def workload_concurrency(stack: StackConfig, workload: str, scale: str) -> int:
    p = getattr(stack.workloads, workload).at_scale(scale).model_dump()
    return max([p.get("conversations") or 0, p.get("concurrency") or 0,
                *(p.get("concurrencies") or [0])])


def workload_context(stack: StackConfig, workload: str, scale: str) -> int:
    """The shortest prompt a request of the workload's steps has (tokens), as configured."""
    p = getattr(stack.workloads, workload).at_scale(scale).model_dump()
    if workload == "trace_replay" and p.get("source") != "synthetic":
        return 1        # a replayed trace brings its own lengths
    return int(p.get("isl_min") or p.get("isl") or 1)


def simulated_label(subjects: list[Subject]) -> str:
    """SIMULATED (the simulators, timings from the tables' sources) of these candidates."""
    prepared = [s.prepared for s in subjects if s.prepared is not None]
    if not prepared:
        return "SIMULATED (nothing simulated)"
    engines = ", ".join(dict.fromkeys(p.engine for p in prepared))
    timings = sorted({t for p in prepared for t in p.timings})
    return f"SIMULATED ({engines}" + (f", timings from {', '.join(timings)})" if timings
                                       else ")")


class Explorer:
    """Runs the search; `measure` keeps every step it asks for (the simulator's or the cache's)."""

    def __init__(self, simulator: Simulator, slos: list[PredictSlo], k: int,
                 exhaustive: bool = False, cache: StepCache | None = None,
                 ceiling: int = 2048, note: Callable[[str], None] = lambda _: None) -> None:
        self.sim, self.slos, self.k, self.note = simulator, slos, k, note
        self.exhaustive, self.cache, self.ceiling = exhaustive, cache, ceiling
        self.stats = Stats()
        self.memory: dict[str, list[Figures]] = {}
        # shared by the lanes (copy.copy keeps these references): steps being simulated
        self._lock = threading.Lock()
        self._pending: dict[str, Future] = {}
        self._bounds: dict[tuple, bd.SloBound] = {}
        self._fixed: dict[tuple, float] = {}
        self._found: dict[tuple[str, str], list[float]] = {}
        self._families: dict[tuple[str, tuple], float] = {}

    # --- one simulated workload ----------------------------------------------------------
    def steps(self, s: Subject, stack: StackConfig, workload: str) -> list[Figures]:
        """A workload's steps: from this explore's memory (twins on one engine setup share
        them), the cache, or the simulator; a step another lane is simulating is waited for,
        not simulated twice (stacks/explore/lanes.py)."""
        assert s.prepared is not None
        key = step_key(s.prepared.fingerprint, stack, workload, self.sim.scale)
        with self._lock:
            if key in self.memory:
                return self.memory[key]
            pending = self._pending.get(key)
            mine = pending is None
            if pending is None:
                pending = self._pending[key] = Future()
        if not mine:
            got: list[Figures] = pending.result()
            return got
        try:
            found = self.cache.get(key) if self.cache is not None else None
            if found is None:
                found = self.sim.run(s.prepared, stack, workload)
                self.stats.probes += 1
                if self.cache is not None:
                    self.cache.put(key, found)
            else:
                self.stats.cache_hits += 1
            figures = [Figures.of(d) for d in found]
            with self._lock:
                self.memory[key] = figures
            pending.set_result(figures)
            return figures
        except BaseException as exc:
            pending.set_exception(exc)
            raise
        finally:
            with self._lock:
                del self._pending[key]

    # --- bounds ----------------------------------------------------------------------------
    def fixed_bound_usd(self, s: Subject, workload: str) -> float | None:
        stack, scale = s.candidate.stack, self.sim.scale
        c = workload_concurrency(stack, workload, scale)
        ctx = workload_context(stack, workload, scale)
        tok = 0.0
        for t, kv in zip(s.candidate.tiers, s.kv_tokens, strict=True):
            if t.role in ("worker", "decode"):
                key = (id(s.tables[t.role]), t.replicas, c, ctx, kv)
                if key not in self._fixed:
                    self._fixed[key] = bd.fixed_tok_s(c, s.tables[t.role], t.replicas, ctx, kv)
                tok += self._fixed[key]
        return usd_per_1m(s.usd_per_hour, tok)

    def slo_bound(self, s: Subject, slo: PredictSlo) -> bd.SloBound:
        isl, osl, _ = sweep_shape(s.candidate.stack, self.sim.scale)
        tiers = [(t.role, t.replicas, s.tables[t.role], kv)
                 for t, kv in zip(s.candidate.tiers, s.kv_tokens, strict=True)]
        # the same tables, replicas and KV capacity give the same bound (twins, precisions)
        key = (tuple((r, n, id(tb), kv) for r, n, tb, kv in tiers), slo.name)
        if key not in self._bounds:
            self._bounds[key] = bd.slo_bound(tiers, itl_limit_ms(slo), isl, osl)
        return self._bounds[key]

    # --- the fixed workloads ------------------------------------------------------------------
    def fixed(self, subjects: list[Subject], workload: str, ledger: Ledger) -> list[Outcome]:
        out: list[Outcome] = []
        ready = [s for s in subjects if s.prepared is not None]
        order = sorted(ready, key=lambda s: (self.fixed_bound_usd(s, workload) or math.inf,
                                             s.candidate.label))
        for s in order:
            lb = self.fixed_bound_usd(s, workload)
            if all(ledger.beaten(slo.name, lb) for slo in self.slos):
                out += [Outcome(s, workload, slo.name, "pruned", bound_usd=lb,
                                note=f"bound ${lb:.3f} above the top {ledger.k}'s "
                                     f"${ledger.kth(slo.name):.3f}")
                        for slo in self.slos]
                continue
            assert s.prepared is not None
            row = row_of(self.steps(s, s.candidate.stack, workload))
            usd = usd_per_1m(s.usd_per_hour, row.output_tok_s)
            for slo in self.slos:
                ok = row.meets(slo)
                if ok and usd is not None:
                    ledger.add(slo.name, usd, s.prepared.fingerprint)
                out.append(Outcome(s, workload, slo.name, "simulated", row, ok, usd, lb))
                if usd is not None and lb is not None and usd < lb * (1 - 1e-9):
                    self.stats.checks.append(f"{workload} {s.candidate.label}: ${usd:.3f} "
                                             f"below its bound ${lb:.3f}")
        return out

    # --- the sweep's operating points ---------------------------------------------------------
    def sweep(self, subjects: list[Subject], ledger: Ledger,
              use_bound: bool = True) -> list[Outcome]:
        out: list[Outcome] = []
        ready = [s for s in subjects if s.prepared is not None]
        lbs = {id(s): {slo.name: usd_per_1m(s.usd_per_hour, self.slo_bound(s, slo).tok_s)
                       if use_bound else 0.0 for slo in self.slos} for s in ready}
        # cheapest bound first; among equal bounds the fewest GPUs (the cheapest steps) first
        order = sorted(ready, key=lambda s: (min(v if v is not None else math.inf
                                                  for v in lbs[id(s)].values()),
                                             s.candidate.gpus, s.candidate.label))
        for i in range(0, len(order), LANES):
            out += sweep_together(self, order[i:i + LANES], lbs, ledger)
        return out

    def _sweep_one(self, s: Subject, lbs: dict[str, float | None],
                   ledger: Ledger) -> list[Outcome]:
        stack = s.candidate.stack
        _, _, plan = sweep_shape(stack, self.sim.scale)
        g = grid(self.ceiling, plan)
        probes: dict[int, Figures] = {}

        def measure(c: int) -> Figures:
            (f,) = self.steps(s, at_concurrency(stack, c), SWEEP)
            return f

        out = []
        for slo in self.slos:
            lb = lbs[slo.name]
            if lb is None:      # an ITL limit no batch meets: not even c1 can
                lb = math.inf
            if ledger.beaten(slo.name, lb):
                out.append(Outcome(s, SWEEP, slo.name, "pruned", bound_usd=lb, note=(
                    "no batch within the SLO's ITL" if math.isinf(lb) else
                    f"bound ${lb:.3f} above the top {ledger.k}'s ${ledger.kth(slo.name):.3f}")))
                continue
            batches = max(1, self.slo_bound(s, slo).concurrency)
            seen = self._found.setdefault((slo.name, s.candidate.topology), [])
            family, times = _family(s.candidate)
            # where to probe first (a guess: it only decides how many probes it takes): a
            # scaled copy's operating point (the same workers in the same ratio, any router)
            # times the scale, else the bound's batches scaled by where the operating points
            # found so far lay below theirs
            known = self._families.get((slo.name, family))
            first = known * times if known is not None else \
                batches * (statistics.median(seen) if seen else FIRST_GUESS)
            found = operating_point(slo, g, probes, measure, max(1, round(first)),
                                    stop=self._stopper(s, slo, ledger, probes))
            if found.point is not None and not found.at_ceiling:
                seen.append(found.point / batches)
                self._families.setdefault((slo.name, family), found.point / times)
            out.append(self._sweep_outcome(s, slo, found, probes, lb, ledger))
        self._check_a3(s, probes)
        if probes:
            self.note(f"  {s.candidate.label}: " + "; ".join(
                f"{o.slo} {'c' + str(o.row.concurrency) if o.meets and o.row else o.status}"
                for o in out) + f" ({len(probes)} step(s))")
        return out

    def _stopper(self, s: Subject, slo: PredictSlo, ledger: Ledger,
                 probes: dict[int, Figures]) -> Callable[[Figures], str | None]:
        def stop(missed: Figures) -> str | None:
            usd = usd_per_1m(s.usd_per_hour, missed.output_tok_s)
            if usd is None or not ledger.beaten(slo.name, usd) or not _rising(probes):
                return None
            return (f"misses at c{missed.concurrency} with ${usd:.3f}, above the top "
                    f"{ledger.k}'s ${ledger.kth(slo.name):.3f} (A3)")
        return stop

    def _sweep_outcome(self, s: Subject, slo: PredictSlo, found: Search,
                       probes: dict[int, Figures], lb: float, ledger: Ledger) -> Outcome:
        for v in found.violations:
            self.stats.checks.append(f"A1 {s.candidate.label} {slo.name}: {v}")
        if found.stopped is not None:
            return Outcome(s, SWEEP, slo.name, "pruned", bound_usd=lb, note=found.stopped,
                           search=found)
        if found.point is None:
            low = probes[min(probes)]
            return Outcome(s, SWEEP, slo.name, "simulated", row_of([low]), False,
                           usd_per_1m(s.usd_per_hour, low.output_tok_s), lb,
                           f"misses even at c{low.concurrency}", found)
        row = row_of([probes[found.point]])
        usd = usd_per_1m(s.usd_per_hour, row.output_tok_s)
        if usd is not None:
            assert s.prepared is not None
            ledger.add(slo.name, usd, s.prepared.fingerprint)
            if math.isfinite(lb) and lb > 0:
                self.stats.a2_ratio[slo.name] = max(self.stats.a2_ratio.get(slo.name, 0.0),
                                                    lb / usd)
            if math.isfinite(lb) and usd < lb * (1 - 1e-9):
                self.stats.checks.append(f"A2 broken: {s.candidate.label} {slo.name} "
                                         f"${usd:.3f} below its bound ${lb:.3f}")
        note = f"still meets at the ceiling c{found.point}" if found.at_ceiling else ""
        return Outcome(s, SWEEP, slo.name, "simulated", row, True, usd, lb, note, found)

    def _check_a3(self, s: Subject, probes: dict[int, Figures]) -> None:
        if not _rising(probes):
            self.stats.checks.append(f"A3 {s.candidate.label}: output tok/s falls as "
                                     f"concurrency rises ({_series(probes)})")


def _family(c: Candidate) -> tuple[tuple, int]:
    """The candidate's workers with their replica counts divided by their greatest common
    divisor, and that divisor: 2 prefill + 4 decode is 2 x (1 prefill + 2 decode)."""
    times = math.gcd(*(t.replicas for t in c.tiers))
    return (c.precision, c.topology, tuple((t.role, t.group, t.tp, t.replicas // times)
                                           for t in c.tiers)), times


def _rising(probes: dict[int, Figures]) -> bool:
    """Output tok/s does not fall (beyond A3_TOLERANCE) as concurrency rises."""
    seen = [probes[c].output_tok_s or 0.0 for c in sorted(probes)]
    return all(b >= a * (1 - A3_TOLERANCE) for a, b in zip(seen, seen[1:], strict=False))


def _series(probes: dict[int, Figures]) -> str:
    return ", ".join(f"c{c} {probes[c].output_tok_s or 0:.0f}" for c in sorted(probes))
