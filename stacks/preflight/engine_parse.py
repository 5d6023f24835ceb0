"""Pre-flight asks the engine itself: every worker's and frontend's exact command line
(stacks.engine_argv, as the graph starts them) through Dynamo's and vLLM's own parsers.

`consult(stacks)` starts ONE process per Dynamo release in use, in that release's parser
environment (`make parsers`: .venv-parsers for ai-dynamo 1.6.1 / vLLM 0.31.0, .venv-parsers-1.5.0,
.venv-parsers-1.4.1; stacks/preflight/engine_releases.py maps each image to its release), for
all command lines its cache does not hold (stacks/preflight/engine_parse_child.py says what each
is run through), and returns per stack the refusals (a Problem naming the stack field that
produced the refused flag and the parser's own message) and notes. Results are cached by the
sha256 of the command line, the container's env, the worker's GPU, the model config, the
release and its environment's pins (.engine-parse-cache/, git-ignored): a repeated check costs
no process.

Each command line is parsed as its pod would run it (stacks/preflight/engine_lines.py): with the
env the graph gives that container and nothing of the host's shell (a `VLLM_*` or `DYN_*`
variable exported where `stacks check` runs changes nothing), and a worker's engine config is
then asked, at its GPU's compute capability, whether the attention backend it chose runs there.

An image is judged by its release's parsers (what they refuse is a refusal) only when it is
Dynamo's own runtime at that release (tag exactly X.Y.Z); a model's recipe build is parsed with
the environment of the vLLM it carries, and what that refuses is a note "unverified for image
...", never a pass and never a refusal. Local stacks run Dynamo 1.6.1's own frontend and mocker
(stacks/engine_argv/local.py), so their command lines are judged by 1.6.1's parsers. Without a
parser environment every other rule runs and one note says so (under CI it is an error).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from stacks.config.errors import Problem
from stacks.config.schema import ClusterConfig, StackConfig
from stacks.config.stack_file import PROJECT
from stacks.preflight.engine_blame import blame
from stacks.preflight.engine_lines import CommandLine, command_lines
from stacks.preflight.engine_model_config import config_json, write_snapshot
from stacks.preflight.engine_releases import NEWEST, ParserRelease, carried

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("engine_parse_child.py")
# The child's helper for GPU-dependent checks (imported by the child from its own folder).
CHILD_GPU = Path(__file__).with_name("engine_parse_gpu.py")
GET_THEM = "run `make parsers` (the parser environments, .venv-parsers*)"
CHILD_TIMEOUT_S = 900
# "off": skip the step, said in the note (the test suite's default: tests/conftest.py; the tests
# of this step turn it on). Anything else: consult the parsers.
SWITCH_ENV = "DYNAMO_BENCH_ENGINE_PARSE"
# What the child itself needs, whatever the pod's env says: vLLM on its CPU platform, the
# temporary offline HF cache with the snapshots, no usage reports.
PARSE_ENV = {"VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
             "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}

__all__ = ["CommandLine", "EngineParse", "cache_key", "command_lines", "consult", "in_ci",
           "not_consulted_note"]


def in_ci() -> bool:
    """CI=true (what CI services set) or DYNAMO_BENCH_CI (what .ci/run sets)."""
    return (os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
            or bool(os.environ.get("DYNAMO_BENCH_CI", "").strip()))


def cache_dir() -> Path:
    return Path(os.environ.get("DYNAMO_BENCH_PARSE_CACHE", ROOT / ".engine-parse-cache"))


@dataclass
class EngineParse:
    problems: dict[str, list[Problem]] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    # why the parsers were not consulted: "missing" (a parser environment) or "off"
    skipped: str | None = None
    missing: list[ParserRelease] = field(default_factory=list)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def _gpu_payload(line: CommandLine) -> dict | None:
    if line.gpu is None:
        return None
    return {"name": line.gpu.name, "capability": list(line.gpu.compute_capability)}


def cache_key(line: CommandLine) -> str:
    config = json.dumps(config_json(line.model), sort_keys=True) if line.model else ""
    blob = json.dumps([line.kind, line.argv, config, _digest(CHILD), _digest(CHILD_GPU),
                       line.release.dynamo, _digest(ROOT / line.release.requirements),
                       list(line.env), _gpu_payload(line)])
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
                try:
                    spec = json.loads(tok.split("=", 1)[1])
                except ValueError:
                    continue   # the child's speculative check says what is wrong with it
                if isinstance(spec, dict) and isinstance(spec.get("model"), str):
                    rev = spec.get("revision")
                    write_snapshot(hf_home, spec["model"], rev if isinstance(rev, str) else None)


def base_env(venv: Path, home: Path) -> dict[str, str]:
    """The child's own environment: a clean process (no host variable) in `home`, plus
    PARSE_ENV. Each job then runs with this plus its container's env (PARSE_ENV winning)."""
    return {"PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
            "LANG": "C.UTF-8", "HF_HOME": str(home / "hf"), **PARSE_ENV}


