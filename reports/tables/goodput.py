"""Goodput under a service-level objective (SLO), per stack and step.

An SLO is a TTFT bound plus a per-user speed bound and/or an ITL bound. A request meets it when
it completed (workloads.outcomes: failed, truncated and cancelled requests never do) and its
own TTFT, per-user output speed and ITL meet the bounds; a step meets it when its p50 TTFT,
p50 per-user speed and p50 ITL (completed requests) do (the seed recipes' SLA is ">= 50 tok/s
per user and p50 TTFT < 5 s"), and it is usable (reports.records.flags). `goodput_fraction` is the
share of attempted requests meeting it, `goodput_req_s` those over the measurement window
(the same window as throughput and cost). The best operating point of a stack is the usable
step meeting the SLO with the most output tok/s per GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from reports.records.measures import COUNT_COLUMNS, pct
from reports.records.runs import STEP_KEY


@dataclass(frozen=True)
class Slo:
    name: str
    ttft_ms: float
    min_tok_s_per_user: float | None = None
    itl_ms: float | None = None

    @property
    def definition(self) -> str:
        parts = [f"TTFT < {self.ttft_ms:g} ms"]
        if self.min_tok_s_per_user is not None:
            parts.append(f"per-user output >= {self.min_tok_s_per_user:g} tok/s")
        if self.itl_ms is not None:
            parts.append(f"ITL <= {self.itl_ms:g} ms")
        return " and ".join(parts)


DEFAULT_SLOS = (
    Slo("sla-tps50-ttft5s", ttft_ms=5000, min_tok_s_per_user=50),
    Slo("ttft2s-itl25ms", ttft_ms=2000, itl_ms=25),
)

_KEYS = {"ttft_ms": "ttft_ms", "tok_s_per_user": "min_tok_s_per_user", "itl_ms": "itl_ms"}


def parse_slo(spec: str) -> Slo:
    """`name:ttft_ms=5000,tok_s_per_user=50[,itl_ms=20]` -> Slo."""
    name, _, body = spec.partition(":")
    if not body:
        raise ValueError(f"SLO '{spec}': write it as name:ttft_ms=5000,tok_s_per_user=50 "
                         "(keys: ttft_ms, tok_s_per_user, itl_ms)")
    values: dict[str, float] = {}
    for item in body.split(","):
        key, _, raw = item.partition("=")
        key = key.strip()
        if key not in _KEYS:
            raise ValueError(f"SLO '{spec}': unknown key '{key}'; use ttft_ms, "
                             "tok_s_per_user or itl_ms")
        try:
            values[_KEYS[key]] = float(raw)
        except ValueError:
            raise ValueError(f"SLO '{spec}': '{key}' needs a number, got '{raw}'") from None
    if "ttft_ms" not in values:
        raise ValueError(f"SLO '{spec}': ttft_ms is required")
    return Slo(name.strip() or "slo", **values)


def request_meets(req: pd.DataFrame, slo: Slo) -> pd.Series:
    # A request without a figure a bound needs (a one-token answer has no inter-token time,
    # so no ITL and no per-user speed) is not good, as in AIPerf's own good-request count
    # (aiperf 0.13.0, metrics/types/good_request_count_metric.py: NoMetricValue -> not good).
    ok = req["completed"].astype(bool) & (req["ttft_ms"] < slo.ttft_ms)
    if slo.min_tok_s_per_user is not None:
        ok &= req["tok_s_per_user"] >= slo.min_tok_s_per_user
    if slo.itl_ms is not None:
        ok &= req["itl_ms"] <= slo.itl_ms
    return ok.fillna(False)


def p50s_meet(ttft_p50_ms: float, user_tok_s: float, itl_p50_ms: float, slo: Slo) -> bool:
    """A step's p50s against every bound of the SLO (a NaN figure never meets a bound)."""
    if not ttft_p50_ms < slo.ttft_ms:
        return False
    if slo.min_tok_s_per_user is not None and not user_tok_s >= slo.min_tok_s_per_user:
        return False
    return slo.itl_ms is None or itl_p50_ms <= slo.itl_ms


def step_meets(step: pd.Series, done: pd.DataFrame, slo: Slo) -> bool:
    """A usable step's p50s (`done`: its completed requests) against the SLO."""
    if not len(done) or not bool(step.get("usable", True)):
        return False
    return p50s_meet(step["ttft_p50_ms"], pct(done["tok_s_per_user"], 50),
                     step["itl_p50_ms"], slo)


def goodput(steps: pd.DataFrame, requests: pd.DataFrame,
            slos: tuple[Slo, ...] = DEFAULT_SLOS) -> pd.DataFrame:
    by_step = {k: g for k, g in requests.groupby(STEP_KEY, sort=False)}
    rows = []
    for slo in slos:
        for _, st in steps.iterrows():
            req = by_step.get(tuple(st[k] for k in STEP_KEY), requests.iloc[0:0])
            met = int(request_meets(req, slo).sum())
            attempted = int(st["attempted"])
            window_s = st["window_s"]
            rows.append({
                "stack": st["stack"], "run_id": st["run_id"], "step": st["step"],
                "workload": st["workload"], "concurrency": st["concurrency"],
                "step_flag": st["step_flag"], "slo": slo.name,
                "slo_definition": slo.definition, **{c: st[c] for c in COUNT_COLUMNS},
                "requests_meeting_slo": met,
                "goodput_fraction": met / attempted if attempted else math.nan,
                "goodput_req_s": met / window_s if window_s > 0 else math.nan,
                "window_s": window_s,
                "step_meets_slo": step_meets(st, req[req["completed"].astype(bool)], slo),
                "output_tok_s": st["output_tok_s"],
                "output_tok_s_per_gpu": st["output_tok_s_per_gpu"], "usable": st["usable"]})
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    meeting = out[out["step_meets_slo"] & out["usable"].astype(bool)]
    best = meeting.groupby(["stack", "slo"])["output_tok_s_per_gpu"].max()
    out["best_output_tok_s_per_gpu"] = [best.get((s, n), math.nan)
                                        for s, n in zip(out["stack"], out["slo"], strict=True)]
    out["best_point"] = out["step_meets_slo"] & out["usable"].astype(bool) & (
        out["output_tok_s_per_gpu"] == out["best_output_tok_s_per_gpu"])
    return out
