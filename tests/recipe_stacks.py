"""The B200 recipe stacks and one-change variants of them (test helper)."""

from __future__ import annotations

import copy
from typing import Any

from stacks.loader import PROJECT, Problem, load_stack, parse_config, read_stack_file, stack_file
from stacks.preflight import run_preflight
from stacks.schema import StackConfig

F = f"{PROJECT}:"
BASE = "base-b200"
MODELS = ("axk2", "kexaone", "solar2", "motif3")
KINDS = ("agg", "disagg", "baseline")
RECIPES = [f"{kind}-b200-{model}" for model in MODELS for kind in KINDS]
DELETE = object()


def changed(name: str, edits: dict[str, Any]) -> StackConfig:
    """Shipped stack `name` with dotted-path edits (`serving.workers.0.env`; DELETE removes)."""
    raw = copy.deepcopy(read_stack_file(stack_file(name)))
    for dotted, value in edits.items():
        keys: list[Any] = [int(k) if k.isdigit() else k for k in dotted.split(".")]
        node = raw
        for key in keys[:-1]:
            node = node.setdefault(key, {}) if isinstance(node, dict) else node[key]
        if value is DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = copy.deepcopy(value)
    return parse_config(name, raw)


def problems(stack: StackConfig, base: StackConfig | None = None) -> list[Problem]:
    if base is None and stack.is_attached:
        base = load_stack(stack.cluster.attach_to)
    return run_preflight(stack, base).problems


def problem_fields(stack: StackConfig, base: StackConfig | None = None) -> set[str]:
    return {p.field.removeprefix(F) for p in problems(stack, base)}
