"""A report built with every figure its plots drew kept open (drawn), for tests that measure the
figures themselves (labels, legends, text boxes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports.build import Report, build_report
from reports.render import plots, trace_plot


def report_with_figures(run_dirs: list[Path], out_root: Path, name: str,
                        **options) -> tuple[Report, dict[str, object]]:
    figures: dict[str, object] = {}
    real_save = plots._save

    def keep(fig, path):
        figures[Path(path).stem] = fig
        fig.canvas.draw()
        return real_save(fig, path)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plots, "_save", keep)
        mp.setattr(trace_plot, "_save", keep)
        report = build_report(run_dirs, out_root, name=name, **options)
    return report, figures
