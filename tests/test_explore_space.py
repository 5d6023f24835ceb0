"""The explore's space (stacks/explore/space.py, screen.py): what a base's node groups can hold,
built as the shipped variants are, through the real pre-flight."""

from __future__ import annotations

from collections import Counter

import pytest

from stacks.config.loader import load_stack
from stacks.explore import space as sp
from stacks.explore.screen import build_space, screen


@pytest.fixture(scope="module")
def base():
    return load_stack("base-a100")


@pytest.fixture(scope="module")
def space(base):
    return build_space(base)


def _find(space, label):
    (c,) = [c for c in space.candidates if c.label == label]
    return c


def test_base_a100_space_is_finite_and_says_its_size(space):
    """16 A100 (2 x p4d) + 4 L40S (1 x g6e): BF16 at TP 2/4/8 on p4d and 2/4 on g6e, FP8 at
    TP 1/2/4 on g6e only; aggregated on one group, disaggregated within a group or prefill on
    one and decode on the other; x 2 routers x 2 offloads."""
    assert space.size == 764
    layouts = Counter((c.topology, tuple(t.group for t in c.tiers), c.precision)
                      for c in space.candidates if c.router == "kv" and c.offload == "cpu")
    assert layouts[("aggregated", ("p4d",), "bf16")] == 8 + 4 + 2
    assert layouts[("aggregated", ("g6e",), "bf16")] == 2 + 1
    assert layouts[("aggregated", ("g6e",), "fp8")] == 4 + 2 + 1
    assert layouts[("disaggregated", ("p4d", "p4d"), "bf16")] == 71
    assert layouts[("disaggregated", ("p4d", "g6e"), "bf16")] == 14 * 3
    assert layouts[("disaggregated", ("g6e", "p4d"), "bf16")] == 3 * 14
    assert not [c for c in space.candidates if c.precision == "fp8"
                and any(t.group == "p4d" for t in c.tiers)]
    assert all(c.gpus <= 20 for c in space.candidates)


def test_fp8_where_the_gpu_has_no_fp8_tensor_cores_is_left_out_with_why(space):
    (why,) = [e for e in space.excluded if e.startswith("fp8 on A100")]
    assert "no FP8 tensor cores" in why and "weight-only" in why


def test_the_tp_screen_lists_what_preflights_memory_fit_refuses(space):
    refused = {(g, p, tp): why for g, p, tp, why in space.tp_refused}
    assert set(refused) == {("p4d", "bf16", 1), ("g6e", "bf16", 1)}
    (why,) = refused["p4d", "bf16", 1]
    assert why.startswith("dynamo-bench:serving.workers[0].tensorParallelSize: does not fit")


def test_candidates_are_built_as_the_shipped_variants_are(base, space):
    """The candidate a person wrote by hand as agg-a100, disagg-a100 and disagg-l40s-decode
    has the same serving block (router, KV events, transfer, workers), model and cost."""
    for shipped, label in (("agg-a100", "agg p4d tp4x4 bf16 rr"),
                           ("disagg-a100-kv", "disagg p4d tp4x2 / p4d tp4x2 bf16 kv"),
                           ("disagg-l40s-decode", "disagg p4d tp4x2 / g6e tp4x1 bf16 rr")):
        mine, theirs = _find(space, label).stack, load_stack(shipped)
        drop = {"gpu_memory_utilization", "kv_events"}
        assert [w.model_dump(exclude=drop) for w in mine.serving.workers] == \
            [w.model_dump(exclude=drop) for w in theirs.serving.workers]
        assert mine.serving.transfer == theirs.serving.transfer
        assert mine.serving.router == theirs.serving.router
        assert mine.model == theirs.model
        assert mine.cluster.attach_to == "base-a100"
    assert _find(space, "agg p4d tp4x4 bf16 rr offload-cpu").stack.serving.kv_offload.cpu_gb == \
        load_stack("disagg-a100-kv-offload").serving.kv_offload.cpu_gb


def test_names_are_recognisable_and_unique(space):
    names = [c.name for c in space.candidates]
    assert len(set(names)) == len(names)
    assert all(n.startswith("explore-base-a100-") and len(n) == len("explore-base-a100-") + 6
               for n in names)


def test_screen_lists_every_refused_candidate_with_its_rule(base, space):
    s = screen(space, base)
    assert len(s.accepted) + len(s.refused) == space.size
    assert s.refused, "some offload candidates ask more host memory than a g6e.12xlarge has"
    for r in s.refused:
        assert all(p.field.startswith("dynamo-bench:") and p.message for p in r.problems)
    assert {p.field for r in s.refused for p in r.problems} == \
        {"dynamo-bench:serving.kvOffload.cpuGb"}
    assert all(r.candidate.offload == "cpu" for r in s.refused)


def test_transfer_follows_what_the_gpus_allow():
    from stacks.catalog.instances import INSTANCE_TYPES as it
    assert sp.transfer_for([it["p4d.24xlarge"]]) == "nixl-libfabric"
    assert sp.transfer_for([it["p4d.24xlarge"], it["g6e.12xlarge"]]) == "nixl-ucx"
