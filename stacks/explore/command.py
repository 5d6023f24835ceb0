"""`python -m stacks explore`: run the search, print it, write the report and, asked to, the top
K's stack files (the CLI hands in the simulator: stacks/__main__.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stacks.config.schema import StackConfig
from stacks.explore import report
from stacks.explore import write as stack_files
from stacks.explore.cache import StepCache, default_folder
from stacks.explore.judge import SLO_NAMES, slo_named
from stacks.explore.run import explore
from stacks.explore.search import Simulator


def command(base: StackConfig, simulator: Simulator, slo_names: list[str] | None, k: int,
            exhaustive: bool, folder: Path, stacks_dir: Path | None, console: Any,
            calibration: list[str] | None = None) -> None:
    """`python -m stacks explore`: run, print, write the report (and with `stacks_dir` the top
    K's stack files). A bad base or SLO name: ValueError naming the fix. `calibration`: the
    lines saying which factors the simulator's tables were scaled by (--calibrate)."""
    if not (base.target == "aws" and base.is_base and not base.is_attached):
        raise ValueError(f"{base.name} is not a base stack (an aws stack that owns its cluster "
                         "and serves nothing): explore a base, e.g. base-a100")
    slos = [slo_named(n) for n in (slo_names or SLO_NAMES)]
    cache = default_folder()
    ex = explore(base, simulator, slos, k, exhaustive,
                 StepCache(cache) if cache is not None else None,
                 note=lambda m: console.print(m, markup=False))
    ex.calibration = list(calibration or [])
    report.print_exploration(console, ex)
    written = report.write(ex, folder)
    if stacks_dir is not None:
        written += stack_files.write(ex, stacks_dir)
    for path in written:
        console.print(f"wrote {path}", markup=False)
