"""Simulated vs measured (pure): per stack and step, what the run measured beside what DynoSim
made of the same step (the manifest's `simulation`, kept at run start by the runner:
workloads/sim/record.py), their ratio, whether it holds its band, and where it does not, the
cause the run's own record shows.

Each figure is compared with its like:
- TTFT p50: the frontend's own (the step's request trace, `request_trace.jsonl` ttft_ms:
  reports/records/runs.py frontend_ttft reads it, with its p40 and p60). The client's TTFT carries
  the first-data stall of a kept-alive connection (docs/testing.md), which no simulation has.
- ITL p50: the per-request mean gap between output tokens, the frontend's own (its request
  trace's `avg_itl_ms`) on both sides: the client's runs from its late first token.
- output tok/s: completed requests' output tokens over the step's window (first start to last
  end), both sides alike (reports/records/measures.py, workloads/sim/plan_sim.py).
A simulated run (manifest target_info.kind "sim") is the simulation: never compared with itself.

The bands (issue 38): where the live rehearsal and DynoSim run one scheduler on one timing table
(the local stacks), ITL within 5 %, TTFT within 15 % (the frontend's TTFT adds its own request
handling and tokenization, which the replay has not), output tok/s within 5 %. On a cluster the
same ratios say how far the simulation is from the GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from workloads.sim.record import step_figures
from workloads.sim.step_sim import TURNAROUND_MS

BANDS: dict[str, float] = {"ttft_p50_ms": 0.15, "itl_p50_ms": 0.05, "output_tok_s": 0.05}
# the measured column each figure is compared on, and the simulated one: TTFT and ITL as the
# frontend's request trace records them on both sides (the client's carry the first-data stall;
# disaggregated, the frontend's TTFT ends at the prefill worker's answer, the client's at the
# decode worker's first token: workloads/sim/exports.py frontend_ttft_itl), output tok/s the
# client's on both
MEASURED_COLUMN = {"ttft_p50_ms": "frontend_ttft_p50_ms", "itl_p50_ms": "frontend_itl_p50_ms",
                   "output_tok_s": "output_tok_s"}
SIMULATED_COLUMN = {"ttft_p50_ms": "frontend_ttft_p50_ms", "itl_p50_ms": "frontend_itl_p50_ms",
                    "output_tok_s": "output_tok_s"}
# a TTFT p50 is on a cliff when the frontend's p60 is this many times its p40
CLIFF = 1.5
# the client's turnaround counts as a cause when a slot idles this much longer per request
# than the simulation's TURNAROUND_MS
IDLE_MARGIN_MS = 5.0
# a local host this small, or AIPerf taking this share of its cores, leaves the live frontend
# and mockers waiting for a core (the demo machine: 2 cores for all of them)
SMALL_HOST_CORES = 2
CPU_SHARE = 0.25
# positive-nice work beside a step worth naming (cores on average while the load ran)
LOW_PRIORITY_SHOWN = 0.05
NO_CAUSE = "no cause the run's record shows: unexplained"


def _num(x: Any) -> float | None:
    """A finite-or-infinite number as a float; None for NaN, None and anything else."""
    if isinstance(x, bool) or not isinstance(x, int | float | np.number):
        return None
    value = float(x)
    return None if math.isnan(value) else value


def is_simulated_run(extra: Mapping[str, Any]) -> bool:
    return (extra.get("target_info") or {}).get("kind") == "sim"


def _idle_ms(concurrency: float | None, window_s: float | None, latency_ms: float,
             requests: float) -> float | None:
    """How long a slot stood idle per request: the slots' time over the window less the
    requests' own latencies, per request."""
    if not concurrency or not window_s or not requests:
        return None
    return (concurrency * window_s * 1000 - latency_ms) / requests


def _measured_idle(s: pd.Series, requests: pd.DataFrame | None) -> float | None:
    if requests is None or requests.empty:
        return None
    mine = requests[(requests["stack"] == s["stack"]) & (requests["run_id"] == s["run_id"])
                    & (requests["step"] == s["step"]) & requests["completed"].astype(bool)]
    return _idle_ms(_num(s.get("concurrency")), _num(s.get("window_s")),
                    float(mine["request_latency_ms"].sum()), float(len(mine)))


