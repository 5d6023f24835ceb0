"""The explore's search on the real simulation (NVIDIA DynoSim in the engine's environment, the
mockers' AIConfigurator timing tables) over a small space (one g6e.12xlarge: 4 L40S, BF16) at
quick scale: the bracketing search finds what a linear scan of the grid finds (A1 holds here),
and the pruned search's best is the exhaustive search's at every workload and SLO."""

from __future__ import annotations

import pytest

from stacks.config.loader import parse_config
from stacks.explore.bracket import grid, linear_scan, operating_point
from stacks.explore.cache import StepCache
from stacks.explore.judge import Figures
from stacks.explore.results import ranked
from stacks.explore.run import explore
from stacks.explore.search import SWEEP, at_concurrency, sweep_shape
from stacks.predict.rows import SLOS

pytestmark = [pytest.mark.engine, pytest.mark.predictor]

BASE = {"target": "aws", "cluster": {"region": "us-east-1", "nodeGroups": [
    {"name": "g6e", "instanceType": "g6e.12xlarge", "count": 1,
     "availabilityZone": "us-east-1a"},
    {"name": "cpu", "instanceType": "m7i.4xlarge", "count": 2}]},
    "model": {"id": "Qwen/Qwen3-30B-A3B"}, "cost": {"budgetUsd": 500}}


def _small(c) -> bool:
    return c.precision == "bf16" and c.offload == "none"


@pytest.fixture(scope="module")
def sim():
    from workloads.sim.on_base import BaseSimulator
    s = BaseSimulator.for_base(parse_config("base-l40s", BASE), "quick")
    yield s
    s.close()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return StepCache(tmp_path_factory.mktemp("explore-cache"))


def test_the_bracket_finds_what_a_linear_scan_of_the_grid_finds(sim, cache):
    ex = explore(sim.base, sim, list(SLOS), k=1, only=[SWEEP], cache=cache, exhaustive=True,
                 space_filter=lambda c: _small(c) and c.router == "round-robin")
    from stacks.explore.search import Explorer
    explorer = Explorer(sim, list(SLOS), 1, cache=cache)
    checked = 0
    for s in ex.subjects:
        if s.prepared is None:
            continue
        stack = s.candidate.stack
        g = grid(64, sweep_shape(stack, "quick")[2])

        def measure(c: int, s=s, stack=stack) -> Figures:
            (f,) = explorer.steps(s, at_concurrency(stack, c), SWEEP)
            return f
        for slo in SLOS:
            found = operating_point(slo, g, {}, measure, first=8)
            assert not found.violations
            assert found.point == linear_scan(slo, g, measure), (s.candidate.label, slo.name)
            checked += 1
    assert checked >= 6


def test_the_pruned_search_finds_the_exhaustive_best(sim, cache):
    only = [SWEEP, "prefix_cache"]
    pruned = explore(sim.base, sim, list(SLOS), k=1, only=only, cache=cache,
                     space_filter=_small)
    full = explore(sim.base, sim, list(SLOS), k=1, only=only, cache=cache, exhaustive=True,
                   space_filter=_small)
    found = 0
    for w in only:
        for slo in SLOS:
            best = [[(r.candidate.label, r.outcome.usd) for r in ranked(e, w, slo.name)
                     if r.rank == 1] for e in (pruned, full)]
            assert best[0] == best[1], (w, slo.name)
            found += bool(best[0])
    assert found >= 2
    assert sum(o.status == "pruned" for o in pruned.outcomes) > 0
    assert not [c for c in pruned.stats.checks if c.startswith(("A1", "A2", "A3"))]
