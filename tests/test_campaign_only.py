"""`workloads campaign --only [STACK:]WORKLOAD`: a variant runs only the workloads named for it
(or for every variant); the forecast counts only those, the runs get them, a resume must use
the same selection, and a wrong name is refused before anything starts (exit 2)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from stacks.config.loader import load_stack
from stacks.sizing.estimate import LOCAL_RESTART_S, workload_steps_seconds
from workloads.__main__ import app
from workloads.campaign import platform_aws, platform_local
from workloads.campaign.run import (
    CampaignOptions,
    CampaignRefused,
    only_by_variant,
    run_campaign,
)
from workloads.campaign.state import CampaignState

DEMO = ["local-agg", "local-disagg", "local-agg-kv"]
ROUTER = ["local-agg-kv:multi_turn", "local-agg-kv:prefix_cache"]


def _quiet() -> Console:
    return Console(file=open("/dev/null", "w"))  # noqa: SIM115


def _plan(tmp_path, base: str, variants: list[str], only: list[str]) -> dict:
    # at cost.assumedItlMs, as workload_steps_seconds prices it (the prediction is
    # tests/test_step_itl.py's)
    opts = CampaignOptions(base=base, variants=variants, only=only, scale="quick",
                           dry_run=True, predict=False, runs_dir=tmp_path / "runs",
                           hf_home=tmp_path / "hf")
    return run_campaign(opts, _quiet()).plan


def test_only_is_per_variant_or_for_all_in_plan_order():
    names = ["a", "b"]
    assert only_by_variant([], names) == {"a": None, "b": None}
    assert only_by_variant(["b:prefix_cache", "b:multi_turn"], names) == {
        "a": None, "b": ["multi_turn", "prefix_cache"]}
    assert only_by_variant(["prefix_cache", "a:concurrency_sweep"], names) == {
        "a": ["concurrency_sweep", "prefix_cache"], "b": ["prefix_cache"]}


def test_a_wrong_variant_or_workload_is_refused_naming_the_option():
    with pytest.raises(CampaignRefused) as exc:
        only_by_variant(["c:multi_turn", "multi-turn"], ["a", "b"])
    assert str(exc.value).splitlines() == [
        "--only c:multi_turn: c is not a variant of this campaign (a, b)",
        "--only multi-turn: no workload 'multi-turn': use one of concurrency_sweep, "
        "multi_turn, sequence_distributions, prefix_cache, trace_replay, or "
        "<stack>:<workload>"]


def test_the_local_forecast_counts_only_the_selected_workloads(tmp_path):
    plan = _plan(tmp_path, "local", DEMO, ROUTER)
    slots = {s["name"]: s for s in plan["slots"]}
    assert [s["only"] for s in plan["slots"]] == [
        None, ["multi_turn", "prefix_cache"], None]
    kv = load_stack("local-agg-kv")
    steps = workload_steps_seconds(kv, "quick")
    chosen = sum(v for k, v in steps.items() if k.startswith(("multi_turn/", "prefix_cache/")))
    assert 0 < chosen < sum(steps.values())
    assert slots["local-agg-kv"]["forecast"]["load_window_s"] == pytest.approx(chosen, abs=0.1)
    # the unrestricted variant keeps its whole window, and the kept workers stay planned
    agg = sum(workload_steps_seconds(load_stack("local-agg"), "quick").values())
    assert slots["local-agg"]["forecast"]["wall_s"] == pytest.approx(
        LOCAL_RESTART_S + agg, abs=0.1)
    assert slots["local-agg-kv"]["kept_from"] == "local-agg"
    assert plan["forecast"]["wall_s"] == pytest.approx(
        sum(s["forecast"]["wall_s"] for s in plan["slots"]), abs=0.5)


def test_the_aws_schedule_counts_only_the_selected_workloads(tmp_path):
    full = {s["name"]: s for s in _plan(tmp_path, "base-a100", ["agg-a100"], [])["slots"]}
    only = {s["name"]: s for s in _plan(tmp_path, "base-a100", ["agg-a100"],
                                        ["agg-a100:multi_turn"])["slots"]}
    steps = workload_steps_seconds(load_stack("agg-a100"), "quick")
    multi = sum(v for k, v in steps.items() if k.startswith("multi_turn/"))
    assert only["agg-a100"]["only"] == ["multi_turn"]
    assert only["agg-a100"]["forecast"]["load_window_s"] == pytest.approx(multi, abs=0.1)
    assert full["agg-a100"]["forecast"]["load_window_s"] > multi
    # the skipped cold restarts are the prefix steps'; multi-turn alone has none
    assert full["agg-a100"]["forecast"]["skipped_restarts"] > 0
    assert only["agg-a100"]["forecast"]["skipped_restarts"] == 0


def test_a_workload_the_variant_disables_is_refused_with_exit_2(tmp_path):
    result = CliRunner().invoke(app, [
        "campaign", "local", "local-agg", "local-recipe-motif3", "--only", "multi_turn",
        "--dry-run", "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2
    assert "disabled in stack 'local-recipe-motif3'" in result.output


def test_a_resume_must_use_the_same_selection(tmp_path):
    plan = _plan(tmp_path, "local", DEMO, ROUTER)
    path = tmp_path / "campaign.json"
    CampaignState.open(path, plan)
    assert CampaignState.open(path, json.loads(json.dumps(plan))).data["resumed"] == 1
    other = _plan(tmp_path, "local", DEMO, ["local-agg-kv:multi_turn"])
    with pytest.raises(ValueError, match="other variants, --only or scale"):
        CampaignState.open(path, other)


@pytest.mark.parametrize("module", [platform_local, platform_aws])
def test_each_platform_runs_a_slot_with_its_selection(module, monkeypatch):
    seen = []
    monkeypatch.setattr(module, "run", lambda opts, console: seen.append(opts))
    platform = object.__new__(module.LocalPlatform if module is platform_local
                              else module.AwsPlatform)
    platform.__dict__.update(workload_scale="quick", run_id="r", runs_dir=None,
                             stacks_dir=None, hf_home=None, show_progress=False,
                             console=None, target=None, outputs={"s": {}})
    platform.run({"name": "s", "only": ["multi_turn"]}, 1, {}, clock=None)
    platform.run({"name": "s", "only": None}, 1, {}, clock=None)
    assert [o.only for o in seen] == [["multi_turn"], None]
