"""Strict types at the edge (issue 30): YAML's `true`, `1`, `'0'` are never converted into a
count, a switch or a number, parser names have a parser name's shape and extraArgs entries are
non-empty strings. Each case is a shipped stack with one value changed, checked through
`python -m stacks check` (exit 2, the field as written in the stack file, what YAML read and the
fix); the fuzzing of the shipped stacks that found them accepted every one of these."""

from __future__ import annotations

import types
import typing
from pathlib import Path

import pytest
import stack_variants as sv
from pydantic import BaseModel
from pydantic.types import Strict
from stack_variants import F, Mutation, edit

from stacks.catalog.models import MODELS
from stacks.config.campaign_config import CampaignDeploy
from stacks.config.loader import STACKS_DIR
from stacks.config.schema import StackConfig
from stacks.config.workload_config import WORKLOAD_NAMES, WorkloadsConfig

W0 = "serving.workers.0"
QWEN = "Qwen/Qwen3-30B-A3B"
WHOLE = "write a whole number such as 4"
SWITCH = "write true or false, unquoted"
NUMBER = "write a number such as 0.25 or 2"
TEXT = "write text; quote it"
PARSER = "write a parser name as vLLM and Dynamo spell them"
ARG = "write a command-line argument that is neither empty nor only spaces"



def architecture(**facts: object) -> Mutation:
    """model.architecture stated in the stack: the catalogue's Qwen3 entry with `facts`."""
    return edit("model.architecture", {**MODELS[QWEN].model_dump(mode="json"), **facts})


