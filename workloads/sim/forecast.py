"""The figures a forecast prices every step at (issue 38): the simulation first, then
AIConfigurator's prediction, then the stack's guess (a thin shell over record.py and
stacks/predict/forecast_itls.py).

`stacks plan`, `stacks check`'s campaign budget and `workloads campaign`'s plan read one
`Forecast`, so all three price a step alike: at its simulated ITL p50 (a step a request count
bounds: at its simulated window, first start to last end in virtual time), where DynoSim ran
the stack; else at AIConfigurator's predicted ITL; else at cost.assumedItlMs. Each stack's
figures are a `ForecastItl` chain (stacks/sizing/step_itl.py) whose words say the source, and
`why` says, for the caller to print, why a stack is not simulated or not predicted.
AIConfigurator's prediction is asked in any case: it sizes each simulated step's grace and
ramp as the runner sizes them, and `stacks plan` answers the plan's questions from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.predict.forecast_itls import forecast_predictions
from stacks.predict.rows import Prediction
from stacks.sizing.step_itl import ForecastItl
from workloads.sim.record import simulate_plan


@dataclass
class Forecast:
    itls: dict[str, ForecastItl] = field(default_factory=dict)       # by stack name
    predictions: dict[str, Prediction] = field(default_factory=dict)  # AIConfigurator's
    simulations: dict[str, dict[str, Any]] = field(default_factory=dict)  # record.py's records
    predictor_note: str | None = None     # why nothing is predicted (the predictor is missing)
    off: str | None = None                # why nothing is simulated or predicted (--no-predict)

    def not_simulated(self, name: str) -> str | None:
        """Why the stack's steps are not at simulated figures (None: they are)."""
        if self.off:
            return self.off
        sim = self.simulations.get(name) or {}
        if sim.get("steps"):
            return None
        return sim.get("not_simulated") or "not simulated"

    def why(self, name: str) -> str:
        """Why steps of the stack are at cost.assumedItlMs: neither source has them."""
        if self.off:
            return self.off
        pred = self.predictions.get(name)
        if self.predictor_note or pred is None:
            said = "no predictor: see `predictions:` above"
        elif pred.not_predicted:
            said = f"nothing predicted: {pred.not_predicted.split(' (')[0]}"
        elif not pred.rows:
            said = "nothing predicted" + (f": {pred.skipped[0]}" if pred.skipped else "")
        else:
            said = (f"not predicted: {'; '.join(pred.skipped)}" if pred.skipped
                    else "not in the prediction")
        sim = self.not_simulated(name)
        return f"not simulated: {sim}; {said}" if sim else f"not in the simulation; {said}"


def simulated_itl(record: dict[str, Any] | None,
                  fallback: ForecastItl | None = None) -> ForecastItl | None:
    """A simulation record's figures per step for the forecast: each step's ITL p50, and for a
    step a request count bounds (no duration) its window; None when nothing was simulated."""
    steps = (record or {}).get("steps") or {}
    if not steps:
        return fallback
    assert record is not None
    return ForecastItl(
        str(record["label"]),
        {sid: float(f["itl_p50_ms"]) for sid, f in steps.items() if f.get("itl_p50_ms")},
        {sid: float(f["window_s"]) for sid, f in steps.items()
         if f.get("duration_s") is None and f.get("window_s")}, fallback)


def forecast(pairs: Iterable[tuple[StackConfig, StackConfig | None]], scale: Scale,
             predict: bool = True, simulate: bool = True) -> Forecast:
    """Every (stack, its base) predicted and simulated at `scale`, with one replay process for
    all; `predict` False: nothing (every step at cost.assumedItlMs), `simulate` False:
    AIConfigurator's prediction only."""
    pairs = list(pairs)
    if not predict:
        return Forecast(off="predictions off: --no-predict")
    fp = forecast_predictions(pairs, scale)
    out = Forecast(predictions=fp.predictions, predictor_note=fp.note)
    itls = fp.itls
    if simulate:
        out.simulations = simulate_stacks(pairs, scale, fp.predictions)
    else:
        out.simulations = {s.name: {"steps": {}, "not_simulated": "simulation off: "
                                    "--no-simulate"} for s, _ in pairs}
    for s, _ in pairs:
        chain = simulated_itl(out.simulations.get(s.name), itls.get(s.name))
        if chain is not None:
            out.itls[s.name] = chain
    return out


def simulate_stacks(pairs: list[tuple[StackConfig, StackConfig | None]], scale: Scale,
                    predictions: dict[str, Prediction] | None = None
                    ) -> dict[str, dict[str, Any]]:
    """Each serving stack's simulation record at `scale` (kv capacity from its pre-flight),
    one replay process for all of them."""
    from stacks.preflight.run import run_preflight
    from workloads.sim.record import not_simulated, switched_off
    from workloads.sim.replay import Replayer

    off = switched_off()
    if off:
        return {s.name: not_simulated(off) for s, _ in pairs}
    replayer = Replayer()
    out = {}
    try:
        for s, base in pairs:
            memory = run_preflight(s, base).memory
            pred = (predictions or {}).get(s.name)
            out[s.name] = simulate_plan(s, scale, [m.kv_capacity_tokens for m in memory],
                                        base=base, predictions=pred.as_record() if pred
                                        else None, replayer=replayer)
    finally:
        replayer.close()
    return out
