"""One layout, one truth: free-form flags and env may not override a typed field (pure).

The graph appends `serving.workers[].extraArgs` after the flags it writes from typed fields
(components.graph), and vLLM's parser keeps the last value of a repeated option, so
`extraArgs: [--tensor-parallel-size, "2"]` on a TP4 worker would run TP2 while the memory
table, the GPU requests and the cost all describe TP4. Likewise the stack's env wins over the
env the graph sets. This module finds every flag or variable that sets something a typed field
owns and refuses it unless it states exactly the typed value (recipes copy such redundant flags
verbatim, e.g. `--data-parallel-size 1`).

Flags are read the way the engine reads them: vLLM's FlexibleArgumentParser (vllm
utils/argparse_utils.py, the version ai-dynamo 1.6.1 pins: vllm 0.31.0) turns '_' into '-' in
an option name, accepts `--opt=value`, `--json-opt.key value` (a key of a JSON option) and
`--config <yaml>` (any option from a file); argparse also accepts an unambiguous prefix of an
option (`--tensor-parallel` = `--tensor-parallel-size`) and `--no-<switch>`. Short forms from
vLLM's EngineArgs: -tp, -pp, -dp, -dpl, -pcp, -dcp, -ep, -q. The Dynamo worker parser itself
(dynamo/vllm/args.py, 1.6.1) is allow_abbrev=False and hands unknown flags to vLLM's parser.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stacks.config.errors import Problem
from stacks.config.schema import Role, ServingConfig, StackConfig, WorkerGroup
from stacks.config.stack_file import PROJECT
from stacks.conventions.k8s_names import FRONTEND_PORT

P = f"{PROJECT}:"
Typed = Callable[[StackConfig, WorkerGroup | None], Any]
_ALWAYS = object()  # the project writes this option itself: never accepted from extraArgs


@dataclass(frozen=True)
class Rule:
    names: tuple[str, ...]          # option strings, long form first
    field: str                      # what owns it, as the user writes it
    typed: Typed                    # the typed value (None: unset), or _ALWAYS
    kind: str = "str"               # str | int | float | switch


@dataclass(frozen=True)
class Flag:
    index: int
    token: str
    rule: Rule
    value: str | None               # None for a switch
    negated: bool = False


def _human_int(text: str) -> int:
    """vLLM's human_readable_int: 32k = 32,000, 32K = 32,768."""
    text = text.strip()
    units = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}
    if text[-1:] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


QUANTIZATION = {"bf16": (), "fp8": ("fp8", "fbgemm_fp8", "ptpc_fp8", "modelopt"),
                "nvfp4": ("modelopt_fp4", "modelopt_nvfp4", "nvfp4")}
KV_CACHE_DTYPES = {"auto": ("auto",), "fp8": ("fp8", "fp8_e4m3", "fp8_e5m2")}
_ROLE_MODE = {Role.WORKER: "agg", Role.PREFILL: "prefill", Role.DECODE: "decode"}


def _w(attr: str) -> Typed:
    return lambda s, w: getattr(w, attr)


def _one(_s: StackConfig, _w: WorkerGroup | None) -> int:
    return 1


def _serving(s: StackConfig) -> ServingConfig:
    assert s.serving is not None
    return s.serving


def _owned(_s: StackConfig, _w: WorkerGroup | None) -> object:
    return _ALWAYS


