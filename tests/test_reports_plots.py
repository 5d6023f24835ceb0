"""The report's plots read as a person expects: the Pareto plot in the field's convention
(throughput per GPU up, against per-user throughput and against TTFT), throughput against
concurrency, every axis labelled with its unit, no shading over the whole plot, and no text on
top of other text (drawn figures measured, on the committed fixture runs with their
client-bound steps and red labels)."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from figure_capture import report_with_figures
from reports_fixtures import copy_runs, run_dir

from reports.render.plot_labels import Label, overlapping_text, place, settle
from reports.render.plots import pareto_front

# The plots reports/render/plots.py draws (other modules' plots keep their own tests).
MINE = ("pareto", "throughput_vs_concurrency", "latency_vs_concurrency", "ttft_per_turn",
        "prefix_share", "length_distributions")
UNIT = re.compile(r"\((ms|s|%|tokens|tokens/s|tokens/s/GPU|tokens/s/user|count|requests|"
                  r"requests/s|requests in flight|index, 0 = first)\)$")


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plots")
    root = copy_runs(tmp)
    _, drawn = report_with_figures([run_dir(root, s) for s in ("local-agg", "local-disagg",
                                                               "local-agg-kv")],
                                   tmp / "out", "plots", with_compare=True)
    assert set(MINE) <= set(drawn)
    return drawn


@pytest.mark.parametrize("name", MINE)
def test_every_axis_is_labelled_with_its_unit(figures, name):
    for ax in figures[name].axes:
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            assert UNIT.search(label), (name, label)


@pytest.mark.parametrize("name", MINE)
def test_no_text_overlaps_other_text(figures, name):
    assert overlapping_text(figures[name]) == []


def _filled_area(path, transform) -> float:
    """Area in pixels of a filled path (shoelace over each closed polygon)."""
    total = 0.0
    for poly in path.to_polygons(transform):
        x, y = poly[:, 0], poly[:, 1]
        total += abs(float(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1)))) / 2
    return total


@pytest.mark.parametrize("name", MINE)
def test_no_shading_covers_the_plot(figures, name):
    """No filled area (an SLO region, a band, a span) covers half the plot; histogram bars and
    the min-max bands over repeats are small."""
    fig = figures[name]
    settle(fig)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        areas = [_filled_area(p.get_path(), p.get_transform()) for p in ax.patches]
        areas += [_filled_area(path, c.get_transform()) for c in ax.collections
                  for path in c.get_paths()]
        assert max(areas, default=0) < 0.5 * frame.width * frame.height, name


def test_the_shading_check_sees_a_span_over_the_plot():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    span = ax.axhspan(0, 10, alpha=0.1)
    settle(fig)
    frame = ax.get_window_extent(fig.canvas.get_renderer())
    assert _filled_area(span.get_path(), span.get_transform()) >= 0.5 * frame.width \
        * frame.height
    plt.close(fig)


def test_pareto_is_throughput_per_gpu_against_user_speed_and_ttft(figures):
    user, ttft = figures["pareto"].axes[:2]
    assert "per GPU" in user.get_ylabel() and "per GPU" in ttft.get_ylabel()
    assert "tokens/s/user" in user.get_xlabel() and "TTFT" in ttft.get_xlabel()
    # SLO limits are lines (or named in the legend when beyond the axis), never a region
    legend = [t.get_text() for t in user.get_legend().get_texts()]
    assert any(t.startswith("SLO: >= 50 tokens/s/user") for t in legend)
    assert any("TTFT < 5000 ms" in t.get_text() for t in ttft.get_legend().get_texts())


def test_throughput_against_concurrency_plots_the_sweep(figures):
    total, per_gpu = figures["throughput_vs_concurrency"].axes[:2]
    lines = {ln.get_label(): ln for ln in per_gpu.get_lines()}
    assert {"local-agg", "local-disagg", "local-agg-kv"} <= set(lines)
    assert list(lines["local-agg"].get_xdata()) == [1, 4]
    assert [t.get_text() for t in per_gpu.get_xticklabels()] == ["1", "4"]


def test_pareto_front_on_both_conventions():
    pts = pd.DataFrame({"user": [200, 180, 150, 190], "ttft": [40, 60, 90, 70],
                        "gpu": [20, 60, 65, 50]})
    up = pareto_front(pts, "user", "gpu", x_higher=True, y_higher=True)
    assert up[["user", "gpu"]].values.tolist() == [[150, 65], [180, 60], [190, 50], [200, 20]]
    low = pareto_front(pts, "ttft", "gpu", x_higher=False, y_higher=True)
    assert low[["ttft", "gpu"]].values.tolist() == [[40, 20], [60, 60], [90, 65]]


def test_crowded_labels_are_placed_apart_or_left_off():
    fig, ax = plt.subplots(figsize=(4, 3), layout="constrained")
    ax.plot([0, 10], [0, 10])
    settle(fig)
    labels = [Label(5 + i * 0.2, 5, f"c{i}") for i in range(40)]   # a few pixels apart
    skipped = place(ax, labels)
    assert overlapping_text(fig) == []
    assert skipped > 0 and len(ax.texts) > 5
    # the detector itself sees two texts on top of each other
    ax.text(1, 1, "overlap")
    ax.text(1, 1, "overlap")
    assert overlapping_text(fig)
    plt.close(fig)


def test_the_trace_replay_timeline_has_units_and_no_overlapping_text(tmp_path):
    """reports/render/trace_plot.py's timeline, drawn from the committed real-trace run."""
    import shutil
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "trace-runs" / "local-recipe-motif3"
    runs = tmp_path / "runs" / "local-recipe-motif3"
    shutil.copytree(fixture, runs)
    _, drawn = report_with_figures([runs / "fixture"], tmp_path / "out", "trace")
    timeline = [f for name, f in drawn.items() if name.startswith("trace_replay")]
    assert timeline, sorted(drawn)
    for fig in timeline:
        for ax in fig.axes:
            for label in (ax.get_xlabel(), ax.get_ylabel()):
                assert UNIT.search(label), label
        assert overlapping_text(fig) == []
