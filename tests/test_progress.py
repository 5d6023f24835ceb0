"""Run progress: in a log or CI (not a terminal) one line per step start and end with k/N,
elapsed and ETA; in a terminal the bar, and no such lines."""

from __future__ import annotations

import io

from rich.console import Console

from workloads.progress import StepProgress


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _run(terminal: bool) -> str:
    out, clock = io.StringIO(), Clock()
    console = Console(file=out, force_terminal=terminal, width=120)
    with StepProgress(console, "local-agg", [10, 20, 30], clock=clock) as p:
        p.start("concurrency_sweep/c1")
        clock.t += 20                       # twice its estimate
        p.tick(20)
        p.end("complete")
        p.start("concurrency_sweep/c4")
        clock.t += 5
        p.end("failed")
    return out.getvalue()


def test_a_log_gets_one_line_per_step_start_and_end_with_k_of_n_elapsed_and_eta():
    lines = _run(terminal=False).splitlines()
    assert lines == [
        "[1/3] start concurrency_sweep/c1 (elapsed 0:00:00, ETA 0:01:00)",
        # the rest planned 50 s, at the pace so far (20 s for 10 planned): 100 s
        "[1/3] end concurrency_sweep/c1: complete in 0:00:20 (elapsed 0:00:20, ETA 0:01:40)",
        "[2/3] start concurrency_sweep/c4 (elapsed 0:00:20, ETA 0:01:40)",
        # 25 s for 30 planned: the last 30 s planned take 25 s
        "[2/3] end concurrency_sweep/c4: failed in 0:00:05 (elapsed 0:00:25, ETA 0:00:25)",
    ]


def test_a_terminal_gets_the_bar_and_no_step_lines():
    text = _run(terminal=True)
    assert "start concurrency_sweep" not in text and "end concurrency_sweep" not in text
    assert "local-agg" in text and "ETA" in text


def test_no_progress_prints_nothing():
    out = io.StringIO()
    with StepProgress(Console(file=out), "s", [1], enabled=False) as p:
        p.start("a")
        p.end("complete")
    assert out.getvalue() == ""
