"""Runs INSIDE a parser environment (.venv-parsers or .venv-parsers-<release>, `make parsers`),
never in the project's: stdlib plus the installed ai-dynamo and vLLM only. Reads jobs as JSON on
stdin, writes results as JSON on stdout; stacks.preflight.engine_parse starts it once per Dynamo
release for all the command lines of a `stacks check` that its cache does not hold.

A job is {"key", "kind": "worker"|"frontend"|"mocker", "argv": [...], "engine": bool, "env":
{...}, "gpu": {"name", "capability": [major, minor]} | null}; each job runs with os.environ set
to exactly its container's env (the process itself starts without the host's). A worker's argv
goes through `dynamo.vllm.args.parse_args(argv)` (Dynamo's own parser, then vLLM's
FlexibleArgumentParser for the rest: ai-dynamo 1.6.1 dynamo/vllm/args.py; tokens neither knows
are collected and the rest parsed on), the names no parser checks (attention / MoE backend,
vLLM's reasoning and tool-call parser: against the lists the installed release defines, every
one reported), the speculative config against vLLM's SpeculativeConfig fields, and, when
`engine` (the model's config.json is in HF_HOME), `config.engine_args.create_engine_config(
usage_context=OPENAI_API_SERVER)` as Dynamo's worker calls it, which checks TP against heads,
the context length and the KV cache dtype against the model; then the chosen attention backend
at the worker's GPU (engine_parse_gpu.py). A frontend's argv goes through
`dynamo.frontend.main.parse_args()` (it reads sys.argv and exits 1 after logging "Unknown
arguments specified"). A local engine's mocker argv goes through
`dynamo.mocker.args.parse_args(argv)` (its argparse parser plus its own checks: worker type,
--num-workers, the port lists; ai-dynamo 1.6.1 dynamo/mocker/args.py). Every ArgumentParser
is made with allow_abbrev=False, so an abbreviated flag is refused: vLLM's parser and the
frontend's accept `--enable-prefix-cachin` otherwise. A result lists every refusal found
({"ok", "refusals": [{"stage", "message", "fix"?}], "unchecked"?}).
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


def check_names(argv: list[str], known: dict[str, set[str]]) -> list[str]:
    """Every value that is no name this release defines (not only the first)."""
    bad = []
    for flag, value in named_values(argv):
        # vLLM reads backend names case-insensitively: AttentionBackendEnum[value.upper()]
        # (vllm/config/attention.py:175, vLLM 0.31.0)
        if flag in known and known[flag] and value.casefold() not in {
                n.casefold() for n in known[flag]}:
            bad.append(f"argument {flag}: '{value}' is not a name this release defines "
                       f"(choose from {', '.join(sorted(known[flag]))})")
    return bad


@contextlib.contextmanager
def collect_unrecognized():
    """argparse's parse_args without its exit on unknown tokens: they are collected and the
    rest is parsed on (parse_args is parse_known_args plus that error, Lib/argparse.py), so one
    unknown flag does not hide what else the command line holds."""
    leftovers: list[str] = []
    original = argparse.ArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        leftovers.extend(extras)
        return namespace

    argparse.ArgumentParser.parse_args = parse_args  # type: ignore[method-assign]
    try:
        yield leftovers
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]


def speculative_spec(engine_args) -> dict | None:
    """The dict vLLM builds its SpeculativeConfig from: --speculative-config, plus --spec-method
    / --spec-model / --spec-tokens, keys with '-' read as '_' (EngineArgs.
    create_speculative_config, vllm/engine/arg_utils.py:2023-2062 in vLLM 0.31.0; the same in
    0.28.0 and 0.26.0)."""
    spec = dict(getattr(engine_args, "speculative_config", None) or {})
    for key, attr in (("method", "spec_method"), ("model", "spec_model"),
                      ("num_speculative_tokens", "spec_tokens")):
        if getattr(engine_args, attr, None) is not None:
            spec.setdefault(key, getattr(engine_args, attr))
    return {str(k).replace("-", "_"): v for k, v in spec.items()} or None


def check_speculative(spec: dict) -> list[str]:
    """Each key of `spec` against vLLM's SpeculativeConfig fields (a pydantic dataclass that
    forbids other keys, vllm/config/utils.py `config`): an unknown key, or a value its field's
    type refuses (`method` is the Literal SpeculativeMethod, vllm/config/speculative.py)."""
    import pydantic
    from vllm.config.speculative import SpeculativeConfig

    fields = SpeculativeConfig.__pydantic_fields__
    bad = []
    for key, value in spec.items():
        # vLLM adds these two itself (create_speculative_config)
        if key not in fields or key in ("target_model_config", "target_parallel_config"):
            bad.append(f"--speculative-config: '{key}' is not a field of vLLM's "
                       f"SpeculativeConfig (fields: {', '.join(sorted(fields))})")
            continue
        try:
            pydantic.TypeAdapter(fields[key].annotation).validate_python(value)
        except pydantic.ValidationError as exc:
            said = "; ".join(" ".join(str(e["msg"]).split()) for e in exc.errors())
            bad.append(f"--speculative-config: {key}={json.dumps(value)} is refused by "
                       f"SpeculativeConfig: {said}")
    return bad


def parse_worker(argv: list[str], engine: bool, known: dict[str, set[str]],
                 gpu: dict | None) -> dict:
    """Every refusal of a worker's command line: the parser's (unknown tokens collected, the
    rest parsed on), every unknown name, the speculative config's fields, then the engine config
    (with Dynamo's usage context: dynamo/vllm/main.py:686-687, ai-dynamo 1.6.1; main.py:672-673
    in 1.5.0, 560-561 in 1.4.1) and the chosen attention backend at the worker's GPU."""
    from dynamo.vllm.args import parse_args

    refusals: list[dict] = []
    with collect_unrecognized() as leftovers:
        ok, cfg = run_parser(lambda: parse_args(argv))
    if not ok:
        return _result([{"stage": "parse", "message": cfg}])
    if leftovers:
        refusals.append({"stage": "parse",
                         "message": f"error: unrecognized arguments: {' '.join(leftovers)}"})
    refusals += [{"stage": "names", "message": m} for m in check_names(argv, known)]
    spec = speculative_spec(cfg.engine_args)
    bad_spec = check_speculative(spec) if spec else []
    refusals += [{"stage": "speculative", "message": m} for m in bad_spec]
    if not engine or bad_spec:
        return _result(refusals)
    from vllm.usage.usage_lib import UsageContext

    ok, res = run_parser(lambda: cfg.engine_args.create_engine_config(
        usage_context=UsageContext.OPENAI_API_SERVER))
    if not ok:
        return _result([*refusals, {"stage": "engine", "message": res}])
    unchecked = None
    if gpu is not None:
        # its sibling module, on sys.path as the script's own folder (no project import)
        from engine_parse_gpu import check_attention  # type: ignore[import-not-found]

        refusal, unchecked = check_attention(res, gpu)
        refusals += [refusal] if refusal else []
    return _result(refusals, unchecked)


