"""The thin shell around DynoSim: runs replay_child.py in the engine's environment (one JSON
request on stdin, one answer on stdout) for a batch of replays. Nothing here decides anything;
the traces and the workers' command lines come from the pure modules of workloads/sim/.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from workloads.targets.local import engine_python

CHILD = Path(__file__).resolve().parent / "replay_child.py"
TIMEOUT_S = 1800.0


class SimUnavailable(RuntimeError):
    """The engine's environment is missing or the replay failed: the message says the fix."""


def replay(jobs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Each job's answer (its runs' per-request rows and summaries), and the engine's
    versions, from one run of the replay child."""
    python = engine_python()
    if not python.exists():
        raise SimUnavailable(f"the engine environment ({python}) is missing: run `make engine`")
    done = subprocess.run([str(python), str(CHILD)], input=json.dumps({"jobs": jobs}),
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise SimUnavailable(f"DynoSim's replay failed (exit {done.returncode}): "
                             f"{done.stderr.strip()[-800:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    for job, answer in zip(jobs, out["answers"], strict=True):
        if "error" in answer:
            raise SimUnavailable(f"DynoSim refused a replay of {len(job['trace'])} requests: "
                                 f"{answer['error']}")
    return out["answers"], out["versions"]
