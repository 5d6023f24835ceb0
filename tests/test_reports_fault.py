"""The reports on a REAL fault run (worker killed mid-step, tests/fixtures/fault-runs/): truncated
streams are counted as truncated and kept out of every figure, the step is not complete, and a
flagged step is marked and left out in every table, plot and hypothesis that would show it.
Expected values are computed here from the raw exports with plain json/numpy."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
from figure_capture import report_with_figures
from reports_fixtures import (
    completed,
    copy_fault_run,
    copy_runs,
    metric,
    p,
    profiling_records,
    run_dir,
    summary,
    window_s,
)

from reports.build import build_report
from reports.render.markdown import mark_small_samples

C4 = "concurrency_sweep/c4"
RECIPE = Path(__file__).parent / "fixtures" / "recipe-runs" / "local-recipe-motif3" / "fixture"


def _frontend_total(step: Path, name: str) -> float:
    export = json.loads((step / "server_metrics_export.json").read_text())
    return sum(s["stats"]["total"] for s in export["metrics"][name]["series"])


@pytest.fixture(scope="module")
def fault(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fault")
    run = copy_fault_run(tmp)
    report = build_report([run], tmp / "out", name="fault")
    return run, report


@pytest.fixture(scope="module")
def combined(tmp_path_factory):
    """The fault run beside the healthy fixture runs of local-agg and local-disagg, with the
    figures each plot was drawn from captured."""
    tmp = tmp_path_factory.mktemp("combined")
    root = copy_runs(tmp)
    fault_run = copy_fault_run(tmp)
    report, figures = report_with_figures([run_dir(root, "local-agg"),
                                           run_dir(root, "local-disagg"), fault_run],
                                          tmp / "out", "combined", with_compare=True)
    return fault_run, report, figures


def _step(report, run_id: str, step: str) -> pd.Series:
    s = report.steps
    return s[(s["run_id"] == run_id) & (s["step"] == step)].iloc[0]


def test_truncated_requests_are_counted_as_truncated(fault):
    run, report = fault
    recs = profiling_records(run / C4)
    cut = [r for r in recs if "error" not in r and "usage_completion_tokens" not in r["metrics"]]
    req = report.requests[report.requests["step"] == C4]
    assert (req["outcome"] == "truncated").sum() == len(cut) > 0
    row = _step(report, "killed-worker", C4)
    assert (row["attempted"], row["completed"], row["truncated"], row["failed"]) == \
        (len(recs), len(recs) - len(cut), len(cut), 0)
    assert row["aiperf_request_count"] == len(recs)   # AIPerf's own figure, kept and named


def test_percentiles_and_throughput_exclude_truncated_requests(fault):
    run, report = fault
    recs = profiling_records(run / C4)
    done = [r for r in recs if completed(r)]
    row = _step(report, "killed-worker", C4)
    for name, key in (("ttft", "time_to_first_token"), ("request_latency", "request_latency")):
        for q in (50, 90, 99):
            assert row[f"{name}_p{q}_ms"] == pytest.approx(
                p([metric(r, key) for r in done], q), rel=1e-12), (name, q)
    assert row["percentile_samples"] == len(done) < summary(run / C4)["time_to_first_token"][
        "count"]
    tokens = sum(metric(r, "usage_completion_tokens") for r in done)
    assert row["output_tok_s"] == pytest.approx(tokens / window_s(recs), rel=1e-12)
    assert row["request_throughput"] == pytest.approx(len(done) / window_s(recs), rel=1e-12)


def test_goodput_and_cost_count_completed_requests_over_one_window(fault):
    run, report = fault
    recs = profiling_records(run / C4)
    g = report.tables["goodput"]
    row = g[(g["step"] == C4) & (g["slo"] == "sla-tps50-ttft5s")].iloc[0]
    met = sum(1 for r in recs if completed(r) and metric(r, "time_to_first_token") < 5000
              and metric(r, "output_token_throughput_per_user") >= 50)
    assert row["requests_meeting_slo"] == met < len(recs)
    assert row["goodput_fraction"] == pytest.approx(met / len(recs))
    assert row["goodput_req_s"] == pytest.approx(met / window_s(recs))
    assert not row["step_meets_slo"] and not row["best_point"]
    cost = report.tables["cost_efficiency"].set_index("step").loc[C4]
    assert cost["successful_output_tokens"] == sum(metric(r, "usage_completion_tokens")
                                                   for r in recs if completed(r))
    assert cost["period_s"] == pytest.approx(window_s(recs))     # the same window
    assert cost["step_flag"].startswith("FAILED")


def test_the_step_is_not_complete_even_where_the_record_said_so(tmp_path):
    """A run recorded before the truncation rule (its manifest says complete) is re-judged
    from its exports with the runner's own rule."""
    run = copy_fault_run(tmp_path)
    doc = json.loads((run / "manifest.json").read_text())
    doc["steps"][C4].update(status="complete", failure_reasons=[])
    (run / "manifest.json").write_text(json.dumps(doc))
    report = build_report([run], tmp_path / "out", name="old-record")
    row = _step(report, "killed-worker", C4)
    assert row["status"] == "failed" and not row["usable"]
    assert "truncated stream" in row["status_reasons"]
    assert "the run record said complete" in row["status_reasons"]
    assert _step(report, "killed-worker", "concurrency_sweep/c1")["status"] == "complete"