def _result(refusals: list[dict], unchecked: str | None = None) -> dict:
    out: dict = {"ok": not refusals, "refusals": refusals}
    if refusals:
        out |= {"stage": refusals[0]["stage"], "message": refusals[0]["message"]}
    if unchecked:
        out["unchecked"] = unchecked
    return out


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
        return _result([{"stage": "parse", "message": res}])
    return _result([{"stage": "names", "message": m} for m in check_names(argv, known)])


def parse_mocker(argv: list[str]) -> dict:
    from dynamo.mocker.args import parse_args

    ok, res = run_parser(lambda: parse_args(argv))
    return _result([] if ok else [{"stage": "parse", "message": res}])


def as_the_pod(env: dict[str, str]) -> None:
    """The job's container env, and nothing else, for the parsers that read env defaults
    (Dynamo's env_or_default, dynamo/common/configuration/utils.py:83) and vLLM's envs
    (read when used, vllm/envs.py `__getattr__`)."""
    os.environ.clear()
    os.environ.update(env)


def main() -> None:
    jobs = json.load(sys.stdin)
    exact_option_names()
    logging.disable(logging.WARNING)  # vLLM's INFO/WARNING chatter; errors are captured
    force_cpu_platform()
    known = names()
    results = {}
    for job in jobs:
        as_the_pod(job["env"])
        if job["kind"] == "frontend":
            results[job["key"]] = parse_frontend(job["argv"], known)
        elif job["kind"] == "mocker":
            results[job["key"]] = parse_mocker(job["argv"])
        else:
            results[job["key"]] = parse_worker(job["argv"], job["engine"], known, job["gpu"])
    versions = {p: md.version(p) for p in ("ai-dynamo", "vllm")}
    json.dump({"versions": versions, "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # vLLM's interpreter teardown costs seconds (atexit hooks, thread joins)
