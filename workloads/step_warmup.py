"""A sweep step's AIPerf warms its own connections first: one warm-up request per slot (pure).

Why: AIPerf opens its HTTP connections lazily, per worker, and keeps them for the whole
process (aiperf/transports/aiohttp_transport.py: one AioHttpClient from init to stop; the
POOLED strategy reuses it). The runner's own warm-up (runner.py, before the first step) warms
the engine but not AIPerf's pool, which each step's AIPerf process builds anew. So every slot's
first profiled request carried a TCP connect and AIPerf's first-request code paths: SIMULATED
on the local engine (AIPerf's own per-request timings of `make bench`'s quick-ACK pass, run
20261204T181829Z-quickack, 2026-12-04) `http_req_connecting` 6.7 ms
and `http_req_sending` 7.4 ms on c1's first request against 0 and ~0.3 ms on the others, +0.9 ms
on c1's mean TTFT over 15 requests. A closed-loop client in its steady state holds its
connections; the sweep measures that state. `--warmup-request-count N` runs N requests (at the
step's concurrency and ramp) in the same AIPerf process before the profiling phase; AIPerf keeps
warm-up records apart (`benchmark_phase` "warmup": results.py reads only "profiling") and its
server-metrics window starts after them (aiperf/server_metrics/accumulator.py excludes the
warm-up period). It inherits the step's ramp, so its first requests can end before its last
slots open: a few profiled requests still open a connection at high concurrency (docs/
workloads.md has the counts).

The warm-up takes the dataset's first N rows and the profiling phase continues from row N
(AIPerf samples one sequence across its phases: seen in the records, conversation ids
req-000000..N-1 warm-up, N.. profiling), so no prompt repeats; the step's `--request-count` is
the rows left. Only the concurrency sweep warms up: its prompts share no prefix, so a warm-up
request changes no cache the profiled ones meet; in the prefix-cache, multi-turn and replay
workloads the first requests are part of what is measured.
"""

from __future__ import annotations

WARMED_WORKLOADS = frozenset({"concurrency_sweep"})


def warmup_requests(workload: str, concurrency: int, rows: int) -> int:
    """Warm-up requests before the step's profiling phase: one per slot, for the workloads
    that warm up and when the dataset keeps at least as many rows for the profiling phase."""
    if workload not in WARMED_WORKLOADS or rows < 2 * concurrency:
        return 0
    return concurrency
