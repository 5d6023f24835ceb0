"""How precisely a sample pins a figure, and the smallest difference two samples resolve (pure:
numpy and scipy only). The report's intervals and verdicts (reports/tables/intervals.py,
reports/comparisons/verdicts.py) and the plan's resolvable differences (stacks/plan/resolution.py)
are one method, so a plan's promise is what its report will judge.

- A quantile of one step (TTFT, ITL p50 / p99 over its completed requests): the exact
  distribution-free order-statistic interval. The rank of the sample's k-th value below the
  population quantile is binomial, so P(X_(k) <= x_q) = I_q(k, n - k + 1) (the regularised
  incomplete beta); the bounds sit at the fractional ranks where that is 97.5 % and 2.5 %,
  interpolated between neighbouring order statistics (Hettmansperger & Sheather 1986, Nyblom
  1992), which holds 95 % coverage where whole ranks give 97-98 % at 21-64 requests. When
  even the largest value is below the upper rank (p99 from fewer than 367 requests) the upper
  bound is unbounded: no two-sided interval exists at that sample, and none is invented.
- The difference of two independent samples' quantiles (agg vs disagg at one step): the
  percentile interval of its bootstrap distribution, computed exactly instead of by resampling.
  A resample's k-th order statistic is at most x_(j) with probability P(Bin(n, j/n) >= k)
  (Hutson & Ernst 2000), so each side's bootstrap quantile is a known discrete distribution
  over its own values, and their difference the convolution of the two: deterministic, no seed,
  and right where a normal approximation is not (a burst's TTFT with its queued half, whose
  median falls between two modes, sees 35 % false alarms under a normal interval).
- Figures of a whole step (output tok/s, $ per 1M) across repeats: a t-interval (Welch for a
  difference) with two repeats or more; a single run has none.
- Proportions (goodput): Wilson's interval; a difference, Agresti-Caffo's.
- A family of comparisons: Holm's step-down adjustment of their p-values.
- Planning: the minimal detectable difference (MDD) of a comparison at significance `ALPHA`
  and power `POWER` is (z_(1 - alpha/2) + z_power) x its standard error; it shrinks with the
  square root of the requests, so resolving a target takes (MDD / target)^2 times the sample.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize, special, stats

LEVEL = 0.95
ALPHA = 1 - LEVEL
POWER = 0.80
# Bootstrap masses below this are left out of a convolution (they move no 2.5 % quantile).
_NEGLIGIBLE = 1e-12


@dataclass(frozen=True)
class Estimate:
    """A figure with its 95 % interval; `se` and `df` describe it for differences (df inf: a
    normal interval). No interval: low and high NaN, and `method` says why."""

    value: float
    low: float
    high: float
    se: float
    df: float
    n: int
    method: str

    @property
    def has_interval(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


@dataclass(frozen=True)
class Difference:
    """subject - reference, its 95 % interval and the p-value of "no difference"."""

    value: float
    low: float
    high: float
    p_value: float
    se: float
    method: str

    @property
    def judged(self) -> bool:
        return not math.isnan(self.p_value)


def _none(value: float, n: int, why: str) -> Estimate:
    return Estimate(value, math.nan, math.nan, math.nan, math.nan, n, why)


def _no_difference(value: float, why: str) -> Difference:
    return Difference(value, math.nan, math.nan, math.nan, math.nan, why)


def _clean(values: Sequence[float] | np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    return np.sort(v[~np.isnan(v)])


# --- one quantile -------------------------------------------------------------------------

def quantile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The reports' percentile: linear interpolation (numpy's default)."""
    v = _clean(values)
    return float(np.quantile(v, q)) if len(v) else math.nan


@lru_cache(maxsize=4096)
def quantile_ranks(n: int, q: float, level: float = LEVEL) -> tuple[float, float]:
    """Fractional ranks (1-based) of the bounds of the order-statistic interval of the
    q-quantile from n values: NaN below (no lower bound) or inf above (no upper bound)."""
    tail = (1 - level) / 2

    def solve(p: float) -> float:
        # I_q(k, n - k + 1) = P(X_(k) <= x_q) falls with k
        def f(k: float) -> float:
            return float(special.betainc(k, n - k + 1, q)) - p
        if n < 1 or f(1.0) < 0:
            return math.nan
        if f(float(n)) > 0:
            return math.inf
        return float(optimize.brentq(f, 1.0, float(n), xtol=1e-9))
    return solve(1 - tail), solve(tail)


