"""Whether the base's CPU nodes hold what side-by-side variants put there at once (pure;
runner.md R5).

Variants on disjoint GPU groups run at the same time (stacks/plan/schedule.py). Each puts its
frontend on the CPU group (unless its frontend sits on a GPU group: packed with the workers by
pre-flight) and, during a step, one AIPerf load generator Job that requests the CPU its
concurrency needs (workloads/targets/aws/k8s_jobs.loadgen_cpu, at most half of the smallest CPU
node). Every CPU node is in the workers' zone (components/node_specs.pinned_zone), so the
group's nodes together are the room (summed, as if a pod could span nodes: a 4-CPU Job that fits
no single node's remainder passes here; pre-flight's per-node packing, stacks/preflight/pods.py,
covers the frontends alone). Every frontend replica counts. A Job that cannot be scheduled ends
its variant's run after the start limit, so a campaign whose busiest moment asks more CPU than
the group's allocatable share is refused before anything is created. Counted at the largest
concurrency of each variant (its busiest step), as if the busiest steps of running variants met.
Only the frontends and load generators are counted: the project sets no CPU requests on the
monitoring (components/monitoring_specs.py) and the Dynamo platform chart's values set none;
what the charts' own defaults and the system daemons request is not read here, so the check is a
floor. Auto Mode sizes its nodes to the pods: nothing to check.
"""

from __future__ import annotations

from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.errors import Problem
from stacks.config.schema import ComputeMode, StackConfig
from stacks.config.stack_file import PROJECT
from stacks.config.workload_config import Scale
from stacks.plan.schedule import Slot
from stacks.preflight.pods import ALLOCATABLE_SHARE
from stacks.sizing.estimate import is_cpu_group
from workloads.steps import plan as steps_plan
from workloads.targets.aws.k8s_jobs import loadgen_cpu, max_loadgen_cpu


def slot_cpu(stack: StackConfig, scale: Scale, max_cpu: int, cpu_groups: set[str]) -> int:
    """The CPU requests a running variant keeps on the CPU group at its busiest step."""
    serving = stack.serving
    assert serving is not None   # a campaign's variants serve
    fe = serving.frontend
    frontend = fe.cpu * fe.replicas if (fe.node_group is None
                                        or fe.node_group in cpu_groups) else 0
    busiest = max((s.concurrency for s in steps_plan(stack, scale)), default=1)
    return frontend + loadgen_cpu(busiest, max_cpu)


def cpu_room_problems(base: StackConfig, slots: list[Slot], scale: Scale) -> list[Problem]:
    if base.cluster.compute_mode == ComputeMode.AUTO:
        return []
    groups = [(i, g) for i, g in enumerate(base.cluster.node_groups) if is_cpu_group(g)]
    if not groups:
        return []
    room = sum(ALLOCATABLE_SHARE * INSTANCE_TYPES[g.instance_type].vcpus * g.count
               for _, g in groups)
    max_cpu = max_loadgen_cpu([g.instance_type for _, g in groups])
    names = {g.name for _, g in groups}
    need = {s.name: slot_cpu(s.stack, scale, max_cpu, names) for s in slots}
    worst: tuple[int, list[str]] = (0, [])
    for s in slots:   # the busiest moment starts with some slot
        at = [o.name for o in slots if o.start_s <= s.start_s < o.end_s]
        if sum(need[n] for n in at) > worst[0]:
            worst = (sum(need[n] for n in at), at)
    total, running = worst
    if total <= room:
        return []
    i, g = groups[0]
    who = (f"{', '.join(running)} run side by side and ask" if len(running) > 1
           else f"{running[0]} asks")
    return [Problem(f"{PROJECT}:cluster.nodeGroups[{i}].count",
                    f"{who} {total} CPUs of the CPU nodes at their busiest (frontend + load "
                    "generator: " + ", ".join(f"{n} {need[n]}" for n in running)
                    + f"), above the {room:.1f} allocatable of "
                    + " + ".join(f"{g.count} x {g.instance_type}" for _, g in groups),
                    "raise the CPU group's count or instance type, or run fewer variants "
                    "side by side (`--only`, or a campaign per GPU group)")]
