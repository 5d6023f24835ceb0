"""The local Dynamo engine: a frontend and one mocker process per worker replica, on loopback.

No GPU, etcd or NATS: discovery is a temp directory (file backend), requests go over TCP and
events over ZMQ through a broker bound to 127.0.0.1 (see zmq_broker.py for why). Every port
is a free loopback port, every process runs in its own process group and is stopped by PID.
The mockers imitate the stack's workers: their KV blocks come from pre-flight's KV capacity
for the real GPU (or serving.mocker.numGpuBlocks), disaggregated stacks get prefill and
decode mockers, and the frontend routes with the stack's router mode. Their timings come from
a table built from AIConfigurator's database for the GPU and TP the stack imitates, or the
mocker's generic timings when there is none (mocker_timings.py; describe() records which).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import httpx

from stacks.config.schema import Role, ServingConfig, StackConfig
from stacks.engine_argv.argv import tokens
from stacks.engine_argv.local import frontend_args, mocker_args
from workloads import request_trace
from workloads.attest import first_data
from workloads.attest import probe as attest_probe
from workloads.attest.checks import Attestation, evaluate
from workloads.attest.parse import expected
from workloads.model_folder import ModelFolder
from workloads.targets.base import Endpoints, TargetError
from workloads.targets.mocker_timings import MockerTimings, resolve
from workloads.targets.processes import ManagedProcess, free_port, start_process, wait_until

REPO = Path(__file__).resolve().parents[2]
BROKER_SCRIPT = Path(__file__).resolve().parent / "zmq_broker.py"
READY_TIMEOUT_S = 120.0
# free_port() checks a port, the process binds it a second later: another process (a second
# local engine, AIPerf) can take it in between. A frontend or mocker whose log says so
# (strerror(EADDRINUSE)) is started again on another port, at most this many times per engine
# start; each such restart is recorded (describe(), the manifest's target).
PORT_IN_USE = "Address already in use"
PORT_RESTARTS = 3


def engine_python() -> Path:
    """The interpreter of the engine's own venv (ai-dynamo pins an older pydantic)."""
    return Path(os.environ.get("DYNAMO_BENCH_ENGINE_PYTHON", REPO / ".venv-engine/bin/python"))


@dataclass(frozen=True)
class WorkerSpec:
    name: str          # worker-0, prefill-0, decode-0 ...
    group: int         # index into serving.workers
    role: Role
    blocks: int        # KV blocks of this mocker


def _serving(stack: StackConfig) -> ServingConfig:
    """The serving block of a stack the local engine runs: LocalTarget refuses a stack without
    one, and a campaign's slots are serving stacks (a base stack runs no workload)."""
    assert stack.serving is not None, f"stack '{stack.name}' serves nothing"
    return stack.serving


