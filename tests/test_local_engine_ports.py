"""A port taken between free_port()'s check and the process's bind: the local engine starts
the frontend or mocker that lost it again on another port, and records it."""

from __future__ import annotations

import re
import socket

import httpx
import pytest
from engine_support import needs_engine, start_local

from workloads.targets import local
from workloads.targets.base import TargetError
from workloads.targets.processes import free_port, stop_all

pytestmark = [pytest.mark.engine, needs_engine]


def _taken() -> socket.socket:
    """A loopback port in free_port()'s range, held (listening) by this test."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", free_port()))
    s.listen()
    return s


def test_a_frontend_and_a_mocker_that_lost_their_ports_start_again_elsewhere(tmp_path,
                                                                            monkeypatch):
    held = [_taken(), _taken()]
    taken = [s.getsockname()[1] for s in held]
    handed = iter(taken)
    # the frontend's port is picked first, then worker-0's system port: both already taken
    monkeypatch.setattr(local, "free_port", lambda: next(handed, None) or free_port())
    try:
        target = start_local(tmp_path, "t-ports", workers=[{"role": "worker", "replicas": 2}],
                             router="round-robin")
        try:
            restarts = target.describe()["port_restarts"]
            by_process = {r["process"]: r for r in restarts}
            assert len(restarts) == 2 and {n: r["port_taken"] for n, r in by_process.items()} \
                == {"frontend": taken[0], "worker-0": taken[1]}
            assert by_process["frontend"]["new_port"] == target.http_port not in taken
            assert by_process["worker-0"]["new_port"] == target.system_ports["worker-0"] \
                not in taken
            models = httpx.get(f"http://127.0.0.1:{target.http_port}/v1/models", timeout=10)
            assert models.status_code == 200
            dead = [p for p in target.describe()["processes"] if not p["alive"]]
            assert sorted(p["pid"] for p in dead) == sorted(r["pid"] for r in restarts)
        finally:
            target.stop()
    finally:
        for s in held:
            s.close()


def test_ports_lost_again_and_again_fail_the_start_with_the_reason(tmp_path, monkeypatch):
    held = _taken()
    monkeypatch.setattr(local, "free_port", lambda: held.getsockname()[1])   # always taken
    try:
        with pytest.raises(TargetError, match=r"(frontend|worker-0) lost their ports again "
                                              r"after \d+ restart\(s\) on new ports") as exc:
            start_local(tmp_path, "t-lost", workers=[{"role": "worker", "replicas": 1}],
                        router="round-robin")
        # the restarts stop at the budget (one more pair of losers would pass it)
        done = int(re.search(r"after (\d+) restart", str(exc.value)).group(1))
        assert local.PORT_RESTARTS - 1 <= done <= local.PORT_RESTARTS
    finally:
        stop_all()
        held.close()
