"""The figures each workload step's duration is estimated from, and where they come from (pure).

`stacks.sizing.estimate.workload_steps_seconds` prices every step's decode with one guess, the
stack's `cost.assumedItlMs` (25 ms unless set). Better figures come from outside this room: the
step simulated by DynoSim (workloads/sim/: its ITL p50 and, for a step bounded by a request
count, its whole window in virtual time) and, where the simulation cannot run,
AIConfigurator's predicted ITL (stacks/predict/). The caller (the CLI, which may run them)
passes them in as a `ForecastItl` per stack, a chain whose `fallback` a step falls to where a
source lacks it, so this room stays free of both (tests/test_import_graph.py). A step no
source has keeps the guess, and every figure says which it stands on: "ITL 9.4 ms SIMULATED
(DynoSim (dynamo.replay, ai-dynamo 1.6.1), timings from AIConfigurator 0.12.0 ...)", "ITL 9.4 ms
predicted (AIConfigurator 0.12.0 a100_sxm_40gb/vllm 0.14.0)" or "ITL 25.0 ms assumed
(cost.assumedItlMs)".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.sizing.estimate import AIPERF_FIXED_S, workload_steps_seconds

ASSUMED_SOURCE = "assumed (cost.assumedItlMs)"


@dataclass(frozen=True)
class ForecastItl:
    """A stack's figures per step id (`concurrency_sweep/c16`, as the plan names its steps),
    the words naming their source, and the next source for a step this one lacks.

    `steps`: the ITL (ms) a step decodes at; `windows`: for a step bounded by a request count
    (sequence distributions, prefix cache, a trace), how long its requests take from the first
    start to the last end (s), which the source measured whole (a simulation) and the
    estimator then takes instead of its count x OSL x ITL guess."""
    source: str
    steps: Mapping[str, float] = field(default_factory=dict)
    windows: Mapping[str, float] = field(default_factory=dict)
    fallback: ForecastItl | None = None


@dataclass(frozen=True)
class StepItl:
    ms: float
    source: str
    window_s: float | None = None

    @property
    def words(self) -> str:
        window = f", window {self.window_s:.1f} s" if self.window_s is not None else ""
        return f"ITL {self.ms:.1f} ms{window} {self.source}"


def repeated_step(step_id: str) -> str:
    """The step a repeat repeats: `concurrency_sweep/c16/r2` -> `concurrency_sweep/c16` (the
    `/rN` suffix stacks.sizing.estimate and workloads/steps.py give a step run N > 1 times);
    any other id unchanged."""
    parts = step_id.split("/")
    if len(parts) == 3 and parts[2][:1] == "r" and parts[2][1:].isdigit():
        return "/".join(parts[:2])
    return step_id


def predicted_id(step_id: str) -> str:
    """The prediction a step's ITL stands on: a repeat (`.../r2`) is its step's, a trace's warm
    pass (`trace_replay/c4-warm`) the same trace's (its decode is the cold pass's)."""
    return repeated_step(step_id).removesuffix("-warm")


def figure_of(figures: Mapping[str, float], step_id: str) -> float | None:
    """A step's figure in a source: its own (a repeat's: its step's), else, for a trace's warm
    pass a source does not have apart, the cold pass's (predicted_id)."""
    own = figures.get(repeated_step(step_id))
    return own if own is not None else figures.get(predicted_id(step_id))


def step_itls(stack: StackConfig, scale: Scale, figures: ForecastItl | None,
              repeats: int | None = None) -> dict[str, StepItl]:
    """Every step's ITL (and window): from the first source of the chain that has the step
    with a positive figure, else the stack's assumed one."""
    assumed = StepItl(stack.cost.assumed_itl_ms, ASSUMED_SOURCE)
    out = {}
    for step in workload_steps_seconds(stack, scale, repeats):
        out[step] = assumed
        source = figures
        while source is not None:
            ms = figure_of(source.steps, step)
            if ms is not None and ms > 0:
                window = source.windows.get(repeated_step(step))
                out[step] = StepItl(float(ms), source.source,
                                    float(window) if window and window > 0 else None)
                break
            source = source.fallback
    return out


def steps_seconds(stack: StackConfig, scale: Scale, figures: ForecastItl | None,
                  repeats: int | None = None) -> dict[str, float]:
    """`workload_steps_seconds`, each step's decode priced at its own ITL (step_itls): the one
    estimator, run once per distinct ITL, each step taken from the run at its ITL; a step with
    a whole window from its source lasts that window plus AIPerf's fixed cost, as the
    estimator adds it to every step."""
    itls = step_itls(stack, scale, figures, repeats)
    by_itl = {ms: workload_steps_seconds(
        stack.model_copy(update={"cost": stack.cost.model_copy(update={"assumed_itl_ms": ms})}),
        scale, repeats) for ms in {i.ms for i in itls.values()}}
    return {step: itl.window_s + AIPERF_FIXED_S if itl.window_s is not None
            else by_itl[itl.ms][step] for step, itl in itls.items()}


def summary(itls: Mapping[str, StepItl], why_assumed: str = "") -> list[str]:
    """One line per source: the ITL (or its range) and the steps it prices: "every step" when
    one source prices them all, else the count, the assumed ones by name (they are the
    guesses); the steps whose whole window the source gave are counted on its line.
    `why_assumed`: why those steps have no better figure, said on their line."""
    by_source: dict[str, list[tuple[str, StepItl]]] = {}
    for step, itl in itls.items():
        by_source.setdefault(itl.source, []).append((step, itl))
    out = []
    for source, steps in by_source.items():
        lo, hi = min(i.ms for _, i in steps), max(i.ms for _, i in steps)
        span = f"{lo:.1f} ms" if hi - lo < 0.05 else f"{lo:.1f}-{hi:.1f} ms"
        which = (f"every step ({len(steps)})" if len(by_source) == 1
                 else ", ".join(step for step, _ in steps) if source == ASSUMED_SOURCE
                 else f"{len(steps)} step(s)")
        windows = sum(1 for _, i in steps if i.window_s is not None)
        whole = f", {windows} of them at their whole window" if windows else ""
        why = f" ({why_assumed})" if source == ASSUMED_SOURCE and why_assumed else ""
        out.append(f"ITL {span} {source}: {which}{whole}{why}")
    return out
