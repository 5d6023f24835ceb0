"""Pre-flight asks the engine itself: every worker's and frontend's exact command line
(stacks.engine_argv, as the graph starts them) through Dynamo's and vLLM's own parsers.

`consult(stacks)` starts ONE process per Dynamo release in use, in that release's parser
environment (`make parsers`: .venv-parsers for ai-dynamo 1.6.1 / vLLM 0.31.0, .venv-parsers-1.5.0,
.venv-parsers-1.4.1; stacks/preflight/engine_releases.py maps each image to its release), for
all command lines its cache does not hold (stacks/preflight/engine_parse_child.py says what each
is run through), and returns per stack the refusals (a Problem naming the stack field that
produced the refused flag and the parser's own message) and notes. Results are cached by the
sha256 of the command line, the model config, the release and its environment's pins
(.engine-parse-cache/, git-ignored): a repeated check costs no process.

An image is judged by its release's parsers (what they refuse is a refusal) only when it is
Dynamo's own runtime at that release (tag exactly X.Y.Z); a model's recipe build is parsed with
the release it is built on, and what that refuses is a note "unverified for image ...", never a
pass and never a refusal. Local stacks run Dynamo 1.6.1's own frontend and mocker
(stacks/engine_argv/local.py), so their command lines are judged by 1.6.1's parsers. Without a
parser environment every other rule runs and one note says so (under CI=true it is an error).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from stacks.config.errors import Problem
from stacks.config.recipe_config import SPEC_CONFIG_SYNTHETIC_KEY
from stacks.config.schema import StackConfig, TransferBackend
from stacks.config.stack_file import PROJECT
from stacks.engine_argv.argv import Arg, frontend_argv, tokens, worker_argv
from stacks.engine_argv.kv import uses_rdma
from stacks.engine_argv.local import local_frontend_argv, local_mocker_argvs
from stacks.engine_argv.recipe import SPEC_ENV
from stacks.preflight.engine_model_config import config_json, write_snapshot
from stacks.preflight.engine_releases import (
    LOCAL_ENGINE,
    NEWEST,
    ParserRelease,
    judged_as_release,
    parser_release,
)

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("engine_parse_child.py")
GET_THEM = "run `make parsers` (the parser environments, .venv-parsers*)"
CHILD_TIMEOUT_S = 900
# "off": skip the step, said in the note (the test suite's default: tests/conftest.py; the tests
# of this step turn it on). Anything else: consult the parsers.
SWITCH_ENV = "DYNAMO_BENCH_ENGINE_PARSE"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def cache_dir() -> Path:
    return Path(os.environ.get("DYNAMO_BENCH_PARSE_CACHE", ROOT / ".engine-parse-cache"))


@dataclass(frozen=True)
class CommandLine:
    stack: str
    where: str            # "serving.workers[1]" or "serving.frontend"
    kind: str             # "worker" | "frontend" | "mocker"
    args: tuple[Arg, ...]
    image: str            # "" for the local engine's processes
    model: str | None     # the worker's model when its config.json can be written
    release: ParserRelease = NEWEST
    # what the parsers refuse is a refusal (the image is exactly the release; the local engine)
    judged: bool = False

    @property
    def argv(self) -> list[str]:
        return tokens(list(self.args))


@dataclass
class EngineParse:
    problems: dict[str, list[Problem]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    # why the parsers were not consulted: "missing" (a parser environment) or "off"
    skipped: str | None = None
    missing: list[ParserRelease] = field(default_factory=list)


def _expand(args: list[Arg], stack: StackConfig) -> list[Arg]:
    """Kubernetes' $(SPECULATIVE_CONFIG) expansion with the ConfigMap value the pod reads."""
    spec = stack.serving.speculative if stack.serving else None
    if spec is None:
        return args
    value = json.dumps(spec.config(synthetic=spec.config_key == SPEC_CONFIG_SYNTHETIC_KEY),
                       separators=(",", ":"))
    return [Arg(a.token.replace(f"$({SPEC_ENV})", value), a.field) for a in args]


def _aws_line(stack: StackConfig, where: str, kind: str, args: list[Arg], image: str,
              model: str | None) -> CommandLine:
    s = stack.serving
    assert s is not None
    release = parser_release(image, s.dynamo_version)
    return CommandLine(stack.name, where, kind, tuple(args), image, model, release,
                       judged_as_release(image, s.dynamo_version, release))


