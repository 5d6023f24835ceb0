"""What the reports need to know about the stack a run measured: GPUs, topology, hourly cost,
the model, its recipe role and how its speculative decoding was configured.

The stack config is taken from the run manifest (what actually ran), falling back to the stack
file of the same name; an attached variant's base is read from its stack file. For a local run
the hourly cost is what the same layout would cost on AWS from the price catalogue: an
estimate, labelled so everywhere.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from reports.records.runs import RunError, RunRecord
from stacks.catalog.service_prices import recorded_prices
from stacks.config.loader import StackError, load_stack, parse_config
from stacks.config.schema import ComputeMode, StackConfig
from stacks.preflight.offload_notes import UPSTREAM_MATRIX, disagg_native_offload_notes
from stacks.preflight.run import effective_cluster
from stacks.sizing.estimate import HourlyCost, cluster_hourly_cost, instance_price
from workloads.targets.mocker_timings import TimingWords
from workloads.targets.mocker_timings import words as mocker_words

# `dynamo-bench:tags.extra.recipe` marks a stack's place in a recipe comparison: the baseline
# of its model (same checkpoint, minimum TP, round-robin) or an optimized recipe stack.
RECIPE_TAG = "recipe"
RECIPE_ROLES = ("baseline", "optimized")

# A local run rehearses the pipeline on Dynamo's mocker; which timings the mocker ran on, and
# what they are, is said in timing_words' words only.
REHEARSAL = "REHEARSAL on the local mocker"
REHEARSAL_ROW = "rehearsal on the local mocker, not a GPU measurement"
# A run replayed by DynoSim (`workloads run --target sim`): no engine process, no request.
SIMULATION = "SIMULATION by DynoSim"
SIMULATION_ROW = "simulation by DynoSim, not a GPU measurement"
MEASURED = TimingWords("MEASURED", "measured on the cluster's GPUs", "MEASURED")


def timing_words(manifest_extra: dict[str, Any], target: str) -> TimingWords:
    """What a run's figures stand on, in the one wording every part of a report uses:
    MEASURED on a cluster; on the local engine, or replayed by DynoSim (`--target sim`, for a
    stack of any target), the words of the timings it ran on, as its last attempt recorded
    them (workloads/targets/mocker_timings.py words)."""
    attempts = manifest_extra.get("attempts") or []
    if target != "local" and not simulated(manifest_extra):
        return MEASURED
    for attempt in reversed(attempts):
        timings = (attempt.get("target") or {}).get("timings")
        if timings:
            return mocker_words(timings)
    return mocker_words((manifest_extra.get("target_info") or {}).get("timings"))


def simulated(manifest_extra: dict[str, Any]) -> bool:
    """Was the run replayed by DynoSim (`workloads run --target sim`)? Its record says so in
    target_info and in each attempt's target."""
    return (manifest_extra.get("target_info") or {}).get("kind") == "sim" or any(
        (a.get("target") or {}).get("kind") == "sim"
        for a in manifest_extra.get("attempts") or [])


def runs_timing(by_run: dict[str, TimingWords]) -> TimingWords:
    """One stack's words over its runs: theirs when all ran on the same timings, else each
    run's, named (a stack's runs never silently share one label)."""
    distinct = list(dict.fromkeys(by_run.values()))
    if len(distinct) == 1:
        return distinct[0]
    each = "; ".join(f"run {run}: {w.label}" for run, w in by_run.items())
    return TimingWords(each, "its runs ran on different timings: "
                       + "; ".join(f"run {run}: {w.meaning}" for run, w in by_run.items()),
                       "mixed timings, see the Stacks table")


def rehearsal_timings(infos: dict[str, StackInfo], stacks: Iterable[str] | None = None,
                      named: bool = True) -> str:
    """The rehearsal stacks among `stacks` (default all) grouped by the short words of their
    timings, for titles: `local-agg, local-disagg: timings from AIConfigurator 0.12.0
    a100_sxm` (`named=False`: the words only); "" when none is a rehearsal."""
    groups: dict[str, list[str]] = {}
    for s in (infos if stacks is None else stacks):
        if s in infos and infos[s].rehearsal:
            groups.setdefault(infos[s].timing.short, []).append(s)
    return "; ".join(f"{', '.join(names)}: {short}" if named else short
                     for short, names in groups.items())


def unmeasured_word(infos: dict[str, StackInfo], stacks: Iterable[str] | None = None) -> str:
    """The title word for the figures of `stacks` (default all) that no cluster measured:
    REHEARSAL (the local mocker), SIMULATION (DynoSim) or both; "" when all were measured."""
    kinds = {"SIMULATION" if infos[s].simulated else "REHEARSAL"
             for s in (infos if stacks is None else stacks) if s in infos and infos[s].rehearsal}
    return " / ".join(sorted(kinds, reverse=True))


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
    # what its figures stand on (timing_words of its runs); None: said from the target alone
    timings: TimingWords | None = None
    # its runs were replayed by DynoSim (`--target sim`), whatever the stack's target
    simulated: bool = False
    # (role, instance type) of each worker kind: a decode tier on another GPU shows here
    tiers: tuple[tuple[str, str], ...] = ()

    @property
    def rehearsal(self) -> bool:
        """No cluster measured its figures: the local mocker rehearsed them, or DynoSim
        simulated them."""
        return self.target == "local" or self.simulated

    @property
    def unmeasured(self) -> str:
        """What its figures are instead of a measurement, "" when a cluster measured them."""
        if self.simulated:
            return SIMULATION
        return REHEARSAL if self.target == "local" else ""

    @property
    def row_kind(self) -> str:
        if self.simulated:
            return SIMULATION_ROW
        return REHEARSAL_ROW if self.target == "local" else ""

    @property
    def timing(self) -> TimingWords:
        if self.timings is not None:
            return self.timings
        return timing_words({}, self.target)

    @property
    def label(self) -> str:
        if self.simulated:
            return (f"{self.name} (SIMULATION: {self.topology}, {self.router}, {self.gpus} "
                    "GPUs replayed by DynoSim)")
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


def stack_info(record: RunRecord) -> StackInfo:
    stack = _config(record)
    replayed = simulated(record.extra)
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
             if replayed else
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
        caveat=EXPERIMENTAL if disagg_native_offload_notes(stack) else "",
        timings=timing_words(record.extra, stack.target),
        simulated=replayed,
        tiers=tuple((w.role.value, groups.get(w.node_group, "?")) for w in workers))
