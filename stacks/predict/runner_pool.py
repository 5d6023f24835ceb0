"""The predictor's runners (aic_runner.py in .venv-predict) kept for a process's life: a thin
shell, which decides nothing.

A runner answers one JSON request per stdin line with one JSON line. Its first estimate on a
system pays that database's load: AIConfigurator 0.12.0 took 2.7 s of CPU for one estimate on
h100_sxm and 2.6 s for six in one runner (measured here, 2026-12-06), and a cold `make test`
started 48 runners for 87 s of CPU. So a process that asks again (`stacks check --all`, a
campaign's forecasts, a test file) asks a runner that has its databases loaded. Runners are
handed out to one caller at a time (predictor.run_spread and the explore's lanes ask from
threads), at most `keep` per Python are kept idle, and all end when the process exits (their
stdin closed, as a finished request stream).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO, Any


class RunnerFailed(RuntimeError):
    """The runner died, refused the request or took longer than its timeout."""


class Runner:
    """One aic_runner.py process, asked one request at a time."""

    def __init__(self, python: Path, script: Path) -> None:
        # kept open for the runner's life (closed by close()), read when it dies
        self._stderr: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self._proc = subprocess.Popen([str(python), str(script)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._stderr, text=True)

    def alive(self) -> bool:
        return self._proc.poll() is None

    def ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        watchdog = threading.Timer(timeout_s, self._proc.kill)
        watchdog.start()
        try:
            self._proc.stdin.write(json.dumps(request) + os.linesep)
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        finally:
            watchdog.cancel()
        if not line.strip():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
            code = self._proc.poll()
            self._stderr.seek(0)
            tail = self._stderr.read().strip()[-600:]
            raise RunnerFailed(f"exit {code}: {tail}" if code is not None
                               else f"no answer within {timeout_s:.0f} s")
        try:
            answer: dict[str, Any] = json.loads(line)
        except json.JSONDecodeError:
            raise RunnerFailed(f"an answer that is not JSON: {line[:200]!r}") from None
        return answer

    def close(self) -> None:
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.close()


class RunnerPool:
    """Idle runners per Python; `ask` takes one (or starts one) for a request."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.started = 0                 # runners started in this process (tests read it)
        self._idle: dict[Path, list[Runner]] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    def ask(self, python: Path, script: Path, request: dict[str, Any],
            timeout_s: float) -> dict[str, Any]:
        runner = None
        with self._lock:
            idle = self._idle.setdefault(python, [])
            while idle and runner is None:
                candidate = idle.pop()
                if candidate.alive():
                    runner = candidate
                else:
                    candidate.close()
            if runner is None:
                self.started += 1
        if runner is None:
            runner = Runner(python, script)
        try:
            answer = runner.ask(request, timeout_s)
        except BaseException:
            runner.close()
            raise
        with self._lock:
            idle = self._idle.setdefault(python, [])
            if len(idle) < self.keep:
                idle.append(runner)
                runner = None
        if runner is not None:
            runner.close()
        return answer

    def close(self) -> None:
        with self._lock:
            runners = [r for rs in self._idle.values() for r in rs]
            self._idle.clear()
        for r in runners:
            r.close()
