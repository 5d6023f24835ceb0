"""The one module that runs NVIDIA DynoSim, Dynamo 1.6.1's offline replay: a thin shell.

Run by workloads/sim/replay.py as `.venv-engine/bin/python replay_child.py`: one JSON request
per stdin line, one JSON answer per stdout line (the engine's own logging goes to stderr). It
imports nothing of dynamo-bench (the engine's environment does not hold it) and decides nothing: the
traces, the workers' command lines and the router are built by the pure modules of workloads/sim/.

Each worker role's engine configuration is made from the very command line a live mocker of the
same stack runs, by the mocker's own code (ai-dynamo 1.6.1 dynamo/mocker/main.py `worker`):
`parse_args(argv)`, `resolve_planner_profile_data`, `compute_kv_bytes_per_token` from the model
folder's config.json when --kv-bytes-per-token is unset, `load_mocker_engine_args`,
`apply_worker_engine_args_overrides`. So a simulated worker and a live mocker of one stack share
their KV blocks, block size, batch limits, timing table, transfer and offload settings.

Request: {"jobs": [{"trace": [rows], "trace_block_size": int, "roles": {role: {"argv": [...],
"count": n}}, "router_mode": "round_robin" | "kv_router", "router_config": {...} | null,
"replay_concurrency": int | null, "runs": int}]}; roles are {"worker"} or {"prefill",
"decode"}. Answer: {"versions": {...}, "answers": [{"runs": [{"requests": [...], "summary":
{...}, "wall_s": x}], "engine_args": {role: config}}] } in job order; a job that raises answers
{"error": "..."}.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")

# Per-request fields of DynoSim's report kept (dynamo/replay: capture_per_request rows); the
# rest (admission and routing histories) are large and read by nothing here.
KEPT = ("session_id", "turn_index", "arrival_time_ms", "first_admit_ms", "first_token_ms",
        "last_token_ms", "terminal_time_ms", "ttft_ms", "itl_ms", "e2e_latency_ms",
        "input_length", "requested_output_length", "output_length", "reused_input_tokens",
        "prefill_worker_idx", "decode_worker_idx", "prefill_admit_ms", "source_held_ms",
        "destination_activated_ms", "decode_admit_ms", "decode_reused_input_tokens",
        "admission_count", "readmission_count", "terminal_status")
SUMMARY = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "median_itl_ms",
           "p99_itl_ms", "output_throughput_tok_s", "prefix_cache_reused_ratio",
           "total_output_tokens", "duration_ms", "wall_time_ms", "num_requests",
           "completed_requests", "gpu_hours")


def engine_args(argv: list[str]) -> dict[str, Any]:
    """The canonical engine configuration a live mocker started with `argv` runs on."""
    from dynamo.mocker.args import parse_args, resolve_planner_profile_data
    from dynamo.mocker.config import (
        apply_worker_engine_args_overrides,
        load_mocker_engine_args,
    )
    from dynamo.mocker.utils.kv_cache import compute_kv_bytes_per_token

    args = parse_args(argv)
    profile = resolve_planner_profile_data(args.planner_profile_data)
    args.planner_profile_data = profile.npz_path if profile is not None else None
    if args.kv_bytes_per_token is None and args.model_path:
        args.kv_bytes_per_token = compute_kv_bytes_per_token(args.model_path,
                                                             args.kv_cache_dtype)
    config = load_mocker_engine_args(args)
    return dict(apply_worker_engine_args_overrides(config,
                                                   kv_bytes_per_token=args.kv_bytes_per_token))


def run_job(job: dict[str, Any], folder: Path) -> dict[str, Any]:
    from dynamo.llm import KvRouterConfig
    from dynamo.replay import run_trace_replay

    roles = job["roles"]
    configs = {role: engine_args(spec["argv"]) for role, spec in roles.items()}
    trace = folder / "trace.jsonl"
    trace.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in job["trace"]))
    kwargs: dict[str, Any] = {"trace_block_size": job["trace_block_size"],
                              "router_mode": job["router_mode"], "capture_per_request": True,
                              "replay_concurrency": job.get("replay_concurrency"),
                              "max_sim_time_ms": job.get("max_sim_time_ms")}
    if job.get("router_config") is not None:
        kwargs["router_config"] = KvRouterConfig.from_json(json.dumps(job["router_config"]))
    if "worker" in roles:
        kwargs |= {"extra_engine_args": configs["worker"], "num_workers": roles["worker"]["count"]}
    else:
        kwargs |= {"prefill_engine_args": configs["prefill"],
                   "decode_engine_args": configs["decode"],
                   "num_prefill_workers": roles["prefill"]["count"],
                   "num_decode_workers": roles["decode"]["count"]}
    runs = []
    for _ in range(job.get("runs", 1)):
        t0 = time.monotonic()
        report = run_trace_replay([str(trace)], **kwargs)
        requests = [{k: r.get(k) for k in KEPT} for r in report.per_request or []]
        runs.append({"requests": requests,
                     "summary": {k: report.summary[k] for k in SUMMARY if k in report.summary},
                     "wall_s": round(time.monotonic() - t0, 4)})
    return {"runs": runs, "engine_args": configs}


def answer(job: dict[str, Any], folder: Path) -> dict[str, Any]:
    try:
        with contextlib.redirect_stdout(sys.stderr):   # the answer is the only stdout line
            return run_job(job, folder)
    except Exception as exc:  # noqa: BLE001 - one bad job answers as such, not the batch
        return {"error": f"{type(exc).__name__}: {exc}"}


def main() -> int:
    """One request per stdin line, one answer per stdout line, until stdin closes: a run keeps
    one child for all its steps (the engine's import costs ~0.7 s a start)."""
    versions = {"ai-dynamo": metadata.version("ai-dynamo"),
                "ai-dynamo-runtime": metadata.version("ai-dynamo-runtime")}
    with tempfile.TemporaryDirectory(prefix="dynamo-bench-sim-") as tmp:
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            answers = [answer(job, Path(tmp)) for job in request["jobs"]]
            sys.stdout.write(json.dumps({"versions": versions, "answers": answers}) + os.linesep)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