LAYOUT = "workers[i].tensorParallelSize x replicas (one replica is one TP group)"
WORKER_RULES = (
    Rule(("--tensor-parallel-size", "-tp"), "serving.workers[i].tensorParallelSize",
         _w("tensor_parallel_size"), "int"),
    Rule(("--pipeline-parallel-size", "-pp"), f"the layout {LAYOUT}", _one, "int"),
    Rule(("--data-parallel-size", "-dp"), f"serving.workers[i].replicas ({LAYOUT})", _one,
         "int"),
    Rule(("--data-parallel-size-local", "-dpl"), f"serving.workers[i].replicas ({LAYOUT})",
         _one, "int"),
    Rule(("--prefill-context-parallel-size", "-pcp"), f"the layout {LAYOUT}", _one, "int"),
    Rule(("--decode-context-parallel-size", "-dcp"), f"the layout {LAYOUT}", _one, "int"),
    Rule(("--nnodes",), "serving.workers[i].nodeCount", _owned),
    Rule(("--enable-expert-parallel", "-ep"), "serving.workers[i].expertParallel",
         _w("expert_parallel"), "switch"),
    Rule(("--max-model-len",), "serving.workers[i].maxModelLen", _w("max_model_len"), "int"),
    Rule(("--gpu-memory-utilization",), "serving.workers[i].gpuMemoryUtilization",
         _w("gpu_memory_utilization"), "float"),
    Rule(("--quantization", "-q"), "model.precision", lambda s, w: s.model.precision.value),
    Rule(("--kv-cache-dtype",), "serving.kvCacheDtype",
         lambda s, w: _serving(s).kv_cache_dtype),
    Rule(("--block-size",), "serving.blockSize", lambda s, w: _serving(s).block_size, "int"),
    Rule(("--attention-backend",), "serving.kernels.attentionBackend",
         lambda s, w: _serving(s).kernels.attention_backend),
    Rule(("--moe-backend",), "serving.kernels.moeBackend",
         lambda s, w: _serving(s).kernels.moe_backend),
    Rule(("--enable-flashinfer-autotune",), "serving.kernels.flashinferAutotune",
         lambda s, w: _serving(s).kernels.flashinfer_autotune, "switch"),
    Rule(("--kernel-config",), "serving.kernels", _owned),
    Rule(("--speculative-config",), "serving.speculative", _owned),
    Rule(("--spec-method",), "serving.speculative", _owned),
    Rule(("--spec-tokens",), "serving.speculative", _owned),
    Rule(("--num-speculative-tokens",), "serving.speculative", _owned),
    Rule(("--enable-prefix-caching",), "serving.prefixCaching",
         lambda s, w: _serving(s).prefix_caching, "switch"),
    Rule(("--kv-transfer-config",), "serving.transfer and serving.kvOffload", _owned),
    Rule(("--kv-events-config",), "serving.router and serving.kvEvents", _owned),
    Rule(("--kv-offloading-size",), "serving.kvOffload", _owned),
    Rule(("--kv-offloading-backend",), "serving.kvOffload", _owned),
    Rule(("--cpu-offload-gb",), "the memory table (weights are sized on the GPUs)", _owned),
    Rule(("--disaggregation-mode",), "serving.workers[i].role",
         lambda s, w: _ROLE_MODE[w.role] if w else None),
    Rule(("--model",), "model.id", _owned),
    Rule(("--served-model-name",), "model.servedName", _owned),
    Rule(("--revision",), "model.revision", _owned),
    Rule(("--trust-remote-code",), "model.trustRemoteCode",
         lambda s, w: s.model.trust_remote_code, "switch"),
    Rule(("--dyn-tool-call-parser",), "serving.parsers.toolCall", _owned),
    Rule(("--dyn-reasoning-parser",), "serving.parsers.reasoning", _owned),
    Rule(("--reasoning-parser",), "serving.parsers.engineReasoning", _owned),
    Rule(("--tool-call-parser",), "serving.parsers.toolCall", _owned),
    Rule(("--enable-auto-tool-choice",), "serving.parsers.autoToolChoice", _owned),
    Rule(("--dyn-enable-structural-tag",), "serving.parsers.structuralTag", _owned),
    Rule(("--config",), "the stack (a YAML file could set any typed option unseen)", _owned),
)
FRONTEND_RULES = (
    Rule(("--router-mode",), "serving.router", lambda s, w: _serving(s).router.value),
    Rule(("--kv-cache-block-size",), "serving.blockSize",
         lambda s, w: _serving(s).block_size, "int"),
    Rule(("--http-port",), "the frontend port the Service and the runner use",
         lambda s, w: FRONTEND_PORT, "int"),
    Rule(("--max-model-len",), "serving.workers[].maxModelLen (the smallest)",
         lambda s, w: min(x.max_model_len for x in _serving(s).workers), "int"),
    Rule(("--model-name",), "model.servedName (or model.id)", lambda s, w: s.model.name),
    Rule(("--trust-remote-code",), "model.trustRemoteCode",
         lambda s, w: s.model.trust_remote_code, "switch"),
    Rule(("--dyn-chat-processor",), "serving.parsers.chatProcessor", _owned),
    Rule(("--tool-call-parser",), "serving.parsers.toolCall", _owned),
    Rule(("--reasoning-parser",), "serving.parsers.reasoning", _owned),
    Rule(("--enable-auto-tool-choice",), "serving.parsers.autoToolChoice", _owned),
)
# The local engine (target local) starts Dynamo 1.6.1's mocker with a worker group's extraArgs
# last (stacks/engine_argv/local.py; dynamo/mocker/args.py is plain argparse: the last value
# wins, unique prefixes and --no-<switch> accepted), so these are the options it owns there.
MOCKER_RULES = (
    Rule(("--model-path",), "the model snapshot the runner prepares", _owned),
    Rule(("--model-name",), "model.servedName (or model.id)", lambda s, w: s.model.name),
    Rule(("--speedup-ratio",), "serving.mocker.speedupRatio",
         lambda s, w: _serving(s).mocker.speedup_ratio, "float"),
    Rule(("--block-size",), "serving.mocker.blockSize",
         lambda s, w: _serving(s).mocker.block_size, "int"),
    # unset numGpuBlocks: pre-flight's KV capacity for the imitated GPU decides
    Rule(("--num-gpu-blocks-override",), "serving.mocker.numGpuBlocks",
         lambda s, w: _serving(s).mocker.num_gpu_blocks or _ALWAYS, "int"),
    Rule(("--max-model-len",), "serving.workers[i].maxModelLen", _w("max_model_len"), "int"),
    Rule(("--disaggregation-mode",), "serving.workers[i].role",
         lambda s, w: _ROLE_MODE[w.role] if w else None),
    Rule(("--planner-profile-data",), "the timing table dynamo-bench builds (mocker_timings)",
         _owned),
    Rule(("--enable-prefix-caching",), "serving.prefixCaching",
         lambda s, w: _serving(s).prefix_caching, "switch"),
)
# The local frontend listens on loopback on a port the runner picks (stacks/engine_argv/local.py).
LOCAL_FRONTEND_RULES = (
    *(r for r in FRONTEND_RULES if r.names != ("--http-port",)),
    Rule(("--http-port",), "the loopback port the runner picks", _owned),
    Rule(("--http-host",), "the loopback address the local engine listens on", _owned),
)
# Env the graph sets from typed fields (or that would bypass them); the stack's env wins over
# the graph's (components.graph: `values.update(w.env)`), so it may not carry these.
OWNED_ENV = {
    "CUDA_VISIBLE_DEVICES": "the GPUs the device plugin gives the pod (tensorParallelSize)",
    "NVIDIA_VISIBLE_DEVICES": "the GPUs the device plugin gives the pod (tensorParallelSize)",
    "VLLM_ATTENTION_BACKEND": "serving.kernels.attentionBackend",
    "DYN_KVBM_CPU_CACHE_GB": "serving.kvOffload.cpuGb",
    "DYN_KVBM_DISK_CACHE_GB": "serving.kvOffload.diskGb",
    "DYN_KVBM_DISK_CACHE_DIR": "serving.kvOffload",
    "SPECULATIVE_CONFIG": "serving.speculative",
    "HF_HOME": "the model cache the download Job fills",
    "HF_HUB_OFFLINE": "the model cache the download Job fills (workers never download)",
    "HF_TOKEN": "the token Secret (dynamo-bench:hfToken)",
    "PYTHONHASHSEED": "the KV router's block hashes (0 on every worker)",
    "FI_PROVIDER": "serving.transfer",
    "DYN_REQUEST_PLANE": "the platform's request plane (TCP; no NATS is installed)",
    "DYN_EVENT_PLANE": "the platform's event plane (ZMQ; no NATS is installed)",
}


