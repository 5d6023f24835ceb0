"""Run folders -> the run record and tidy frames (requests, steps, server metrics).

A run folder is `runs/<stack>/<run-id>/` with `manifest.json` and one folder per step holding
AIPerf's exports; a step id is the step folder's path below the run
(`concurrency_sweep/c4`, `prefix_cache/share050`, a repeat as `concurrency_sweep/c4/r2`).
Frames are cached as parquet in `<run>/.reports-cache/`, rebuilt when any export changes.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reports.records import exports, measures, routing, server
from workloads import outcomes
from workloads.manifest import COMPLETE
from workloads.request_trace import STEP_FILE as TRACE_FILE
from workloads.routing_evidence import request_of

CACHE_DIR = ".reports-cache"
# 5: AIPerf's replay schedule lag columns; 6: routing evidence (frontend request trace) per
# step and worker; 7: requested rows without the warm-up, the AIPerf patches each step ran;
# 8: the frontend's own TTFT p40 / p50 / p60 from that trace; 9: and its ITL p50
CACHE_VERSION = "9"
MANIFEST = "manifest.json"
_REPEAT = re.compile(r"^r(\d+)$")
# A step is unique by stack, run and step id (run ids may repeat across stacks).
STEP_KEY = ["stack", "run_id", "step"]


class RunError(Exception):
    """A run folder the reports cannot use; the message says what is missing and the fix."""


@dataclass
class RunRecord:
    """What report.md cites for a run: identity, config and the versions that ran."""

    path: Path
    stack: str
    run_id: str
    config: dict[str, Any]
    config_hash: str
    versions: dict[str, Any]
    datasets: dict[str, Any]
    steps: dict[str, dict[str, Any]]
    started_at: str | None = None
    ended_at: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def parse_step_id(step_id: str) -> dict[str, Any]:
    """`concurrency_sweep/c4/r2` -> workload, variant, repeat, group (id without the repeat)."""
    parts = step_id.split("/")
    repeat = 1
    if len(parts) > 1 and (m := _REPEAT.match(parts[-1])):
        repeat, parts = int(m.group(1)), parts[:-1]
    return {"workload": parts[0], "variant": "/".join(parts[1:]) or "main",
            "repeat": repeat, "group": "/".join(parts)}


def _steps_of(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Manifest steps as {step id: record}, whether stored as a mapping or a list."""
    steps = manifest.get("steps") or {}
    if isinstance(steps, list):
        return {str(s.get("id") or s.get("step")): s for s in steps}
    return {str(k): v for k, v in steps.items()}