def at_rank(sorted_values: np.ndarray, rank: float) -> np.ndarray | float:
    """The order statistic at a fractional 1-based rank, interpolated (along the last axis)."""
    n = sorted_values.shape[-1]
    if not math.isfinite(rank):
        return math.nan
    lo = min(max(int(math.floor(rank)), 1), n)
    hi = min(lo + 1, n)
    frac = rank - math.floor(rank)
    return sorted_values[..., lo - 1] * (1 - frac) + sorted_values[..., hi - 1] * frac


def quantile_interval(values: Sequence[float] | np.ndarray, q: float,
                      level: float = LEVEL) -> Estimate:
    """The sample's q-quantile with its order-statistic interval (module docstring); `se` is
    the sd of its exact bootstrap distribution."""
    v = _clean(values)
    n = len(v)
    if n == 0:
        return _none(math.nan, 0, "no completed request")
    value = float(np.quantile(v, q))
    lo_rank, hi_rank = quantile_ranks(n, q, level)
    if not (math.isfinite(lo_rank) and math.isfinite(hi_rank)):
        need = requests_for_interval(q, level)
        return _none(value, n, f"no two-sided interval from {n} requests (p{q * 100:g} needs "
                               f">= {need})")
    _, masses, support = _bootstrap(v, q)
    mean = float(np.dot(masses, support))
    se = math.sqrt(max(float(np.dot(masses, (support - mean) ** 2)), 0.0))
    return Estimate(value, float(at_rank(v, lo_rank)), float(at_rank(v, hi_rank)), se,
                    math.inf, n, "order statistics")


def requests_for_interval(q: float, level: float = LEVEL) -> int:
    """The fewest values with a two-sided order-statistic interval of the q-quantile: the
    largest must exceed it with probability >= (1 - level) / 2."""
    return math.ceil(math.log((1 - level) / 2) / math.log(q)) if 0 < q < 1 else 1


# --- the exact bootstrap of a quantile and of a difference of two -------------------------

def bootstrap_rank(n: int, q: float) -> int:
    """The order statistic (1-based) nearest numpy's interpolated position (n - 1) q + 1."""
    return min(max(int(round((n - 1) * q)) + 1, 1), n)


@lru_cache(maxsize=4096)
def bootstrap_masses(n: int, q: float) -> tuple[np.ndarray, int]:
    """The probability that a resample's quantile is each order statistic, kept over the
    ranks that matter: (masses, first rank index 0-based)."""
    k = bootstrap_rank(n, q)
    j = np.arange(n + 1) / n
    cdf = special.betainc(k, n - k + 1, j)    # P(Bin(n, j/n) >= k): at most the j-th value
    masses = np.diff(cdf)
    keep = np.nonzero(masses > _NEGLIGIBLE)[0]
    first, last = int(keep[0]), int(keep[-1]) + 1
    return masses[first:last] / masses[first:last].sum(), first


def _bootstrap(sorted_values: np.ndarray, q: float) -> tuple[int, np.ndarray, np.ndarray]:
    masses, first = bootstrap_masses(sorted_values.shape[-1], q)
    return first, masses, sorted_values[..., first:first + len(masses)]


def _weighted_quantiles(values: np.ndarray, weights: np.ndarray,
                        probs: Sequence[float]) -> np.ndarray:
    """Quantiles of the discrete distribution (values, weights) along the last axis: the
    smallest value whose cumulative weight reaches each prob."""
    order = np.argsort(values, axis=-1, kind="stable")
    v = np.take_along_axis(values, order, axis=-1)
    cum = np.cumsum(weights[order], axis=-1)      # weights: one per position of the last axis
    out = []
    for p in probs:
        idx = np.argmax(cum >= p - 1e-12, axis=-1)
        out.append(np.take_along_axis(v, idx[..., None], axis=-1)[..., 0])
    return np.stack(out, axis=-1)


def bootstrap_difference(a_sorted: np.ndarray, b_sorted: np.ndarray, q: float,
                         level: float = LEVEL) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                        np.ndarray]:
    """(low, high, p-value, sd) of quantile(b) - quantile(a) under the exact bootstrap, for
    sorted samples (or batches of them along leading axes: the calibration tests run
    hundreds of trials at once). The p-value is twice the smaller tail at zero."""
    _, ma, sa = _bootstrap(a_sorted, q)
    _, mb, sb = _bootstrap(b_sorted, q)
    diffs = sb[..., None, :] - sa[..., :, None]          # [..., i (a), j (b)]
    weights = (ma[:, None] * mb[None, :]).ravel()
    flat = diffs.reshape(*diffs.shape[:-2], -1)
    tail = (1 - level) / 2
    bounds = _weighted_quantiles(flat, weights, (tail, 1 - tail))
    below = (np.where(flat <= 0, 1.0, 0.0) * weights).sum(axis=-1)
    above = (np.where(flat >= 0, 1.0, 0.0) * weights).sum(axis=-1)
    p = np.minimum(1.0, 2 * np.minimum(below, above))
    var_a = (ma * sa ** 2).sum(axis=-1) - (ma * sa).sum(axis=-1) ** 2
    var_b = (mb * sb ** 2).sum(axis=-1) - (mb * sb).sum(axis=-1) ** 2
    sd = np.sqrt(np.maximum(var_a + var_b, 0.0))
    return bounds[..., 0], bounds[..., 1], p, sd


