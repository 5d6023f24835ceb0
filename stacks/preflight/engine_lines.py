"""The command lines pre-flight asks the engine's parsers about, as the pods will run them (pure).

Each is the exact argv the graph starts (stacks.engine_argv; Kubernetes' $(SPECULATIVE_CONFIG)
expanded with the ConfigMap value the pod reads), the env that container starts with
(stacks.conventions.pod_env: the graph's and the stack's, never the host shell's), the parser
release that judges it (stacks.preflight.engine_releases) and, for a worker, the GPU its node
group has (compute capability from stacks.catalog.instances), so the child can ask the chosen
attention backend whether it runs there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from stacks.catalog.instances import INSTANCE_TYPES, Gpu
from stacks.config.recipe_config import SPEC_CONFIG_SYNTHETIC_KEY
from stacks.config.schema import ClusterConfig, StackConfig, TransferBackend
from stacks.conventions.pod_env import RUNTIME_ENV, frontend_parse_env, worker_parse_env
from stacks.engine_argv.argv import Arg, frontend_argv, tokens, worker_argv
from stacks.engine_argv.kv import uses_rdma
from stacks.engine_argv.local import local_frontend_argv, local_mocker_argvs
from stacks.engine_argv.recipe import SPEC_ENV
from stacks.preflight.engine_model_config import config_json
from stacks.preflight.engine_releases import (
    LOCAL_ENGINE,
    NEWEST,
    ParserRelease,
    judged_as_release,
    parser_release,
)


@dataclass(frozen=True)
class CommandLine:
    stack: str
    where: str            # "serving.workers[1]" or "serving.frontend"
    kind: str             # "worker" | "frontend" | "mocker"
    args: tuple[Arg, ...]
    image: str            # "" for the local engine's processes
    model: str | None     # the worker's model when its config.json can be written
    release: ParserRelease = NEWEST
    # what the parsers refuse is a refusal (the image is exactly the release; the local engine)
    judged: bool = False
    env: tuple[tuple[str, str], ...] = ()   # the container's env the parsers may read
    gpu: Gpu | None = None                  # a worker's GPU (None: frontend, mocker, unknown)

    @property
    def argv(self) -> list[str]:
        return tokens(list(self.args))


def _expand(args: list[Arg], stack: StackConfig) -> list[Arg]:
    """Kubernetes' $(SPECULATIVE_CONFIG) expansion with the ConfigMap value the pod reads."""
    spec = stack.serving.speculative if stack.serving else None
    if spec is None:
        return args
    value = json.dumps(spec.config(synthetic=spec.config_key == SPEC_CONFIG_SYNTHETIC_KEY),
                       separators=(",", ":"))
    return [Arg(a.token.replace(f"$({SPEC_ENV})", value), a.field) for a in args]


def _env(values: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(values.items()))


def _gpu(stack: StackConfig, cluster: ClusterConfig, index: int) -> Gpu | None:
    assert stack.serving is not None
    group = cluster.group(stack.serving.workers[index].node_group)
    instance = INSTANCE_TYPES.get(group.instance_type) if group is not None else None
    return instance.gpu if instance is not None else None


def _aws_line(stack: StackConfig, where: str, kind: str, args: list[Arg], image: str,
              model: str | None, env: dict[str, str], gpu: Gpu | None = None) -> CommandLine:
    s = stack.serving
    assert s is not None
    release = parser_release(image, s.dynamo_version)
    return CommandLine(stack.name, where, kind, tuple(args), image, model, release,
                       judged_as_release(image, s.dynamo_version, release), _env(env), gpu)


def command_lines(stack: StackConfig, cluster: ClusterConfig | None = None) -> list[CommandLine]:
    """Every command line the stack starts, frontend first: an aws serving stack's graph (the
    EFA flag: a nixl-libfabric stack's graph is built only on EFA nodes), or the local engine's
    frontend and mockers (one per worker group and role). `cluster`: the one the workers run
    on (an attached variant's effective cluster; default the stack's own), for their GPUs."""
    s = stack.serving
    if s is None:
        return []
    if stack.target == "local":
        env = _env({**RUNTIME_ENV, **s.env})
        return [CommandLine(stack.name, "serving.frontend", "frontend",
                            tuple(local_frontend_argv(stack)), "", None, LOCAL_ENGINE, True, env),
                *(CommandLine(stack.name, f"serving.workers[{i}]", "mocker", tuple(args), "",
                              None, LOCAL_ENGINE, True, env)
                  for i, args in enumerate(local_mocker_argvs(stack)))]
    cluster = cluster or stack.cluster
    rdma = uses_rdma(s, s.transfer == TransferBackend.NIXL_LIBFABRIC)
    model = stack.model.id if config_json(stack.model.id) is not None else None
    out = [_aws_line(stack, "serving.frontend", "frontend", frontend_argv(stack),
                     s.frontend.image or s.image, None, frontend_parse_env(stack))]
    for i in range(len(s.workers)):
        out.append(_aws_line(stack, f"serving.workers[{i}]", "worker",
                             _expand(worker_argv(stack, i, rdma=rdma), stack), s.image, model,
                             worker_parse_env(stack, i), _gpu(stack, cluster, i)))
    return out
