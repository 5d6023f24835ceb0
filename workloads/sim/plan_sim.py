"""A stack's whole plan through DynoSim without a run record: the figures every step would show
(a thin shell over the pure parts; `stacks predict`, `stacks plan`, the campaign budget and
`stacks explore` read these).

Each step is prepared exactly as the runner prepares it (workloads/steps.py plan, the context
fit, the grace period, the ramp and the warm-up of workloads/step_exec.py and step_warmup.py)
and replayed as the simulation target replays it (workloads/sim/step_sim.py), so a figure here
equals the one `workloads run --target sim` records for the same step. The figures are the
report's definitions (reports/records/measures.py): percentiles over completed requests, ITL the
per-request mean gap, output tok/s over the step's window (first start to last end),
tok/s per user 1000 / ITL.

Beside the figures, each step says how precisely its sample pins them, for the smallest
difference a plan's comparison can resolve (stacks/plan/resolution.py) and the report's
simulated-vs-measured verdicts (reports/comparisons/comparisons.py): the standard errors of its TTFT
and ITL p50, the client's and the frontend's (the sd of their exact bootstrap over the completed
requests, stacks/sizing/sampling.py, the report's method), the spread of its requests' output
tokens over their latency, the standard error of its reuse (workloads/routing_evidence.py
hit_rate_se, each request in its conversation's turn, as the report measures the hit rate's)
and each seeded run's reuse beside the spread's other figures.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.sizing.sampling import quantile_se
from stacks.sizing.step_itl import ASSUMED_SOURCE
from workloads import step_exec, step_warmup
from workloads.datasets import jsonl_bytes
from workloads.routing_evidence import hit_rate_se
from workloads.sim.dispatch import SendPattern
from workloads.sim.exports import frontend_ttft_itl, ttft_itl
from workloads.sim.prompt_layout import (
    BlockHasher,
    ChatTemplate,
    Profiled,
    RowIndex,
    StepLayout,
)
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
    # over completed requests: with the window and the concurrency, how long a slot stood idle
    # between requests (reports/comparisons/simulated_vs_measured.py compares it with the live
    # client's)
    request_latency_mean_ms: float | None = None
    # TTFT and ITL p50 as the frontend's own request trace records them (exports.
    # frontend_ttft_itl): what a live run's trace is compared on
    frontend_ttft_p50_ms: float | None = None
    frontend_itl_p50_ms: float | None = None
    # how precisely the sample pins the figures (module docstring; None: no sample)
    ttft_p50_se_ms: float | None = None
    itl_p50_se_ms: float | None = None
    frontend_ttft_p50_se_ms: float | None = None
    frontend_itl_p50_se_ms: float | None = None
    token_rate_cv: float | None = None     # sd / mean of output tokens / latency per request
    reuse_se: float | None = None
    run_reuse: list[float] = field(default_factory=list)   # per seeded run (spread's order)

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


def _se(values: list[float]) -> float | None:
    return quantile_se(values, 0.5) if values else None


def _cv(values: list[float]) -> float | None:
    mean = statistics.fmean(values) if len(values) >= 2 else 0.0
    return statistics.stdev(values) / mean if mean > 0 else None


def _reuse_se(sim: StepSimulation, done: list[dict]) -> float | None:
    """The reuse's standard error as the report measures the hit rate's: each request's
    cached - reuse x prompt tokens, grouped by its turn in its conversation."""
    def turn(r: dict) -> int:
        origin = sim.plan.origin.get((r["session_id"], r.get("turn_index", 0)))
        return origin.turn if origin is not None else 0
    se = hit_rate_se([{"input_tokens": float(r["input_length"]),
                       "cached_tokens": float(r.get("reused_input_tokens") or 0),
                       "turn": turn(r)} for r in done])
    return None if math.isnan(se) else se


def _run_reuse(sim: StepSimulation) -> list[float]:
    """Each seeded run's reuse (the KV router's ties broken at random differ run to run)."""
    out = []
    for run in sim.runs:
        reqs = [r for r in run if not sim.keep or r["session_id"] in sim.keep]
        prompt = sum(r["input_length"] for r in reqs)
        out.append(sum(r.get("reused_input_tokens") or 0 for r in reqs) / prompt
                   if prompt else 0.0)
    return out


def figures(step: Step, sim: StepSimulation) -> StepFigures:
    reqs = sim.requests
    cut = sim.cut_ms
    done = [r for r in reqs if cut is None or r["last_token_ms"] <= cut]
    timings = [ttft_itl(r) for r in done]
    frontend = [frontend_ttft_itl(r) for r in done]
    ttft = [t for t, _ in timings]
    itl = [i for _, i in timings if i]
    start = min((r["arrival_time_ms"] for r in reqs), default=0.0)
    end = max((min(r["last_token_ms"], cut) if cut else r["last_token_ms"] for r in reqs),
              default=0.0)
    window = (end - start) / 1000
    tokens = sum(r["output_length"] for r in done)
    prompt = sum(r["input_length"] for r in done)
    latencies = [r["last_token_ms"] - r["arrival_time_ms"] for r in done]
    return StepFigures(
        step=step.id, workload=step.workload, concurrency=step.concurrency,
        requests=len(done), cancelled=len(reqs) - len(done),
        ttft_p50_ms=_quantile(ttft, 0.5), ttft_p99_ms=_quantile(ttft, 0.99),
        itl_p50_ms=_quantile(itl, 0.5), itl_p99_ms=_quantile(itl, 0.99),
        request_latency_p50_ms=_quantile(latencies, 0.5),
        output_tok_s=tokens / window if window > 0 else None,
        tok_s_per_user_p50=_quantile([1000.0 / x for x in itl], 0.5),
        reuse=sum(r.get("reused_input_tokens") or 0 for r in done) / prompt if prompt else 0.0,
        window_s=window, spread=spread(sim),
        request_latency_mean_ms=sum(latencies) / len(latencies) if latencies else None,
        frontend_ttft_p50_ms=_quantile([t for t, _ in frontend], 0.5),
        frontend_itl_p50_ms=_quantile([i for _, i in frontend if i], 0.5),
        ttft_p50_se_ms=_se(ttft), itl_p50_se_ms=_se(itl),
        frontend_ttft_p50_se_ms=_se([t for t, _ in frontend]),
        frontend_itl_p50_se_ms=_se([i for _, i in frontend if i]),
        token_rate_cv=_cv([r["output_length"] / (lat / 1000)
                           for r, lat in zip(done, latencies, strict=True) if lat > 0]),
        reuse_se=_reuse_se(sim, done), run_reuse=_run_reuse(sim))


def context(stack: StackConfig, predictions: dict | None) -> step_exec.StepContext:
    """The step context the runner would use (grace and ramp sizing), without a target."""
    return step_exec.StepContext(
        run_dir=Path("."), target=None, executor=None,  # type: ignore[arg-type]
        tokenizer=stack.model.id, error_rate_threshold=stack.workloads.error_rate_threshold,
        request_timeout_s=stack.workloads.request_timeout_s,
        expected_itl_ms=stack.cost.assumed_itl_ms, expected_itl_source=ASSUMED_SOURCE,
        predictions=predictions)


@dataclass(frozen=True)
class Dataset:
    """A step's rows (fitted to the context), their sha256 and their index: never changed."""
    rows: list[dict]
    sha256: str
    index: RowIndex


