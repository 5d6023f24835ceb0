"""sla.csv and the recipe comparisons.

- sla.csv of a real rehearsal run (committed fixture: local-recipe-motif3, real AIPerf + real
  Dynamo mockers) equals an independent computation from the raw exports (tests/sla_checks.py);
- the published figures are reference rows, labelled as such, with their sources, never
  taking part in the best point;
- user-speed definitions, the best point per cache state, and the optimized/baseline and
  aggregated/disaggregated arithmetic, by hand.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from recipe_stacks import changed
from reports_fixtures import built_fixture_run
from sla_checks import check_sla_against_raw
from typer.testing import CliRunner

from reports.__main__ import app
from reports.comparisons.compare import sla_baseline_ratio, sla_topology_side_by_side
from reports.records.runs import RunError
from reports.records.stackinfo import StackInfo, recipe_role, speculative_label
from reports.tables.published import PUBLISHED, PUBLISHED_LABEL, model_user_speed, published_figure
from reports.tables.sla import COLUMNS, MEASURED_KINDS, MEASUREMENT, mark_best, user_speeds
from stacks.catalog.model_catalog import AX_K2, K_EXAONE, MOTIF_3, SOLAR_OPEN2
from stacks.config.loader import load_stack
from stacks.sizing.estimate import HourlyCost

FIXTURE = Path(__file__).parent / "fixtures" / "recipe-runs" / "local-recipe-motif3" / "fixture"


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    return built_fixture_run(FIXTURE, tmp_path_factory.mktemp("sla"), "rehearsal")


def test_sla_rows_equal_the_raw_exports(rehearsal) -> None:
    run, report = rehearsal
    sla = report.tables["sla"]
    measured = check_sla_against_raw(sla, run)
    # the run drops rows over maxModelLen 16384 and records it; cold and warm both measured
    assert measured["excluded_over_context"].sum() > 0
    assert set(measured["cache"]) == {"cold", "warm"}
    assert (measured["max_model_len"] == 16384).all()
    # the warm replay hits the cache the cold pass filled (the mockers' B200-sized caches)
    by = measured.reset_index().set_index(["concurrency", "cache"])["measured_kv_reuse"]
    for c in measured["concurrency"].unique():
        assert by[(c, "warm")] > by[(c, "cold")] + 0.2
    # nominal reuse is what the trace was shaped to; the rows' own reuse is recorded beside it
    assert (measured["nominal_reuse"] == 0.7).all()
    assert measured["trace_block_reuse"].between(0.4, 0.8).all()
    assert measured["speculative_acceptance"].str.startswith("real (mtp x2); configured "
                                                              "only").all()
    assert (report.out_dir / "sla.csv").exists()
    assert pd.read_csv(report.out_dir / "sla.csv").shape == sla.shape


def test_published_rows_are_labelled_and_never_a_best_point(rehearsal) -> None:
    _, report = rehearsal
    sla = report.tables["sla"]
    published = sla[~sla["row_kind"].isin(MEASURED_KINDS)]
    # only the rehearsed model's figures: Motif 3 baseline, aggregated, disaggregated
    assert list(published["row_kind"].unique()) == [PUBLISHED_LABEL]
    assert set(published["model"]) == {MOTIF_3}
    assert sorted(published["output_tok_s_per_gpu"]) == [86.95, 293.96, 319.26]
    assert published["source"].str.len().gt(0).all()
    assert published["run_id"].isna().all() and not published["best_point"].any()
    assert published["meets_sla"].isna().all()
    md = (report.out_dir / "report.md").read_text()
    assert md.count(f"| {PUBLISHED_LABEL} |") == 3
    assert "## SLA: output tok/s per GPU at the best point" in md


def test_published_figures_are_the_sources_pairs() -> None:
    # baseline -> optimized tok/s/GPU of the design brief, at its rounding
    pairs = {AX_K2: (44.3, 76.5, "aggregated", 8, 16),
             K_EXAONE: (55.0, 87.0, "aggregated", 4, 7),
             SOLAR_OPEN2: (151.6, 216.9, "aggregated", 4, 20),
             MOTIF_3: (86.95, 319.26, "disaggregated", 8, None)}
    for model, (base, best, kind, gpus, c) in pairs.items():
        assert published_figure(model, "baseline").tok_s_per_gpu == base
        opt = published_figure(model, kind)
        assert round(opt.tok_s_per_gpu, 2 if model == MOTIF_3 else 1) == best
        assert (opt.gpus, opt.concurrency) == (gpus, c)
    motif_agg = published_figure(MOTIF_3, "aggregated")
    assert (motif_agg.tok_s_per_gpu, motif_agg.gpus, motif_agg.concurrency) == (293.96, 2, 11)
    assert len({(p.model, p.kind) for p in PUBLISHED}) == len(PUBLISHED) == 12
    assert all(p.source and p.status for p in PUBLISHED)
    assert {m: model_user_speed(m) for m in pairs} == {
        AX_K2: "mean", K_EXAONE: "e2e", SOLAR_OPEN2: "p50", MOTIF_3: "p50"}
    assert "synthetic" in published_figure(AX_K2, "aggregated").speculative


def test_user_speed_definitions_by_hand() -> None:
    ok = pd.DataFrame({"tok_s_per_user": [10.0, 20.0, 60.0], "osl": [90.0, 100.0, 110.0]})
    speeds = user_speeds(ok, ttft_p50_ms=500.0, itl_p50_ms=10.0)
    assert speeds["mean"] == pytest.approx(30.0)
    assert speeds["p50"] == pytest.approx(20.0)
    # mean OSL 100 / (0.5 s + 100 x 0.010 s)
    assert speeds["e2e"] == pytest.approx(100 / 1.5)
    assert all(math.isnan(v) for v in user_speeds(ok.iloc[0:0], 500.0, 10.0).values())


def sla_rows(*rows: tuple) -> pd.DataFrame:
    """(stack, step, cache, tok/s/GPU, meets) -> a measured sla frame."""
    frame = pd.DataFrame([{c: None for c in COLUMNS} | {
        "row_kind": MEASUREMENT, "stack": s, "step": step, "cache": cache,
        "concurrency": int(step.split("c")[1].split("-")[0]),
        "output_tok_s_per_gpu": tps, "meets_sla": meets} for s, step, cache, tps, meets in rows])
    return mark_best(frame)


def test_best_point_is_per_stack_and_cache_state_among_sla_steps() -> None:
    sla = sla_rows(("a", "c4", "cold", 100.0, True), ("a", "c8", "cold", 180.0, True),
                   ("a", "c16", "cold", 250.0, False), ("a", "c4-warm", "warm", 120.0, True),
                   ("a", "c8-warm", "warm", 200.0, True), ("b", "c4", "cold", 50.0, False))
    best = sla[sla["best_point"]]
    assert sorted(zip(best["stack"], best["step"], strict=True)) == [("a", "c8"),
                                                                     ("a", "c8-warm")]


def info(name: str, model: str, recipe: str, topology: str, gpus: int) -> StackInfo:
    return StackInfo(name=name, target="aws", topology=topology, router="kv", gpus=gpus,
                     gpu_types="p6-b200.48xlarge", workers="", hourly=HourlyCost(),
                     cost_basis="", model=model, recipe=recipe)


def test_optimized_over_baseline_and_agg_vs_disagg_by_hand() -> None:
    infos = {"agg-m": info("agg-m", MOTIF_3, "optimized", "aggregated", 2),
             "disagg-m": info("disagg-m", MOTIF_3, "optimized", "disaggregated", 8),
             "baseline-m": info("baseline-m", MOTIF_3, "baseline", "aggregated", 8)}
    sla = sla_rows(("agg-m", "c11", "cold", 250.0, True), ("agg-m", "c16", "cold", 260.0, False),
                   ("disagg-m", "c11", "cold", 300.0, True),
                   ("baseline-m", "c8", "cold", 75.0, True),
                   ("baseline-m", "c11", "cold", 100.0, True),
                   ("disagg-m", "c11-warm", "warm", 330.0, True))
    ratio = sla_baseline_ratio(sla, infos).set_index(["optimized_stack", "cache"])
    assert ratio.loc[("agg-m", "cold"), "ratio"] == pytest.approx(250.0 / 100.0)
    assert ratio.loc[("disagg-m", "cold"), "ratio"] == pytest.approx(300.0 / 100.0)
    assert ratio.loc[("disagg-m", "cold"), "published_ratio"] == pytest.approx(319.26 / 86.95)
    assert ratio.loc[("agg-m", "cold"), "published_ratio"] == pytest.approx(293.96 / 86.95)
    # warm: the baseline has no warm step, so no ratio, and the row says why
    warm = ratio.loc[("disagg-m", "warm")]
    assert math.isnan(warm["ratio"]) and "baseline-m" in warm["note"]
    assert ("agg-m", "warm") not in ratio.index
    assert ratio.loc[("agg-m", "cold"), ["optimized_gpus", "baseline_gpus"]].tolist() == [2, 8]

    side = sla_topology_side_by_side(sla, infos)
    (row,) = side.to_dict("records")  # baselines are not paired; warm has no aggregated point
    assert (row["aggregated_stack"], row["disaggregated_stack"], row["cache"]) == \
        ("agg-m", "disagg-m", "cold")
    assert (row["aggregated_gpus"], row["disaggregated_gpus"]) == (2, 8)
    assert row["disaggregated_over_aggregated"] == pytest.approx(300.0 / 250.0)
    assert (row["published_aggregated"], row["published_disaggregated"]) == (293.96, 319.26)


def test_recipe_role_and_acceptance_labels_come_from_the_stack() -> None:
    assert recipe_role(load_stack("baseline-b200-motif3")) == "baseline"
    assert recipe_role(load_stack("disagg-b200-motif3")) == "optimized"
    assert recipe_role(load_stack("local-agg")) == ""
    assert speculative_label(load_stack("agg-b200-axk2")) == "real (eagle3 x3)"
    assert speculative_label(load_stack("agg-b200-solar2")) == "none"
    local = speculative_label(load_stack("local-recipe-motif3"))
    assert local.startswith("real (mtp x2)") and "does not speculate" in local
    synthetic = changed("agg-b200-motif3", {"serving.speculative.acceptance": "synthetic"})
    assert speculative_label(synthetic).startswith("synthetic: forced acceptance length 2.13")
    with pytest.raises(RunError, match="tags.extra.recipe"):
        recipe_role(changed("agg-b200-motif3", {"tags.extra.recipe": "optimised"}))


def test_cli_user_speed_choice(rehearsal, tmp_path: Path) -> None:
    run, _ = rehearsal
    runner = CliRunner()
    bad = runner.invoke(app, ["build", str(run), "--out", str(tmp_path), "--user-speed", "avg"])
    assert bad.exit_code == 2 and "'avg' is not one of 'mean', 'p50', 'e2e'" in bad.output
    good = runner.invoke(app, ["build", str(run), "--out", str(tmp_path), "--name", "e2e",
                               "--user-speed", "e2e"])
    assert good.exit_code == 0, good.output
    sla = pd.read_csv(tmp_path / "e2e" / "sla.csv")
    measured = sla[sla["row_kind"].isin(MEASURED_KINDS)]
    assert len(measured) and measured["user_speed_definition"].str.startswith("e2e:").all()
