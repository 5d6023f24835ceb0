"""The one module that runs NVIDIA AIConfigurator (0.12.0, `make predictor`): a thin shell.

Run by stacks/predict/predictor.py as `.venv-predict/bin/python aic_runner.py` with one JSON
request on stdin; prints one JSON answer on stdout (AIConfigurator's own logging goes to
stderr). It imports nothing of dynamo-bench (the predictor's environment does not hold it) and
nothing here decides anything: the queries are built, and the answers read, by the pure
functions of stacks/predict/.

Request: {"systems": [{"name", "yaml", "data_from"}], "queries": [...]}; each query is one of
- {"op": "versions"}: aiconfigurator and aiconfigurator-core versions, the model configs and
  the (system, backend) -> versions the database holds;
- {"op": "estimate", "kwargs": {...}}: `aiconfigurator.cli.api.cli_estimate(**kwargs)`, the
  function `aiconfigurator cli estimate` runs (aiconfigurator 0.12.0, cli/api.py);
- {"op": "mocker_table", "out": path, ...}: Dynamo's mocker timing table (below).
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
    from aiconfigurator_core.sdk.perf_database import get_supported_databases
    paths = systems_paths.split(",") if systems_paths else None
    if paths:
        paths = [str(package_dir() / "systems") if p == "default" else p for p in paths]
    dbs = get_supported_databases(paths)
    return {"aiconfigurator": metadata.version("aiconfigurator"),
            "aiconfigurator_core": metadata.version("aiconfigurator-core"),
            "models": packaged_models(),
            "databases": {s: {b: list(v) for b, v in bv.items()} for s, bv in dbs.items()}}


def estimate(kwargs: dict[str, Any], systems_paths: str | None) -> dict[str, Any]:
    from aiconfigurator.cli.api import cli_estimate
    if kwargs["model_path"] not in packaged_models():
        return {"error": f"{kwargs['model_path']} is not in the database", "no_model": True}
    if systems_paths and "systems_paths" not in kwargs:
        kwargs = {**kwargs, "systems_paths": systems_paths}
    r = cli_estimate(**kwargs)
    raw = r.raw
    out = {name: raw[key] for key, name in RAW_FIELDS.items()
           if isinstance(raw.get(key), (int, float))}
    return {**out, **ttft_terms(kwargs), "backend_version": r.backend_version,
            "system": r.system_name,
            "kv_cache_warning": str(r.kv_cache_warning) if r.kv_cache_warning else None}


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
    corrections the estimate it is compared with applies to the same role's steps)."""
    import numpy as np
    from aiconfigurator_core.sdk.engine import EngineHandle
    grid = q["grid"]
    # compile takes one systems folder (not cli_estimate's "<dir>,default" list): ours for a
    # system of ours, else the packaged one
    ours = systems_paths.split(",")[0] if systems_paths else None
    folder = ours if ours and (Path(ours) / f"{q['system']}.yaml").exists() else None
    eng = EngineHandle.compile(q["model"], q["system"], "vllm",
                               backend_version=q["backend_version"], tp_size=q["tp"],
                               moe_tp_size=q["tp"], moe_ep_size=1, systems_path=folder)
    prefill_isl = np.array(grid["prefill_isl"], dtype=np.float64)
    kv = np.array(grid["kv"], dtype=np.float64)
    ctx = np.array(grid["ctx"], dtype=np.float64)
    prefill = np.array([eng.predict_prefill_latency(1, int(n), 0) for n in prefill_isl]
                       ) * q["prefill_scale"]
    cache: dict[tuple[int, int], float] = {}

    def step(bs: int, c: int) -> float:
        if (bs, c) not in cache:
            cache[bs, c] = eng.predict_decode_latency(bs, c, 2)
        return cache[bs, c]

    itl = np.zeros((len(kv), len(ctx)))
    for i, k in enumerate(kv):
        for j, c in enumerate(ctx):
            bs = max(1.0, k / c)   # a fractional batch between two whole ones, linearly
            lo, hi = math.floor(bs), math.ceil(bs)
            itl[i, j] = step(lo, int(c)) + (bs - lo) * (step(hi, int(c)) - step(lo, int(c)))
    itl *= q["decode_scale"]
    np.savez(q["out"], prefill_isl=prefill_isl, prefill_ttft_ms=prefill.astype(np.float64),
             decode_active_kv_tokens=kv, decode_context_length=ctx,
             decode_itl=itl.astype(np.float64))
    return {"out": q["out"], "decode_queries": len(cache)}


def answer(q: dict[str, Any], systems_paths: str | None) -> dict[str, Any]:
    try:
        with contextlib.redirect_stdout(sys.stderr):   # the answer is the only stdout line
            if q["op"] == "versions":
                return versions(systems_paths)
            if q["op"] == "estimate":
                return estimate(q["kwargs"], systems_paths)
            if q["op"] == "mocker_table":
                return mocker_table(q, systems_paths)
        return {"error": f"unknown op {q['op']!r}"}
    except Exception as exc:  # noqa: BLE001 - one bad query answers as such, not the batch
        return {"error": f"{type(exc).__name__}: {exc}"}


def main() -> int:
    request = json.loads(sys.stdin.read())
    with tempfile.TemporaryDirectory(prefix="dynamo-bench-aic-") as tmp:
        systems_paths = make_systems_dir(request.get("systems", []), Path(tmp))
        answers = [answer(q, systems_paths) for q in request["queries"]]
    sys.stdout.write(json.dumps({"answers": answers}) + os.linesep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
