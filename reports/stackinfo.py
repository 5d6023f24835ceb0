"""What the reports need to know about the stack a run measured: GPUs, topology, hourly cost,
the model, its recipe role and how its speculative decoding was configured.

The stack config is taken from the run manifest (what actually ran), falling back to the stack
file of the same name; an attached variant's base is read from its stack file. For a local run
the hourly cost is what the same layout would cost on AWS from the price catalogue: an
estimate, labelled so everywhere.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from reports.runs import RunError, RunRecord
from stacks.catalog.service_prices import recorded_prices
from stacks.config.loader import StackError, load_stack, parse_config
from stacks.config.schema import ComputeMode, StackConfig
from stacks.preflight.offload_notes import UPSTREAM_MATRIX, disagg_native_offload_notes
from stacks.preflight.run import effective_cluster
from stacks.sizing.estimate import HourlyCost, cluster_hourly_cost, instance_price

# `dynamo-bench:tags.extra.recipe` marks a stack's place in a recipe comparison: the baseline
# of its model (same checkpoint, minimum TP, round-robin) or an optimized recipe stack.
RECIPE_TAG = "recipe"
RECIPE_ROLES = ("baseline", "optimized")

# A local run rehearses the pipeline on Dynamo's mocker: its timings are the mocker's model.
REHEARSAL = ("REHEARSAL on the local mocker: timings are the mocker's, not a prediction of "
             "GPU performance")
REHEARSAL_ROW = "rehearsal on the local mocker, not a GPU measurement"
# A simulated run (`workloads run --target sim`, manifest target_info.kind "sim") served
# nothing: DynoSim replayed every step in virtual time; its label (target_info.timings.label)
# names the simulator and its timing source.
SIMULATED_ROW = "SIMULATED by DynoSim, not a measurement"


EXPERIMENTAL = ("EXPERIMENTAL: disaggregated with vLLM's native KV offload, which Dynamo marks "
                f"not yet validated end to end (ai-dynamo/dynamo#11219; {UPSTREAM_MATRIX})")


@dataclass(frozen=True)
class StackInfo:
    name: str
    target: str
    topology: str
    router: str
    gpus: int
    gpu_types: str
    workers: str
    hourly: HourlyCost
    cost_basis: str
    model: str = ""
    recipe: str = ""               # baseline | optimized | "" (not part of a recipe comparison)
    speculative: str = "none"      # how the run's speculative acceptance is to be read
    # What the measured cost of an aws run needs, resolved like the estimate (an attached
    # variant runs on its base's cluster and storage; cost.priceOverrides apply).
    auto_mode: bool = False
    efs_gib: float = 0.0
    prices: dict[str, float] = field(default_factory=dict)
    overrides: dict[str, float] = field(default_factory=dict)
    root_gib: dict[str, float] = field(default_factory=dict)   # by node group
    nat_gateways: int = 1                                       # 0 on an existing VPC
    eks_version: str = ""                # of the cluster the run used (the base's for a variant)
    error_rate_threshold: float = 0.01   # workloads.errorRateThreshold of the run
    # how upstream qualifies the configuration (stacks/preflight/offload_notes.py: disagg with
    # vLLM's native KV offload is "not yet validated end to end"), "" when it does not
    caveat: str = ""
    # a simulated run's label ("SIMULATED (DynoSim (dynamo.replay, ai-dynamo 1.6.1), timings
    # from ...)"), "" for a run that served
    simulated: str = ""

    @property
    def rehearsal(self) -> bool:
        return self.target == "local" and not self.simulated

    @property
    def label(self) -> str:
        if self.simulated:
            return (f"{self.name} (SIMULATED: {self.topology}, {self.router}, {self.gpus} "
                    "GPUs in DynoSim, nothing served)")
        if self.rehearsal:
            return (f"{self.name} (REHEARSAL: {self.topology}, {self.router}, {self.gpus} "
                    "imitated GPUs on the local mocker)")
        return f"{self.name} ({self.topology}, {self.router}, {self.gpus} GPU)"


def _config(record: RunRecord) -> StackConfig:
    if not record.config:
        return load_stack(record.stack)
    try:
        return parse_config(record.stack, {k: v for k, v in record.config.items()
                                           if k != "name"})
    except StackError as exc:
        # Never fall back to today's stack file: it may not describe what ran.
        raise RunError(f"run {record.run_id} of '{record.stack}': the stack config in its "
                       f"manifest does not validate ({exc}); rebuild the report with the "
                       "dynamo-bench version that made the run") from None


def recipe_role(stack: StackConfig) -> str:
    role = stack.tags.extra.get(RECIPE_TAG, "")
    if role and role not in RECIPE_ROLES:
        raise RunError(f"stack '{stack.name}': tags.extra.{RECIPE_TAG} is '{role}'; use one of "
                       f"{', '.join(RECIPE_ROLES)} (or remove it)")
    return role


def speculative_label(stack: StackConfig) -> str:
    """Real or synthetic acceptance, from the stack's speculative settings."""
    spec = stack.serving.speculative if stack.serving else None
    if spec is None:
        return "none"
    what = f"{spec.method.value} x{spec.num_tokens}"
    if spec.acceptance == "synthetic":
        label = (f"synthetic: forced acceptance length {spec.synthetic_acceptance_length:g} "
                 f"({what}), not real acceptance")
    else:
        label = f"real ({what})"
    if stack.target == "local":
        label += "; configured only: the local mocker does not speculate"
    return label