@dataclass
class Datasets:
    """Steps' datasets, kept for the next candidate that runs the same step: a duration-bounded
    step's dataset is sized for the fastest engine imaginable (54,520 rows at c470 for 120 s,
    workloads/steps.py rows_for_duration); making, hashing and indexing it cost more of
    `stacks explore`'s own CPU than anything but the replay pipe (py-spy, 2026-12-06), while
    its probes ask for the same few concurrencies over and over. A step is kept by what decides
    its rows (`key`); up to `budget` rows are kept, the least recently used dropped."""
    budget: int = 200_000
    kept: OrderedDict[str, Dataset] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def key(stack: StackConfig, step: Step, scale: Scale | None) -> str | None:
        """The workload's settings at the plan's scale (what its rows are built from: a quick
        and a full step share their id and seed), the workloads' seed, the step, its seed and
        context fit. None, and nothing kept: an unknown scale, or a step whose rows the
        engine's blocks also decide (a replayed trace's `finish`)."""
        if step.finish is not None or scale is None:
            return None
        workload = getattr(stack.workloads, step.workload).at_scale(scale).model_dump(
            mode="json")
        return json.dumps([workload, stack.workloads.seed, step.id, step.repeat, step.seed,
                           step.max_model_len], sort_keys=True)

    def get(self, stack: StackConfig, step: Step, scale: Scale | None) -> Dataset:
        key = self.key(stack, step, scale)
        with self.lock:
            if key is not None and key in self.kept:
                self.kept.move_to_end(key)
                return self.kept[key]
        rows, _ = step_exec.step_dataset(step)
        made = Dataset(rows, hashlib.sha256(jsonl_bytes(rows)).hexdigest(), RowIndex.of(rows))
        if key is not None and len(rows) <= self.budget:
            with self.lock:
                self.kept[key] = made
                while sum(len(d.rows) for d in self.kept.values()) > self.budget:
                    self.kept.popitem(last=False)
        return made


