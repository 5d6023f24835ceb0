"""What became of each request, decided once, here, for the runner and the reports alike.

Four outcome classes, from AIPerf 0.13.0's per-request export (`profile_export.jsonl`):
- `cancelled`: `metadata.was_cancelled` (AIPerf cancels what is still in flight when a
  duration-bounded step's grace period ends; such a record also carries an `error`). These are
  cut by the benchmark's own end, not failed by the server: they are counted and shown apart
  and stay out of the error rate that fails a step (the grace period is sized from the step's
  expected request latency, workloads/grace.py, so that few are cut);
- `failed`: the record carries an `error` {code, type, message} (HTTP errors, timeouts: a
  timeout is a failed request, counted apart as `timeouts`);
- `truncated`: no error, but the stream the server sent is not a whole answer. Two checks:
  * no usage block: with `--use-server-token-count` AIPerf takes every token count from the
    last usage chunk of the stream (aiperf/records/inference_result_parser.py,
    `_compute_server_token_counts`); a stream cut before that chunk leaves the record without
    `usage_completion_tokens` and `output_sequence_length`, and AIPerf still counts it as a
    success (seen on a real run with a worker killed mid-step:
    tests/fixtures/fault-runs/);
  * fewer output tokens than asked when the request fixed its length (`ignore_eos: true` in
    the endpoint's extra inputs and a requested output length for that request): the server's
    `usage_completion_tokens` (reasoning included, so a thinking model is not mistaken for a
    short one) below the requested output length.
  AIPerf 0.13.0 keeps no finish reason in the records export (it parses `finish_reason` only
  inside the raw responses, `--export-level raw`), so "no proper finish" is judged by the
  missing usage block, the last chunk a finished OpenAI stream sends when usage is requested;
- `completed`: everything else. Only completed requests enter latency percentiles, throughput,
  goodput and cost.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, TypeGuard

COMPLETED = "completed"
FAILED = "failed"
TRUNCATED = "truncated"
CANCELLED = "cancelled"
OUTCOMES = (COMPLETED, FAILED, TRUNCATED, CANCELLED)

NO_USAGE = "no usage block: the stream ended before the server's final usage chunk"


@dataclass(frozen=True)
class Expectations:
    """What every finished request of a step must show, from how AIPerf was invoked."""

    fixed_length: bool   # `ignore_eos: true`: every request produces its requested length
    server_usage: bool   # `--use-server-token-count`: every finished stream carries usage


def expectations(input_config: dict[str, Any] | None) -> Expectations | None:
    """From AIPerf's summary (`profile_export_aiperf.json` -> input_config.endpoint); None when
    the export does not say (then only errors and cancellations can be told apart)."""
    endpoint = (input_config or {}).get("endpoint")
    if not isinstance(endpoint, dict):
        return None
    extra = endpoint.get("extra") or {}
    return Expectations(fixed_length=bool(extra.get("ignore_eos")),
                        server_usage=bool(endpoint.get("use_server_token_count")))


def expectations_from_args(args: list[str]) -> Expectations:
    """The same, from the AIPerf command line (when AIPerf wrote no summary)."""
    return Expectations(fixed_length="ignore_eos:true" in args,
                        server_usage="--use-server-token-count" in args)


def is_timeout(error: dict[str, Any]) -> bool:
    text = f"{error.get('type', '')} {error.get('message', '')}".lower()
    return error.get("code") in (408, 504) or "timeout" in text or "timed out" in text


def _known(x: float | None) -> TypeGuard[float]:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def classify(*, error: bool, cancelled: bool, completion_tokens: float | None,
             requested_output_tokens: float | None, expect: Expectations | None
             ) -> tuple[str, str]:
    """(outcome, why) of one request. `completion_tokens` is the server's usage count
    (None when the stream carried no usage block)."""
    if cancelled:
        return CANCELLED, "cancelled by AIPerf (still in flight when the step ended)"
    if error:
        return FAILED, "AIPerf recorded an error"
    if expect is not None and expect.server_usage and not _known(completion_tokens):
        return TRUNCATED, NO_USAGE
    if (expect is not None and expect.fixed_length and _known(requested_output_tokens)
            and _known(completion_tokens) and completion_tokens < requested_output_tokens):
        return TRUNCATED, (f"{completion_tokens:.0f} of {requested_output_tokens:.0f} "
                           "requested output tokens (ignore_eos)")
    return COMPLETED, ""


def _metric(rec: dict[str, Any], name: str) -> Any:
    value = (rec.get("metrics") or {}).get(name)
    return value.get("value") if isinstance(value, dict) else None


def completion_tokens(rec: dict[str, Any]) -> float | None:
    """The server's output token count of a raw AIPerf record (reasoning included), None
    without a usage block."""
    usage = _metric(rec, "usage_completion_tokens")
    if usage is not None:
        return float(usage)
    osl = _metric(rec, "output_sequence_length")   # usage minus reasoning, when usage came
    if osl is None:
        return None
    return float(osl) + float(_metric(rec, "usage_reasoning_tokens") or 0)


def classify_record(rec: dict[str, Any], requested_output_tokens: float | None,
                    expect: Expectations | None) -> tuple[str, str]:
    """`classify` for one raw `profile_export.jsonl` record."""
    return classify(error=bool(rec.get("error")),
                    cancelled=bool((rec.get("metadata") or {}).get("was_cancelled")),
                    completion_tokens=completion_tokens(rec),
                    requested_output_tokens=requested_output_tokens, expect=expect)


@dataclass(frozen=True)
class OutcomeCounts:
    """One step's requests by outcome; `attempted` is every profiling-phase request."""

    attempted: int
    completed: int
    failed: int
    truncated: int
    cancelled: int
    timeouts: int = 0    # of the failed ones

    @classmethod
    def of(cls, outcomes: list[str], timeouts: int = 0) -> OutcomeCounts:
        return cls(attempted=len(outcomes), timeouts=timeouts,
                   **{o: sum(1 for x in outcomes if x == o) for o in OUTCOMES})

    @property
    def error_rate(self) -> float:
        """Failed over the requests the benchmark let finish: requests cut by the step's own
        end (`cancelled`) are neither errors nor evidence of health, and truncation is judged
        on its own. No finished request at all is 100 %, never 0 %."""
        finished = self.attempted - self.cancelled
        return self.failed / finished if finished > 0 else 1.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "error_rate": round(self.error_rate, 6)}


def step_problems(counts: OutcomeCounts, error_rate_threshold: float) -> list[str]:
    """Why a step's requests make it not `complete` (empty: they do not). A step with
    truncated streams is never complete, whatever the error-rate threshold: a cut stream is a
    server fault AIPerf counts as a success."""
    if counts.attempted == 0:
        return ["no request records"]
    if counts.attempted == counts.cancelled:
        return [f"all {counts.attempted} request(s) were cut at the step's end: none finished"]
    out = []
    if counts.error_rate > error_rate_threshold:
        out.append(f"error rate {counts.error_rate:.2%} > threshold {error_rate_threshold:.2%}")
    if counts.truncated:
        out.append(f"{counts.truncated} truncated stream(s) of {counts.attempted} requests "
                   "(the server ended them short of a whole answer)")
    return out
