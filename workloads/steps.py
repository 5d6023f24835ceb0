"""The plan: a stack and a scale become an ordered list of steps, each one AIPerf invocation.

Step ids are paths: `concurrency_sweep/c4`, `multi_turn/conv8`, `sequence_distributions/zipf`,
`prefix_cache/share050`, `trace_replay/c16` (and `trace_replay/c16-warm`, the same trace replayed
on the warm cache right after); with repeats every step gets `/r1`, `/r2`, ... (never a mix, so
no step directory sits inside another). Everything here is pure: the runner
turns each step's rows into a file and its parameters into an AIPerf command line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from stacks.config.schema import StackConfig
from stacks.config.workload_config import WORKLOAD_NAMES, Scale, WorkloadsConfig, restarts_before
from stacks.preflight.trace_checks import engine_block_size
from stacks.sizing.estimate import workload_steps_seconds
from workloads import datasets as ds
from workloads.trace_replay import replay_steps

WORKLOADS = WORKLOAD_NAMES

# Duration-bounded steps need enough distinct rows that AIPerf never wraps around (a wrapped
# row is a repeated prompt, i.e. a prefix-cache hit the workload did not ask for). Rows are
# sized for requests finishing as fast as FASTEST_TOKEN_S per output token plus
# FASTEST_REQUEST_S per request, faster than any engine we drive (the local mocker runs
# ~4 ms/token at c1); if a run still exhausts them, AIPerf stops early and the step's
# recorded duration shows it.
FASTEST_TOKEN_S = 0.002
FASTEST_REQUEST_S = 0.02
# Tokens per hash id where the workload config has no blockSize (AIPerf's Mooncake default).
BLOCK = 512
# Why a campaign skips the restart a coldRestart policy names (stacks/plan/schedule.py).
SKIPPED_RESTART = ("campaign: the deployment starts cold and this step's hash ids are fresh, "
                   "so a restart could only empty a cache that holds none of its prefixes")


@dataclass(frozen=True)
class Step:
    id: str
    workload: str
    name: str
    repeat: int
    concurrency: int
    seed: int
    rows: Callable[[], list[dict]] = field(repr=False, compare=False)
    duration_s: float | None = None     # None: bounded by the row count only
    # Restart workers (empty KV caches) first, as the workload's coldRestart policy says.
    # params["cache"] is the cache state of the step's own prompts: a cold-cache step the
    # policy does not restart still finds none of them cached (fresh hash ids).
    cold: bool = False
    params: dict = field(default_factory=dict)   # what the manifest records about the step
    eta_s: float = 0.0
    # The smallest worker maxModelLen: rows beyond it are dropped or clipped before the step.
    max_model_len: int | None = None
    # After the context fit: the rows AIPerf gets and what the run record adds (a replayed
    # trace maps its block ids onto the engine's blocks and computes its reuse bounds here).
    finish: Callable[[list[dict]], tuple[list[dict], dict]] | None = field(
        default=None, repr=False, compare=False)


def rows_for_duration(concurrency: int, duration_s: float, osl: int, turns: int = 1) -> int:
    """Upper bound on the requests (or conversations) a duration-bounded step can finish."""
    per = turns * (osl * FASTEST_TOKEN_S + FASTEST_REQUEST_S)
    return concurrency * (math.ceil(duration_s / per) + 1)


def _sweep(w, seed: int, repeat: int) -> list[tuple]:
    out = []
    for c in w.concurrencies:
        n = rows_for_duration(c, w.duration_s, w.osl)
        out.append((f"c{c}", c, w.duration_s, False,
                    lambda n=n, b=ds.stable_seed(seed, c): ds.unique_rows(
                        n, w.isl, w.osl, BLOCK, b % 10**9),
                    {"isl": w.isl, "osl": w.osl, "rows": n, "block_size": BLOCK}))
    return out


def _multi_turn(w, seed: int, repeat: int) -> list[tuple]:
    convs = rows_for_duration(w.conversations, w.duration_s, w.osl, w.turns)
    b = ds.stable_seed(seed, "mt")
    rows = lambda: ds.multi_turn_rows(  # noqa: E731
        convs, w.turns, w.isl, w.osl, BLOCK, b % 10**9, w.turn_delay_ms, w.turn_delay_sigma,
        seed=b)
    return [(f"conv{w.conversations}", w.conversations, w.duration_s, False, rows,
             {"isl": w.isl, "osl": w.osl, "turns": w.turns, "rows": convs * w.turns,
              "conversations": convs, "block_size": BLOCK,
              "turn_delay_ms": w.turn_delay_ms, "turn_delay_sigma": w.turn_delay_sigma})]


def _distributions(w, seed: int, repeat: int) -> list[tuple]:
    out = []
    for kind in w.distributions:
        isl = ds.LengthDistribution(kind, w.isl_min, w.isl_max, w.zipf_exponent,
                                    w.lognormal_sigma)
        osl = ds.LengthDistribution(kind, w.osl_min, w.osl_max, w.zipf_exponent,
                                    w.lognormal_sigma)
        s = ds.stable_seed(seed, kind)
        out.append((kind, w.concurrency, None, False,
                    lambda isl=isl, osl=osl, s=s: ds.length_rows(isl, osl, w.requests, s, BLOCK,
                                                                 s % 10**9),
                    {"distribution": kind, "isl_range": [w.isl_min, w.isl_max],
                     "osl_range": [w.osl_min, w.osl_max], "rows": w.requests,
                     "mean_osl": (w.osl_min + w.osl_max) / 2, "block_size": BLOCK}))
    return out


def _prefix(w, seed: int, repeat: int) -> list[tuple]:
    out = []
    for share in w.shares:
        ds.prefix_blocks(w.isl, w.block_size, share)  # refuse an inexact share at plan time
        b = ds.stable_seed(seed, "prefix", share) % 10**9
        out.append((f"share{round(share * 100):03d}", w.concurrency, None, True,
                    lambda share=share, b=b: ds.prefix_share_rows(
                        w.requests, w.isl, w.osl, w.block_size, share, b),
                    {"share": share, "isl": w.isl, "osl": w.osl, "rows": w.requests,
                     "block_size": w.block_size, "cache": "cold"}))
    return out


def _trace(w, seed: int, repeat: int, engine_block: int | None = None) -> list[tuple]:
    if w.replays_trace:   # a public trace or a user's file, on its own schedule
        return replay_steps(w, seed, engine_block or BLOCK)
    out = []
    for c in w.concurrencies:
        s = ds.stable_seed(seed, "trace", c)
        rows = lambda s=s: ds.trace_rows(w.requests, w.isl, w.osl, w.reuse,  # noqa: E731
                                         w.block_size, s, s % 10**9, w.isl_sigma)
        params = {"isl": w.isl, "osl": w.osl, "target_reuse": w.reuse, "rows": w.requests,
                  "block_size": w.block_size, "isl_sigma": w.isl_sigma}
        out.append((f"c{c}", c, None, True, rows, {**params, "cache": "cold"}))
        if w.warm_pass:  # same rows and (see plan) same AIPerf seed: the same prompts
            out.append((f"c{c}-warm", c, None, False, rows,
                        {**params, "cache": "warm", "warm_after": f"c{c}"}))
    return out


# the trace builder takes the engine's block size too (plan() passes it to that one only)
_BUILDERS: dict[str, Callable[..., list[tuple]]] = {
    "concurrency_sweep": _sweep, "multi_turn": _multi_turn,
    "sequence_distributions": _distributions, "prefix_cache": _prefix, "trace_replay": _trace}


def plan(stack: StackConfig, scale: Scale = "quick", only: list[str] | None = None,
         repeats: int | None = None, prompt_epoch: int = 0,
         campaign: bool = False) -> list[Step]:
    """Every step of the stack's enabled workloads at `scale`, in plan order.

    `prompt_epoch`: > 0 on workers that served the same datasets before (a campaign's kept
    workers): every step's AIPerf seed, hence every token of every block, is drawn anew, so no
    prompt of an earlier epoch can hit their caches (AIPerf 0.13.0 seeds each hash id's tokens
    from the run's seed: aiperf/common/hash_id_random_generator.py). The datasets' bytes, lengths
    and shared-prefix structure stay the same.
    `campaign`: the deployment is known to be cold (it was just deployed, or its prompts are of
    a new epoch), and every step has fresh hash ids: no step restarts the workers (the
    coldRestart policy's restarts are recorded as skipped, stacks/plan/schedule.py)."""
    cfg: WorkloadsConfig = stack.workloads
    # `only` (refused when unknown or disabled) switches the other workloads off
    enabled = (cfg.restricted_to(only, stack.name) if only else cfg).enabled()
    n_repeats = repeats if repeats is not None else cfg.repeats
    max_model_len = min(w.max_model_len for w in stack.serving.workers) if stack.serving \
        else None
    engine_block = engine_block_size(stack) if stack.serving else None
    estimates = workload_steps_seconds(stack, scale, n_repeats)
    steps = []
    for name, workload in enabled.items():
        w = workload.at_scale(scale)
        cold_steps = 0   # the workload's cold-cache steps so far, for its coldRestart policy
        for r in range(1, n_repeats + 1):
            base_seed = ds.stable_seed(cfg.seed, name, r)
            suffix = f"/r{r}" if n_repeats > 1 else ""
            build = _BUILDERS[name]
            built = build(w, base_seed, r, engine_block) if name == "trace_replay" else \
                build(w, base_seed, r)
            for sname, conc, duration, cold, rows, params, *finish in built:
                step_id = f"{name}/{sname}{suffix}"
                # a warm replay takes its cold step's seed: AIPerf then sends the same prompts
                seed_id = f"{name}/{params.get('warm_after', sname)}{suffix}"
                seed = ds.stable_seed(cfg.seed, seed_id, *(
                    ("epoch", prompt_epoch) if prompt_epoch else ())) % 2**31
                # the one estimator's figure, as `stacks plan` shows it (a replayed trace: its
                # schedule, or longer when the cap holds it back); the runner stops AIPerf as
                # hung only well past this
                eta = estimates[step_id]
                if cold:
                    cold = restarts_before(getattr(w, "cold_restart", "every-step"), cold_steps)
                    cold_steps += 1
                    if campaign and cold:
                        cold = False
                        params = {**params, "restart_skipped": SKIPPED_RESTART}
                steps.append(Step(id=step_id, workload=name, name=sname, repeat=r,
                                  concurrency=conc, seed=seed, rows=rows, duration_s=duration,
                                  cold=cold, params=params, eta_s=eta,
                                  max_model_len=max_model_len,
                                  finish=finish[0] if finish else None))
    return steps
