"""Typed model-specific serving settings of the B200 recipes (`dynamo-bench:serving.*`).

Each group replaces a free-form flag string of a recipe manifest with fields the pre-flight
checks and the graph builder both read:
- `speculative`: speculative decoding, delivered to vLLM as `--speculative-config` JSON read from
  a ConfigMap key (`speculative-config`), as the A.X K2 and Motif 3 recipes do. A second key,
  `speculative-config-synthetic`, forces a published acceptance length for throughput-only runs;
  which key the workers read is `acceptance`, and every report labels it.
- `kernels`: attention / MoE kernel pins (vLLM `--attention-backend`, `KernelConfig`).
- `parsers`: reasoning and tool-call parsers. In ai-dynamo 1.6.1 the `--dyn-tool-call-parser` /
  `--dyn-reasoning-parser` flags belong to the workers (`dynamo.vllm`, which registers them with
  the model; the frontend's Rust preprocessor applies them); `python -m dynamo.frontend` refuses
  them ("Unknown arguments", checked on the installed 1.6.1). vLLM's own parsers run in the
  frontend with `--dyn-chat-processor vllm` (Solar Open 2, Motif 3).
- `rdma`: the RDMA device a disaggregated worker requests for NIXL/UCX over InfiniBand.
- `RdmaDevicePlugin`: the cluster side (base stack): which resource name its plugin advertises.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Literal, Self

from pydantic import Field, StrictBool, StrictFloat, StrictInt, model_validator

from stacks.catalog.model_arch import AttentionBackend, MoeBackend, SpecMethod
from stacks.config.errors import field_error
from stacks.config.revision import Revision
from stacks.config.schema_base import Schema

# `dynamo._core.get_tool_parser_names()` / `get_reasoning_parser_names()` of ai-dynamo 1.6.1
# (the choices of the worker flags); tests/test_recipes_config.py compares them with the
# installed engine.
DYNAMO_TOOL_CALL_PARSERS = frozenset({
    "deepseek-v4", "deepseek_v3", "deepseek_v3_1", "deepseek_v3_2", "deepseek_v4",
    "deepseek_v41", "deepseekv4", "default", "gemma-4", "gemma4", "glm45", "glm47", "harmony",
    "hermes", "inkling", "jamba", "kimi-k3", "kimi_k2", "kimi_k25", "kimi_k3", "llama3_json",
    "minimax-m3", "minimax-m3-nom", "minimax_m2", "minimax_m3", "minimax_m3_nom", "mistral",
    "muse", "muse_glimmer", "nemotron_deci", "nemotron_nano", "phi4", "pythonic", "qwen25",
    "qwen3", "qwen3_coder"})
DYNAMO_REASONING_PARSERS = frozenset({
    "basic", "deepseek-v4", "deepseek_r1", "deepseek_v3", "deepseek_v3_1", "deepseek_v3_2",
    "deepseek_v4", "deepseek_v41", "deepseekv4", "gemma-4", "gemma4", "glm45", "glm47",
    "gpt_oss", "granite", "inkling", "kimi", "kimi-k3", "kimi_k2", "kimi_k25", "kimi_k3",
    "minimax-m3", "minimax_append_think", "minimax_m2", "minimax_m3", "mistral", "muse",
    "muse_glimmer", "nemotron3", "nemotron_deci", "nemotron_nano", "nemotron_v3", "qwen3",
    "qwen3_coder", "step3"})

# A parser's name as vLLM and Dynamo spell them: every name they register is a lowercase letter
# then lowercase letters, digits, '_' and '-' (vllm-project/vllm vllm/tool_parsers/__init__.py
# and vllm/reasoning/__init__.py, `_TOOL_PARSERS_TO_REGISTER` / `_REASONING_PARSERS_TO_REGISTER`:
# `granite-20b-fc`, `qwen3_coder`, `minimax_m2_append_think`; the Dynamo 1.6.1 names above). So
# `''`, `-1`, `1e309` and `${HOME}` are no parser's name; whether a well-formed name is one the
# image's engine knows is pre-flight's check against the installed lists.
ParserName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]

SPEC_CONFIG_KEY = "speculative-config"
SPEC_CONFIG_SYNTHETIC_KEY = "speculative-config-synthetic"


class SpeculativeDecoding(Schema):
    method: SpecMethod
    num_tokens: Annotated[StrictInt, Field(ge=1, le=8)]
    draft_model: Annotated[str | None, Field(pattern=r"^[\w.-]+/[\w.-]+$")] = None
    draft_revision: Revision | None = None
    # Which ConfigMap key the workers read: real acceptance, or the synthetic profile that
    # forces `syntheticAcceptanceLength` (throughput-only; not a quality-valid run).
    acceptance: Literal["real", "synthetic"] = "real"
    synthetic_acceptance_length: Annotated[StrictFloat | None, Field(gt=1.0)] = None
    # configmap: `--speculative-config=$(SPECULATIVE_CONFIG)` from the ConfigMap key (A.X K2,
    # Motif 3); flags: `--spec-method M --spec-tokens N`, K-EXAONE's recipe verbatim.
    delivery: Literal["configmap", "flags"] = "configmap"

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.method.needs_draft_model and not self.draft_model:
            raise field_error("draftModel", message=f"method {self.method.value} runs a "
                              "separate draft model: set draftModel (and draftRevision)")
        if not self.method.needs_draft_model and self.draft_model:
            raise field_error("draftModel", message=f"method {self.method.value} uses the "
                              "model's own MTP head: remove draftModel")
        if self.draft_revision and not self.draft_model:
            raise field_error("draftRevision", message="draftRevision without draftModel: "
                              "remove it or set draftModel")
        length = self.synthetic_acceptance_length
        if self.acceptance == "synthetic" and length is None:
            raise field_error("syntheticAcceptanceLength", message="acceptance synthetic needs "
                              "the forced acceptance length: set syntheticAcceptanceLength")
        if length is not None and length > self.num_tokens + 1:
            raise field_error("syntheticAcceptanceLength", message=f"{length} is more than "
                              f"numTokens + 1 = {self.num_tokens + 1} tokens per step: lower it")
        if self.delivery == "flags" and (self.draft_model or length is not None):
            raise field_error("delivery", message="delivery flags carries only method and "
                              "numTokens: use delivery configmap for a draft model or a "
                              "synthetic acceptance profile")
        return self

    def config(self, *, synthetic: bool = False) -> dict[str, object]:
        """vLLM's speculative-config JSON (the ConfigMap value)."""
        cfg: dict[str, object] = {"method": self.method.value}
        if self.draft_model:
            cfg["model"] = self.draft_model
        if self.draft_revision:
            cfg["revision"] = self.draft_revision
        cfg["num_speculative_tokens"] = self.num_tokens
        if synthetic:
            cfg["rejection_sample_method"] = "synthetic"
            cfg["synthetic_acceptance_length"] = self.synthetic_acceptance_length
        return cfg

    @property
    def config_key(self) -> str:
        return SPEC_CONFIG_SYNTHETIC_KEY if self.acceptance == "synthetic" else SPEC_CONFIG_KEY


