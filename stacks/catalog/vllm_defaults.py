"""What vLLM 0.31.0 (the version ai-dynamo 1.6.1 pins) decides for a Dynamo worker when its
command line leaves a setting unset: the KV block size, the batch limits per GPU, chunked
prefill and prefix caching. Each fact with the file it was read in (the installed wheels of the
parser environment, .venv-parsers: vllm 0.31.0, ai-dynamo 1.6.1) and pinned by
tests/test_sim_vllm_defaults.py.

- The usage context: Dynamo's vLLM worker builds its engine config with
  `UsageContext.OPENAI_API_SERVER` (ai-dynamo 1.6.1 dynamo/vllm/main.py, `usage_context =
  UsageContext.OPENAI_API_SERVER` before `engine_args.create_engine_config(...)`), so the
  server's batch defaults apply, not the offline LLM class's.
- Batch limits (vllm/engine/arg_utils.py `EngineArgs.get_batch_defaults`, then
  `_set_default_max_num_seqs_and_batched_tokens_args`): by the device's total memory and name,
  >= 160 GiB: 1024 sequences / 16384 tokens; >= 70 GiB and not an A100: 1024 / 8192; else
  256 / 2048 ("Setting large max_num_batched_tokens for A100 reduces throughput", vLLM PR 17885).
  `--performance-mode throughput` doubles an unset limit; without chunked prefill an unset token
  budget is raised to max_model_len; an unset token budget never exceeds
  max_num_seqs x max_model_len.
- Chunked prefill: on by default for generative decoder models
  (vllm/engine/arg_utils.py `_set_default_chunked_prefill_and_prefix_caching_args`:
  `model_config.is_chunked_prefill_supported`).
- Prefix caching: Dynamo turns it on when the command line says neither
  `--enable-prefix-caching` nor `--no-enable-prefix-caching` (ai-dynamo 1.6.1
  dynamo/vllm/args.py `update_engine_config_with_dynamo`); the project's workers always say one
  (stacks/engine_argv/kv.py).
- KV block size (vllm/config/cache.py `CacheConfig.DEFAULT_BLOCK_SIZE = 16`, applied by
  `_apply_block_size_default` when `--block-size` is unset; then
  vllm/platforms/interface.py `update_block_size_for_backend` asks the attention backend for its
  preferred size unless the user set one). On NVIDIA GPUs a GQA model runs FLASH_ATTN (sm80/89/
  90) or FLASHINFER (sm100) first (vllm/platforms/cuda.py `_get_backend_priorities`);
  FLASH_ATTN supports any multiple of 16 except its FA4 head-256 and SM90 FP8 head-512 kernels,
  FLASHINFER [16, 32, 64] (plus >= 128 on Blackwell's trtllm kernel), TRITON_ATTN and
  FLEX_ATTENTION multiples of 16 (vllm/v1/attention/backends/*.py
  `get_supported_kernel_block_sizes`, `get_preferred_block_size`): 16 stays 16 for every GQA
  head size other than 256 and 512 (Qwen3-30B-A3B: 128). MLA backends want 32, 64 or 128
  (FLASHINFER_MLA [32, 64], FLASHMLA 64, CUTLASS_MLA 128, the sparse ones with their indexer's
  64), and hybrid linear-attention models align the block to the state page
  (`_align_hybrid_block_size`, stacks/sizing/memory.py `hybrid_page_tokens`): this module does
  not pick those, the caller must have the stack say `serving.blockSize` or derive the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from stacks.catalog.instances import Gpu
from stacks.catalog.model_arch import AttentionKind, ModelArchitecture

VLLM_VERSION = "0.31.0"
DYNAMO_VERSION = "1.6.1"
USAGE_CONTEXT = "OPENAI_API_SERVER"
GIB = 1024**3

DEFAULT_BLOCK_SIZE = 16
# GQA head sizes whose FLASH_ATTN kernel asks its own page (FA4 head-256, SM90 FP8 head-512).
_OWN_PAGE_HEADS = (256, 512)

CHUNKED_PREFILL_DEFAULT = True
PREFIX_CACHING_DEFAULT = True
THROUGHPUT_MODE = "throughput"


@dataclass(frozen=True)
class BatchLimits:
    max_num_seqs: int
    max_num_batched_tokens: int
    rule: str          # which branch of get_batch_defaults gave them


def server_batch_defaults(gpu: Gpu) -> BatchLimits:
    """vLLM 0.31.0's OPENAI_API_SERVER defaults for a device of `gpu`'s total memory and name
    (get_batch_defaults compares `get_device_total_memory()` with 160 and 70 GiB and looks for
    "a100" in the lower-cased device name)."""
    memory = gpu.memory_mib * 1024**2
    if memory >= 160 * GIB:
        return BatchLimits(1024, 16384, ">= 160 GiB")
    if memory >= 70 * GIB and "a100" not in gpu.name.lower():
        return BatchLimits(1024, 8192, ">= 70 GiB, not an A100")
    return BatchLimits(256, 2048, "below 70 GiB, or an A100")


def resolve_batch_limits(gpu: Gpu, *, max_num_seqs: int | None,
                         max_num_batched_tokens: int | None, max_model_len: int,
                         chunked_prefill: bool, performance_mode: str | None) -> BatchLimits:
    """The limits a worker runs with: the command line's where it sets them, else the server
    defaults, adjusted as `_set_default_max_num_seqs_and_batched_tokens_args` does."""
    default = server_batch_defaults(gpu)
    seqs = default.max_num_seqs if max_num_seqs is None else max_num_seqs
    tokens = default.max_num_batched_tokens if max_num_batched_tokens is None else (
        max_num_batched_tokens)
    if performance_mode == THROUGHPUT_MODE:
        seqs = seqs * 2 if max_num_seqs is None else seqs
        tokens = tokens * 2 if max_num_batched_tokens is None else tokens
    rule = default.rule
    if max_num_batched_tokens is None:
        if not chunked_prefill:
            tokens = max(max_model_len, tokens)
        tokens = min(seqs * max_model_len, tokens)
    if max_num_seqs is not None or max_num_batched_tokens is not None:
        rule = "the command line" + ("" if max_num_seqs is not None
                                     and max_num_batched_tokens is not None
                                     else f", else the default ({default.rule})")
    return BatchLimits(seqs, tokens, rule)


def default_block_size(arch: ModelArchitecture) -> int | None:
    """The block size vLLM 0.31.0 runs this model with when `--block-size` is unset, on any of
    the catalogue's NVIDIA GPUs; None where the attention backend or the hybrid page decides
    (MLA, hybrid linear attention, GQA heads of 256 or 512)."""
    if arch.attention_kind != AttentionKind.GQA:
        return None
    if arch.head_dim in _OWN_PAGE_HEADS or (arch.v_head_dim or arch.head_dim) in _OWN_PAGE_HEADS:
        return None
    return DEFAULT_BLOCK_SIZE
