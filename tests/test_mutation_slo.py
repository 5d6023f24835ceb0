"""SLO, goodput and SLA verdicts pinned at their boundaries (reports.tables.goodput,
reports.tables.sla): the TTFT bound is strict ("p50 TTFT < 5 s"), the speed and ITL bounds
inclusive, every bound applies to single requests and to steps, a step is judged on its p50 per-user
speed, an unusable or empty step never meets an SLO, and the best point is per stack (and cache
state). Expected values are worked out by hand. (`make mutate`: group `slo`.)"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from reports.records.stackinfo import REHEARSAL_ROW, StackInfo
from reports.tables.goodput import (
    DEFAULT_SLOS,
    Slo,
    goodput,
    p50s_meet,
    parse_slo,
    request_meets,
    step_meets,
)
from reports.tables.published import PUBLISHED_LABEL, TRACE_NOMINAL_REUSE, published_figure
from reports.tables.sla import (
    COLUMNS,
    MEASUREMENT,
    RECIPE_SLA,
    best_points,
    definition_for,
    mark_best,
    meets,
    published_row,
    sla_table,
    user_speeds,
)
from stacks.catalog.model_catalog import K_EXAONE, MOTIF_3
from stacks.sizing.estimate import HourlyCost

SLA = Slo("sla", ttft_ms=5000, min_tok_s_per_user=50)
TIGHT = Slo("tight", ttft_ms=2000, itl_ms=25)


# --- definitions and parsing ---------------------------------------------------------------

def test_slo_definitions_say_which_bound_is_strict():
    assert SLA.definition == "TTFT < 5000 ms and per-user output >= 50 tok/s"
    assert TIGHT.definition == "TTFT < 2000 ms and ITL <= 25 ms"
    assert DEFAULT_SLOS[0] == Slo("sla-tps50-ttft5s", ttft_ms=5000, min_tok_s_per_user=50)
    assert DEFAULT_SLOS[1] == Slo("ttft2s-itl25ms", ttft_ms=2000, itl_ms=25)
    assert RECIPE_SLA is DEFAULT_SLOS[0]


def test_parse_slo_reads_every_key_and_trims_spaces():
    assert parse_slo(" a : ttft_ms=5000, tok_s_per_user=50 ,itl_ms=20") == \
        Slo("a", 5000.0, 50.0, 20.0)
    assert parse_slo(":ttft_ms=10") == Slo("slo", 10.0)        # no name: "slo"


@pytest.mark.parametrize("spec, message", [
    ("ttft_ms=5", "SLO 'ttft_ms=5': write it as name:ttft_ms=5000,tok_s_per_user=50 "
                  "(keys: ttft_ms, tok_s_per_user, itl_ms)"),
    ("a:ttft=5", "SLO 'a:ttft=5': unknown key 'ttft'; use ttft_ms, tok_s_per_user or itl_ms"),
    ("a:ttft_ms=fast", "SLO 'a:ttft_ms=fast': 'ttft_ms' needs a number, got 'fast'"),
    ("a:itl_ms=3", "SLO 'a:itl_ms=3': ttft_ms is required"),
])
def test_parse_slo_refusals_name_the_fix(spec, message):
    with pytest.raises(ValueError) as err:
        parse_slo(spec)
    assert str(err.value) == message


# --- single requests ------------------------------------------------------------------------

def _requests(**cols) -> pd.DataFrame:
    base = {"completed": [True], "ttft_ms": [100.0], "tok_s_per_user": [60.0],
            "itl_ms": [10.0]}
    return pd.DataFrame({**base, **cols})


@pytest.mark.parametrize("cols, slo, met", [
    ({}, SLA, True),
    ({"ttft_ms": [5000.0]}, SLA, False),             # TTFT < bound: at the bound fails
    ({"ttft_ms": [4999.9]}, SLA, True),
    ({"tok_s_per_user": [50.0]}, SLA, True),         # speed >= bound
    ({"tok_s_per_user": [49.9]}, SLA, False),
    ({"itl_ms": [500.0]}, SLA, True),                # no ITL bound in this SLO
    ({"itl_ms": [25.0]}, TIGHT, True),               # ITL <= bound
    ({"itl_ms": [25.1]}, TIGHT, False),              # the ITL bound holds per request
    ({"tok_s_per_user": [1.0]}, TIGHT, True),        # no speed bound in this SLO
    ({"completed": [False]}, SLA, False),            # failed/truncated/cancelled never meet
    ({"ttft_ms": [math.nan]}, SLA, False),           # unknown TTFT never meets
])
def test_a_request_meets_every_bound_of_its_slo(cols, slo, met):
    assert request_meets(_requests(**cols), slo).tolist() == [met]


# --- steps ----------------------------------------------------------------------------------

@pytest.mark.parametrize("ttft, speed, itl, slo, met", [
    (4999.0, 50.0, 99.0, SLA, True),
    (5000.0, 60.0, 1.0, SLA, False),                 # the seed's SLA: p50 TTFT < 5 s
    (100.0, 49.99, 1.0, SLA, False),
    (1999.0, 0.0, 25.0, TIGHT, True),
    (1999.0, 0.0, 25.01, TIGHT, False),
    (2000.0, 0.0, 1.0, TIGHT, False),
    (math.nan, 60.0, 1.0, SLA, False),
    (100.0, math.nan, 1.0, SLA, False),
    (100.0, 0.0, math.nan, TIGHT, False),
])
def test_step_p50s_against_the_slo(ttft, speed, itl, slo, met):
    assert p50s_meet(ttft, speed, itl, slo) is met


def test_a_step_is_judged_on_its_p50_per_user_speed():
    step = pd.Series({"ttft_p50_ms": 100.0, "itl_p50_ms": 10.0, "usable": True})
    # p50 40 (mean 36.7, p90 56): below 50, whatever a p90 or a max would say
    slow_median = pd.DataFrame({"tok_s_per_user": [10.0, 40.0, 60.0]})
    assert step_meets(step, slow_median, SLA) is False
    # p50 55 (mean 41.7, p10 ~14): meets, whatever the mean or a low percentile would say
    fast_median = pd.DataFrame({"tok_s_per_user": [5.0, 55.0, 65.0]})
    assert step_meets(step, fast_median, SLA) is True
    assert step_meets(step.drop("usable"), fast_median, SLA) is True   # usable by default
    assert step_meets(pd.Series({**step, "usable": False}), fast_median, SLA) is False
    assert step_meets(step, fast_median.iloc[0:0], SLA) is False       # no completed request


def _goodput_inputs():
    steps = pd.DataFrame([
        {"stack": "a", "run_id": "r", "step": "c1", "workload": "w", "concurrency": 1,
         "step_flag": "", "attempted": 4, "completed": 3, "failed": 1, "truncated": 0,
         "cancelled": 0, "window_s": 2.0, "ttft_p50_ms": 100.0, "itl_p50_ms": 10.0,
         "output_tok_s": 200.0, "output_tok_s_per_gpu": 50.0, "usable": True},
        {"stack": "a", "run_id": "r", "step": "c2", "workload": "w", "concurrency": 2,
         "step_flag": "", "attempted": 2, "completed": 2, "failed": 0, "truncated": 0,
         "cancelled": 0, "window_s": 1.0, "ttft_p50_ms": 100.0, "itl_p50_ms": 30.0,
         "output_tok_s": 400.0, "output_tok_s_per_gpu": 100.0, "usable": True},
        {"stack": "a", "run_id": "r", "step": "c4", "workload": "w", "concurrency": 4,
         "step_flag": "CLIENT-BOUND", "attempted": 0, "completed": 0, "failed": 0,
         "truncated": 0, "cancelled": 0, "window_s": 0.0, "ttft_p50_ms": 100.0,
         "itl_p50_ms": 10.0, "output_tok_s": 900.0, "output_tok_s_per_gpu": 300.0,
         "usable": False}])
    requests = pd.DataFrame([
        {"stack": "a", "run_id": "r", "step": "c1", "completed": c, "ttft_ms": t,
         "tok_s_per_user": u, "itl_ms": i}
        for c, t, u, i in [(True, 100.0, 60.0, 10.0), (True, 100.0, 70.0, 10.0),
                           (True, 6000.0, 80.0, 10.0), (False, 50.0, 90.0, 10.0)]] + [
        {"stack": "a", "run_id": "r", "step": "c2", "completed": True, "ttft_ms": 100.0,
         "tok_s_per_user": 55.0, "itl_ms": i} for i in (30.0, 20.0)])
    return steps, requests


def test_goodput_table_by_hand():
    steps, requests = _goodput_inputs()
    out = goodput(steps, requests, (SLA, TIGHT))
    assert list(zip(out["slo"], out["step"], strict=True)) == [
        ("sla", "c1"), ("sla", "c2"), ("sla", "c4"),
        ("tight", "c1"), ("tight", "c2"), ("tight", "c4")]
    # sla, c1: 2 of 4 attempted meet (one too slow to first token, one failed) over 2 s
    # tight, c1: the two fast completed ones again; tight, c2: the request with ITL 20 ms only
    assert out["requests_meeting_slo"].tolist() == [2, 2, 0, 2, 1, 0]
    assert out["goodput_fraction"].tolist()[:2] == [0.5, 1.0]
    assert out["goodput_fraction"].tolist()[3:5] == [0.5, 0.5]
    assert math.isnan(out["goodput_fraction"][2])                  # nothing attempted
    assert out["goodput_req_s"].tolist()[:2] == [1.0, 2.0]
    assert math.isnan(out["goodput_req_s"][5])                     # no window
    # steps: c2's p50 ITL of 30 ms fails the tight SLO; c4 is not usable
    assert out["step_meets_slo"].tolist() == [True, True, False, True, False, False]
    assert out["best_output_tok_s_per_gpu"].tolist() == [100.0] * 3 + [50.0] * 3
    assert out["best_point"].tolist() == [False, True, False, True, False, False]
    first = out.iloc[0]
    assert (first["stack"], first["run_id"], first["workload"], first["concurrency"],
            first["step_flag"], first["slo_definition"], first["attempted"], first["failed"],
            first["window_s"], first["output_tok_s"], first["usable"]) == (
        "a", "r", "w", 1, "", SLA.definition, 4, 1, 2.0, 200.0, True)
    assert out.iloc[2]["step_flag"] == "CLIENT-BOUND"
    assert goodput(steps.iloc[0:0], requests).empty


def test_the_best_point_is_per_stack_and_slo():
    steps, requests = _goodput_inputs()
    other = steps.assign(stack="b", output_tok_s_per_gpu=[10.0, 20.0, 30.0])
    out = goodput(pd.concat([steps, other], ignore_index=True),
                  pd.concat([requests, requests.assign(stack="b")], ignore_index=True), (SLA,))
    best = out[out["best_point"]]
    assert list(zip(best["stack"], best["step"], strict=True)) == [("a", "c2"), ("b", "c2")]
    assert out.set_index("stack")["best_output_tok_s_per_gpu"].to_dict() == {"a": 100.0,
                                                                             "b": 20.0}


# --- sla.csv -------------------------------------------------------------------------------

def test_user_speeds_edge_cases():
    ok = pd.DataFrame({"tok_s_per_user": [10.0, 20.0, 60.0], "osl": [90.0, 100.0, 110.0]})
    assert user_speeds(ok, 0.0, 0.0)["e2e"] != user_speeds(ok, 0.0, 0.0)["e2e"]  # NaN
    assert user_speeds(ok, 0.0, 0.0)["p50"] == 20.0
    assert user_speeds(ok, 100.0, 9.0)["e2e"] == pytest.approx(100 / 1.0)
    assert set(user_speeds(ok.iloc[0:0], 1.0, 1.0)) == {"mean", "p50", "e2e"}


def test_definition_for_a_model():
    assert definition_for(K_EXAONE, None) == "e2e"          # as its figure was published
    assert definition_for("someone/unpublished", None) == "p50"
    assert definition_for(K_EXAONE, "mean") == "mean"
    with pytest.raises(ValueError) as err:
        definition_for(K_EXAONE, "p90")
    assert str(err.value) == "user speed 'p90': use one of mean, p50, e2e"


def test_meets_needs_a_usable_step_and_a_known_speed():
    assert meets(100.0, 10.0, 50.0, True, SLA) is True
    assert meets(100.0, 10.0, 50.0, False, SLA) is False
    assert meets(100.0, 10.0, math.nan, True, SLA) is False


def _info(target: str = "aws") -> StackInfo:
    return StackInfo(name="agg-m", target=target, topology="aggregated", router="kv", gpus=2,
                     gpu_types="p6-b200.48xlarge", workers="1 x TP2", hourly=HourlyCost(),
                     cost_basis="", model=MOTIF_3, recipe="optimized",
                     speculative="real (mtp x2)")


def _trace_steps() -> tuple[pd.DataFrame, pd.DataFrame]:
    base = {"stack": "agg-m", "run_id": "r1", "workload": "trace_replay", "status": "complete",
            "step_flag": "", "attempted": 3, "completed": 3, "failed": 0, "truncated": 0,
            "cancelled": 0, "requested_rows": 3, "excluded_over_context": 1,
            "clipped_over_context": 0, "max_model_len": 262144, "ttft_p50_ms": 300.0,
            "itl_p50_ms": 12.0, "output_tok_s": 600.0, "output_tok_s_per_gpu": 300.0,
            "nominal_reuse": 0.7, "trace_block_reuse": 0.65, "server_hit_rate": 0.5,
            "usable": True}
    steps = pd.DataFrame([
        {**base, "step": "c16", "concurrency": 16, "cache": "cold"},
        {**base, "step": "c11", "concurrency": 11, "cache": "cold",
         "output_tok_s_per_gpu": 250.0},
        {**base, "step": "c11-warm", "concurrency": 11, "cache": "warm", "ttft_p50_ms": 5000.0},
        {**base, "step": "x", "workload": "concurrency_sweep", "concurrency": 1,
         "cache": "cold"}])
    requests = pd.DataFrame([
        {"stack": "agg-m", "run_id": "r1", "step": s, "completed": c, "tok_s_per_user": u,
         "osl": 100.0}
        for s in ("c16", "c11", "c11-warm")
        for c, u in [(True, 40.0), (True, 60.0), (True, 70.0), (False, 1.0)]])
    return steps, requests


def test_sla_table_rows_by_hand():
    steps, requests = _trace_steps()
    sla = sla_table(steps, requests, {"agg-m": _info()})
    assert list(sla.columns) == COLUMNS
    measured = sla[sla["row_kind"] == MEASUREMENT]
    # sorted by stack, cache, concurrency; the sweep step is no trace step
    assert measured["step"].tolist() == ["c11", "c16", "c11-warm"]
    row = measured.iloc[0].to_dict()
    assert {k: row[k] for k in ("stack", "model", "recipe", "topology", "gpus", "run_id",
                                "concurrency", "cache", "status", "attempted",
                                "excluded_over_context", "max_model_len", "ttft_p50_ms",
                                "itl_p50_ms", "output_tok_s", "output_tok_s_per_gpu",
                                "nominal_reuse", "trace_block_reuse", "measured_kv_reuse",
                                "speculative_acceptance", "usable", "source")} == {
        "stack": "agg-m", "model": MOTIF_3, "recipe": "optimized", "topology": "aggregated",
        "gpus": 2, "run_id": "r1", "concurrency": 11, "cache": "cold", "status": "complete",
        "attempted": 3, "excluded_over_context": 1, "max_model_len": 262144,
        "ttft_p50_ms": 300.0, "itl_p50_ms": 12.0, "output_tok_s": 600.0,
        "output_tok_s_per_gpu": 250.0, "nominal_reuse": 0.7, "trace_block_reuse": 0.65,
        "measured_kv_reuse": 0.5, "speculative_acceptance": "real (mtp x2)", "usable": True,
        "source": "aws run of 1 x TP2 on p6-b200.48xlarge"}
    # Motif 3 was published with p50 per-user speed: of the completed requests, 60
    assert row["user_speed_definition"] == \
        "p50: p50 of per-request output tok/s (1 / request ITL)"
    assert row["user_tok_s"] == 60.0 and row["meets_sla"] is True
    assert measured["meets_sla"].tolist() == [True, True, False]   # warm: TTFT at the bound
    assert measured["best_point"].tolist() == [False, True, False]
    assert str(sla["gpus"].dtype) == "Int64" and str(sla["attempted"].dtype) == "Int64"
    published = sla[sla["row_kind"] == PUBLISHED_LABEL]
    assert len(published) == 3 and not published["best_point"].any()
    assert best_points(sla)["step"].tolist() == ["c16"]
    assert best_points(sla, "warm").empty and best_points(sla, "cold")["step"].tolist() == \
        ["c16"]
    mean = sla_table(steps, requests, {"agg-m": _info()}, user_speed="mean")
    assert mean.iloc[0]["user_tok_s"] == pytest.approx(170 / 3)


def test_a_rehearsal_row_says_so_and_counts_as_measured():
    steps, requests = _trace_steps()
    sla = sla_table(steps, requests, {"agg-m": _info("local")})
    rehearsed = sla[sla["row_kind"] == REHEARSAL_ROW]
    assert len(rehearsed) == 3
    assert rehearsed.iloc[0]["source"] == \
        "local run of 1 x TP2 on p6-b200.48xlarge (mocker workers)"
    assert best_points(sla)["step"].tolist() == ["c16"]


def test_steps_without_trace_give_an_empty_table():
    steps, requests = _trace_steps()
    empty = sla_table(steps[steps["workload"] != "trace_replay"], requests,
                      {"agg-m": _info()})
    assert empty.empty and list(empty.columns) == COLUMNS


def test_a_missing_usable_or_server_hit_rate_reads_as_usable_and_unknown():
    steps, requests = _trace_steps()
    sla = sla_table(steps.drop(columns=["usable", "server_hit_rate", "status", "step_flag"]),
                    requests, {"agg-m": _info()})
    first = sla.iloc[0]
    assert bool(first["usable"]) is True and bool(first["meets_sla"]) is True
    assert math.isnan(first["measured_kv_reuse"]) and first["status"] is None
    # an unjudged step carries no flag: the SLA table would mark it otherwise
    assert first["step_flag"] == ""


def test_published_rows_carry_the_sources_figures():
    p = published_figure(MOTIF_3, "aggregated")
    assert published_row(p) == {
        "row_kind": PUBLISHED_LABEL, "model": MOTIF_3,
        "stack": "published: Motif-3-NVFP4 aggregated, 1 x TP2 + expert parallel",
        "recipe": "optimized", "topology": "aggregated", "gpus": 2, "concurrency": 11,
        "cache": "not stated", "excluded_over_context": 35, "ttft_p50_ms": 388.18,
        "user_speed_definition": "p50: as published", "user_tok_s": 66.27,
        "output_tok_s_per_gpu": 293.96, "meets_sla": None, "best_point": False,
        "nominal_reuse": TRACE_NOMINAL_REUSE, "measured_kv_reuse": None,
        "speculative_acceptance": p.speculative, "status": "published: VERIFIED",
        "source": p.source}
    baseline = published_row(published_figure(MOTIF_3, "baseline"))
    assert (baseline["recipe"], baseline["topology"], baseline["user_speed_definition"]) == (
        "baseline", "", "not published")


def test_mark_best_takes_only_measured_rows_meeting_the_sla():
    rows = [{c: None for c in COLUMNS} | {"row_kind": kind, "stack": "a", "cache": "cold",
                                          "output_tok_s_per_gpu": tps, "meets_sla": ok}
            for kind, tps, ok in [(MEASUREMENT, 10.0, True), (MEASUREMENT, 30.0, False),
                                  (REHEARSAL_ROW, 20.0, True), (PUBLISHED_LABEL, 99.0, True)]]
    assert mark_best(pd.DataFrame(rows))["best_point"].tolist() == [False, False, True, False]


def test_more_slo_edges():
    with pytest.raises(ValueError) as err:
        parse_slo("a:ttft_ms=5=6")
    assert str(err.value) == "SLO 'a:ttft_ms=5=6': 'ttft_ms' needs a number, got '5=6'"
    # p50 of [40, 60] is exactly 50 (a p51 would be 50.2): below a bound of 50.1
    step = pd.Series({"ttft_p50_ms": 100.0, "itl_p50_ms": 10.0, "usable": True})
    speeds = pd.DataFrame({"tok_s_per_user": [40.0, 60.0]})
    assert step_meets(step, speeds, Slo("s", 5000, 50.1)) is False
    assert step_meets(step, speeds, Slo("s", 5000, 50.0)) is True


def test_no_step_meeting_the_slo_leaves_no_best_point():
    steps, requests = _goodput_inputs()
    out = goodput(steps, requests, (Slo("impossible", ttft_ms=1.0),))
    assert not out["best_point"].any()
    assert all(math.isnan(v) for v in out["best_output_tok_s_per_gpu"])


def test_sla_rows_carry_the_steps_own_record():
    from reports.tables.sla import _float
    assert math.isnan(_float(pd.NA)) and math.isnan(_float(None)) and _float(3) == 3.0
    steps, requests = _trace_steps()
    steps = steps.assign(step_flag=["", "FAILED: x", "", ""], usable=[True, False, True, True],
                         requested_rows=[3, 4, 5, 6], clipped_over_context=[0, 2, 0, 0])
    sla = sla_table(steps, requests, {"agg-m": _info()})
    measured = sla[sla["row_kind"] == MEASUREMENT].set_index("step")
    # a step recorded before cache states were: "unknown", not blank
    from reports.tables.sla import _measured_row
    row = _measured_row(steps.iloc[0].drop("cache"), requests.iloc[0:0], _info(), "p50", SLA)
    assert row["cache"] == "unknown"
    c11 = measured.loc["c11"]
    assert (c11["step_flag"], bool(c11["usable"]), bool(c11["meets_sla"])) == \
        ("FAILED: x", False, False)
    assert (c11["requested_rows"], c11["clipped_over_context"]) == (4, 2)
    assert measured.loc["c16", "step_flag"] == ""
    # the ITL bound of the SLO reaches sla.csv's verdict (p50 ITL 12 ms)
    tight = sla_table(steps, requests, {"agg-m": _info()}, slo=Slo("t", 5000, itl_ms=10))
    # meets_sla is True, False or None (unusable): count the Trues (fillna on the object column
    # warned of pandas' coming downcasting change)
    assert not tight["meets_sla"].eq(True).any()
    loose = sla_table(steps, requests, {"agg-m": _info()}, slo=Slo("t", 5000, itl_ms=12))
    assert loose["meets_sla"].eq(True).sum() == 1          # c16 (c11 is unusable)


def test_a_trace_step_without_requests_and_a_models_own_speed():
    steps, requests = _trace_steps()
    sla = sla_table(steps, requests[requests["step"] != "c16"], {"agg-m": _info()})
    c16 = sla[sla["step"] == "c16"].iloc[0]
    assert math.isnan(c16["user_tok_s"]) and c16["meets_sla"] is False
    kexaone = StackInfo(**{**_info().__dict__, "model": K_EXAONE})
    e2e = sla_table(steps, requests, {"agg-m": kexaone})
    assert e2e.iloc[0]["user_speed_definition"] == \
        "e2e: end-to-end: mean OSL / (TTFT p50 + mean OSL x ITL p50)"
    # mean OSL 100 / (0.3 s + 100 x 0.012 s) = 66.7 tok/s
    assert e2e.iloc[0]["user_tok_s"] == pytest.approx(100 / 1.5)
