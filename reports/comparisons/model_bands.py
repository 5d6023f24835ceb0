"""Whether the timing model can tell two SIMULATED stacks apart (pure; issue 39).

A DynoSim run's figures stand on AIConfigurator's timing tables, and AIConfigurator's own
measured rows say how far such a figure can be off: the concurrency sweep's TTFT and ITL p50
carry that band (`<figure>_likely_lo/_hi`, reports/tables/sim_likely.py). Sampling can call a
difference between two simulated stacks real (the replay's requests are many); it cannot say
whether the model's error would reverse it. So a comparison between two simulated candidates
keeps its better / worse verdict only where the two figures' bands are apart, and is otherwise
"not resolved by the model" (stacks.predict.bands.overlap: a figure without a band overlaps
everything, as the explore's questions judge their $ per 1M).

Which figures carry a band, at a sweep step:
- TTFT and ITL p50: their own (the nearest measured rows at the step's shape);
- output tok/s, tok/s per GPU and $ per 1M output tokens: the figure moved by the ITL band
  (decode-bound output tok/s falls as ITL rises: x itl / itl_hi .. x itl / itl_lo; $ per token
  the inverse), as stacks/explore/questions.py's usd_band moves $ per 1M;
- anything else (a p99, a prefix-cache step, a hit rate): none, and the row says so.

Only the questions that weigh one candidate against another are judged this way (topology,
prefix, decode tier, the recipes); the router's hit rate is the scheduler's bookkeeping, not a
timing figure, and cold vs warm is one stack against itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from reports.comparisons.verdicts import (
    MODEL_APART,
    MODEL_NO_BAND,
    MODEL_OVERLAP,
    Q_DECODE_TIER,
    Q_PREFIX,
    Q_RECIPE,
    Q_SLA_TOPOLOGY,
    Q_TOPOLOGY,
)
from reports.records.stackinfo import StackInfo
from stacks.predict.bands import overlap

Band = tuple[float, float]
CANDIDATE_QUESTIONS = (Q_TOPOLOGY, Q_PREFIX, Q_DECODE_TIER, Q_RECIPE, Q_SLA_TOPOLOGY)
OWN_BAND = ("ttft_p50_ms", "itl_p50_ms")
# figure -> how the ITL band moves it: +1 with ITL ($ per token), -1 against it (tok/s)
BY_ITL = {"output_tok_s": -1, "output_tok_s_per_gpu": -1, "usd_per_1m_output_tokens": +1}


def _finite(*xs: object) -> bool:
    return all(isinstance(x, int | float) and math.isfinite(float(x)) for x in xs)


def sweep_bands(sweep: pd.DataFrame) -> dict[tuple[str, str], Mapping]:
    """{(stack, "c<N>"): the sweep row} of the rows that carry a band."""
    if sweep.empty or "itl_p50_ms_likely_lo" not in sweep:
        return {}
    out: dict[tuple[str, str], Mapping] = {}
    for _, r in sweep.iterrows():
        if _finite(r.get("ttft_p50_ms_likely_lo")) or _finite(r.get("itl_p50_ms_likely_lo")):
            out.setdefault((str(r["stack"]), f"c{int(r['concurrency'])}"), r.to_dict())
    return out


def figure_band(row: Mapping | None, figure: str, value: float) -> Band | None:
    """The band of one figure (its value as the comparison folded it) at a banded sweep row."""
    if row is None or not _finite(value):
        return None
    if figure in OWN_BAND:
        lo, hi = row.get(f"{figure}_likely_lo"), row.get(f"{figure}_likely_hi")
        return (float(lo), float(hi)) if _finite(lo, hi) else None   # type: ignore[arg-type]
    sign = BY_ITL.get(figure)
    itl, lo, hi = (row.get(k) for k in ("itl_p50_ms", "itl_p50_ms_likely_lo",
                                         "itl_p50_ms_likely_hi"))
    if sign is None or not _finite(itl, lo, hi) or not float(itl) > 0:  # type: ignore[arg-type]
        return None
    a, b = (value * float(e) / float(itl) for e in (lo, hi))             # type: ignore[arg-type]
    if sign < 0:
        a, b = (value * float(itl) / float(e) if float(e) > 0 else math.inf  # type: ignore
                for e in (hi, lo))
    return (min(a, b), max(a, b))


def _words(band: Band | None) -> str:
    return "none" if band is None else f"{band[0]:.4g}-{band[1]:.4g}"


def mark(rows: list[dict], sweep: pd.DataFrame, infos: Mapping[str, StackInfo]) -> list[dict]:
    """The rows with each side's model band and `model_error` where both stacks are simulated
    candidates (verdicts.judge turns a better / worse there into NOT_RESOLVED unless the
    bands are apart)."""
    banded = sweep_bands(sweep)
    for r in rows:
        ref, sub = str(r["reference_stack"]), str(r["subject_stack"])
        if r["question"] not in CANDIDATE_QUESTIONS or not all(
                s in infos and infos[s].simulated for s in (ref, sub)):
            continue
        fig, step = str(r["figure"]), str(r["step"])
        a = figure_band(banded.get((ref, step)), fig, float(r["reference_value"]))
        b = figure_band(banded.get((sub, step)), fig, float(r["subject_value"]))
        r["reference_likely_lo"], r["reference_likely_hi"] = a or (math.nan, math.nan)
        r["subject_likely_lo"], r["subject_likely_hi"] = b or (math.nan, math.nan)
        r["model_error"] = (MODEL_NO_BAND if a is None or b is None else
                            MODEL_OVERLAP if overlap(a, b) else MODEL_APART)
        why = (f"the timing model's bands (AIConfigurator's own measured rows, "
               f"stacks/predict/bands.py): {ref} {_words(a)}, {sub} {_words(b)}")
        r["note"] = "; ".join(x for x in (str(r.get("note") or ""), why) if x)
    return rows
