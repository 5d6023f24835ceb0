"""Dynamo's mocker timing tables (`--planner-profile-data <file.npz>`, Dynamo 1.6.1:
dynamo/mocker/utils/planner_profiler_perf_data_converter.py names the keys) made from
AIConfigurator's database for the GPU and TP a stack's workers imitate, and the record of how
each was made (sha256, versions, the grid, the per-step calls), for a run record to keep.

The grid (pure) covers what a local step asks: prefills of 1-32,768 new tokens, decode batches
up to 800,000 active KV tokens (above pre-flight's 777,577-token capacity of a TP4 A100 40 GB
worker) at contexts of 1-32,768 tokens. The shell (`build`) asks the runner for the table and
keeps it under a name made of what decides it, so a second build is a file read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from stacks.config.schema import StackConfig
from stacks.predict.atomic_file import write_text_atomic
from stacks.predict.predictor import (
    DatabaseFacts,
    PredictorUnavailable,
    cache_key,
    database_facts,
    run_spread,
)
from stacks.predict.shapes import Tier
from stacks.predict.systems import systems_request

HOW = ("prefill_ttft_ms[i] = EngineHandle.predict_prefill_latency(1, prefill_isl[i], 0) x "
       "prefill_scale; decode_itl[i, j] = EngineHandle.predict_decode_latency(bs, ctx_j, 2) x "
       "decode_scale at bs = kv_i / ctx_j (>= 1), linear between whole batches "
       "(aiconfigurator_core 0.12.0 sdk/engine.py, the per-step engine cli_estimate composes); "
       "the scales are the estimate's own for the role (agg 1.0; disagg prefill 1.1, decode "
       "1.08: aiconfigurator 0.12.0 cli/api.py); no vLLM dispatch term or queueing factor; "
       "the experts sharded and the KV cache typed as the stack's workers run them, and, with "
       "stretch_from, every step stretched to the GPU's own memory bandwidth "
       "(stacks/predict/bandwidth.py) as the estimate's are")

# The per-phase latency corrections AIConfigurator 0.12.0's disagg estimate multiplies into its
# prefill and decode workers' steps (aiconfigurator/cli/api.py: DEFAULT_PREFILL_LATENCY_
# CORRECTION_SCALE = 1.1, DEFAULT_DECODE_LATENCY_CORRECTION_SCALE = 1.08, passed by
# _run_disagg_estimate to DisaggInferenceSession.set_latency_correction_scales; sdk/
# inference_session.py run_disagg hands them to run_static(static_ctx / static_gen), and
# aiconfigurator_core sdk/backends/base_backend.py run_static multiplies every op's latency by
# it). Its agg estimate applies none. Measured (Qwen3-30B-A3B TP4 a100_sxm, ISL 1024 / OSL
# 512): disagg TPOT 4.282 / 6.753 / 9.479 ms at decode batch 1 / 4 / 16 is 1.080 x the mean
# predict_decode_latency step (3.966 / 6.254 / 8.780 ms). A table without the scale makes a
# disagg decode mocker run 1/1.08 of the predicted ITL before anything else differs.
ROLE_SCALES: dict[str, tuple[float, float]] = {   # role -> (prefill scale, decode scale)
    "worker": (1.0, 1.0), "prefill": (1.1, 1.0), "decode": (1.0, 1.08)}


def _steps(start: int, stop: int, step: int) -> list[float]:
    return [float(x) for x in range(start, stop + 1, step)]


def grid(max_kv: int = 800_000, max_ctx: int = 32_768) -> dict[str, list[float]]:
    """Rising axes: prefill tokens, active KV tokens, context length."""
    prefill = sorted({1.0, *_steps(16, 2048, 16), *_steps(2304, 16384, 256),
                      *_steps(16384, max_ctx, 2048)})
    kv = sorted({0.0, *_steps(64, 8192, 64), *_steps(9216, 65536, 1024),
                 *[float(round(65536 * (max_kv / 65536) ** (i / 47))) for i in range(48)]})
    ctx = sorted({1.0, *_steps(64, 4096, 64), *_steps(4608, max_ctx, 512)})
    return {"prefill_isl": prefill, "kv": kv, "ctx": ctx}


def table_query(model: str, role: str, tier: Tier, version: str | None, kv: str) -> dict:
    """The runner's query for one role's table: the grid, the latency scales the prediction
    this role is compared with applies to the same steps (ROLE_SCALES), the workers' expert
    sharding and KV cache dtype, and the bandwidth stretch of a GPU predicted on another
    part's kernels."""
    prefill_scale, decode_scale = ROLE_SCALES[role]
    moe_tp, moe_ep = tier.moe_sizes
    return {"op": "mocker_table", "model": model, "system": tier.system.name, "tp": tier.tp,
            "moe_tp": moe_tp, "moe_ep": moe_ep, "kvcache_quant_mode": kv,
            "stretch_from": tier.system.bandwidth_from, "backend_version": version,
            "grid": grid(), "prefill_scale": prefill_scale, "decode_scale": decode_scale}


