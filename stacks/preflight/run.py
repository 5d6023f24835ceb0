"""Pre-flight checks: everything that can be known wrong before a resource or a request exists.

`run_preflight(stack, base, on=..., facts=...)` is pure and is the ONE function both
`python -m stacks check` and the Pulumi program (__main__.py) run, each followed by
`consult_engine(reports)` (the engine's own parsers, stacks.preflight.engine_parse; the campaign
calls both too): it returns every problem
found (each naming the field and the fix), the per-worker memory table, the cost estimate and
notes (the EKS version's support status). `check_stack(name)` loads a stack file (and its base,
for an attached variant) and runs it. The checks themselves live by subject:
stacks.preflight.deploy_checks (what Pulumi knows), stacks.preflight.aws_checks,
stacks.preflight.serving_checks, stacks.preflight.worker_checks and stacks.preflight.pods (GPU
memory, node packing), stacks.preflight.engine_flags, stacks.preflight.k8s_checks,
stacks.preflight.workload_checks, stacks.preflight.recipe_checks,
stacks.preflight.checkpoint_checks, stacks.preflight.auto_mode (what EKS Auto Mode cannot do),
stacks.preflight.kernel_checks (MoE kernels and block-FP8 shards at the target GPU).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from pydantic.alias_generators import to_camel

from stacks.catalog.eks_versions import EKS_VERSIONS, today
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.loader import (
    PROJECT,
    STACKS_DIR,
    P,
    Problem,
    StackError,
    StackFile,
    base_candidates,
    load_stack,
    load_stack_file,
    parse_config,
    stack_file,
)
from stacks.config.schema import ClusterConfig, ComputeMode, StackConfig
from stacks.preflight import engine_parse
from stacks.preflight.auto_mode import auto_mode_notes, check_auto_mode
from stacks.preflight.aws_checks import check_aws
from stacks.preflight.capacity_checks import on_demand_capacity_notes
from stacks.preflight.checkpoint_checks import check_model_cache
from stacks.preflight.deploy_checks import DeployFacts, deploy_problems
from stacks.preflight.efa_image import check_kv_path
from stacks.preflight.engine_flags import check_engine_flags
from stacks.preflight.k8s_checks import check_names
from stacks.preflight.kernel_checks import check_kernels
from stacks.preflight.node_driver import check_node_driver
from stacks.preflight.offload_notes import disagg_native_offload_notes
from stacks.preflight.recipe_checks import check_cluster_rdma, check_recipe
from stacks.preflight.serving_checks import check_serving
from stacks.preflight.trace_checks import check_trace_replay
from stacks.preflight.worker_checks import check_workers
from stacks.preflight.workload_checks import check_workloads, lockstep_notes
from stacks.sizing.estimate import HourlyCost, cluster_hourly_cost, planned_hours
from stacks.sizing.memory import WorkerMemory


@dataclass
class PreflightReport:
    stack: StackConfig
    problems: list[Problem] = field(default_factory=list)
    memory: list[WorkerMemory] = field(default_factory=list)
    hourly: HourlyCost = field(default_factory=HourlyCost)
    planned_hours: float = 0.0
    on: dt.date | None = None
    # Facts worth knowing that are not problems (the EKS version's support status).
    notes: list[str] = field(default_factory=list)
    # The cluster the stack runs on (a variant's base plus its own groups); None when it
    # could not be resolved.
    cluster: ClusterConfig | None = None

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


def run_preflight(stack: StackConfig, base: StackConfig | None = None, *,
                  on: dt.date | None = None,
                  facts: DeployFacts | None = None) -> PreflightReport:
    """Every check `stacks check` and the Pulumi program run, in one place.

    `on`: the estimate date (EKS support status and control-plane rate; default today, UTC).
    `facts`: what Pulumi or the stack file says beyond the typed config
    (stacks.preflight.deploy_checks).
    """
    on = on or today()
    report = PreflightReport(stack=stack, on=on)
    out = report.problems
    out += deploy_problems(stack, base, facts or DeployFacts())
    if stack.is_attached and base is None:
        out.append(Problem(f"{P}cluster.attachTo", f"base stack '{stack.cluster.attach_to}' "
                           "was not given", "load it with check_stack"))
        return report
    if base is not None and not _check_attachment(stack, base, out):
        return report
    cluster = effective_cluster(stack, base)
    report.cluster = cluster
    owner = base or stack
    _check_cluster(stack, cluster, base, out)
    if stack.target == "aws":
        out += check_aws(stack, owner.cluster.region, on=on, owns_cluster=base is None,
                         provider_config=(facts or DeployFacts()).provider_config)
    if stack.serving is None:
        if stack.is_attached or stack.target == "local":
            out.append(Problem(f"{P}serving", "this stack serves nothing", "add serving"))
        else:
            check_model_cache(stack, None, out)  # a base downloads its model
    else:
        check_serving(stack.serving, cluster, out)
        report.memory = check_workers(stack, cluster, out)
        check_engine_flags(stack, out)
        if stack.target == "aws":  # the local engine creates no Kubernetes objects
            check_names(stack, out)
            check_kernels(stack, cluster, out)  # the local engine runs no vLLM kernel
        check_workloads(stack, out)
        check_trace_replay(stack, out)
        report.notes += lockstep_notes(stack)
        report.notes += check_kv_path(stack, out)
        report.notes += disagg_native_offload_notes(stack)
        check_recipe(stack, base, cluster, out)
    check_node_driver(stack, base, out)
    check_auto_mode(stack, base, out)
    if base is None:
        check_cluster_rdma(stack.cluster, out)
    eks = EKS_VERSIONS.get(owner.cluster.eks_version)
    if eks is not None:
        report.notes.append(eks.describe(on))
    report.notes += auto_mode_notes(stack, base)
    if stack.target == "aws":  # the stack's own groups: a variant's extras, a base's all
        report.notes += on_demand_capacity_notes(stack.cluster)
    report.hourly = cluster_hourly_cost(stack, cluster, owner.storage.model_cache_gib, on=on)
    report.planned_hours = planned_hours(stack)
    if stack.target == "aws" and report.planned_cost > stack.cost.budget_usd:
        out.append(Problem(f"{P}cost.budgetUsd", f"estimated ${report.hourly.total:,.2f}/h x "
                           f"{report.planned_hours:.2f} h = ${report.planned_cost:,.0f} exceeds "
                           f"the ceiling ${stack.cost.budget_usd:,.0f}",
                           "raise the budget or plan fewer/shorter workloads"))
    return report


@dataclass(frozen=True)
class EngineVerdict:
    """What consulting the engine's parsers left beside the reports' problems and notes."""

    note: str | None = None      # the one "not consulted" note (None when they were)
    fatal: bool = False          # a parser environment is missing under CI: an error


def consult_engine(reports: list[PreflightReport]) -> EngineVerdict:
    """The engine's own parsers for every report's command lines (stacks.preflight.engine_parse:
    one process per Dynamo release, cached), their refusals and notes added to each report.
    `stacks check`, the Pulumi program and the campaign all call this, so each refuses what the
    image's parsers refuse. Missing parser environments give ONE note for all the reports; under
    CI (CI=true or DYNAMO_BENCH_CI) `fatal` says it is an error."""
    parsed = engine_parse.consult([r.stack for r in reports],
                                  clusters={r.stack.name: r.cluster for r in reports
                                            if r.cluster is not None})
    for r in reports:
        r.problems += parsed.problems.get(r.stack.name, [])
        r.notes += parsed.notes.get(r.stack.name, [])
    if not parsed.skipped:
        return EngineVerdict()
    return EngineVerdict(engine_parse.not_consulted_note(parsed.skipped, parsed.missing),
                         fatal=parsed.skipped == "missing" and engine_parse.in_ci())


_SAID: set[str] = set()


def first_time(note: str) -> bool:
    """True the first time this process says `note`: a campaign runs every variant's program
    in one process (offline renders, then `pulumi up`), and one warning is enough."""
    new = note not in _SAID
    _SAID.add(note)
    return new


def engine_problem(verdict: EngineVerdict) -> Problem:
    """The fatal verdict as a problem (the Pulumi program refuses with it)."""
    return Problem(f"{PROJECT}:serving", f"{verdict.note} (under CI the parsers must be "
                   "consulted)", "run `make parsers` on this machine, or unset CI and "
                   "DYNAMO_BENCH_CI to deploy without them")


def load_base(stack: StackConfig, stacks_dir: Path = STACKS_DIR) -> StackConfig | None:
    """The base stack file of an attached variant; a missing or broken base is a problem of
    the variant's cluster.attachTo (a missing one lists the stacks that can be bases)."""
    if not stack.is_attached:
        return None
    name, where = stack.cluster.attach_to, f"{P}cluster.attachTo"
    assert name is not None
    if not stack_file(name, stacks_dir).exists():
        bases = ", ".join(base_candidates(stacks_dir)) or "none: create a base stack first"
        raise StackError(stack.name, [Problem(where, f"there is no base stack '{name}' "
                                              f"(no file Pulumi.{name}.yaml in {stacks_dir})",
                                              f"attach to one of the bases: {bases}")])
    try:
        return load_stack(name, stacks_dir)
    except StackError as exc:
        raise StackError(stack.name, [Problem(where, f"base stack '{name}' cannot be loaded: "
                                              f"{p}", f"fix it (python -m stacks check {name})")
                                      for p in exc.problems]) from None


def file_facts(file: StackFile) -> DeployFacts:
    """What the stack file says beyond the typed config (the CLI's DeployFacts)."""
    keys = tuple(f"{PROJECT}:{k}" for k in file.config) + tuple(file.provider_config)
    return DeployFacts(hf_token=file.hf_token, provider_config=file.provider_config,
                       config_keys=keys, api_access=file.api_access,
                       campaign=file.campaign, node_group_sizes=file.node_group_sizes)


def check_stack(name: str, stacks_dir: Path = STACKS_DIR, *,
                on: dt.date | None = None) -> PreflightReport:
    """Load `name` (and its base) and run pre-flight; raises StackError on load failure."""
    file = load_stack_file(name, stacks_dir)
    stack = parse_config(name, file.config)
    return run_preflight(stack, load_base(stack, stacks_dir), on=on, facts=file_facts(file))


def require_valid(name: str, stacks_dir: Path = STACKS_DIR) -> PreflightReport:
    """For the Pulumi program and the runner: raise unless the stack passes pre-flight."""
    report = check_stack(name, stacks_dir)
    if not report.ok:
        raise StackError(name, report.problems)
    return report
