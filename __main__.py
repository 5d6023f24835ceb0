"""dynamo-bench Pulumi program: one stack = one experiment variant.

Reads the stack's typed config (`dynamo-bench:<key>`), runs pre-flight BEFORE creating anything
(an invalid stack registers no resource and every problem is listed with its fix), then builds
the components (components/program.py) and exports the outputs the runner and variants read.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime.config import is_config_secret

from components.api_access import CONFIG_KEY as API_ACCESS_KEY
from components.program import build, program_problems
from stacks.loader import PROJECT, Problem, StackError, load_stack, parse_config
from stacks.preflight import run_preflight
from stacks.schema import CONFIG_KEYS, StackConfig


def read_config(cfg: pulumi.Config) -> dict[str, Any]:
    """Structured values arrive as JSON text; plain strings (target) stay strings."""
    raw: dict[str, Any] = {}
    for key in CONFIG_KEYS:
        value = cfg.get(key)
        if value is None:
            continue
        try:
            raw[key] = json.loads(value)
        except json.JSONDecodeError:
            raw[key] = value
    return raw


def load_base(stack: StackConfig) -> StackConfig | None:
    """The base stack file of an attached variant (its outputs are read at deploy time)."""
    if not stack.is_attached:
        return None
    try:
        return load_stack(stack.cluster.attach_to)
    except StackError as exc:
        raise StackError(stack.name, [
            Problem(f"{PROJECT}:cluster.attachTo", f"base stack '{stack.cluster.attach_to}' "
                    f"cannot be loaded: {p}", "fix it or attach to another base")
            for p in exc.problems]) from None


def hf_token_state(cfg: pulumi.Config) -> str | None:
    """How the token is set: "secret" (`pulumi config set --secret`), "plain", or None."""
    if cfg.get("hfToken") is None:
        return None
    return "secret" if is_config_secret(cfg.full_key("hfToken")) else "plain"


def main() -> None:
    cfg = pulumi.Config(PROJECT)
    stack = parse_config(pulumi.get_stack(), read_config(cfg))
    base = load_base(stack)
    api_access = cfg.get(API_ACCESS_KEY)
    problems = [*run_preflight(stack, base).problems,
                *program_problems(stack, base, hf_token=hf_token_state(cfg),
                                  api_access=api_access)]
    if problems:
        raise StackError(stack.name, problems)
    token = cfg.require_secret("hfToken") if base is None else None
    for key, value in build(stack, base, token, api_access).items():
        pulumi.export(key, value)


main()
