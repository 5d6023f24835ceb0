"""What the explore shows (stacks/explore/results.py, questions.py, report.py): ranks by $ per
1M, the Pareto frontier, explore.csv with a row per candidate x workload x SLO, the plan's four
questions, each labelled SIMULATED with its timing source. On the stand-in simulator."""

from __future__ import annotations

import csv

import pytest
from explore_fakes import FakeSimulator
from test_explore_search import BASE

from stacks.config.loader import parse_config
from stacks.explore import report
from stacks.explore.questions import answers
from stacks.explore.results import CSV_COLUMNS, csv_rows, frontier, ranked
from stacks.explore.run import explore
from stacks.predict.rows import SLOS


@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    base = parse_config("base-small", BASE)
    return explore(base, FakeSimulator(tmp_path_factory.mktemp("tables")), list(SLOS), k=2)


def test_the_frontier_keeps_what_nothing_beats_on_both_axes():
    pts = [(100.0, 50.0), (80.0, 60.0), (90.0, 55.0), (70.0, 50.0), (100.0, 40.0)]
    assert frontier(pts) == [True, True, True, False, False]


def test_ranks_order_by_dollars_and_twins_on_one_engine_share_one(ex):
    for w in ex.workloads:
        for slo in ex.slos:
            rows = [r for r in ranked(ex, w, slo.name) if r.rank is not None]
            assert rows and rows[0].rank == 1
            assert [r.outcome.usd for r in rows] == sorted(r.outcome.usd for r in rows)
            for a, b in zip(rows, rows[1:], strict=False):
                assert (a.rank == b.rank) == (a.outcome.usd == b.outcome.usd)
            # an offload candidate runs on its twin's engine here: same figures, same rank
            by = {r.candidate.label: r.rank for r in rows}
            assert all(by[lab.removesuffix(" offload-cpu")] == rank for lab, rank in by.items()
                       if lab.endswith(" offload-cpu") and lab.removesuffix(" offload-cpu")
                       in by)


def test_the_csv_has_a_row_per_candidate_workload_and_slo_and_says_why(ex):
    rows = csv_rows(ex)
    assert len(rows) == ex.screened.space.size * len(ex.workloads) * len(ex.slos)
    assert all(list(r) == list(CSV_COLUMNS) for r in rows)
    status = {r["status"] for r in rows}
    assert {"simulated", "pruned", "unsimulated"} <= status
    for r in rows:
        if r["status"] == "pruned":
            assert r["note"] and r["bound_usd_per_1m"] != "" or "ITL" in r["note"]
        if r["meets_slo"] == "true":
            assert r["concurrency"] != "" and r["rank"] != "" and r["usd_per_1m_output_tokens"]
        if r["status"] == "unsimulated":
            assert r["note"].startswith("no timing table")
    sweep = [r for r in rows if r["workload"] == "concurrency_sweep" and r["rank"] == 1]
    assert {r["slo"] for r in sweep} == {s.name for s in SLOS}


def test_the_four_questions_are_answered_per_workload_and_slo_with_their_source(ex):
    got = answers(ex)
    questions = {a.question for a in got}
    assert questions == {"1. disaggregation on the same GPUs", "2. a decode tier on another GPU",
                         "3. routing", "4. host offload"}
    assert all(a.label.startswith("SIMULATED (") for a in got)
    offload = [a for a in got if a.question == "4. host offload"]
    assert offload and all(a.text.startswith("not modelled") for a in offload)
    routing = [a for a in got if a.question == "3. routing" and "median" in a.text]
    assert routing and all("fake simulator" in a.label for a in routing)


def test_the_report_files_say_simulated_and_hold_every_table(ex, tmp_path):
    md, table, plot = report.write(ex, tmp_path)
    text = md.read_text()
    assert text.count("SIMULATED (") >= 1 + len(answers(ex))
    assert "ASSUMED (A1)" in text and "ASSUMED (A2)" in text and "ASSUMED (A3)" in text
    for w in ex.workloads:
        for slo in ex.slos:
            assert f"## {w} @ {slo.name}" in text
    with table.open() as f:
        assert len(list(csv.DictReader(f))) == len(csv_rows(ex))
    assert plot.stat().st_size > 10_000


def test_a_verdict_the_models_error_could_reverse_is_not_resolved(monkeypatch):
    """Issue 39 in the explore: a $ per 1M verdict between two sides stands only when their
    bands (each $ moved by its ITL band from AIConfigurator's own measured rows) are apart; a
    side without a band resolves nothing."""
    from types import SimpleNamespace

    from stacks.explore import questions as q
    cheap = q.Side(1.00, "a", outcome=SimpleNamespace(row=SimpleNamespace(itl_p50_ms=10.0)))
    dear = q.Side(1.30, "b", outcome=SimpleNamespace(row=SimpleNamespace(itl_p50_ms=20.0)))
    width = {"a": 0.10, "b": 0.10}
    monkeypatch.setattr(q, "itl_band", lambda o: (
        None if width[o.name] is None else
        (o.row.itl_p50_ms * (1 - width[o.name]), o.row.itl_p50_ms * (1 + width[o.name]))))
    cheap.outcome.name, dear.outcome.name = "a", "b"
    assert q.usd_band(cheap) == pytest.approx((0.9, 1.1))
    assert q.usd_band(dear) == pytest.approx((1.17, 1.43))
    assert q.resolved(cheap, dear) == ""                         # 1.1 < 1.17: apart
    width["b"] = 0.20                                            # 1.04 .. 1.56 reaches 1.1
    assert q.resolved(cheap, dear) == f"; {q.NOT_RESOLVED}"
    width["b"] = None
    assert q.resolved(cheap, dear) == f"; {q.NOT_RESOLVED}"      # no band: nothing resolved
    assert q.resolved(q.Side(None), dear) == ""                  # a pruned side: the bound says


def test_a_sweep_operating_point_carries_its_band_and_other_workloads_none(ex):
    """Issue 39 in the explore: the sweep's SIMULATED TTFT / ITL at an operating point get the
    band of AIConfigurator's own measured rows nearest the candidate's tables (here a record as
    stacks/predict/mocker_table.py writes it for an A100 BF16 table); other workloads none."""
    from dataclasses import replace

    from stacks.explore.figure_bands import figure_bands, words
    band = {"query": {"precision": "BF16", "system": "a100_sxm_40gb",
                      "architecture": "Qwen3MoeForCausalLM", "moe": True, "mode": "agg",
                      "tp": 4}, "metrics": ["ttft", "itl"], "rows": "vllm"}
    sweep = next(o for o in ex.outcomes if o.status == "simulated" and o.meets
                 and o.workload == "concurrency_sweep"
                 and o.subject.candidate.topology == "aggregated")
    records = {role: {"role": role, "band": band} for role in sweep.subject.prepared.records}
    subject = replace(sweep.subject, prepared=replace(sweep.subject.prepared, records=records))
    found = figure_bands(replace(sweep, subject=subject))
    lo, hi = found["itl"]
    assert lo < hi and lo <= sweep.row.itl_p50_ms * 1.5 and hi >= sweep.row.itl_p50_ms * 0.5
    assert words(found["itl"]) == f"{lo:.4g}-{hi:.4g}"
    other = next(o for o in ex.outcomes if o.status == "simulated"
                 and o.workload != "concurrency_sweep")
    assert figure_bands(other) == {"ttft": None, "itl": None}