def _resolve(name: str, rules: tuple[Rule, ...]) -> tuple[Rule, bool] | None:
    """The rule an option string belongs to (exact, `--no-` form, or a unique prefix)."""
    for candidate, negated in ((name, False), ("--" + name[5:], True)):
        if negated and not name.startswith("--no-"):
            continue
        exact = [r for r in rules if candidate in r.names]
        if exact:
            return exact[0], negated
        if len(candidate) > 3:
            prefixed = {r for r in rules for n in r.names if n.startswith(candidate)}
            if len(prefixed) == 1:
                return prefixed.pop(), negated
    return None


def parse_flags(args: list[str], rules: tuple[Rule, ...]) -> list[Flag]:
    """The options of `args` that some rule owns, with their values."""
    out, i = [], 0
    while i < len(args):
        start, token = i, args[i]
        i += 1
        if not token.startswith("-") or token == "-" or token[1:2].isdigit():
            continue
        name, eq, inline = token.partition("=")
        if name.startswith("--"):
            name = "--" + name[2:].partition(".")[0].replace("_", "-")
        found = _resolve(name, rules)
        if found is None:
            continue
        rule, negated = found
        value = None
        if rule.kind != "switch":
            if eq:
                value = inline
            elif i < len(args):
                value, i = args[i], i + 1
        out.append(Flag(start, token, rule, value, negated))
    return out


