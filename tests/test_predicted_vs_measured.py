"""Predicted vs measured in a report (pure): ratios, bands, TTFT causes (the timing labels:
tests/test_reports_timing_words.py)."""

from __future__ import annotations

import pandas as pd

from reports.comparisons import predicted_vs_measured as pvm

PRED = {"steps": {"concurrency_sweep/c1": {"ttft_ms": 66.8, "itl_ms": 3.97,
                                           "output_tok_s": 244.0},
                  "concurrency_sweep/c16": {"ttft_ms": 93.4, "itl_ms": 7.59,
                                            "output_tok_s": 2059.0}}}


def _steps() -> pd.DataFrame:
    return pd.DataFrame([
        {"stack": "local-agg", "step": "concurrency_sweep/c1", "ttft_p50_ms": 52.3,
         "itl_p50_ms": 3.86, "output_tok_s": 229.0},
        {"stack": "local-agg", "step": "concurrency_sweep/c16/r2", "ttft_p50_ms": 98.3,
         "itl_p50_ms": 8.50, "output_tok_s": 1742.0},
        {"stack": "local-agg", "step": "multi_turn/conv8", "ttft_p50_ms": 1.0,
         "itl_p50_ms": 1.0, "output_tok_s": 1.0}])


def test_each_step_is_measured_over_its_prediction_and_flagged_outside_its_band():
    t = pvm.table(_steps(), {"local-agg": PRED}).set_index("step")
    assert list(t.index) == ["concurrency_sweep/c1", "concurrency_sweep/c16/r2"]  # no pred: out
    c1, c16 = t.loc["concurrency_sweep/c1"], t.loc["concurrency_sweep/c16/r2"]
    assert c1["itl_p50_ms_ratio"] == round(3.86 / 3.97, 3) and c1["itl_p50_ms_in_band"]
    assert c1["ttft_p50_ms_ratio"] == round(52.3 / 66.8, 3) and c1["ttft_p50_ms_in_band"]
    assert not c16["itl_p50_ms_in_band"]          # 1.12x: outside ITL's ±10 %
    assert not c16["output_tok_s_in_band"]        # 0.85x: outside throughput's ±15 %
    assert c16["ttft_p50_ms_in_band"]             # 1.05x


def test_the_bands_are_the_stated_ones_and_their_edges_are_in():
    assert pvm.BANDS == {"ttft_p50_ms": 0.25, "itl_p50_ms": 0.10, "output_tok_s": 0.15}
    assert pvm.in_band(1.10, 0.10) and pvm.in_band(0.90, 0.10)
    assert not pvm.in_band(1.1001, 0.10) and pvm.in_band(None, 0.1) is None


def test_a_larger_ttft_gap_names_its_causes_split_by_what_the_run_measured():
    """Outside its band, a step's TTFT gap is split into the client's TTFT over the frontend's
    (measured this step) and the frontend's over the prediction; the attestation's stall is
    quoted, "no figure" where it measured none."""
    steps = _steps().assign(ttft_mean_ms=[31.0, 99.0, 1.0],
                            server_ttft_mean_ms=[20.0, 80.0, 1.0])
    steps.loc[0, "ttft_p50_ms"] = 30.0                # 0.45x: outside ±25 %
    t = pvm.table(steps, {"local-agg": PRED})
    extra = {"attestations": [{"checks": [{"name": "first_data",
                                           "evidence": {"stall_ms": 28.983}}]}]}
    (line,) = pvm.ttft_causes(t, {"local-agg": pvm.first_data_stall_ms(extra)})
    assert "at concurrency_sweep/c1." in line and "measured 29.0 ms on a short prompt" in line
    assert "concurrency_sweep/c1: client over frontend +11.0 ms (mean 31.0 vs 20.0)" in line
    assert f"frontend mean / prediction {20.0 / 66.8:.2f}" in line and "mixes a prefill" in line
    assert "model terms" not in line                  # not a rehearsal on the table
    (unmeasured,) = pvm.ttft_causes(t, {"local-agg": None})
    assert "attestation measured no figure" in unmeasured
    bare = _steps()
    bare.loc[0, "ttft_p50_ms"] = 30.0                 # no client or frontend means recorded
    (line,) = pvm.ttft_causes(pvm.table(bare, {"local-agg": PRED}), {})
    assert "concurrency_sweep/c1: no client or frontend TTFT recorded for it" in line
    assert pvm.ttft_causes(pvm.table(_steps(), {"local-agg": PRED}), {}) == []


def test_a_traces_warm_pass_is_not_measured_against_the_cold_prediction():
    """The warm pass's TTFT stands on the cold pass's prefix cache, which the prediction does
    not model: only the cold trace step gets a row (the grace period, by contrast, takes the
    trace's ITL for both: stacks.sizing.step_itl.predicted_id)."""
    pred = {"steps": {"trace_replay/c4": {"ttft_ms": 90.0, "itl_ms": 7.5,
                                          "output_tok_s": 500.0}}}
    steps = pd.DataFrame([{"stack": "s", "step": step, "ttft_p50_ms": 40.0, "itl_p50_ms": 7.5,
                           "output_tok_s": 500.0}
                          for step in ("trace_replay/c4", "trace_replay/c4-warm")])
    assert list(pvm.table(steps, {"s": pred})["step"]) == ["trace_replay/c4"]


