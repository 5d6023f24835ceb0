"""The model-specific flags of the workers and the frontend, from the typed recipe settings
(pure). Flags follow the recipe manifests of ai-dynamo/dynamo (recipes/ax-k2, k-exaone-2.0,
solar-open2-250b, motif-3) and were checked against the installed ai-dynamo 1.6.1 where it has
them (stacks.config.recipe_config: parser split). Each section names the serving field that
decides it, for pre-flight's refusals.
"""

from __future__ import annotations

import json
from typing import Any

from stacks.config.recipe_config import Parsers
from stacks.config.schema import RouterMode, ServingConfig, StackConfig

# The container env the speculative config is read from (a ConfigMap key; components.recipe_specs)
SPEC_ENV = "SPECULATIVE_CONFIG"

Sections = list[tuple[str, list[str]]]


def _json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def speculative_args(serving: ServingConfig) -> list[str]:
    spec = serving.speculative
    if spec is None:
        return []
    if spec.delivery == "flags":
        return ["--spec-method", spec.method.value, "--spec-tokens", str(spec.num_tokens)]
    # Kubernetes expands $(VAR) from the container env: the JSON stays one argument.
    return [f"--speculative-config=$({SPEC_ENV})"]


def kernel_args(serving: ServingConfig) -> list[str]:
    k, args = serving.kernels, []
    if k.attention_backend is not None:
        args += ["--attention-backend", k.attention_backend.value]
    if k.delivery == "flags":
        if k.moe_backend is not None:
            args += ["--moe-backend", k.moe_backend.value]
        if k.flashinfer_autotune is not None:
            args.append(f"--{'' if k.flashinfer_autotune else 'no-'}enable-flashinfer-autotune")
        return args
    config: dict[str, Any] = {}
    if k.moe_backend is not None:
        config["moe_backend"] = k.moe_backend.value
    if k.flashinfer_autotune is not None:
        config["enable_flashinfer_autotune"] = k.flashinfer_autotune
    return args + (["--kernel-config", _json(config)] if config else [])


def _parser_sections(p: Parsers, prefix: str) -> Sections:
    """Tool-call and reasoning parser flags: `--dyn-...` (Dynamo's) or `--...` (vLLM's)."""
    named = (("tool-call-parser", "toolCall", p.tool_call),
             ("reasoning-parser", "reasoning", p.reasoning))
    return [(f"serving.parsers.{field}", [f"{prefix}{flag}", value])
            for flag, field, value in named if value]


def worker_recipe_sections(stack: StackConfig) -> Sections:
    """Model-specific worker flags, in the recipes' order after the KV settings. Dynamo 1.6.1
    takes `--dyn-*` parsers on the workers, which register them with the model; the vLLM
    engine's own reasoning parser and the structural tag are worker flags too."""
    s = stack.serving
    assert s is not None
    out: Sections = [("serving.blockSize", ["--block-size", str(s.block_size)])] \
        if s.block_size else []
    kernels = kernel_args(s)
    # the attention backend is its own field (a refusal at the worker's GPU names it)
    attention = kernels[:2] if kernels[:1] == ["--attention-backend"] else []
    out += [("serving.kernels.attentionBackend", attention),
            ("serving.kernels", kernels[len(attention):]),
            ("serving.speculative", speculative_args(s))]
    p = s.parsers
    if p.chat_processor == "dynamo":
        out += _parser_sections(p, "--dyn-")
    if p.engine_reasoning:
        out.append(("serving.parsers.engineReasoning", ["--reasoning-parser",
                                                        p.engine_reasoning]))
    if p.structural_tag:
        out.append(("serving.parsers.structuralTag", ["--dyn-enable-structural-tag"]))
    return [(field, toks) for field, toks in out if toks]


def frontend_recipe_sections(stack: StackConfig) -> Sections:
    """Model-specific frontend flags, then the stack's own frontend extraArgs."""
    s = stack.serving
    assert s is not None
    out: Sections = []
    if s.router == RouterMode.KV and s.block_size:
        # the router hashes blocks of this size; it must be the workers' block size
        out.append(("serving.blockSize", ["--kv-cache-block-size", str(s.block_size)]))
    if stack.model.trust_remote_code:
        out.append(("model.trustRemoteCode", ["--trust-remote-code"]))
    p = s.parsers
    if p.chat_processor == "vllm":
        out.append(("serving.parsers.chatProcessor", ["--dyn-chat-processor", "vllm"]))
        out += _parser_sections(p, "--")
        if p.auto_tool_choice:
            out.append(("serving.parsers.autoToolChoice", ["--enable-auto-tool-choice"]))
    out += [(f"serving.frontend.extraArgs[{j}]", [a]) for j, a in enumerate(s.frontend.extra_args)]
    return out


def tokens(sections: Sections) -> list[str]:
    return [tok for _, toks in sections for tok in toks]


def worker_recipe_args(stack: StackConfig) -> list[str]:
    return tokens(worker_recipe_sections(stack))


def frontend_recipe_args(stack: StackConfig) -> list[str]:
    return tokens(frontend_recipe_sections(stack))