def _simulated_idle(f: Mapping[str, Any]) -> float | None:
    """The same from the simulation's figures (its completed requests' mean latency)."""
    lat, n = _num(f.get("request_latency_mean_ms")), _num(f.get("requests"))
    if lat is None or not n:
        return None
    return _idle_ms(_num(f.get("concurrency")), _num(f.get("window_s")), lat * n, n)


def _slower(row: Mapping[str, Any], col: str) -> bool:
    """The ratio left its band on the slow side: a longer TTFT or ITL, fewer tok/s live."""
    ratio = _num(row.get(f"{col}_ratio"))
    return row.get(f"{col}_in_band") is False and ratio is not None and (
        ratio < 1 if col == "output_tok_s" else ratio > 1)


def causes(row: Mapping[str, Any], local: bool) -> list[str]:
    """Why a ratio left its band, from what the run recorded of the step."""
    out = []
    off = [c for c in BANDS if row.get(f"{c}_in_band") is False]
    p40, p60 = _num(row.get("frontend_ttft_p40_ms")), _num(row.get("frontend_ttft_p60_ms"))
    sim_ttft = _num(row.get("ttft_p50_ms_simulated"))
    if "ttft_p50_ms" in off and p40 and p60 and sim_ttft is not None \
            and p60 >= CLIFF * p40 and p40 <= sim_ttft <= p60:
        out.append(f"TTFT p50 on a cliff: the frontend's p40 {p40:.1f} ms and p60 {p60:.1f} ms "
                   "(a burst's queued half and the rest), the simulated p50 "
                   f"{sim_ttft:.1f} ms between them")
    cut, sim_cut = _num(row.get("cancelled_measured")), _num(row.get("cancelled_simulated"))
    if "output_tok_s" in off and (cut or sim_cut) and cut != sim_cut:
        out.append(f"requests cut at the step's end: {cut or 0:.0f} measured, "
                   f"{sim_cut or 0:.0f} simulated (output tok/s counts completed requests)")
    idle, sim_idle = _num(row.get("idle_ms_measured")), _num(row.get("idle_ms_simulated"))
    if _slower(row, "output_tok_s") and idle is not None and sim_idle is not None \
            and idle - sim_idle > IDLE_MARGIN_MS:
        out.append(f"the client's turnaround: a slot stood idle {idle:.1f} ms per request "
                   f"measured, {sim_idle:.1f} ms simulated (the simulation sends a slot's next "
                   f"request {TURNAROUND_MS:g} ms after its last ends)")
    cores, client = _num(row.get("host_cores")), _num(row.get("client_cpu_cores_mean"))
    if local and cores and client is not None and (cores <= SMALL_HOST_CORES
                                                   or client / cores >= CPU_SHARE) \
            and any(_slower(row, c) for c in off):
        low = _num(row.get("host_low_priority_cores"))
        beside = (f"; work at a lower priority used {low:.2f} cores beside them (`make demo` "
                  "simulates beside its live campaign)" if low and low >= LOW_PRIORITY_SHOWN
                  else "")
        out.append(f"CPU: the live frontend and mockers ran on the host's {cores:.0f} cores "
                   f"beside AIPerf (which used {client:.2f} of them on average) and whatever "
                   f"else the host ran{beside}; DynoSim's virtual clock never waits for a core")
    return out or ([NO_CAUSE] if off else [])