def quantile_difference(reference: Sequence[float] | np.ndarray,
                        subject: Sequence[float] | np.ndarray, q: float,
                        level: float = LEVEL) -> Difference:
    """quantile(subject) - quantile(reference) of two independent samples of requests, with
    the exact bootstrap's percentile interval and p-value; none where a side has no two-sided
    order-statistic interval of its own (too few requests for that quantile)."""
    a, b = _clean(reference), _clean(subject)
    value = (float(np.quantile(b, q)) - float(np.quantile(a, q))) if len(a) and len(b) \
        else math.nan
    need = requests_for_interval(q, level)
    if min(len(a), len(b)) < max(need, 2):
        return _no_difference(value, f"not judged: p{q * 100:g} needs >= {need} requests a "
                                     f"side ({len(a)} and {len(b)})")
    lo, hi, p, sd = bootstrap_difference(a, b, q, level)
    return Difference(value, float(lo), float(hi), float(p), float(sd), "exact bootstrap")


# --- figures of whole steps across repeats ------------------------------------------------

def t_crit(df: float, level: float = LEVEL) -> float:
    q = 1 - (1 - level) / 2
    return float(stats.norm.ppf(q) if math.isinf(df) else stats.t.ppf(q, df))


def mean_interval(samples: Sequence[float] | np.ndarray, level: float = LEVEL) -> Estimate:
    """The repeats' mean with its t-interval; one repeat: the value, no interval."""
    v = _clean(samples)
    if len(v) == 0:
        return _none(math.nan, 0, "not measured")
    mean = float(v.mean())
    if len(v) < 2:
        return _none(mean, 1, "single run, no interval: needs >= 2 repeats")
    se = float(v.std(ddof=1) / math.sqrt(len(v)))
    half = t_crit(len(v) - 1, level) * se
    return Estimate(mean, mean - half, mean + half, se, float(len(v) - 1), len(v),
                    f"t over {len(v)} repeats")