def test_server_and_client_output_tokens_are_reconciled(fault):
    run, report = fault
    recs = profiling_records(run / C4)
    rec = report.tables["reconciliation"].set_index("step").loc[C4]
    server = _frontend_total(run / C4, "dynamo_frontend_output_tokens")
    client = sum(metric(r, "usage_completion_tokens") or 0 for r in recs)
    assert rec["server_output_tokens"] == server and rec["client_output_tokens"] == client
    assert rec["output_token_gap"] == server - client > 0
    cut = [r for r in recs if "usage_completion_tokens" not in r["metrics"]]
    assert rec["truncated_chunks_received"] == sum(metric(r, "http_req_chunks_received")
                                                   for r in cut)
    # the frontend started every request but never finished the cut ones
    started = _frontend_total(run / C4, "dynamo_frontend_requests_started")
    assert rec["server_requests_started"] == started == len(recs)
    assert rec["server_requests_unfinished"] == len(cut)
    assert "truncated stream(s) ended before their usage block" in rec["gap_explanation"]
    healthy = report.tables["reconciliation"].set_index("step").loc["concurrency_sweep/c1"]
    assert healthy["output_token_gap"] == 0 and healthy["gap_explanation"] == "agree"


def test_a_failed_step_is_marked_and_left_out_of_every_table(combined):
    _, report, _ = combined
    t = report.tables
    flag = _step(report, "killed-worker", C4)["step_flag"]
    assert flag.startswith("FAILED: ") and "truncated" in flag
    sweep = t["concurrency_sweep"]
    agg4 = sweep[(sweep["stack"] == "local-agg") & (sweep["concurrency"] == 4)]
    assert sorted(agg4["usable"]) == [False, True]
    bad, good = agg4[~agg4["usable"]].iloc[0], agg4[agg4["usable"]].iloc[0]
    assert bad["step_flag"] == flag and bad["repeats"] == 1
    # the healthy c4 of the fixture run stands alone: the failed one never enters its mean
    healthy = report.steps[(report.steps["stack"] == "local-agg")
                           & (report.steps["run_id"] == "fixture") & (report.steps["step"] == C4)]
    assert good["repeats"] == 1
    assert good["ttft_p50_ms"] == pytest.approx(healthy["ttft_p50_ms"].iloc[0])
    side = t["compare_concurrency"]
    r = side[(side["aggregated_stack"] == "local-agg") & (side["concurrency"] == 4)]
    assert len(r) == 1 and r["aggregated_ttft_p50_ms"].iloc[0] == good["ttft_p50_ms"]
    g = t["goodput"]
    fg = g[(g["run_id"] == "killed-worker") & (g["step"] == C4)]
    assert (fg["step_flag"] == flag).all() and not fg["best_point"].any()
    assert not fg["step_meets_slo"].any()
    for key in ("cost_efficiency", "fidelity", "reconciliation"):
        rows = t[key][(t[key]["run_id"] == "killed-worker") & (t[key]["step"] == C4)]
        assert (rows["step_flag"] == flag).all(), key


