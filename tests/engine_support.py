"""Helpers for the tests that run the real local Dynamo engine and the real AIPerf CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
ENGINE_PYTHON = REPO / ".venv-engine" / "bin" / "python"

# CI=true (set by .ci/run): a test whose engine or Prometheus is missing fails (conftest.py).
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
# The marker is what makes a test need the engine (conftest.py skips it locally, fails it in
# CI when .venv-engine is missing); this alias keeps `needs_engine` working.
needs_engine = pytest.mark.engine


# `make test` builds the parser environments while the tests run (Makefile, `test`) and names
# the file the build writes its exit status to when it ends.
PARSERS_BUILD_VAR = "DYNAMO_BENCH_PARSERS_BUILD"


# From nothing the build took 6.4 min at a load of 5-14 (docs/architecture.md); a build still
# running after this long is stuck.
PARSERS_BUILD_TIMEOUT_S = 1800.0


def parsers_build_failed(poll_s: float = 2.0) -> str | None:
    """While `make test` still builds the parser environments, wait for the build to end; why
    it failed, or None (also when no build runs beside the tests)."""
    status = os.environ.get(PARSERS_BUILD_VAR)
    if not status:
        return None
    path = Path(status)
    code = wait_for(lambda: path.exists() and path.read_text().strip(), PARSERS_BUILD_TIMEOUT_S,
                    f"`make parsers` to write its exit status to {path}", interval_s=poll_s)
    return None if code == "0" else (f"`make parsers`, run by `make test` beside the tests, "
                                     f"failed (exit {code}): its output is above")


def missing_parsers() -> str | None:
    """Why the `parsers` tests (pre-flight's engine parse step) cannot run here, or None."""
    from stacks.preflight.engine_releases import RELEASES

    if failed := parsers_build_failed():
        return failed
    gone = [r.venv() / "bin" / "python" for r in RELEASES
            if not (r.venv() / "bin" / "python").exists()]
    if gone:
        return (f"the engine's parsers are not installed ({', '.join(map(str, gone))}): run "
                "`make parsers`")
    return None


def missing_engine() -> str | None:
    """Why the `engine` tests cannot run here, or None."""
    if not ENGINE_PYTHON.exists():
        return f"the local Dynamo engine is not installed ({ENGINE_PYTHON}): run `make engine`"
    return None


def missing_predictor() -> str | None:
    """Why the `predictor` tests cannot run here, or None."""
    from stacks.predict.predictor import predictor_python
    if predictor_python() is None:
        return "AIConfigurator's environment (.venv-predict) is missing: run `make predictor`"
    return None


def missing_prometheus() -> str | None:
    """Why the `prometheus` tests cannot run here, or None."""
    absent = [b for b in ("prometheus", "promtool") if shutil.which(b) is None]
    if absent:
        return (f"{' and '.join(absent)} not on PATH: apt-get install prometheus "
                "(the Debian package; .ci/run installs it)")
    return None

_HARDWARE = {
    "dynamo-bench:target": "local",
    "dynamo-bench:cluster": {"region": "us-east-1", "nodeGroups": [
        {"name": "p4d", "instanceType": "p4d.24xlarge", "count": 1}]},
    "dynamo-bench:model": {"id": "Qwen/Qwen3-30B-A3B", "precision": "bf16"},
    "dynamo-bench:cost": {"setupHours": 0},
}


def write_stack(stacks_dir: Path, name: str, *, workers: list[dict], router: str = "kv",
                topology: str = "aggregated", workloads: dict | None = None) -> str:
    """A small local stack file in `stacks_dir` (quick values keep engine tests short)."""
    serving = {"topology": topology, "router": router,
               "transfer": "nixl-ucx" if topology == "disaggregated" else "none",
               "workers": [{"tensorParallelSize": 4, "nodeGroup": "p4d", "maxModelLen": 32768,
                            **w} for w in workers],
               "mocker": {"speedupRatio": 1.0, "blockSize": 64}}
    config = {**_HARDWARE, "dynamo-bench:serving": serving}
    if workloads is not None:
        config["dynamo-bench:workloads"] = workloads
    stacks_dir.mkdir(parents=True, exist_ok=True)
    (stacks_dir / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": config}))
    return name


def runner_cmd(stack: str, stacks_dir: Path, runs_dir: Path, run_id: str,
               *extra: str) -> list[str]:
    return [sys.executable, "-m", "workloads", "run", stack, "--stacks-dir", str(stacks_dir),
            "--runs-dir", str(runs_dir), "--run-id", run_id, "--no-progress", *extra]


def runner_env(hf_home: Path) -> dict[str, str]:
    return {**os.environ, "DYNAMO_BENCH_HF_HOME": str(hf_home)}


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start_runner(cmd: list[str], env: dict[str, str], log: Path,
                 sigint_ignored: bool = False) -> subprocess.Popen:
    """The runner in its own session; `sigint_ignored`: started as a script's background job
    starts it (`cmd &` without job control), SIGINT inherited ignored."""
    with log.open("ab") as f:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True,
                                preexec_fn=_ignore_sigint if sigint_ignored else None)


def stop_runner(proc: subprocess.Popen) -> None:
    """SIGTERM (the runner stops its load and engine), then SIGKILL its group if needed."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def read_manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def wait_for(predicate, timeout_s: float, what: str, interval_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def alive_in_group(pgid: int) -> list[int]:
    """PIDs (not zombies) whose process group is `pgid`."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(entry.name))
    return out


def started_pids(manifest: dict) -> list[int]:
    """Every engine process and AIPerf process group the run's attempts started."""
    pids = [p["pid"] for a in manifest["attempts"]
            for p in a.get("target", {}).get("processes", [])]
    for step in manifest["steps"].values():
        for rec in [step, *step.get("history", [])]:
            if rec.get("aiperf_pid"):
                pids.append(rec["aiperf_pid"])
    return pids


def start_local(tmp_path: Path, name: str, **stack_kw):
    """A small local stack (write_stack) checked by pre-flight and started on the engine."""
    from stacks.preflight.run import check_stack
    from workloads.model_folder import build_model_folder
    from workloads.targets.local import LocalTarget

    stacks = tmp_path / "stacks"
    write_stack(stacks, name, **stack_kw)
    report = check_stack(name, stacks)
    assert report.ok, report.problems
    model = build_model_folder(tmp_path / "hf", report.stack.model.id, report.stack.model.arch)
    target = LocalTarget(report.stack, tmp_path / "engine", model=model,
                         kv_capacity_tokens=[m.kv_capacity_tokens for m in report.memory])
    target.start()
    return target