def mocker_blocks(stack: StackConfig, kv_capacity_tokens: list[int]) -> list[int]:
    """KV blocks per worker group: numGpuBlocks if set, else pre-flight's capacity / block."""
    mocker = _serving(stack).mocker
    if mocker.num_gpu_blocks is not None:
        return [mocker.num_gpu_blocks] * len(_serving(stack).workers)
    blocks = [tokens // mocker.block_size for tokens in kv_capacity_tokens]
    for i, b in enumerate(blocks):
        if b < 16:
            raise TargetError(f"dynamo-bench:serving.workers[{i}]: pre-flight leaves {b} KV "
                              "blocks; set serving.mocker.numGpuBlocks or fix the memory fit")
    return blocks


def worker_specs(stack: StackConfig, blocks: list[int]) -> list[WorkerSpec]:
    specs: list[WorkerSpec] = []
    for g, group in enumerate(_serving(stack).workers):
        for _ in range(group.replicas):
            n = sum(1 for s in specs if s.role == group.role)
            specs.append(WorkerSpec(f"{group.role.value}-{n}", g, group.role, blocks[g]))
    return specs


def frontend_argv(python: Path, stack: StackConfig, port: int) -> list[str]:
    """The frontend's command line (stacks/engine_argv/local.py builds it; pre-flight parses
    the same argv with Dynamo's own parser)."""
    return [str(python), "-m", "dynamo.frontend", *tokens(frontend_args(stack, port))]


def mocker_argv(python: Path, stack: StackConfig, spec: WorkerSpec, model_path: Path,
                timings: MockerTimings | None = None) -> list[str]:
    """One mocker's command line (stacks/engine_argv/local.py, parsed likewise)."""
    table = timings.table_for(spec.role.value) if timings else None
    return [str(python), "-m", "dynamo.mocker",
            *tokens(mocker_args(stack, spec.group, spec.blocks, str(model_path),
                                None if table is None else str(table)))]


def engine_env(base: dict[str, str], discovery_dir: Path, broker: tuple[int, int],
               model_env: dict[str, str]) -> dict[str, str]:
    """Environment of every engine process: file discovery, loopback-only planes."""
    xsub, xpub = broker
    return {
        **base, **model_env,
        "DYN_DISCOVERY_BACKEND": "file", "DYN_FILE_KV": str(discovery_dir),
        "DYN_REQUEST_PLANE": "tcp", "DYN_EVENT_PLANE": "zmq",
        "DYN_ZMQ_BROKER_URL": f"xsub=tcp://127.0.0.1:{xsub} , xpub=tcp://127.0.0.1:{xpub}",
        "DYN_TCP_RPC_HOST": "127.0.0.1", "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
        "DYN_EVENT_PLANE_HOST": "127.0.0.1", "DYN_SYSTEM_HOST": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
    }


def registered_workers(discovery_dir: Path) -> int:
    """Worker instances serving a `generate` endpoint, as file discovery lists them."""
    inst = discovery_dir / "v1" / "instances"
    if not inst.is_dir():
        return 0
    names = [unquote(p.name).split("/") for p in inst.iterdir()]
    return sum(1 for parts in names if len(parts) == 4 and parts[2] == "generate")


def dynamo_version(python: Path) -> str:
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m;"
                          "print(m.version('ai-dynamo'))"], capture_output=True, text=True,
                         timeout=60)
    return out.stdout.strip() or "unknown"


