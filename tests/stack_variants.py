"""Stack variants for pre-flight tests: shipped stacks with one change, written to a temporary
stacks dir and checked through the CLI (typer's CliRunner)."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.catalog.eks_versions import CATALOGUE_DATE
from stacks.config.loader import PROJECT, STACKS_DIR

Mutation = Callable[[dict[str, Any]], None]
F = f"{PROJECT}:"


def _walk(config: dict[str, Any], dotted: str) -> tuple[Any, str | int]:
    """The container of `dotted` (a.b.0.c) and the last key; list indexes are digits."""
    keys: list[str | int] = [int(k) if k.isdigit() else k for k in dotted.split(".")]
    node: Any = config
    for key in keys[:-1]:
        node = node[key]
    return node, keys[-1]


def edit(dotted: str, value: Any) -> Mutation:
    def mutate(config: dict[str, Any]) -> None:
        node, key = _walk(config, dotted)
        node[key] = copy.deepcopy(value)
    return mutate


def drop(dotted: str) -> Mutation:
    def mutate(config: dict[str, Any]) -> None:
        node, key = _walk(config, dotted)
        del node[key]
    return mutate


def rename(dotted: str, new_key: str) -> Mutation:
    def mutate(config: dict[str, Any]) -> None:
        node, key = _walk(config, dotted)
        node[new_key] = node.pop(key)
    return mutate


def append(dotted: str, value: Any) -> Mutation:
    def mutate(config: dict[str, Any]) -> None:
        node, key = _walk(config, dotted)
        node[key].append(copy.deepcopy(value))
    return mutate


def both(*mutations: Mutation) -> Mutation:
    def mutate(config: dict[str, Any]) -> None:
        for m in mutations:
            m(config)
    return mutate


def read_config(stacks_dir: Path, name: str) -> dict[str, Any]:
    """A stack file's config with the project prefix stripped from its keys."""
    doc = yaml.safe_load((stacks_dir / f"Pulumi.{name}.yaml").read_text())
    return {k.removeprefix(F): v for k, v in doc["config"].items()}


def write_stack(stacks_dir: Path, name: str, config: dict[str, Any]) -> None:
    # a key that already holds a namespace (`ns:key`) is written as it is
    doc = {"config": {(k if ":" in k else F + k): v for k, v in config.items()}}
    (stacks_dir / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))


def variant_config(source: str, mutate: Mutation) -> dict[str, Any]:
    config = read_config(STACKS_DIR, source)
    mutate(config)
    return config


def copy_shipped(stacks_dir: Path) -> Path:
    for path in STACKS_DIR.glob("Pulumi.*.yaml"):
        shutil.copy(path, stacks_dir / path.name)
    return stacks_dir


def check(stacks_dir: Path, *names: str, as_of: str = CATALOGUE_DATE.isoformat()
          ) -> tuple[int, str]:
    """`python -m stacks check` on a date pinned to the EKS catalogue's (EKS 1.35, the shipped
    stacks' version, is in standard support then), so no test changes with the calendar."""
    result = CliRunner().invoke(app, ["check", *names, "--stacks-dir", str(stacks_dir),
                                      "--as-of", as_of])
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exception
    # rich wraps long lines: compare on single-spaced text
    return result.exit_code, " ".join(result.output.split())
