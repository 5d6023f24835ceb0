"""`make bench-sim`: how fast the simulation answers, as a table (a measurement, not a test:
the figures depend on the machine and on what else it runs).

Rows: a full-scale simulated run of a stack (`python -m workloads run <stack> --target sim
--scale full`) with its datasets and tables already made (warm: the second of two runs), and
`python -m stacks explore <base>` with every cache empty (timing tables, predictor answers,
explore results: what a fresh clone pays), then again warm. Each is a child process: its wall
time, the CPU it and its children used (user + sys, the replay process included), and the load
average when it ended, since a shared machine's wall time says as much about the others as
about the code. Targets (issue 38): agg-a100 full <= 10 s warm; explore base-a100 <= 120 s
cold, <= 15 s warm.

    .venv/bin/python -m workloads.sim.bench [--stack agg-a100] [--base base-a100] [--no-explore]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# the caches a cold explore starts without (their variables: stacks/explore/cache.py,
# workloads/targets/mocker_timings.py, stacks/predict/predictor.py)
COLD_CACHES = ("DYNAMO_BENCH_EXPLORE_CACHE", "DYNAMO_BENCH_MOCKER_TABLES",
               "DYNAMO_BENCH_PREDICT_CACHE")


@dataclass(frozen=True)
class Timed:
    what: str
    wall_s: float
    cpu_s: float
    load: float
    target_s: float | None
    ok: bool

    def row(self) -> list[str]:
        verdict = "-" if self.target_s is None else (
            f"<= {self.target_s:.0f} s: {'met' if self.wall_s <= self.target_s else 'NOT met'}")
        return [self.what, f"{self.wall_s:.1f}", f"{self.cpu_s:.1f}", f"{self.load:.1f}",
                verdict if self.ok else "FAILED (see its output)"]


def timed(what: str, argv: list[str], env: dict[str, str], target_s: float | None) -> Timed:
    """Runs `argv` from the repo; wall, CPU of it and its children, load at the end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-2000:])
    return Timed(what, wall, cpu, os.getloadavg()[0], target_s, done.returncode == 0)


def table(rows: list[Timed]) -> str:
    head = ["what", "wall s", "CPU s (user + sys)", "load (1 min)", "target"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r.row()) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stack", default="agg-a100", help="the stack simulated at full scale")
    ap.add_argument("--base", default="base-a100", help="the base explored")
    ap.add_argument("--no-explore", action="store_true", help="only the simulated run")
    args = ap.parse_args(argv)
    py, env = sys.executable, dict(os.environ)
    run = [py, "-m", "workloads", "run", args.stack, "--target", "sim", "--scale", "full",
           "--no-progress"]
    rows = []
    # its own run id each time: a fixed one is refused once the stack's config changes
    timed("warm-up", run + ["--run-id", f"bench-sim-warmup-{int(time.time())}"], env, None)
    rows.append(timed(f"{args.stack}: full-scale simulated run (warm)",
                      run + ["--run-id", f"bench-sim-{int(time.time())}"], env, 10.0))
    if not args.no_explore:
        with tempfile.TemporaryDirectory(prefix="dynamo-bench-cold-") as tmp:
            out = str(Path(tmp) / "out")
            cold = env | {v: str(Path(tmp) / v.lower()) for v in COLD_CACHES}
            explore = [py, "-m", "stacks", "explore", args.base, "--out", out]
            rows.append(timed(f"stacks explore {args.base}: every cache empty", explore, cold,
                              120.0))
            rows.append(timed(f"stacks explore {args.base}: warm", explore, cold, 15.0))
    print(table(rows))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