def read_record(run_dir: Path) -> RunRecord:
    path = run_dir / MANIFEST
    if not path.exists():
        raise RunError(f"{run_dir}: no {MANIFEST}; pass a run folder written by "
                       "`python -m workloads run` (runs/<stack>/<run-id>/)")
    m = json.loads(path.read_text())
    config = m.get("stack_config") or m.get("config") or {}
    config_hash = m.get("stack_config_sha256") or m.get("config_hash") or hashlib.sha256(
        json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    attempts = m.get("attempts") or [{}]
    versions = m.get("versions") or attempts[-1].get("versions") or {}
    known = {"stack", "run_id", "config", "stack_config", "config_hash", "stack_config_sha256",
             "versions", "datasets", "steps", "started_at", "ended_at"}
    return RunRecord(
        path=run_dir, stack=str(m.get("stack") or run_dir.parent.name),
        run_id=str(m.get("run_id") or run_dir.name), config=config, config_hash=config_hash,
        versions=versions, datasets=m.get("datasets") or {}, steps=_steps_of(m),
        started_at=m.get("started_at") or m.get("created") or attempts[0].get("started"),
        ended_at=m.get("ended_at") or attempts[-1].get("ended"),
        extra={k: v for k, v in m.items() if k not in known})


def step_dirs(run_dir: Path) -> dict[str, Path]:
    """Every step folder below the run (a folder holding AIPerf's summary export)."""
    out = {}
    for summary in sorted(run_dir.rglob(exports.AIPERF_SUMMARY)):
        rel = summary.parent.relative_to(run_dir).as_posix()
        if rel.startswith(".") or rel.endswith(".partial") or "/phases/" in f"/{rel}/":
            continue
        out[rel] = summary.parent
    return out


def _dataset_file(record: RunRecord, step_id: str, aiperf_path: str | None) -> Path | None:
    """The step's dataset file: the manifest's entry, else AIPerf's recorded path."""
    candidates = []
    for entry in (record.steps.get(step_id, {}).get("dataset"), record.datasets.get(step_id)):
        if isinstance(entry, dict) and entry.get("path"):
            candidates.append(Path(entry["path"]))
    if aiperf_path:
        candidates.append(Path(aiperf_path))
    for c in candidates:
        for p in (c, record.path / c, record.path / step_id / c.name,
                  record.path / "datasets" / c.name):
            if p.is_file():
                return p
    return None


def _manifest_step_fields(rec: dict[str, Any], host_cores: int | None) -> dict[str, Any]:
    """The runner's record of a step: status, cold or warm cache, the rows dropped or clipped
    for the context limit, the trace's reuse, client saturation, AIPerf's CPU use.

    The runner records `client: {client_bound, reasons, cpu: {mean_cores, max_cores},
    achieved_concurrency, host_cores}` (older records: the run's `host.cpu_count`); a flat
    `client_saturated` is read too. The reports re-judge status and client verdict
    (reports.records.flags) with the runner's own rules.
    """
    client = rec.get("client") or {}
    cpu = client.get("cpu") or {}
    params = rec.get("params") or {}
    dataset = rec.get("dataset") or {}
    limit = dataset.get("context_limit") or {}
    cold = rec.get("cold")
    # A sweep step's first rows are its AIPerf's warm-up (workloads/step_warmup.py): sent, but
    # not requested of the measurement (`--request-count` is the rows left).
    warmup = int(rec.get("aiperf_warmup_requests") or 0)
    requested = limit.get("requested_rows", dataset.get("rows"))
    # The step's own statement (params.cache: its prompts start uncached or cached) wins over
    # the restart flag: under coldRestart first-step a later cold-cache step is not restarted.
    cache = params.get("cache") or (None if cold is None else ("cold" if cold else "warm"))
    return {"recorded_status": rec.get("status"),
            "recorded_reasons": "; ".join(rec.get("failure_reasons") or []),
            "cache": cache or "unknown",
            "cold_restart": cold,   # the runner restarted the workers before the step
            "requested_rows": requested - warmup if requested is not None else None,
            "excluded_over_context": limit.get("dropped"),
            "clipped_over_context": limit.get("clipped"),
            "max_model_len": limit.get("max_model_len"),
            "nominal_reuse": params.get("target_reuse"),
            "trace_block_reuse": dataset.get("block_reuse"),
            # "fixed": a replayed trace, its concurrency only a cap on requests in flight
            "schedule": params.get("schedule"),
            "client_saturated": client.get("client_bound", rec.get("client_saturated")),
            "client_saturation_reasons": "; ".join(client.get("reasons") or []),
            "client_cpu_cores_mean": cpu.get("mean_cores"),
            "client_cpu_cores_max": cpu.get("max_cores"),
            # the whole host while the load ran, and what it ran at a lower priority beside it
            "host_busy_cores": cpu.get("host_busy_cores"),
            "host_low_priority_cores": cpu.get("host_low_priority_cores"),
            "host_cores": client.get("host_cores", host_cores),
            # what the step's AIPerf said of the project's patches at start-up (JSON; None in
            # records before the patches), judged by reports.records.flags
            "aiperf_patches": json.dumps(rec["aiperf_patches"], sort_keys=True)
            if isinstance(rec.get("aiperf_patches"), dict) else None,
            "step_started_at": rec.get("start", rec.get("started_at")),
            "step_ended_at": rec.get("end", rec.get("ended_at"))}


def load_step(record: RunRecord, step_id: str, step_dir: Path
              ) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(step row, requests, server-metrics and per-worker routing frames) of one step."""
    keys = {"stack": record.stack, "run_id": record.run_id, "step": step_id,
            **parse_step_id(step_id)}
    summary = exports.read_json(step_dir / exports.AIPERF_SUMMARY)
    host_cores = (record.extra.get("host") or {}).get("cpu_count")
    row = {**keys, **exports.summary_row(summary),
           **_manifest_step_fields(record.steps.get(step_id, {}), host_cores)}
    records_path = step_dir / exports.AIPERF_RECORDS
    req = pd.DataFrame(exports.request_rows(records_path.read_bytes())
                       if records_path.exists() else [], columns=_REQUEST_COLUMNS)
    req = _with_requested_lengths(req, record, step_id, step_dir, row).astype(_REQUEST_DTYPES)
    req = measures.classify_requests(req, outcomes.expectations(summary.get("input_config")))
    row.update(measures.client_figures(req, row["concurrency"],
                                       per_conversation=keys["workload"] == "multi_turn"))
    sm_path = step_dir / exports.SERVER_METRICS
    keep = exports.runner_endpoints(record.steps.get(step_id, {}).get("server_metrics"))
    srv = pd.DataFrame(exports.server_metric_rows(exports.read_json(sm_path), keep)
                       if sm_path.exists() else [], columns=_SERVER_COLUMNS)
    row.update(server.step_figures(srv))
    row.update(measures.reconcile(req, row))
    row["server_metrics_scraped"] = sm_path.exists()
    step_rec = record.steps.get(step_id, {})
    figures, per_worker = routing.step_routing(step_dir, srv, step_rec.get("server_metrics"),
                                               step_rec)
    row.update(figures)
    row.update(frontend_ttft(step_dir))
    workers = pd.DataFrame(per_worker, columns=routing.WORKER_COLUMNS)
    for k, v in keys.items():
        req[k] = v
        srv[k] = v
        workers[k] = v
    return row, req, srv, workers


FRONTEND_TTFT = ("frontend_ttft_p40_ms", "frontend_ttft_p50_ms", "frontend_ttft_p60_ms")


def frontend_ttft(step_dir: Path) -> dict[str, float]:
    """The frontend's own TTFT p40 / p50 / p60 and ITL p50 over the step's traced requests (its
    request trace's `ttft_ms` and `avg_itl_ms`; linear interpolation, as every percentile
    here), and how many; NaN without a trace. The client's TTFT (AIPerf) adds the first-data
    stall of a kept-alive connection (docs/testing.md), which the frontend's does not, and its
    ITL runs from that late first token, so it is a little short."""
    ttfts, itls = [], []
    path = step_dir / TRACE_FILE
    if path.exists():
        for line in path.read_text().splitlines():
            req = request_of(line) or {}
            if isinstance(req.get("ttft_ms"), int | float):
                ttfts.append(float(req["ttft_ms"]))
            if isinstance(req.get("avg_itl_ms"), int | float) and req["avg_itl_ms"] > 0:
                itls.append(float(req["avg_itl_ms"]))
    figures = dict(zip(FRONTEND_TTFT, np.percentile(ttfts, [40, 50, 60]).tolist()
                       if ttfts else [math.nan] * 3, strict=True))
    return {**figures, "frontend_itl_p50_ms": float(np.median(itls)) if itls else math.nan,
            "frontend_requests": float(len(ttfts))}


_REQUEST_COLUMNS = ["conversation_id", "turn_index", "x_request_id", "start_ns", "end_ns",
                    "cancelled", "has_error", "error_type", "error_code", "completion_tokens",
                    *exports.REQUEST_METRICS.values()]
# Fixed dtypes, so steps with and without failures (all-None error columns) concatenate cleanly.
# (types and dtype names as astype takes them: the stubs spell that union in a private module)
_REQUEST_DTYPES: dict[str, Any] = {
    "conversation_id": object, "turn_index": "Int64", "x_request_id": object,
    "start_ns": "Int64", "end_ns": "Int64", "cancelled": bool,
    "has_error": bool, "error_type": object, "error_code": float,
    "completion_tokens": float, "requested_isl": float, "requested_osl": float,
    **{c: float for c in exports.REQUEST_METRICS.values()}}
_SERVER_COLUMNS = ["metric", "type", "endpoint", "labels", "stat", "value"]


def _with_requested_lengths(req: pd.DataFrame, record: RunRecord, step_id: str,
                            step_dir: Path, row: dict[str, Any]) -> pd.DataFrame:
    """Add requested_isl/requested_osl per request where the dataset says them."""
    req = req.assign(requested_isl=float("nan"), requested_osl=float("nan"))
    path = _dataset_file(record, step_id, row.get("dataset_path"))
    if path is not None and row.get("dataset_format") == "mooncake_trace":
        asked = pd.DataFrame(exports.dataset_lengths(path))
        req = req.drop(columns=["requested_isl", "requested_osl"]).merge(
            asked, on=["conversation_id", "turn_index"], how="left")
    elif (step_dir / "inputs.json").exists():
        asked = pd.DataFrame(exports.synthetic_requested_osl(
            exports.read_json(step_dir / "inputs.json")))
        if not asked.empty:
            req = req.drop(columns=["requested_osl"]).merge(
                asked, on=["conversation_id", "turn_index"], how="left")
        req["requested_isl"] = row.get("requested_isl_mean")
    return req


def _fingerprint(dirs: dict[str, Path], run_dir: Path) -> str:
    """Each input file's path inside the run, size and mtime: a run folder moved or copied
    with its times (cp -p, rsync -a, shutil.copytree) keeps its cache; the frames hold no path
    of the run folder itself."""
    h = hashlib.sha256(CACHE_VERSION.encode())
    files = [run_dir / MANIFEST] + [d / n for d in dirs.values()
                                    for n in (exports.AIPERF_SUMMARY, exports.AIPERF_RECORDS,
                                              exports.SERVER_METRICS, "inputs.json",
                                              TRACE_FILE)]
    for f in files:
        if f.exists():
            st = f.stat()
            h.update(f"{f.relative_to(run_dir)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


@dataclass
class RunFrames:
    record: RunRecord
    steps: pd.DataFrame
    requests: pd.DataFrame
    server: pd.DataFrame
    # per step and worker: where its requests went (reports.records.routing)
    workers: pd.DataFrame


def load_run(run_dir: Path, use_cache: bool = True) -> RunFrames:
    """All frames of one run, from the parquet cache when the exports have not changed."""
    run_dir = run_dir.resolve()
    record = read_record(run_dir)
    dirs = step_dirs(run_dir)
    if not dirs:
        raise RunError(f"{run_dir}: no step folders with {exports.AIPERF_SUMMARY}; "
                       "has the run completed any step?")
    cache = run_dir / CACHE_DIR
    stamp = _fingerprint(dirs, run_dir)
    names = ("steps", "requests", "server", "workers")
    if use_cache and (cache / "fingerprint").exists() and \
            (cache / "fingerprint").read_text() == stamp:
        frames = [pd.read_parquet(cache / f"{n}.parquet") for n in names]
        return RunFrames(record, *frames)
    rows, reqs, srvs, workers = [], [], [], []
    for step_id, d in dirs.items():
        row, req, srv, per_worker = load_step(record, step_id, d)
        rows.append(row)
        reqs.append(req)
        srvs.append(srv)
        workers.append(per_worker)
    frames = [pd.DataFrame(rows), pd.concat(reqs, ignore_index=True),
              pd.concat(srvs, ignore_index=True), pd.concat(workers, ignore_index=True)]
    try:
        cache.mkdir(exist_ok=True)
        for n, f in zip(names, frames, strict=True):
            f.to_parquet(cache / f"{n}.parquet", index=False)
        (cache / "fingerprint").write_text(stamp)
    except OSError:
        pass  # a read-only run folder still reports, just without the cache
    return RunFrames(record, *frames)


def _status(run: Path) -> str:
    try:
        return str(json.loads((run / MANIFEST).read_text()).get("status") or "unknown")
    except (OSError, ValueError):
        return "unreadable"


def _simulated(run: Path) -> bool:
    """A run DynoSim replayed (`workloads run --target sim`): never a stack's measured run."""
    try:
        info = json.loads((run / MANIFEST).read_text()).get("target_info") or {}
    except (OSError, ValueError):
        return False
    return info.get("kind") == "sim"


def resolve_run_dirs(targets: list[str], runs_root: Path,
                     say: Callable[[str], None] | None = None) -> list[Path]:
    """Run folders from arguments: a run folder as given, or a stack name: its newest complete
    run (by the manifest's last write), said through `say` with any newer run left out."""
    out = []
    for t in targets:
        p = Path(t)
        if (p / MANIFEST).exists() or p.is_dir() and any(p.rglob(exports.AIPERF_SUMMARY)):
            out.append(p)
            continue
        stack_dir = runs_root / t
        found = sorted((d for d in stack_dir.glob("*") if (d / MANIFEST).exists()),
                       key=lambda d: (d / MANIFEST).stat().st_mtime) if stack_dir.is_dir() else []
        # a simulated run is reported when its folder is given, never in a measured one's place
        runs = [d for d in found if not _simulated(d)]
        if not runs:
            raise RunError(f"'{t}' is neither a run folder nor a stack with runs under "
                           f"{runs_root}: run `python -m workloads run {t}` first or give the "
                           "run folder's path")
        complete = [d for d in runs if _status(d) == COMPLETE]
        if not complete:
            last = runs[-1]
            raise RunError(f"stack '{t}' has no complete run under {stack_dir} (newest: "
                           f"{last.name}, {_status(last)}): resume it with `python -m workloads "
                           f"run {t} --run-id {last.name}`, or give its folder ({last}) to "
                           "report it as it is")
        chosen = complete[-1]
        newer = [f"{d.name} ({_status(d)})" for d in runs[runs.index(chosen) + 1:]]
        if say is not None:
            say(f"{t}: newest complete run {chosen}" + (
                f"; newer, not complete, left out: {', '.join(newer)}" if newer else ""))
        out.append(chosen)
    return out