def command_lines(stack: StackConfig) -> list[CommandLine]:
    """Every command line the stack starts, frontend first: an aws serving stack's graph (the
    EFA flag: a nixl-libfabric stack's graph is built only on EFA nodes), or the local engine's
    frontend and mockers (one per worker group and role)."""
    s = stack.serving
    if s is None:
        return []
    if stack.target == "local":
        return [CommandLine(stack.name, "serving.frontend", "frontend",
                            tuple(local_frontend_argv(stack)), "", None, LOCAL_ENGINE, True),
                *(CommandLine(stack.name, f"serving.workers[{i}]", "mocker", tuple(args), "",
                              None, LOCAL_ENGINE, True)
                  for i, args in enumerate(local_mocker_argvs(stack)))]
    rdma = uses_rdma(s, s.transfer == TransferBackend.NIXL_LIBFABRIC)
    model = stack.model.id if config_json(stack.model.id) is not None else None
    out = [_aws_line(stack, "serving.frontend", "frontend", frontend_argv(stack),
                     s.frontend.image or s.image, None)]
    for i in range(len(s.workers)):
        out.append(_aws_line(stack, f"serving.workers[{i}]", "worker",
                             _expand(worker_argv(stack, i, rdma=rdma), stack), s.image, model))
    return out


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def cache_key(line: CommandLine) -> str:
    config = json.dumps(config_json(line.model), sort_keys=True) if line.model else ""
    blob = json.dumps([line.kind, line.argv, config, _digest(CHILD), line.release.dynamo,
                       _digest(ROOT / line.release.requirements)])
    return hashlib.sha256(blob.encode()).hexdigest()


def _snapshots(hf_home: Path, lines: list[CommandLine]) -> None:
    """A snapshot for every checkpoint a worker names: the model and a speculative draft."""
    for line in lines:
        argv = line.argv
        for i, tok in enumerate(argv[:-1]):
            if tok == "--model":
                rev = argv[argv.index("--revision") + 1] if "--revision" in argv else None
                write_snapshot(hf_home, argv[i + 1], rev)
        for tok in argv:
            if tok.startswith("--speculative-config="):
                spec = json.loads(tok.split("=", 1)[1])
                if spec.get("model"):
                    write_snapshot(hf_home, spec["model"], spec.get("revision"))


