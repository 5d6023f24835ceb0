"""A concurrency step's requests start spread over one request latency, not all at once (pure).

AIPerf 0.13.0 opens every concurrency slot at the step's first instant. With the sweep's
fixed-length requests the slots then stay in phase: the c requests that started together are
prefilled together (one batched step of up to max_num_batched_tokens), decode in steps that
carry no prefill, finish in the same step, and their replacements arrive together again. The
figure the sweep is compared with describes the other steady state: AIConfigurator 0.12.0's agg
estimate (aiconfigurator_core sdk/backends/base_backend.py `run_agg`) spreads the batch's b
prefills over b separate mixed steps of one request's ctx_tokens (`cli_estimate` passes
ctx_tokens = isl, aiconfigurator cli/api.py) among its osl decode iterations, and its TPOT is
the mean of those mixed and generation-only steps. SIMULATED on local-agg (the mocker on its
table from AIConfigurator's a100_sxm_40gb database; quick scale, 8 requests a worker at c16):
started together, a request's decode window held 5.2 other prefills in 3.5 distinct steps
(1.47 a step) and ITL p50 was 0.964 of the prediction (0.891 in a demo run); started spread,
6.5 in 6.5 steps (1.01 a step) and 1.004 (issue 27's run; the clean-clone demo of 2026-12-04,
run 20261204T212705Z, 1.01). The mocker's table comes from the same database as the
prediction, so this checks the start pattern, not AIConfigurator.

AIPerf's session-concurrency ramp (`--concurrency-ramp-duration`, aiperf/timing/ramping.py
LinearStrategy in stepped mode, started at 1 by timing/phase/runner.py `_create_rampers`) opens
slot k (1..c) at R x (k - 1) / (c - 1). R = L x (c - 1) / c, L the step's expected request
latency, opens them L / c apart: the phases of the steady state, from the first request on, so
no request is measured in the lockstep transient. A closed loop keeps those phases (each slot's
next request starts when its last one ends). Only the concurrency sweep is spread: its figures
are the ones compared with the model per step; the other workloads keep AIPerf's start.
"""

from __future__ import annotations

SPREAD_WORKLOADS = frozenset({"concurrency_sweep"})


def ramp_s(concurrency: int, request_s: float) -> float | None:
    """The ramp that opens `concurrency` slots request_s / concurrency apart (None: no ramp,
    one slot or no expected latency)."""
    if concurrency <= 1 or request_s <= 0:
        return None
    return round(request_s * (concurrency - 1) / concurrency, 3)


def step_ramp(workload: str, concurrency: int, request_s: float, source: str
              ) -> dict | None:
    """The step's ramp record (what the command line carries and what it was sized from), or
    None when the step starts its slots together."""
    if workload not in SPREAD_WORKLOADS:
        return None
    ramp = ramp_s(concurrency, request_s)
    if ramp is None:
        return None
    return {"concurrency_ramp_s": ramp, "expected_request_s": round(request_s, 3),
            "slot_spacing_s": round(request_s / concurrency, 3), "source": source}
