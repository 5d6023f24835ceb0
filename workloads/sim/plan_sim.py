"""A stack's whole plan through DynoSim without a run record: the figures every step would show
(a thin shell over the pure parts; `stacks predict`, `stacks plan`, the campaign budget and
`stacks explore` read these).

Each step is prepared exactly as the runner prepares it (workloads/steps.py plan, the context
fit, the grace period, the ramp and the warm-up of workloads/step_exec.py and step_warmup.py)
and replayed as the simulation target replays it (workloads/sim/step_sim.py), so a figure here
equals the one `workloads run --target sim` records for the same step. The figures are the
report's definitions (reports/measures.py): percentiles over completed requests, ITL the
per-request mean gap, output tok/s over the step's window (first start to last end),
tok/s per user 1000 / ITL.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.sizing.step_itl import ASSUMED_SOURCE
from workloads import step_exec, step_warmup
from workloads.datasets import jsonl_bytes
from workloads.sim.dispatch import SendPattern
from workloads.sim.prompt_layout import BlockHasher, ChatTemplate, step_requests
from workloads.sim.replay import Replayer
from workloads.sim.step_sim import StepSimulation, simulate
from workloads.sim.target import KV_ROUTER_RUNS, SimTarget, spread
from workloads.steps import Step, plan


@dataclass
class StepFigures:
    step: str
    workload: str
    concurrency: int
    requests: int                 # completed
    cancelled: int
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    request_latency_p50_ms: float | None
    output_tok_s: float | None
    tok_s_per_user_p50: float | None
    reuse: float                  # prompt tokens the engine found cached / prompt tokens
    window_s: float               # first start to last end (virtual time)
    spread: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _quantile(xs: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's and pandas' default), as the
    reports' percentiles."""
    if not xs:
        return None
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def figures(step: Step, sim: StepSimulation) -> StepFigures:
    reqs = sim.requests
    cut = sim.cut_ms
    done = [r for r in reqs if cut is None or r["last_token_ms"] <= cut]
    ttft = [r["ttft_ms"] for r in done]
    itl = [r["itl_ms"] for r in done if r.get("itl_ms") and r["output_length"] > 1]
    start = min((r["arrival_time_ms"] for r in reqs), default=0.0)
    end = max((min(r["last_token_ms"], cut) if cut else r["last_token_ms"] for r in reqs),
              default=0.0)
    window = (end - start) / 1000
    tokens = sum(r["output_length"] for r in done)
    prompt = sum(r["input_length"] for r in done)
    return StepFigures(
        step=step.id, workload=step.workload, concurrency=step.concurrency,
        requests=len(done), cancelled=len(reqs) - len(done),
        ttft_p50_ms=_quantile(ttft, 0.5), ttft_p99_ms=_quantile(ttft, 0.99),
        itl_p50_ms=_quantile(itl, 0.5), itl_p99_ms=_quantile(itl, 0.99),
        request_latency_p50_ms=_quantile([r["last_token_ms"] - r["arrival_time_ms"]
                                          for r in done], 0.5),
        output_tok_s=tokens / window if window > 0 else None,
        tok_s_per_user_p50=_quantile([1000.0 / x for x in itl], 0.5),
        reuse=sum(r.get("reused_input_tokens") or 0 for r in done) / prompt if prompt else 0.0,
        window_s=window, spread=spread(sim))


def context(stack: StackConfig, predictions: dict | None) -> step_exec.StepContext:
    """The step context the runner would use (grace and ramp sizing), without a target."""
    return step_exec.StepContext(
        run_dir=Path("."), target=None, executor=None,  # type: ignore[arg-type]
        tokenizer=stack.model.id, error_rate_threshold=stack.workloads.error_rate_threshold,
        request_timeout_s=stack.workloads.request_timeout_s,
        expected_itl_ms=stack.cost.assumed_itl_ms, expected_itl_source=ASSUMED_SOURCE,
        predictions=predictions)


def round_robin_rows(rows: list[dict]) -> bool:
    """Single turns of one length sharing no block: AIPerf's closed loop sends them round-robin
    over its slots (dispatch.round_robin), slot k rows k, k + c, k + 2c, ..."""
    ids = [h for r in rows for h in r.get("hash_ids") or []]
    sessions = [r.get("session_id") for r in rows if r.get("session_id")]
    return (len(set(sessions)) == len(sessions) and len(set(ids)) == len(ids)
            and len({(r["input_length"], r["output_length"]) for r in rows}) <= 1)


