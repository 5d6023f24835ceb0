"""The ablation check (pure): which stacks are one setting apart, from their recorded configs,
and when a change is reported as a finding or as "no measurable difference" with its cause: a
router change counts on its hit-rate difference's interval and (Holm-adjusted) p-value, never
on a fixed threshold."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from reports.comparisons.ablation import (
    LEFT_OUT,
    NO_DIFFERENCE,
    ablation_check,
    pairs,
    setting_between,
    summary_lines,
)
from reports.render.summary import facts
from stacks.config.loader import load_stack


def recorded(name: str) -> dict:
    """A stack's config as a run manifest records it."""
    return load_stack(name).model_dump(mode="json", by_alias=True)


@pytest.mark.parametrize("a,b,setting", [
    ("local-agg", "local-agg-kv", "router"),
    ("local-agg", "local-disagg", "topology"),
    ("local-disagg", "local-agg-kv", None),          # router and topology: two settings
    ("agg-a100", "agg-a100-kv", "router"),
    ("agg-a100", "disagg-a100", "topology"),
    ("disagg-a100-kv", "disagg-a100-kv-offload", "offload"),
    ("agg-a100", "disagg-a100-kv", None),
    ("local-agg", "local-recipe-motif3", None),      # another model and workload
])
def test_shipped_stacks_pair_by_their_one_change(a, b, setting):
    assert setting_between(recorded(a), recorded(b)) == setting
    assert setting_between(recorded(b), recorded(a)) == setting


def test_only_settings_that_shape_the_measurement_break_a_pair():
    base, kv = recorded("local-agg"), recorded("local-agg-kv")
    kv["tags"] = {"experiment": "other"}
    kv["cost"] = {**kv["cost"], "budgetUsd": 1.0}
    assert setting_between(base, kv) == "router"
    kv["workloads"] = {**kv["workloads"], "seed": 1}          # other prompts: not comparable
    assert setting_between(base, kv) is None
    assert setting_between({**base, "scale": "quick"}, {**recorded("local-agg-kv"),
                                                        "scale": "full"}) is None
    kv = recorded("local-agg-kv")
    kv["serving"]["mocker"] = {**kv["serving"]["mocker"], "numGpuBlocks": 100}
    assert setting_between(base, kv) is None
    assert [(p.setting, p.baseline, p.changed) for p in pairs(
        {"local-agg-kv": recorded("local-agg-kv"), "local-agg": base})] == [
        ("router", "local-agg", "local-agg-kv")]


def _step(stack: str, hit: float, same: float, **extra) -> dict:
    """A step with a 2-point standard error on its hit rate (the request trace's)."""
    return {"stack": stack, "run_id": "r", "step": "multi_turn/conv4", "workload": "multi_turn",
            "usable": True, "server_hit_rate": hit, "same_worker_share": same,
            "chance_same_worker": 0.5, "prompt_workers": 2, "follow_ups": 80,
            "requests_per_worker": "worker-0 50, worker-1 50", "server_preemptions": 0.0,
            "server_kv_usage_max": 0.01, "trace_hit_rate_se": 0.02, **extra}


def raised(points: float, se: float) -> str:
    """The verdict of a significant rise: its 95 % normal interval from both sides' errors."""
    half = 1.959964 * math.hypot(se, se) * 100
    return (f"raised by {points:.1f} points [95 % CI {points - half:+.1f}, "
            f"{points + half:+.1f}]")


def _configs(**quick) -> dict:
    """Both stacks' recorded configs, run at quick scale with these multi-turn overrides."""
    configs = {"local-agg": recorded("local-agg"), "local-agg-kv": recorded("local-agg-kv")}
    for c in configs.values():
        mt = c["workloads"]["multiTurn"]
        mt["quick"] = {**mt["quick"], **quick}
        c["scale"] = "quick"
    return configs


def test_a_router_that_moved_the_hit_rate_is_a_finding():
    steps = pd.DataFrame([_step("local-agg", 0.45, 0.55), _step("local-agg-kv", 0.60, 0.95)])
    row = ablation_check(steps, _configs()).iloc[0]
    assert (row["setting"], row["baseline_stack"], row["changed_stack"]) == (
        "router", "local-agg", "local-agg-kv")
    assert row["verdict"] == raised(15.0, 0.02) and row["likely_cause"] == ""
    assert row["delta_ci_low"] == pytest.approx(0.15 - 1.959964 * math.hypot(0.02, 0.02))
    assert row["p_value"] < 1e-6
    assert "55.0% -> 95.0%" in row["evidence"]


