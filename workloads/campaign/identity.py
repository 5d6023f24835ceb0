"""Kept workers, checked on what would really run: the rendered worker specs, byte for byte.

aws: each variant's Pulumi program runs offline (stacks/render/offline.py, Pulumi mocks, as `python
-m stacks render` does) with the graph name the two variants would share; what reaches a worker is
every Kubernetes object the variant creates, its DynamoGraphDeployment without the frontend
component: the worker components (pod templates, replicas, shared memory), the graph's env and
labels, the ConfigMaps the workers read. The operator rolls workers only when a worker spec
changes (ai-dynamo/dynamo docs/pages/kubernetes/rolling-update.md: "Non-worker components like
frontend are updated in-place"), so equal bytes mean the workers stay.

local: each mocker's command line (the engine's env is shared by every process of the run).

The typed-config rule of stacks/conventions/worker_identity.py decides the forecast; the campaign
keeps workers only where both agree (tests hold them to the same answer for every shipped pair).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable

from stacks.config.campaign_config import CampaignDeploy
from stacks.config.loader import load_stack_file
from stacks.config.schema import StackConfig
from stacks.config.stack_file import CAMPAIGN_KEY, PROJECT
from stacks.conventions.k8s_names import DGD_KIND, FRONTEND_COMPONENT
from stacks.conventions.worker_identity import same_workers
from stacks.preflight.run import effective_cluster


def worker_objects(objects: list[dict]) -> list[dict]:
    """The rendered objects a worker depends on: the graph without its frontend component,
    and every other Kubernetes object (recipe ConfigMaps, ...), in a stable order."""
    out = []
    for obj in objects:
        obj = copy.deepcopy(obj)
        if obj.get("kind") == DGD_KIND:
            obj["spec"]["components"] = [c for c in obj["spec"]["components"]
                                         if c["name"] != FRONTEND_COMPONENT]
        out.append(obj)
    return sorted(out, key=lambda o: (o.get("kind", ""), o.get("metadata", {}).get("name", "")))


def worker_bytes(objects: list[dict]) -> bytes:
    return json.dumps(worker_objects(objects), sort_keys=True, separators=(",", ":")).encode()


def rendered_objects(name: str, graph: str, cache: dict) -> list[dict]:
    """The Kubernetes objects variant `name`'s program creates under graph name `graph`."""
    from stacks.render.offline import PLACEHOLDER_TOKEN, config_strings, run_program, run_stack
    from stacks.render.write import is_kubernetes_object, kubernetes_object

    raw = load_stack_file(name).config   # a derived `<variant>.<base>` too
    base = raw["cluster"]["attachTo"]
    base_run = run_stack(base, cache=cache)
    config = config_strings(raw, PLACEHOLDER_TOKEN)
    config[f"{PROJECT}:{CAMPAIGN_KEY}"] = CampaignDeploy(graph_name=graph).model_dump_json(
        by_alias=True)
    run = run_program(name, config, region=base_run.outputs.get("region", "us-east-1"),
                      stack_outputs={base: (base_run.outputs, base_run.secret_outputs)})
    if run.error is not None:
        raise RuntimeError(f"{name} does not render offline: {run.error}")
    return [kubernetes_object(r, redact=False) for r in run.resources
            if is_kubernetes_object(r)]


def rendered_same_workers(base: StackConfig) -> Callable[[StackConfig, StackConfig], bool]:
    """`same(a, b)` for the schedule: the typed rule first (cheap), then the rendered specs of
    both under `a`'s graph name, byte for byte."""
    from stacks.conventions.k8s_names import deployment_name

    cache: dict = {}
    memo: dict[tuple[str, str], bool] = {}

    def same(a: StackConfig, b: StackConfig) -> bool:
        key = (a.name, b.name)
        if key not in memo:
            typed = same_workers(a, b, effective_cluster(a, base), effective_cluster(b, base))
            graph = deployment_name(a)
            memo[key] = typed and worker_bytes(rendered_objects(a.name, graph, cache)) == \
                worker_bytes(rendered_objects(b.name, graph, cache))
        return memo[key]
    return same


def local_same_workers(argvs: Callable[[StackConfig], list[list[str]]]
                       ) -> Callable[[StackConfig, StackConfig], bool]:
    """`same(a, b)` for local stacks: the typed rule and the mockers' command lines."""
    def same(a: StackConfig, b: StackConfig) -> bool:
        return (same_workers(a, b, a.cluster, b.cluster)
                and json.dumps(argvs(a)).encode() == json.dumps(argvs(b)).encode())
    return same
