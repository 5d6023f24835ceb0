"""Cost and wall-time estimates before anything runs (pure).

Scope of an hourly estimate: GPU/CPU node instances (on-demand or override price) and their
gp3 root volumes, the EKS control-plane fee (at the extended-support rate when the cluster's
EKS version is past standard support on the estimate date: stacks.catalog.eks_versions), the Auto
Mode management fee when compute mode is auto, EFS storage of the model cache, and the NAT gateway
with its public IPv4 address (unless the cluster uses an existing VPC), each prorated per hour.
Network transfer (and NAT data processing) is not included; the scope line says so. For a
variant attached to a base, nodes are the whole nodes its workers occupy plus the base's fixed
costs (CPU group, EKS fee, EFS, NAT) during its window, since variants of one base run one at
a time: `HourlyCost.shared` names those lines. A local stack's "AWS-equivalent" estimate prices
the layout its mockers imitate, plus the CPU group AWS would need (ASSUMED_CPU_GROUP) when its
cluster names none. Prices used are listed (`HourlyCost.prices`) so reports can say which are
unverified; an instance type nobody prices goes to `HourlyCost.unknown` instead of being
dropped.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sized
from dataclasses import dataclass, field

from stacks.catalog.eks_versions import STANDARD_USD_PER_HOUR, control_plane_usd_per_hour
from stacks.catalog.instances import (
    EFS_STANDARD_USD_PER_GB_MONTH,
    EKS_AUTO_MODE_FEE_FRACTION,
    EKS_CONTROL_PLANE_USD_PER_HOUR,
    HOURS_PER_MONTH,
    INSTANCE_TYPES,
)
from stacks.catalog.service_prices import (
    AUTO_MODE_FEE,
    EBS_GP3,
    EFS_STANDARD,
    EKS_CONTROL_PLANE,
    NAT_GATEWAY,
    PUBLIC_IPV4,
    gp3_usd_per_hour,
    nat_usd_per_hour,
    unverified_note,
)
from stacks.catalog.trace_files import TraceError, window_rows
from stacks.config.schema import ClusterConfig, ComputeMode, NodeGroup, StackConfig
from stacks.config.workload_config import Scale, TraceReplay, restart_count
from stacks.sizing.memory import GIB, weights_bytes_per_gpu

# AIPerf's fixed cost per invocation (start-up, tokenizer, export), measured ~9-10 s locally.
AIPERF_FIXED_S = 10.0
# A sweep step's warm-up, in request latencies: its ramp (about one, workloads/stagger.py) and
# the warm-up requests themselves, which AIPerf drains before profiling (workloads/step_warmup.py).
WARMUP_REQUESTS = 2
# Model load of one worker, assumed until the runner measures it: the checkpoint read from EFS
# and copied to the GPUs at an effective 0.5 GiB/s, then vLLM's engine start (torch.compile,
# CUDA graph capture, KV cache allocation), a few minutes for a MoE model.
MODEL_LOAD_GIB_PER_S = 0.5
ENGINE_INIT_S = 240.0
# A cold restart of the local engine's workers (mocker processes): ready in about a second.
LOCAL_RESTART_S = 1.0
# A repeat load of a configuration whose compile and autotune caches are already on the model
# volume (stacks/conventions/worker_identity.py): the checkpoint is read again and CUDA graphs are
# captured again, torch.compile and FlashInfer autotuning come from the cache. An assumption
# (nothing here measures a GPU start); the forecast shows it apart from first loads.
WARM_ENGINE_INIT_S = 90.0


def instance_price(instance_type: str, stack: StackConfig,
                   recorded: Mapping[str, float] | None = None) -> float | None:
    """The stack's override, else the price recorded with the run, else the catalogue's; None
    when nobody prices the type (a report then says the figure is unknown)."""
    if instance_type in stack.cost.price_overrides:
        return stack.cost.price_overrides[instance_type]
    if recorded and instance_type in recorded:
        return recorded[instance_type]
    it = INSTANCE_TYPES.get(instance_type)
    return it.on_demand_usd_per_hour if it else None


class CostLines:
    """What an hourly estimate and a measured period cost both keep (HourlyCost,
    reports.accounting.node_hours.PeriodCost), and the totals made from it."""

    lines: dict[str, float]
    prices: set[str]
    shared: set[str]
    excluded: list[str]
    unknown: Sized

    @property
    def total(self) -> float:
        return sum(self.lines.values())

    @property
    def complete(self) -> bool:
        return not self.unknown

    @property
    def shared_total(self) -> float:
        return sum(v for k, v in self.lines.items() if k in self.shared)


@dataclass
class HourlyCost(CostLines):
    lines: dict[str, float] = field(default_factory=dict)
    # Price keys the lines used (instance types, stacks.catalog.service_prices keys) and the stack's
    # overrides: what `unverified_note` checks.
    prices: set[str] = field(default_factory=set)
    overrides: dict[str, float] = field(default_factory=dict)
    # What has no price at all: the figure is then a lower bound, and reports say unknown.
    unknown: list[str] = field(default_factory=list)
    # What the figure leaves out, for the scope line.
    excluded: list[str] = field(default_factory=list)
    # Lines that are the cluster's fixed costs (shared by a base's variants, which run one at
    # a time): EKS, EFS, NAT, the CPU group; the rest are the GPU nodes a stack occupies.
    shared: set[str] = field(default_factory=set)

    def unverified_note(self) -> str:
        return unverified_note(self.prices, self.overrides)


# What AWS needs beside the GPU nodes for system pods, monitoring and the load generator (the
# shipped bases' CPU group): the local "AWS-equivalent" estimate adds it when a local stack's
# cluster block names only the GPU hardware its mockers imitate.
ASSUMED_CPU_GROUP = NodeGroup(name="cpu", instance_type="m7i.4xlarge", count=2)


def is_cpu_group(group: NodeGroup) -> bool:
    it = INSTANCE_TYPES.get(group.instance_type)
    return it is not None and it.gpu is None


def nodes_occupied(stack: StackConfig, group: NodeGroup) -> int:
    """Whole nodes of `group` the stack pays for: all of a group it creates itself (base,
    standalone, or a variant's extra group); of a base's group, the nodes its workers fill
    (all of them when the catalogue does not know the type's GPUs per node)."""
    if stack.serving is None or not stack.is_attached or group in stack.cluster.node_groups:
        return group.count
    if group.instance_type not in INSTANCE_TYPES:
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


def add_node_costs(cost: HourlyCost, stack: StackConfig, groups: list[NodeGroup],
                   compute_mode: ComputeMode, recorded: Mapping[str, float] | None = None,
                   note: str = "") -> None:
    """Per-hour cost of the nodes of `groups` the stack occupies, their gp3 root volumes
    (launch template / NodeClass ephemeralStorage of diskGib) and the Auto Mode fee."""
    for g in groups:
        n = nodes_occupied(stack, g) if not is_cpu_group(g) else g.count
        if n == 0:
            continue
        what = f"nodes {g.name} ({n} x {g.instance_type}{note})"
        price = instance_price(g.instance_type, stack, recorded)
        if price is None:
            cost.unknown.append(f"{what}: no price (not in the catalogue, no override, none "
                                "recorded)")
        else:
            cost.lines[what] = n * price
            cost.prices.add(g.instance_type)
            if compute_mode == ComputeMode.AUTO:
                cost.lines[f"auto mode fee {g.name}"] = auto_mode_fee(n * price)
                cost.prices.add(AUTO_MODE_FEE.key)
        cost.lines[f"root volumes {g.name} ({n} x {g.disk_gib} GiB gp3)"] = \
            n * gp3_usd_per_hour(g.disk_gib)
        cost.prices.add(EBS_GP3.key)
        if is_cpu_group(g):
            cost.shared |= {k for k in cost.lines if k.startswith(
                (f"nodes {g.name} (", f"auto mode fee {g.name}", f"root volumes {g.name} ("))}


def node_cost_lines(stack: StackConfig, groups: list[NodeGroup],
                    compute_mode: ComputeMode) -> dict[str, float]:
    """Per-hour cost of the nodes of `groups` the stack occupies (+ root volumes, fees)."""
    cost = HourlyCost()
    add_node_costs(cost, stack, groups, compute_mode)
    return cost.lines


def cluster_hourly_cost(stack: StackConfig, cluster: ClusterConfig, storage_gib: float,
                        recorded: Mapping[str, float] | None = None,
                        on: dt.date | None = None) -> HourlyCost:
    """`hourly_cost` of the cluster the stack runs on (its base's, for a variant: its EKS
    version, VPC and node groups), on day `on` (EKS support status)."""
    return hourly_cost(stack, cluster.node_groups, cluster.compute_mode, storage_gib, on=on,
                       eks_version=cluster.eks_version, existing_vpc=cluster.vpc.id is not None,
                       recorded=recorded)


NAT_LINE = "NAT gateway + its public IPv4 address"
EFS_LINE = "EFS model cache storage"


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
                eks_version: str | None = None, existing_vpc: bool = False,
                recorded: Mapping[str, float] | None = None) -> HourlyCost:
    """Nodes, their root volumes and fees, EKS control plane, EFS, the NAT gateway and its
    public IPv4 address (unless the cluster uses an existing VPC); network transfer excluded.
    `eks_version`: the version of the cluster the stack runs on (its base's, for a variant);
    default the stack's own. `recorded`: prices the run record carries, used for types the
    stack does not override."""
    cost = HourlyCost(overrides=dict(stack.cost.price_overrides))
    add_node_costs(cost, stack, groups, compute_mode, recorded)
    if stack.target == "local" and not any(is_cpu_group(g) for g in groups):
        add_node_costs(cost, stack, [ASSUMED_CPU_GROUP], compute_mode, recorded,
                       note=", assumed: the CPU group an AWS cluster needs")
    label, rate = eks_fee_line(eks_version or stack.cluster.eks_version, on)
    cost.lines[label] = rate
    cost.prices.add(EKS_CONTROL_PLANE.key)
    cost.shared.add(label)
    add_storage_and_network(cost, storage_gib, 0 if existing_vpc else 1)
    if compute_mode == ComputeMode.AUTO:
        cost.excluded.append("nodes Auto Mode's built-in system / general-purpose NodePools "
                             "launch for pods outside the stack's pools")
    return cost


def add_storage_and_network(cost: CostLines, efs_gib: float, nat_gateways: int,
                            hours: float = 1.0) -> None:
    """The EFS model cache and the NAT gateway(s) with their public IPv4 addresses over
    `hours`, as shared lines; without a NAT (an existing VPC's) the scope says so."""
    cost.lines[EFS_LINE] = efs_usd_per_hour(efs_gib) * hours
    cost.prices.add(EFS_STANDARD.key)
    cost.shared.add(EFS_LINE)
    if nat_gateways:
        cost.lines[NAT_LINE] = nat_usd_per_hour(nat_gateways) * hours
        cost.prices |= {NAT_GATEWAY.key, PUBLIC_IPV4.key}
        cost.shared.add(NAT_LINE)
    else:
        cost.excluded.append("NAT gateway: the cluster uses an existing VPC (cluster.vpc.id), "
                             "whose NAT is not this stack's")
    cost.excluded.append("network transfer and NAT data processing")


def estimated_load_seconds(stack: StackConfig) -> float:
    """Checkpoint read at MODEL_LOAD_GIB_PER_S plus the engine start (checkpoint size on disk
    when the catalogue knows it); 0 for a stack that serves nothing."""
    if stack.serving is None:
        return 0.0
    return checkpoint_read_seconds(stack) + ENGINE_INIT_S


def model_load_seconds(stack: StackConfig) -> float:
    """Assumed time for one worker to load the model and start its engine (workers load in
    parallel, so this is the deployment's load time too); 0 for a stack that serves nothing.

    With serving.startupBudgetMinutes the forecast plans for the whole budget: that is how long
    the startupProbe lets a worker start, and the B200 recipes' first starts (40-120 min for
    K-EXAONE) are mostly autotuning and CUDA-graph capture, which the read estimate misses."""
    if stack.serving is not None and stack.serving.startup_budget_minutes is not None:
        return stack.serving.startup_budget_minutes * 60.0
    return estimated_load_seconds(stack)


def checkpoint_read_seconds(stack: StackConfig) -> float:
    if stack.serving is None:
        return 0.0
    return weights_bytes_per_gpu(stack.model.arch, stack.model.precision.value, 1) / GIB \
        / MODEL_LOAD_GIB_PER_S


def repeat_load_seconds(stack: StackConfig) -> float:
    """Assumed load of a configuration loaded before in the campaign (caches warm): the read
    plus WARM_ENGINE_INIT_S, never more than a first load."""
    if stack.serving is None:
        return 0.0
    return min(model_load_seconds(stack), checkpoint_read_seconds(stack) + WARM_ENGINE_INIT_S)


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


def replay_seconds(tr: TraceReplay, cap: int, itl_ms: float) -> float:
    """A replayed trace window: its arrivals' span at the speed-up, or longer when the cap on
    requests in flight holds them back, plus the last request's decode."""
    try:
        rows = window_rows(tr)
    except TraceError:
        return 0.0   # pre-flight reports the trace's own problem
    if not rows:
        return 0.0
    span_s = (rows[-1]["timestamp"] - rows[0]["timestamp"]) / 1000.0 / tr.speed_up
    mean_osl = sum(r["output_length"] for r in rows) / len(rows)
    return max(span_s, _count_based_s(len(rows), cap, mean_osl, itl_ms)) + \
        mean_osl * itl_ms / 1000.0


def workload_steps_seconds(stack: StackConfig, scale: Scale,
                           repeats: int | None = None) -> dict[str, float]:
    """Estimated seconds of every workload step at `scale`, by the step id the runner gives it
    (`workload/name`, `/rN` appended when a workload repeats). The one estimator: `stacks plan`,
    the campaign forecast, `workloads plan` and the runner's progress and hung-AIPerf limits
    all read it, so they agree on every step's name and duration."""
    w, itl = stack.workloads, stack.cost.assumed_itl_ms
    steps: dict[str, float] = {}
    enabled = w.enabled()
    if "concurrency_sweep" in enabled:
        sweep = w.concurrency_sweep.at_scale(scale)
        request_s = sweep.osl * itl / 1000
        for c in sweep.concurrencies:
            # the runner's warm-up first (one request per slot, opened over the step's ramp of
            # about one request latency and drained before profiling starts: workloads/
            # step_warmup.py, workloads/stagger.py), then the duration, then the requests still
            # in flight at its end
            steps[f"concurrency_sweep/c{c}"] = WARMUP_REQUESTS * request_s + sweep.duration_s \
                + request_s
    if "multi_turn" in enabled:
        mt = w.multi_turn.at_scale(scale)
        steps[f"multi_turn/conv{mt.conversations}"] = \
            mt.duration_s + mt.turns * mt.osl * itl / 1000
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
            steps[f"trace_replay/c{c}"] = replay_seconds(tr, c, itl) if tr.replays_trace else \
                _count_based_s(tr.requests, c, tr.osl, itl)
            if tr.warm_pass:  # the same trace again on the warm cache
                steps[f"trace_replay/c{c}-warm"] = steps[f"trace_replay/c{c}"]
    n = w.repeats if repeats is None else repeats
    return {f"{k}/r{r}" if n > 1 else k: v + AIPERF_FIXED_S
            for r in range(1, n + 1) for k, v in steps.items()}


def planned_hours(stack: StackConfig, scale: Scale = "full") -> float:
    """Setup, then the workload steps and the cold restarts between them."""
    if stack.serving is None:
        return stack.cost.setup_hours
    load_s = sum(workload_steps_seconds(stack, scale).values())
    return stack.cost.setup_hours + (load_s + cold_restart_seconds(stack, scale)) / 3600.0
