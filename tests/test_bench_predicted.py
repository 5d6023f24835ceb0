"""`make bench`'s predicted columns (pure): the run's own predictions, measured / predicted."""

from __future__ import annotations

from workloads.bench import COLUMNS, predicted_columns

PRED = {"steps": {"concurrency_sweep/c4": {"ttft_ms": 76.2, "itl_ms": 5.19}}}


def test_the_bench_row_carries_the_steps_prediction_and_the_measured_ratios():
    got = predicted_columns(PRED, "concurrency_sweep/c4", 57.15, 5.19 * 0.95)
    assert got["ttft_predicted_ms"] == 76.2 and got["itl_predicted_ms"] == 5.19
    assert round(got["ttft_vs_predicted"], 3) == 0.75 and round(got["itl_vs_predicted"], 3) == 0.95
    assert [k for k, *_ in COLUMNS if "predicted" in k] == [
        "ttft_predicted_ms", "ttft_vs_predicted", "itl_predicted_ms", "itl_vs_predicted"]


def test_without_a_prediction_the_columns_are_empty_not_invented():
    assert set(predicted_columns({"not_predicted": "x"}, "concurrency_sweep/c4", 50.0,
                                 5.0).values()) == {None}
    assert set(predicted_columns(None, "concurrency_sweep/c4", 50.0, 5.0).values()) == {None}
