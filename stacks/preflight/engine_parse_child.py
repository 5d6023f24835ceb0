"""Runs INSIDE a parser environment (.venv-parsers or .venv-parsers-<release>, `make parsers`),
never in the project's: stdlib plus the installed ai-dynamo and vLLM only. Reads jobs as JSON on
stdin, writes results as JSON on stdout; stacks.preflight.engine_parse starts it once per Dynamo
release for all the command lines of a `stacks check` that its cache does not hold.

A job is {"key", "kind": "worker"|"frontend"|"mocker", "argv": [...], "engine": bool}. A
worker's argv goes through `dynamo.vllm.args.parse_args(argv)` (Dynamo's own parser, then vLLM's
FlexibleArgumentParser for the rest: ai-dynamo 1.6.1 dynamo/vllm/args.py) and, when `engine`
(the model's config.json is in HF_HOME), `config.engine_args.create_engine_config()`, which checks
TP against heads, the context length and the KV cache dtype against the model. A frontend's argv
goes through `dynamo.frontend.main.parse_args()` (it reads sys.argv and exits 1 after logging
"Unknown arguments specified"). A local engine's mocker argv goes through
`dynamo.mocker.args.parse_args(argv)` (its argparse parser plus its own checks: worker type,
--num-workers, the port lists; ai-dynamo 1.6.1 dynamo/mocker/args.py). Every ArgumentParser
is made with allow_abbrev=False, so an abbreviated flag is refused: vLLM's parser and the
frontend's accept `--enable-prefix-cachin` otherwise. Names that no parser checks when it
parses (attention / MoE backend, vLLM's reasoning and tool-call parser) are checked against
the lists the installed releases define.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata as md
import io
import json
import logging
import os
import sys
import typing


def exact_option_names() -> None:
    init = argparse.ArgumentParser.__init__

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        init(self, *args, **kwargs)

    argparse.ArgumentParser.__init__ = __init__  # type: ignore[method-assign]


def force_cpu_platform() -> None:
    """vLLM >= 0.31 reads VLLM_TARGET_DEVICE=cpu; older ones detect a CPU build only by its
    version string, so set the platform as dynamo/frontend/main.py does itself."""
    import vllm.platforms

    if vllm.platforms.current_platform.device_type == "":
        from vllm.platforms.cpu import CpuPlatform

        vllm.platforms.current_platform = CpuPlatform()


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def run_parser(fn):
    """(True, result) or (False, the parser's own message in one line)."""
    err, cap = io.StringIO(), _Errors()
    logging.getLogger().addHandler(cap)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return True, fn()
    except SystemExit:
        text = err.getvalue()
        at = text.find("error:")
        return False, " ".join(text[at:].split()) if at >= 0 else "; ".join(cap.messages)
    except Exception as exc:  # noqa: BLE001 - the parser's own message is the point
        return False, f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    finally:
        logging.getLogger().removeHandler(cap)


def names() -> dict[str, set[str]]:
    from dynamo._core import get_reasoning_parser_names, get_tool_parser_names
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    try:
        from vllm.config.kernel import MoEBackend
        moe = {str(a) for a in typing.get_args(MoEBackend)}
    except ImportError:
        moe = set()
    return {"--attention-backend": set(AttentionBackendEnum.__members__),
            "--moe-backend": moe,
            "--reasoning-parser": set(ReasoningParserManager.list_registered()),
            "--tool-call-parser": set(ToolParserManager.list_registered()),
            "--dyn-reasoning-parser": set(get_reasoning_parser_names()),
            "--dyn-tool-call-parser": set(get_tool_parser_names())}


def named_values(argv: list[str]):
    """(flag, value) of every flag whose value must be a defined name."""
    for i, tok in enumerate(argv):
        flag, eq, value = tok.partition("=")
        value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        if flag == "--kernel-config":
            with contextlib.suppress(ValueError, AttributeError):
                if "moe_backend" in json.loads(value):
                    yield "--moe-backend", str(json.loads(value)["moe_backend"])
        else:
            yield flag, value


def check_names(argv: list[str], known: dict[str, set[str]]) -> str | None:
    for flag, value in named_values(argv):
        # vLLM reads backend names case-insensitively: AttentionBackendEnum[value.upper()]
        # (vllm/config/attention.py:175, vLLM 0.31.0)
        if flag in known and known[flag] and value.casefold() not in {
                n.casefold() for n in known[flag]}:
            return (f"argument {flag}: '{value}' is not a name this release defines "
                    f"(choose from {', '.join(sorted(known[flag]))})")
    return None


def parse_worker(argv: list[str], engine: bool, known: dict[str, set[str]]) -> dict:
    from dynamo.vllm.args import parse_args

    ok, cfg = run_parser(lambda: parse_args(argv))
    if not ok:
        return {"ok": False, "stage": "parse", "message": cfg}
    bad = check_names(argv, known)
    if bad:
        return {"ok": False, "stage": "names", "message": bad}
    if not engine:
        return {"ok": True, "stage": "parse"}
    ok, res = run_parser(lambda: cfg.engine_args.create_engine_config())
    return {"ok": True, "stage": "engine"} if ok else \
        {"ok": False, "stage": "engine", "message": res}


def parse_frontend(argv: list[str], known: dict[str, set[str]]) -> dict:
    import dynamo.frontend.main as frontend

    def go():
        old, sys.argv = sys.argv, ["dynamo.frontend", *argv]
        try:
            return frontend.parse_args()
        finally:
            sys.argv = old

    ok, res = run_parser(go)
    if not ok:
        return {"ok": False, "stage": "parse", "message": res}
    bad = check_names(argv, known)
    return {"ok": False, "stage": "names", "message": bad} if bad else \
        {"ok": True, "stage": "parse"}


def parse_mocker(argv: list[str]) -> dict:
    from dynamo.mocker.args import parse_args

    ok, res = run_parser(lambda: parse_args(argv))
    return {"ok": True, "stage": "parse"} if ok else \
        {"ok": False, "stage": "parse", "message": res}


def main() -> None:
    jobs = json.load(sys.stdin)
    exact_option_names()
    logging.disable(logging.WARNING)  # vLLM's INFO/WARNING chatter; errors are captured
    force_cpu_platform()
    known = names()
    results = {}
    for job in jobs:
        if job["kind"] == "frontend":
            results[job["key"]] = parse_frontend(job["argv"], known)
        elif job["kind"] == "mocker":
            results[job["key"]] = parse_mocker(job["argv"])
        else:
            results[job["key"]] = parse_worker(job["argv"], job["engine"], known)
    versions = {p: md.version(p) for p in ("ai-dynamo", "vllm")}
    json.dump({"versions": versions, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # vLLM's interpreter teardown costs seconds (atexit hooks, thread joins)
