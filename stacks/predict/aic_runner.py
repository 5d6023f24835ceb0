"""The one module that runs NVIDIA AIConfigurator (0.12.0, `make predictor`): a thin shell.

Run by stacks/predict/predictor.py (through runner_pool.py) as `.venv-predict/bin/python
aic_runner.py`: one JSON request per stdin line, one JSON answer per stdout line, until stdin
closes (AIConfigurator's own logging goes to stderr). It imports nothing of dynamo-bench
(the predictor's environment does not hold it) and nothing here decides anything: the queries
are built, and the answers read, by the pure functions of stacks/predict/.

Request: {"systems": [{"name", "yaml", "data_from"}], "queries": [...]}; each query is one of
- {"op": "versions"}: aiconfigurator and aiconfigurator-core versions, the model configs and
  the (system, backend) -> versions the database holds;
- {"op": "estimate", "kwargs": {...}}: `aiconfigurator.cli.api.cli_estimate(**kwargs)`, the
  function `aiconfigurator cli estimate` runs (aiconfigurator 0.12.0, cli/api.py);
- {"op": "mocker_table", "out": path, ...}: Dynamo's mocker timing table (below);
- {"op": "checkpoint", "models": [...]}: what AIConfigurator reads of each model's checkpoint
  (architecture, experts, declared quantization and KV cache dtype, the quant modes it infers);
- {"op": "quant_check", ...}: a decode step's operations with the checkpoint's quant modes and
  with BF16 ones (stacks/predict/suspect.py);
- {"op": "silicon_rows", "backend": "vllm"}: its own measured end-to-end rows
  (aiconfigurator_core/systems/silicon_sample.csv) of that backend, with the file's sha256.
Answer: {"answers": [...]} in query order; a query that raises answers {"error": "..."}.

Extra systems (the A100 40 GB part): their YAML is written to a temporary systems folder whose
data_dir links to an installed system's measurements (`data_from`), with that system's
queryable-version slots (systems/query_versions.yaml `overrides`), and the folder is passed
ahead of the packaged one (`systems_paths="<dir>,default"`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

warnings.filterwarnings("ignore")
logging.basicConfig(stream=sys.stderr, level=logging.ERROR)
logging.getLogger("aiconfigurator").setLevel(logging.ERROR)

# The result fields of cli_estimate's EstimateResult.raw kept, under the names used here.
RAW_FIELDS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "request_latency": "request_latency_ms",
              "tokens/s": "tokens_per_s", "tokens/s/gpu": "tokens_per_s_per_gpu",
              "tokens/s/user": "tokens_per_s_per_user", "seq/s": "seq_per_s",
              "concurrency": "concurrency", "num_total_gpus": "gpus", "memory": "memory_gb",
              "(p)memory": "prefill_memory_gb", "(d)memory": "decode_memory_gb"}


def package_dir() -> Path:
    import aiconfigurator_core
    return Path(aiconfigurator_core.__file__).parent


def make_systems_dir(systems: list[dict[str, str]], into: Path) -> str | None:
    """The systems folder for `systems`, or None when there are none."""
    if not systems:
        return None
    import yaml
    packaged = package_dir() / "systems"
    versions = yaml.safe_load((packaged / "query_versions.yaml").read_text())
    (into / "data").mkdir(parents=True, exist_ok=True)
    for s in systems:
        (into / f"{s['name']}.yaml").write_text(s["yaml"])
        link = into / "data" / s["name"]
        if not link.exists():
            link.symlink_to(packaged / "data" / s["data_from"], target_is_directory=True)
        versions["overrides"][s["name"]] = versions["overrides"][s["data_from"]]
    (into / "query_versions.yaml").write_text(yaml.safe_dump(versions))
    return f"{into},default"


def packaged_models() -> list[str]:
    """The model configs the database ships; any other model id would make AIConfigurator
    download its config from Hugging Face, which is never done here."""
    return sorted(p.name.removesuffix("_config.json").replace("--", "/", 1)
                  for p in (package_dir() / "model_configs").glob("*_config.json"))


def versions(systems_paths: str | None) -> dict[str, Any]:
    from aiconfigurator_core.sdk.perf_database import (
        get_latest_database_version,
        get_supported_databases,
    )
    paths = systems_paths.split(",") if systems_paths else None
    if paths:
        paths = [str(package_dir() / "systems") if p == "default" else p for p in paths]
    dbs = get_supported_databases(paths)
    return {"aiconfigurator": metadata.version("aiconfigurator"),
            "aiconfigurator_core": metadata.version("aiconfigurator-core"),
            "models": packaged_models(),
            "databases": {s: {b: list(v) for b, v in bv.items()} for s, bv in dbs.items()},
            # what an estimate without backend_version runs on (cli/api.py resolves it so)
            "latest": {s: get_latest_database_version(s, "vllm", paths)
                       for s, bv in dbs.items() if "vllm" in bv}}


def estimate(kwargs: dict[str, Any], systems_paths: str | None) -> dict[str, Any]:
    from aiconfigurator.cli.api import cli_estimate
    if kwargs["model_path"] not in packaged_models():
        return {"error": f"{kwargs['model_path']} is not in the database", "no_model": True}
    if systems_paths and "systems_paths" not in kwargs:
        kwargs = {**kwargs, "systems_paths": systems_paths}
    stretch = kwargs.pop("stretch", None)
    r = cli_estimate(**kwargs)
    raw = r.raw
    out = {name: raw[key] for key, name in RAW_FIELDS.items()
           if isinstance(raw.get(key), (int, float))}
    # the quant modes the estimate resolved (a disagg answer names the decode worker's "(d)")
    quant = {k: raw.get(k, raw.get(f"(d){k}")) for k in ("gemm", "moe", "kvcache")}
    extra = {"stretch": stretch_terms(kwargs, r, stretch, systems_paths)} if stretch else {}
    return {**out, **ttft_terms(kwargs), **extra, "backend_version": r.backend_version,
            "system": r.system_name, "quant": quant,
            "kv_cache_warning": str(r.kv_cache_warning) if r.kv_cache_warning else None}


def _load_bandwidth() -> Any:
    """stacks/predict/bandwidth.py, the stretch rule (standard library only), loaded from beside
    this file: the predictor's environment does not hold dynamo-bench."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("bandwidth",
                                                  Path(__file__).with_name("bandwidth.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def mem_bw(system: str, systems_paths: str | None) -> float:
    """The systems file's memory bandwidth (B/s): ours first, then the packaged one."""
    import yaml
    folders = [Path(p) for p in (systems_paths or "").split(",") if p and p != "default"]
    for folder in [*folders, package_dir() / "systems"]:
        if (folder / f"{system}.yaml").exists():
            return float(yaml.safe_load((folder / f"{system}.yaml").read_text())["gpu"]["mem_bw"])
    raise FileNotFoundError(f"no systems file for {system}")


_ENGINES: dict[str, Any] = {}


def engine_and_ops(q: dict[str, Any]) -> tuple[Any, list[str], list[str]]:
    """A compiled engine on `q["system"]`'s measurements and the model's context and generation
    operations (aiconfigurator_core 0.12.0 sdk/engine.py compile_engine, the per-step engine
    cli_estimate composes), kept for the process."""
    from aiconfigurator_core.sdk.config_builders import build_model_config
    from aiconfigurator_core.sdk.engine import EngineHandle, build_ops_json
    from aiconfigurator_core.sdk.models import get_model
    key = json.dumps(q, sort_keys=True)
    if key not in _ENGINES:
        quant = {k: q.get(k) for k in ("gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode")}
        handle = EngineHandle.compile(q["model"], q["system"], "vllm",
                                      backend_version=q["backend_version"], tp_size=q["tp"],
                                      moe_tp_size=q["moe_tp"], moe_ep_size=q["moe_ep"],
                                      systems_path=q.get("systems_path"), **quant)
        model = get_model(q["model"], build_model_config(
            tp_size=q["tp"], pp_size=1, attention_dp_size=1, moe_tp_size=q["moe_tp"],
            moe_ep_size=q["moe_ep"], **quant), "vllm")
        # each operation's OpSpec JSON, serialised once: a table evaluates thousands of steps
        _ENGINES[key] = (handle, *([json.dumps(op) for op in json.loads(build_ops_json(ops))]
                                   for ops in (model.context_ops, model.generation_ops)))
    engine: tuple[Any, list[str], list[str]] = _ENGINES[key]
    return engine


def op_times(engine: tuple[Any, list[str], list[str]], context: bool, batch: int, s: int,
             prefix: int = 0) -> list[tuple[str, float, Any, Any]]:
    """Each operation of a prefill (context) or decode step at (batch, s): (name, measured ms,
    roofline math ms, roofline bytes ms), the roofline None where AIConfigurator exports none
    (aiconfigurator_core sdk/engine.py evaluate_ops_json / evaluate_ops_sol_json)."""
    from aiconfigurator_core.sdk.errors import SolNotImplementedError
    handle, ctx_ops, gen_ops = engine
    ops = ctx_ops if context else gen_ops
    shape = {"is_context": context, "batch_size": batch, "s": s, "prefix": prefix}
    measured = handle.evaluate_ops_json(f"[{','.join(ops)}]", **shape)
    out = []
    for op, m in zip(ops, measured, strict=True):
        try:
            (_, _, math_ms, mem_ms), = handle.evaluate_ops_sol_json(f"[{op}]", **shape)
        except SolNotImplementedError:
            math_ms = mem_ms = None
        out.append((str(m[0]), float(m[1]), math_ms, mem_ms))
    return out


def stretch_terms(kwargs: dict[str, Any], r: Any, stretch: dict[str, str | None],
                  systems_paths: str | None) -> dict[str, Any]:
    """The estimate's prefill and decode steps stretched from the bandwidth their kernels were
    measured at to their system's (stacks/predict/bandwidth.py). `stretch`: per phase
    ("prefill", "decode"), the system whose measurements the phase's system reads (its
    `data_from`), or None: not stretched. Each phase's factor and operations at the step's
    shape (prefill: one prompt of ISL; decode: the batch at ISL + OSL/2, as the estimate's
    decode-only step), and, for agg, the schedule its TPOT averages (per_ops_data
    `scheduling`: mixed and decode-only steps)."""
    bandwidth = _load_bandwidth()
    disagg = kwargs["mode"] == "disagg"
    versions = r.backend_version.split("-")
    out: dict[str, Any] = {}
    for phase, measured_on in stretch.items():
        if not measured_on:
            out[phase] = None
            continue
        role = f"{phase}_" if disagg else ""
        system = (kwargs.get("decode_system_name") or kwargs["system_name"]) \
            if disagg and phase == "decode" else kwargs["system_name"]
        ratio = mem_bw(measured_on, None) / mem_bw(system, systems_paths)
        tp = kwargs[f"{role}tp_size"]
        engine = engine_and_ops({
            "model": kwargs["model_path"], "system": measured_on, "tp": tp,
            "moe_tp": kwargs.get(f"{role}moe_tp_size") or tp,
            "moe_ep": kwargs.get(f"{role}moe_ep_size") or 1,
            "backend_version": versions[-1] if phase == "decode" else versions[0],
            **{k: kwargs[k] for k in ("gemm_quant_mode", "moe_quant_mode",
                                       "kvcache_quant_mode") if kwargs.get(k)}})
        isl, osl = kwargs["isl"], kwargs["osl"]
        times = op_times(engine, True, 1, isl, kwargs.get("prefix", 0)) if phase == "prefill" \
            else op_times(engine, False, kwargs["decode_batch_size" if disagg
                                                else "batch_size"], isl + osl // 2)
        out[phase] = {"measured_on": measured_on, "ratio": ratio,
                      **bandwidth.stretch(times, ratio)}
    sched = (r.per_ops_data or {}).get("scheduling") or {}
    out["schedule"] = {k: float(sched[k]) for k in (
        "num_mix_steps", "num_genonly_steps", "mix_step_latency_ms", "genonly_step_latency_ms")
        if k in sched}
    return out


def ttft_terms(kwargs: dict[str, Any]) -> dict[str, float]:
    """The two terms AIConfigurator's agg TTFT adds to the prefill kernels' time, from its own
    vLLM backend (aiconfigurator_core 0.12.0 sdk/backends/base_backend.py run_agg: ttft =
    (prefill step + _prefill_dispatch_overhead_ms(model)) x _ttft_queuing_factor(b, ...);
    vllm_backend.py: 0.8 ms per layer, 1 + log2(b) / 8): a mocker on the database's table
    (mocker_table.py) runs neither, so a rehearsal's TTFT sits below the prediction by them.
    The disagg estimate adds neither (its prefill is run_static's context latency)."""
    if kwargs.get("mode") != "agg":
        return {}
    from types import SimpleNamespace

    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.models import _get_model_info
    backend = get_backend(kwargs["backend_name"])
    layers = _get_model_info(kwargs["model_path"])["layers"]
    return {"ttft_dispatch_ms": float(backend._prefill_dispatch_overhead_ms(
                SimpleNamespace(_num_layers=layers))),
            # vLLM's factor reads only the batch; steps_to_finish_ctx is the base class's
            "ttft_queue_factor": float(backend._ttft_queuing_factor(kwargs["batch_size"], 0.0))}


def mocker_table(q: dict[str, Any], systems_paths: str | None) -> dict[str, Any]:
    """Dynamo 1.6.1's mocker timing table (`--planner-profile-data`) from AIConfigurator's
    compiled per-step engine (the one cli_estimate composes). The mocker
    (ai-dynamo/dynamo lib/mocker/src/common/perf_model.rs, `PerfModel::from_npz`) interpolates
    prefill_ttft_ms over prefill_isl linearly, looked up by a step's total new tokens, and
    decode_itl[kv, ctx] bilinearly over decode_active_kv_tokens (the scheduled requests'
    summed context) x decode_context_length (that sum / batch); float64, rising axes, ms.
    Every step is multiplied by the query's prefill_scale / decode_scale (the latency
    corrections the estimate it is compared with applies to the same role's steps), and, with
    `stretch_from` (the system whose kernels ours reads), by its bandwidth stretch at that
    step's shape (stacks/predict/bandwidth.py), as the estimate's steps are."""
    import numpy as np
    grid = q["grid"]
    # compile takes one systems folder (not cli_estimate's "<dir>,default" list): ours for a
    # system of ours, else the packaged one
    ours = systems_paths.split(",")[0] if systems_paths else None
    folder = ours if ours and (Path(ours) / f"{q['system']}.yaml").exists() else None
    config = {"model": q["model"], "backend_version": q["backend_version"], "tp": q["tp"],
              "moe_tp": q["moe_tp"], "moe_ep": q["moe_ep"],
              **({"kvcache_quant_mode": q["kvcache_quant_mode"]}
                 if q.get("kvcache_quant_mode") else {})}
    eng = engine_and_ops({**config, "system": q["system"], "systems_path": folder})[0]
    factor = _stretch_factor(q.get("stretch_from"), q["system"], config, systems_paths)
    prefill_isl = np.array(grid["prefill_isl"], dtype=np.float64)
    kv = np.array(grid["kv"], dtype=np.float64)
    ctx = np.array(grid["ctx"], dtype=np.float64)
    # a longer prefill is never faster: the stretch moves an operation from memory-bound to
    # compute-bound as the prompt grows, so its factor falls, and the stretched curve is held
    # non-decreasing (its running maximum), as the measured one is
    prefill = np.maximum.accumulate(np.array(
        [eng.predict_prefill_latency(1, int(n), 0) * factor(True, 1, int(n))
         for n in prefill_isl])) * q["prefill_scale"]
    cache: dict[tuple[int, int], float] = {}

    def step(bs: int, c: int) -> float:
        if (bs, c) not in cache:
            cache[bs, c] = eng.predict_decode_latency(bs, c, 2) * factor(False, bs, c)
        return cache[bs, c]

    itl = np.zeros((len(kv), len(ctx)))
    for i, k in enumerate(kv):
        for j, c in enumerate(ctx):
            bs = max(1.0, k / c)   # a fractional batch between two whole ones, linearly
            lo, hi = math.floor(bs), math.ceil(bs)
            itl[i, j] = step(lo, int(c)) + (bs - lo) * (step(hi, int(c)) - step(lo, int(c)))
    itl *= q["decode_scale"]
    # written whole, then renamed into place: another process (`make demo` simulates beside its
    # live campaign) may build or read the same table at the same time
    tmp = f"{q['out']}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, prefill_isl=prefill_isl, prefill_ttft_ms=prefill.astype(np.float64),
                 decode_active_kv_tokens=kv, decode_context_length=ctx,
                 decode_itl=itl.astype(np.float64))
    os.replace(tmp, q["out"])
    return {"out": q["out"], "decode_queries": len(cache)}


def _stretch_factor(measured_on: str | None, system: str, config: dict[str, Any],
                    systems_paths: str | None) -> Any:
    """(context, batch, s) -> the bandwidth stretch of that step (1.0 without `measured_on`)."""
    if not measured_on:
        return lambda context, batch, s: 1.0
    bandwidth = _load_bandwidth()
    ratio = mem_bw(measured_on, None) / mem_bw(system, systems_paths)
    engine = engine_and_ops({**config, "system": measured_on})

    def factor(context: bool, batch: int, s: int) -> float:
        value: float = bandwidth.stretch(op_times(engine, context, batch, s), ratio)["factor"]
        return value
    return factor


def quant_check(q: dict[str, Any], systems_paths: str | None) -> dict[str, Any]:
    """A decode step's operations at (batch, s) with the checkpoint's quant modes and with
    bfloat16 GEMMs and experts, each (name, ms, roofline math ms, roofline bytes ms), for
    stacks/predict/suspect.py to compare."""
    ours = systems_paths.split(",")[0] if systems_paths else None
    folder = ours if ours and (Path(ours) / f"{q['system']}.yaml").exists() else None
    config = {k: q[k] for k in ("model", "system", "backend_version", "tp", "moe_tp", "moe_ep",
                                "kvcache_quant_mode")} | {"systems_path": folder}
    bf16 = {"gemm_quant_mode": "bfloat16", "moe_quant_mode": "bfloat16"}
    return {name: op_times(engine_and_ops(config | extra), False, q["batch"], q["s"])
            for name, extra in (("quant", {}), ("bf16", bf16))}


def checkpoint(models: list[str]) -> dict[str, Any]:
    """Per model, what AIConfigurator 0.12.0 reads of its checkpoint config
    (aiconfigurator_core sdk/utils.py get_model_config_from_model_path, which attaches the
    declared quantization: quant_algo with a block size read as fp8_block, kv_cache_quant_algo
    only where the checkpoint declares one) and the GEMM / MoE quant modes its models infer from
    it (sdk/models/helpers.py _infer_quant_modes_from_raw_config; unset means bfloat16)."""
    from aiconfigurator_core.sdk.models.helpers import _infer_quant_modes_from_raw_config
    from aiconfigurator_core.sdk.utils import get_model_config_from_model_path
    out: dict[str, Any] = {}
    for m in models:
        if m not in packaged_models():
            out[m] = {"error": f"{m} is not in the database"}
            continue
        info = get_model_config_from_model_path(m)
        raw = info["raw_config"]
        modes = _infer_quant_modes_from_raw_config(raw, info["architecture"])
        out[m] = {"architecture": info["architecture"],
                  "num_experts": int(info.get("num_experts") or 0),
                  "quant_algo": raw.get("quant_algo"),
                  "kv_cache_quant_algo": raw.get("kv_cache_quant_algo"),
                  "gemm": modes["gemm_quant_mode"].name if "gemm_quant_mode" in modes
                  else "bfloat16",
                  "moe": modes["moe_quant_mode"].name if "moe_quant_mode" in modes
                  else "bfloat16"}
    return out


def silicon_rows(backend: str) -> dict[str, Any]:
    """AIConfigurator's measured end-to-end rows of `backend`, as the CSV has them (strings)."""
    import csv
    import hashlib
    path = package_dir() / "systems" / "silicon_sample.csv"
    text = path.read_text()
    rows = [r for r in csv.DictReader(text.splitlines()) if r["backend"] == backend]
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "rows": rows}


