"""Read stack files and Pulumi config into a validated StackConfig (the edge of the system).

Every validation failure becomes a `Problem` naming the config field (as the user writes it in
the stack file) and the fix, so `stacks check` can list all of them at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from stacks.schema import CONFIG_KEYS, StackConfig

PROJECT = "dynamo-bench"
# Prefix of a stack-config field path in a Problem (`dynamo-bench:serving.workers[0]...`).
P = f"{PROJECT}:"
STACKS_DIR = Path(__file__).resolve().parent
# Config keys that are not part of the schema but legitimately live in a stack file.
SECRET_KEYS = ("hfToken",)
# Keys about who deploys, not about the experiment: set with `pulumi config set` in the same
# file, read by the Pulumi program, never part of the stack's typed config.
DEPLOYER_KEYS = (*SECRET_KEYS, "apiAccessCidrs")


@dataclass(frozen=True)
class Problem:
    field: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        fix = f" -> fix: {self.fix}" if self.fix else ""
        return f"{self.field}: {self.message}{fix}"


class StackError(Exception):
    """A stack that must not be built or run; carries every problem found."""

    def __init__(self, stack: str, problems: list[Problem]):
        self.stack = stack
        self.problems = problems
        listing = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"stack '{stack}' has {len(problems)} problem(s):\n{listing}")


def stack_file(name: str, stacks_dir: Path = STACKS_DIR) -> Path:
    return stacks_dir / f"Pulumi.{name}.yaml"


def all_stack_names(stacks_dir: Path = STACKS_DIR) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir.glob("Pulumi.*.yaml"))


def _field_path(loc: tuple[Any, ...]) -> str:
    """('serving', 'workers', 0, 'tensorParallelSize') -> dynamo-bench:serving.workers[0]...."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not out:
            out = f"{P}{part}"
        else:
            out += f".{part}"
    return out or PROJECT


def _fix_for(err: dict[str, Any]) -> str:
    kind = err["type"]
    if kind == "value_error":
        return ""  # the schema's own validators state the fix in their message
    if kind == "extra_forbidden":
        return "remove it or check its spelling against the schema (stacks/schema.py)"
    if kind == "missing":
        return "add it"
    if kind in ("literal_error", "enum"):
        return f"use one of the allowed values ({err.get('ctx', {}).get('expected', '')})"
    if kind.startswith(("greater", "less", "too_short", "too_long")):
        return "bring the value into the allowed range"
    if kind.endswith(("_type", "_parsing")):
        return "write a value of the expected type"
    if kind == "string_pattern_mismatch":
        return f"match the pattern {err.get('ctx', {}).get('pattern', '')}"
    return "correct the value"


def problems_from_validation(exc: ValidationError) -> list[Problem]:
    problems = []
    for err in exc.errors():
        # model_validator errors carry the message; strip pydantic's "Value error, " prefix.
        msg = err["msg"].removeprefix("Value error, ")
        loc = tuple(p for p in err["loc"] if p not in ("function-after",))
        problems.append(Problem(_field_path(loc), msg, _fix_for(err)))
    return problems


def parse_config(name: str, raw: dict[str, Any]) -> StackConfig:
    """Validate raw `{key: value}` config (keys without the project prefix)."""
    data = {k: v for k, v in raw.items() if v is not None}
    try:
        return StackConfig.model_validate({"name": name, **data})
    except ValidationError as exc:
        raise StackError(name, problems_from_validation(exc)) from None


def read_stack_file(path: Path) -> dict[str, Any]:
    """The project's config keys from a Pulumi stack file (prefix stripped)."""
    name = path.name[len("Pulumi."):-len(".yaml")]
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise StackError(name, [Problem(str(path), f"not valid YAML: {exc}",
                                        "fix the YAML syntax")]) from None
    config = (doc.get("config") if isinstance(doc, dict) else doc) or {}
    if not isinstance(config, dict):
        raise StackError(name, [Problem(f"{path.name}: config", "no `config:` mapping",
                                        f"put the {PROJECT}:<key> entries under `config:`")])
    raw: dict[str, Any] = {}
    problems = []
    for key, value in config.items():
        ns, _, short = str(key).partition(":")
        if ns != PROJECT:
            if ns.lower().replace("_", "-") == PROJECT:
                problems.append(Problem(str(key), f"namespace '{ns}' is not the project's",
                                        f"write {PROJECT}:{short}"))
            continue  # other namespaces (aws:region, kubernetes:...) belong to providers
        if short in DEPLOYER_KEYS:
            continue
        if short not in CONFIG_KEYS:
            allowed = ", ".join(f"{PROJECT}:{k}" for k in CONFIG_KEYS)
            problems.append(Problem(key, "unknown config key", f"use one of {allowed}"))
            continue
        raw[short] = value
    if problems:
        raise StackError(name, problems)
    return raw


def load_stack(name: str, stacks_dir: Path = STACKS_DIR) -> StackConfig:
    path = stack_file(name, stacks_dir)
    if not path.exists():
        known = ", ".join(all_stack_names(stacks_dir)) or "none"
        raise StackError(name, [Problem("stack", f"no stack file {path.name} in {stacks_dir}",
                                        f"create it or use one of: {known}")])
    return parse_config(name, read_stack_file(path))