# (id, source stack, change, field as written, what the message says, what the fix says)
CASES: list[tuple[str, str, Mutation, str, str, str]] = [
    # --- a count is an integer ---
    ("replicas_true", "agg-a100", edit(f"{W0}.replicas", True),
     "serving.workers[0].replicas", "true is a boolean, not a whole number", WHOLE),
    ("tensor_parallel_decimal", "agg-a100", edit(f"{W0}.tensorParallelSize", 4.0),
     "serving.workers[0].tensorParallelSize", "4.0 is a decimal number, not a whole number",
     WHOLE),
    ("frontend_replicas_quoted", "agg-a100", edit("serving.frontend", {"replicas": "2"}),
     "serving.frontend.replicas", "'2' is a string, not a whole number", WHOLE),
    ("node_group_count_true", "agg-a100-standalone", edit("cluster.nodeGroups.0.count", True),
     "cluster.nodeGroups[0].count", "true is a boolean, not a whole number", WHOLE),
    ("concurrency_true", "agg-a100", edit("workloads", {"concurrencySweep": {
        "concurrencies": [1, True]}}), "workloads.concurrencySweep.concurrencies[1]",
     "true is a boolean, not a whole number", WHOLE),
    ("architecture_layers_true", "agg-a100", architecture(layers=True),
     "model.architecture.layers", "true is a boolean, not a whole number", WHOLE),
    ("architecture_params_nan", "agg-a100", architecture(total_params_b=float("nan")),
     "model.architecture.total_params_b", "nan is not a finite number", "write a finite number"),
    # --- a switch is a boolean ---
    ("kv_events_one", "agg-a100", edit("serving.kvEvents", 1),
     "serving.kvEvents", "1 is an integer, not true or false", SWITCH),
    ("workload_enabled_quoted_zero", "agg-a100", edit("workloads", {"concurrencySweep": {
        "enabled": "0"}}), "workloads.concurrencySweep.enabled",
     "'0' is a string, not true or false", SWITCH),
    ("prefix_caching_zero", "agg-a100", edit("serving.prefixCaching", 0),
     "serving.prefixCaching", "0 is an integer, not true or false", SWITCH),
    ("auto_tool_choice_one", "agg-b200-motif3", edit("serving.parsers.autoToolChoice", 1),
     "serving.parsers.autoToolChoice", "1 is an integer, not true or false", SWITCH),
    # --- a duration (any other number) is a number ---
    ("setup_hours_false", "agg-a100", edit("cost.setupHours", False),
     "cost.setupHours", "false is a boolean, not a number", NUMBER),
    ("duration_true_in_quick", "agg-a100", edit("workloads", {"concurrencySweep": {
        "quick": {"durationS": True}}}), "workloads.concurrencySweep.quick.durationS",
     "true is a boolean, not a number", NUMBER),
    ("request_timeout_quoted", "agg-a100", edit("workloads", {"requestTimeoutS": "600"}),
     "workloads.requestTimeoutS", "'600' is a string, not a number", NUMBER),
    ("gpu_memory_utilization_true", "agg-a100", edit(f"{W0}.gpuMemoryUtilization", True),
     "serving.workers[0].gpuMemoryUtilization", "true is a boolean, not a number", NUMBER),
    # --- a parser name has a parser name's shape (vLLM processor: no Dynamo name list) ---
    *((f"reasoning_{label}", "agg-b200-motif3", edit("serving.parsers.reasoning", value),
       "serving.parsers.reasoning", f"{value!r} breaks the rule", PARSER)
      for label, value in (("1e309", "1e309"), ("home", "${HOME}"), ("minus_one", "-1"),
                           ("empty", ""))),
    ("tool_call_home", "agg-b200-motif3", edit("serving.parsers.toolCall", "${HOME}"),
     "serving.parsers.toolCall", "'${HOME}' breaks the rule", PARSER),
    ("engine_reasoning_empty", "agg-b200-solar2", edit("serving.parsers.engineReasoning", ""),
     "serving.parsers.engineReasoning", "'' breaks the rule", PARSER),
    ("engine_reasoning_number", "agg-b200-axk2", edit("serving.parsers.engineReasoning", -1),
     "serving.parsers.engineReasoning", "-1 is an integer, not text", TEXT),
    # --- extraArgs entries are non-empty strings ---
    ("worker_arg_empty", "agg-b200-kexaone", edit(f"{W0}.extraArgs", ["--max-num-seqs", ""]),
     "serving.workers[0].extraArgs[1]", "'' breaks the rule", ARG),
    ("worker_arg_spaces", "agg-a100", edit(f"{W0}.extraArgs", [" "]),
     "serving.workers[0].extraArgs[0]", "' ' breaks the rule", ARG),
    ("worker_arg_null", "agg-a100", edit(f"{W0}.extraArgs", [None]),
     "serving.workers[0].extraArgs[0]", "null is YAML's empty value, not text", TEXT),
    ("worker_arg_number", "agg-b200-kexaone", edit(f"{W0}.extraArgs", ["--max-num-seqs", 32]),
     "serving.workers[0].extraArgs[1]", "32 is an integer, not text", TEXT),
    ("frontend_arg_empty", "agg-b200-axk2", edit("serving.frontend.extraArgs", [""]),
     "serving.frontend.extraArgs[0]", "'' breaks the rule", ARG),
    ("frontend_arg_boolean", "agg-b200-axk2", edit("serving.frontend.extraArgs", [True]),
     "serving.frontend.extraArgs[0]", "true is a boolean, not text", TEXT),
]


@pytest.fixture(scope="module")
def stacks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sv.copy_shipped(tmp_path_factory.mktemp("stacks"))


