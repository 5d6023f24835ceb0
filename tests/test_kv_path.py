"""Every shipped disaggregated AWS stack has a KV path that can work, and pre-flight names it;
a stack without one is refused with the field and the fix (stacks/conventions/kv_path.py,
stacks/preflight/efa_image.py). The four seed-001 recipe builds carry no EFA userspace
(dynamo.md F2), so they take the donor path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from graph_stacks import serving_stack_names, variant

from stacks.config.loader import load_stack
from stacks.config.schema import StackConfig, Topology
from stacks.conventions.kv_path import (
    EFA_HOME,
    KvPath,
    kv_path,
    libfabric_home,
    release_line,
    runs_an_efa_build,
)
from stacks.preflight.efa_image import PUBLISHED_EFA_RUNTIMES, check_kv_path
from stacks.preflight.run import check_stack, run_preflight

DONOR = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0-efa"
FIELD = "dynamo-bench:serving.efaUserspaceImage"
RECIPES = {f"disagg-b200-{m}" for m in ("axk2", "kexaone", "solar2", "motif3")}
DOCS = Path(__file__).resolve().parents[1] / "docs" / "b200-recipes.md"


def _disagg_aws() -> list[str]:
    out = []
    for name in serving_stack_names():
        stack = load_stack(name)
        assert stack.serving is not None
        if stack.target == "aws" and stack.serving.topology == Topology.DISAGGREGATED:
            out.append(name)
    return out


DISAGG = _disagg_aws()


def test_the_four_recipe_stacks_are_among_the_shipped_disaggregated_aws_stacks():
    assert set(DISAGG) >= RECIPES


@pytest.mark.parametrize("name", DISAGG)
def test_every_shipped_disaggregated_stack_has_a_kv_path_and_preflight_names_it(name):
    report = check_stack(name)
    assert report.ok, [str(p) for p in report.problems]
    stack = report.stack
    assert stack.serving is not None
    path = kv_path(stack.serving)
    assert path not in (KvPath.NONE, KvPath.MISSING)
    (note,) = [n for n in report.notes if "KV path" in n]
    assert f"KV path {path.value}:" in note
    if name in RECIPES:
        assert path == KvPath.EFA_DONOR and stack.serving.efa_userspace_image == DONOR
        assert DONOR in note and PUBLISHED_EFA_RUNTIMES[DONOR] in note


def _problems(stack: StackConfig) -> list:
    base = load_stack(stack.cluster.attach_to) if stack.cluster.attach_to else None
    return run_preflight(stack, base).problems


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_a_recipe_build_without_a_donor_is_refused_with_the_field_and_the_fix(name):
    stack = variant(name, efaUserspaceImage=None)
    assert stack.serving is not None and kv_path(stack.serving) == KvPath.MISSING
    (problem,) = [p for p in _problems(stack) if p.field == FIELD]
    assert "is not a Dynamo -efa build" in problem.message
    assert f"set serving.efaUserspaceImage: {DONOR}" in problem.fix
    assert [p.field for p in _problems(variant(name))].count(FIELD) == 0   # the sibling


@pytest.mark.parametrize("name, changes, says", [
    ("disagg-l40s-decode", {"efaUserspaceImage": DONOR}, "serves NIXL LIBFABRIC only"),
    ("disagg-a100", {"efaUserspaceImage": DONOR}, "own EFA userspace (/opt/amazon/efa)"),
    ("disagg-b200-solar2",
     {"efaUserspaceImage": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1"},
     "is not a Dynamo -efa runtime"),
    ("disagg-b200-solar2", {"efaUserspaceImage": "nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:"
                            + "0" * 64}, "is not a Dynamo -efa runtime"),
])
def test_a_donor_that_cannot_serve_is_refused(name, changes, says):
    (problem,) = [p for p in _problems(variant(name, **changes)) if p.field == FIELD]
    assert says in problem.message


def test_a_local_rehearsal_is_not_held_to_the_aws_kv_path():
    stack = variant("local-recipe-motif3", efaUserspaceImage=None)
    assert stack.serving is not None and kv_path(stack.serving) == KvPath.MISSING
    out: list = []
    assert check_kv_path(stack, out) == [] and out == []


def test_a_cross_line_donor_is_said_in_the_note():
    (note,) = [n for n in check_stack("disagg-b200-motif3").notes if "KV path" in n]
    assert "a Dynamo 1.4 runtime for a 1.5 image" in note
    (note,) = [n for n in check_stack("disagg-b200-solar2").notes if "KV path" in n]
    assert "runtime for a" not in note


def test_the_rules_of_the_path():
    assert runs_an_efa_build("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1")
    assert runs_an_efa_build("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1-efa@sha256:ab")
    assert not runs_an_efa_build("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-a.x-k2-post.1")
    assert not runs_an_efa_build("nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:" + "0" * 64)
    assert release_line("1.4.1-k-exaone-2.0-750b-post.1") == "1.4"
    a100 = load_stack("disagg-a100").serving
    assert a100 is not None and libfabric_home(a100) == EFA_HOME
    l40s = load_stack("disagg-l40s-decode").serving
    assert l40s is not None and (kv_path(l40s), libfabric_home(l40s)) == (KvPath.UCX_TCP, None)


def test_the_recipe_doc_names_each_disaggregated_recipes_kv_path():
    text = DOCS.read_text()
    for name in sorted(RECIPES):
        stack = load_stack(name)
        assert stack.serving is not None
        row = re.search(rf"^\| `{name}` \|[^\n]*$", text, re.MULTILINE)
        assert row, f"docs/b200-recipes.md has no KV path row for {name}"
        assert f"`{kv_path(stack.serving).value}`" in row[0]
        assert f"`{stack.serving.efa_userspace_image}`" in row[0]
