"""Pre-flight's core checks called in-process on a shipped stack with some fields changed: the
helpers of tests/test_mutation_preflight*.py (`make mutate`: group `preflight`)."""

from __future__ import annotations

from stack_variants import edit, variant_config

from stacks.catalog.eks_versions import CATALOGUE_DATE
from stacks.catalog.instances import INSTANCE_TYPES
from stacks.config.errors import Problem
from stacks.config.loader import load_stack, parse_config
from stacks.config.schema import ClusterConfig
from stacks.preflight.run import (
    run_preflight,
)
from stacks.preflight.serving_checks import check_serving
from stacks.preflight.worker_checks import check_workers

TYPES = ", ".join(INSTANCE_TYPES)


def stack_with(source: str, name: str = "variant", **changes):
    config = variant_config(source, lambda c: None)
    for dotted, value in changes.items():
        edit(dotted.replace("__", "."), value)(config)
    return parse_config(name, config)


def problems_of(source: str, base: str | None = None, **changes) -> list[Problem]:
    stack = stack_with(source, **changes)
    if base is None and stack.is_attached:
        base = stack.cluster.attach_to
    return run_preflight(stack, load_stack(base) if base else None,
                         on=CATALOGUE_DATE).problems


def serving_problems(source: str, **changes) -> list[Problem]:
    stack = stack_with(source, **changes)
    out: list[Problem] = []
    check_serving(stack.serving, stack.cluster, out)
    return out


def worker_check(source: str, cluster: ClusterConfig | None = None, **changes):
    stack = stack_with(source, **changes)
    out: list[Problem] = []
    table = check_workers(stack, cluster or stack.cluster, out)
    return out, table