@pytest.mark.parametrize(("source", "change", "field", "says", "fix"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_value_of_the_wrong_kind_is_refused_with_the_field_and_the_fix(
        stacks_dir: Path, source: str, change: Mutation, field: str, says: str,
        fix: str) -> None:
    sv.write_stack(stacks_dir, "variant", sv.variant_config(source, change))
    code, out = sv.check(stacks_dir, "variant")
    assert code == 2, out
    assert "Traceback" not in out
    line = f"- {F}{field}: {says}"
    assert line in out, out
    assert f"-> fix: {fix}" in out[out.index(line):], out


@pytest.mark.parametrize(("source", "change"), [
    ("agg-a100", edit("cost.setupHours", 1)),                  # an int for a number
    ("agg-a100", edit("workloads", {"requestTimeoutS": 600})),
    ("agg-b200-motif3", edit("serving.parsers.reasoning", "granite-20b-fc")),
    ("agg-a100", edit(f"{W0}.extraArgs", ["--enforce-eager"])),
    ("agg-a100", architecture()),
], ids=["int_setup_hours", "int_timeout", "dashed_parser_name", "one_flag", "architecture"])
def test_the_right_kind_still_passes(stacks_dir: Path, source: str, change: Mutation) -> None:
    sv.write_stack(stacks_dir, "sibling", sv.variant_config(source, change))
    code, out = sv.check(stacks_dir, "sibling")
    assert code == 0, out


AGG = (STACKS_DIR / "Pulumi.agg-a100.yaml").read_text()


def _spelled(old: str, new: str) -> str:
    assert old in AGG, old
    return AGG.replace(old, new, 1)


@pytest.mark.parametrize(("old", "new", "field", "says", "fix"), [
    ("kvEvents: true", "kvEvents: yes", "serving.kvEvents",
     "'yes' is a boolean to some YAML readers and a string to others", "write true"),
    ("kvEvents: true", "kvEvents: On", "serving.kvEvents", "'On' is a boolean", "write true"),
    ("kvEvents: true", "kvEvents: y", "serving.kvEvents", "'y' is a boolean", "write true"),
    ("kvEvents: true", "kvEvents: off", "serving.kvEvents", "'off' is a boolean", "write false"),
    ("replicas: 4", "replicas: 04", "serving.workers[0].replicas",
     "'04' is a number YAML readers do not all read alike", "write the number in plain"),
    ("budgetUsd: 200", "budgetUsd: 2_00", "cost.budgetUsd",
     "'2_00' is a number YAML readers do not all read alike", "write the number in plain"),
    ("setupHours: 0.25", "setupHours: 1:30", "cost.setupHours",
     "'1:30' is a number YAML readers do not all read alike", "write the number in plain"),
], ids=["yes", "On", "y", "off", "leading_zero", "underscore", "base_60"])
def test_a_value_yaml_readers_read_differently_is_refused_where_it_is_written(
        stacks_dir: Path, old: str, new: str, field: str, says: str, fix: str) -> None:
    """stacks check (PyYAML, YAML 1.1) and pulumi up (the Pulumi CLI's Go reader) must read
    one value: a spelling they could read differently is refused with the one they agree on."""
    (stacks_dir / "Pulumi.variant.yaml").write_text(_spelled(old, new))
    code, out = sv.check(stacks_dir, "variant")
    assert code == 2, out
    line = f"- {F}{field}: {says}"
    assert line in out, out
    assert f"-> fix: {fix}" in out[out.index(line):], out


def test_quoted_words_and_plain_numbers_stay_valid(stacks_dir: Path) -> None:
    text = _spelled("experiment: a100-campaign", 'experiment: "on"')
    (stacks_dir / "Pulumi.sibling.yaml").write_text(text.replace("budgetUsd: 200",
                                                                 "budgetUsd: 250"))
    code, out = sv.check(stacks_dir, "sibling")
    assert code == 0, out


def _scalars(annotation: object, strict: bool = False) -> typing.Iterator[tuple[object, bool]]:
    """Every leaf type of an annotation, with whether a `Strict` marker applies to it."""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        marked = any(isinstance(m, Strict) and m.strict for m in meta)
        yield from _scalars(base, strict or marked)
        return
    args = typing.get_args(annotation)
    if not args:
        yield annotation, strict
        return
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    for arg in args:
        yield from _scalars(arg, strict and union)


def _loose_fields(model: type[BaseModel], seen: set[type]) -> list[str]:
    if model in seen:
        return []
    seen.add(model)
    loose = []
    for name, info in model.model_fields.items():
        marked = any(isinstance(m, Strict) and m.strict for m in info.metadata)
        for leaf, strict in _scalars(info.annotation, marked):
            if isinstance(leaf, type) and issubclass(leaf, BaseModel):
                loose += _loose_fields(leaf, seen)
            elif leaf in (int, float, bool) and not strict:
                loose.append(f"{model.__name__}.{name}")
    return loose


def test_every_count_switch_and_number_of_the_config_is_strict() -> None:
    """A new plain `int`, `float` or `bool` field would take `true` as 1 again: use StrictInt,
    StrictBool or StrictFloat (stacks/config/schema_base.py says why)."""
    workloads = [type(getattr(WorkloadsConfig(), n)) for n in WORKLOAD_NAMES]
    seen: set[type] = set()
    loose = [f for m in (StackConfig, CampaignDeploy, *workloads) for f in _loose_fields(m, seen)]
    assert not loose, loose
    assert len(seen) > 20   # the walk reached the nested models
