"""The error band of an explore's SIMULATED operating point (pure): its TTFT and ITL p50 stand on
AIConfigurator's timing tables, whose own measured rows say how far such figures can be off
(stacks/predict/bands.py via stacks.predict.simulated.sim_bands, at the point's concurrency per
worker and the sweep's ISL / OSL). Only the concurrency sweep's rows have one: the measured rows
are fixed-shape runs of unique prompts, nothing like the multi-turn or prefix-cache steps."""

from __future__ import annotations

from stacks.explore.search import SWEEP, Outcome
from stacks.predict.simulated import sim_bands

Band = tuple[float, float]


def figure_bands(o: Outcome) -> dict[str, Band | None]:
    """{"ttft": (lo, hi) ms or None, "itl": ...} of a simulated sweep outcome."""
    none: dict[str, Band | None] = {"ttft": None, "itl": None}
    prepared, row = o.subject.prepared, o.row
    if o.workload != SWEEP or prepared is None or row is None:
        return none
    stack = o.subject.candidate.stack
    assert stack.serving is not None
    workers: dict[str, int] = {}
    for w in stack.serving.workers:
        workers[w.role.value] = workers.get(w.role.value, 0) + w.replicas
    sweep = stack.workloads.concurrency_sweep
    found = sim_bands({"timings": {"tables": list(prepared.records.values())}},
                      {"concurrency": row.concurrency, "ttft_p50_ms": row.ttft_p50_ms,
                       "itl_p50_ms": row.itl_p50_ms}, sweep.isl, sweep.osl, workers)
    out = dict(none)
    for metric in out:
        band = found.get(f"{metric}_band_ms")
        out[metric] = (float(band[0]), float(band[1])) if band else None
    return out


def words(band: Band | None) -> str:
    """"lo-hi" of a band, "" without one."""
    return "" if band is None else f"{band[0]:.4g}-{band[1]:.4g}"