def test_a_rehearsals_ttft_gap_names_the_model_terms_its_table_leaves_out_with_their_size():
    """On the database's table the mocker runs neither AIConfigurator's vLLM dispatch term nor
    its queueing factor: a rehearsal's TTFT below the prediction names them, sized per step,
    with the ratio to the prediction without them; a cluster run (not on the table) does not."""
    pred = {"steps": {"concurrency_sweep/c16": {"ttft_ms": 93.3, "itl_ms": 8.59,
                                                "output_tok_s": 2000.0,
                                                "ttft_model_terms_ms": 63.9}}}
    steps = pd.DataFrame([{"stack": "local-agg", "step": "concurrency_sweep/c16",
                           "ttft_p50_ms": 52.4, "itl_p50_ms": 8.6, "output_tok_s": 2000.0,
                           "ttft_mean_ms": 55.4, "server_ttft_mean_ms": 46.1}])
    t = pvm.table(steps, {"local-agg": pred})
    assert t.loc[0, "ttft_model_terms_ms"] == 63.9 and not t.loc[0, "ttft_p50_ms_in_band"]
    (line,) = pvm.ttft_causes(t, {}, on_table={"local-agg"})
    assert "dispatch term" in line and "model terms 63.9 of the predicted 93.3 ms" in line
    assert f"frontend mean / prediction without them {46.1 / (93.3 - 63.9):.2f}" in line
    (cluster,) = pvm.ttft_causes(t, {}, labels={"local-agg": "MEASURED (a real cluster)"})
    assert "Per step (MEASURED (a real cluster)):" in cluster
    assert "dispatch term" not in cluster and "model terms" not in cluster
    assert f"frontend mean / prediction {46.1 / 93.3:.2f}" in cluster
    table = {"attempts": [{"target": {"timings": {"source": "aiconfigurator",
                                                  "tables": [{"role": "worker"}]}}}]}
    assert pvm.on_table(table)
    assert not pvm.on_table({"attempts": [{"target": {"timings": {"source": "generic",
                                                                  "tables": []}}}]})
    assert not pvm.on_table({"attempts": [{}]})


def test_a_disaggregated_rehearsal_names_no_model_terms_its_prediction_has_none():
    """AIConfigurator's disagg estimate carries no dispatch / queueing terms (aic_runner
    ttft_terms): on the table or not, its TTFT gap names none, and the per-step line says
    what the figures stand on."""
    pred = {"steps": {"concurrency_sweep/c4": {"ttft_ms": 56.2, "itl_ms": 6.7,
                                               "output_tok_s": 550.0}}}
    steps = pd.DataFrame([{"stack": "local-disagg", "step": "concurrency_sweep/c4",
                           "ttft_p50_ms": 82.1, "itl_p50_ms": 6.3, "output_tok_s": 553.0,
                           "ttft_mean_ms": 82.1, "server_ttft_mean_ms": 47.8}])
    t = pvm.table(steps, {"local-disagg": pred})
    (line,) = pvm.ttft_causes(t, {}, on_table={"local-disagg"},
                              labels={"local-disagg": "SIMULATED (mocker table)"})
    assert "dispatch term" not in line and "without the model's terms" not in line
    assert f"frontend mean / prediction {47.8 / 56.2:.2f}" in line
    assert "Per step (SIMULATED (mocker table)):" in line


def test_a_predicted_figure_carries_its_likely_range_from_the_record():
    """The run's record keeps each step's band (stacks/predict/bands.py, a JSON list); the
    table keeps its ends and whether the measured value fell in it, and the report prints the
    range beside the predicted figure; without a band, none."""
    pred = {"steps": {"concurrency_sweep/c1": {**PRED["steps"]["concurrency_sweep/c1"],
                                               "itl_band_ms": [3.7, 4.9],
                                               "ttft_band_ms": None}}}
    t = pvm.table(_steps(), {"local-agg": pred}).set_index("step")
    c1 = t.loc["concurrency_sweep/c1"]
    assert (c1["itl_p50_ms_likely_lo"], c1["itl_p50_ms_likely_hi"]) == (3.7, 4.9)
    assert c1["itl_p50_ms_in_likely"]       # 3.86 in 3.7-4.9
    assert c1["ttft_p50_ms_likely_lo"] is None and c1["ttft_p50_ms_in_likely"] is None
    assert pvm.likely_words(c1, "itl_p50_ms", 2) == " (likely 3.70-4.90)"
    assert pvm.likely_words(c1, "ttft_p50_ms", 1) == ""
    assert c1["itl_p50_ms_simulated_likely_lo"] is None
    # a rehearsal's SIMULATED figure (on the model's table) carries the band's ratios; whether
    # it fell in the prediction's band says nothing
    sim = pvm.table(_steps(), {"local-agg": pred}, simulated={"local-agg"}).set_index("step")
    s1 = sim.loc["concurrency_sweep/c1"]
    assert s1["itl_p50_ms_in_likely"] is None
    assert (s1["itl_p50_ms_simulated_likely_lo"], s1["itl_p50_ms_simulated_likely_hi"]) == \
        (round(3.86 * 3.7 / 3.97, 3), round(3.86 * 4.9 / 3.97, 3))
    assert pvm.likely_words(s1, "itl_p50_ms", 2, simulated=True) == " (likely 3.60-4.76)"
