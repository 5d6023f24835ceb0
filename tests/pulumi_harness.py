"""The offline Pulumi harness of the tests: run `__main__.py` for every AWS stack in stacks/
under Pulumi's mocks and hand back every resource it registered.

The engine itself (mocks that record type, name, inputs, secret inputs, provider and
dependencies; a MockMonitor that keeps resource references as URNs; the root-stack reset; the
StackReference answered with the base's real outputs) lives in stacks/render/offline.py, because
`python -m stacks render` runs the program under the very same mocks. This module adds what
tests need: the list of AWS stacks, a per-session cache, planted configs, and views.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from stacks.config.loader import (
    all_stack_names,
    derived_stack_names,
    load_stack,
    read_stack_file,
    stack_file,
)
from stacks.render.offline import (
    PLACEHOLDER_TOKEN,
    SECRET_KEYS,
    ProgramRun,
    Recorded,
    config_strings,
    run_program,
    run_stack,
)
from stacks.render.write import is_kubernetes_object, kubernetes_object

__all__ = ["PLACEHOLDER_TOKEN", "ProgramRun", "Recorded", "aws_stacks", "run", "run_config",
           "raw_config", "k8s_objects", "provider_default_tags", "by_name"]

_CACHE: dict[str, ProgramRun] = {}


def aws_stacks() -> list[str]:
    """Every stack file whose target is aws (local stacks have no infrastructure), and every
    variant on another base its bases allow (`<variant>.<base>`, stacks/config/loader.py)."""
    files = [n for n in all_stack_names() if load_stack(n).target == "aws"]
    return [*files, *derived_stack_names()]


def run(name: str) -> ProgramRun:
    """The recorded run of a shipped stack (once per test session; bases run once too)."""
    return run_stack(name, cache=_CACHE)


def fresh_run(name: str) -> ProgramRun:
    """Run a shipped stack again, bypassing the cache (a variant reuses its base's run)."""
    stack = load_stack(name)
    cache = {stack.cluster.attach_to: run(stack.cluster.attach_to)} if stack.is_attached else {}
    return run_stack(name, cache=cache)


def raw_config(name: str) -> dict[str, Any]:
    """A deep copy of a stack file's config (keys without the project prefix), to plant."""
    return copy.deepcopy(read_stack_file(stack_file(name)))


def run_config(stack: str, raw: dict[str, Any], *, hf_token: str | None = PLACEHOLDER_TOKEN,
               token_is_secret: bool = True) -> ProgramRun:
    """Run the program for a planted config named `stack` (attachTo must name a shipped base,
    whose recorded outputs answer the StackReference)."""
    cluster = raw.get("cluster") or {}
    outputs = {}
    region = cluster.get("region", "us-east-1")
    if cluster.get("attachTo"):
        base = run(cluster["attachTo"])
        outputs[cluster["attachTo"]] = (base.outputs, base.secret_outputs)
        region = load_stack(cluster["attachTo"]).cluster.region
    return run_program(stack, config_strings(raw, hf_token), region=region,
                       stack_outputs=outputs,
                       secret_keys=SECRET_KEYS if token_is_secret else ())


def k8s_objects(result: ProgramRun) -> list[tuple[Recorded, dict[str, Any]]]:
    """Every Kubernetes object the program creates, unredacted, with its record."""
    return [(r, kubernetes_object(r, redact=False))
            for r in result.resources if is_kubernetes_object(r)]


def by_name(result: ProgramRun) -> dict[str, Recorded]:
    return {r.urn: r for r in result.resources}


def provider_default_tags(result: ProgramRun, resource: Recorded) -> dict[str, str]:
    """The default tags of the AWS provider a resource was registered with ({} if none)."""
    if not resource.provider:
        return {}
    urn = resource.provider.rsplit("::", 1)[0]
    provider = by_name(result).get(urn)
    if provider is None:
        return {}
    default = provider.inputs.get("defaultTags") or {}
    if isinstance(default, str):  # provider inputs arrive JSON-encoded
        default = json.loads(default)
    return dict(default.get("tags") or {})