class KernelPins(Schema):
    attention_backend: AttentionBackend | None = None
    moe_backend: MoeBackend | None = None
    flashinfer_autotune: StrictBool | None = None
    # How the MoE / autotune pins reach vLLM: one `--kernel-config` JSON (A.X K2, K-EXAONE) or
    # the separate `--moe-backend` / `--[no-]enable-flashinfer-autotune` flags (Solar Open 2).
    delivery: Literal["kernel-config", "flags"] = "kernel-config"


class Parsers(Schema):
    chat_processor: Literal["dynamo", "vllm"] = "dynamo"
    tool_call: ParserName | None = None
    reasoning: ParserName | None = None
    # vLLM processor only: let the model choose tools (`--enable-auto-tool-choice`).
    auto_tool_choice: StrictBool = False
    # The vLLM engine's own `--reasoning-parser` on the workers (A.X K2, Solar Open 2).
    engine_reasoning: ParserName | None = None
    # Workers: `--dyn-enable-structural-tag` (Motif 3; 1.6.1 still parses it, deprecated).
    structural_tag: StrictBool = False

    @model_validator(mode="after")
    def _names(self) -> Self:
        if self.chat_processor == "dynamo":
            for key, value, known in (("toolCall", self.tool_call, DYNAMO_TOOL_CALL_PARSERS),
                                      ("reasoning", self.reasoning, DYNAMO_REASONING_PARSERS)):
                if value is not None and value not in known:
                    raise field_error(key, message=f"'{value}' is not a Dynamo 1.6.1 parser: "
                                      "use one of its names, or chatProcessor: vllm for a "
                                      "vLLM parser")
            if self.auto_tool_choice:
                raise field_error("autoToolChoice", message="autoToolChoice is a vLLM "
                                  "processor flag: set chatProcessor: vllm or remove it")
        return self


class RdmaResource(str, Enum):
    IB = "rdma/ib"
    SHARED_IB = "rdma/shared_ib"


class RdmaRequest(Schema):
    """What each disaggregated worker pod requests for NIXL over UCX on InfiniBand."""

    resource_name: RdmaResource = RdmaResource.SHARED_IB
    # Units per pod; unset = one per GPU of the pod (Solar's recipe). A.X K2 asks 1, K-EXAONE 4.
    per_worker: Annotated[StrictInt | None, Field(ge=1, le=64)] = None
    nixl_threads: Annotated[StrictInt | None, Field(ge=1, le=64)] = None


class RdmaDevicePlugin(Schema):
    """The RDMA device plugin of a base cluster (the Mellanox k8s-rdma-shared-dev-plugin)."""

    resource_name: RdmaResource = RdmaResource.SHARED_IB
    # Units one node advertises (the plugin's rdmaHcaMax); requests above it never schedule.
    per_node: Annotated[StrictInt, Field(ge=1, le=1000)] = 64
    # Node groups whose HCAs it advertises (the GPU groups).
    node_groups: Annotated[list[str], Field(min_length=1)]
