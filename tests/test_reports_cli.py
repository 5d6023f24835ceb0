"""`python -m reports build|compare` end to end on the committed real-run fixtures: the files it
writes, the PNGs are real non-blank images, report.md cites every run record, the parquet
cache is used and invalidated, and bad input fails with a message naming the fix."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from reports_fixtures import all_run_dirs, copy_runs, manifest, run_dir
from typer.testing import CliRunner

from reports.__main__ import app
from reports.records.runs import CACHE_DIR, MANIFEST, load_run, resolve_run_dirs

PLOTS = ("pareto", "throughput_vs_concurrency", "latency_vs_concurrency", "ttft_per_turn",
         "prefix_share", "length_distributions")
CSVS = ("concurrency_sweep", "multi_turn", "sequence_distribution", "prefix_cache", "goodput",
        "cost_efficiency", "fidelity", "reconciliation", "compare_concurrency",
        "compare_prefix_cache")


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    root = copy_runs(tmp)
    dirs = [str(d) for d in all_run_dirs(root)]
    result = CliRunner().invoke(app, ["compare", *dirs, "--out", str(tmp / "out"),
                                      "--name", "demo"])
    assert result.exit_code == 0, result.output
    return root, tmp / "out" / "demo", result.output


def test_compare_writes_every_table_and_plot(compared):
    _, out, output = compared
    for name in CSVS:
        assert not pd.read_csv(out / f"{name}.csv").empty, name
    for name in PLOTS:
        assert (out / f"{name}.png").stat().st_size > 10_000, name
    assert "concurrency_sweep.csv" in output


@pytest.mark.parametrize("name", PLOTS)
def test_pngs_are_real_non_blank_images(compared, name):
    _, out, _ = compared
    with Image.open(out / f"{name}.png") as img:
        img.verify()
    with Image.open(out / f"{name}.png") as img:
        assert img.format == "PNG" and img.width >= 600 and img.height >= 400
        px = np.asarray(img.convert("L"), dtype=float)
    # a drawn plot: axes, text and lines, not one background colour
    assert px.std() > 10
    assert (px < 128).mean() > 0.005


def test_report_md_cites_runs_and_embeds_plots(compared):
    root, out, _ = compared
    md = (out / "report.md").read_text()
    for run in all_run_dirs(root):
        m = manifest(run)
        assert f"| {m['run_id']} |" in md
        assert m["stack_config_sha256"][:16] in md
        for sha in m["datasets"].values():
            assert sha[:12] in md
        commit = m["attempts"][-1]["versions"]["dynamo_bench"]["commit"]
        assert commit[:12] in md
    for name in PLOTS:
        assert f"]({name}.png)" in md
    assert "0.13.0" in md and "1.6.1" in md
    for h in ("H1", "H2", "H3", "H4"):
        assert f"### {h}:" in md
    # what the cost covers and that local costs are estimates
    assert "not included: network transfer and NAT data processing" in md and "estimate" in md
    assert "mixed-GPU configuration: not measured" in md


def test_h1_states_the_disagg_minus_agg_ttft_at_lowest_concurrency(compared):
    _, out, _ = compared
    sweep = pd.read_csv(out / "concurrency_sweep.csv").set_index(["stack", "concurrency"])
    delta = sweep.loc[("local-disagg", 1), "ttft_p50_ms"] - \
        sweep.loc[("local-agg", 1), "ttft_p50_ms"]
    assert f"c1: local-disagg minus local-agg TTFT p50 = {delta:.1f} ms" in \
        (out / "report.md").read_text()


def test_parquet_cache_is_reused_then_invalidated(tmp_path):
    root = copy_runs(tmp_path, with_cache=False)
    rd = run_dir(root, "local-agg")
    first = load_run(rd)
    cache = rd / CACHE_DIR
    assert {p.name for p in cache.glob("*.parquet")} == {"steps.parquet", "requests.parquet",
                                                        "server.parquet", "workers.parquet"}
    stamp = (cache / "fingerprint").read_text()
    again = load_run(rd)
    pd.testing.assert_frame_equal(first.requests, again.requests)
    assert (cache / "fingerprint").read_text() == stamp
    # an export rewritten (e.g. a resumed step) invalidates the cache
    summary = rd / "concurrency_sweep" / "c4" / "profile_export_aiperf.json"
    doc = json.loads(summary.read_text())
    doc["time_to_first_token"]["p50"] = 12345.0
    summary.write_text(json.dumps(doc))
    os.utime(summary, ns=(1, 1))
    changed = load_run(rd)
    assert (cache / "fingerprint").read_text() != stamp
    assert changed.steps.set_index("step").loc["concurrency_sweep/c4",
                                               "aiperf_ttft_p50_ms"] == 12345.0


def test_a_run_copied_with_its_times_keeps_its_cache(tmp_path, monkeypatch):
    """The fingerprint names files by their place in the run, not on the disk: a run folder
    copied or moved with its times (rsync -a from the machine that ran it) is not parsed
    again, and its frames are the ones the parse made."""
    rd = run_dir(copy_runs(tmp_path / "a", with_cache=False), "local-agg")
    parsed = load_run(rd)
    moved = tmp_path / "elsewhere" / "local-agg" / "fixture"
    shutil.copytree(rd, moved)

    def no_parse(*args):
        raise AssertionError("parsed again")

    monkeypatch.setattr("reports.records.runs.load_step", no_parse)
    cached = load_run(moved)
    pd.testing.assert_frame_equal(parsed.requests, cached.requests)
    pd.testing.assert_frame_equal(parsed.steps, cached.steps)
    # copied without its times (cp -r): parsed again
    shutil.rmtree(moved)
    shutil.copytree(rd, moved, copy_function=shutil.copyfile)
    with pytest.raises(AssertionError, match="parsed again"):
        load_run(moved)


def test_stack_name_resolves_to_its_latest_run(tmp_path):
    root = copy_runs(tmp_path)
    older, newer = run_dir(root, "local-agg", "fixture"), run_dir(root, "local-agg",
                                                                   "fixture-repeats")
    os.utime(older / MANIFEST, ns=(2 * 10**18, 2 * 10**18))
    os.utime(newer / MANIFEST, ns=(10**18, 10**18))
    assert resolve_run_dirs(["local-agg"], root) == [older]
    assert resolve_run_dirs([str(newer)], root) == [newer]


def test_a_simulated_run_never_stands_for_a_stacks_measured_one(tmp_path):
    """A `--target sim` run (manifest target_info.kind sim) is newer here, yet a stack's name
    resolves to its measured run; given by its folder, the simulated run is reported."""
    root = copy_runs(tmp_path)
    older, newer = run_dir(root, "local-agg", "fixture"), run_dir(root, "local-agg",
                                                                   "fixture-repeats")
    m = json.loads((newer / MANIFEST).read_text())
    (newer / MANIFEST).write_text(json.dumps({**m, "target_info": {"kind": "sim"}}))
    os.utime(older / MANIFEST, ns=(10**18, 10**18))
    os.utime(newer / MANIFEST, ns=(2 * 10**18, 2 * 10**18))
    assert resolve_run_dirs(["local-agg"], root) == [older]
    assert resolve_run_dirs([str(newer)], root) == [newer]


def test_unknown_stack_fails_naming_the_fix(tmp_path):
    result = CliRunner().invoke(app, ["compare", "no-such-stack", "--runs-root",
                                      str(tmp_path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "python -m workloads run no-such-stack" in result.output


def test_bad_slo_fails_before_loading(tmp_path):
    result = CliRunner().invoke(app, ["build", str(tmp_path), "--slo", "x:ttft=5"])
    assert result.exit_code == 2
    assert "unknown key 'ttft'" in result.output


def test_custom_slo_changes_goodput(tmp_path):
    root = copy_runs(tmp_path)
    result = CliRunner().invoke(app, ["build", str(run_dir(root, "local-agg")), "--out",
                                      str(tmp_path / "out"), "--name", "r", "--slo",
                                      "strict:ttft_ms=1"])
    assert result.exit_code == 0, result.output
    g = pd.read_csv(tmp_path / "out" / "r" / "goodput.csv")
    assert set(g["slo"]) == {"strict"}
    assert (g["requests_meeting_slo"] == 0).all() and not g["step_meets_slo"].any()
