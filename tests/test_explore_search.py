"""The explore's search (stacks/explore/search.py, bracket.py) on a stand-in simulator
(tests/explore_fakes.py): the pruned search finds what the exhaustive one finds, the bracket
finds what a linear scan finds, and a broken assumption is caught, not hidden."""

from __future__ import annotations

import pytest
from explore_fakes import FakeSimulator

from stacks.config.loader import parse_config
from stacks.explore.bracket import grid, linear_scan, operating_point
from stacks.explore.judge import Figures
from stacks.explore.results import ranked
from stacks.explore.run import explore
from stacks.predict.rows import SLOS

# 8 A100 + 4 L40S: a space of a few hundred candidates, quick to search on the stand-in.
BASE = {"target": "aws", "cluster": {"region": "us-east-1", "nodeGroups": [
    {"name": "p4d", "instanceType": "p4d.24xlarge", "count": 1,
     "availabilityZone": "us-east-1a"},
    {"name": "g6e", "instanceType": "g6e.12xlarge", "count": 1,
     "availabilityZone": "us-east-1a"},
    {"name": "cpu", "instanceType": "m7i.4xlarge", "count": 2}]},
    "model": {"id": "Qwen/Qwen3-30B-A3B"}, "cost": {"budgetUsd": 500}}


@pytest.fixture(scope="module")
def base():
    return parse_config("base-small", BASE)


def _top(ex, k):
    return {(w, slo.name): [(r.candidate.label, round(r.outcome.usd, 9))
                            for r in ranked(ex, w, slo.name)[:k] if r.rank is not None]
            for w in ex.workloads for slo in ex.slos}


@pytest.mark.parametrize("k", [1, 3])
def test_the_pruned_search_finds_the_exhaustive_top_k(base, tmp_path, k):
    """At every workload and SLO, the pruned search's top K (the best first) are the
    exhaustive search's, over the same space and tables, while it simulates far less."""
    pruned_sim, full_sim = FakeSimulator(tmp_path), FakeSimulator(tmp_path)
    pruned = explore(base, pruned_sim, list(SLOS), k=k)
    full = explore(base, full_sim, list(SLOS), k=k, exhaustive=True)
    assert _top(pruned, k) == _top(full, k)
    assert all(len(v) == k for v in _top(full, k).values())
    assert sum(o.status == "pruned" for o in pruned.outcomes) > 100
    assert not [o for o in full.outcomes if o.status == "pruned"]
    assert len(pruned_sim.calls) < len(full_sim.calls) / 3
    assert not pruned.stats.checks


def test_a_bound_the_simulation_beats_is_caught_and_the_slo_searched_again(base, tmp_path):
    """A simulation faster than the table bound allows (A2 broken): the search says so and
    searches the sweep again without the bound, so its best is still the exhaustive one's."""
    fast = explore(base, FakeSimulator(tmp_path, slowdown=0.7), list(SLOS), k=1)
    full = explore(base, FakeSimulator(tmp_path, slowdown=0.7), list(SLOS), k=1,
                   exhaustive=True)
    assert any(c.startswith("A2 broken") for c in fast.stats.checks)
    assert _top(fast, 1) == _top(full, 1)


def _steps(threshold: int):
    """A step that meets the SLO below `threshold` and misses from it on."""
    def measure(c: int) -> Figures:
        itl = 10.0 + 10.0 * c / threshold
        return Figures(f"s/c{c}", c, 100.0, itl, 1000.0 / itl, 100.0 * c, 120.0, 10)
    return measure


@pytest.mark.parametrize("threshold", [1, 2, 7, 16, 17, 40, 100, 333, 5000])
@pytest.mark.parametrize("first", [1, 64, 1000])
def test_the_bracket_finds_what_a_linear_scan_finds(threshold, first):
    g = grid(2048, [1, 2, 4, 8, 16, 32, 64])
    slo = SLOS[0]        # per-user >= 50 tok/s: ITL <= 20 ms, so c < threshold meets
    calls: list[int] = []

    def measure(c):
        calls.append(c)
        return _steps(threshold)(c)
    found = operating_point(slo, g, {}, measure, first)
    assert found.point == linear_scan(slo, g, _steps(threshold))
    assert found.at_ceiling == (threshold > 2048)
    assert len(calls) <= 12 < len(g) and not found.violations


