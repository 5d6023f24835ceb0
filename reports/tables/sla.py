"""sla.csv: the B200 recipes' measurement, output tok/s per GPU at the best point meeting the SLA.

One row per trace-replay step of every stack (the recipes' workload), then the published
figures of the same models as reference rows, labelled `published figure, not a measurement`.
A step meets the SLA (default: the recipes' >= 50 tok/s per user and p50 TTFT < 5 s) on its p50
TTFT and its per-user speed (completed requests); a failed, interrupted or client-bound step
never does (reports.records.flags: it stays in the table, marked in `step_flag`). The best point of
a stack is, per cache state, the step meeting it with the most output tok/s per GPU: cold steps
(the runner restarted the workers, empty KV caches) and warm ones (the same trace again,
caches kept) are never mixed.

Per-user speed has three definitions in the sources, and the row names the one it uses:
- mean: mean over completed requests of AIPerf's per-request speed (1 / that request's ITL);
- p50: the median of the same;
- e2e: mean OSL / (TTFT p50 + mean OSL x ITL p50), the K-EXAONE recipe's end-to-end speed.
By default a model is judged with the definition its published figure used (stacks without
published figures: p50), so a run reads like-for-like against the reference rows.

Other columns: requests dropped (`excluded_over_context`) or clipped for exceeding the smallest
maxModelLen (from the run record), the trace's nominal reuse and the block reuse its rows
really carry beside the reuse the server measured (cached / prompt tokens from the frontend,
the prefix-cache table's formula), and how to read speculative acceptance (real, synthetic, or
configured only on the local mocker).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from reports.records.measures import COUNT_COLUMNS, pct
from reports.records.runs import STEP_KEY
from reports.records.stackinfo import REHEARSAL_ROW, SIMULATION_ROW, StackInfo
from reports.tables.goodput import DEFAULT_SLOS, Slo, p50s_meet
from reports.tables.published import (
    PUBLISHED_LABEL,
    TRACE_NOMINAL_REUSE,
    PublishedFigure,
    model_user_speed,
    published_for,
)

MEASUREMENT = "measurement"
# rows measured by this project: on a cluster, or rehearsed on the local mocker (labelled so)
MEASURED_KINDS = (MEASUREMENT, REHEARSAL_ROW, SIMULATION_ROW)
TRACE_WORKLOAD = "trace_replay"
RECIPE_SLA = DEFAULT_SLOS[0]
DEFAULT_USER_SPEED = "p50"
USER_SPEEDS = {
    "mean": "mean of per-request output tok/s (1 / request ITL)",
    "p50": "p50 of per-request output tok/s (1 / request ITL)",
    "e2e": "end-to-end: mean OSL / (TTFT p50 + mean OSL x ITL p50)",
}
COLUMNS = ["row_kind", "stack", "model", "recipe", "topology", "gpus", "run_id", "step",
           "concurrency", "cache", "status", "step_flag", *COUNT_COLUMNS, "requested_rows",
           "excluded_over_context", "clipped_over_context", "max_model_len", "ttft_p50_ms",
           "itl_p50_ms", "user_speed_definition", "user_tok_s", "output_tok_s",
           "output_tok_s_per_gpu", "meets_sla", "best_point", "nominal_reuse",
           "trace_block_reuse", "measured_kv_reuse", "speculative_acceptance", "source",
           "usable"]
# Whole numbers, blank where a published row has none (not 8.0 / NaN floats).
_COUNTS = dict.fromkeys(["gpus", "concurrency", *COUNT_COLUMNS, "requested_rows",
                         "excluded_over_context", "clipped_over_context", "max_model_len"],
                        "Int64")


def user_speeds(ok: pd.DataFrame, ttft_p50_ms: float, itl_p50_ms: float) -> dict[str, float]:
    """The three per-user speeds of one step from its completed requests and their p50s."""
    if ok.empty:
        return dict.fromkeys(USER_SPEEDS, math.nan)
    osl = float(ok["osl"].mean())
    denominator = (ttft_p50_ms + osl * itl_p50_ms) / 1000.0
    return {"mean": float(ok["tok_s_per_user"].mean()), "p50": pct(ok["tok_s_per_user"], 50),
            "e2e": osl / denominator if denominator > 0 else math.nan}


def definition_for(model: str, forced: str | None) -> str:
    if forced is not None:
        if forced not in USER_SPEEDS:
            raise ValueError(f"user speed '{forced}': use one of {', '.join(USER_SPEEDS)}")
        return forced
    return model_user_speed(model) or DEFAULT_USER_SPEED


def _float(v: Any) -> float:
    return math.nan if v is None or pd.isna(v) else float(v)


def meets(ttft_p50_ms: float, itl_p50_ms: float, user_tok_s: float, usable: bool,
          slo: Slo) -> bool:
    """The goodput table's p50 check (every bound, ITL too) with this row's per-user speed;
    a step that is not usable (reports.records.flags) or an unknown speed never meets it."""
    if not usable or math.isnan(user_tok_s):
        return False
    return p50s_meet(ttft_p50_ms, user_tok_s, itl_p50_ms, slo)


def _measured_row(st: pd.Series, req: pd.DataFrame, info: StackInfo, definition: str,
                  slo: Slo) -> dict[str, Any]:
    ttft, itl = _float(st.get("ttft_p50_ms")), _float(st.get("itl_p50_ms"))
    speed = user_speeds(req[req["completed"].astype(bool)], ttft, itl)[definition]
    return {
        "row_kind": info.row_kind or MEASUREMENT,
        "stack": st["stack"], "model": info.model,
        "recipe": info.recipe, "topology": info.topology, "gpus": info.gpus,
        "run_id": st["run_id"], "step": st["step"], "concurrency": st["concurrency"],
        "cache": st.get("cache", "unknown"), "status": st.get("status"),
        "step_flag": st.get("step_flag", ""), **{c: st[c] for c in COUNT_COLUMNS},
        "requested_rows": st.get("requested_rows"),
        "excluded_over_context": st.get("excluded_over_context"),
        "clipped_over_context": st.get("clipped_over_context"),
        "max_model_len": st.get("max_model_len"), "ttft_p50_ms": ttft, "itl_p50_ms": itl,
        "user_speed_definition": f"{definition}: {USER_SPEEDS[definition]}",
        "user_tok_s": speed, "output_tok_s": _float(st.get("output_tok_s")),
        "output_tok_s_per_gpu": _float(st.get("output_tok_s_per_gpu")),
        "meets_sla": meets(ttft, itl, speed, bool(st.get("usable", True)), slo),
        "best_point": False,
        "nominal_reuse": st.get("nominal_reuse"),
        "trace_block_reuse": st.get("trace_block_reuse"),
        "measured_kv_reuse": _float(st.get("server_hit_rate")),
        "speculative_acceptance": info.speculative, "usable": bool(st.get("usable", True)),
        "source": f"{info.target} run of {info.workers} on {info.gpu_types}"
        + (" (mocker workers)" if info.target == "local" else "")}


def published_row(p: PublishedFigure) -> dict[str, Any]:
    definition = f"{p.user_speed}: as published" if p.user_speed else "not published"
    return {
        "row_kind": PUBLISHED_LABEL, "model": p.model,
        "stack": f"published: {p.model.split('/')[-1]} {p.kind}, {p.layout}",
        "recipe": "baseline" if p.kind == "baseline" else "optimized",
        "topology": "" if p.kind == "baseline" else p.kind, "gpus": p.gpus,
        "concurrency": p.concurrency, "cache": "not stated",
        "excluded_over_context": p.excluded_over_context, "ttft_p50_ms": p.ttft_p50_ms,
        "user_speed_definition": definition, "user_tok_s": p.user_tok_s,
        "output_tok_s_per_gpu": p.tok_s_per_gpu, "meets_sla": None, "best_point": False,
        "nominal_reuse": TRACE_NOMINAL_REUSE, "measured_kv_reuse": p.measured_reuse,
        "speculative_acceptance": p.speculative, "status": f"published: {p.status}",
        "source": p.source}


def mark_best(sla: pd.DataFrame) -> pd.DataFrame:
    """best_point: per stack and cache state, the SLA-meeting step with the most tok/s/GPU."""
    measured = sla["row_kind"].isin(MEASURED_KINDS)
    ok = sla[measured & sla["meets_sla"].eq(True)]
    best = ok.groupby(["stack", "cache"])["output_tok_s_per_gpu"].idxmax()
    sla["best_point"] = False
    sla.loc[best.to_numpy(), "best_point"] = True
    return sla


def sla_table(steps: pd.DataFrame, requests: pd.DataFrame, infos: dict[str, StackInfo],
              slo: Slo = RECIPE_SLA, user_speed: str | None = None) -> pd.DataFrame:
    """sla.csv: measured trace steps (best points marked), then the published reference rows
    of the same models; empty when no run has a trace step."""
    trace = steps[steps["workload"] == TRACE_WORKLOAD]
    if trace.empty:
        return pd.DataFrame(columns=COLUMNS)
    by_step = {k: g for k, g in requests.groupby(STEP_KEY, sort=False)}
    rows = []
    for _, st in trace.sort_values(["stack", "cache", "concurrency", "run_id"]).iterrows():
        info = infos[st["stack"]]
        req = by_step.get(tuple(st[k] for k in STEP_KEY), requests.iloc[0:0])
        rows.append(_measured_row(st, req, info, definition_for(info.model, user_speed), slo))
    models = {infos[s].model for s in trace["stack"]}
    rows += [published_row(p) for p in published_for(models)]
    sla = pd.DataFrame(rows, columns=COLUMNS).astype(_COUNTS)
    return mark_best(sla)


def best_points(sla: pd.DataFrame, cache: str | None = None) -> pd.DataFrame:
    """The measured best points (one per stack and cache state, or of one cache state)."""
    out = sla[sla["row_kind"].isin(MEASURED_KINDS) & sla["best_point"].astype(bool)]
    return out if cache is None else out[out["cache"] == cache]