def table(steps: pd.DataFrame, simulations: Mapping[tuple[str, str], dict[str, Any] | None],
          requests: pd.DataFrame | None = None,
          local: frozenset[str] = frozenset()) -> pd.DataFrame:
    """One row per measured step whose run kept a simulation of it: measured, simulated,
    ratio (measured / simulated), in band, and the causes of a ratio out of it.
    `simulations`: {(stack, run_id): the manifest's simulation record} of the measured runs
    (a simulated run is left out by the caller); `local`: stacks run on the local engine."""
    rows = []
    for _, s in steps.iterrows():
        sim = step_figures(simulations.get((str(s["stack"]), str(s["run_id"]))),
                           str(s["step"]))
        if not sim:
            continue
        row: dict[str, Any] = {"stack": s["stack"], "run_id": s["run_id"], "step": s["step"]}
        for col, band in BANDS.items():
            measured = _num(s.get(MEASURED_COLUMN[col]))
            if measured is None and col == "itl_p50_ms":   # a step without the frontend's trace
                measured = _num(s.get(col))              # the client's ITL, a little short
            simulated = _num(sim.get(SIMULATED_COLUMN[col], sim.get(col)))
            ratio = measured / simulated if measured is not None and simulated else None
            row[f"{col}_measured"] = measured
            row[f"{col}_simulated"] = simulated
            row[f"{col}_ratio"] = round(ratio, 3) if ratio is not None else None
            row[f"{col}_in_band"] = None if ratio is None else abs(ratio - 1) <= band + 1e-9
        row.update({k: _num(s.get(k)) for k in ("frontend_ttft_p40_ms", "frontend_ttft_p60_ms",
                                                "ttft_p50_ms", "host_cores",
                                                "client_cpu_cores_mean", "host_busy_cores",
                                                "host_low_priority_cores")})
        row["cancelled_measured"] = _num(s.get("cancelled"))
        row["cancelled_simulated"] = _num(sim.get("cancelled"))
        closed = s.get("schedule") != "fixed" and s.get("workload") != "multi_turn"
        row["idle_ms_measured"] = _measured_idle(s, requests) if closed else None
        row["idle_ms_simulated"] = _simulated_idle(sim) if closed else None
        row["cause"] = "; ".join(causes(row, str(s["stack"]) in local))
        rows.append(row)
    columns = ["stack", "run_id", "step",
               *[f"{c}_{k}" for c in BANDS for k in ("measured", "simulated", "ratio",
                                                     "in_band")],
               "cause", "frontend_ttft_p40_ms", "frontend_ttft_p60_ms", "ttft_p50_ms",
               "cancelled_measured", "cancelled_simulated", "idle_ms_measured",
               "idle_ms_simulated", "host_cores", "client_cpu_cores_mean", "host_busy_cores",
               "host_low_priority_cores"]
    return pd.DataFrame(rows, columns=columns)   # the columns even without a row (its CSV)


def band_note() -> str:
    return ("Bands: " + ", ".join(f"{k.removesuffix('_ms')} ±{v:.0%}" for k, v in BANDS.items())
            + " (reports/comparisons/simulated_vs_measured.py says why); TTFT is the frontend's "
            "own (its request trace), the client's carries the first-data stall no simulation "
            "has; a ratio (measured / simulated) outside its band is marked `!` and its cause "
            "named.")


def simulation_words(record: Mapping[str, Any] | None) -> str:
    """The record's label, or why the run kept no simulation."""
    if not record:
        return "no simulation in the run record (it predates them)"
    if record.get("not_simulated"):
        return f"not simulated: {record['not_simulated']}"
    return str(record.get("label") or "SIMULATED")


def display(compared: pd.DataFrame) -> pd.DataFrame:
    """The report's table: per stack and step, each figure measured, simulated and their ratio
    (`!` outside its band), and the cause where one is."""
    rows = []
    for _, r in compared.iterrows():
        row: dict[str, Any] = {"stack": r["stack"], "step": r["step"]}
        for col in BANDS:
            name = {"ttft_p50_ms": "TTFT p50 (frontend)", "itl_p50_ms": "ITL p50",
                    "output_tok_s": "out tok/s"}[col]
            ratio, ok = r[f"{col}_ratio"], r[f"{col}_in_band"]
            row[f"{name} measured"] = r[f"{col}_measured"]
            row[f"{name} SIMULATED"] = r[f"{col}_simulated"]
            row[f"{name} ratio"] = "n/a" if ratio is None or pd.isna(ratio) else \
                f"{ratio:.2f}" + ("" if ok else " !")
        row["cause"] = r["cause"] or "-"
        rows.append(row)
    return pd.DataFrame(rows)
