"""The report's intervals and verdicts calibrated on synthetic latencies whose truth is known
(stacks/sizing/sampling.py; seeded, vectorised: hundreds of trials at once).

Shapes measured on the demo's rehearsal (runs of local-agg / local-disagg, 2026-12-06): a
sweep step's TTFT is lognormal with a log-sd of 0.09-0.14 (0.12 here), a prefix-cache or
sequence-distribution step's 0.35-0.65 (0.4 here), a per-request ITL's 0.01-0.06 (0.04 here);
a burst whose queued half waits for a batch is bimodal (half near 45 ms, half near 140 ms), its
median between the modes. Steps held 21-167 requests.

- two samples from one distribution: indistinguishable in >= 93 % of trials;
- a planted 10 % shift: detected in >= 80 % of trials wherever the planning rule (the MDD at
  95 % / 80 % power) says the sample resolves it, and, where it says not, at the number of
  requests it names instead (a sweep step's TTFT at 21 and 32 requests cannot be told 10 %
  apart: it takes 47);
- the interval of a known quantile covers it in 93-97 % of trials; a p99 from fewer than 368
  requests gets no interval at all.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from stacks.sizing import sampling as s

SIZES = (21, 32, 64, 167)
TRIALS = 400


def lognormal(sigma: float):
    def draw(rng: np.random.Generator, size, shift: float = 1.0) -> np.ndarray:
        return rng.lognormal(math.log(50.0), sigma, size) * shift
    return draw


def burst(rng: np.random.Generator, size, shift: float = 1.0) -> np.ndarray:
    """Half the requests served at once (~45 ms), half queued behind a batch (~140 ms)."""
    queued = rng.random(size) < 0.5
    return np.where(queued, rng.normal(140.0, 25.0, size), rng.normal(45.0, 4.0, size)) * shift


SHAPES = {"sweep TTFT": lognormal(0.12), "prefix-cache TTFT": lognormal(0.4),
          "ITL": lognormal(0.04), "burst TTFT": burst}


def significant(draw, n: int, shift: float, seed: int, trials: int = TRIALS) -> float:
    """Share of trials whose exact-bootstrap difference of medians is significant at 5 %."""
    rng = np.random.default_rng(seed)
    a = np.sort(draw(rng, (trials, n)), axis=1)
    b = np.sort(draw(rng, (trials, n), shift), axis=1)
    _, _, p, _ = s.bootstrap_difference(a, b, 0.5)
    return float(np.mean(p < s.ALPHA))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_two_samples_of_one_distribution_are_indistinguishable(shape):
    for i, n in enumerate(SIZES):
        false_alarms = significant(SHAPES[shape], n, 1.0, seed=100 + i)
        assert 1 - false_alarms >= 0.93, (shape, n, false_alarms)


def test_a_normal_interval_would_not_be_calibrated_on_a_burst():
    """Why the difference uses the exact bootstrap's percentiles: a normal interval from the
    same standard errors calls identical bursts different in one pair of eight (the median's
    sampling distribution has two modes of its own)."""
    rng = np.random.default_rng(7)
    a = np.sort(burst(rng, (TRIALS, 32)), axis=1)
    b = np.sort(burst(rng, (TRIALS, 32)), axis=1)
    se = np.hypot(*(np.array([s.quantile_se(x, 0.5) for x in side]) for side in (a, b)))
    d = np.median(b, axis=1) - np.median(a, axis=1)
    assert np.mean(np.abs(d) > 1.96 * se) > 0.1
    _, _, p, _ = s.bootstrap_difference(a, b, 0.5)
    assert np.mean(p < 0.05) < 0.07


def planned_mdd(draw, n: int, seed: int) -> float:
    """The planning rule's relative MDD at n requests a side, from the median's standard error
    at n (the sd over 1,000 pilot samples of n: a well-measured spread, so the test pins the
    rule, not the noise of one pilot; the plan's own pilot is one simulated sample, whose
    standard error is itself uncertain by about a quarter at these sizes, docs/stacks.md)."""
    pilot = draw(np.random.default_rng(seed), (1_000, n))
    se = float(np.median(pilot, axis=1).std(ddof=1))
    return s.relative_mdd(math.hypot(se, se), float(np.median(pilot)))


@pytest.mark.parametrize("shape", ["sweep TTFT", "prefix-cache TTFT", "ITL"])
def test_a_planted_ten_percent_shift_is_detected_where_the_plan_says_it_can_be(shape):
    draw = SHAPES[shape]
    needs = []
    for i, n in enumerate(SIZES):
        mdd = planned_mdd(draw, n, seed=200 + i)
        if mdd <= 0.10:
            assert significant(draw, n, 1.10, seed=300 + i) >= 0.80, (shape, n, mdd)
        else:   # not at this sample: the plan names the requests that would
            needs.append(s.requests_to_resolve(n, mdd, 0.10))
            assert needs[-1] > n
    if needs:   # and there it holds (at the fewest it named: the others have more power)
        assert significant(draw, min(needs), 1.10, seed=400, trials=1_000) >= 0.80, \
            (shape, needs)


def test_what_the_demo_sample_sizes_resolve():
    """Said plainly: at the demo's 21 and 32 requests a step, a 10 % TTFT difference in a
    sweep step is beyond its sample (the plan says 47 requests), from 64 on it is within;
    a per-request ITL's is within at every size; a prefix-cache step's TTFT needs ~520."""
    sweep, itl, prefix = (SHAPES[k] for k in ("sweep TTFT", "ITL", "prefix-cache TTFT"))
    need = {n: s.requests_to_resolve(n, planned_mdd(sweep, n, 9), 0.10) for n in SIZES}
    assert need[21] == need[32] == pytest.approx(47, abs=3)
    assert all(planned_mdd(sweep, n, 9) <= 0.10 for n in (64, 167))
    assert all(planned_mdd(itl, n, 9) <= 0.10 for n in SIZES)
    assert s.requests_to_resolve(167, planned_mdd(prefix, 167, 9), 0.10) == \
        pytest.approx(520, rel=0.1)


@pytest.mark.parametrize("shape", ["sweep TTFT", "prefix-cache TTFT", "burst TTFT"])
def test_the_interval_of_a_known_median_covers_it_at_its_level(shape):
    draw = SHAPES[shape]
    truth = float(np.median(draw(np.random.default_rng(1), 2_000_000)))
    for i, n in enumerate(SIZES):
        x = np.sort(draw(np.random.default_rng(500 + i), (2_000, n)), axis=1)
        lo_rank, hi_rank = s.quantile_ranks(n, 0.5)
        covered = np.mean((s.at_rank(x, lo_rank) <= truth) & (truth <= s.at_rank(x, hi_rank)))
        assert 0.93 <= covered <= 0.97, (shape, n, covered)


def test_a_p99_interval_exists_only_from_368_requests_and_then_covers():
    draw = SHAPES["sweep TTFT"]
    truth = 50.0 * math.exp(0.12 * 2.326348)
    assert not s.quantile_interval(draw(np.random.default_rng(2), 167), 0.99).has_interval
    assert s.requests_for_interval(0.99) == 368
    for i, n in enumerate((400, 1_000)):
        x = np.sort(draw(np.random.default_rng(600 + i), (2_000, n)), axis=1)
        lo_rank, hi_rank = s.quantile_ranks(n, 0.99)
        covered = np.mean((s.at_rank(x, lo_rank) <= truth) & (truth <= s.at_rank(x, hi_rank)))
        assert 0.93 <= covered <= 0.97, (n, covered)


def test_a_t_interval_over_repeats_covers_and_a_single_run_has_none():
    rng = np.random.default_rng(3)
    runs = rng.normal(1000.0, 30.0, (4_000, 3))
    est = [s.mean_interval(r) for r in runs]
    covered = np.mean([e.low <= 1000.0 <= e.high for e in est])
    assert 0.93 <= covered <= 0.97
    one = s.mean_interval([1000.0])
    assert not one.has_interval and "single run" in one.method


def test_holm_holds_the_family_wise_error_rate():
    """Ten comparisons of identical samples: the chance that any is called different stays
    at or under 5 % with Holm's adjustment (about 40 % without it)."""
    rng = np.random.default_rng(4)
    a = np.sort(lognormal(0.12)(rng, (TRIALS, 10, 64)), axis=2)
    b = np.sort(lognormal(0.12)(rng, (TRIALS, 10, 64)), axis=2)
    _, _, p, _ = s.bootstrap_difference(a, b, 0.5)
    raw = np.mean((p < 0.05).any(axis=1))
    adjusted = np.mean([min(s.holm(list(row))) < 0.05 for row in p])
    assert raw > 0.2 and adjusted <= 0.05
