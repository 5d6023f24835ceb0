"""Progress of a run's steps: a bar in a terminal, one line per step start and end elsewhere.

In a terminal a rich bar shows the current step (k/N), the time elapsed and the ETA. In a log or
CI (the console is not a terminal) a bar would print nothing between steps, so each step start
and end is one line instead:

    [2/9] start concurrency_sweep/c4 (elapsed 0:02:13, ETA 0:08:40)
    [2/9] end concurrency_sweep/c4: complete in 0:02:05 (elapsed 0:04:18, ETA 0:06:30)

The ETA is what the plan estimated for the steps not yet done (steps.py), scaled by how the
steps done so far compared with their estimates (the same idea as the bar's estimate).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def clock_text(seconds: float) -> str:
    return str(timedelta(seconds=round(max(seconds, 0.0))))


class StepProgress:
    """`start(step_id)`, `tick(seconds into the step)`, `end(status)` for each step in turn;
    `console` prints above the bar (or between the lines)."""

    def __init__(self, console: Console, title: str, etas_s: Sequence[float],
                 enabled: bool = True, clock: Callable[[], float] = time.monotonic):
        self.console, self.title, self.etas = console, title, list(etas_s)
        self.enabled, self.clock = enabled, clock
        self.lines = enabled and not console.is_terminal
        self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                            TextColumn("{task.fields[step]}"), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=console,
                            disable=not enabled or self.lines, transient=False)
        self.live = enabled and not self.lines
        self.k = 0
        self.planned_done = 0.0
        self.t0 = self.step_t0 = clock()

    def __enter__(self) -> StepProgress:
        if self.live:
            self.bar.__enter__()
        self.task = self.bar.add_task(self.title, total=sum(self.etas) or 1, step="")
        self.t0 = self.clock()
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self.bar.__exit__(*exc)

    def eta_s(self) -> float:
        """Planned seconds of the steps not yet done, at the pace of the steps done."""
        remaining = sum(self.etas[self.k:])
        if self.planned_done > 0:
            remaining *= (self.step_t0 - self.t0) / self.planned_done
        return remaining

    def _line(self, k: int, text: str) -> None:
        elapsed = self.clock() - self.t0
        self.console.print(f"[{k}/{len(self.etas)}] {text} "
                           f"(elapsed {clock_text(elapsed)}, ETA {clock_text(self.eta_s())})",
                           markup=False, highlight=False, soft_wrap=True)

    def start(self, step_id: str) -> None:
        self.step_t0 = self.clock()
        self.current = step_id
        self.bar.update(self.task, step=f"{step_id} ({self.k + 1}/{len(self.etas)})",
                        completed=self.planned_done)
        if self.lines:
            self._line(self.k + 1, f"start {step_id}")

    def tick(self, elapsed: float) -> None:
        """Seconds into the current step (never past its estimate: the bar waits)."""
        self.bar.update(self.task, completed=self.planned_done
                        + min(elapsed, self.etas[self.k] * 0.99))

    def end(self, status: str) -> None:
        took = self.clock() - self.step_t0
        self.planned_done += self.etas[self.k]
        self.k += 1
        self.step_t0 = self.clock()
        self.bar.update(self.task, completed=self.planned_done)
        if self.lines:
            self._line(self.k, f"end {self.current}: {status} in {clock_text(took)}")
