"""trace_replay_timeline.png: per replayed step, arrivals per second (as scheduled by the trace
and as sent) and requests in flight over time, with the step's in-flight cap. The clock is the
schedule's (0 = the first row sent), the requests placed on it as AIPerf anchors its send lag
(the least-late request on time)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from reports.records.runs import STEP_KEY, RunRecord
from reports.render.plots import _decorate, _save, plt
from reports.tables.trace_report import in_flight, schedule_zero_ns, scheduled_ms

# At most this many bins per arrival histogram (1 s bins up to 2 minutes of replay).
MAX_BINS = 120


def _arrival_bins(span_s: float) -> np.ndarray:
    width = max(1.0, math.ceil(span_s / MAX_BINS))
    return np.arange(0.0, span_s + width, width)


def trace_timeline(table: pd.DataFrame, requests: pd.DataFrame,
                   records: dict[tuple[str, str], RunRecord], path: Path,
                   tag: str = "") -> Path | None:
    if table.empty:
        return None
    by_step = {k: g for k, g in requests.groupby(STEP_KEY, sort=False)}
    fig, axes = plt.subplots(len(table), 2, figsize=(11, 3.2 * len(table)), squeeze=False)
    for i, (_, row) in enumerate(table.iterrows()):
        key = tuple(row[k] for k in STEP_KEY)
        req = by_step.get(key, requests.iloc[0:0]).dropna(subset=["start_ns", "end_ns"])
        ax_rate, ax_flight = axes[i]
        flag = f" [{row['step_flag']}]" if row.get("step_flag") else ""
        label = f"{row['stack']} {row['step']}{flag}"
        if req.empty:
            ax_rate.set_title(f"{label}: no request records")
            continue
        ds = records[key[:2]].steps[row["step"]]["dataset"]
        file = records[key[:2]].path / ds["path"]
        schedule = scheduled_ms(file) if file.is_file() else {}
        zero = schedule_zero_ns(req, schedule)
        starts = req["start_ns"].to_numpy(dtype=float)
        zero = starts.min() if zero is None else zero
        sent_s = (starts - zero) / 1e9
        asked_s = (np.array(sorted(schedule.values())) - min(schedule.values(), default=0)
                   ) / 1000.0
        bins = _arrival_bins(max(sent_s.max(), asked_s.max() if len(asked_s) else 0.0))
        width = bins[1] - bins[0]
        ax_rate.hist(asked_s, bins=bins, weights=np.full(len(asked_s), 1 / width), alpha=0.5,
                     label="scheduled (trace / speed-up)")
        ax_rate.hist(sent_s, bins=bins, weights=np.full(len(sent_s), 1 / width), alpha=0.5,
                     label="sent")
        _decorate(ax_rate, "time in the schedule (s)", "arrivals (requests/s)",
                  f"{label}: arrivals")
        times, level = in_flight(starts, req["end_ns"].to_numpy(dtype=float), zero)
        ax_flight.step(times, level, where="post", label="in flight")
        ax_flight.axhline(row["in_flight_cap"], color="k", ls="--", lw=1,
                          label=f"cap {row['in_flight_cap']}")
        _decorate(ax_flight, "time in the schedule (s)", "in flight (requests)",
                  f"{label}: requests in flight")
    fig.suptitle(tag.replace("\n", " ") + "Trace replay: arrivals and requests in flight "
                 "over time")
    return _save(fig, path)