def _run_child(jobs: list[CommandLine], keys: list[str], venv: Path) -> dict[str, dict]:
    with tempfile.TemporaryDirectory(prefix="dynamo-bench-hf-") as hf:
        _snapshots(Path(hf), jobs)
        payload = [{"key": k, "kind": j.kind, "argv": j.argv, "engine": j.model is not None}
                   for j, k in zip(jobs, keys, strict=True)]
        env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HOME": hf, "HF_HUB_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        done = subprocess.run([str(venv / "bin" / "python"), str(CHILD)],
                              input=json.dumps(payload), capture_output=True, text=True,
                              env=env, timeout=CHILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        tail = " ".join(done.stderr.split()[-60:])
        raise RuntimeError(f"the engine parser process failed (exit {done.returncode}): {tail}")
    results: dict[str, dict] = json.loads(done.stdout)["results"]
    return results


def _quoted(token: str, message: str) -> bool:
    return re.search(rf"(^|[\s'\"\[,(=]){re.escape(token)}($|[\s'\"\],:)=])", message) is not None


# How vLLM 0.31.0's engine-config checks name a setting in words, not as a flag, and the flag
# that sets it (vllm/config/model.py verify_with_parallel_config: "must be divisible by tensor
# parallel size"; _get_and_verify_max_len: "User-specified max_model_len (N) is greater than
# the derived max_model_len"; the other fields' own names in vllm/config/*.py).
ENGINE_CONFIG_SETTINGS = (
    (re.compile(r"tensor[ _]parallel[ _]size", re.I), "--tensor-parallel-size"),
    (re.compile(r"pipeline[ _]parallel[ _]size", re.I), "--pipeline-parallel-size"),
    (re.compile(r"data[ _]parallel[ _]size", re.I), "--data-parallel-size"),
    (re.compile(r"max_model_len", re.I), "--max-model-len"),
    (re.compile(r"kv[ _]cache[ _]dtype", re.I), "--kv-cache-dtype"),
    (re.compile(r"max_num_batched_tokens", re.I), "--max-num-batched-tokens"),
    (re.compile(r"max_num_seqs", re.I), "--max-num-seqs"),
    (re.compile(r"gpu_memory_utilization", re.I), "--gpu-memory-utilization"),
    (re.compile(r"block[ _]size", re.I), "--block-size"),
)


def engine_config_flags(message: str) -> list[str]:
    """The flags an engine-config message names in words, in the order of ENGINE_CONFIG_SETTINGS."""
    return [flag for pattern, flag in ENGINE_CONFIG_SETTINGS if pattern.search(message)]


def blame(message: str, args: tuple[Arg, ...], where: str) -> list[str]:
    """The stack fields of the tokens the parser's message names (flags, or an extraArgs entry
    such as garbage or an empty string), or of the setting an engine-config message names in
    words (the last occurrence of its flag: the one the engine used); `where` when it names
    none."""
    fields = _named_tokens(message, args)
    if not fields:
        for flag in engine_config_flags(message):
            last = next((a.field for a in reversed(args)
                         if a.token.split("=", 1)[0] == flag), None)
            if last is not None and last not in fields:
                fields.append(last)
    return fields or [where]


def _named_tokens(message: str, args: tuple[Arg, ...]) -> list[str]:
    fields: list[str] = []
    unrecognized = "unrecognized arguments" in message or "Unknown arguments" in message
    flag = re.search(r"argument (--[\w-]+)", message)
    for a in reversed(args):
        name = a.token.split("=", 1)[0]
        extra = ".extraArgs[" in a.field
        hit = (flag is not None and name in (flag[1], "--kernel-config" if
                                             flag[1] == "--moe-backend" else flag[1]))
        if flag is None and name and (name.startswith("-") or extra):
            hit = _quoted(name, message)
        if unrecognized and extra and a.token == "":
            hit = True
        if hit and a.field not in fields:
            fields.append(a.field)
        if hit and flag is not None:
            break  # argparse judges the last occurrence of a flag
    return list(reversed(fields))


MODULES = {"frontend": "dynamo.frontend", "worker": "dynamo.vllm", "mocker": "dynamo.mocker"}


def _judge(line: CommandLine, result: dict, out: EngineParse) -> None:
    if result["ok"]:
        return
    fields = blame(result["message"], line.args, line.where)
    stage = {"parse": "parser", "names": "name check",
             "engine": "engine config (against the model's config.json)"}[result["stage"]]
    if line.judged:
        also = f" (also {', '.join(fields[1:])})" if fields[1:] else ""
        where = f"the image ({line.image})" if line.image else "the local engine"
        out.problems.setdefault(line.stack, []).append(Problem(
            f"{PROJECT}:{fields[0]}",
            f"{line.where}'s command line is refused by the engine's {stage} "
            f"({line.release.label}){also}: {result['message']}",
            f"change or remove that setting so {where}'s own parser accepts it "
            f"(`python3 -m {MODULES[line.kind]} --help` there lists its flags)"))
    else:
        out.notes.setdefault(line.stack, []).append(
            f"{', '.join(fields)}: unverified for image {line.image} (parsed with "
            f"{line.release.label}, whose {stage} refuses it: {result['message']})")


def consult(stacks: list[StackConfig], *, cache: Path | None = None) -> EngineParse:
    """Every command line of `stacks` through its release's parsers (one process per release
    for the lines the cache does not hold). `skipped` says why some were not consulted."""
    cache = cache or cache_dir()
    if os.environ.get(SWITCH_ENV) == "off":
        return EngineParse(skipped="off")
    lines = [line for s in stacks for line in command_lines(s)]
    keys = [cache_key(line) for line in lines]
    cached: dict[str, dict] = {}
    for k in set(keys):
        path = cache / f"{k}.json"
        if path.exists():
            cached[k] = json.loads(path.read_text())
    todo = {k: line for k, line in zip(keys, lines, strict=True) if k not in cached}
    out = EngineParse()
    for release in dict.fromkeys(line.release for line in todo.values()):
        jobs = {k: line for k, line in todo.items() if line.release == release}
        where = release.venv()
        if not (where / "bin" / "python").exists():
            out.skipped = "missing"
            out.missing.append(release)
            continue
        fresh = _run_child(list(jobs.values()), list(jobs), where)
        cache.mkdir(parents=True, exist_ok=True)
        for k, res in fresh.items():
            (cache / f"{k}.json").write_text(json.dumps(res))
        cached |= fresh
    for k, line in zip(keys, lines, strict=True):
        if k in cached:
            _judge(line, cached[k], out)
    return out


def not_consulted_note(skipped: str, missing: list[ParserRelease] | None = None) -> str:
    """One note for the releases whose parsers were not consulted (all of them when off)."""
    if skipped == "off":
        which, why = "", f"{SWITCH_ENV}=off"
    else:
        gone = missing or [NEWEST]
        which = " for " + ", ".join(r.label for r in gone)
        why = "no parser environment at " + ", ".join(str(r.venv()) for r in gone)
    return (f"the engine's own parsers{which} were not consulted ({why}): {GET_THEM} to have "
            "every worker and frontend command line parsed as the pods will start it")
