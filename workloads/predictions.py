"""The predictions a run is measured against, kept in its manifest at run start, and the
choice between a prediction and the stack's guess where the runner needs a figure.

`record` (the shell) asks stacks.predict for every step of the run's scale and keeps its
as_record() under the manifest's `predictions` (each step's figures with their error bands,
`ttft_band_ms` / `itl_band_ms` and the rows they stand on, and an `upper_bound` note where the
database's rows are suspect: stacks/predict/rows.py), so a report compares measured with
predicted without the predictor's environment; when the predictor is missing or the database
lacks the model, the record says why and nothing is predicted. `expected_itl` (pure) picks the ITL a
step's grace period is sized from: the step's predicted ITL where one exists, else the stack's
`cost.assumedItlMs`, and says which.
"""

from __future__ import annotations

from typing import Any

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.predict.rows import database_words
from stacks.sizing.step_itl import ASSUMED_SOURCE, predicted_id

__all__ = ["ASSUMED_SOURCE", "expected_itl", "predicted_step", "record", "source_words"]


def record(stack: StackConfig, scale: Scale, base: StackConfig | None = None) -> dict[str, Any]:
    from stacks.predict.predictor import PredictorUnavailable, predict
    try:
        return predict(stack, scale, base).as_record()
    except PredictorUnavailable as exc:
        return {"label": "PREDICTED", "stack": stack.name, "steps": {},
                "not_predicted": f"AIConfigurator is unavailable ({exc})"}


def source_words(pred: dict[str, Any]) -> str:
    """'predicted (AIConfigurator 0.12.0 a100_sxm_40gb/vllm 0.14.0)' for a run's record."""
    return database_words(pred.get("database") or {})


def predicted_step(pred: dict[str, Any] | None, step_id: str) -> dict[str, Any] | None:
    """The prediction of `step_id`; a repeat (`concurrency_sweep/c16/r2`, workloads/steps.py)
    or a trace's warm pass (`trace_replay/c4-warm`) finds its step's, as the forecast does
    (stacks.sizing.step_itl.predicted_id)."""
    steps = (pred or {}).get("steps") or {}
    row: dict[str, Any] | None = steps.get(predicted_id(step_id))
    return row


def expected_itl(pred: dict[str, Any] | None, step_id: str,
                 assumed_itl_ms: float) -> tuple[float, str]:
    """The ITL a step is expected to show, and where it came from."""
    row = predicted_step(pred, step_id)
    if row and row.get("itl_ms"):
        return float(row["itl_ms"]), source_words(pred or {})
    return assumed_itl_ms, ASSUMED_SOURCE
