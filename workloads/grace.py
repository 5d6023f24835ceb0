"""How long a duration-bounded step waits for the requests still in flight at its end (pure).

AIPerf 0.13.0 stops issuing requests when `--benchmark-duration` ends, then waits
`--benchmark-grace-period` seconds (default 30, `aiperf/config/flags/cli_config.py`
`benchmark_grace_period`) for those in flight: answers within it are measured, the rest are
cancelled (`was_cancelled`, workloads.outcomes' `cancelled`). A fixed 30 s cuts every request
of a slow step: at OSL 512 an ITL above ~60 ms (an L40S decode tier, a long recipe output)
outlasts it, and a whole c64 step would be cut at its end although the server did nothing wrong.
So the grace period is sized from the step's own expected request latency: a request that
started just before the end needs one whole request latency to finish, and the expectation
gets a factor of two of margin because it comes from a model (the stack's `cost.assumedItlMs`,
or a prediction where one exists), not from this server. Requests still cut are counted
apart and never fail a step (workloads.outcomes.OutcomeCounts.error_rate).
"""

from __future__ import annotations

import math

MIN_GRACE_S = 30.0      # AIPerf's own default: never wait less than it would
GRACE_FACTOR = 2.0      # margin over the expected latency of the step's longest request


def expected_request_s(rows: list[dict], itl_ms: float, ttft_ms: float = 0.0) -> float:
    """The expected latency of the step's longest request: its first token, then one
    inter-token latency per further output token (0 without rows)."""
    osl = max((int(r.get("output_length") or 0) for r in rows), default=0)
    if osl == 0:
        return 0.0
    return (ttft_ms + (osl - 1) * itl_ms) / 1000.0


def grace_period_s(expected_s: float) -> float:
    """The grace period for a step whose longest request is expected to take `expected_s`."""
    return max(MIN_GRACE_S, float(math.ceil(GRACE_FACTOR * expected_s)))