def _agrees(flag: Flag, typed: Any) -> bool:
    rule, value = flag.rule, flag.value
    if rule.kind == "switch":
        return typed is not None and bool(typed) == (not flag.negated)
    if typed is None or value is None:
        return False
    try:
        if rule.kind == "int":
            return _human_int(value) == int(typed)
        if rule.kind == "float":
            return abs(float(value) - float(typed)) < 1e-9
    except ValueError:
        return False
    text = str(getattr(typed, "value", typed))
    if rule.names[0] == "--quantization":
        return value.lower() in QUANTIZATION.get(text, ())
    if rule.names[0] == "--kv-cache-dtype":
        return value.lower() in KV_CACHE_DTYPES.get(text, ())
    return value.lower() == text.lower()


def _stated(flag: Flag) -> str:
    if flag.rule.kind == "switch":
        return flag.token
    return f"{flag.token} {flag.value}" if "=" not in flag.token else flag.token


def _conflicts(args: list[str], rules: tuple[Rule, ...], stack: StackConfig,
               w: WorkerGroup | None, where: str, index: int | None) -> list[Problem]:
    problems = []
    for flag in parse_flags(args, rules):
        typed = flag.rule.typed(stack, w)
        owner = flag.rule.field.replace("[i]", f"[{index}]" if index is not None else "[i]")
        if typed is _ALWAYS:
            problems.append(Problem(f"{where}[{flag.index}]", f"{_stated(flag)} would override "
                                    f"what {owner} sets: the memory table and the graph would "
                                    "describe one thing while the engine runs another",
                                    f"remove it; set {owner} instead"))
        elif not _agrees(flag, typed):
            said = "unset" if typed is None else str(getattr(typed, "value", typed))
            problems.append(Problem(f"{where}[{flag.index}]", f"{_stated(flag)} contradicts "
                                    f"{owner} ({said}); the engine would run the flag while "
                                    "pre-flight, the memory table and the cost describe the "
                                    "typed value", f"remove it; set {owner} instead"))
    return problems


def _env_problems(env: dict[str, str], where: str) -> list[Problem]:
    return [Problem(f"{where}.{key}", f"{key} is set by the project from {owner}; the stack's "
                    "env would silently replace it", f"remove it; set {owner} instead")
            for key, owner in OWNED_ENV.items() if key in env]


def check_engine_flags(stack: StackConfig, out: list[Problem]) -> None:
    """extraArgs of every worker and the frontend, and the env of both, against typed fields."""
    s = stack.serving
    assert s is not None
    local = stack.target == "local"  # the extraArgs go to the mocker and the local frontend
    for i, w in enumerate(s.workers):
        f = f"{P}serving.workers[{i}]"
        out += _conflicts(w.extra_args, MOCKER_RULES if local else WORKER_RULES, stack, w,
                          f"{f}.extraArgs", i)
        out += _env_problems(w.env, f"{f}.env")
    out += _conflicts(s.frontend.extra_args, LOCAL_FRONTEND_RULES if local else FRONTEND_RULES,
                      stack, None, f"{P}serving.frontend.extraArgs", None)
    out += _env_problems(s.env, f"{P}serving.env")
