"""`stacks explore --write` (stacks/explore/write.py): the sweep's top K become variant stack
files of the base that pass `stacks check`, that `stacks plan <base>` forecasts and that
`workloads campaign <base>` runs, each with its operating points as extra sweep steps. The
explore itself runs on the stand-in simulator (tests/explore_fakes.py)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from explore_fakes import FakeSimulator
from rich.console import Console
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.config.loader import STACKS_DIR, load_stack
from stacks.explore import write
from stacks.explore.run import explore
from stacks.predict.rows import SLOS
from stacks.preflight.run import check_stack
from workloads.campaign.run import CampaignOptions, run_campaign
from workloads.steps import plan


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    stacks = tmp_path_factory.mktemp("stacks")
    shutil.copy(STACKS_DIR / "Pulumi.base-a100.yaml", stacks)
    base = load_stack("base-a100", stacks)
    ex = explore(base, FakeSimulator(tmp_path_factory.mktemp("tables")), list(SLOS), k=2,
                 only=["concurrency_sweep"])
    return stacks, ex, write.write(ex, stacks)


def test_the_top_k_of_each_slo_are_written_once_with_their_operating_points(written):
    stacks, ex, paths = written
    chosen = write.chosen(ex)
    assert 2 <= len(paths) == len(chosen) <= 4
    for path in paths:
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        assert name.startswith("explore-base-a100-")
        c, why, points = chosen[name]
        stack = load_stack(name, stacks)
        sweep = stack.workloads.concurrency_sweep.concurrencies
        assert set(points.values()) <= set(sweep) and {1, 2, 4, 8, 16, 32, 64} <= set(sweep)
        assert stack.serving == c.stack.serving and stack.cluster.attach_to == "base-a100"
        head = path.read_text().split("config:")[0]
        assert "SIMULATED (fake simulator, timings from fake table" in head
        assert all(f"c{p} ({slo})" in head for slo, p in points.items())
        assert yaml.safe_load(path.read_text())["config"]["dynamo-bench:serving"] == \
            c.config["serving"]


def test_written_stacks_pass_stacks_check(written):
    stacks, _, paths = written
    for path in paths:
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        report = check_stack(name, stacks)
        assert report.ok, report.problems
        res = CliRunner().invoke(app, ["check", name, "--stacks-dir", str(stacks),
                                       "--no-predict"])
        assert res.exit_code == 0, res.output


def test_stacks_plan_forecasts_them_and_the_campaign_runs_their_operating_points(written,
                                                                                   tmp_path):
    stacks, ex, paths = written
    names = [p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in paths]
    res = CliRunner().invoke(app, ["plan", "base-a100", "--stacks-dir", str(stacks),
                                   "--no-predict"])
    assert all(n in res.output for n in names), res.output
    opts = CampaignOptions(base="base-a100", dry_run=True, predict=False, scale="full",
                           stacks_dir=stacks, runs_dir=tmp_path / "runs",
                           hf_home=tmp_path / "hf")
    campaign = run_campaign(opts, Console(file=open("/dev/null", "w"))).plan  # noqa: SIM115
    assert sorted(s["name"] for s in campaign["slots"]) == sorted(names)
    for name, (_, _, points) in write.chosen(ex).items():
        steps = {s.id for s in plan(load_stack(name, stacks), "full")}
        assert {f"concurrency_sweep/c{c}" for c in points.values()} <= steps


def test_git_ignores_the_written_stack_files():
    root = STACKS_DIR.parent
    path = "stacks/Pulumi.explore-base-a100-abc123.yaml"
    assert subprocess.run(["git", "check-ignore", "-q", path], cwd=root).returncode == 0
    assert subprocess.run(["git", "check-ignore", "-q", "stacks/Pulumi.agg-a100.yaml"],
                          cwd=root).returncode == 1
