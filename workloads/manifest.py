"""The run record `runs/<stack>/<run-id>/manifest.json`, always valid JSON on disk.

Every save writes a temp file in the same directory and renames it over the old one, so a
crash or Ctrl-C mid-write leaves the previous complete manifest. Steps are keyed by step id;
each attempt of a step is kept in its `history`, and each invocation of the run id adds an
entry to `attempts` with its phases (start-up, smoke, warm-up, steps, shutdown).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from stacks.config.schema import StackConfig

SCHEMA_VERSION = 1
REPO = Path(__file__).resolve().parents[1]

COMPLETE = "complete"
FAILED = "failed"
RUNNING = "running"
INTERRUPTED = "interrupted"


# A run id names one folder under runs/<stack>/: a plain name, never a path (no separators,
# no `..`, not absolute), so nothing a run writes lands outside runs/.
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def check_run_id(run_id: str) -> str:
    """`run_id` if it names one folder inside runs/<stack>/, else ValueError with the fix."""
    if not RUN_ID.match(run_id) or ".." in run_id:
        raise ValueError(f"run id '{run_id}' is not a plain folder name: use letters, digits, "
                         "'.', '_' and '-' (up to 100, starting with a letter or digit, no "
                         "'..'), e.g. 20261130T040514Z")
    return run_id


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def write_json_atomic(path: Path, data: dict, durable: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        json.dump(data, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
        f.flush()
        if durable:
            os.fsync(f.fileno())
    os.replace(tmp, path)


def stack_record(stack: StackConfig) -> tuple[dict, str]:
    """The stack's validated config as JSON and its SHA-256 (canonical JSON)."""
    config = stack.model_dump(mode="json", by_alias=True)
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    return config, hashlib.sha256(canonical).hexdigest()


def git_commit() -> dict:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return {"commit": git("rev-parse", "HEAD") or "unknown",
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def versions(dynamo: str) -> dict:
    return {"dynamo_bench": git_commit(), "aiperf": _version("aiperf"), "dynamo": dynamo,
            "python": platform.python_version(), "python_executable": sys.executable}


def host() -> dict:
    return {"cpu_count": os.cpu_count(), "platform": platform.platform(),
            "machine": platform.machine(), "hostname": platform.node()}


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


class Manifest:
    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data

    @classmethod
    def open(cls, path: Path, *, stack: StackConfig, run_id: str, scale: str) -> Manifest:
        """Load the run's manifest (resume) or start a new one; refuses a changed stack and a
        run id that is not a plain folder name."""
        check_run_id(run_id)
        config, digest = stack_record(stack)
        if path.exists():
            data = json.loads(path.read_text())
            if data.get("stack_config_sha256") != digest:
                raise ValueError(f"run '{run_id}' was made with a different config of stack "
                                 f"'{stack.name}' (sha256 {data.get('stack_config_sha256')}); "
                                 "use a new --run-id")
            if data.get("scale") != scale:
                raise ValueError(f"run '{run_id}' was made at scale {data.get('scale')}: "
                                 f"resume it with --scale {data.get('scale')} or use a new "
                                 "--run-id")
            return cls(path, data)
        data = {
            "schema_version": SCHEMA_VERSION, "stack": stack.name, "run_id": run_id,
            "scale": scale, "target": stack.target, "created": now(), "status": RUNNING,
            "stack_config": config, "stack_config_sha256": digest,
            "host": host(), "attempts": [], "steps": {}, "datasets": {},
        }
        return cls(path, data)

    # False for a simulated run: its record is still written whole (a rename), but not synced
    # to disk on each of the ~7 saves a step makes (a replayed step takes well under a second;
    # a lost record is re-simulated, not re-measured)
    durable: bool = True

    def save(self) -> None:
        write_json_atomic(self.path, self.data, self.durable)

    # --- attempts and phases ---------------------------------------------------------------
    def begin_attempt(self, **info) -> None:
        self.data["status"] = RUNNING
        self.data["attempts"].append({"started": now(), "ended": None, "status": RUNNING,
                                      "phases": [], **info})
        self.save()

    @property
    def attempt(self) -> dict:
        return self.data["attempts"][-1]

    def begin_phase(self, name: str, **info) -> dict:
        phase = {"name": name, "start": now(), "end": None, "status": RUNNING, **info}
        self.attempt["phases"].append(phase)
        self.save()
        return phase

    def end_phase(self, phase: dict, status: str = COMPLETE, **info) -> None:
        phase.update(end=now(), status=status, **info)
        self.save()

    @contextmanager
    def phase(self, name: str, **info):
        """A timed phase; it ends `failed` (or `interrupted`) if its body raises."""
        phase = self.begin_phase(name, **info)
        try:
            yield phase
        except (KeyboardInterrupt, SystemExit) as exc:
            self.end_phase(phase, INTERRUPTED, error=type(exc).__name__)
            raise
        except BaseException as exc:
            self.end_phase(phase, FAILED, error=str(exc)[:500])
            raise
        if phase["status"] == RUNNING:
            self.end_phase(phase)

    def end_attempt(self, status: str, error: str | None = None) -> None:
        self.attempt.update(ended=now(), status=status, error=error)
        self.data["status"] = status
        self.save()

    # --- steps -----------------------------------------------------------------------------
    def step_status(self, step_id: str) -> str | None:
        return self.data["steps"].get(step_id, {}).get("status")

    def begin_step(self, step_id: str, record: dict) -> None:
        """Start a new attempt of a step; the previous attempt moves into its history."""
        old = self.data["steps"].get(step_id)
        history = [*old.pop("history", []), old] if old else []
        self.data["steps"][step_id] = {**record, "history": history}
        self.save()

    def merge_nodes(self, nodes: list[dict]) -> None:
        """Add node usage records ({node, instanceType, start, end, ...}) to the run's `nodes`
        (reports/accounting/node_hours.py reads them): one record per node, spanning every
        attempt."""
        if not nodes:
            return
        merged = {n["node"]: dict(n) for n in self.data.get("nodes", [])}
        for n in nodes:
            old = merged.get(n["node"])
            if old is None:
                merged[n["node"]] = dict(n)
                continue
            old["start"] = min(old["start"], n["start"])
            end, other = old.get("end"), n.get("end")
            old["end"] = None if end is None or other is None else max(end, other)
        self.data["nodes"] = sorted(merged.values(), key=lambda n: (n["start"], n["node"]))
        self.save()

    def update_step(self, step_id: str, **fields) -> None:
        self.data["steps"][step_id].update(fields)
        ds = fields.get("dataset")
        if ds:
            self.data["datasets"][ds["path"]] = ds["sha256"]
            if "trace" in ds:   # a replayed trace: which one, verified against what
                trace = ds["trace"]
                self.data.setdefault("traces", {})[trace["source"]] = {
                    k: trace[k] for k in ("file", "sha256", "verified", "upstream",
                                          "upstream_commit", "licence") if k in trace}
        self.save()
