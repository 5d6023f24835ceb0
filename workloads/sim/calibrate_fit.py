"""The calibration fit (pure): prefill and decode scale factors per timing table key from
measured step figures and the simulation of the same steps.

What a factor means: the timing table of a (GPU system, TP, role) for a model, with every
prefill time x the prefill factor and every decode step time x the decode factor
(stacks/predict/table_scale.py), makes DynoSim's replay of each measured step show the TTFT
and ITL the serving side measured. The replay is fast, so the fit iterates it: simulate every
step on the current factors, update each factor from the steps that inform it, until no
update moves a factor by more than `tol`.

- Decode: a step's ITL (its per-request mean ITL, lower quartile) informs the decode factor of
  the table whose workers decode it (aggregated: the workers'; disaggregated: the decode
  role's). Update: the factor x the geometric mean over those steps of measured / simulated.
- Prefill: a step's TTFT (its lower quartile, TTFT_QUANTILE below; from the dispatch to the
  worker where the frontend's trace says when: measured.py) informs the prefill factor of
  the table whose workers prefill it (aggregated: the workers'; disaggregated: the prefill
  role's), on the steps whose TTFT is dominated by prefill: those where, in the first
  simulation, a request's own prefill (the table's time for its uncached tokens) is at least
  PREFILL_SHARE of its simulated TTFT at the median. Elsewhere TTFT is mostly waiting behind
  other requests' steps, which says more about the live engine's and the replay's timing of
  arrivals than about a prefill; a table none of whose steps is prefill-dominated is fitted
  on all of them, and says so. What remains in a measured TTFT beyond the engine's is a
  constant (the request's and first token's transport), not a scale. So each update is a
  Gauss-Newton step of measured = simulated(factor) + c, with an intercept c per run: a
  step's simulated TTFT moves with the factor by its own prefill, so measured - simulated =
  own prefill / factor x delta + c, solved by least squares on residuals relative to the
  measured TTFT (each step counts alike whether its TTFT is 20 ms or 2 s). The intercept
  needs steps whose own prefills differ (steps of one prompt length cannot tell a scale from
  an offset): per run where each run informing the table has two or more such steps
  spanning SPREAD x; else one intercept pooled over the table's runs where their steps
  together span it; else none, and the fit says that its prefill factor is then a plain
  ratio, biased up by that transport time (the local-agg quick plan at its true factors:
  1.033, its c1 steps all of 1,038 tokens).
- A factor no step informs (disaggregated: the prefill role's decode, the decode role's
  prefill) stays 1.0, marked not fitted.

Residuals: per step, measured against simulated (TTFT with its run's intercept) at the
final factors, relative; per factor, their root mean square over the steps that informed it,
and the factor's standard error (decode: of the geometric mean of ratios; prefill: of the
least-squares step, none where there are no more steps than unknowns), both relative.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

SPREAD = 1.5        # own prefills of a run's steps must span this ratio for an intercept
PREFILL_SHARE = 0.8  # a step's own prefill / its simulated TTFT (median) to inform prefill
# A step's TTFT and ITL are their lower quartiles over its requests, measured and simulated
# alike. A loaded host delays some requests by milliseconds that grow with the work they
# carry: on the 2-core rehearsal machine at load average 9, a c1 step's 17 requests (1,038
# prompt tokens, dispatch to first token) took 24.1-24.6 ms for half of them and 25.5-33.2 ms
# for the rest, its 4,110-token step 70.1-70.8 for 5 of 12 and up to 76.9 for the others. The
# median lands in that tail, by more at the longer prompt, which the fit reads as a larger
# prefill: on that known-truth rehearsal (prefill x0.8, decode x1.25) the median TTFT gives
# 0.821, the lower quartile 0.803; likewise the median ITL gives 1.256 (1.264 in another
# rehearsal), the lower quartile 1.248 (1.249). (A step's simulated figures are as spread as
# its prompts and queueing are, and are read at the same quantile.)
TTFT_QUANTILE = 0.25
ITL_QUANTILE = 0.25
TOL = 0.001         # a factor's last update below this (relative): converged
MAX_ITERATIONS = 12
PER_RUN, POOLED, NONE = "per run", "pooled", "none"


@dataclass(frozen=True, order=True)
class Key:
    """One timing table: the model's timings on a GPU system at a TP, for a worker role."""
    system: str
    tp: int
    role: str           # worker | prefill | decode
    model: str

    def __str__(self) -> str:
        return f"{self.system} TP{self.tp} {self.role} ({self.model})"


