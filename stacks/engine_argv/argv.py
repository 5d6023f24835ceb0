"""The whole command line of each worker group and of the frontend, every flag with the stack
field it came from (pure). components.graph starts the pods with `tokens(...)` of these;
pre-flight parses the same lists with the engine's own parsers and names `Arg.field` when one
is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from stacks.config.schema import Role, StackConfig
from stacks.conventions.k8s_names import FRONTEND_PORT
from stacks.engine_argv.kv import kv_arg_sections
from stacks.engine_argv.recipe import Sections, frontend_recipe_sections, worker_recipe_sections


@dataclass(frozen=True)
class Arg:
    token: str
    # the stack field as the user writes it, without the project prefix
    # ("serving.workers[1].extraArgs[3]"); "(fixed)" for a flag no field decides
    field: str


FIXED = "(fixed)"


def _args(sections: Sections) -> list[Arg]:
    return [Arg(tok, field) for field, toks in sections for tok in toks]


def tokens(args: list[Arg]) -> list[str]:
    return [a.token for a in args]


def worker_argv(stack: StackConfig, index: int, *, rdma: bool) -> list[Arg]:
    """`python3 -m dynamo.vllm`'s arguments for worker group `index`; `rdma`: its KV moves
    over EFA (stacks.engine_argv.kv.uses_rdma). The stack's extraArgs come last, so they win."""
    s, m = stack.serving, stack.model
    assert s is not None
    w = s.workers[index]
    f = f"serving.workers[{index}]"
    out: Sections = [("model.id", ["--model", m.id]),
                     ("model.servedName" if m.served_name else "model.id",
                      ["--served-model-name", m.name])]
    if m.revision:
        out.append(("model.revision", ["--revision", m.revision]))
    if m.trust_remote_code:
        out.append(("model.trustRemoteCode", ["--trust-remote-code"]))
    out.append((f"{f}.tensorParallelSize", ["--tensor-parallel-size",
                                             str(w.tensor_parallel_size)]))
    if w.expert_parallel:
        out.append((f"{f}.expertParallel", ["--enable-expert-parallel"]))
    out += [(f"{f}.maxModelLen", ["--max-model-len", str(w.max_model_len)]),
            (f"{f}.gpuMemoryUtilization", ["--gpu-memory-utilization",
                                           str(w.gpu_memory_utilization)])]
    if w.role != Role.WORKER:
        out.append((f"{f}.role", ["--disaggregation-mode", w.role.value]))
    out += kv_arg_sections(s, w.role, rdma=rdma)
    out += worker_recipe_sections(stack)
    out += [(f"{f}.extraArgs[{j}]", [a]) for j, a in enumerate(w.extra_args)]
    return _args(out)


def frontend_argv(stack: StackConfig) -> list[Arg]:
    """`python3 -m dynamo.frontend`'s arguments; the stack's frontend extraArgs come last."""
    s = stack.serving
    assert s is not None
    return _args([(FIXED, ["--http-port", str(FRONTEND_PORT)]),
                  ("serving.router", ["--router-mode", s.router.value]),
                  *frontend_recipe_sections(stack)])
