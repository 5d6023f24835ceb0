"""How the local engine is composed from a stack (pure): processes, flags, KV blocks, env."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacks.config.loader import load_stack, parse_config
from stacks.preflight.run import check_stack
from workloads.model_folder import build_model_folder, folder_files, snapshot_id
from workloads.targets.base import TargetError
from workloads.targets.local import (
    engine_env,
    frontend_argv,
    mocker_argv,
    mocker_blocks,
    registered_workers,
    worker_specs,
)

PY = Path("/engine/bin/python")


def _capacity(name):
    return [m.kv_capacity_tokens for m in check_stack(name).memory]


def test_kv_blocks_come_from_preflight_capacity():
    stack = load_stack("local-agg")
    cap = _capacity("local-agg")
    assert mocker_blocks(stack, cap) == [cap[0] // 64]
    assert cap[0] // 64 > 10_000   # A100-40GB TP4 for Qwen3-30B-A3B: ~777k tokens


def test_num_gpu_blocks_overrides_preflight():
    raw = load_stack("local-agg").model_dump(by_alias=True, exclude={"name"})
    raw["serving"]["mocker"]["numGpuBlocks"] = 512
    assert mocker_blocks(parse_config("x", raw), [10**6]) == [512]


def test_too_little_kv_is_refused_with_the_field():
    with pytest.raises(TargetError, match=r"serving.workers\[0\].*numGpuBlocks"):
        mocker_blocks(load_stack("local-agg"), [100])


def test_aggregated_kv_router_stack():
    stack = load_stack("local-agg-kv")
    specs = worker_specs(stack, [1000])
    assert [s.name for s in specs] == ["worker-0", "worker-1"]
    fe = frontend_argv(PY, stack, 20001)
    assert fe[fe.index("--router-mode") + 1] == "kv"
    assert fe[fe.index("--http-host") + 1] == "127.0.0.1"
    argv = mocker_argv(PY, stack, specs[0], Path("/snap"))
    assert argv[argv.index("--num-gpu-blocks-override") + 1] == "1000"
    assert argv[argv.index("--block-size") + 1] == "64"
    assert argv[argv.index("--model-name") + 1] == "Qwen/Qwen3-30B-A3B"
    assert "--disaggregation-mode" not in argv


def test_disaggregated_stack_gets_prefill_and_decode_mockers():
    stack = load_stack("local-disagg")
    specs = worker_specs(stack, [10, 20])
    assert [(s.name, s.role.value, s.blocks) for s in specs] == [
        ("prefill-0", "prefill", 10), ("decode-0", "decode", 20)]
    modes = [mocker_argv(PY, stack, s, Path("/snap")) for s in specs]
    assert [a[a.index("--disaggregation-mode") + 1] for a in modes] == ["prefill", "decode"]
    fe = frontend_argv(PY, stack, 20001)
    assert "--enforce-disagg" in fe and fe[fe.index("--router-mode") + 1] == "round-robin"


def test_engine_env_keeps_every_plane_on_loopback(tmp_path):
    env = engine_env({"PATH": "/bin"}, tmp_path, (20001, 20002), {"HF_HUB_OFFLINE": "1"})
    assert env["DYN_DISCOVERY_BACKEND"] == "file" and env["DYN_FILE_KV"] == str(tmp_path)
    for key in ("DYN_TCP_RPC_HOST", "DYN_TCP_RESPONSE_STREAM_HOST", "DYN_EVENT_PLANE_HOST",
                "DYN_SYSTEM_HOST"):
        assert env[key] == "127.0.0.1"
    assert env["DYN_ZMQ_BROKER_URL"] == ("xsub=tcp://127.0.0.1:20001 , "
                                         "xpub=tcp://127.0.0.1:20002")


def test_registered_workers_counts_generate_instances(tmp_path):
    inst = tmp_path / "v1" / "instances"
    inst.mkdir(parents=True)
    for name in ("dynamo%2Fbackend%2Fgenerate%2Fabc", "dynamo%2Fprefill%2Fgenerate%2Fdef",
                 "dynamo%2Fbackend%2Fworker%5Fkv%5Fquery%5Fsource%5F1%2Fabc"):
        (inst / name).write_text("{}")
    assert registered_workers(tmp_path) == 2


def test_model_folder_is_an_hf_cache_entry_with_the_real_geometry(tmp_path):
    stack = load_stack("local-agg")
    folder = build_model_folder(tmp_path, stack.model.id, stack.model.arch)
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-30B-A3B"
    rev = (repo / "refs" / "main").read_text()
    assert len(rev) == 40 and folder.snapshot == repo / "snapshots" / rev
    import json
    cfg = json.loads((folder.snapshot / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["num_key_value_heads"], cfg["head_dim"],
            cfg["num_experts"]) == (48, 4, 128, 128)
    tok_cfg = json.loads((folder.snapshot / "tokenizer_config.json").read_text())
    assert "im_start" in tok_cfg["chat_template"]
    assert folder.env["HF_HUB_OFFLINE"] == "1" and folder.env["HF_HOME"] == str(tmp_path)


def test_model_folder_is_reproducible(tmp_path):
    stack = load_stack("local-agg")
    a = folder_files(stack.model.id, stack.model.arch)
    b = folder_files(stack.model.id, stack.model.arch)
    assert snapshot_id(a) == snapshot_id(b)


def test_aiperf_loads_the_tokenizer_offline_by_repo_id(tmp_path, monkeypatch):
    """The HF-cache layout is what lets `--tokenizer Qwen/Qwen3-30B-A3B` work offline."""
    stack = load_stack("local-agg")
    folder = build_model_folder(tmp_path, stack.model.id, stack.model.arch)
    for k, v in folder.env.items():
        monkeypatch.setenv(k, v)
    from aiperf.common.tokenizer import Tokenizer
    tok = Tokenizer.from_pretrained(stack.model.id, resolve_alias=False)
    ids = tok.encode("The router caches the prefix.")
    assert ids and tok.decode(ids).strip() == "The router caches the prefix."
