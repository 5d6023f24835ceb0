"""A stack's steps and workers as AIConfigurator queries (pure).

A step is predicted at its concurrency and mean lengths, ids as workloads/steps.py names them
(`concurrency_sweep/c4`, ...; repeats share one prediction). The workers become one agg
configuration (a replica's TP and GPU; the step's concurrency split evenly over the replicas)
or one disagg configuration (prefill and decode TP, replica counts and GPUs, a decode tier on
another GPU as its own `decode_system_name`), the arguments `aiconfigurator cli estimate`
takes (aiconfigurator 0.12.0 cli/api.py `cli_estimate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.schema import Role, StackConfig, Topology, WorkerGroup
from stacks.config.workload_config import Scale
from stacks.predict.systems import BACKEND, DbSystem, system_for
from stacks.sizing.estimate import instance_price


@dataclass(frozen=True)
class StepShape:
    id: str
    workload: str
    concurrency: int
    isl: int
    osl: int
    prefix: int = 0          # prompt tokens already cached when the request arrives


@dataclass(frozen=True)
class Tier:
    """One role's workers: their database system, TP, replica count and whether vLLM runs
    their experts in parallel (`--enable-expert-parallel`)."""
    system: DbSystem
    tp: int
    replicas: int
    expert_parallel: bool = False

    @property
    def moe_sizes(self) -> tuple[int, int]:
        """(MoE TP, MoE EP) as vLLM shards the experts: with expert parallelism over TP ranks
        each rank holds whole experts (EP = TP, MoE TP 1), else every expert is split TP ways
        (vLLM 0.31.0 model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make:
        use_ep needs tp x dp x pcp > 1 and enable_expert_parallel, then ep_size = tp_size and
        tp_size = 1)."""
        return (1, self.tp) if self.expert_parallel and self.tp > 1 else (self.tp, 1)


@dataclass(frozen=True)
class Layout:
    disaggregated: bool
    tiers: tuple[Tier, ...]          # agg: (worker,); disagg: (prefill, decode)
    gpus: int
    gpu_usd_per_hour: float | None   # the GPU share of the nodes' prices; None: unpriced

    @property
    def systems(self) -> list[DbSystem]:
        return [t.system for t in self.tiers]


def cached(share: float, isl: int) -> int:
    """Prompt tokens found cached at `share`: a fully cached prompt still computes its last
    token (vLLM recomputes it to produce the first output; AIConfigurator refuses isl - prefix
    = 0), so at most isl - 1."""
    return min(int(share * isl), isl - 1)


def step_shapes(stack: StackConfig, scale: Scale) -> tuple[list[StepShape], list[str]]:
    """The steps predicted, and a sentence for each workload that is not."""
    shapes: list[StepShape] = []
    skipped: list[str] = []
    for name, w in stack.workloads.enabled().items():
        w = w.at_scale(scale)
        p = w.model_dump()
        if name == "concurrency_sweep":
            shapes += [StepShape(f"{name}/c{c}", name, c, p["isl"], p["osl"])
                       for c in p["concurrencies"]]
        elif name == "multi_turn":
            # a conversation's mean history over its turns, recomputed in full (no reuse)
            t = p["turns"]
            isl = round(p["isl"] * (t + 1) / 2 + p["osl"] * (t - 1) / 2)
            shapes.append(StepShape(f"{name}/conv{p['conversations']}", name,
                                    p["conversations"], isl, p["osl"]))
        elif name == "sequence_distributions":
            isl, osl = (p["isl_min"] + p["isl_max"]) // 2, (p["osl_min"] + p["osl_max"]) // 2
            shapes += [StepShape(f"{name}/{kind}", name, p["concurrency"], isl, osl)
                       for kind in p["distributions"]]
        elif name == "prefix_cache":
            shapes += [StepShape(f"{name}/share{round(s * 100):03d}", name, p["concurrency"],
                                 p["isl"], p["osl"], prefix=cached(s, p["isl"]))
                       for s in p["shares"]]
        elif name == "trace_replay" and p["source"] == "synthetic":
            shapes += [StepShape(f"{name}/c{c}", name, c, p["isl"], p["osl"],
                                 prefix=cached(p["reuse"], p["isl"]))
                       for c in p["concurrencies"]]
        else:
            skipped.append(f"{name}: a replayed trace ({p['source']}) brings its own lengths "
                           "and arrival times; not predicted")
    return shapes, skipped


def _tier(groups: list[WorkerGroup], stack: StackConfig) -> Tier | str:
    by_group = {g.name: g for g in stack.cluster.node_groups}
    systems = {system_for(by_group[w.node_group].instance_type) if w.node_group in by_group
               else None for w in groups}
    tps = {w.tensor_parallel_size for w in groups}
    eps = {w.expert_parallel for w in groups}
    if len(systems) != 1 or len(tps) != 1 or len(eps) != 1:
        return ("worker groups of one role on different GPUs, TP sizes or expert parallelism: "
                "not predicted")
    system = systems.pop()
    if system is None:
        return "a GPU AIConfigurator has no database for: not predicted"
    return Tier(system, tps.pop(), sum(w.replicas for w in groups), eps.pop())


def layout(stack: StackConfig, base: StackConfig | None = None) -> Layout | str:
    """The stack's workers as one agg or disagg configuration, or why they are not. A variant
    names node groups of its `base`."""
    assert stack.serving is not None
    cluster = base.cluster if base is not None else stack.cluster
    view = stack.model_copy(update={"cluster": cluster})
    s = stack.serving
    roles = [Role.WORKER] if s.topology == Topology.AGGREGATED else [Role.PREFILL, Role.DECODE]
    tiers = []
    for role in roles:
        t = _tier(s.by_role(role), view)
        if isinstance(t, str):
            return t
        tiers.append(t)
    by_group = {g.name: g for g in cluster.node_groups}
    usd = 0.0
    for w in s.workers:
        it = by_group[w.node_group].instance_type
        price = instance_price(it, stack)
        if price is None or it not in INSTANCE_TYPES:
            return Layout(len(tiers) == 2, tuple(tiers), sum(w.gpus for w in s.workers), None)
        usd += w.gpus * price / INSTANCE_TYPES[it].gpus_per_node
    return Layout(len(tiers) == 2, tuple(tiers), sum(w.gpus for w in s.workers), usd)


def kv_cache_mode(kv_cache_dtype: str, declared: str | None) -> str:
    """AIConfigurator's kvcache_quant_mode for the stack's `serving.kvCacheDtype`. vLLM 0.31.0's
    `auto` is the checkpoint's declared KV cache quantization where it declares one, else the
    model's dtype (vllm/utils/torch_utils.py resolve_kv_cache_dtype_string; config/cache.py
    CacheDType: "auto" will use model data type); AIConfigurator 0.12.0 left alone puts every
    FP8 or NVFP4 checkpoint's KV cache in FP8 (aiconfigurator_core sdk/models/helpers.py
    _infer_quant_modes_from_raw_config), so it is always told."""
    if kv_cache_dtype == "fp8":
        return "fp8"
    return "fp8" if declared == "fp8" else "bfloat16"


def _stretch(lay: Layout) -> dict[str, str | None] | None:
    """Per phase, the system whose kernel measurements a tier's system reads at another
    bandwidth (stacks/predict/bandwidth.py), or None when no tier does."""
    p, d = (lay.tiers[0], lay.tiers[-1])
    out = {"prefill": p.system.bandwidth_from, "decode": d.system.bandwidth_from}
    return out if any(out.values()) else None


def estimate_kwargs(model: str, lay: Layout, step: StepShape, kv_mode: str) -> dict[str, Any]:
    """cli_estimate's arguments for `step` on `lay`: one replica at its share of the step's
    concurrency (agg), or the whole prefill/decode configuration (disagg); the KV cache dtype
    `kv_mode` (kv_cache_mode), the experts sharded as the workers shard them (Tier.moe_sizes),
    and the bandwidth stretch where a tier's kernels were measured on another part."""
    common = {"model_path": model, "backend_name": BACKEND, "isl": step.isl,
              "osl": step.osl, "prefix": step.prefix, "kvcache_quant_mode": kv_mode}
    if stretch := _stretch(lay):
        common["stretch"] = stretch
    if not lay.disaggregated:
        (w,) = lay.tiers
        moe_tp, moe_ep = w.moe_sizes
        return {**common, "system_name": w.system.name, "mode": "agg",
                "batch_size": math.ceil(step.concurrency / w.replicas), "tp_size": w.tp,
                "moe_tp_size": moe_tp, "moe_ep_size": moe_ep}
    p, d = lay.tiers
    (p_tp, p_ep), (d_tp, d_ep) = p.moe_sizes, d.moe_sizes
    return {**common, "system_name": p.system.name, "mode": "disagg",
            "decode_system_name": d.system.name if d.system != p.system else None,
            "prefill_tp_size": p.tp, "prefill_moe_tp_size": p_tp, "prefill_moe_ep_size": p_ep,
            "prefill_batch_size": 1, "prefill_num_workers": p.replicas,
            "decode_tp_size": d.tp, "decode_moe_tp_size": d_tp, "decode_moe_ep_size": d_ep,
            "decode_batch_size": math.ceil(step.concurrency / d.replicas),
            "decode_num_workers": d.replicas}