def welch_df(se_a: float, df_a: float, se_b: float, df_b: float) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference (an infinite df adds no term)."""
    num = (se_a ** 2 + se_b ** 2) ** 2
    den = sum(se ** 4 / df for se, df in ((se_a, df_a), (se_b, df_b))
              if not math.isinf(df) and df > 0)
    return num / den if den > 0 else math.inf


def estimate_difference(reference: Estimate, subject: Estimate,
                        level: float = LEVEL) -> Difference:
    """subject - reference of two independent estimates from their standard errors (t with
    Welch's df, normal when both are)."""
    value = subject.value - reference.value
    if math.isnan(reference.se) or math.isnan(subject.se):
        why = next(e.method for e in (reference, subject) if math.isnan(e.se))
        return _no_difference(value, f"not judged: {why}")
    se = math.hypot(reference.se, subject.se)
    df = welch_df(reference.se, reference.df, subject.se, subject.df)
    if se == 0:
        return Difference(value, value, value, 0.0 if value else 1.0, 0.0, "exact (no spread)")
    half = t_crit(df, level) * se
    stat = abs(value) / se
    p = float(2 * (stats.norm.sf(stat) if math.isinf(df) else stats.t.sf(stat, df)))
    method = "normal" if math.isinf(df) else f"Welch t, df {df:.1f}"
    return Difference(value, value - half, value + half, p, se, method)


# --- proportions --------------------------------------------------------------------------

def proportion_interval(k: int, n: int, level: float = LEVEL) -> Estimate:
    """k of n with Wilson's score interval."""
    if n <= 0:
        return _none(math.nan, 0, "no request")
    z = t_crit(math.inf, level)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Estimate(p, centre - half, centre + half, math.sqrt(p * (1 - p) / n), math.inf, n,
                    "Wilson")


def proportion_difference(k_ref: int, n_ref: int, k_sub: int, n_sub: int,
                          level: float = LEVEL) -> Difference:
    """k_sub/n_sub - k_ref/n_ref with Agresti-Caffo's interval (one success and one failure
    added to each side), which holds its level at 0 % and 100 % too."""
    if n_ref <= 0 or n_sub <= 0:
        return _no_difference(math.nan, "not judged: no request on a side")
    value = k_sub / n_sub - k_ref / n_ref
    pa, pb = (k_ref + 1) / (n_ref + 2), (k_sub + 1) / (n_sub + 2)
    se = math.sqrt(pa * (1 - pa) / (n_ref + 2) + pb * (1 - pb) / (n_sub + 2))
    z = t_crit(math.inf, level)
    centre = pb - pa
    p = float(2 * stats.norm.sf(abs(centre) / se)) if se > 0 else 1.0
    return Difference(value, centre - z * se, centre + z * se, p, se, "Agresti-Caffo")


# --- a family of comparisons --------------------------------------------------------------

def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted in the family)."""
    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    m = len(idx)
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


# --- planning -----------------------------------------------------------------------------

def detectable_multiplier(alpha: float = ALPHA, power: float = POWER) -> float:
    """z_(1 - alpha/2) + z_power: the MDD in standard errors of the difference."""
    return float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))


# The exact bootstrap's percentile test is a little conservative (its bootstrap distribution is
# discrete): measured on lognormal latencies (log-sd 0.12-0.4, 21-478 requests a side), it
# reaches 76-81 % power at 1.0 x the normal-theory MDD and 82-84 % at 1.1 x (2,000 trials);
# the plan quotes 1.15 x, so the difference it promises, the report's verdicts find at least
# 4 times in 5 (tests/test_sampling_calibration.py).
BOOTSTRAP_MARGIN = 1.15


def minimal_detectable(se_difference: float, alpha: float = ALPHA,
                       power: float = POWER) -> float:
    """The smallest difference a comparison with this standard error detects at `alpha` with
    `power`, as the report's exact-bootstrap verdict judges it (BOOTSTRAP_MARGIN)."""
    return BOOTSTRAP_MARGIN * detectable_multiplier(alpha, power) * se_difference


def relative_mdd(se_difference: float, reference: float, alpha: float = ALPHA,
                 power: float = POWER) -> float:
    """minimal_detectable as a share of the reference value (NaN without one)."""
    if not reference or math.isnan(reference):
        return math.nan
    return minimal_detectable(se_difference, alpha, power) / abs(reference)


def requests_to_resolve(requests: int, mdd: float, target: float) -> int:
    """The requests a side that resolve `target` where `requests` resolve `mdd` (the same
    units; standard errors fall with the square root of the sample)."""
    scale = scale_to_resolve(mdd, target)
    return requests if math.isnan(scale) else max(requests, math.ceil(requests * scale))


def quantile_se(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The sd of the q-quantile's exact bootstrap distribution (the standard error the
    difference's interval stands on); NaN without values."""
    v = _clean(values)
    if len(v) == 0:
        return math.nan
    _, masses, support = _bootstrap(v, q)
    mean = float(np.dot(masses, support))
    return math.sqrt(max(float(np.dot(masses, (support - mean) ** 2)), 0.0))


def scale_to_resolve(mdd: float, target: float) -> float:
    """How many times the sample a difference of `target` needs, when `mdd` is what this
    sample resolves (standard errors fall with the square root of the sample)."""
    if math.isnan(mdd) or target <= 0:
        return math.nan
    return (mdd / target) ** 2


def mdd_over_repeats(sd_a: float, sd_b: float, repeats: int, alpha: float = ALPHA,
                     power: float = POWER) -> float:
    """The smallest difference of two whole-step figures (one value per repeat, run-to-run
    standard deviations sd_a, sd_b) that Welch's t over `repeats` a side detects; NaN under
    two repeats (no interval)."""
    if repeats < 2 or math.isnan(sd_a) or math.isnan(sd_b):
        return math.nan
    df = 2 * repeats - 2
    mult = float(stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df))
    return mult * math.sqrt((sd_a ** 2 + sd_b ** 2) / repeats)


def repeats_to_resolve(sd_a: float, sd_b: float, target: float, cap: int = 20) -> int | None:
    """The fewest repeats a side (2 to `cap`) whose mdd_over_repeats reaches `target`; None
    beyond `cap` (workloads.repeats allows at most 20)."""
    for k in range(2, cap + 1):
        if mdd_over_repeats(sd_a, sd_b, k) <= target:
            return k
    return None
