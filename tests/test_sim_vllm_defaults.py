"""vLLM 0.31.0's own defaults for a Dynamo 1.6.1 worker (stacks/catalog/vllm_defaults.py), each
pinned twice: by value here, and against the installed vLLM itself in the parser environment
(.venv-parsers: vllm 0.31.0, ai-dynamo 1.6.1), whose functions decide them."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from stacks.catalog.instances import A100_40GB, A100_80GB, B200, H100, L40S
from stacks.catalog.model_catalog import AX_K2_ARCH, K_EXAONE_ARCH, MOTIF_3_ARCH, SOLAR_OPEN2_ARCH
from stacks.catalog.models import MODELS
from stacks.catalog.vllm_defaults import (
    DEFAULT_BLOCK_SIZE,
    default_block_size,
    resolve_batch_limits,
    server_batch_defaults,
)
from stacks.config.loader import load_stack
from stacks.engine_argv.argv import tokens, worker_argv
from stacks.preflight.engine_releases import NEWEST
from workloads.sim.engine_setup import flag_switch, flag_value

GPUS = [A100_40GB, A100_80GB, L40S, H100, B200]
# (max_num_seqs, max_num_batched_tokens, chunked prefill, performance mode, max_model_len)
CASES = [(None, None, True, None, 32768), (None, None, False, None, 32768),
         (4, None, True, None, 256), (None, None, True, "throughput", 32768),
         (64, 4096, True, None, 32768)]
QWEN = MODELS["Qwen/Qwen3-30B-A3B"]


def test_the_server_batch_defaults_follow_memory_and_the_a100_exception():
    """>= 160 GiB: 1024 / 16384; >= 70 GiB and no A100: 1024 / 8192; else 256 / 2048."""
    got = {g.name: (d.max_num_seqs, d.max_num_batched_tokens)
           for g in GPUS for d in [server_batch_defaults(g)]}
    assert got == {"A100-SXM4-40GB": (256, 2048), "A100-SXM4-80GB": (256, 2048),
                   "L40S": (256, 2048), "H100-SXM5-80GB": (1024, 8192), "B200": (1024, 16384)}


def test_the_command_line_wins_and_unset_limits_follow_vllms_rules():
    def limits(gpu, seqs, batched, chunked, mode, length):
        r = resolve_batch_limits(gpu, max_num_seqs=seqs, max_num_batched_tokens=batched,
                                 max_model_len=length, chunked_prefill=chunked,
                                 performance_mode=mode)
        return r.max_num_seqs, r.max_num_batched_tokens
    assert limits(A100_40GB, 64, 4096, True, None, 32768) == (64, 4096)
    # without chunked prefill a whole prompt must fit one step
    assert limits(A100_40GB, None, None, False, None, 32768) == (256, 32768)
    # an unset budget never exceeds seqs x context
    assert limits(H100, 4, None, True, None, 256) == (4, 1024)
    assert limits(H100, None, None, True, "throughput", 32768) == (2048, 16384)


def test_the_block_size_is_16_for_gqa_and_left_to_the_stack_where_the_backend_decides():
    assert DEFAULT_BLOCK_SIZE == 16
    assert default_block_size(QWEN) == 16
    assert default_block_size(MODELS["Qwen/Qwen3-30B-A3B-FP8"]) == 16
    assert default_block_size(K_EXAONE_ARCH) == 16        # GQA with sliding windows, head 128
    assert default_block_size(MOTIF_3_ARCH) == 16         # GQA, K 192 / V 128
    assert default_block_size(AX_K2_ARCH) is None         # MLA: the backend's 32-128
    assert default_block_size(SOLAR_OPEN2_ARCH) is None   # hybrid: the state page
    assert default_block_size(QWEN.model_copy(update={"head_dim": 256})) is None


def test_the_flag_reader_takes_the_last_value_in_every_spelling():
    argv = ["--max-num-seqs", "8", "--max_num_seqs=32", "--block-size=64",
            "--enable-prefix-caching", "--no-enable-prefix-caching", "--no_enable_chunked_prefill"]
    assert flag_value(argv, "--max-num-seqs") == "32"
    assert flag_value(argv, "--block-size") == "64"
    assert flag_value(argv, "--max-num-batched-tokens") is None
    assert flag_switch(argv, "--enable-prefix-caching") is False
    assert flag_switch(argv, "--enable-chunked-prefill") is False
    assert flag_switch(argv, "--enforce-eager") is None


# --- against vLLM 0.31.0 and Dynamo 1.6.1 themselves ----------------------------------------

CHILD = r'''
import importlib.util, json, pathlib, sys, types
import vllm
from vllm.config.cache import CacheConfig
from vllm.engine import arg_utils
from vllm.engine.arg_utils import EngineArgs
from vllm.usage.usage_lib import UsageContext
from vllm.v1.attention.backends.flash_attn import FlashAttentionBackend
from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend
from dynamo.vllm.args import parse_args

req = json.loads(sys.stdin.read())
ctx = UsageContext.OPENAI_API_SERVER
out = {"default_block_size": CacheConfig.DEFAULT_BLOCK_SIZE,
       "preferred": [FlashAttentionBackend.get_preferred_block_size(16),
                     TritonAttentionBackend.get_preferred_block_size(16)],
       "flashinfer_16_32_64": "return [16, 32, 64]" in (pathlib.Path(vllm.__file__).parent
           / "v1/attention/backends/flashinfer.py").read_text(),
       "dynamo_usage_context": "usage_context = UsageContext.OPENAI_API_SERVER" in pathlib.Path(
           importlib.util.find_spec("dynamo.vllm.main").origin).read_text(),
       "limits": [], "parsed": []}

class Device:   # what get_batch_defaults asks of the platform
    def __init__(self, memory, name): self.memory, self.name = memory, name
    def get_device_total_memory(self): return self.memory
    def get_device_name(self): return self.name
    def is_tpu(self): return False
    def is_cpu(self): return False

real = arg_utils.current_platform
for gpu in req["gpus"]:
    arg_utils.current_platform = Device(gpu["memory_mib"] * 2**20, "NVIDIA " + gpu["name"])
    for seqs, batched, chunked, mode, length in req["cases"]:
        e = EngineArgs(max_num_seqs=seqs, max_num_batched_tokens=batched,
                       enable_chunked_prefill=chunked, performance_mode=mode or "balanced")
        e._set_default_max_num_seqs_and_batched_tokens_args(
            ctx, types.SimpleNamespace(max_model_len=length, is_multimodal_model=False),
            types.SimpleNamespace(use_batched_dp_moe=False))
        out["limits"].append([e.max_num_seqs, e.max_num_batched_tokens])
arg_utils.current_platform = real
for argv in req["argvs"]:
    e = parse_args(argv).engine_args
    out["parsed"].append([e.block_size, e.max_num_seqs, e.max_num_batched_tokens,
                          e.enable_prefix_caching, e.enable_chunked_prefill, e.max_model_len])
print(json.dumps(out))
'''


def _argvs() -> list[list[str]]:
    """Real worker command lines: shipped stacks, and one with every setting in extraArgs."""
    out = [tokens(worker_argv(load_stack(n), g, rdma=True))
           for n, g in (("agg-a100", 0), ("disagg-a100-kv-offload", 1), ("agg-l40s-fp8", 0))]
    stack = load_stack("agg-a100")
    assert stack.serving is not None
    w = stack.serving.workers[0].model_copy(update={"extra_args": [
        "--max-num-seqs=32", "--max_num_batched_tokens", "4096", "--no-enable-prefix-caching",
        "--block-size", "32", "--no-enable-chunked-prefill", "--max-model-len", "8192"]})
    custom = stack.model_copy(update={"serving": stack.serving.model_copy(
        update={"workers": [w]})})
    return [*out, tokens(worker_argv(custom, 0, rdma=False))]


@pytest.fixture(scope="module")
def upstream() -> dict:
    argvs = _argvs()
    req = {"gpus": [{"name": g.name, "memory_mib": g.memory_mib} for g in GPUS],
           "cases": CASES, "argvs": argvs}
    python = NEWEST.venv() / "bin" / "python"
    done = subprocess.run([str(python), "-c", CHILD], input=json.dumps(req), text=True,
                          capture_output=True, timeout=300,
                          # the env is not compiled at install (Makefile, parser_env): let
                          # this process write what it imports, as the engine parse does
                          env={**os.environ, "VLLM_TARGET_DEVICE": "cpu",
                               "PYTHONDONTWRITEBYTECODE": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "argvs": argvs}


@pytest.mark.parsers
def test_the_catalogue_is_what_vllm_decides(upstream):
    assert upstream["default_block_size"] == DEFAULT_BLOCK_SIZE
    # FLASH_ATTN and TRITON_ATTN keep 16; FLASHINFER (Blackwell's first choice) supports it
    assert upstream["preferred"] == [DEFAULT_BLOCK_SIZE, DEFAULT_BLOCK_SIZE]
    assert upstream["flashinfer_16_32_64"]
    assert upstream["dynamo_usage_context"]
    ours = [[r.max_num_seqs, r.max_num_batched_tokens]
            for g in GPUS for seqs, batched, chunked, mode, length in CASES
            for r in [resolve_batch_limits(g, max_num_seqs=seqs, max_num_batched_tokens=batched,
                                           max_model_len=length, chunked_prefill=chunked,
                                           performance_mode=mode)]]
    assert ours == upstream["limits"]


@pytest.mark.parsers
def test_the_flag_reader_reads_a_worker_argv_as_dynamo_and_vllm_parse_it(upstream):
    """Every value the simulation reads from a worker's command line equals the one Dynamo's
    own parser (then vLLM's) gives; unset ones are None here and None or Dynamo's default
    (prefix caching on) there."""
    for argv, (block, seqs, batched, prefix, chunked, length) in zip(
            upstream["argvs"], upstream["parsed"], strict=True):
        assert _int(flag_value(argv, "--block-size")) == block
        assert _int(flag_value(argv, "--max-num-seqs")) == seqs
        assert _int(flag_value(argv, "--max-num-batched-tokens")) == batched
        assert _int(flag_value(argv, "--max-model-len")) == length
        assert flag_switch(argv, "--enable-chunked-prefill") == chunked
        mine = flag_switch(argv, "--enable-prefix-caching")
        assert (True if mine is None else mine) == prefix
    assert upstream["parsed"][-1] == [32, 32, 4096, False, False, 8192]


def _int(value: str | None) -> int | None:
    return None if value is None else int(value)