def band_record(database: dict, role: str, tier: Tier, disaggregated: bool) -> dict:
    """What a SIMULATED figure on this role's table stands on, for its band
    (stacks/predict/bands.py simulated_band): the query of the rows nearest to the table's
    GPU, precision, model and mode (the shape is the figure's own), and which metric the
    role's timings decide (agg: both; prefill: TTFT; decode: ITL)."""
    m = database.get("model") or {}
    metrics = {"worker": ["ttft", "itl"], "prefill": ["ttft"], "decode": ["itl"]}[role]
    return {"query": {"precision": m.get("precision"), "system": tier.system.name,
                      "architecture": m.get("architecture"), "moe": m.get("moe"),
                      "mode": "disagg" if disaggregated else "agg", "tp": tier.tp},
            "metrics": metrics, "rows": (database.get("bands") or {}).get("backend"),
            "how": "stacks.predict.bands.simulated_band(record, metric, value, batch=, isl=, "
                   "osl=): the figure's own shape picks the nearest rows"}


@dataclass(frozen=True)
class MockerTable:
    role: str
    path: Path
    record: dict


@dataclass(frozen=True)
class PlannedTable:
    """A role's table as it will be kept: its query, the systems files it reads, its path."""
    role: str
    tier: Tier
    query: dict
    systems: list[dict[str, str]]
    path: Path


@dataclass(frozen=True)
class TablePlan:
    facts: DatabaseFacts
    tables: list[PlannedTable]


def plan(stack: StackConfig, folder: Path, base: StackConfig | None = None) -> TablePlan:
    """The tables `stack` runs on (none when the database cannot predict it)."""
    facts = database_facts(stack, base)
    lay = facts.layout
    if facts.not_predicted or lay is None:
        return TablePlan(facts, [])
    roles = ("prefill", "decode") if lay.disaggregated else ("worker",)
    systems = systems_request(lay.systems)
    db = facts.database
    tables = []
    for role, tier in zip(roles, lay.tiers, strict=True):
        version = db["backend_versions"][tier.system.name]
        query = table_query(stack.model.id, role, tier, version, db["kv_cache"])
        key = cache_key(query, systems)[:16]
        tables.append(PlannedTable(role, tier, query, systems,
                                   folder / f"aic-{tier.system.name}-tp{tier.tp}-{key}.npz"))
    return TablePlan(facts, tables)


def make_missing(tables: list[PlannedTable]) -> list[str]:
    """Makes the tables not kept yet, per systems request one runner per core (a runner's
    start, the database load, costs more than a table); returns the runner's errors."""
    todo: dict[Path, PlannedTable] = {t.path: t for t in tables if not t.path.exists()}
    groups: dict[str, list[PlannedTable]] = {}
    for t in todo.values():
        groups.setdefault(json.dumps(t.systems, sort_keys=True), []).append(t)
    errors = []
    for group in groups.values():
        group[0].path.parent.mkdir(parents=True, exist_ok=True)
        answers = run_spread([{**t.query, "out": str(t.path)} for t in group], group[0].systems)
        errors += [f"{t.path.name}: {a['error']}" for t, a in zip(group, answers, strict=True)
                   if "error" in a]
    return errors


def build(stack: StackConfig, folder: Path, base: StackConfig | None = None
          ) -> list[MockerTable]:
    """One table per worker role of `stack` (agg: worker; disagg: prefill, decode), or none
    when the database cannot predict the stack (the mocker then keeps its generic timings)."""
    planned = plan(stack, folder, base)
    if errors := make_missing(planned.tables):
        raise PredictorUnavailable(f"the mocker table for {stack.name}: {errors[0]}")
    return [recorded(stack, planned.facts, t) for t in planned.tables]


def recorded(stack: StackConfig, facts: DatabaseFacts, t: PlannedTable) -> MockerTable:
    """The table with the record of how it was made (kept beside it as JSON)."""
    db, query, tier = facts.database, t.query, t.tier
    assert facts.layout is not None
    version = query["backend_version"]
    record = {"source": f"SIMULATED from AIConfigurator {db['aiconfigurator']} "
                        f"({tier.system.name}, {db['backend']} {version}, TP{tier.tp})",
              "sha256": hashlib.sha256(t.path.read_bytes()).hexdigest(),
              "aiconfigurator": db["aiconfigurator"],
              "aiconfigurator_core": db["aiconfigurator_core"],
              "system": tier.system.name, "backend": db["backend"],
              "backend_version": version, "model": stack.model.id, "tp": tier.tp,
              "prefill_scale": query["prefill_scale"],
              "decode_scale": query["decode_scale"], "moe_tp": query["moe_tp"],
              "moe_ep": query["moe_ep"], "kv_cache": db["kv_cache"],
              "stretch_from": query["stretch_from"], "how": HOW, "file": t.path.name,
              "band": band_record(db, t.role, tier, facts.layout.disaggregated),
              "upper_bound": facts.upper}
    write_text_atomic(t.path.with_suffix(".json"), json.dumps(record, indent=2) + "\n")
    return MockerTable(t.role, t.path, record)
