"""Shipped stacks and their graphs, for the graph tests (test helper)."""

from __future__ import annotations

import json
from typing import Any

from components.graph import build_graph_deployment
from stacks.config.loader import (
    all_stack_names,
    load_stack,
    parse_config,
    read_stack_file,
    stack_file,
)
from stacks.config.schema import ClusterConfig, StackConfig, TransferBackend
from stacks.preflight.run import check_stack, effective_cluster

NAMESPACE = "dynamo"


def serving_stack_names() -> list[str]:
    return [n for n in all_stack_names() if load_stack(n).serving is not None]


def stack_and_cluster(name: str) -> tuple[StackConfig, ClusterConfig]:
    """The stack as pre-flight sees it (base resolved) and the cluster its workers run on."""
    report = check_stack(name)
    assert report.ok, [str(p) for p in report.problems]
    stack = report.stack
    base = load_stack(stack.cluster.attach_to) if stack.is_attached else None
    return stack, effective_cluster(stack, base)


def efa_for(stack: StackConfig) -> bool:
    """The shipped EFA stacks run on EFA-capable node groups (p4d, g6e.12xlarge)."""
    assert stack.serving is not None
    return stack.serving.transfer == TransferBackend.NIXL_LIBFABRIC


def graph_of(name: str) -> dict[str, Any]:
    stack, cluster = stack_and_cluster(name)
    return build_graph_deployment(stack, namespace=NAMESPACE, efa=efa_for(stack), cluster=cluster)


def variant(name: str, **serving_changes: Any) -> StackConfig:
    """A shipped stack with serving keys changed (camelCase, as in a stack file), validated."""
    raw = read_stack_file(stack_file(name))
    raw["serving"] = {**raw["serving"], **serving_changes}
    return parse_config(name, raw)


def components(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in graph["spec"]["components"]}


def main(comp: dict[str, Any]) -> dict[str, Any]:
    containers = comp["podTemplate"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["main"]
    return containers[0]


def flag(args: list[str], name: str) -> str | None:
    """The value after `name` in an argument list (None when absent)."""
    return args[args.index(name) + 1] if name in args else None


def json_flag(args: list[str], name: str) -> dict[str, Any] | None:
    value = flag(args, name)
    return None if value is None else json.loads(value)


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}