DATASETS = Datasets()


def prepared(step: Step, ctx: step_exec.StepContext, block: int, template: ChatTemplate,
             dataset: Dataset) -> tuple[Profiled, SendPattern]:
    """A step's requests as the engine sees them and how AIPerf sends them, as the runner and
    the simulation target prepare the step, from its dataset (Datasets.get)."""
    rows = dataset.rows
    grace = step_exec.step_grace(step, rows, ctx)
    ramp = step_exec.step_ramp(step, grace, ctx)
    warmup = step_warmup.warmup_requests(step.workload, step.concurrency, len(rows))
    scope = f"{dataset.sha256}:{step.seed}"
    requests = Profiled(StepLayout(rows, step.params.get("block_size", 512), scope, template,
                                   BlockHasher(block), index=dataset.index), warmup)
    pattern = SendPattern(step.concurrency, warmup,
                          ramp["concurrency_ramp_s"] if ramp else None, step.duration_s,
                          grace["grace_period_s"] if step.duration_s is not None else 0.0,
                          step_exec.fixed_schedule(step))
    return requests, pattern


def simulate_steps(stack: StackConfig, target: SimTarget, template: ChatTemplate,
                   steps: list[Step], predictions: dict | None = None,
                   replayer: Replayer | None = None, runs: int | None = None,
                   scale: Scale | None = None) -> list[StepFigures]:
    """Every step of `steps` replayed (one replay process for all of them); `runs` of each
    step's last replay (default: KV_ROUTER_RUNS under the KV router, whose random ties make
    runs differ, else 1; the first run's figures are the step's either way). `scale`: the
    plan's, if known, so steps' datasets are kept for the next candidate (Datasets)."""
    ctx = context(stack, predictions)
    own = replayer is None
    replayer = replayer or Replayer()
    if runs is None:
        runs = KV_ROUTER_RUNS if target.setup.router_mode == "kv_router" else 1
    try:
        out = []
        for step in steps:   # a duration-bounded step lays out only what it sends (step_sim)
            requests, pattern = prepared(step, ctx, target.setup.block_size, template,
                                         DATASETS.get(stack, step, scale))
            sim = simulate(requests, pattern, target.setup, replayer, runs=runs,
                           warm=bool(step.params.get("warm_after")))
            out.append(figures(step, sim))
        return out
    finally:
        if own:
            replayer.close()


def simulate_plan(stack: StackConfig, scale: Scale, target: SimTarget, template: ChatTemplate,
                  only: list[str] | None = None, repeats: int = 1,
                  predictions: dict | None = None,
                  replayer: Replayer | None = None, runs: int | None = None
                  ) -> list[StepFigures]:
    """Every step of the stack's plan at `scale` (one repeat unless asked)."""
    steps = plan(stack, scale, only, repeats)
    return simulate_steps(stack, target, template, steps, predictions, replayer, runs, scale)