def first_rounds(step: Step, ctx: step_exec.StepContext, rows: list[dict]) -> int | None:
    """How many rows per slot to replay first for a duration-bounded round-robin step: twice
    what a slot sends in the step at the expected ITL (the rest of its rows are replayed only
    if a slot gets through them: simulate_steps)."""
    if step.duration_s is None or step_exec.fixed_schedule(step) or not round_robin_rows(rows):
        return None
    osl = step.params.get("osl") or 1
    rounds = max(8, math.ceil(2 * step.duration_s * 1000 / (osl * ctx.expected_itl_ms)) + 2)
    warmup = step_warmup.warmup_requests(step.workload, step.concurrency, len(rows))
    return rounds if warmup + rounds * step.concurrency < len(rows) else None


def prepared(step: Step, ctx: step_exec.StepContext, block: int, template: ChatTemplate,
             rounds: int | None = None, rows: list[dict] | None = None
             ) -> tuple[list, SendPattern]:
    """A step's requests as the engine sees them and how AIPerf sends them, as the runner and
    the simulation target prepare the step; with `rounds`, a round-robin step's first `rounds`
    rows per slot only (the rows after them are sent, if at all, after those). `rows`: the
    step's dataset, if made already."""
    if rows is None:
        rows, _ = step_exec.step_dataset(step)
    grace = step_exec.step_grace(step, rows, ctx)
    ramp = step_exec.step_ramp(step, grace, ctx)
    warmup = step_warmup.warmup_requests(step.workload, step.concurrency, len(rows))
    if rounds is not None:
        rows = rows[:warmup + rounds * step.concurrency]
    scope = f"{hashlib.sha256(jsonl_bytes(rows)).hexdigest()}:{step.seed}"
    requests = step_requests(rows, step.params.get("block_size", 512), scope, template,
                             BlockHasher(block))
    pattern = SendPattern(step.concurrency, warmup,
                          ramp["concurrency_ramp_s"] if ramp else None, step.duration_s,
                          grace["grace_period_s"] if step.duration_s is not None else 0.0,
                          step_exec.fixed_schedule(step))
    return [r for r in requests if r.index >= warmup], pattern


def simulate_steps(stack: StackConfig, target: SimTarget, template: ChatTemplate,
                   steps: list[Step], predictions: dict | None = None,
                   replayer: Replayer | None = None, runs: int | None = None
                   ) -> list[StepFigures]:
    """Every step of `steps` replayed (one replay process for all of them); `runs` of each
    step's last replay (default: KV_ROUTER_RUNS under the KV router, whose random ties make
    runs differ, else 1; the first run's figures are the step's either way)."""
    ctx = context(stack, predictions)
    own = replayer is None
    replayer = replayer or Replayer()
    if runs is None:
        runs = KV_ROUTER_RUNS if target.setup.router_mode == "kv_router" else 1
    try:
        out = []
        for step in steps:
            rows, _ = step_exec.step_dataset(step)
            rounds = first_rounds(step, ctx, rows)
            while True:
                requests, pattern = prepared(step, ctx, target.setup.block_size, template,
                                             rounds, rows)
                sim = simulate(requests, pattern, target.setup, replayer, runs=runs,
                               warm=bool(step.params.get("warm_after")))
                if rounds is None or not _exhausted(sim, rounds):
                    break
                # a slot sent all its rows before the end: replay with more (all, at last)
                rounds = rounds * 2 if len(requests) == rounds * step.concurrency else None
            out.append(figures(step, sim))
        return out
    finally:
        if own:
            replayer.close()


def _exhausted(sim: StepSimulation, rounds: int) -> bool:
    """Whether a slot sent as many rows as it was given: only then could more rows have
    changed the step (a slot still busy with an earlier row at the end sends nothing after
    it, so replaying fewer rows than the file holds gives the very same step)."""
    sent: dict[str, int] = {}
    for row in sim.plan.rows:
        sent[row["session_id"]] = sent.get(row["session_id"], 0) + 1
    return max(sent.values(), default=0) >= rounds


def simulate_plan(stack: StackConfig, scale: Scale, target: SimTarget, template: ChatTemplate,
                  only: list[str] | None = None, repeats: int = 1,
                  predictions: dict | None = None,
                  replayer: Replayer | None = None, runs: int | None = None
                  ) -> list[StepFigures]:
    """Every step of the stack's plan at `scale` (one repeat unless asked)."""
    steps = plan(stack, scale, only, repeats)
    return simulate_steps(stack, target, template, steps, predictions, replayer, runs)