def answer(q: dict[str, Any], systems_paths: str | None) -> dict[str, Any]:
    try:
        with contextlib.redirect_stdout(sys.stderr):   # the answer is the only stdout line
            if q["op"] == "versions":
                return versions(systems_paths)
            if q["op"] == "estimate":
                return estimate(q["kwargs"], systems_paths)
            if q["op"] == "mocker_table":
                return mocker_table(q, systems_paths)
            if q["op"] == "quant_check":
                return quant_check(q, systems_paths)
            if q["op"] == "checkpoint":
                return checkpoint(q["models"])
            if q["op"] == "silicon_rows":
                return silicon_rows(q["backend"])
        return {"error": f"unknown op {q['op']!r}"}
    except Exception as exc:  # noqa: BLE001 - one bad query answers as such, not the batch
        return {"error": f"{type(exc).__name__}: {exc}"}


def faster_database_reads() -> None:
    """AIConfigurator 0.12.0 reads every system file and version folder again (3 calls of
    get_supported_databases per estimate, sdk/perf_database.py) with PyYAML's pure-Python loader:
    31 s of a 6-estimate batch's 37 under cProfile. Within one runner process the files do not
    change: LibYAML's loader (CSafeLoader: the same constructor and resolver, the same data)
    parses them, and get_supported_databases' answer is kept per systems path, a copy handed out
    (its callers only read it). The answers stay byte for byte the same (measured: CPU 18.0 s ->
    4.6 s for 13 queries); tests/test_predict.py holds them to `aiconfigurator cli estimate`."""
    import copy

    import yaml
    from aiconfigurator_core.sdk import perf_database

    if getattr(yaml, "__with_libyaml__", False):
        yaml.safe_load = lambda stream: yaml.load(stream, Loader=yaml.CSafeLoader)  # noqa: S506
    found, kept = perf_database.get_supported_databases, {}

    def supported(systems_paths: str | list[str] | None = None) -> Any:
        key = systems_paths if systems_paths is None or isinstance(systems_paths, str) \
            else tuple(systems_paths)
        if key not in kept:
            kept[key] = found(systems_paths)
        return copy.deepcopy(kept[key])

    perf_database.get_supported_databases = supported


def main() -> int:
    """One request per stdin line, one answer per stdout line, until stdin closes
    (stacks/predict/runner_pool.py keeps a runner for its process's life, so each database is
    loaded once per runner). Each distinct set of extra systems gets one folder for the
    runner's life: a stable systems path is what faster_database_reads keeps its reads by."""
    faster_database_reads()
    # the answers' own channel; anything else written to stdout, by C code too, goes to stderr
    answers_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    with tempfile.TemporaryDirectory(prefix="dynamo-bench-aic-") as tmp:
        folders: dict[str, str | None] = {}
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            systems = request.get("systems", [])
            key = json.dumps(systems, sort_keys=True)
            if key not in folders:
                folders[key] = make_systems_dir(systems, Path(tmp) / str(len(folders)))
            answers = [answer(q, folders[key]) for q in request["queries"]]
            answers_out.write(json.dumps({"answers": answers}) + os.linesep)
            answers_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