@dataclass(frozen=True)
class Evidence:
    """One measured step: its run, the tables its TTFT and ITL inform, its figures."""
    run: str
    step: str
    ttft_key: Key
    itl_key: Key
    ttft_ms: float              # the frontend's per-request TTFT, lower quartile
    itl_ms: float | None        # the frontend's per-request mean ITL, lower quartile


Factors = dict[Key, tuple[float, float]]                      # (prefill, decode)


class SimFigures(NamedTuple):
    """One step's simulation at some factors."""
    ttft_ms: float | None              # TTFT, lower quartile (TTFT_QUANTILE)
    itl_ms: float | None               # per-request mean ITL, lower quartile
    prefill_share: float | None = None  # a request's own prefill / its TTFT, median
    own_prefill_ms: float | None = None  # a request's own prefill on the table, median


Simulated = dict[tuple[str, str], SimFigures]     # (run, step) -> its simulation


@dataclass(frozen=True)
class Factor:
    value: float
    fitted: bool
    steps: int = 0
    se: float | None = None          # relative standard error
    rms: float | None = None         # root mean square of the relative residuals


@dataclass(frozen=True)
class StepResidual:
    run: str
    step: str
    ttft_ms: float
    ttft_sim_ms: float | None        # DynoSim's, plus the run's intercept
    itl_ms: float | None
    itl_sim_ms: float | None
    prefill_share: float | None = None    # in the first simulation
    informs_prefill: bool = False         # its TTFT was fitted (prefill-dominated)

    @property
    def ttft_error(self) -> float | None:
        return None if self.ttft_sim_ms is None else (self.ttft_sim_ms - self.ttft_ms) / \
            self.ttft_ms

    @property
    def itl_error(self) -> float | None:
        if self.itl_ms is None or self.itl_sim_ms is None:
            return None
        return (self.itl_sim_ms - self.itl_ms) / self.itl_ms


@dataclass
class Fit:
    prefill: dict[Key, Factor]
    decode: dict[Key, Factor]
    intercepts: dict[str, float]           # run -> ms added to its simulated TTFT (if fitted)
    intercept_mode: dict[Key, str]         # per run | pooled | none
    # per prefill key: its TTFT steps were the prefill-dominated ones, or all (none was)
    prefill_steps: dict[Key, str]
    steps: list[StepResidual]
    iterations: int
    converged: bool
    history: list[Factors] = field(default_factory=list)

    def factors(self) -> Factors:
        keys = sorted(set(self.prefill) | set(self.decode))
        return {k: (self.prefill[k].value if k in self.prefill else 1.0,
                    self.decode[k].value if k in self.decode else 1.0) for k in keys}


@dataclass(frozen=True)
class PrefillUpdate:
    factor: float                      # the new prefill factor
    move: float                        # |new - old| / new
    intercepts: dict[str, float]
    mode: str
    se: float | None                   # relative


Point = tuple[Evidence, SimFigures]


def _usable(evidence: list[Evidence], sims: Simulated) -> list[Point]:
    out = []
    for e in evidence:
        sim = sims.get((e.run, e.step))
        if sim is not None and sim.ttft_ms and sim.own_prefill_ms and e.ttft_ms > 0:
            out.append((e, sim))
    return out


PREFILL_DOMINATED, ALL_STEPS = "prefill-dominated steps", "all steps (none prefill-dominated)"


