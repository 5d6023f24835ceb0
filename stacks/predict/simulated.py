"""A stack's steps as DynoSim simulated them, in the predict view's table, and AIConfigurator's
static estimate beside them as a cross-check (pure: the simulation record comes in as data,
made by workloads/sim/record.py, which this room does not import).

The simulated table is a `Prediction` whose label is the simulation's own ("SIMULATED (DynoSim
(dynamo.replay, ai-dynamo 1.6.1), timings from AIConfigurator 0.12.0 ...)"), one row per step
with the figures by the reports' definitions (workloads/sim/plan_sim.py): TTFT, ITL and request
latency p50 over completed requests, output tok/s over the step's window, tok/s per user p50;
tok/s per GPU and $ per 1M output tokens price them as the predicted rows do (every GPU the
stack's workers hold, their share of the nodes' hourly price). So the SLO verdicts, best points
and the plan's questions read a simulated table as they read a predicted one, and every line
names which it is. AIConfigurator's estimate applies where its static model matches the step
(the concurrency sweep: no queueing beyond the batch, no reuse, no think time): there its
figures stand beside the simulated ones with their difference (predicted / simulated - 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.predict.rows import PredictedRow, Prediction
from stacks.predict.shapes import Layout, layout, step_shapes

CROSS_CHECKED = "concurrency_sweep"
# what the cross-check compares: the simulated row's field, its words
CROSS_FIELDS = (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("output_tok_s", "out tok/s"))


def _gpus_and_price(stack: StackConfig, base: StackConfig | None) -> tuple[int, float | None]:
    lay = layout(stack, base)
    if isinstance(lay, Layout):
        return lay.gpus, lay.gpu_usd_per_hour
    assert stack.serving is not None
    return sum(w.gpus for w in stack.serving.workers), None


def sim_bands(record: dict[str, Any], step: dict[str, Any], isl: int, osl: int,
              workers: dict[str, int]) -> dict[str, Any]:
    """A simulated step's TTFT and ITL bands (stacks/predict/bands.py simulated_band): the
    model's known error at the step's own shape, from the timing table of the role that decides
    each figure (agg: the worker's; disagg: prefill's TTFT, decode's ITL), the batch per worker
    its concurrency over the role's workers; empty fields and the reason where none."""
    from stacks.predict.bands import simulated_band

    tables = {t.get("role"): t for t in (record.get("timings") or {}).get("tables") or []}
    out: dict[str, Any] = {}
    for metric, value, roles in (("ttft", step.get("ttft_p50_ms"), ("worker", "prefill")),
                                 ("itl", step.get("itl_p50_ms"), ("worker", "decode"))):
        table = next((tables[r] for r in roles if r in tables), None)
        if table is None or value is None:
            out[f"{metric}_band_source"] = "no band: the simulation ran on generic timings"
            continue
        role = next(r for r in roles if r in tables)
        batch = max(1, round(int(step.get("concurrency") or 1) / max(1, workers.get(role, 1))))
        found, words = simulated_band(table, metric, float(value), batch=batch, isl=isl,
                                      osl=osl)
        out[f"{metric}_band_ms"] = (round(found[0], 3), round(found[1], 3)) if found else None
        # the rows it stands on, once per table (the range itself is the row's cell)
        out[f"{metric}_band_source"] = (words.split(" (", 1)[1].removesuffix(")")
                                        if found and " (" in words else words)
    return out


def simulated_table(stack: StackConfig, base: StackConfig | None, scale: Scale,
                    record: dict[str, Any]) -> Prediction:
    """The record's steps as rows (plan order), or why nothing was simulated."""
    out = Prediction(stack.name, label=str(record.get("label") or "SIMULATED"))
    if record.get("not_simulated") or not record.get("steps"):
        out.not_predicted = str(record.get("not_simulated") or "no step was simulated")
        return out
    gpus, usd_h = _gpus_and_price(stack, base)
    shapes = {s.id: s for s in step_shapes(stack, scale)[0]}
    assert stack.serving is not None
    workers: dict[str, int] = {}
    for w in stack.serving.workers:
        workers[w.role.value] = workers.get(w.role.value, 0) + w.replicas
    out.gpus, out.disaggregated = gpus, record.get("topology") == "disaggregated"
    out.topology = (f"{record.get('topology', '?')}, router {record.get('router', '?')}, "
                    f"{gpus} GPUs")
    out.database = {"timings": record.get("timings") or {},
                    "versions": record.get("versions") or {},
                    "kv_router_runs": record.get("kv_router_runs", 1)}
    for sid, f in record["steps"].items():
        ttft, itl, tok_s = f.get("ttft_p50_ms"), f.get("itl_p50_ms"), f.get("output_tok_s")
        if ttft is None or itl is None or not tok_s:
            out.skipped.append(f"{sid}: no completed request with two or more tokens in the "
                               "simulation")
            continue
        shape = shapes.get(sid)
        usd = usd_h / (tok_s * 3600) * 1e6 if usd_h is not None else None
        bands = sim_bands(record, f, shape.isl if shape else 0, shape.osl if shape else 0,
                          workers)
        out.rows.append(PredictedRow(
            sid, str(f["workload"]), int(f["concurrency"]), shape.isl if shape else 0,
            shape.osl if shape else 0, shape.prefix if shape else 0, ttft_ms=float(ttft),
            itl_ms=float(itl), request_latency_ms=float(f.get("request_latency_p50_ms") or 0),
            output_tok_s=float(tok_s), tok_s_per_gpu=float(tok_s) / gpus if gpus else 0.0,
            tok_s_per_user=float(f.get("tok_s_per_user_p50") or 0), usd_per_1m_output=usd,
            **bands))
    return out


def spread_words(record: dict[str, Any], step: str) -> str:
    """'ITL 5.10-5.31 ms, TTFT 40.2-44.0 ms over 3 runs' where the KV router's seeded runs of
    the step differ, else ''."""
    spread = ((record.get("steps") or {}).get(step) or {}).get("spread") or {}
    runs = len(spread.get("runs") or [])
    parts = []
    for key, word, fmt in (("itl_p50_ms", "ITL", ".2f"), ("ttft_p50_ms", "TTFT", ".1f"),
                           ("output_tok_s", "out tok/s", ",.0f")):
        span = spread.get(key) or {}
        if runs > 1 and span and span["max"] > span["min"]:
            unit = " ms" if key.endswith("_ms") else ""
            parts.append(f"{word} {span['min']:{fmt}}-{span['max']:{fmt}}{unit}")
    return f"{', '.join(parts)} over {runs} runs" if parts else ""


@dataclass(frozen=True)
class CrossCheck:
    step: str
    predicted: dict[str, float]      # field -> AIConfigurator's figure
    difference: dict[str, float]     # field -> predicted / simulated - 1


def cross_check(simulated: Prediction, predicted: Prediction | None) -> dict[str, CrossCheck]:
    """AIConfigurator's figure beside each simulated concurrency-sweep step it predicts."""
    if predicted is None or predicted.not_predicted:
        return {}
    by_step = {r.step: r for r in predicted.rows}
    out = {}
    for r in simulated.rows:
        p = by_step.get(r.step)
        if r.workload != CROSS_CHECKED or p is None:
            continue
        figures = {f: float(getattr(p, f)) for f, _ in CROSS_FIELDS}
        out[r.step] = CrossCheck(r.step, figures, {
            f: v / getattr(r, f) - 1 for f, v in figures.items() if getattr(r, f)})
    return out
