"""Disaggregated + native KV offload is a combination Dynamo marks "not yet validated end to end"
(docs.nvidia.com/dynamo/v1.6.2 native-kv-offloading, Support Matrix): pre-flight notes it on the
stack that builds it and on no other (dynamo.md F4)."""

from __future__ import annotations

from stacks.config.loader import load_stack
from stacks.preflight.offload_notes import disagg_native_offload_notes
from stacks.preflight.run import check_stack


def test_disagg_offload_stack_is_noted_with_the_upstream_source() -> None:
    report = check_stack("disagg-a100-kv-offload")
    assert report.ok
    notes = [n for n in report.notes if "not yet validated end to end" in n]
    assert len(notes) == 1
    assert "disagg-a100-kv-offload" in notes[0] and "#11219" in notes[0]
    assert "native-kv-offloading" in notes[0] and "serving.kvOffload" in notes[0]


def test_disagg_without_offload_and_agg_are_not_noted() -> None:
    for name in ("disagg-a100-kv", "agg-a100-kv", "agg-a100"):
        assert disagg_native_offload_notes(load_stack(name)) == [], name


def test_kvbm_offload_before_dynamo_1_6_is_not_this_row() -> None:
    stack = load_stack("disagg-a100-kv-offload")
    assert stack.serving is not None
    kvbm = stack.model_copy(update={"serving": stack.serving.model_copy(
        update={"dynamo_version": "1.5.0"})})
    assert disagg_native_offload_notes(kvbm) == []
    assert disagg_native_offload_notes(stack) != []
