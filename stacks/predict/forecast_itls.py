"""The predictions a forecast prices decode with (issue 27): every stack a campaign runs,
predicted by AIConfigurator (predictor.predict), and each one's ITL per step
(stacks/sizing/step_itl.ForecastItl). `stacks plan`, `stacks check`'s campaign budget and
`workloads campaign`'s plan read them, so all three price a step at the same ITL: the
predicted one where the database has the stack, else the stack's `cost.assumedItlMs`.

A missing predictor is not a failure of the forecast: every step is then priced at
cost.assumedItlMs, and `note` says why, for the caller to print.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.predict.rows import Prediction, predicted_itl
from stacks.sizing.step_itl import ForecastItl


@dataclass
class ForecastPredictions:
    predictions: dict[str, Prediction] = field(default_factory=dict)   # by stack name
    note: str | None = None     # why there are none (the predictor is missing or failed)

    @property
    def itls(self) -> dict[str, ForecastItl]:
        """The predicted ITL per step of every stack the database predicts."""
        return {name: i for name, p in self.predictions.items()
                if (i := predicted_itl(p)) is not None}


def forecast_predictions(pairs: Iterable[tuple[StackConfig, StackConfig | None]],
                         scale: Scale) -> ForecastPredictions:
    """Every (stack, its base) predicted at `scale`; none, with the reason, when the
    predictor is not there."""
    from stacks.predict.predictor import PredictorUnavailable, predict

    try:
        return ForecastPredictions({s.name: predict(s, scale, base) for s, base in pairs})
    except PredictorUnavailable as exc:
        return ForecastPredictions(note=str(exc))
