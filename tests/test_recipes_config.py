"""Facts the recipe settings rely on, checked against the installed ai-dynamo 1.6.1 engine
(/work/main/.venv-engine): the Dynamo parser names, which flags the frontend accepts, and that
it refuses the `--dyn-*` parser flags (so the graph puts them on the workers)."""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest
from graph_stacks import graph_of
from recipe_stacks import RECIPES

from stacks.config.recipe_config import DYNAMO_REASONING_PARSERS, DYNAMO_TOOL_CALL_PARSERS

ENGINE = Path(__file__).resolve().parents[1] / ".venv-engine" / "bin" / "python"
# They start the engine's frontend: tests/conftest.py skips them locally without .venv-engine
# and fails them in CI.
needs_engine = pytest.mark.engine
# Loopback only, no etcd/NATS: the frontend must not advertise or reach anything else.
LOOPBACK_ENV = {"DYN_DISCOVERY_BACKEND": "file", "DYN_REQUEST_PLANE": "tcp",
                "DYN_EVENT_PLANE": "zmq", "DYN_TCP_RPC_HOST": "127.0.0.1",
                "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
                "DYN_EVENT_PLANE_HOST": "127.0.0.1", "DYN_SYSTEM_HOST": "127.0.0.1",
                "HF_HUB_OFFLINE": "1"}


def _engine(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **LOOPBACK_ENV, "DYN_FILE_KV": str(tmp / "kv"), "HOME": str(tmp)}
    return subprocess.run([str(ENGINE), *args], capture_output=True, text=True, timeout=180,
                          env=env, cwd=tmp)


@needs_engine
def test_parser_names_are_the_installed_engines(tmp_path: Path) -> None:
    code = ("from dynamo._core import get_tool_parser_names as t, "
            "get_reasoning_parser_names as r; print(sorted(t())); print(sorted(r()))")
    out = _engine("-c", code, tmp=tmp_path)
    assert out.returncode == 0, out.stderr
    tools, reasoning = (ast.literal_eval(line) for line in out.stdout.splitlines()[-2:])
    assert set(tools) == DYNAMO_TOOL_CALL_PARSERS
    assert set(reasoning) == DYNAMO_REASONING_PARSERS


@needs_engine
def test_frontend_refuses_dyn_parser_flags(tmp_path: Path) -> None:
    out = _engine("-m", "dynamo.frontend", "--http-host", "127.0.0.1", "--http-port", "1",
                  "--dyn-tool-call-parser", "hermes", tmp=tmp_path)
    assert out.returncode != 0
    assert "Unknown arguments specified: ['--dyn-tool-call-parser', 'hermes']" in \
        out.stdout + out.stderr


@needs_engine
def test_the_frontend_flags_the_graph_emits_exist_in_1_6_1(tmp_path: Path) -> None:
    help_text = _engine("-m", "dynamo.frontend", "--help", tmp=tmp_path).stdout
    emitted = set()
    for name in RECIPES:
        frontend = next(c for c in graph_of(name)["spec"]["components"]
                        if c["type"] == "frontend")
        args = frontend["podTemplate"]["spec"]["containers"][0]["args"]
        emitted |= {a.split("=")[0] for a in args if a.startswith("--")}
    # flags the builder writes itself; the vLLM chat processor's own flags (parsers, chat
    # template kwargs, max model len) are parsed by vLLM inside the recipe image
    vllm_side = {"--tool-call-parser", "--reasoning-parser", "--enable-auto-tool-choice",
                 "--default-chat-template-kwargs", "--max-model-len"}
    for flag in sorted(emitted - vllm_side):
        assert f"{flag} " in help_text or f"{flag}," in help_text or f"{flag}\n" in help_text, \
            flag
    assert {"--kv-cache-block-size", "--trust-remote-code", "--dyn-chat-processor"} <= emitted

