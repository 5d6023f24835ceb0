"""Pre-flight checks: everything that can be known wrong before a resource or a request exists.

`run_preflight(stack, base)` is pure: it returns every problem found (each naming the field and
the fix), the per-worker memory table and the cost estimate. `check_stack(name)` loads a stack
file (and its base, for an attached variant) and runs it. The checks of the workers themselves
(memory, TP, GPUs, placement) live in `stacks.worker_checks`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic.alias_generators import to_camel

from stacks.catalog import INSTANCE_TYPES
from stacks.estimate import HourlyCost, hourly_cost, planned_hours
from stacks.loader import STACKS_DIR, P, Problem, StackError, load_stack
from stacks.memory import WorkerMemory
from stacks.node_images import check_node_driver
from stacks.recipe_checks import check_cluster_rdma, check_recipe
from stacks.schema import (
    ClusterConfig,
    ComputeMode,
    Role,
    RouterMode,
    ServingConfig,
    StackConfig,
    Topology,
    TransferBackend,
)
from stacks.worker_checks import check_workers
from stacks.workload_config import WORKLOAD_NAMES, Workload


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


# Cluster settings a variant may state itself; everything else belongs to its base.
_VARIANT_CLUSTER_FIELDS = {"attach_to", "node_groups", "allow_multinode"}


def _check_attachment(stack: StackConfig, base: StackConfig, out: list[Problem]) -> bool:
    """A variant owns only its serving deployment (and extra node groups); the base the rest.

    False when `base` owns no cluster, so checking the variant against it would be noise.
    """
    where = f"{P}cluster.attachTo"
    if stack.target == "local":
        out.append(Problem(where, "a local stack runs on the local engine, not on a cluster",
                           "remove cluster.attachTo or set target: aws"))
    if base.is_attached:
        out.append(Problem(where, f"'{base.name}' is itself attached to "
                           f"'{base.cluster.attach_to}'",
                           "attach to a base stack that owns its cluster"))
        return False
    if base.target != "aws":
        out.append(Problem(where, f"'{base.name}' is a local stack and owns no cluster",
                           "attach to an aws base stack"))
        return False
    if not base.is_base:
        out.append(Problem(where, f"'{base.name}' serves a model itself and would compete for "
                           "its GPUs", "attach to a base stack (one without serving)"))
    for name in sorted(stack.cluster.model_fields_set - _VARIANT_CLUSTER_FIELDS):
        out.append(Problem(f"{P}cluster.{to_camel(name)}", f"set on a variant of "
                           f"'{base.name}', whose cluster it is", "remove it (change the base)"))
    for key in ("storage", "monitoring"):
        if key in stack.model_fields_set:
            out.append(Problem(f"{P}{key}", f"set on a variant of '{base.name}', which owns "
                               f"the {key}", "remove it (change the base)"))
    return True


def _check_cluster(stack: StackConfig, cluster: ClusterConfig, base: StackConfig | None,
                   out: list[Problem]) -> None:
    own = {g.name for g in stack.cluster.node_groups}
    for i, g in enumerate(stack.cluster.node_groups):
        if g.instance_type not in INSTANCE_TYPES:
            out.append(Problem(f"{P}cluster.nodeGroups[{i}].instanceType",
                               f"unknown instance type '{g.instance_type}'",
                               f"use one of {', '.join(INSTANCE_TYPES)}"))
    for key in stack.cost.price_overrides:
        if key not in INSTANCE_TYPES:
            out.append(Problem(f"{P}cost.priceOverrides.{key}", f"unknown instance type "
                               f"'{key}' (its price would never be used)",
                               f"use one of {', '.join(INSTANCE_TYPES)}"))
    if base is not None:
        for i, g in enumerate(stack.cluster.node_groups):
            if g.name in {b.name for b in base.cluster.node_groups}:
                out.append(Problem(f"{P}cluster.nodeGroups[{i}].name",
                                   f"node group '{g.name}' already exists in base "
                                   f"'{base.name}'", "give the extra group another name"))
        for g in cluster.node_groups:
            if g.name not in own and g.instance_type not in INSTANCE_TYPES:
                out.append(Problem(f"{P}cluster.attachTo", f"base '{base.name}' node group "
                                   f"'{g.name}' has unknown instance type '{g.instance_type}'",
                                   f"fix the base (python -m stacks check {base.name})"))
    elif stack.target == "aws" and cluster.compute_mode == ComputeMode.NODEGROUPS:
        has_cpu = any(g.instance_type in INSTANCE_TYPES and INSTANCE_TYPES[g.instance_type].gpu
                      is None and g.count > 0 for g in cluster.node_groups)
        if not has_cpu:
            out.append(Problem(f"{P}cluster.nodeGroups",
                               "no CPU node group for system pods, monitoring and the load "
                               "generator", "add a group such as m7i.4xlarge x 2"))


def _check_topology(s: ServingConfig, out: list[Problem]) -> None:
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


def _check_image(s: ServingConfig, out: list[Problem]) -> None:
    """A version tag on the runtime (and frontend) image must be the pinned Dynamo version."""
    for field_name, image in (("image", s.image), ("frontend.image", s.frontend.image)):
        if image is None or "@sha256:" in image:
            continue
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        version = re.match(r"\d+\.\d+\.\d+", tag)
        if version and version.group() != s.dynamo_version:
            out.append(Problem(f"{P}serving.{field_name}", f"image tag {tag} is not the pinned "
                               f"dynamoVersion {s.dynamo_version}",
                               "use the image of that version, or change dynamoVersion"))


# The longest context (tokens) one request of a workload needs, and the field that sets it.
_LONGEST_REQUEST = {
    "concurrency_sweep": ("isl", lambda x: x.isl + x.osl),
    "multi_turn": ("turns", lambda x: x.turns * (x.isl + x.osl)),  # history grows per turn
    "sequence_distributions": ("islMax", lambda x: x.isl_max + x.osl_max),
    "prefix_cache": ("isl", lambda x: x.isl + x.osl),
    "trace_replay": ("isl", lambda x: x.isl + x.osl),
}
assert set(_LONGEST_REQUEST) == set(WORKLOAD_NAMES)


def _check_workload_lengths(stack: StackConfig, out: list[Problem]) -> None:
    """Every planned request, at full and quick scale, must fit the smallest maxModelLen."""
    assert stack.serving is not None
    limit = min(w.max_model_len for w in stack.serving.workers)
    for name, wl in stack.workloads.enabled().items():
        field_name, longest = _LONGEST_REQUEST[name]
        for scale, sub in (("full", ""), ("quick", ".quick")):
            scaled: Workload = wl.at_scale(scale)
            need = longest(scaled)
            if need > limit:
                out.append(Problem(f"{P}workloads.{to_camel(name)}{sub}.{field_name}",
                                   f"longest request ({scale} scale) needs {need} tokens but the "
                                   f"smallest worker maxModelLen is {limit}",
                                   "shorten the workload or raise maxModelLen"))
                break


def run_preflight(stack: StackConfig, base: StackConfig | None = None) -> PreflightReport:
    report = PreflightReport(stack=stack)
    out = report.problems
    if stack.is_attached and base is None:
        out.append(Problem(f"{P}cluster.attachTo", f"base stack '{stack.cluster.attach_to}' "
                           "was not given", "load it with check_stack"))
        return report
    if base is not None and not _check_attachment(stack, base, out):
        return report
    cluster = effective_cluster(stack, base)
    _check_cluster(stack, cluster, base, out)
    if stack.serving is None:
        if stack.is_attached or stack.target == "local":
            out.append(Problem(f"{P}serving", "this stack serves nothing", "add serving"))
    else:
        _check_topology(stack.serving, out)
        _check_image(stack.serving, out)
        report.memory = check_workers(stack, cluster, out)
        _check_workload_lengths(stack, out)
        check_recipe(stack, base, cluster, out)
    check_node_driver(stack, base, out)
    if base is None:
        check_cluster_rdma(stack.cluster, out)
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