class LocalTarget:
    kind = "local"

    def __init__(self, stack: StackConfig, workdir: Path, *, model: ModelFolder,
                 kv_capacity_tokens: list[int], timings: MockerTimings | None = None):
        if stack.serving is None:
            raise TargetError(f"stack '{stack.name}' serves nothing (no serving block)")
        self.stack = stack
        self.workdir = Path(workdir)
        self.model = model
        self.python = engine_python()
        if not self.python.exists():
            raise TargetError(f"engine interpreter {self.python} is missing: run `make engine`")
        self.specs = worker_specs(stack, mocker_blocks(stack, kv_capacity_tokens))
        # built (or read from the cache) here, before anything starts: argvs compare with it
        self._timings = {stack.name: timings or resolve(stack)}
        self.http_port = 0
        self.system_ports: dict[str, int] = {}
        self.broker: ManagedProcess | None = None
        self.frontend: ManagedProcess | None = None
        self.workers: dict[str, ManagedProcess] = {}
        self.started: list[ManagedProcess] = []   # every process ever started, for the record
        self.discovery_dir: Path | None = None
        self.trace_path = self.workdir / "logs" / "request-trace.jsonl"
        self.env: dict[str, str] = {}
        self.version = "unknown"
        self.attestations = 0
        self.port_restarts: list[dict] = []

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.discovery_dir = Path(tempfile.mkdtemp(prefix="dynamo-bench-discovery-"))
        self.version = dynamo_version(self.python)
        self.broker = self._start("zmq-broker", [str(self.python), str(BROKER_SCRIPT)],
                                  dict(os.environ), stdout_pipe=True)
        ports = self._read_broker_ports()
        self.env = engine_env(dict(os.environ), self.discovery_dir, ports, self.model.env)
        self.frontend = self._start_frontend("frontend")
        self.system_ports = {s.name: free_port() for s in self.specs}
        self._start_workers()
        self._wait_ready()

    def restart_workers(self) -> None:
        for proc in self.workers.values():
            proc.stop()
        discovery_dir = self.discovery_dir
        assert discovery_dir is not None, "restart_workers() before start()"
        if not wait_until(lambda: registered_workers(discovery_dir) == 0, 30):
            raise TargetError("stopped workers are still registered after 30 s")
        self._start_workers()
        self._wait_ready()

    def worker_argvs(self, stack: StackConfig | None = None) -> list[list[str]]:
        """Every mocker's command line for `stack` (default this target's): what a campaign
        compares byte for byte before it keeps the running mockers for another stack."""
        stack = stack or self.stack
        return [mocker_argv(self.python, stack, spec, self.model.snapshot,
                            self.timings(stack))
                for spec in worker_specs(stack, [s.blocks for s in self.specs])]

    def swap_frontend(self, stack: StackConfig) -> dict:
        """Keep the running mockers and replace the frontend with `stack`'s (its router): a
        campaign's kept workers. Refused unless `stack`'s mockers are byte-identical."""
        if self.frontend is None:
            raise TargetError("the local engine is not running: nothing to keep")
        if self.worker_argvs(stack) != self.worker_argvs():
            raise TargetError(f"{stack.name}'s mockers differ from the running ones "
                              f"({self.stack.name}'s): they cannot be kept")
        t0 = time.monotonic()
        old = self.frontend
        old.stop()
        self.stack = stack
        self.frontend = self._start_frontend(f"frontend-{stack.name}")
        self._wait_ready()
        return {"kept_workers": {n: p.pid for n, p in self.workers.items()},
                "frontend": {"stopped_pid": old.pid, "started_pid": self.frontend.pid,
                             "router": _serving(stack).router.value},
                "swap_s": round(time.monotonic() - t0, 3)}

    def timings(self, stack: StackConfig | None = None) -> MockerTimings:
        """The timings `stack`'s mockers run on (default this target's), resolved once."""
        stack = stack or self.stack
        if stack.name not in self._timings:
            self._timings[stack.name] = resolve(stack)
        return self._timings[stack.name]

    def _start_frontend(self, name: str) -> ManagedProcess:
        """The current stack's frontend on a new port, writing the frontend's own record of
        every request (worker, cached tokens) to the request trace: the routing evidence, for
        a swapped-in frontend too."""
        self.http_port = free_port()
        return self._start(name, frontend_argv(self.python, self.stack, self.http_port),
                           {**self.env, **request_trace.frontend_env(str(self.trace_path))})

    def stop(self) -> None:
        for proc in [*self.workers.values(), self.frontend, self.broker]:
            if proc is not None:
                proc.stop()
        if self.discovery_dir is not None:
            shutil.rmtree(self.discovery_dir, ignore_errors=True)

    # --- what the runner reads ---------------------------------------------------------------
    def endpoints(self) -> Endpoints:
        base = f"http://127.0.0.1:{self.http_port}"
        metrics = {"frontend": f"{base}/metrics"}
        metrics |= {name: f"http://127.0.0.1:{port}/metrics"
                    for name, port in self.system_ports.items()}
        return Endpoints(base_url=base, model=self.stack.model.name, metrics=metrics)

    def request_trace(self, since_ms: float, until_ms: float) -> list[str]:
        """The frontend's finished-request lines received within the window."""
        if not self.trace_path.exists():
            return []
        with self.trace_path.open(errors="replace") as f:
            return request_trace.lines_in_window(f, since_ms, until_ms)

    def attest(self, when: str) -> Attestation:
        """The checks the mocker can show (model, prefix cache, KV events); the rest are
        marked not applicable (workloads/attest/checks.py)."""
        x = expected(self.stack, self.kind)
        ep = self.endpoints()
        self.attestations += 1

        def scrape() -> dict[str, tuple[str, str]]:
            return {name: (name.split("-")[0], httpx.get(url, timeout=10.0).text)
                    for name, url in ep.metrics.items()}
        with httpx.Client(timeout=60.0) as client:
            evidence = attest_probe.collect(x, base_url=ep.base_url, client=client,
                                            scrape=scrape, tag=f"local-{self.attestations}")
        evidence["first_data"] = first_data.run_here(ep.base_url, ep.model)
        return evaluate(x, evidence, when)

    def processes(self) -> list[ManagedProcess]:
        return [p for p in [self.broker, self.frontend, *self.workers.values()] if p]

    def problems(self) -> list[str]:
        return [f"{p.name} (pid {p.pid}) exited with code {p.popen.returncode}; log "
                f"{p.log_path}" for p in self.processes() if not p.alive()]

    def describe(self) -> dict:
        return {
            "kind": self.kind, "dynamo_version": self.version,
            "engine_python": str(self.python), "model_snapshot": str(self.model.snapshot),
            "router": _serving(self.stack).router.value,
            "topology": _serving(self.stack).topology.value,
            "workers": [{"name": s.name, "role": s.role.value, "kv_blocks": s.blocks,
                         "block_size": _serving(self.stack).mocker.block_size,
                         "system_port": self.system_ports.get(s.name)} for s in self.specs],
            "processes": [{**p.describe(), "alive": p.alive()} for p in self.started],
            "port_restarts": self.port_restarts,
            "timings": self.timings().record,
        }

    # --- internals ---------------------------------------------------------------------------
    def _start(self, name: str, argv: list[str], env: dict[str, str],
               stdout_pipe: bool = False) -> ManagedProcess:
        log = self.workdir / "logs" / f"{name}.log"
        proc = start_process(name, argv, env, log, stdout_pipe=stdout_pipe)
        self.started.append(proc)
        return proc

    def _read_broker_ports(self) -> tuple[int, int]:
        # start() sets the broker, started with stdout_pipe=True, just before it reads these
        assert self.broker is not None and self.broker.popen.stdout is not None
        out = self.broker.popen.stdout
        ready, _, _ = select.select([out], [], [], 30)
        line = out.readline().decode() if ready else ""
        try:
            ports = json.loads(line)
            return int(ports["xsub"]), int(ports["xpub"])
        except (ValueError, KeyError) as exc:
            raise TargetError(f"ZMQ broker did not report its ports (got {line!r}); log "
                              f"{self.broker.log_path}") from exc

    def _start_workers(self) -> None:
        for spec in self.specs:
            self._start_worker(spec)

    def _start_worker(self, spec: WorkerSpec) -> None:
        env = {**self.env, "DYN_SYSTEM_PORT": str(self.system_ports[spec.name])}
        argv = mocker_argv(self.python, self.stack, spec, self.model.snapshot, self.timings())
        self.workers[spec.name] = self._start(spec.name, argv, env)

    def _restart_port_losers(self, since: int) -> None:
        """Stop the frontend or mockers whose port was taken and start them on new ports. The
        frontend exits; a mocker runs on without its system server, so its /metrics would be
        whatever holds the port: ai-dynamo/dynamo lib/runtime/src/distributed.rs,
        DistributedRuntime::new, logs a failed spawn_system_status_server ("System status
        server startup failed: ... Address already in use") and goes on (seen so in Dynamo
        1.6.1's mocker log; tests/test_local_engine_ports.py)."""
        losers = [p for p in self.processes()
                  if p is not self.broker and PORT_IN_USE in p.own_log()]
        if not losers:
            return
        if len(self.port_restarts) - since + len(losers) > PORT_RESTARTS:
            raise TargetError(f"local engine failed to start: {', '.join(p.name for p in losers)}"
                              f" lost their ports again after {len(self.port_restarts) - since} "
                              f"restart(s) on new ports; logs in {self.workdir / 'logs'}")
        for proc in losers:
            proc.stop()
            spec = next((s for s in self.specs if self.workers.get(s.name) is proc), None)
            if spec is None:
                old = self.http_port
                self.frontend = self._start_frontend(proc.name)
                new = self.http_port
            else:
                old = self.system_ports[spec.name]
                new = self.system_ports[spec.name] = free_port()
                self._start_worker(spec)
            self.port_restarts.append({"process": proc.name, "pid": proc.pid,
                                       "port_taken": old, "new_port": new})

    def _wait_ready(self) -> None:
        """Ready = every worker registered and the frontend's /v1/models lists the model."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        since = len(self.port_restarts)
        discovery_dir = self.discovery_dir
        assert discovery_dir is not None, "start() sets the discovery directory first"
        while time.monotonic() < deadline:
            self._restart_port_losers(since)
            # read after the exit, a dead process's log is whole: one that lost its port is
            # started again on the next pass, any other death fails the start
            dead = [p for p in self.processes() if not p.alive()]
            if any(PORT_IN_USE not in p.own_log() for p in dead):
                raise TargetError("local engine failed to start: " + "; ".join(self.problems()))
            url = f"http://127.0.0.1:{self.http_port}/v1/models"
            if registered_workers(discovery_dir) >= len(self.specs) and _lists_model(
                    url, self.stack.model.name):
                return
            time.sleep(0.25)
        raise TargetError(f"local engine not ready after {READY_TIMEOUT_S:.0f} s: "
                          f"{registered_workers(discovery_dir)}/{len(self.specs)} workers "
                          f"registered; logs in {self.workdir / 'logs'}")


def _lists_model(url: str, model: str) -> bool:
    try:
        r = httpx.get(url, timeout=2.0)
        return r.status_code == 200 and any(m.get("id") == model for m in r.json()["data"])
    except (httpx.HTTPError, ValueError, KeyError):
        return False

