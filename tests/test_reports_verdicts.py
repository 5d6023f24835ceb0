"""Every comparison the report draws carries its difference, 95 % interval and a verdict judged
with the report's other comparisons (reports/comparisons/comparisons.py,
reports/comparisons/verdicts.py), on the committed fixture runs (real runs of the local engine) and
on frames built by hand for the comparisons those runs do not hold (a decode tier on another GPU,
cold vs warm, recipes, simulated vs measured)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from reports_fixtures import copy_runs, profiling_records, run_dir, sweep_dirs

from reports.build import build_report
from reports.comparisons import comparisons as cmp
from reports.comparisons import verdicts as v
from reports.tables.intervals import folded_quantile
from stacks.sizing import sampling


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verdicts")
    root = copy_runs(tmp)
    return build_report([run_dir(root, s, r) for s in ("local-agg", "local-disagg")
                         for r in ("fixture", "fixture-repeats")], tmp / "out", name="v",
                        with_compare=True), root


def _rows(report, **match) -> pd.DataFrame:
    t = report[0].tables["comparisons"]
    for k, val in match.items():
        t = t[t[k] == val]
    return t


def _ttft(step_dir) -> list[float]:
    return [r["metrics"]["time_to_first_token"]["value"] for r in profiling_records(step_dir)
            if "error" not in r]


def test_the_fixture_runs_agg_vs_disagg_verdicts(report):
    """local-disagg against local-agg, three repeats of c1 and c4 (10-36 requests each): TTFT
    p50 worse at c1, ITL p50 better at c1 and c4; TTFT p99 not judged (too few requests for
    any interval), the rest as the family allows."""
    t = _rows(report, question=v.Q_TOPOLOGY, reference_stack="local-agg",
              subject_stack="local-disagg").set_index(["step", "figure"])
    assert t.loc[("c1", "ttft_p50_ms"), "verdict"] == v.WORSE
    assert t.loc[("c1", "itl_p50_ms"), "verdict"] == v.BETTER
    assert t.loc[("c4", "itl_p50_ms"), "verdict"] == v.BETTER
    for step in ("c1", "c4"):
        row = t.loc[(step, "ttft_p99_ms")]
        assert row["verdict"] == v.NOT_JUDGED and "368" in row["method"]
    # each judged difference is the table's own: disagg's folded p50 minus agg's
    root = report[1]
    agg = [np.array(_ttft(d)) for d in sweep_dirs(root, "local-agg", 1)]
    dis = [np.array(_ttft(d)) for d in sweep_dirs(root, "local-disagg", 1)]
    row = t.loc[("c1", "ttft_p50_ms")]
    assert row["difference"] == pytest.approx(folded_quantile(dis, 0.5).value
                                              - folded_quantile(agg, 0.5).value)
    assert row["difference_ci_low"] < row["difference"] < row["difference_ci_high"]


def test_holm_adjusts_every_judged_comparison_as_one_family(report):
    t = report[0].tables["comparisons"]
    judged = t[t["p_value"].notna()]
    assert len(judged) >= 6
    assert (judged["p_holm"] >= judged["p_value"]).all()
    assert judged["p_holm"].tolist() == pytest.approx(sampling.holm(judged["p_value"].tolist()))
    # a verdict follows the adjusted p-value, not the raw one
    raw_only = judged[(judged["p_value"] < 0.05) & (judged["p_holm"] >= 0.05)]
    assert (raw_only["verdict"] == v.INDISTINGUISHABLE).all()


def test_the_compare_table_and_the_summary_carry_the_verdicts(report):
    rep = report[0]
    side = rep.tables["compare_concurrency"]
    judged = _rows(report, question=v.Q_TOPOLOGY, figure="ttft_p50_ms",
                   reference_stack="local-agg").set_index("step")
    for _, r in side[side["aggregated_stack"] == "local-agg"].iterrows():
        c = judged.loc[f"c{int(r['concurrency'])}"]
        assert r["ttft_p50_delta_ms_verdict"] == c["verdict"]
        assert r["ttft_p50_delta_ms_ci_low"] == c["difference_ci_low"]
    md = (rep.out_dir / "report.md").read_text()
    head = md[md.index("**Headline answers"):md.index("**Warnings**")]
    assert " minus " not in head                      # never a bare delta
    line = next(x for x in head.splitlines() if "agg vs disagg: TTFT p50" in x)
    assert "worse at c1" in line and "c1 +" in line and "ms [+" in line   # with its interval
    assert "comparisons.csv" in md and (rep.out_dir / "comparisons.csv").is_file()


def test_the_sweep_table_prints_each_figure_with_its_interval(report):
    sweep = report[0].tables["concurrency_sweep"].set_index(["stack", "concurrency"])
    row = sweep.loc[("local-agg", 4)]
    assert row["ttft_p50_ms_ci_low"] <= row["ttft_p50_ms"] <= row["ttft_p50_ms_ci_high"]
    assert math.isnan(row["ttft_p99_ms_ci_low"])          # 36 requests: no p99 interval
    # three repeats: output tok/s gets a t-interval over them
    assert row["output_tok_s_ci_low"] < row["output_tok_s"] < row["output_tok_s_ci_high"]
    assert "t over 3 repeats" in row["intervals"]


# --- the comparisons the fixture runs do not hold, on frames built by hand -----------------

def _frames(sides: dict[str, dict], seed: int = 0):
    """steps and requests of synthetic usable steps: {stack: {step: (workload, concurrency,
    cache, ttft median ms, output tok/s)}}, 200 completed requests each."""
    rng = np.random.default_rng(seed)
    steps, reqs = [], []
    for stack, their in sides.items():
        for step, (workload, c, cache, ttft, tps) in their.items():
            group = step.rsplit("/r", 1)[0]
            steps.append({"stack": stack, "run_id": "r", "step": step, "workload": workload,
                          "variant": group.split("/")[1], "group": group, "concurrency": c,
                          "cache": cache, "usable": True, "output_tok_s": tps,
                          "output_tok_s_per_gpu": tps / 8})
            t = rng.lognormal(math.log(ttft), 0.1, 200)
            reqs.append(pd.DataFrame({"stack": stack, "run_id": "r", "step": step,
                                      "completed": True, "ttft_ms": t, "itl_ms": t / 10,
                                      "tok_s_per_user": 1000 / (t / 10)}))
    return pd.DataFrame(steps), pd.concat(reqs, ignore_index=True)


class _Info:
    def __init__(self, topology, tiers, model="m", recipe=""):
        self.topology, self.tiers, self.model, self.recipe = topology, tiers, model, recipe
        self.rehearsal, self.simulated, self.target = False, False, "aws"
        self.router = "round-robin"


def test_a_decode_tier_on_another_gpu_is_compared_with_the_same_gpu_disagg_stack():
    infos = {"disagg": _Info("disaggregated", (("prefill", "p4d"), ("decode", "p4d"))),
             "l40s": _Info("disaggregated", (("prefill", "p4d"), ("decode", "g6e"))),
             "agg": _Info("aggregated", (("worker", "p4d"),))}
    steps, reqs = _frames({"disagg": {"concurrency_sweep/c8": ("concurrency_sweep", 8, None,
                                                               50.0, 1000.0)},
                           "l40s": {"concurrency_sweep/c8": ("concurrency_sweep", 8, None,
                                                             60.0, 900.0)}})
    cost = pd.DataFrame({"stack": ["disagg", "l40s"], "run_id": "r",
                         "step": "concurrency_sweep/c8",
                         "usd_per_1m_output_tokens": [3.0, 2.5]})
    rows = cmp.decode_tier(steps, cost, cmp.completed_by_step(reqs), infos)
    t = v.judge(rows).set_index("figure")
    assert set(t["reference_stack"]) == {"disagg"} and set(t["subject_stack"]) == {"l40s"}
    assert t.loc["ttft_p50_ms", "verdict"] == v.WORSE            # 20 % slower, 200 requests
    assert t.loc["usd_per_1m_output_tokens", "verdict"] == v.NOT_JUDGED   # one run
    assert t.loc["usd_per_1m_output_tokens", "difference"] == pytest.approx(-0.5)


def test_a_warm_pass_is_compared_with_its_cold_pass():
    infos = {"motif": _Info("aggregated", (("worker", "b200"),))}
    steps, reqs = _frames({"motif": {
        "trace_replay/c16": ("trace_replay", 16, "cold", 400.0, 500.0),
        "trace_replay/c16-warm": ("trace_replay", 16, "warm", 100.0, 600.0)}})
    t = v.judge(cmp.cold_vs_warm(steps, cmp.completed_by_step(reqs), infos))
    row = t[t["figure"] == "ttft_p50_ms"].iloc[0]
    assert (row["reference_stack"], row["subject_stack"], row["verdict"]) == \
        ("motif cold", "motif warm", v.BETTER)


def test_simulated_vs_measured_pairs_steps_and_summarises_across_them():
    sim_steps, sim_reqs = _frames({"agg": {f"concurrency_sweep/c{c}": (
        "concurrency_sweep", c, None, 50.0, 1000.0) for c in (1, 4, 16)}}, seed=1)
    meas_steps, meas_reqs = _frames({"agg": {f"concurrency_sweep/c{c}": (
        "concurrency_sweep", c, None, 55.0, 1000.0) for c in (1, 4, 16)}}, seed=2)
    rows = cmp.simulated_vs_measured(sim_steps, sim_reqs, meas_steps, meas_reqs, "MEASURED",
                                     figures=("ttft_p50_ms",))
    t = v.judge(rows, family=v.FAMILY_SIMULATION)
    assert list(t["step"]) == ["concurrency_sweep/c1", "concurrency_sweep/c16",
                               "concurrency_sweep/c4"]
    assert (t["verdict"] == v.HIGHER).all()          # measured 10 % slower than simulated
    summary = cmp.paired_by_step(t, "ttft_p50_ms")
    assert summary["steps"] == 3
    assert summary["ci_low"] < 0.10 < summary["ci_high"] or \
        summary["mean_relative_difference"] == pytest.approx(0.10, abs=0.03)


def test_a_verdict_reads_the_figures_good_direction():
    assert v.verdict(-3.0, 0.001, lower_is_better=True) == v.BETTER
    assert v.verdict(-3.0, 0.001, lower_is_better=False) == v.WORSE
    assert v.verdict(5.0, 0.2, lower_is_better=True) == v.INDISTINGUISHABLE
    assert v.verdict(5.0, math.nan, lower_is_better=True) == v.NOT_JUDGED


def test_each_measured_step_against_the_simulation_its_run_kept():
    """The manifest's simulation record (workloads/sim/record.py) with its standard errors:
    the frontend's TTFT p50 on both sides (the measured one's p40-p60 span gives its standard
    error; the record's client-side 30 ms is not the one compared), ITL p50 against the
    requests'; a family of its own, worded measured higher / lower; a record made before the
    standard errors is not judged."""
    infos = {"agg": _Info("aggregated", (("worker", "p4d"),))}
    steps, reqs = _frames({"agg": {"concurrency_sweep/c4": ("concurrency_sweep", 4, None,
                                                            50.0, 1000.0)}})
    itl = float(np.median(cmp.completed_by_step(reqs)[("agg", "r",
                                                       "concurrency_sweep/c4")]["itl_ms"]))
    steps = steps.assign(frontend_ttft_p40_ms=48.0, frontend_ttft_p50_ms=50.0,
                         frontend_ttft_p60_ms=52.0, frontend_itl_p50_ms=itl)
    record = {"steps": {"concurrency_sweep/c4": {
        "ttft_p50_ms": 30.0, "frontend_ttft_p50_ms": 40.0, "frontend_ttft_p50_se_ms": 0.5,
        "frontend_itl_p50_ms": itl, "frontend_itl_p50_se_ms": 0.05}}}
    t = cmp.all_comparisons({}, steps, reqs, infos, {("agg", "r"): record})
    sim = t[t["family"] == v.FAMILY_SIMULATION].set_index("figure")
    # TTFT: 50 measured vs 40 simulated, se hypot(0.5, 2.5 x 4 / sqrt(200))
    assert sim.loc["ttft_p50_ms", "verdict"] == v.HIGHER
    half = 1.959964 * math.hypot(0.5, 2.5 * 4.0 / math.sqrt(200))
    assert sim.loc["ttft_p50_ms", "difference_ci_low"] == pytest.approx(10.0 - half)
    assert sim.loc["itl_p50_ms", "verdict"] == v.INDISTINGUISHABLE
    # not on the first screen (the plan's questions), not in the report's family
    assert v.first_screen(t).empty
    old = {"steps": {"concurrency_sweep/c4": {"frontend_ttft_p50_ms": 40.0,
                                              "frontend_itl_p50_ms": itl}}}
    t = cmp.all_comparisons({}, steps, reqs, infos, {("agg", "r"): old})
    assert (t["verdict"] == v.NOT_JUDGED).all()
    assert "no standard error" in t["method"].iloc[0]


def test_agg_vs_disagg_pairs_only_like_with_like():
    """A simulated stack is never set against a rehearsed or measured one as "agg vs disagg"
    (that is simulated_vs_measured's question), nor stacks on other GPUs or routers."""
    from dataclasses import replace

    from reports.comparisons.compare import topology_pairs
    from reports.records.stackinfo import StackInfo
    from stacks.sizing.estimate import HourlyCost

    def info(name, topology, **kw):
        return StackInfo(**{"name": name, "target": "aws", "topology": topology,
                            "router": "round-robin", "gpus": 8, "gpu_types": "p4d.24xlarge",
                            "workers": "", "hourly": HourlyCost(), "cost_basis": "", **kw})
    agg, dis = info("agg", "aggregated"), info("dis", "disaggregated")
    others = {"dis-sim": replace(dis, name="dis-sim", simulated=True),
              "dis-local": replace(dis, name="dis-local", target="local"),
              "dis-l40s": replace(dis, name="dis-l40s", gpu_types="g6e.12xlarge, p4d.24xlarge"),
              "dis-kv": replace(dis, name="dis-kv", router="kv")}
    assert topology_pairs({"agg": agg, "dis": dis, **others}) == [("agg", "dis")]
    sim = {"agg-sim": replace(agg, name="agg-sim", simulated=True), **others}
    assert topology_pairs(sim) == [("agg-sim", "dis-sim")]


def test_a_decode_tier_is_compared_only_with_its_own_kind_prefill_gpu_and_router(monkeypatch):
    from dataclasses import replace

    import pandas as pd

    from reports.comparisons.comparisons import decode_tier
    from reports.records.stackinfo import StackInfo
    from stacks.sizing.estimate import HourlyCost

    base = StackInfo(name="s", target="aws", topology="disaggregated", router="round-robin",
                     gpus=8, gpu_types="p4d.24xlarge", workers="", hourly=HourlyCost(),
                     cost_basis="", model="m", tiers=(("prefill", "p4d"), ("decode", "p4d")))
    mixed = replace(base, name="mixed", tiers=(("prefill", "p4d"), ("decode", "g6e")))
    infos = {"mixed": mixed, "same": base,
             "sim": replace(base, name="sim", simulated=True),
             "kv": replace(base, name="kv", router="kv"),
             "other-prefill": replace(base, name="other-prefill",
                                      tiers=(("prefill", "g6e"), ("decode", "g6e")))}
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr(cmp, "_pairwise", lambda q, ref, sub, *a: seen.append((sub, ref)) or [])
    steps, reqs = _frames({n: {"concurrency_sweep/c8": ("concurrency_sweep", 8, None, 50.0,
                                                         1000.0)} for n in infos})
    decode_tier(steps, pd.DataFrame(), cmp.completed_by_step(reqs), infos)
    assert seen == [("mixed", "same")]


# --- between two SIMULATED candidates: what the timing model's error bands resolve ----------

def _simulated_pair(simulated: bool = True):
    from dataclasses import replace

    from reports.records.stackinfo import StackInfo
    from stacks.sizing.estimate import HourlyCost

    agg = StackInfo(name="agg", target="aws", topology="aggregated", router="round-robin",
                    gpus=8, gpu_types="p4d.24xlarge", workers="", hourly=HourlyCost(),
                    cost_basis="", simulated=simulated)
    return {"agg": agg, "dis": replace(agg, name="dis", topology="disaggregated")}


def _banded_sweep(dis_ttft_band: tuple[float, float]) -> pd.DataFrame:
    return pd.DataFrame([
        {"stack": "agg", "concurrency": 8, "itl_p50_ms": 5.0, "ttft_p50_ms_likely_lo": 40.0,
         "ttft_p50_ms_likely_hi": 56.0, "itl_p50_ms_likely_lo": 4.5,
         "itl_p50_ms_likely_hi": 6.0},
        {"stack": "dis", "concurrency": 8, "itl_p50_ms": 6.0,
         "ttft_p50_ms_likely_lo": dis_ttft_band[0], "ttft_p50_ms_likely_hi": dis_ttft_band[1],
         "itl_p50_ms_likely_lo": 5.5, "itl_p50_ms_likely_hi": 7.0}])


def _judged_pair(dis_ttft_band, simulated=True) -> pd.DataFrame:
    from reports.comparisons import model_bands

    infos = _simulated_pair(simulated)
    steps, reqs = _frames({
        "agg": {"concurrency_sweep/c8": ("concurrency_sweep", 8, None, 50.0, 1000.0),
                "prefix_cache/share050": ("prefix_cache", 8, None, 50.0, 1000.0)},
        "dis": {"concurrency_sweep/c8": ("concurrency_sweep", 8, None, 60.0, 900.0),
                "prefix_cache/share050": ("prefix_cache", 8, None, 60.0, 900.0)}})
    rows = cmp.topology(steps, cmp.completed_by_step(reqs), infos)
    return v.judge(model_bands.mark(rows, _banded_sweep(dis_ttft_band), infos))


def test_simulated_candidates_whose_bands_overlap_are_not_resolved_by_the_model():
    """20 % slower TTFT on 200 requests a side is WORSE by sampling; between two simulated
    candidates it stands only where the two TTFT bands are apart (issue 39)."""
    t = _judged_pair((55.0, 80.0))
    sweep = t[(t["figure"] == "ttft_p50_ms") & (t["step"] == "c8")].iloc[0]
    assert sweep["verdict"] == v.NOT_RESOLVED and sweep["model_error"] == v.MODEL_OVERLAP
    assert "agg 40-56, dis 55-80" in sweep["note"]
    assert sweep["p_holm"] < 0.05        # sampling alone would have called it
    apart = _judged_pair((57.0, 80.0))
    assert apart[(apart["figure"] == "ttft_p50_ms") & (apart["step"] == "c8")].iloc[0][
        "verdict"] == v.WORSE
    # a prefix-cache step carries no band: the model resolves nothing there
    share = apart[apart["step"] == "share 50%"].iloc[0]
    assert (share["verdict"], share["model_error"]) == (v.NOT_RESOLVED, v.MODEL_NO_BAND)
    # rehearsed or measured stacks are judged by sampling alone
    kept = _judged_pair((55.0, 80.0), simulated=False)
    row = kept[(kept["figure"] == "ttft_p50_ms") & (kept["step"] == "c8")].iloc[0]
    assert (row["verdict"], row["model_error"]) == (v.WORSE, "")


def test_throughput_and_cost_bands_move_with_the_itl_band():
    from reports.comparisons.model_bands import figure_band

    row = {"itl_p50_ms": 5.0, "itl_p50_ms_likely_lo": 4.0, "itl_p50_ms_likely_hi": 6.25}
    assert figure_band(row, "output_tok_s", 1000.0) == pytest.approx((800.0, 1250.0))
    assert figure_band(row, "usd_per_1m_output_tokens", 2.0) == pytest.approx((1.6, 2.5))
    assert figure_band(row, "ttft_p99_ms", 90.0) is None
    assert figure_band(None, "itl_p50_ms", 5.0) is None