def test_probes_already_made_seed_the_bracket_and_a_non_monotonic_pair_is_reported():
    g = grid(256)
    slo = SLOS[0]
    seeded = {c: _steps(50)(c) for c in (16, 128)}
    calls: list[int] = []
    found = operating_point(slo, g, seeded, lambda c: calls.append(c) or _steps(50)(c), 1)
    assert found.point == linear_scan(slo, g, _steps(50)) == 50
    assert 16 not in calls and 128 not in calls
    odd = {10: _steps(5)(10), 20: _steps(50)(20)}      # misses at c10, meets at c20
    found = operating_point(slo, g, odd, _steps(5), 1)
    assert found.violations[0] == "meets at c20 but misses at c10"
    assert all(v.startswith("meets at c20 but misses at c") for v in found.violations)


class _InOrder:
    """Stands in for the lanes' thread pool: runs the submitted searches one after another when
    the first answer is asked for, in a chosen order (reversed: the second lane "finishes"
    first), so the test decides which lane ends first instead of the scheduler."""

    def __init__(self, reverse: bool) -> None:
        self.reverse, self.pending = reverse, []

    def __call__(self, max_workers: int):
        self.pending = []
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def submit(self, fn, *args):
        from concurrent.futures import Future
        future: Future = Future()
        self.pending.append((future, fn, args))
        outer = self

        class Lazy:
            def result(self):
                for f, g, a in (reversed(outer.pending) if outer.reverse else outer.pending):
                    if not f.done():
                        f.set_result(g(*a))
                return future.result()
        return Lazy()


def _everything(ex):
    return [(o.subject.candidate.name, o.workload, o.slo, o.status, o.meets, o.usd,
             o.row.concurrency if o.row else None, o.note) for o in ex.outcomes]


def test_two_lanes_find_the_same_whatever_order_they_finish_in(base, tmp_path, monkeypatch):
    """Two candidates searched at once start from one state and are merged in the visiting
    order: every outcome (what was pruned and why, every operating point) and the statistics
    are the same whichever lane finishes first."""
    from stacks.explore import lanes
    assert lanes.LANES == 2
    runs = []
    for reverse in (False, True):
        monkeypatch.setattr(lanes, "ThreadPoolExecutor", _InOrder(reverse))
        runs.append(explore(base, FakeSimulator(tmp_path), list(SLOS), k=1,
                            only=["concurrency_sweep"]))
    assert _everything(runs[0]) == _everything(runs[1])
    assert (runs[0].stats.probes, runs[0].stats.checks) == \
        (runs[1].stats.probes, runs[1].stats.checks)


def test_a_lanes_findings_are_merged_whole_and_in_order():
    from types import SimpleNamespace

    from stacks.explore import lanes
    from stacks.explore.search import Ledger, Stats
    ex = SimpleNamespace(_found={("s", "agg"): [0.9]}, _families={("s", "f1"): 10.0},
                         stats=Stats(probes=1, checks=["old"], a2_ratio={"s": 1.1}),
                         note=None)
    said: list[str] = []
    ex.note = said.append
    ledger = Ledger(2, False, {"s": {"x": 1.0}})
    done = lanes.Lane(SimpleNamespace(
        _found={("s", "agg"): [0.9, 0.8], ("t", "dis"): [0.7]},
        _families={("s", "f1"): 99.0, ("s", "f2"): 20.0},
        stats=Stats(probes=3, cache_hits=2, checks=["old", "new"], a2_ratio={"s": 1.3})),
        Ledger(2, False, {"s": {"x": 1.0, "y": 0.5}, "t": {"z": 2.0}}), ["found y"])
    lanes.merge(ex, ledger, done)   # type: ignore[arg-type]
    assert ledger.best == {"s": {"x": 1.0, "y": 0.5}, "t": {"z": 2.0}}
    assert ex._found == {("s", "agg"): [0.9, 0.8], ("t", "dis"): [0.7]}
    assert ex._families == {("s", "f1"): 10.0, ("s", "f2"): 20.0}   # the first found stays
    assert (ex.stats.probes, ex.stats.cache_hits, ex.stats.checks, ex.stats.a2_ratio) == \
        (4, 2, ["old", "new"], {"s": 1.3})
    assert said == ["found y"]
