"""A SIMULATED sweep figure carries its error band in the report (reports/tables/sim_likely.py,
issue 39): only rows of simulated stacks, at the step's own shape and workers, shown beside the
figure as "true likely lo-hi"; a measured or rehearsed row gets none."""

from __future__ import annotations

import math

import pandas as pd

from reports.render.md_columns import ci, likely_words, with_display_columns
from reports.tables import sim_likely

INFO = {"workers": [{"role": "prefill", "count": 2}, {"role": "decode", "count": 3},
                    {"role": "decode", "count": 1}], "timings": {"tables": []}}


def test_only_simulated_rows_get_a_band_at_their_own_shape(monkeypatch):
    asked = []

    def bands(record, step, isl, osl, workers):
        asked.append((step["concurrency"], isl, osl, workers))
        return {"ttft_band_ms": (90.0, 200.0), "ttft_band_source": "rows x",
                "itl_band_source": "no band: none near"}
    monkeypatch.setattr(sim_likely, "sim_bands", bands)
    sweep = pd.DataFrame({"stack": ["sim", "live"], "concurrency": [16, 16],
                          "ttft_p50_ms": [100.0, 110.0], "itl_p50_ms": [9.0, 9.5]})
    requests = pd.DataFrame({"stack": ["sim"] * 3 + ["live"], "step": ["concurrency_sweep/c16"] * 4,
                             "requested_isl": [1024.0, 1024.0, 2048.0, 1.0],
                             "requested_osl": [512.0] * 4})
    out = sim_likely.add_likely(sweep, requests, {"sim": INFO})
    assert asked == [(16, 1024, 512, {"prefill": 2, "decode": 4})]
    sim, live = out.iloc[0], out.iloc[1]
    assert (sim["ttft_p50_ms_likely_lo"], sim["ttft_p50_ms_likely_hi"]) == (90.0, 200.0)
    assert math.isnan(sim["itl_p50_ms_likely_lo"]) and \
        sim["itl_p50_ms_likely_source"] == "no band: none near"
    assert math.isnan(live["ttft_p50_ms_likely_lo"]) and live["ttft_p50_ms_likely_source"] == ""


def test_the_band_is_shown_beside_the_figure_only_where_there_is_one():
    assert likely_words(9.0, 12.5) == "; true likely 9-12.5"
    assert likely_words(150.0, 1234.0) == "; true likely 150-1,234"
    assert likely_words(float("nan"), float("nan")) == ""
    table = pd.DataFrame({"ttft_p50_ms": [100.0, 110.0], "ttft_p50_ms_ci_low": [95.0, 100.0],
                          "ttft_p50_ms_ci_high": [105.0, 120.0],
                          "ttft_p50_ms_likely_lo": [90.0, float("nan")],
                          "ttft_p50_ms_likely_hi": [200.0, float("nan")]})
    cells = list(with_display_columns(table)[ci("ttft_p50_ms")])
    assert cells[0].endswith("; true likely 90-200") and "likely" not in cells[1]
