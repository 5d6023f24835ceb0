"""A stack's steps simulated once, kept by what decides them (a thin shell over plan_sim).

What a run keeps at its start (the manifest's `simulation`, beside AIConfigurator's
`predictions`), what `stacks predict` shows and what the forecasts price steps at
(workloads/sim/forecast.py) is one record: the label every figure carries (the simulator and
its timing source, target.label), the timings and versions it ran on, and per step the figures
of workloads/sim/plan_sim.py (TTFT, ITL and request-latency percentiles, output tok/s, tok/s per
user, the window in virtual time, the KV router's spread over its seeded runs) with the step's
duration bound (None: a request count bounds it).

Where DynoSim cannot run the record says why instead (`not_simulated`): the engine's environment
is missing, DynoSim refuses the stack (engine_setup.Unsimulated), pre-flight leaves no KV
blocks, or the simulation is switched off (DYNAMO_BENCH_SIMULATE=off, which the test suite sets
by default as it does the engine parse; the tests of this path turn it on).

Records, and refusals that would repeat (DynoSim cannot run the stack as configured), are kept
under .cache/sim (or $DYNAMO_BENCH_SIM_CACHE; empty: not kept) by a key made
of everything that decides them: the stack's and its base's config, the steps (ids, seeds,
bounds, parameters), pre-flight's KV capacity, the AIConfigurator record that sizes each step's
grace and ramp, whether the predictor (the timing tables) is installed, and the code: every
source file of workloads/ and stacks/ and the engine's and predictor's pins. The same stack,
scale and code simulate once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from workloads.model_folder import REPO, default_hf_home
from workloads.sim.engine_setup import Unsimulated
from workloads.sim.replay import Replayer, SimUnavailable, require_engine
from workloads.steps import Step, plan
from workloads.targets.base import TargetError

SIMULATE_VAR = "DYNAMO_BENCH_SIMULATE"
CACHE_VAR = "DYNAMO_BENCH_SIM_CACHE"
SIMULATOR = "DynoSim"
# what a simulated figure's record keeps per step (plan_sim.StepFigures and the step's bound)
CODE_ROOTS = ("workloads", "stacks")
PINS = ("requirements-engine.txt", "requirements-predict.txt")


def switched_off() -> str | None:
    """Why nothing is simulated, when DYNAMO_BENCH_SIMULATE says so."""
    if os.environ.get(SIMULATE_VAR, "").strip().lower() in ("off", "0", "no", "false"):
        return f"simulation switched off ({SIMULATE_VAR}=off)"
    return None


@functools.cache
def code_digest(root: Path = REPO) -> str:
    """sha256 over the source files that shape a simulation (workloads/, stacks/) and the
    engine's and predictor's pins."""
    h = hashlib.sha256()
    files = sorted(p for r in CODE_ROOTS for p in (root / r).rglob("*.py"))
    for p in [*files, *(root / n for n in PINS)]:
        if p.exists():
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def cache_key(stack: StackConfig, base: StackConfig | None, steps: list[Step],
              kv_capacity_tokens: list[int], predictions: dict | None) -> str:
    from stacks.predict.predictor import predictor_python
    what = {"stack": stack.model_dump(mode="json"),
            "base": base.model_dump(mode="json") if base is not None else None,
            # every step is replayed on empty caches: whether the runner restarts the
            # workers before it (a campaign skips the restart) decides nothing here
            "steps": [[s.id, s.seed, s.concurrency, s.duration_s,
                       {k: v for k, v in s.params.items() if k != "restart_skipped"}]
                      for s in steps],
            "kv": kv_capacity_tokens, "predictions": predictions,
            "tables": predictor_python() is not None, "code": code_digest()}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


def _cache_dir() -> Path | None:
    value = os.environ.get(CACHE_VAR, str(REPO / ".cache" / "sim"))
    return Path(value) if value else None


def _kept(key: str) -> dict[str, Any] | None:
    folder = _cache_dir()
    path = folder / f"{key}.json" if folder is not None else None
    if path is None or not path.exists():
        return None
    kept: dict[str, Any] = json.loads(path.read_text())
    return kept


def _keep(key: str, record: dict[str, Any]) -> None:
    folder = _cache_dir()
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / f"{key}.{os.getpid()}.part"
    part.write_text(json.dumps(record))
    part.replace(folder / f"{key}.json")     # whole or not at all, for a concurrent reader


def not_simulated(why: str) -> dict[str, Any]:
    return {"simulator": SIMULATOR, "steps": {}, "not_simulated": why}


def simulate_steps(stack: StackConfig, steps: list[Step], kv_capacity_tokens: list[int], *,
                   base: StackConfig | None = None, predictions: dict | None = None,
                   hf_home: Path | None = None,
                   replayer: Replayer | None = None) -> dict[str, Any]:
    """The simulation record of `steps` (a kept one when the same key made it before), or
    why there is none."""
    off = switched_off()
    if off:
        return not_simulated(off)
    t0 = time.monotonic()
    key = cache_key(stack, base, steps, kv_capacity_tokens, predictions)
    kept = _kept(key)
    if kept is not None:     # a record, or a lasting refusal
        return {**kept, "cache": {"key": key[:16], "kept": True},
                "seconds": round(time.monotonic() - t0, 3)}
    from workloads.sim.build import make
    from workloads.sim.plan_sim import simulate_steps as replay_steps
    from workloads.sim.target import KV_ROUTER_RUNS
    from workloads.targets.mocker_timings import resolve
    try:
        require_engine()        # make() asks the engine's version first
        target, executor = make(stack, kv_capacity_tokens, hf_home or default_hf_home(),
                                resolve(stack, base=base))
        figures = replay_steps(stack, target, executor.template, steps, predictions,
                               replayer)
    except (Unsimulated, SimUnavailable, TargetError) as exc:
        refused = not_simulated(str(exc))
        if not isinstance(exc, SimUnavailable) or exc.lasting:
            _keep(key, refused)      # the same stack and code are refused again: say it at once
        return {**refused, "cache": {"key": key[:16], "kept": False},
                "seconds": round(time.monotonic() - t0, 3)}
    info = target.describe()
    by_id = {s.id: s for s in steps}
    record = {"label": info["timings"]["label"], "simulator": SIMULATOR,
              "versions": {"ai-dynamo": target.version},
              "timings": {k: v for k, v in info["timings"].items() if k != "label"},
              "router": info["router"], "topology": info["topology"],
              "kv_router_runs": KV_ROUTER_RUNS if target.setup.router_mode == "kv_router" else 1,
              "notes": info["notes"],
              "steps": {f.step: {**f.as_dict(), "duration_s": by_id[f.step].duration_s}
                        for f in figures}}
    _keep(key, record)
    return {**record, "cache": {"key": key[:16], "kept": False},
            "seconds": round(time.monotonic() - t0, 3)}


def simulate_plan(stack: StackConfig, scale: Scale, kv_capacity_tokens: list[int], *,
                  base: StackConfig | None = None, predictions: dict | None = None,
                  hf_home: Path | None = None,
                  replayer: Replayer | None = None) -> dict[str, Any]:
    """The record of the stack's plan at `scale` (one repeat: a repeat's figures are its
    step's), as a forecast or `stacks predict` asks it."""
    if stack.serving is None:
        return not_simulated(f"stack '{stack.name}' serves nothing: nothing to simulate")
    return simulate_steps(stack, plan(stack, scale, repeats=1), kv_capacity_tokens, base=base,
                          predictions=predictions, hf_home=hf_home, replayer=replayer)


def step_figures(record: dict[str, Any] | None, step_id: str) -> dict[str, Any] | None:
    """A step's simulated figures in a record: its own, a repeat's its step's."""
    from stacks.sizing.step_itl import repeated_step
    steps = (record or {}).get("steps") or {}
    found: dict[str, Any] | None = steps.get(step_id) or steps.get(repeated_step(step_id))
    return found