def prefill_steps(evidence: list[Evidence], sims: Simulated
                  ) -> tuple[dict[Key, list[Evidence]], dict[Key, str]]:
    """Per prefill key, the steps whose TTFT informs it: the prefill-dominated ones (their
    simulated prefill share at least PREFILL_SHARE), else all, and which it was."""
    chosen: dict[Key, list[Evidence]] = {}
    how: dict[Key, str] = {}
    for key in sorted({e.ttft_key for e in evidence}):
        steps = [e for e in evidence if e.ttft_key == key]
        dominated = [e for e in steps if (sim := sims.get((e.run, e.step))) is not None
                     and sim.prefill_share is not None and sim.prefill_share >= PREFILL_SHARE]
        chosen[key] = dominated or steps
        how[key] = PREFILL_DOMINATED if dominated else ALL_STEPS
    return chosen, how


def _spans(values: list[float]) -> bool:
    return len(values) >= 2 and max(values) >= SPREAD * min(values)


def intercept_mode(points: list[Point]) -> str:
    """How the transport time is fitted for one table's steps (module docstring): the steps'
    own prefill times must differ for a scale to be told from an offset."""
    runs: dict[str, list[float]] = {}
    for e, sim in points:
        runs.setdefault(e.run, []).append(float(sim.own_prefill_ms or 0.0))
    if runs and all(_spans(v) for v in runs.values()):
        return PER_RUN
    if _spans([float(sim.own_prefill_ms or 0.0) for _, sim in points]):
        return POOLED
    return NONE


def _solve(rows: list[list[float]], target: list[float]) -> tuple[list[float], float | None]:
    """Least squares of rows x = target; the first unknown's standard error where there are
    more rows than unknowns."""
    import numpy as np

    a, b = np.asarray(rows, dtype=float), np.asarray(target, dtype=float)
    x, *_ = np.linalg.lstsq(a, b, rcond=None)
    n, k = a.shape
    se = None
    if n > k:
        resid = b - a @ x
        cov = float(resid @ resid) / (n - k) * np.linalg.pinv(a.T @ a)
        se = float(math.sqrt(max(cov[0, 0], 0.0)))
    return [float(v) for v in x], se


def prefill_update(points: list[Point], factor: float) -> PrefillUpdate:
    """One Gauss-Newton step of measured = simulated(factor) + c: a step's simulated TTFT
    moves with the factor by its requests' own prefill (the table's time for their uncached
    tokens, which the factor multiplies), so measured - simulated = own prefill / factor x
    delta + c (c per run, pooled or none), each row relative to its measured TTFT."""
    mode = intercept_mode(points)
    runs = sorted({e.run for e, _ in points}) if mode == PER_RUN else \
        ["*"] if mode == POOLED else []
    rows, target = [], []
    for e, sim in points:
        w = 1.0 / e.ttft_ms
        cols = [1.0 if r in (e.run, "*") else 0.0 for r in runs]
        rows.append([float(sim.own_prefill_ms or 0.0) / factor * w, *[c * w for c in cols]])
        target.append((e.ttft_ms - float(sim.ttft_ms or 0.0)) * w)
    x, se = _solve(rows, target)
    new = factor + x[0]
    if mode == PER_RUN:
        intercepts = dict(zip(runs, x[1:], strict=True))
    elif mode == POOLED:
        intercepts = {e.run: x[1] for e, _ in points}
    else:
        intercepts = {}
    return PrefillUpdate(new, abs(x[0]) / abs(new) if new else math.inf, intercepts, mode,
                         se / abs(new) if se is not None and new else None)


def decode_update(points: list[tuple[float, float]]) -> tuple[float, float | None]:
    """The geometric mean of measured / simulated over (measured, simulated) ITL pairs, and
    its relative standard error."""
    logs = [math.log(m / s) for m, s in points]
    mean = sum(logs) / len(logs)
    se = None
    if len(logs) > 1:
        var = sum((v - mean) ** 2 for v in logs) / (len(logs) - 1)
        se = math.sqrt(var / len(logs))
    return math.exp(mean), se


def _itl_points(evidence: list[Evidence], sims: Simulated, key: Key) -> list[tuple[float, float]]:
    out = []
    for e in evidence:
        sim = sims[e.run, e.step].itl_ms if (e.run, e.step) in sims else None
        if e.itl_key == key and e.itl_ms and sim:
            out.append((e.itl_ms, sim))
    return out


def _rms(values: list[float]) -> float | None:
    return math.sqrt(sum(v * v for v in values) / len(values)) if values else None


