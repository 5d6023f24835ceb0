"""Cost and wall-time estimates before anything runs (pure).

Scope of an hourly estimate: GPU/CPU node instances (on-demand or override price), the EKS
control-plane fee (at the extended-support rate when the cluster's EKS version is past standard
support on the estimate date: stacks.eks_versions), the Auto Mode management fee when compute
mode is auto, and EFS storage of the model cache prorated per hour. Network transfer is not
included. For a variant attached to a base, nodes are the whole nodes its workers occupy plus
the base's fixed costs (CPU group, EKS fee, EFS) during its window, since variants of one base
run one at a time.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

from stacks.catalog import (
    EFS_STANDARD_USD_PER_GB_MONTH,
    EKS_AUTO_MODE_FEE_FRACTION,
    EKS_CONTROL_PLANE_USD_PER_HOUR,
    HOURS_PER_MONTH,
    INSTANCE_TYPES,
)
from stacks.eks_versions import STANDARD_USD_PER_HOUR, control_plane_usd_per_hour
from stacks.memory import GIB, weights_bytes_per_gpu
from stacks.schema import ComputeMode, NodeGroup, StackConfig
from stacks.workload_config import Scale, restart_count

# AIPerf's fixed cost per invocation (start-up, tokenizer, export), measured ~9-10 s locally.
AIPERF_FIXED_S = 10.0
# Model load of one worker, assumed until the runner measures it: the checkpoint read from EFS
# and copied to the GPUs at an effective 0.5 GiB/s, then vLLM's engine start (torch.compile,
# CUDA graph capture, KV cache allocation), a few minutes for a MoE model.
MODEL_LOAD_GIB_PER_S = 0.5
ENGINE_INIT_S = 240.0
# A cold restart of the local engine's workers (mocker processes): ready in about a second.
LOCAL_RESTART_S = 1.0


def instance_price(instance_type: str, stack: StackConfig) -> float:
    if instance_type in stack.cost.price_overrides:
        return stack.cost.price_overrides[instance_type]
    return INSTANCE_TYPES[instance_type].on_demand_usd_per_hour


@dataclass
class HourlyCost:
    lines: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.lines.values())


def nodes_occupied(stack: StackConfig, group: NodeGroup) -> int:
    """Whole nodes of `group` the stack pays for: all of a group it creates itself (base,
    standalone, or a variant's extra group); of a base's group, the nodes its workers fill."""
    if stack.serving is None or not stack.is_attached or group in stack.cluster.node_groups:
        return group.count
    gpn = INSTANCE_TYPES[group.instance_type].gpus_per_node
    gpus = sum(w.gpus for w in stack.serving.workers if w.node_group == group.name)
    return min(group.count, math.ceil(gpus / gpn)) if gpn else 0


def auto_mode_fee(instance_usd: float) -> float:
    """EKS Auto Mode management fee on top of an instance cost (same period)."""
    return instance_usd * EKS_AUTO_MODE_FEE_FRACTION


def efs_usd_per_hour(storage_gib: float) -> float:
    """EFS Standard storage, prorated from the monthly price to one hour."""
    return storage_gib * EFS_STANDARD_USD_PER_GB_MONTH / HOURS_PER_MONTH


def node_cost_lines(stack: StackConfig, groups: list[NodeGroup],
                    compute_mode: ComputeMode) -> dict[str, float]:
    """Per-hour cost of the nodes of `groups` the stack occupies (+ Auto Mode fee)."""
    lines: dict[str, float] = {}
    for g in groups:
        if g.instance_type not in INSTANCE_TYPES:
            continue
        n = nodes_occupied(stack, g) if INSTANCE_TYPES[g.instance_type].gpu else g.count
        if n == 0:
            continue
        price = instance_price(g.instance_type, stack)
        lines[f"nodes {g.name} ({n} x {g.instance_type})"] = n * price
        if compute_mode == ComputeMode.AUTO:
            lines[f"auto mode fee {g.name}"] = auto_mode_fee(n * price)
    return lines


def eks_fee_line(eks_version: str, on: dt.date | None) -> tuple[str, float]:
    """The control-plane cost line of a cluster on `eks_version` on day `on`.

    Without a date (callers that price a past period and have not passed its date yet) the
    standard rate is used, as before the version lifecycle was dated."""
    if on is None:
        return "EKS control plane", EKS_CONTROL_PLANE_USD_PER_HOUR
    rate = control_plane_usd_per_hour(eks_version, on)
    if rate == STANDARD_USD_PER_HOUR:
        return "EKS control plane", rate
    return f"EKS control plane (EKS {eks_version} in extended support on {on})", rate


def hourly_cost(stack: StackConfig, groups: list[NodeGroup], compute_mode: ComputeMode,
                storage_gib: float, *, on: dt.date | None = None,
                eks_version: str | None = None) -> HourlyCost:
    """`eks_version`: the version of the cluster the stack runs on (its base's, for a
    variant); default the stack's own."""
    cost = HourlyCost(node_cost_lines(stack, groups, compute_mode))
    label, rate = eks_fee_line(eks_version or stack.cluster.eks_version, on)
    cost.lines[label] = rate
    cost.lines["EFS model cache storage"] = efs_usd_per_hour(storage_gib)
    return cost


def estimated_load_seconds(stack: StackConfig) -> float:
    """Checkpoint read at MODEL_LOAD_GIB_PER_S plus the engine start (checkpoint size on disk
    when the catalogue knows it); 0 for a stack that serves nothing."""
    if stack.serving is None:
        return 0.0
    checkpoint = weights_bytes_per_gpu(stack.model.arch, stack.model.precision.value, 1)
    return checkpoint / GIB / MODEL_LOAD_GIB_PER_S + ENGINE_INIT_S


def model_load_seconds(stack: StackConfig) -> float:
    """Assumed time for one worker to load the model and start its engine (workers load in
    parallel, so this is the deployment's load time too); 0 for a stack that serves nothing.

    With serving.startupBudgetMinutes the forecast plans for the whole budget: that is how long
    the startupProbe lets a worker start, and the B200 recipes' first starts (40-120 min for
    K-EXAONE) are mostly autotuning and CUDA-graph capture, which the read estimate misses."""
    if stack.serving is not None and stack.serving.startup_budget_minutes is not None:
        return stack.serving.startup_budget_minutes * 60.0
    return estimated_load_seconds(stack)


def cold_restarts(stack: StackConfig, scale: Scale = "full") -> int:
    """Worker restarts the plan makes before cold-cache steps (each workload's coldRestart
    policy over its cold steps, every repeat; a trace's warm replays never restart)."""
    w, n = stack.workloads, 0
    enabled = w.enabled()
    if "prefix_cache" in enabled:
        pc = w.prefix_cache.at_scale(scale)
        n += restart_count(pc.cold_restart, len(pc.shares) * w.repeats)
    if "trace_replay" in enabled:
        tr = w.trace_replay.at_scale(scale)
        n += restart_count(tr.cold_restart, len(tr.concurrencies) * w.repeats)
    return n


def restart_seconds(stack: StackConfig) -> float:
    """One cold restart: on a cluster the worker pods are deleted and the model is loaded
    again (one model load); the local engine's workers restart in about a second."""
    if stack.serving is None:
        return 0.0
    return model_load_seconds(stack) if stack.target == "aws" else LOCAL_RESTART_S


def cold_restart_seconds(stack: StackConfig, scale: Scale = "full") -> float:
    return cold_restarts(stack, scale) * restart_seconds(stack)


def _count_based_s(requests: int, concurrency: int, osl: float, itl_ms: float) -> float:
    return math.ceil(requests / concurrency) * osl * itl_ms / 1000.0


def workload_steps_seconds(stack: StackConfig, scale: Scale) -> dict[str, float]:
    """Estimated seconds per workload step (name -> seconds) at `scale`."""
    w, itl = stack.workloads, stack.cost.assumed_itl_ms
    steps: dict[str, float] = {}
    enabled = w.enabled()
    if "concurrency_sweep" in enabled:
        sweep = w.concurrency_sweep.at_scale(scale)
        for c in sweep.concurrencies:
            # duration plus the grace period for requests in flight at the end
            steps[f"concurrency_sweep/c{c}"] = sweep.duration_s + sweep.osl * itl / 1000
    if "multi_turn" in enabled:
        mt = w.multi_turn.at_scale(scale)
        steps["multi_turn/main"] = mt.duration_s + mt.turns * mt.osl * itl / 1000
    if "sequence_distributions" in enabled:
        sd = w.sequence_distributions.at_scale(scale)
        for d in sd.distributions:
            steps[f"sequence_distributions/{d}"] = _count_based_s(
                sd.requests, sd.concurrency, (sd.osl_min + sd.osl_max) / 2, itl)
    if "prefix_cache" in enabled:
        pc = w.prefix_cache.at_scale(scale)
        for s in pc.shares:
            steps[f"prefix_cache/share{round(s * 100):03d}"] = _count_based_s(
                pc.requests, pc.concurrency, pc.osl, itl)
    if "trace_replay" in enabled:
        tr = w.trace_replay.at_scale(scale)
        for c in tr.concurrencies:
            steps[f"trace_replay/c{c}"] = _count_based_s(tr.requests, c, tr.osl, itl)
            if tr.warm_pass:  # the same trace again on the warm cache
                steps[f"trace_replay/c{c}-warm"] = steps[f"trace_replay/c{c}"]
    return {k: (v + AIPERF_FIXED_S) * w.repeats for k, v in steps.items()}


def planned_hours(stack: StackConfig, scale: Scale = "full") -> float:
    """Setup, then the workload steps and the cold restarts between them."""
    if stack.serving is None:
        return stack.cost.setup_hours
    load_s = sum(workload_steps_seconds(stack, scale).values())
    return stack.cost.setup_hours + (load_s + cold_restart_seconds(stack, scale)) / 3600.0