def run_date(record: RunRecord) -> dt.date | None:
    """The UTC day the run started (the EKS control-plane rate depends on it), if recorded."""
    if not record.started_at:
        return None
    try:
        when = dt.datetime.fromisoformat(str(record.started_at).replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when.astimezone(dt.UTC) if when.tzinfo else when).date()


def simulated_label(extra: dict) -> str:
    """A simulated run's label from its manifest (target_info.timings.label), "" for a run
    that served."""
    info = extra.get("target_info") or {}
    if info.get("kind") != "sim":
        return ""
    return str((info.get("timings") or {}).get("label") or "SIMULATED (DynoSim)")


def stack_info(record: RunRecord) -> StackInfo:
    stack = _config(record)
    simulated = simulated_label(record.extra)
    base = load_stack(stack.cluster.attach_to) \
        if stack.cluster.attach_to is not None else None  # is_attached
    cluster = effective_cluster(stack, base)
    serving = stack.serving
    groups = {g.name: g.instance_type for g in cluster.node_groups}
    workers = serving.workers if serving else []
    gpu_types = sorted({groups.get(w.node_group, "?") for w in workers})
    recorded = recorded_prices(record.extra)
    hourly = cluster_hourly_cost(stack, cluster, (base or stack).storage.model_cache_gib,
                                 recorded, on=run_date(record))
    basis = ("estimate: AWS on-demand catalogue price of the layout DynoSim simulated"
             if simulated else
             "estimate: AWS on-demand catalogue price of the layout the local engine imitates"
             if stack.target == "local" else
             "estimate: catalogue price x run period (no measured node-hours in the run record)")
    return StackInfo(
        name=stack.name, target=stack.target,
        topology=serving.topology.value if serving else "none",
        router=serving.router.value if serving else "none",
        gpus=sum(w.gpus for w in workers), gpu_types=", ".join(gpu_types),
        workers=", ".join(f"{w.replicas}x{w.role.value} TP{w.tensor_parallel_size}"
                          for w in workers),
        hourly=hourly, cost_basis=basis, model=stack.model.id, recipe=recipe_role(stack),
        speculative=speculative_label(stack),
        auto_mode=cluster.compute_mode == ComputeMode.AUTO,
        efs_gib=float((base or stack).storage.model_cache_gib),
        prices={g.instance_type: price for g in cluster.node_groups
                if (price := instance_price(g.instance_type, stack, recorded)) is not None},
        overrides=dict(stack.cost.price_overrides),
        root_gib={g.name: float(g.disk_gib) for g in cluster.node_groups},
        nat_gateways=0 if cluster.vpc.id else 1, eks_version=cluster.eks_version,
        error_rate_threshold=stack.workloads.error_rate_threshold,
        caveat=EXPERIMENTAL if disagg_native_offload_notes(stack) else "", simulated=simulated)