def quantile(xs: list[float] | tuple[float, ...], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default, as the reports')."""
    import numpy as np

    return float(np.quantile(np.asarray(xs, dtype=float), q)) if len(xs) else None


class FitError(ValueError):
    """The measured steps cannot give a factor: the message names the table and why."""


def fit(evidence: list[Evidence], simulate: Callable[[Factors], Simulated],
        start: Factors | None = None, tol: float = TOL,
        max_iterations: int = MAX_ITERATIONS) -> Fit:
    """Iterate simulate -> update until every factor's update is below `tol`; the steps that
    inform each prefill factor are chosen on the first simulation and kept."""
    if not evidence:
        raise FitError("no measured step to fit: calibrate from runs with completed steps and "
                       "the frontend's request trace")
    keys = sorted({e.ttft_key for e in evidence} | {e.itl_key for e in evidence})
    factors: Factors = {k: (start or {}).get(k, (1.0, 1.0)) for k in keys}
    history: list[Factors] = []
    first: Simulated = {}
    chosen: dict[Key, list[Evidence]] = {}
    how: dict[Key, str] = {}
    for iteration in range(1, max_iterations + 1):
        history.append(dict(factors))
        sims = simulate(factors)
        if iteration == 1:
            first = sims
            chosen, how = prefill_steps(evidence, sims)
        pre = {k: prefill_update(pts, factors[k][0]) for k, steps in chosen.items()
               if (pts := _usable(steps, sims))}
        for k, u in pre.items():
            if not u.factor > 0:
                raise FitError(f"{k}: the measured TTFTs give no positive prefill factor "
                               f"({u.factor:.3g}); its steps are too few or too alike to "
                               "fit")
        dec = {k: decode_update(itl) for k in keys
               if (itl := _itl_points(evidence, sims, k))}
        moves = [u.move for u in pre.values()] + [abs(r - 1) for r, _ in dec.values()]
        if max(moves, default=0.0) < tol or iteration == max_iterations:
            informs = {(e.run, e.step) for steps in chosen.values() for e in steps}
            return _result(evidence, sims, first, informs, factors, pre, dec, how, iteration,
                           max(moves, default=0.0) < tol, history)
        factors = {k: (pre[k].factor if k in pre else p,
                       d * (dec[k][0] if k in dec else 1.0)) for k, (p, d) in factors.items()}
    raise AssertionError("unreachable")


def _result(evidence: list[Evidence], sims: Simulated, first: Simulated,
            informs: set[tuple[str, str]], factors: Factors, pre: dict[Key, PrefillUpdate],
            dec: dict[Key, tuple[float, float | None]], how: dict[Key, str], iterations: int,
            converged: bool, history: list[Factors]) -> Fit:
    intercepts: dict[str, float] = {}
    for u in pre.values():
        intercepts |= u.intercepts
    steps = []
    for e in evidence:
        sim = sims.get((e.run, e.step), SimFigures(None, None))
        steps.append(StepResidual(e.run, e.step, e.ttft_ms,
                                  None if sim.ttft_ms is None
                                  else sim.ttft_ms + intercepts.get(e.run, 0.0),
                                  e.itl_ms, sim.itl_ms,
                                  first.get((e.run, e.step), sim).prefill_share,
                                  (e.run, e.step) in informs))
    prefill, decode = {}, {}
    for k, (p, d) in factors.items():
        ttft_err = [s.ttft_error for s, e in zip(steps, evidence, strict=True)
                    if e.ttft_key == k and s.informs_prefill and s.ttft_error is not None]
        itl_err = [s.itl_error for s, e in zip(steps, evidence, strict=True)
                   if e.itl_key == k and s.itl_error is not None]
        prefill[k] = Factor(p, k in pre, len(ttft_err), pre[k].se if k in pre else None,
                            _rms(ttft_err))
        decode[k] = Factor(d, k in dec, len(itl_err), dec[k][1] if k in dec else None,
                           _rms(itl_err))
    return Fit(prefill, decode, intercepts, {k: u.mode for k, u in pre.items()},
               {k: how[k] for k in pre}, steps, iterations, converged, history)