def test_lockstep_round_robin_is_flagged_with_its_cause():
    """Equal hit rates while round-robin kept every follow-up turn on its worker: accidental
    affinity, named with the workload settings that allow it."""
    steps = pd.DataFrame([_step("local-agg", 0.541, 1.0), _step("local-agg-kv", 0.541, 1.0)])
    table = ablation_check(steps, _configs(turnDelaySigma=0, conversations=4))
    row = table.iloc[0]
    assert row["verdict"] == NO_DIFFERENCE
    assert "accidental session affinity" in row["likely_cause"]
    assert "4 conversations are a multiple of the 2 workers" in row["likely_cause"]
    findings, warnings = summary_lines(table)
    assert findings == [] and len(warnings) == 1
    assert warnings[0].startswith("ablation check: local-agg-kv vs local-agg (router)")
    assert "54.1% vs 54.1%" in warnings[0]


@pytest.mark.parametrize("extra,same,cause", [
    ({"server_kv_usage_max": 1.0}, (0.5, 0.9), "KV cache full"),
    ({"prompt_workers": 1}, (1.0, 1.0), "nothing to route between"),
    ({}, (0.5, 0.55), "load balancing outweighed the overlap"),
    ({}, (math.nan, math.nan), "no routing evidence"),
])
def test_no_difference_names_the_first_cause_that_fits(extra, same, cause):
    steps = pd.DataFrame([_step("local-agg", 0.40, same[0], **extra),
                          _step("local-agg-kv", 0.41, same[1], **extra)])
    row = ablation_check(steps, _configs()).iloc[0]
    assert row["verdict"] == NO_DIFFERENCE and cause in row["likely_cause"]


def test_a_hit_rate_change_over_round_robins_accidental_affinity_is_no_finding():
    """Measured in the lockstep engine test on busy cores: round-robin kept 90 % of follow-up
    turns on their worker (chance 50 %), the KV router 76 %, and the hit rate fell 5 points,
    clearing the noise. The lockstep made that gap, not the router: flagged with that cause."""
    lockstep = pd.DataFrame([_step("local-agg", 0.603, 0.901, trace_hit_rate_se=0.01),
                             _step("local-agg-kv", 0.554, 0.757, trace_hit_rate_se=0.01)])
    row = ablation_check(lockstep, _configs()).iloc[0]
    assert row["verdict"] == NO_DIFFERENCE
    assert row["likely_cause"].startswith("accidental session affinity: round-robin sent 90%")
    # the router placing turns clearly better than round-robin's affinity is a finding again
    better = lockstep.assign(same_worker_share=[0.70, 0.95], server_hit_rate=[0.50, 0.60])
    assert ablation_check(better, _configs()).iloc[0]["verdict"] == raised(10.0, 0.01)


def test_a_difference_within_the_steps_noise_or_without_other_placement_is_no_finding():
    """5 points with a standard error of 3 points on each side is indistinguishable (its 95 %
    interval spans zero); with half-point errors it is a finding. A real hit-rate gap with
    turns placed as round-robin placed them is not the router's doing."""
    noisy = pd.DataFrame([_step("local-agg", 0.45, 0.55, trace_hit_rate_se=0.03),
                          _step("local-agg-kv", 0.50, 0.80, trace_hit_rate_se=0.03)])
    row = ablation_check(noisy, _configs()).iloc[0]
    assert row["verdict"] == NO_DIFFERENCE
    assert row["likely_cause"].startswith("indistinguishable at this sample: +5.0 points, 95 % "
                                          "interval [-3.3, +13.3]")
    quiet = noisy.assign(trace_hit_rate_se=0.005)
    assert ablation_check(quiet, _configs()).iloc[0]["verdict"] == raised(5.0, 0.005)
    alike = pd.DataFrame([_step("local-agg", 0.40, 0.60), _step("local-agg-kv", 0.50, 0.62)])
    row = ablation_check(alike, _configs()).iloc[0]
    assert row["verdict"] == NO_DIFFERENCE and "as round-robin did" in row["likely_cause"]


