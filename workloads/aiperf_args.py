"""The exact AIPerf 0.13.0 command line of a step (pure).

Every flag here was checked against `aiperf profile --help` and AIPerf's sources:
- `--custom-dataset-type mooncake_trace --input-file F`: rows with input_length /
  output_length / hash_ids (and session_id + delay for multi-turn, where AIPerf keeps the
  history and sends it with every turn); `--isl-block-size` is the tokens per hash id.
- `--request-count` equals the file's rows (less the warm-up's): otherwise AIPerf picks its
  own count and wraps or truncates the file. Duration-bounded steps add
  `--benchmark-duration` (rows are sized so the duration ends first) and
  `--benchmark-grace-period` for the requests still in flight (sized per step from its
  expected request latency: workloads/grace.py).
- `--warmup-request-count N` (a sweep step: one per slot) warms AIPerf's own connections in
  the same process first; the warm-up takes the file's first N rows, so `--request-count` is
  the rows after them (workloads/step_warmup.py).
- `--concurrency` is concurrent requests, or concurrent conversations for multi-turn data.
  `--concurrency-ramp-duration R` opens the slots one by one over R seconds (a sweep step's
  are spread over one request latency: workloads/stagger.py says why).
- `--fixed-schedule --fixed-schedule-auto-offset` (a replayed trace): rows are sent at their
  `timestamp` (ms), the first one at 0 (timing/strategies/fixed_schedule.py); `--concurrency`
  still caps the sessions in flight (timing/phase/runner.py configures the phase's limiter,
  credit/issuer.py waits for a slot), and every row here is its own one-turn session.
- `--extra-inputs ignore_eos:true` makes output lengths the requested ones;
  `--use-server-token-count` counts tokens from the server's usage, not a local tokenizer.
- `--server-metrics URL...` scrapes the frontend's and every worker's /metrics during the
  step into server_metrics_export.json (prefix hits, KV usage, preemptions come from there).
- `--ui none --no-gpu-telemetry --export-level records` keep it headless and write
  profile_export.jsonl (one record per request, errors included).
AIPerf exits 0 even when requests fail; the runner counts errors from the exports.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

from workloads.grace import MIN_GRACE_S


@dataclass(frozen=True)
class AiperfInvocation:
    model: str
    url: str
    tokenizer: str
    # a local Path, or the PurePosixPath a cluster's load-generator pod reads (k8s_step.py)
    input_file: PurePath
    request_count: int
    concurrency: int
    seed: int
    artifact_dir: PurePath
    server_metrics: tuple[str, ...] = ()
    duration_s: float | None = None
    grace_period_s: float = MIN_GRACE_S   # workloads.grace.grace_period_s of the step
    block_size: int = 512
    request_timeout_s: float = 600.0
    # The tokenizer as the workers load it: a pinned revision, the model's own code.
    tokenizer_revision: str | None = None
    tokenizer_trust_remote_code: bool = False
    # AIPerf sizes its worker pool from the cores it sees; in a container that is the node's
    # cores, not the CPU limit, so the cluster Job states it (None: AIPerf's default).
    workers_max: int | None = None
    # A replayed trace: send each row at its timestamp (ms, the first sent row at 0); the
    # concurrency then caps the requests in flight instead of driving the load.
    fixed_schedule: bool = False
    # Seconds over which AIPerf opens the concurrency slots one by one (workloads/stagger.py);
    # None: all at the step's start.
    concurrency_ramp_s: float | None = None
    # Requests AIPerf sends before its profiling phase, from the dataset's first rows
    # (workloads/step_warmup.py); `request_count` is then the rows after them.
    warmup_requests: int = 0


def profile_args(inv: AiperfInvocation) -> list[str]:
    """Arguments after `aiperf` for one step (`profile ...`)."""
    args = [
        "profile",
        "--model", inv.model,
        "--url", inv.url,
        "--endpoint-type", "chat",
        "--streaming",
        "--tokenizer", inv.tokenizer,
        "--custom-dataset-type", "mooncake_trace",
        "--input-file", str(inv.input_file),
        "--isl-block-size", str(inv.block_size),
        "--request-count", str(inv.request_count),
        "--concurrency", str(inv.concurrency),
    ]
    if inv.concurrency_ramp_s is not None:
        args += ["--concurrency-ramp-duration", _num(inv.concurrency_ramp_s)]
    if inv.warmup_requests:
        args += ["--warmup-request-count", str(inv.warmup_requests)]
    if inv.tokenizer_revision:
        args += ["--tokenizer-revision", inv.tokenizer_revision]
    if inv.tokenizer_trust_remote_code:
        args.append("--tokenizer-trust-remote-code")
    if inv.workers_max is not None:
        args += ["--workers-max", str(inv.workers_max)]
    if inv.fixed_schedule:
        args += ["--fixed-schedule", "--fixed-schedule-auto-offset"]
    if inv.duration_s is not None:
        args += ["--benchmark-duration", _num(inv.duration_s),
                 "--benchmark-grace-period", _num(inv.grace_period_s)]
    args += [
        "--extra-inputs", "ignore_eos:true",
        "--use-server-token-count",
        "--random-seed", str(inv.seed),
        "--request-timeout-seconds", _num(inv.request_timeout_s),
    ]
    if inv.server_metrics:
        args += ["--server-metrics", *inv.server_metrics]
    args += ["--ui", "none", "--no-gpu-telemetry", "--export-level", "records",
             "--artifact-dir", str(inv.artifact_dir)]
    return args


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
