"""Simulated steps kept by what decides them (a thin shell): .cache/explore/<sha256>.json.

The key is the simulator's fingerprint of the candidate (each role's mocker command line with
the timing tables' sha256, worker counts, router, block size, ai-dynamo's version, the hash of
the code that turns a step into replays: workloads/sim/on_base.py) and the step: the workload,
the scale, the stack's workloads block (seed, the step's concurrency and shape) and the cost
settings the step's grace and ramp are sized from. A second explore of the same base reads
every step it needs from here. $DYNAMO_BENCH_EXPLORE_CACHE moves the folder; an empty value
turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from stacks.config.schema import StackConfig

ROOT = Path(__file__).resolve().parents[2]
CACHE_VAR = "DYNAMO_BENCH_EXPLORE_CACHE"


def default_folder() -> Path | None:
    value = os.environ.get(CACHE_VAR, str(ROOT / ".cache" / "explore"))
    return Path(value) if value else None


def step_key(fingerprint: str, stack: StackConfig, workload: str, scale: str) -> str:
    """What decides a simulated workload's steps, as one sha256."""
    decides = [fingerprint, workload, scale, stack.model.id,
               stack.workloads.model_dump(mode="json"), stack.cost.assumed_itl_ms]
    return hashlib.sha256(json.dumps(decides, sort_keys=True).encode()).hexdigest()


class StepCache:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, key: str) -> list[dict[str, Any]] | None:
        path = self.folder / f"{key}.json"
        if not path.exists():
            return None
        try:
            found: list[dict[str, Any]] = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return found

    def put(self, key: str, steps: list[dict[str, Any]]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{key}.tmp"
        tmp.write_text(json.dumps(steps))
        tmp.replace(self.folder / f"{key}.json")