def test_hypotheses_and_summary_leave_it_out_and_say_so(combined):
    _, report, _ = combined
    md = (report.out_dir / "report.md").read_text()
    summary_part = md.split("## Stacks")[0]
    # a run made before runs recorded their mockers' timings says so, in the one wording
    assert "REHEARSAL on the local mocker, SIMULATED (mocker; its timings were not recorded " \
           "by this run)" in summary_part
    assert f"local-agg {C4} (run killed-worker): FAILED" in summary_part
    assert "truncated stream(s): AIPerf counted them as successes" in summary_part
    for h in ("H1", "H3", "H4"):
        section = md.split(f"### {h}:")[1].split("###")[0]
        note = next(line for line in section.splitlines()
                    if line.startswith("- Left out of this hypothesis: "))
        assert f"local-agg {C4} (FAILED: " in note, h
    # the rows of every table that shows the step carry its flag in report.md
    for title in ("## Concurrency sweep", "## Goodput under SLO", "## Cost efficiency",
                  "## Harness fidelity", "## Server vs client output tokens"):
        section = md.split(title)[1].split("\n## ")[0]
        assert "| FAILED: " in section or "FAILED: " in section, title
        assert "Left out of" in section, title


def test_plots_mark_the_failed_step_and_keep_it_off_the_pareto_front(combined):
    _, report, figures = combined
    bad = report.tables["concurrency_sweep"]
    bad = bad[~bad["usable"]].iloc[0]
    for name in ("pareto", "latency_vs_concurrency"):
        fig = figures[name]
        for ax in fig.axes:
            assert ax.get_title().startswith("REHEARSAL on the local mocker"), name
            labels = [t.get_text() for t in ax.get_legend().get_texts()]
            assert any(lbl.startswith("left out: failed") for lbl in labels), (name, labels)
    for ax in figures["pareto"].axes:   # throughput per GPU is up (the field's convention)
        front = next(line for line in ax.get_lines()
                     if line.get_label() == "Pareto front (usable steps)")
        assert bad["output_tok_s_per_gpu"] not in list(front.get_ydata())
        crosses = next(line for line in ax.get_lines()
                       if line.get_label().startswith("left out"))
        assert bad["output_tok_s_per_gpu"] in list(crosses.get_ydata())


def test_a_failed_trace_step_never_meets_the_sla_nor_is_best(tmp_path):
    run = tmp_path / "runs" / "local-recipe-motif3" / "fixture"
    shutil.copytree(RECIPE, run)
    doc = json.loads((run / "manifest.json").read_text())
    doc["steps"]["trace_replay/c16-warm"].update(status="failed",
                                                  failure_reasons=["aiperf exited with code 1"])
    (run / "manifest.json").write_text(json.dumps(doc))
    report = build_report([run], tmp_path / "out", name="sla")
    sla = report.tables["sla"].set_index("step")
    row = sla.loc["trace_replay/c16-warm"]
    assert row["step_flag"] == "FAILED: aiperf exited with code 1"
    assert not row["meets_sla"] and not row["best_point"]
    # the warm best point moves to the best usable warm step
    warm = sla[(sla["cache"] == "warm") & sla["meets_sla"].eq(True)]
    assert sla.loc[warm["output_tok_s_per_gpu"].idxmax(), "best_point"]
    md = (report.out_dir / "report.md").read_text()
    assert "Left out of SLA verdicts and best points: local-recipe-motif3 " \
           "trace_replay/c16-warm (FAILED: aiperf exited with code 1)" in md


def test_small_sample_percentiles_are_marked():
    df = pd.DataFrame({"stack": ["a", "b"], "percentile_samples": [150, 40],
                       "ttft_p50_ms": [1.0, 2.0], "ttft_p90_ms": [3.0, 4.0],
                       "ttft_p99_ms": [5.0, 6.0], "requested_isl_p99": [7.0, 8.0]})
    out, marked = mark_small_samples(df)
    assert marked
    assert out["ttft_p99_ms"].tolist() == ["5.000", "6.000*"]
    assert out["ttft_p90_ms"].tolist() == [3.0, 4.0]          # 40 samples are enough for p90
    assert out["requested_isl_p99"].tolist() == [7.0, 8.0]    # not a latency percentile
    few = pd.DataFrame({"percentile_samples": [5], "itl_p90_ms": [1.5]})
    assert mark_small_samples(few)[0]["itl_p90_ms"].tolist() == ["1.500*"]
    assert not math.isnan(df["ttft_p50_ms"].iloc[0])
