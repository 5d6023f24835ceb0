"""Side-by-side campaign variants must fit the base's CPU nodes: each running variant's frontend
and its busiest load generator Job, at once (runner.md R5; workloads/campaign/cpu_room.py)."""

from __future__ import annotations

import pytest

from stacks.config.loader import all_stack_names, load_stack
from stacks.plan.campaign_cost import base_campaign
from workloads.campaign.cpu_room import cpu_room_problems, slot_cpu


def _campaign(base_name: str = "base-a100"):
    base = load_stack(base_name)
    variants = [load_stack(n) for n in all_stack_names()
                if load_stack(n).cluster.attach_to == "base-a100"]
    return base, base_campaign(base, variants, "full")


def _cpu_group(base, instance_type: str, count: int):
    groups = [g.model_copy(update={"instance_type": instance_type, "count": count})
              if g.name == "cpu" else g for g in base.cluster.node_groups]
    return base.model_copy(update={"cluster": base.cluster.model_copy(
        update={"node_groups": groups})})


def test_base_a100s_cpu_group_holds_the_two_variants_that_overlap():
    base, c = _campaign()
    # agg-a100 beside agg-l40s-fp8: each a 2-CPU frontend and a 6-CPU c64 load generator
    assert [slot_cpu(s.stack, "full", 8, {"cpu"}) for s in c.slots[:1]] == [8]
    assert cpu_room_problems(base, c.slots, "full") == []


def test_a_cpu_group_too_small_for_the_busiest_moment_is_refused_naming_its_count():
    base, c = _campaign()
    small = _cpu_group(base, "m7i.2xlarge", 1)     # 8 vCPU: 7.2 allocatable
    (p,) = cpu_room_problems(small, c.slots, "full")
    i = [g.name for g in base.cluster.node_groups].index("cpu")
    assert p.field == f"dynamo-bench:cluster.nodeGroups[{i}].count"
    assert "agg-a100, agg-l40s-fp8 run side by side and ask 12 CPUs" in p.message
    assert "7.2 allocatable of 1 x m7i.2xlarge" in p.message and "raise" in p.fix
    # two of them hold it
    assert cpu_room_problems(_cpu_group(base, "m7i.2xlarge", 2), c.slots, "full") == []


def test_auto_mode_sizes_its_nodes_to_the_pods():
    base, c = _campaign()
    auto = load_stack("base-a100-auto")
    assert cpu_room_problems(_cpu_group(auto, "m7i.2xlarge", 1), c.slots, "full") == []


@pytest.mark.parametrize("scale, want", [("quick", 6), ("full", 8)])
def test_a_variant_asks_its_frontend_and_its_busiest_load_generator(scale, want):
    stack = load_stack("agg-a100")
    assert slot_cpu(stack, scale, 8, {"cpu"}) == want
    # a frontend on a GPU group is packed with the workers, not on the CPU nodes
    gpu_frontend = stack.model_copy(update={"serving": stack.serving.model_copy(update={
        "frontend": stack.serving.frontend.model_copy(update={"node_group": "p4d"})})})
    assert slot_cpu(gpu_frontend, scale, 8, {"cpu"}) == want - 2
    # every frontend replica is a pod of its own on the CPU nodes
    two = stack.model_copy(update={"serving": stack.serving.model_copy(update={
        "frontend": stack.serving.frontend.model_copy(update={"replicas": 2})})})
    assert slot_cpu(two, scale, 8, {"cpu"}) == want + 2
