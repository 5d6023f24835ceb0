"""The thin shell around the predictor: finds its environment, asks aic_runner.py each batch of
queries (one JSON request line, one answer line, through runner_pool.py's kept runners), and
composes the pure parts into a stack's Prediction. No network: the database and model configs
are installed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.predict.atomic_file import write_text_atomic
from stacks.predict.bands import SNAPSHOT, BandQuery, EstimatedRow, NoBand, band, load
from stacks.predict.rows import Prediction, banded, describe, row, stretched
from stacks.predict.runner_pool import RunnerFailed, RunnerPool
from stacks.predict.shapes import (
    Layout,
    StepShape,
    Tier,
    estimate_kwargs,
    kv_cache_mode,
    layout,
    step_shapes,
)
from stacks.predict.silicon import precision_class
from stacks.predict.suspect import suspects, upper_bound_note
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
# MIN_PER_LANE queries: a runner's first estimate pays the database load. The runners are kept
# for the process's life (runner_pool.py), as many as run at once.
MAX_LANES = 4
MIN_PER_LANE = 4
RUNNERS = RunnerPool(keep=MAX_LANES)


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
        fresh = run_spread(list(todo.values()), systems)
        for k, answer in zip(todo, fresh, strict=True):
            found[k] = answer
            if cache is not None and "error" not in answer:
                cache.mkdir(parents=True, exist_ok=True)
                write_text_atomic(cache / f"{k}.json", json.dumps(answer))
    return [found[k] for k in keys]


def run_spread(queries: list[dict[str, Any]],
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
    try:
        out = RUNNERS.ask(python, RUNNER, {"systems": systems, "queries": queries}, TIMEOUT_S)
    except RunnerFailed as exc:
        raise PredictorUnavailable(f"the predictor failed ({exc})") from None
    answers: list[dict[str, Any]] = out["answers"]
    return answers


@dataclass
class DatabaseFacts:
    """What the database says of a stack before any estimate: its layout, the provenance a
    table or a prediction records (AIConfigurator's versions, the backend, each system's
    default database version, the KV cache mode, the checkpoint's class, the bands' table),
    the upper-bound note of suspect quantized kernels, or why nothing can be predicted."""
    layout: Layout | None
    database: dict[str, Any]
    checkpoint: dict[str, Any] = field(default_factory=dict)
    upper: str | None = None
    not_predicted: str | None = None


def database_facts(stack: StackConfig, base: StackConfig | None = None) -> DatabaseFacts:
    """The stack's DatabaseFacts from three cached runner questions (versions, the checkpoint,
    the quant check of a quantized one): a mocker table needs these, not an estimate, which
    for a disaggregated layout costs a runner start and seconds of search."""
    if stack.serving is None:
        return DatabaseFacts(None, {}, not_predicted="a base serves nothing: predict its "
                             "variants")
    lay = layout(stack, base)
    if isinstance(lay, str):
        return DatabaseFacts(None, {}, not_predicted=lay)
    systems = systems_request(lay.systems)
    model = stack.model.id
    info, checkpoints = run([{"op": "versions"}, {"op": "checkpoint", "models": [model]}],
                            systems)
    for a in (info, checkpoints):
        if "error" in a:
            raise PredictorUnavailable(f"the predictor failed: {a['error']}")
    database: dict[str, Any] = {
        "aiconfigurator": info["aiconfigurator"],
        "aiconfigurator_core": info["aiconfigurator_core"], "backend": BACKEND,
        "systems": sorted({t.system.name for t in lay.tiers})}
    if missing := _missing(model, lay, info):
        return DatabaseFacts(lay, database, not_predicted=missing)
    ckpt = checkpoints[model]
    kv = kv_cache_mode(stack.serving.kv_cache_dtype, ckpt["kv_cache_quant_algo"])
    checks = quant_checks(model, lay, kv, ckpt)
    upper = upper_bounds(checks, run([q for _, q in checks], systems), ckpt)
    # the version cli_estimate resolves when none is given (aiconfigurator 0.12.0 cli/api.py
    # -> perf_database.get_latest_database_version), asked of the package, not guessed
    database["backend_versions"] = {t.system.name: info["latest"][t.system.name]
                                    for t in lay.tiers}
    database["kv_cache"] = kv
    database["model"] = {"architecture": ckpt["architecture"],
                         "moe": ckpt["num_experts"] > 0,
                         "precision": precision_class(ckpt["gemm"], ckpt["moe"],
                                                      ckpt["num_experts"] > 0)}
    database["bands"] = load_bands()[0]
    return DatabaseFacts(lay, database, ckpt, upper)


def predict(stack: StackConfig, scale: Scale, base: StackConfig | None = None) -> Prediction:
    """Every step of `stack`'s workloads at `scale`, predicted (or why not), each with its
    error bands, bandwidth stretch and upper-bound mark (stacks/predict/rows.py)."""
    out = Prediction(stack.name)
    facts = database_facts(stack, base)
    lay, out.database = facts.layout, dict(facts.database)
    if lay is not None:
        out.topology = describe(lay)
        out.gpus, out.disaggregated = lay.gpus, lay.disaggregated
        out.tier_systems = [t.system.name for t in lay.tiers]
    if facts.not_predicted is not None or lay is None:
        out.not_predicted = facts.not_predicted
        return out
    shapes, out.skipped = step_shapes(stack, scale)
    ckpt, kv, upper = facts.checkpoint, facts.database["kv_cache"], facts.upper
    answers = run([{"op": "estimate", "kwargs": estimate_kwargs(stack.model.id, lay, s, kv)}
                   for s in shapes], systems_request(lay.systems))
    _, silicon = load_bands()
    versions: dict[str, str] = {}
    for shape, answer in zip(shapes, answers, strict=True):
        if "error" in answer:
            out.skipped.append(f"{shape.id}: {answer['error']}")
            continue
        versions.update(backend_versions(lay, answer["backend_version"]))
        r = row(shape, lay, stretched(answer, shape.osl))
        q_ttft, q_itl = band_queries(lay, shape, answer, ckpt)
        # a figure on suspect rows is an upper bound: the model's error elsewhere says nothing
        # of it
        bands = [NoBand(m, "no band: an upper bound on suspect database rows")
                 for m in ("ttft", "itl")] if upper else \
            [band(silicon, q_ttft, "ttft"), band(silicon, q_itl, "itl")]
        out.rows.append(replace(banded(r, *bands), upper_bound=upper))
    out.database["backend_versions"] = versions
    out.departures = departures(stack, lay.systems, versions) + ([upper] if upper else [])
    return out


def quant_checks(model: str, lay: Layout, kv: str, ckpt: dict[str, Any]
                 ) -> list[tuple[str, dict[str, Any]]]:
    """(system, query) of a `quant_check` per tier system of a quantized checkpoint."""
    if precision_class(ckpt["gemm"], ckpt["moe"], ckpt["num_experts"] > 0) == "BF16":
        return []
    out: dict[str, dict[str, Any]] = {}
    for t in lay.tiers:
        moe_tp, moe_ep = t.moe_sizes
        out.setdefault(t.system.name, {
            "op": "quant_check", "model": model, "system": t.system.name,
            "backend_version": None, "tp": t.tp, "moe_tp": moe_tp, "moe_ep": moe_ep,
            "kvcache_quant_mode": kv, "batch": 1, "s": 1024})
    return list(out.items())


def upper_bounds(checks: list[tuple[str, dict[str, Any]]], answers: list[dict[str, Any]],
                 ckpt: dict[str, Any]) -> str | None:
    """The upper-bound note of the first tier system whose quantized kernels are suspect."""
    for (system, q), a in zip(checks, answers, strict=True):
        if "error" not in a and (found := suspects(a)):
            precision = precision_class(ckpt["gemm"], ckpt["moe"], ckpt["num_experts"] > 0)
            return upper_bound_note(system, precision, q["batch"], found)
    return None


def load_bands() -> tuple[dict[str, Any], list[EstimatedRow]]:
    """The bands' table (stacks/predict/silicon_estimates.json), or none with the reason."""
    try:
        return load()
    except FileNotFoundError:
        return {"missing": f"{SNAPSHOT.name}: run `python -m stacks bands --refresh`"}, []


def band_queries(lay: Layout, shape: StepShape, answer: dict[str, Any],
                 ckpt: dict[str, Any]) -> tuple[BandQuery, BandQuery]:
    """What the step's TTFT (its prefill tier) and ITL (its decode tier) are predictions of."""
    moe = ckpt["num_experts"] > 0
    quant = answer.get("quant") or {}
    precision = precision_class(quant.get("gemm") or ckpt["gemm"],
                                quant.get("moe") or ckpt["moe"], moe)
    p, d = lay.tiers[0], lay.tiers[-1]
    # a row's shape is its (decode) worker's batch and TP, as silicon.py reads a row's
    batch = math.ceil(shape.concurrency / d.replicas)
    mode = "disagg" if lay.disaggregated else "agg"

    def query(t: Tier) -> BandQuery:
        return BandQuery(precision, t.system.name, ckpt["architecture"], moe, mode, batch,
                         d.tp, shape.isl, shape.osl)
    return query(p), query(d)


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
