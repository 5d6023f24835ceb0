"""The error band of each SIMULATED figure in the concurrency sweep table (pure): a simulated
run's TTFT and ITL p50 stand on AIConfigurator's timing tables, whose own measured rows say how
far such a figure can be off (stacks/predict/bands.py, issue 39). For a row of a simulated stack
(a DynoSim run, its manifest's `target_info`: the tables' records and the workers per role) the
band is `stacks.predict.simulated.sim_bands` at the step's own shape (its concurrency, the
requests' median ISL / OSL): `<figure>_likely_lo/_hi` in ms and `<figure>_likely_source` (the
rows it stands on, or why there is none). A measured or rehearsed row gets none: its figure is
what was measured, not what a model says."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from stacks.predict.simulated import sim_bands

FIGURES = ("ttft_p50_ms", "itl_p50_ms")


def _workers(info: Mapping[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for w in info.get("workers") or []:
        out[str(w.get("role"))] = out.get(str(w.get("role")), 0) + int(w.get("count") or 1)
    return out


def _shape(requests: pd.DataFrame, stack: str, concurrency: int) -> tuple[int, int] | None:
    mine = requests[(requests["stack"] == stack)
                    & (requests["step"] == f"concurrency_sweep/c{int(concurrency)}")]
    isl, osl = mine["requested_isl"].median(), mine["requested_osl"].median()
    if mine.empty or not (math.isfinite(isl) and math.isfinite(osl)):
        return None
    return int(isl), int(osl)


def add_likely(sweep: pd.DataFrame, requests: pd.DataFrame,
               simulated: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """`sweep` with the band columns; `simulated`: simulated stack -> its run's target_info."""
    out = sweep.copy()
    for f in FIGURES:
        out[f"{f}_likely_lo"], out[f"{f}_likely_hi"] = math.nan, math.nan
        out[f"{f}_likely_source"] = ""
    for i, row in out.iterrows():
        info = simulated.get(str(row["stack"]))
        shape = _shape(requests, str(row["stack"]), row["concurrency"]) if info else None
        if info is None or shape is None:
            continue
        found = sim_bands(dict(info), {f: row.get(f) for f in ("concurrency", *FIGURES)},
                          *shape, _workers(info))
        for f in FIGURES:
            metric = f.split("_")[0]
            band = found.get(f"{metric}_band_ms")
            if band:
                out.at[i, f"{f}_likely_lo"], out.at[i, f"{f}_likely_hi"] = band
            out.at[i, f"{f}_likely_source"] = str(found.get(f"{metric}_band_source") or "")
    return out