def _run_child(jobs: list[CommandLine], keys: list[str], venv: Path) -> dict[str, dict]:
    with tempfile.TemporaryDirectory(prefix="dynamo-bench-parse-") as tmp:
        env = base_env(venv, Path(tmp))
        _snapshots(Path(env["HF_HOME"]), jobs)
        payload = [{"key": k, "kind": j.kind, "argv": j.argv, "engine": j.model is not None,
                    "env": {**env, **dict(j.env), **PARSE_ENV, "HF_HOME": env["HF_HOME"]},
                    "gpu": _gpu_payload(j)}
                   for j, k in zip(jobs, keys, strict=True)]
        done = subprocess.run([str(venv / "bin" / "python"), str(CHILD)],
                              input=json.dumps(payload), capture_output=True, text=True,
                              env=env, cwd=tmp, timeout=CHILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        tail = " ".join(done.stderr.split()[-60:])
        raise RuntimeError(f"the engine parser process failed (exit {done.returncode}): {tail}")
    results: dict[str, dict] = json.loads(done.stdout)["results"]
    return results


MODULES = {"frontend": "dynamo.frontend", "worker": "dynamo.vllm", "mocker": "dynamo.mocker"}
STAGES = {"parse": "parser", "names": "name check",
          "speculative": "speculative-config check (vLLM's SpeculativeConfig fields)",
          "engine": "engine config (against the model's config.json)",
          "gpu": "attention backend check at the worker's GPU"}


def _refusals(result: dict) -> list[dict]:
    """Each refusal of a result (older cache entries hold one, at the top level)."""
    if result["ok"]:
        return []
    return result.get("refusals") or [{"stage": result["stage"], "message": result["message"]}]


def _judge(line: CommandLine, result: dict, out: EngineParse) -> None:
    for refusal in _refusals(result):
        _judge_one(line, refusal, out)
    if result.get("unchecked") and line.gpu is not None:
        out.notes.setdefault(line.stack, []).append(
            f"{line.where}: its attention backend was not checked at {line.gpu.name} "
            f"({line.release.label} lacks what the check asks: {result['unchecked']})")


def _judge_one(line: CommandLine, refusal: dict, out: EngineParse) -> None:
    message = refusal["message"]
    fields = blame(message, line.args, line.where)
    stage = STAGES[refusal["stage"]]
    if line.judged:
        also = f" (also {', '.join(fields[1:])})" if fields[1:] else ""
        where = f"the image ({line.image})" if line.image else "the local engine"
        fix = refusal.get("fix") or (
            f"change or remove that setting so {where}'s own parser accepts it "
            f"(`python3 -m {MODULES[line.kind]} --help` there lists its flags)")
        out.problems.setdefault(line.stack, []).append(Problem(
            f"{PROJECT}:{fields[0]}",
            f"{line.where}'s command line is refused by the engine's {stage} "
            f"({line.release.label}){also}: {message}", fix))
    else:
        build = carried(line.image, line.release)
        on = f"{line.release.label}; {build}" if build else line.release.label
        out.notes.setdefault(line.stack, []).append(
            f"{', '.join(fields)}: unverified for image {line.image} (parsed with "
            f"{on}, whose {stage} refuses it: {message})")


def consult(stacks: list[StackConfig], *, cache: Path | None = None,
            clusters: dict[str, ClusterConfig] | None = None) -> EngineParse:
    """Every command line of `stacks` through its release's parsers (one process per release
    for the lines the cache does not hold). `clusters`: the cluster each stack's workers run on,
    by stack name (an attached variant's effective cluster; default its own). `skipped` says
    why some were not consulted."""
    cache = cache or cache_dir()
    if os.environ.get(SWITCH_ENV) == "off":
        return EngineParse(skipped="off")
    clusters = clusters or {}
    lines = [line for s in stacks for line in command_lines(s, clusters.get(s.name))]
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
