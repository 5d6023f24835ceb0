"""Where each step's requests went: the frontend's request trace (workloads.routing_evidence)
beside each worker's own request counter, with workers named as the runner named their
/metrics endpoints (`worker-0`, `prefill-0`, a pod's component on a cluster).

A worker's /metrics carries its instance id as the hex `worker_id` label; the trace names the
same instance in decimal. Ids the step's metrics do not name are shown as `instance <hex>`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from reports.records.exports import normalized_metrics_url
from stacks.catalog import metrics as m
from workloads import routing_evidence as rev
from workloads.request_trace import STEP_FILE

WORKER_COLUMNS = ["worker", "prompts", "decodes", "requests_counted", "prompt_tokens",
                  "cached_tokens", "hit_rate", "follow_ups", "same_worker_follow_ups"]
# The step's routing figures (steps.csv columns); NaN without a trace.
FIGURES = ["traced_requests", "prompt_workers", "decode_workers", "follow_ups",
           "same_worker_share", "chance_same_worker", "trace_hit_rate", "trace_hit_rate_se",
           "handoff_share", "kv_transfer_est_ms_mean", "requests_per_worker",
           "routing_evidence"]


def worker_names(srv: pd.DataFrame, named: dict[str, str] | None) -> dict[str, str]:
    """{decimal instance id: endpoint name} from the `worker_id` labels of the step's series."""
    by_url = {normalized_metrics_url(u): n for n, u in (named or {}).items() if u}
    out: dict[str, str] = {}
    if srv.empty:
        return out
    for url, labels in srv[["endpoint", "labels"]].drop_duplicates().itertuples(index=False):
        hex_id = json.loads(labels).get("worker_id")
        name = by_url.get(normalized_metrics_url(url)) if url else None
        if hex_id and name:
            try:
                out[str(int(hex_id, 16))] = name
            except ValueError:
                continue
    return out


def _name(instance: str | None, names: dict[str, str]) -> str | None:
    if instance is None:
        return None
    try:
        return names.get(instance, f"instance {int(instance):x}")
    except ValueError:
        return names.get(instance, f"instance {instance}")


def _counted(srv: pd.DataFrame, named: dict[str, str] | None) -> dict[str, float]:
    """Each worker's own count of `generate` requests over the step (its system port)."""
    if srv.empty:
        return {}
    by_url = {normalized_metrics_url(u): n for n, u in (named or {}).items() if u}
    sel = srv[srv["metric"].isin({m.WORKER_REQUESTS, m.WORKER_REQUESTS.removesuffix("_total")})
              & (srv["stat"] == "total")]
    out: dict[str, float] = {}
    for url, labels, value in sel[["endpoint", "labels", "value"]].itertuples(index=False):
        name = by_url.get(normalized_metrics_url(url)) if url else None
        if name and json.loads(labels).get("dynamo_endpoint") == "generate":
            out[name] = out.get(name, 0.0) + float(value)
    return out


def step_routing(step_dir: Path, srv: pd.DataFrame, named: dict[str, str] | None,
                 record: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the step's routing figures, one row per worker) from its trace and metrics."""
    path = step_dir / STEP_FILE
    evidence = record.get("routing_evidence") or {}
    if not path.exists():
        why = evidence.get("reason") or "no request trace in the step folder (older run)"
        return {**{k: math.nan for k in FIGURES}, "requests_per_worker": "",
                "routing_evidence": f"none: {why}"}, []
    with path.open() as f:
        reqs = rev.requests(f)
    names = worker_names(srv, named)
    for r in reqs:
        r["prompt_on"] = _name(r["prefill_worker"], names)
        r["decode_on"] = _name(r["decode_worker"], names)
    counted = _counted(srv, named)
    workers = sorted({r["prompt_on"] for r in reqs if r["prompt_on"]}
                     | {r["decode_on"] for r in reqs if r["decode_on"]} | set(counted))
    rows = []
    for w in workers:
        mine = [r for r in reqs if r["prompt_on"] == w]
        follow = [r for r in mine if r["follows"] is not None]
        prompt = sum(r["input_tokens"] for r in mine if not math.isnan(r["input_tokens"]))
        cached = sum(r["cached_tokens"] for r in mine if not math.isnan(r["cached_tokens"]))
        rows.append({"worker": w, "prompts": len(mine),
                     "decodes": sum(1 for r in reqs if r["decode_on"] == w),
                     "requests_counted": counted.get(w, math.nan), "prompt_tokens": prompt,
                     "cached_tokens": cached, "hit_rate": cached / prompt if prompt else math.nan,
                     "follow_ups": len(follow),
                     "same_worker_follow_ups": sum(1 for r in follow if r["same_worker"])})
    figures = rev.summary(reqs)
    figures["requests_per_worker"] = ", ".join(f"{r['worker']} {r['prompts']}" for r in rows
                                               if r["prompts"])
    short = len(reqs) < (evidence.get("expected") or 0)
    figures["routing_evidence"] = (f"{len(reqs)} of {evidence.get('expected')} requests traced"
                                   if short else "frontend request trace")
    return figures, rows


TABLE_COLUMNS = ["stack", "run_id", "step", "workload", "step_flag", *WORKER_COLUMNS,
                 "same_worker_share", "server_hit_rate", "routing_evidence"]


def routing_table(workers: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per step and worker: prompts processed and decoded, the worker's own request count,
    cached / prompt tokens, follow-up turns that came back to it; beside the step's
    same-worker share and the frontend's hit rate."""
    if workers.empty:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    keys = ["stack", "run_id", "step"]
    step_cols = [c for c in ("workload", "step_flag", "usable", "same_worker_share",
                             "server_hit_rate", "routing_evidence") if c in steps]
    out = workers.drop(columns=[c for c in step_cols if c in workers]).merge(
        steps[keys + step_cols], on=keys, how="left")
    return out[[c for c in [*TABLE_COLUMNS, "usable"] if c in out]]
