"""The ITL each workload step's duration is estimated from, and where it comes from (pure).

`stacks.sizing.estimate.workload_steps_seconds` prices every step's decode with one guess, the
stack's `cost.assumedItlMs` (25 ms unless set). Where AIConfigurator predicted the step
(stacks/predict/, `python -m stacks predict`), its predicted ITL is the better figure: the
caller (the CLI, which may run the predictor) passes the predicted ITL per step in, so this
room stays free of the predictor (tests/test_import_graph.py: stacks.sizing imports neither
stacks.predict nor anything that runs it). A step without a prediction keeps the guess, and
every figure says which it stands on: "ITL 9.4 ms predicted (AIConfigurator 0.12.0
a100_sxm_40gb/vllm 0.14.0)" or "ITL 25.0 ms assumed (cost.assumedItlMs)".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.sizing.estimate import workload_steps_seconds

ASSUMED_SOURCE = "assumed (cost.assumedItlMs)"


@dataclass(frozen=True)
class PredictedItl:
    """A stack's predicted ITL per step id (`concurrency_sweep/c16`, as stacks/predict keys
    its rows) and the words naming the prediction (its database and versions)."""
    source: str
    steps: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StepItl:
    ms: float
    source: str

    @property
    def words(self) -> str:
        return f"ITL {self.ms:.1f} ms {self.source}"


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


def step_itls(stack: StackConfig, scale: Scale, predicted: PredictedItl | None,
              repeats: int | None = None) -> dict[str, StepItl]:
    """Every step's ITL: its predicted one where the prediction has the step (and a positive
    figure), else the stack's assumed one."""
    assumed = StepItl(stack.cost.assumed_itl_ms, ASSUMED_SOURCE)
    out = {}
    for step in workload_steps_seconds(stack, scale, repeats):
        ms = predicted.steps.get(predicted_id(step)) if predicted is not None else None
        out[step] = (StepItl(float(ms), predicted.source)
                     if predicted is not None and ms is not None and ms > 0 else assumed)
    return out


def steps_seconds(stack: StackConfig, scale: Scale, predicted: PredictedItl | None,
                  repeats: int | None = None) -> dict[str, float]:
    """`workload_steps_seconds`, each step's decode priced at its own ITL (step_itls): the one
    estimator, run once per distinct ITL, each step taken from the run at its ITL."""
    itls = step_itls(stack, scale, predicted, repeats)
    by_itl = {ms: workload_steps_seconds(
        stack.model_copy(update={"cost": stack.cost.model_copy(update={"assumed_itl_ms": ms})}),
        scale, repeats) for ms in {i.ms for i in itls.values()}}
    return {step: by_itl[itl.ms][step] for step, itl in itls.items()}


def summary(itls: Mapping[str, StepItl], why_assumed: str = "") -> list[str]:
    """One line per source: the ITL (or its range) and the steps it prices: "every step" when
    one source prices them all, else the count, the assumed ones by name (they are the
    guesses). `why_assumed`: why those steps have no prediction, said on their line."""
    by_source: dict[str, list[tuple[str, float]]] = {}
    for step, itl in itls.items():
        by_source.setdefault(itl.source, []).append((step, itl.ms))
    out = []
    for source, steps in by_source.items():
        lo, hi = min(ms for _, ms in steps), max(ms for _, ms in steps)
        span = f"{lo:.1f} ms" if hi - lo < 0.05 else f"{lo:.1f}-{hi:.1f} ms"
        which = (f"every step ({len(steps)})" if len(by_source) == 1
                 else ", ".join(step for step, _ in steps) if source == ASSUMED_SOURCE
                 else f"{len(steps)} step(s)")
        why = f" ({why_assumed})" if source == ASSUMED_SOURCE and why_assumed else ""
        out.append(f"ITL {span} {source}: {which}{why}")
    return out
