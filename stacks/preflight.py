"""Pre-flight checks: everything that can be known wrong before a resource or a request exists.

`run_preflight(stack, base)` is pure: it returns every problem found (each naming the field and
the fix), the per-worker memory table and the cost estimate. `check_stack(name)` loads a stack
file (and its base, for an attached variant) and runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from stacks.catalog import INSTANCE_TYPES
from stacks.estimate import HourlyCost, hourly_cost, planned_hours
from stacks.loader import STACKS_DIR, Problem, StackError, load_stack
from stacks.memory import WorkerMemory, worker_memory
from stacks.schema import (
    ClusterConfig,
    ComputeMode,
    Precision,
    Role,
    RouterMode,
    StackConfig,
    Topology,
    TransferBackend,
)

P = "dynamo-bench:"


@dataclass
class PreflightReport:
    stack: StackConfig
    problems: list[Problem] = field(default_factory=list)
    memory: list[WorkerMemory] = field(default_factory=list)
    hourly: HourlyCost = field(default_factory=HourlyCost)
    planned_hours: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def planned_cost(self) -> float:
        return self.hourly.total * self.planned_hours


def effective_cluster(stack: StackConfig, base: StackConfig | None) -> ClusterConfig:
    """The cluster a stack runs on: its own, or its base's plus the variant's extra groups."""
    if base is None:
        return stack.cluster
    return base.cluster.model_copy(
        update={"node_groups": [*base.cluster.node_groups, *stack.cluster.node_groups],
                "allow_multinode": stack.cluster.allow_multinode or base.cluster.allow_multinode})


def _check_cluster(stack: StackConfig, cluster: ClusterConfig, base: StackConfig | None,
                   out: list[Problem]) -> None:
    for i, g in enumerate(stack.cluster.node_groups):
        if g.instance_type not in INSTANCE_TYPES:
            out.append(Problem(f"{P}cluster.nodeGroups[{i}].instanceType",
                               f"unknown instance type '{g.instance_type}'",
                               f"use one of {', '.join(INSTANCE_TYPES)}"))
    if base is not None:
        names = {g.name for g in base.cluster.node_groups}
        for i, g in enumerate(stack.cluster.node_groups):
            if g.name in names:
                out.append(Problem(f"{P}cluster.nodeGroups[{i}].name",
                                   f"node group '{g.name}' already exists in base "
                                   f"'{base.name}'", "give the extra group another name"))
    elif stack.target == "aws" and cluster.compute_mode == ComputeMode.NODEGROUPS:
        has_cpu = any(g.instance_type in INSTANCE_TYPES and INSTANCE_TYPES[g.instance_type].gpu
                      is None and g.count > 0 for g in cluster.node_groups)
        if not has_cpu:
            out.append(Problem(f"{P}cluster.nodeGroups",
                               "no CPU node group for system pods, monitoring and the load "
                               "generator", "add a group such as m7i.4xlarge x 2"))


def _check_workers(stack: StackConfig, cluster: ClusterConfig, report: PreflightReport) -> None:
    out, serving, model = report.problems, stack.serving, stack.model
    assert serving is not None
    arch = model.arch
    for i, w in enumerate(serving.workers):
        f = f"{P}serving.workers[{i}]"
        group = cluster.group(w.node_group)
        if group is None:
            where = f"base '{stack.cluster.attach_to}'" if stack.is_attached else "this stack"
            known = [g.name for g in cluster.node_groups]
            out.append(Problem(f"{f}.nodeGroup", f"node group '{w.node_group}' does not exist "
                               f"in {where}", f"use one of {known}"))
            continue
        inst = INSTANCE_TYPES.get(group.instance_type)
        if inst is None:
            continue  # reported by the cluster check
        if inst.gpu is None:
            out.append(Problem(f"{f}.nodeGroup", f"node group '{w.node_group}' "
                               f"({inst.name}) has no GPUs", "place workers on a GPU group"))
            continue
        tp = w.tensor_parallel_size
        if arch.attention_heads % tp:
            out.append(Problem(f"{f}.tensorParallelSize", f"TP {tp} does not divide the "
                               f"{arch.attention_heads} attention heads",
                               "use a divisor such as 1, 2, 4 or 8"))
        elif (tp > arch.kv_heads and tp % arch.kv_heads) or (tp < arch.kv_heads
                                                             and arch.kv_heads % tp):
            out.append(Problem(f"{f}.tensorParallelSize", f"TP {tp} and {arch.kv_heads} KV "
                               "heads: one must divide the other", "pick a power of two"))
        if w.node_count > 1 and not cluster.allow_multinode:
            out.append(Problem(f"{f}.nodeCount", "multinode workers are off",
                               "set cluster.allowMultinode: true or nodeCount: 1"))
        if tp > inst.gpus_per_node * w.node_count:
            out.append(Problem(f"{f}.tensorParallelSize", f"TP {tp} does not fit one "
                               f"{inst.name} ({inst.gpus_per_node} GPUs) x nodeCount "
                               f"{w.node_count}", f"use TP <= {inst.gpus_per_node}"))
        if w.max_model_len > arch.max_context:
            out.append(Problem(f"{f}.maxModelLen", f"{w.max_model_len} exceeds the model's "
                               f"context {arch.max_context}", f"use <= {arch.max_context}"))
        if model.precision == Precision.FP8 and not inst.gpu.fp8_tensor_cores \
                and not model.accept_fp8_weight_only_fallback:
            out.append(Problem(f"{P}model.precision", f"FP8 on {inst.gpu.name} (worker {i}, "
                               f"{inst.name}): no FP8 tensor cores, only a weight-only fallback",
                               "set model.acceptFp8WeightOnlyFallback: true to test that path, "
                               "or use an FP8-capable GPU (L40S, H100, B200)"))
        if model.precision == Precision.NVFP4 and not inst.gpu.fp4_tensor_cores:
            out.append(Problem(f"{P}model.precision", f"NVFP4 on {inst.gpu.name} (worker {i}) "
                               "has no FP4 tensor cores", "use a B200 node group"))
        mem = worker_memory(arch=arch, precision=model.precision.value,
                            kv_cache_dtype=serving.kv_cache_dtype, instance=inst,
                            role=w.role.value, replicas=w.replicas, tp=tp,
                            max_model_len=w.max_model_len,
                            gpu_memory_utilization=w.gpu_memory_utilization,
                            overhead_gib=serving.runtime_overhead_gib)
        report.memory.append(mem)
        if not mem.fits:
            out.append(Problem(f"{f}.tensorParallelSize", (
                f"does not fit: weights {mem.weights_gib_per_gpu:.1f} GiB/GPU + overhead "
                f"{mem.overhead_gib:.1f} + KV of one {w.max_model_len}-token sequence "
                f"{mem.full_sequence_kv_gib:.2f} = {mem.needed_gib:.1f} GiB > "
                f"{mem.budget_gib:.1f} GiB ({inst.gpu.name} x {w.gpu_memory_utilization})"),
                "raise TP, lower maxModelLen, or use a larger GPU"))
        if serving.kv_offload.kind != "none":
            host_gib = serving.kv_offload.cpu_gb * w.replicas
            if host_gib > inst.memory_gib * 0.8:
                out.append(Problem(f"{P}serving.kvOffload.cpuGb", f"{host_gib:.0f} GB of CPU "
                                   f"cache for worker {i} exceeds 80 % of {inst.name} memory",
                                   "lower cpuGb"))
        if serving.transfer == TransferBackend.NIXL_LIBFABRIC and inst.efa_interfaces == 0:
            out.append(Problem(f"{P}serving.transfer", f"nixl-libfabric needs EFA; {inst.name} "
                               "has none", "use nixl-ucx or an EFA instance type"))
    _check_packing(stack, cluster, out)


def _check_packing(stack: StackConfig, cluster: ClusterConfig, out: list[Problem]) -> None:
    """Place every replica on whole nodes (largest TP first); report what does not fit."""
    assert stack.serving is not None
    for group in cluster.node_groups:
        inst = INSTANCE_TYPES.get(group.instance_type)
        workers = [w for w in stack.serving.workers if w.node_group == group.name]
        if not workers or inst is None or inst.gpu is None:
            continue
        free = [inst.gpus_per_node] * group.count
        asked = sum(w.gpus for w in workers)
        placed = True
        for w in sorted(workers, key=lambda w: -w.tensor_parallel_size):
            for _ in range(w.replicas):
                need = w.tensor_parallel_size
                if w.node_count > 1:  # a multinode replica takes whole nodes
                    whole = [i for i, f in enumerate(free) if f == inst.gpus_per_node]
                    if len(whole) < w.node_count:
                        placed = False
                        break
                    for i in whole[:w.node_count]:
                        free[i] = 0
                    continue
                slot = next((i for i, f in enumerate(free) if f >= need), None)
                if slot is None:
                    placed = False
                    break
                free[slot] -= need
        if not placed:
            provided = inst.gpus_per_node * group.count
            out.append(Problem(f"{P}serving.workers", f"workers on '{group.name}' ask for "
                               f"{asked} GPUs in TP groups; {group.count} x {inst.name} "
                               f"provide {provided}", "lower replicas/TP or add nodes"))


def _check_topology(stack: StackConfig, out: list[Problem]) -> None:
    s = stack.serving
    assert s is not None
    prefill, decode, agg = s.by_role(Role.PREFILL), s.by_role(Role.DECODE), s.by_role(Role.WORKER)
    if s.topology == Topology.DISAGGREGATED:
        if not prefill:
            out.append(Problem(f"{P}serving.workers", "disaggregated needs a prefill worker",
                               "add a worker with role: prefill"))
        if not decode:
            out.append(Problem(f"{P}serving.workers", "disaggregated needs a decode worker",
                               "add a worker with role: decode"))
        if agg:
            out.append(Problem(f"{P}serving.workers", "disaggregated has aggregated "
                               "(role: worker) workers", "use roles prefill and decode"))
        if s.transfer == TransferBackend.NONE:
            out.append(Problem(f"{P}serving.transfer", "disaggregated needs a KV transfer "
                               "backend", "set transfer: nixl-ucx or nixl-libfabric"))
    else:
        if prefill or decode:
            out.append(Problem(f"{P}serving.workers", "aggregated has prefill/decode workers",
                               "use role: worker, or topology: disaggregated"))
        if s.transfer != TransferBackend.NONE:
            out.append(Problem(f"{P}serving.transfer", "aggregated moves no KV between "
                               "workers", "set transfer: none"))
    if s.router == RouterMode.KV and not s.prefix_caching:
        out.append(Problem(f"{P}serving.prefixCaching", "the KV router needs prefix caching "
                           "(and the workers' KV events) to route on cache hits",
                           "set prefixCaching: true or router: round-robin"))


def _check_workload_lengths(stack: StackConfig, out: list[Problem]) -> None:
    """Every planned request must fit the smallest max_model_len of the workers."""
    assert stack.serving is not None
    limit = min(w.max_model_len for w in stack.serving.workers)
    w = stack.workloads.enabled()
    longest = {
        "concurrencySweep": lambda x: x.isl + x.osl,
        "multiTurn": lambda x: x.turns * (x.isl + x.osl),
        "sequenceDistributions": lambda x: x.isl_max + x.osl_max,
        "prefixCache": lambda x: x.isl + x.osl,
        "traceReplay": lambda x: x.isl + x.osl,
    }
    for name, wl in w.items():
        camel = name.split("_")[0] + "".join(p.title() for p in name.split("_")[1:])
        need = longest[camel](wl)
        if need > limit:
            out.append(Problem(f"{P}workloads.{camel}", f"longest request needs {need} tokens "
                               f"but the smallest worker maxModelLen is {limit}",
                               "shorten the workload or raise maxModelLen"))


def run_preflight(stack: StackConfig, base: StackConfig | None = None) -> PreflightReport:
    report = PreflightReport(stack=stack)
    out = report.problems
    if stack.is_attached and base is None:
        out.append(Problem(f"{P}cluster.attachTo", f"base stack '{stack.cluster.attach_to}' "
                           "was not given", "load it with check_stack"))
        return report
    if base is not None and base.is_attached:
        out.append(Problem(f"{P}cluster.attachTo", f"'{base.name}' is itself attached",
                           "attach to a base stack that owns its cluster"))
    cluster = effective_cluster(stack, base)
    _check_cluster(stack, cluster, base, out)
    if stack.serving is None:
        if stack.is_attached or stack.target == "local":
            out.append(Problem(f"{P}serving", "this stack serves nothing", "add serving"))
    else:
        _check_topology(stack, out)
        _check_workers(stack, cluster, report)
        _check_workload_lengths(stack, out)
    report.hourly = hourly_cost(stack, cluster.node_groups, cluster.compute_mode,
                                (base or stack).storage.model_cache_gib)
    report.planned_hours = planned_hours(stack)
    if stack.target == "aws" and report.planned_cost > stack.cost.budget_usd:
        out.append(Problem(f"{P}cost.budgetUsd", f"estimated ${report.hourly.total:,.2f}/h x "
                           f"{report.planned_hours:.2f} h = ${report.planned_cost:,.0f} exceeds "
                           f"the ceiling ${stack.cost.budget_usd:,.0f}",
                           "raise the budget or plan fewer/shorter workloads"))
    return report


def check_stack(name: str, stacks_dir: Path = STACKS_DIR) -> PreflightReport:
    """Load `name` (and its base) and run pre-flight; raises StackError on load failure."""
    stack = load_stack(name, stacks_dir)
    base = None
    if stack.is_attached:
        try:
            base = load_stack(stack.cluster.attach_to, stacks_dir)
        except StackError as exc:
            raise StackError(name, [Problem(f"{P}cluster.attachTo", f"base stack "
                                            f"'{stack.cluster.attach_to}' cannot be loaded: "
                                            f"{p}", "fix or name another base")
                                    for p in exc.problems]) from None
    return run_preflight(stack, base)


def require_valid(name: str, stacks_dir: Path = STACKS_DIR) -> PreflightReport:
    """For the Pulumi program and the runner: raise unless the stack passes pre-flight."""
    report = check_stack(name, stacks_dir)
    if not report.ok:
        raise StackError(name, report.problems)
    return report
