"""Pre-flight asks the engine itself: every worker's and frontend's exact command line
(stacks.engine_argv, as the graph starts them) through Dynamo's and vLLM's own parsers.

`consult(stacks)` starts ONE process in the parser environment (.venv-parsers, `make parsers`:
ai-dynamo 1.6.1 / vLLM 0.31.0 on CPU) for all command lines its cache does not hold
(stacks/preflight/engine_parse_child.py says what each is run through), and returns per stack
the refusals (a Problem naming the stack field that produced the refused flag and the parser's
own message) and notes. Results are cached by the sha256 of the command line, the model config
and the parser environment's pins (.engine-parse-cache/, git-ignored): a repeated check costs
no process.

An image is judged by these parsers only when it is Dynamo's own runtime at the installed
version (tag exactly X.Y.Z); any other (a model's recipe build, another release) is parsed with
the installed pair and what it refuses is a note "unverified for image ...", never a pass and
never a refusal. Local stacks run the mocker and are not parsed here. Without the parser
environment every other rule runs and one note says so (under CI=true it is an error).
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
from stacks.engine_argv.recipe import SPEC_ENV
from stacks.preflight.engine_model_config import config_json, write_snapshot

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("engine_parse_child.py")
REQUIREMENTS = ROOT / "requirements-parsers.txt"
# The pair requirements-parsers.txt pins (ai-dynamo 1.6.1 pins vllm 0.31.0 in its [vllm] extra).
INSTALLED_DYNAMO, INSTALLED_VLLM = "1.6.1", "0.31.0"
GET_THEM = "run `make parsers` (the parser environment, .venv-parsers)"
CHILD_TIMEOUT_S = 900
# "off": skip the step, said in the note (the test suite's default: tests/conftest.py; the tests
# of this step turn it on). Anything else: consult the parsers.
SWITCH_ENV = "DYNAMO_BENCH_ENGINE_PARSE"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def parsers_venv() -> Path:
    return Path(os.environ.get("DYNAMO_BENCH_PARSERS_VENV", ROOT / ".venv-parsers"))


def cache_dir() -> Path:
    return Path(os.environ.get("DYNAMO_BENCH_PARSE_CACHE", ROOT / ".engine-parse-cache"))


@dataclass(frozen=True)
class CommandLine:
    stack: str
    where: str            # "serving.workers[1]" or "serving.frontend"
    kind: str             # "worker" | "frontend"
    args: tuple[Arg, ...]
    image: str
    model: str | None     # the worker's model when its config.json can be written

    @property
    def argv(self) -> list[str]:
        return tokens(list(self.args))


@dataclass
class EngineParse:
    problems: dict[str, list[Problem]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    # why the parsers were not consulted: "missing" (no parser environment) or "off"
    skipped: str | None = None
    versions: str = f"dynamo {INSTALLED_DYNAMO} / vllm {INSTALLED_VLLM}"


def _expand(args: list[Arg], stack: StackConfig) -> list[Arg]:
    """Kubernetes' $(SPECULATIVE_CONFIG) expansion with the ConfigMap value the pod reads."""
    spec = stack.serving.speculative if stack.serving else None
    if spec is None:
        return args
    value = json.dumps(spec.config(synthetic=spec.config_key == SPEC_CONFIG_SYNTHETIC_KEY),
                       separators=(",", ":"))
    return [Arg(a.token.replace(f"$({SPEC_ENV})", value), a.field) for a in args]


def command_lines(stack: StackConfig) -> list[CommandLine]:
    """Every command line the stack's graph starts (an aws serving stack), frontend first.
    The EFA flag: a nixl-libfabric stack's graph is built only on EFA nodes."""
    s = stack.serving
    if s is None or stack.target != "aws":
        return []
    rdma = uses_rdma(s, s.transfer == TransferBackend.NIXL_LIBFABRIC)
    model = stack.model.id if config_json(stack.model.id) is not None else None
    out = [CommandLine(stack.name, "serving.frontend", "frontend",
                       tuple(frontend_argv(stack)), s.frontend.image or s.image, None)]
    for i in range(len(s.workers)):
        out.append(CommandLine(stack.name, f"serving.workers[{i}]", "worker",
                               tuple(_expand(worker_argv(stack, i, rdma=rdma), stack)),
                               s.image, model))
    return out


def image_is_installed_release(image: str, dynamo_version: str) -> bool:
    """Dynamo's own runtime at the installed version: the tag is exactly X.Y.Z (no model build
    suffix, no digest) and the stack says that version."""
    tag = "" if "@sha256:" in image else image.rsplit("/", 1)[-1].partition(":")[2]
    return tag == dynamo_version == INSTALLED_DYNAMO


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def cache_key(line: CommandLine) -> str:
    config = json.dumps(config_json(line.model), sort_keys=True) if line.model else ""
    blob = json.dumps([line.kind, line.argv, config, _digest(CHILD), _digest(REQUIREMENTS)])
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


def _judge(line: CommandLine, result: dict, stack: StackConfig, out: EngineParse) -> None:
    if result["ok"]:
        return
    fields = blame(result["message"], line.args, line.where)
    stage = {"parse": "parser", "names": "name check",
             "engine": "engine config (against the model's config.json)"}[result["stage"]]
    s = stack.serving
    assert s is not None
    if image_is_installed_release(line.image, s.dynamo_version):
        also = f" (also {', '.join(fields[1:])})" if fields[1:] else ""
        out.problems.setdefault(line.stack, []).append(Problem(
            f"{PROJECT}:{fields[0]}",
            f"{line.where}'s command line is refused by the engine's {stage} "
            f"({out.versions}){also}: {result['message']}",
            "change or remove that setting so the image's own parser accepts it "
            f"(`python3 -m {'dynamo.frontend' if line.kind == 'frontend' else 'dynamo.vllm'} "
            "--help` in the image lists its flags)"))
    else:
        out.notes.setdefault(line.stack, []).append(
            f"{', '.join(fields)}: unverified for image {line.image} (parsed with "
            f"{out.versions}, whose {stage} refuses it: {result['message']})")


def consult(stacks: list[StackConfig], *, venv: Path | None = None,
            cache: Path | None = None) -> EngineParse:
    """Every command line of `stacks` through the engine's parsers (one process for the lines
    the cache does not hold). `skipped` says why they were not consulted."""
    venv, cache = venv or parsers_venv(), cache or cache_dir()
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
    if todo:
        if not (venv / "bin" / "python").exists():
            out.skipped = "missing"
            return out
        fresh = _run_child(list(todo.values()), list(todo), venv)
        cache.mkdir(parents=True, exist_ok=True)
        for k, res in fresh.items():
            (cache / f"{k}.json").write_text(json.dumps(res))
        cached |= fresh
    by_name = {s.name: s for s in stacks}
    for k, line in zip(keys, lines, strict=True):
        _judge(line, cached[k], by_name[line.stack], out)
    return out


def not_consulted_note(skipped: str) -> str:
    why = (f"{SWITCH_ENV}=off" if skipped == "off"
           else f"no parser environment at {parsers_venv()}")
    return (f"the engine's own parsers (Dynamo {INSTALLED_DYNAMO} / vLLM {INSTALLED_VLLM}) "
            f"were not consulted ({why}): {GET_THEM} to have every worker and frontend command "
            "line parsed as the pods will start it")
