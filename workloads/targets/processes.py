"""Child processes the runner starts, each in its own process group, stopped by PID.

Every process is started with `start_new_session=True`, so its PID is also its process-group
id and stopping it (SIGTERM, then SIGKILL after a grace) also stops anything it forked. A
module-level registry stops whatever is still running at interpreter exit, so an exception or
Ctrl-C never leaves an engine behind. Nothing here kills by name.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

_LIVE: dict[int, ManagedProcess] = {}


# Below Linux's ephemeral range (32768+), so outgoing connections never hold these ports, and
# within an i16: Dynamo parses DYN_SYSTEM_PORT as a signed 16-bit integer.
PORT_RANGE = (20000, 32767)


def free_port() -> int:
    """A loopback TCP port in PORT_RANGE that is free now (small race until it is bound)."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randint(*PORT_RANGE)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {PORT_RANGE}")


@dataclass
class ManagedProcess:
    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen = field(repr=False)
    log_start: int = 0       # the log's size when this process started (logs are appended)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, wait up to `grace_s`, then SIGKILL it."""
        if self.alive():
            _signal_group(self.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.pid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        # The leader may be gone while a forked child of its group lives on.
        _signal_group(self.pid, signal.SIGKILL)
        _LIVE.pop(self.pid, None)

    def describe(self) -> dict:
        return {"name": self.name, "pid": self.pid, "argv": self.argv,
                "log": str(self.log_path)}

    def own_log(self, limit: int = 1 << 16) -> str:
        """The start of what this process wrote to its log (not an earlier process of the
        same name): at most `limit` bytes, enough for its start-up lines, and bounded however
        long it has run (a kept mocker's log grows with every request it serves)."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self.log_start)
                return f.read(limit).decode(errors="replace")
        except OSError:
            return ""


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def start_process(name: str, argv: list[str], env: dict[str, str], log_path: Path,
                  cwd: Path | None = None, stdout_pipe: bool = False) -> ManagedProcess:
    """Start `argv` in a new session; stderr (and stdout unless piped) go to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "ab")  # noqa: SIM115 - the child owns it; closed when we exit
    log_start = log.tell()
    popen = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE if stdout_pipe else log, stderr=log,
                             start_new_session=True)
    log.close()
    proc = ManagedProcess(name=name, argv=argv, log_path=log_path, popen=popen,
                          log_start=log_start)
    _LIVE[proc.pid] = proc
    return proc


def stop_all(grace_s: float = 5.0) -> None:
    """Stop every process this interpreter started and has not stopped yet (newest first)."""
    for proc in reversed(list(_LIVE.values())):
        proc.stop(grace_s)


def pid_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie (for tests and the manifest check)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_until(predicate, timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()


atexit.register(stop_all)
