"""The engine parse as the pod would run it, with the real parser environments (`make parsers`):
the pod's env and not the shell's (a refused --max-model-len stays refused however the shell is
set, and a pass under the pod's own VLLM_ALLOW_LONG_MAX_MODEL_LEN is not reused without it), the
chosen attention backend at the worker's GPU (FLASH_ATTN with an FP8 KV cache: refused on A100,
accepted on H100), the speculative config against vLLM's SpeculativeConfig (judged on Dynamo's
own image, a note on a recipe build), and every unknown name of a command line, not the first.

The variants are typed configs consulted directly (stacks.preflight.engine_parse.consult), as a
stack that other rules would let through; one parser process per release for all of them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from stacks.config.loader import load_stack, parse_config, read_stack_file, stack_file
from stacks.preflight import engine_parse
from stacks.preflight.run import effective_cluster

NO_SUCH_METHOD = '--speculative-config={"method":"no_such_method","num_speculative_tokens":2}'


def _raw(name: str) -> dict[str, Any]:
    return copy.deepcopy(read_stack_file(stack_file(name)))


def _qwen(**serving: Any) -> dict[str, Any]:
    raw = _raw("agg-a100")
    raw["serving"] = {**raw["serving"], **serving}
    return raw


def _worker(raw: dict[str, Any], **fields: Any) -> dict[str, Any]:
    raw["serving"]["workers"][0] = {**raw["serving"]["workers"][0], **fields}
    return raw


FA_FP8 = {"kernels": {"attentionBackend": "FLASH_ATTN"}, "kvCacheDtype": "fp8"}
H100_GROUP = {"name": "p5", "instanceType": "p5.48xlarge", "count": 1,
              "availabilityZone": "us-east-1a", "diskGib": 500}


def _variants() -> dict[str, dict[str, Any]]:
    on_h100 = _worker(_qwen(**FA_FP8), nodeGroup="p5")
    on_h100["cluster"] = {**on_h100["cluster"], "nodeGroups": [H100_GROUP]}
    solar = _raw("disagg-b200-solar2")
    solar["serving"]["workers"][0]["extraArgs"] = [
        *solar["serving"]["workers"][0].get("extraArgs", []), NO_SUCH_METHOD]
    return {
        "pe-long": _worker(_qwen(), maxModelLen=40961),
        "pe-long-pod-allows": _worker(_qwen(env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}),
                                      maxModelLen=40961),
        "pe-fa-fp8-a100": _qwen(**FA_FP8),
        "pe-fa-fp8-h100": on_h100,
        "pe-spec": _worker(_qwen(), extraArgs=[NO_SUCH_METHOD]),
        "pe-names": _worker(_qwen(parsers={"chatProcessor": "vllm", "toolCall": "bogus_tool",
                                           "reasoning": "bogus_think",
                                           "engineReasoning": "bogus_engine"}),
                            extraArgs=["--bogus-flag"]),
        "pe-spec-recipe": solar,
    }


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("DYNAMO_BENCH_ENGINE_PARSE", "on")
    # the shell allows what the pod does not: the parse must not see it
    mp.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    cache = tmp_path_factory.mktemp("parse-cache")
    stacks = [parse_config(n, raw) for n, raw in _variants().items()]
    clusters = {s.name: effective_cluster(s, load_stack(s.cluster.attach_to)) for s in stacks
                if s.cluster.attach_to}
    out = engine_parse.consult(stacks, cache=cache, clusters=clusters)
    yield out, stacks, cache, clusters
    mp.undo()


def _said(out: engine_parse.EngineParse, name: str) -> str:
    return json.dumps([str(p) for p in out.problems.get(name, [])] + out.notes.get(name, []))


@pytest.mark.parsers
def test_the_shell_env_does_not_reach_the_parse_and_the_pods_does(parsed):
    out, stacks, cache, clusters = parsed
    said = _said(out, "pe-long")
    assert "dynamo-bench:serving.workers[0].maxModelLen" in said, said
    assert "max_model_len" in said and "engine config" in said, said
    assert "pe-long-pod-allows" not in out.problems, out.problems.get("pe-long-pod-allows")
    # from the cache (no parser process), the refusal stands: the pass under the pod's env
    # is another key
    again = engine_parse.consult([s for s in stacks if s.name == "pe-long"], cache=cache,
                                 clusters=clusters)
    assert [str(p) for p in again.problems["pe-long"]] == \
        [str(p) for p in out.problems["pe-long"]]


@pytest.mark.parsers
def test_flash_attention_with_an_fp8_kv_cache_is_judged_at_the_workers_gpu(parsed):
    out, *_ = parsed
    said = _said(out, "pe-fa-fp8-a100")
    assert "dynamo-bench:serving.kernels.attentionBackend: " in said, said
    # vLLM's own words (vllm/platforms/cuda.py:448-464) at the worker's GPU
    assert "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this " \
        "configuration. Reason: ['kv_cache_dtype not supported', 'FP8 KV cache requires FA3 " \
        "on SM90" in said, said
    assert "on A100-SXM4-40GB (compute capability 8.0)" in said, said
    assert "(also serving.kvCacheDtype)" in said, said
    # the fix names the backends vLLM's CUDA platform finds valid there
    assert "valid for this configuration on A100-SXM4-40GB (compute capability 8.0): " \
        "TRITON_ATTN" in said, said
    assert "pe-fa-fp8-h100" not in out.problems, out.problems.get("pe-fa-fp8-h100")


@pytest.mark.parsers
def test_the_speculative_config_is_checked_against_vllms_fields(parsed):
    out, *_ = parsed
    said = _said(out, "pe-spec")
    assert "speculative-config check" in said and "no_such_method" in said, said
    assert "dynamo-bench:serving.workers[0].extraArgs[0]" in said, said
    # a recipe build (Solar: Dynamo 1.4.1 / vLLM 0.26.0) is never judged: a note, with the
    # parser names its build adds still reported beside it
    notes = " ".join(out.notes.get("pe-spec-recipe", []))
    assert "pe-spec-recipe" not in out.problems
    assert "unverified for image" in notes and "no_such_method" in notes, notes
    assert "speculative-config check" in notes and "solar_open2" in notes, notes


@pytest.mark.parsers
def test_every_unknown_name_of_a_command_line_is_reported(parsed):
    out, *_ = parsed
    said = _said(out, "pe-names")
    for part in ("unrecognized arguments: --bogus-flag", "'bogus_engine' is not a name",
                 "'bogus_tool' is not a name", "'bogus_think' is not a name"):
        assert part in said, (part, said)
