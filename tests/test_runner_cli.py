"""The CLI refuses bad input before anything starts; `plan` lists the steps."""

from __future__ import annotations

from engine_support import write_stack
from typer.testing import CliRunner

from workloads.__main__ import app


def test_invalid_stack_is_refused_before_any_load(tmp_path):
    stacks = tmp_path / "stacks"
    # TP 3 does not divide the model's 32 attention heads: pre-flight must refuse it.
    write_stack(stacks, "bad", workers=[{"role": "worker", "replicas": 1,
                                         "tensorParallelSize": 3}])
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["run", "bad", "--stacks-dir", str(stacks),
                                      "--runs-dir", str(runs), "--no-progress"])
    assert result.exit_code == 2
    assert "tensorParallelSize" in result.output
    assert not runs.exists()          # no run directory, no engine, no load


def test_unknown_workload_and_scale_are_refused(tmp_path):
    stacks = tmp_path / "stacks"
    write_stack(stacks, "ok", workers=[{"role": "worker", "replicas": 1}])
    runs = tmp_path / "runs"
    bad_only = CliRunner().invoke(app, ["run", "ok", "--only", "sweep", "--stacks-dir",
                                        str(stacks), "--runs-dir", str(runs)])
    assert bad_only.exit_code == 2 and "'sweep' is not one of" in bad_only.output
    bad_scale = CliRunner().invoke(app, ["run", "ok", "--scale", "huge", "--stacks-dir",
                                         str(stacks), "--runs-dir", str(runs)])
    assert bad_scale.exit_code == 2 and not runs.exists()


def test_plan_lists_the_steps(tmp_path):
    result = CliRunner().invoke(app, ["plan", "local-disagg", "--only", "prefix_cache"])
    assert result.exit_code == 0
    assert "prefix_cache/share000" in result.output and "prefix_cache/share100" in result.output