def test_no_standard_error_is_no_finding_however_large_the_move():
    """Without the request trace the step's noise is unknown: 40 points is still no finding
    (once, a fixed 3-point threshold called it one)."""
    steps = pd.DataFrame([_step("local-agg", 0.20, 0.55, trace_hit_rate_se=math.nan),
                          _step("local-agg-kv", 0.60, 0.95, trace_hit_rate_se=math.nan)])
    row = ablation_check(steps, _configs()).iloc[0]
    assert row["verdict"] == NO_DIFFERENCE and math.isnan(row["p_value"])
    assert "no standard error" in row["likely_cause"]


def test_the_reports_family_can_turn_a_finding_into_no_difference():
    """The same rise is a finding alone (p ~ 0.01) and not once Holm's adjustment over the
    report's other comparisons raises its p-value above 5 %."""
    steps = pd.DataFrame([_step("local-agg", 0.45, 0.55), _step("local-agg-kv", 0.52, 0.95)])
    alone = ablation_check(steps, _configs()).iloc[0]
    assert alone["verdict"] == raised(7.0, 0.02) and alone["p_value"] < 0.05
    family = {("local-agg", "local-agg-kv", "multi_turn/conv4"): 0.2}
    row = ablation_check(steps, _configs(), family).iloc[0]
    assert row["verdict"] == NO_DIFFERENCE and row["p_holm"] == 0.2
    assert "p 0.2 after Holm" in row["likely_cause"]


def test_flagged_steps_get_no_verdict_and_are_named():
    """A step flagged on one side (failed, client-bound, truncated: reports.records.flags) is never
    judged, whichever way its figures point, and the summary warns about it."""
    flag = "failed: 3 of 100 requests failed"
    steps = pd.DataFrame([_step("local-agg", 0.45, 0.5),
                          _step("local-agg-kv", 0.80, 0.95, usable=False, step_flag=flag)])
    table = ablation_check(steps, _configs())
    assert len(table) == 1
    row = table.iloc[0]
    assert row["verdict"] == LEFT_OUT and row["step"] == "multi_turn/conv4"
    assert f"local-agg-kv: {flag}" in row["likely_cause"]
    findings, warnings = summary_lines(table)
    assert findings == [] and warnings == [
        f"ablation check: local-agg-kv vs local-agg (router), multi_turn/conv4: left out, "
        f"not judged (local-agg-kv: {flag})"]
    # beside a usable step, the flagged one still gets its own row
    steps = pd.concat([steps, pd.DataFrame([
        {**_step("local-agg", 0.45, 0.5), "step": "trace_replay/c16", "workload": "trace_replay"},
        {**_step("local-agg-kv", 0.60, 0.95), "step": "trace_replay/c16",
         "workload": "trace_replay"}])])
    table = ablation_check(steps, _configs())
    assert list(zip(table["step"], table["verdict"], strict=True)) == [
        ("trace_replay/c16", raised(15.0, 0.02)),
        ("multi_turn/conv4", LEFT_OUT)]


def test_topology_and_offload_signals():
    topo = {"local-agg": recorded("local-agg"), "local-disagg": recorded("local-disagg")}
    moved = pd.DataFrame([_step("local-agg", 0.4, 0.5, handoff_share=0.0),
                          _step("local-disagg", 0.4, 1.0, handoff_share=1.0,
                                kv_transfer_est_ms_mean=7.2)])
    row = ablation_check(moved, topo).iloc[0]
    assert row["verdict"] == "KV moved between workers" and "7.2 ms" in row["evidence"]
    stayed = moved.assign(handoff_share=0.0)
    row = ablation_check(stayed, topo).iloc[0]
    assert row["verdict"] == NO_DIFFERENCE and "served aggregated" in row["likely_cause"]

    off = {"disagg-a100-kv": recorded("disagg-a100-kv"),
           "disagg-a100-kv-offload": recorded("disagg-a100-kv-offload")}
    nothing = pd.DataFrame([_step("disagg-a100-kv", 0.4, 0.9, server_offload_bytes=0.0),
                            _step("disagg-a100-kv-offload", 0.4, 0.9, server_offload_bytes=0.0,
                                  server_offload_hits=0.0, server_kv_usage_max=0.3)])
    row = ablation_check(nothing, off).iloc[0]
    assert row["verdict"] == NO_DIFFERENCE and "fit the GPU KV cache" in row["likely_cause"]
    row = ablation_check(nothing.drop(columns=["server_offload_bytes", "server_offload_hits"]),
                         off).iloc[0]
    assert "not exported" in row["likely_cause"]
    used = nothing.assign(server_offload_bytes=[0.0, 2e9])
    assert ablation_check(used, off).iloc[0]["verdict"] == "offload tier used"


