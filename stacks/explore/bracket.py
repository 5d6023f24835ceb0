"""A candidate's operating point under an SLO: the highest concurrency of a grid whose step on the
concurrency sweep's request shape still meets it, found by bracketing in simulation (pure but
for the `measure` function it is given).

ASSUMED (A1): SLO attainment is monotonic in concurrency: a step that misses the SLO at c misses
it at every higher c (more requests in flight never lower TTFT or ITL). Under A1 the search
keeps a bracket [lo meets, hi misses] and shrinks it to neighbouring grid points; the answer is
the one a linear scan of the grid gives (tests/test_explore_bracket.py holds them equal, in
simulation too). Which point inside the bracket is probed next is chosen by interpolating the
SLO margin in log concurrency (falling back to the midpoint when the bracket does not halve),
which only changes how many probes it takes. Probes the caller already has (the other SLO's)
seed the bracket; a pair of probes that breaks A1 is reported, never hidden.

The grid: every 2^(k/8) (rounded up: 1, 2, ..., 16, 17, 19, 21, 23, 26, ...; neighbours at most
~9 % apart above 16) plus the plan's own sweep concurrencies, up to a ceiling; an SLO still met
at the ceiling is reported as such.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from stacks.explore.judge import Figures, margin, meets
from stacks.predict.rows import PredictSlo

STEPS_PER_DOUBLING = 8


def grid(ceiling: int, plan: list[int] | None = None) -> list[int]:
    points = {math.ceil(2 ** (k / STEPS_PER_DOUBLING) - 1e-9)
              for k in range(STEPS_PER_DOUBLING * (ceiling.bit_length() + 1))}
    return sorted(c for c in points | set(plan or []) if 1 <= c <= ceiling)


@dataclass
class Search:
    """What one SLO's search found."""
    point: int | None = None        # the operating point (None: not even the lowest meets)
    at_ceiling: bool = False        # still met at the grid's ceiling
    stopped: str | None = None      # why the search stopped early (pruned), if it did
    violations: list[str] = field(default_factory=list)    # probe pairs that break A1


def _bracket(slo: PredictSlo, g: list[int], probes: dict[int, Figures],
             out: Search) -> tuple[int, int]:
    """(lo, hi) grid indices from the probes so far: lo the highest meeting below the lowest
    miss (-1: none), hi the lowest miss (len(g): none)."""
    index = {c: i for i, c in enumerate(g)}
    seen = sorted((index[c], meets(slo, f)) for c, f in probes.items() if c in index)
    hi = next((i for i, ok in seen if not ok), len(g))
    lo = max((i for i, ok in seen if ok and i < hi), default=-1)
    for i, ok in seen:
        if ok and i > hi:
            msg = f"meets at c{g[i]} but misses at c{g[hi]}"
            if msg not in out.violations:
                out.violations.append(msg)
    return lo, hi


def _index_near(g: list[int], target: float, lo: int, hi: int) -> int:
    """The grid index nearest `target` (in log) strictly between lo and hi."""
    return min(range(lo + 1, hi), key=lambda i: abs(math.log(g[i]) - math.log(max(target, 1))))


def _next(slo: PredictSlo, g: list[int], probes: dict[int, Figures], lo: int, hi: int,
          first: int, shrank: bool) -> int:
    """The next grid index to probe. One side unknown: step from the known probe by twice its
    margin in log concurrency (an ITL that grows with the batch puts the crossing near
    c x e^margin; twice that lands past it), at most 4x; both known: interpolate the margin
    between them, or bisect."""
    if lo < 0 and hi >= len(g):
        return first
    if hi >= len(g):                                    # nothing misses yet: go up
        m = margin(slo, probes[g[lo]])
        up = min(4.0, max(1.1, math.exp(2 * m))) if math.isfinite(m) else 2.0
        return _index_near(g, g[lo] * up, lo, len(g))
    if lo < 0:                                          # nothing meets yet: go down
        m = margin(slo, probes[g[hi]])
        down = min(0.9, max(0.25, math.exp(2 * m))) if math.isfinite(m) else 0.5
        return _index_near(g, g[hi] * down, -1, hi)
    m_lo, m_hi = margin(slo, probes[g[lo]]), margin(slo, probes[g[hi]])
    if not shrank or not (math.isfinite(m_lo) and math.isfinite(m_hi)) or m_lo <= m_hi:
        return (lo + hi) // 2
    x = math.log(g[lo]) + (math.log(g[hi]) - math.log(g[lo])) * m_lo / (m_lo - m_hi)
    return _index_near(g, math.exp(x), lo, hi)


def operating_point(slo: PredictSlo, g: list[int], probes: dict[int, Figures],
                    measure: Callable[[int], Figures], first: int,
                    stop: Callable[[Figures], str | None] | None = None) -> Search:
    """Bracket the highest grid concurrency meeting `slo`. `probes` (concurrency -> figures)
    is read and filled; `first` is where to probe first (while inside the bracket the probes
    so far leave); `stop(missed)` may end
    the search after a missing probe (the caller's pruning), saying why."""
    out = Search()
    shrank = True
    guess = _index_near(g, first, -1, len(g))
    while True:
        lo, hi = _bracket(slo, g, probes, out)
        if hi - lo <= 1:
            break
        # the caller's guess goes first while it lies inside the bracket (probes of another
        # SLO may have opened one already)
        i = guess if lo < guess < hi and g[guess] not in probes else \
            _next(slo, g, probes, lo, hi, guess, shrank)
        probes[g[i]] = f = measure(g[i])
        new_lo, new_hi = _bracket(slo, g, probes, out)
        # interpolate again only while each probe at least halves the bracket
        shrank = (new_hi - new_lo) * 2 <= (hi - lo)
        if not meets(slo, f) and stop is not None and (why := stop(f)) is not None:
            out.stopped = why
            return out
    out.point = g[lo] if lo >= 0 else None
    out.at_ceiling = lo == len(g) - 1
    return out


def linear_scan(slo: PredictSlo, g: list[int], measure: Callable[[int], Figures]) -> int | None:
    """The highest grid concurrency meeting `slo`, by probing every point (the reference the
    bracketing search is tested against)."""
    met = [c for c in g if meets(slo, measure(c))]
    return max(met) if met else None
