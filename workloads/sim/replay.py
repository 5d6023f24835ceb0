"""The thin shell around DynoSim: one child process in the engine's environment
(replay_child.py) for a whole run, fed one JSON request per line. Nothing here decides
anything; the traces and the workers' command lines come from the pure modules of workloads/sim/.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
from pathlib import Path
from typing import IO, Any

import orjson  # AIPerf's dependency; the reports read its exports with it too

from workloads.targets.local import engine_python

CHILD = Path(__file__).resolve().parent / "replay_child.py"


class SimUnavailable(RuntimeError):
    """The engine's environment is missing or the replay failed: the message says the fix.
    `lasting`: the same inputs fail the same way again (the child refused its command line, or
    DynoSim refused the job), unlike a missing environment or a killed process."""

    def __init__(self, message: str, lasting: bool = False) -> None:
        super().__init__(message)
        self.lasting = lasting


def require_engine() -> Path:
    """The engine environment's Python, or SimUnavailable saying how to make it."""
    python = engine_python()
    if not python.exists():
        raise SimUnavailable(f"the engine environment ({python}) is missing: run "
                             "`make engine`")
    return python


class Replayer:
    """A replay child kept for many requests (started on first use; `close` ends it)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: IO[str] | None = None
        self.versions: dict[str, str] = {}

    def _start(self) -> subprocess.Popen[str]:
        python = require_engine()
        # kept open for the child's life (closed by close()), read when it dies
        self._stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115
        return subprocess.Popen([str(python), str(CHILD)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=self._stderr, text=True)

    def __call__(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each job's answer (its runs' per-request rows and summaries)."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            # orjson: a step's trace and answer are thousands of rows, and the standard
            # library's encoder and decoder were a fifth of the explore's own CPU (py-spy,
            # 2026-12-06); the child answers with the standard library's json (the engine's
            # environment has no orjson), which orjson reads alike
            self._proc.stdin.write(orjson.dumps({"jobs": jobs}).decode() + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line.strip():
            # its last words reach stderr as it exits: read them after
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
            code = self._proc.poll()
            # exit 2: the child's argument parser refused a worker's command line
            raise SimUnavailable(f"DynoSim's replay process ended (exit {code}): "
                                 f"{self._tail()}", lasting=code == 2)
        try:
            out = orjson.loads(line)
        except orjson.JSONDecodeError:     # NaN or Infinity, which the child's json may write
            out = json.loads(line)
        self.versions = out["versions"]
        for job, answer in zip(jobs, out["answers"], strict=True):
            if "error" in answer:
                raise SimUnavailable(f"DynoSim refused a replay of {len(job['trace'])} "
                                     f"requests: {answer['error']}", lasting=True)
        answers: list[dict[str, Any]] = out["answers"]
        return answers

    def _tail(self) -> str:
        """The child's error on one line: its last `error:` line (an argument parser's), else
        its last lines."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        lines = [x.strip() for x in self._stderr.read().splitlines() if x.strip()]
        errors = [x for x in lines if "error:" in x.lower()]
        return (errors[-1] if errors else " | ".join(lines[-3:]))[-800:]

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