def test_the_summary_carries_findings_and_flags():
    from reports.records.runs import RunRecord
    from reports.records.stackinfo import stack_info
    from reports.tables.goodput import DEFAULT_SLOS

    steps = pd.DataFrame([_step("local-agg", 0.541, 1.0), _step("local-agg-kv", 0.541, 1.0)])
    table = ablation_check(steps, _configs(turnDelaySigma=0, conversations=4))
    for c in ("attempted", "completed", "failed", "truncated", "cancelled"):
        steps[c] = 100 if c in ("attempted", "completed") else 0
    steps["percentile_samples"], steps["step_flag"] = 100, ""
    infos = {s: stack_info(RunRecord(path=None, stack=s, run_id="r", config={},
                                     config_hash="", versions={}, datasets={}, steps={}))
             for s in ("local-agg", "local-agg-kv")}
    f = facts({"ablation": table}, steps, [], infos, DEFAULT_SLOS[0], cost_warnings=[])
    assert any("no measurable difference" in w and "accidental session affinity" in w
               for w in f.warnings)


def test_offload_bytes_count_each_generation_of_vllm_names_once():
    """Newer vLLM exports the flat store / load counters and, deprecated, the older total by
    direction: the same bytes twice. The flat pair wins; the old total alone still counts."""
    from reports.records.server import offload_bytes
    from stacks.catalog import metrics as m

    def srv(*series):
        return pd.DataFrame([{"metric": name, "stat": "total", "value": v, "labels": "{}",
                              "endpoint": "w"} for name, v in series])
    both = srv((m.WORKER_KV_OFFLOAD_STORE_BYTES[1], 3e9), (m.WORKER_KV_OFFLOAD_LOAD_BYTES[1], 1e9),
               (m.WORKER_KV_OFFLOAD_TOTAL_BYTES.removesuffix("_total"), 4e9))
    assert offload_bytes(both) == 4e9
    assert offload_bytes(srv((m.WORKER_KV_OFFLOAD_TOTAL_BYTES, 2e9))) == 2e9
    assert math.isnan(offload_bytes(srv((m.WORKER_PREEMPTIONS, 0.0))))


def test_disagg_with_native_offload_is_marked_experimental_in_the_reports_stack_table():
    """Dynamo marks disaggregated serving with vLLM's native KV offload 'not yet validated end
    to end' (dynamo.md F4): pre-flight notes it, and the report's stack table carries it beside
    the stack's figures; a validated combination carries nothing."""
    from reports.records.runs import RunRecord
    from reports.records.stackinfo import EXPERIMENTAL, stack_info
    from reports.render.markdown import render

    def info(s):
        return stack_info(RunRecord(path=None, stack=s, run_id="r", config={}, config_hash="",
                                    versions={}, datasets={}, steps={}))
    infos = {s: info(s) for s in ("disagg-a100-kv-offload", "disagg-a100")}
    assert infos["disagg-a100-kv-offload"].caveat == EXPERIMENTAL
    assert "#11219" in EXPERIMENTAL and infos["disagg-a100"].caveat == ""
    md = render("t", "", {}, {}, [], [], infos, ())
    row = next(line for line in md.splitlines() if line.startswith("| disagg-a100-kv-offload"))
    assert "EXPERIMENTAL" in row and "upstream caveat" in md
    assert "upstream caveat" not in render("t", "", {}, {}, [], [],
                                           {"disagg-a100": infos["disagg-a100"]}, ())
