"""The thin shell around the predictor: finds its environment, runs aic_runner.py once per
batch of queries (one JSON request on stdin, one answer on stdout), and composes the pure
parts into a stack's Prediction. No network: the database and model configs are installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.predict.rows import Prediction, describe, row
from stacks.predict.shapes import Layout, estimate_kwargs, layout, step_shapes
from stacks.predict.systems import BACKEND, departures, systems_request

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).resolve().parent / "aic_runner.py"
# The predictor's Python: $DYNAMO_BENCH_PREDICTOR, else the project's .venv-predict.
ENV_VAR = "DYNAMO_BENCH_PREDICTOR"
TIMEOUT_S = 1800.0
# Answers are kept by what decides them (the query, our systems files, the runner and the pinned
# predictor): one cli_estimate takes seconds, and `stacks predict` / `stacks plan` / a run ask
# the same ones again. $DYNAMO_BENCH_PREDICT_CACHE moves the folder; an empty value turns it off.
CACHE_VAR = "DYNAMO_BENCH_PREDICT_CACHE"
PINS = ROOT / "requirements-predict.txt"
# Runner processes at once (one per core, at most this many), each with at least
# MIN_PER_LANE queries: a runner's first estimate pays the database load.
MAX_LANES = 4
MIN_PER_LANE = 4


class PredictorUnavailable(RuntimeError):
    """The predictor's environment is missing or its runner failed: the message says the fix."""


def predictor_python() -> Path | None:
    path = Path(os.environ.get(ENV_VAR) or ROOT / ".venv-predict" / "bin" / "python")
    return path if path.exists() else None


def cache_key(query: dict[str, Any], systems: list[dict[str, str]]) -> str:
    pins = PINS.read_text() if PINS.exists() else ""
    text = json.dumps([query, systems, RUNNER.read_text(), pins], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _cache_dir() -> Path | None:
    value = os.environ.get(CACHE_VAR, str(ROOT / ".cache" / "predict"))
    return Path(value) if value else None


def run(queries: list[dict[str, Any]], systems: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The runner's answers to `queries`, in order: kept ones from the cache, the others (each
    distinct query once) from one run of the runner. Only answers without an error are kept."""
    cache = _cache_dir()
    keys = [cache_key(q, systems) for q in queries]
    found: dict[str, dict[str, Any]] = {}
    for k in keys:
        if cache is not None and (cache / f"{k}.json").exists():
            found[k] = json.loads((cache / f"{k}.json").read_text())
    todo = {k: q for k, q in zip(keys, queries, strict=True) if k not in found}
    if todo:
        fresh = _run_parallel(list(todo.values()), systems)
        for k, answer in zip(todo, fresh, strict=True):
            found[k] = answer
            if cache is not None and "error" not in answer:
                cache.mkdir(parents=True, exist_ok=True)
                (cache / f"{k}.json").write_text(json.dumps(answer))
    return [found[k] for k in keys]


def _run_parallel(queries: list[dict[str, Any]],
                  systems: list[dict[str, str]]) -> list[dict[str, Any]]:
    """run_uncached over the host's cores: each estimate takes about a second of one core
    (measured: cli_estimate 0.9-1.6 s for Qwen3-30B-A3B on a100_sxm), and a base's campaign
    asks dozens, so the queries are dealt round-robin to one runner per core; answers come
    back in the queries' order."""
    lanes = min(os.cpu_count() or 1, MAX_LANES, len(queries) // MIN_PER_LANE) or 1
    if lanes == 1:
        return run_uncached(queries, systems)
    with ThreadPoolExecutor(max_workers=lanes) as pool:
        parts = list(pool.map(lambda i: run_uncached(queries[i::lanes], systems), range(lanes)))
    out: list[dict[str, Any]] = [{}] * len(queries)
    for i, part in enumerate(parts):
        out[i::lanes] = part
    return out


def run_uncached(queries: list[dict[str, Any]],
                systems: list[dict[str, str]]) -> list[dict[str, Any]]:
    python = predictor_python()
    if python is None:
        raise PredictorUnavailable("the predictor is not installed: run `make predictor` (or "
                                   f"set {ENV_VAR} to a Python with aiconfigurator==0.12.0)")
    done = subprocess.run([str(python), str(RUNNER)], capture_output=True, text=True,
                          input=json.dumps({"systems": systems, "queries": queries}),
                          timeout=TIMEOUT_S, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise PredictorUnavailable(f"the predictor failed (exit {done.returncode}): "
                                   f"{done.stderr.strip()[-600:]}")
    answers: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])["answers"]
    return answers


def predict(stack: StackConfig, scale: Scale, base: StackConfig | None = None) -> Prediction:
    """Every step of `stack`'s workloads at `scale`, predicted (or why not)."""
    out = Prediction(stack.name)
    if stack.serving is None:
        out.not_predicted = "a base serves nothing: predict its variants"
        return out
    lay = layout(stack, base)
    if isinstance(lay, str):
        out.not_predicted = lay
        return out
    out.topology = describe(lay)
    out.gpus, out.disaggregated = lay.gpus, lay.disaggregated
    out.tier_systems = [t.system.name for t in lay.tiers]
    shapes, out.skipped = step_shapes(stack, scale)
    systems = systems_request(lay.systems)
    info, *answers = run([{"op": "versions"}] + [
        {"op": "estimate", "kwargs": estimate_kwargs(stack.model.id, lay, s)} for s in shapes],
        systems)
    if "error" in info:
        raise PredictorUnavailable(f"the predictor failed: {info['error']}")
    out.database = {"aiconfigurator": info["aiconfigurator"],
                    "aiconfigurator_core": info["aiconfigurator_core"], "backend": BACKEND,
                    "systems": sorted({t.system.name for t in lay.tiers})}
    if missing := _missing(stack.model.id, lay, info):
        out.not_predicted = missing
        return out
    versions: dict[str, str] = {}
    for shape, answer in zip(shapes, answers, strict=True):
        if "error" in answer:
            out.skipped.append(f"{shape.id}: {answer['error']}")
            continue
        versions.update(backend_versions(lay, answer["backend_version"]))
        out.rows.append(row(shape, lay, answer))
    out.database["backend_versions"] = versions
    out.departures = departures(stack, lay.systems, versions)
    return out


def backend_versions(lay: Layout, answered: str) -> dict[str, str]:
    """{system: its database's vLLM version}: a disagg answer over two systems names both as
    "<prefill>-<decode>" (aiconfigurator 0.12.0 cli/api.py)."""
    names = list(dict.fromkeys(t.system.name for t in lay.tiers))
    parts = answered.split("-") if len(names) == 2 else [answered]
    if len(parts) != len(names):
        parts = [answered] * len(names)
    return dict(zip(names, parts, strict=True))


def _missing(model: str, lay: Layout, info: dict[str, Any]) -> str | None:
    if model not in info["models"]:
        return (f"{model} is not in AIConfigurator {info['aiconfigurator']}'s database (it "
                "ships model configs for Qwen3, DeepSeek, Llama, ... but not this one): nothing "
                "predicted; the local rehearsal uses the mocker's generic timings")
    lacking = [t.system.name for t in lay.tiers
               if BACKEND not in info["databases"].get(t.system.name, {})]
    if lacking:
        return f"no {BACKEND} data for {', '.join(lacking)}: nothing predicted"
    return None
