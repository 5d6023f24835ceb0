"""Every command of `python -m stacks|workloads|reports` answers bad input (an unknown stack, a
path it cannot use, an unknown option or value) with one line on stderr and exit 2, before
anything is created; option names read naturally and fixed choices are choices in --help."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import click
import pytest
import typer
from reports_fixtures import copy_runs, run_dir

from reports.__main__ import app as reports_app
from stacks.__main__ import app as stacks_app
from stacks.cli import run_cli
from workloads.__main__ import app as workloads_app
from workloads.steps import WORKLOADS

APPS = {"python -m stacks": stacks_app, "python -m workloads": workloads_app,
        "python -m reports": reports_app}


def cli(capsys, prog: str, *args: str) -> tuple[int, str, str]:
    code = run_cli(APPS[prog], prog, list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, out: str, err: str, *needles: str) -> None:
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in out + err
    for needle in needles:
        assert needle in err, (needle, err)


def every_command() -> list[tuple[str, str]]:
    return [(prog, name) for prog, app in APPS.items()
            for name in typer.main.get_command(app).commands]


@pytest.mark.parametrize("prog, command", every_command())
def test_every_command_refuses_an_unknown_option_in_one_line(capsys, prog, command):
    code, out, err = cli(capsys, prog, command, "--no-such-option")
    assert_one_line_error(code, out, err, f"{prog} {command}: No such option",
                          f"(see {prog} {command} --help)")


@pytest.mark.parametrize("prog, command", every_command())
def test_option_names_read_naturally(prog, command):
    """No `--no-no-x`: a flag that turns something off is one name, no negated twin."""
    cmd = typer.main.get_command(APPS[prog]).commands[command]
    names = [o for p in cmd.params for o in (*p.opts, *p.secondary_opts)]
    assert not [n for n in names if n.startswith("--no-no")], names


@pytest.mark.parametrize("prog, args", [
    ("python -m stacks", ["check", "local-agx"]),
    ("python -m stacks", ["plan", "local-agx"]),
    ("python -m stacks", ["render", "local-agx"]),
    ("python -m workloads", ["run", "local-agx"]),
    ("python -m workloads", ["plan", "local-agx"]),
    ("python -m workloads", ["bench", "--stack", "local-agx"]),
    ("python -m reports", ["cost", "local-agx"]),
    # `reports audit` answers an unknown stack with its own verdict, exit 3, after asking AWS
    # whether anything is tagged with the name (a destroyed stack's file may be gone).
])
def test_a_mistyped_stack_gets_one_line_with_the_closest_names(capsys, prog, args):
    code, out, err = cli(capsys, prog, *args)
    assert_one_line_error(code, out, err, "no stack file Pulumi.local-agx.yaml",
                          "did you mean local-agg")


@pytest.mark.parametrize("args, needle", [
    (["render", "agg-a100", "--out", "{file}/x"], "Invalid value for '--out'"),
    (["check", "agg-a100", "--stacks-dir", "{missing}"], "Invalid value for '--stacks-dir'"),
    (["plan", "agg-a100", "--stacks-dir", "{missing}"], "Invalid value for '--stacks-dir'"),
    (["plan", "agg-a100", "--scale", "huge"], "'huge' is not one of 'quick', 'full'"),
    (["check", "agg-a100", "--as-of", "2026-13-01"], "write a date as YYYY-MM-DD"),
])
def test_stacks_bad_paths_and_values(capsys, tmp_path, args, needle):
    (tmp_path / "file").write_text("")
    args = [a.format(file=tmp_path / "file", missing=tmp_path / "missing") for a in args]
    assert_one_line_error(*cli(capsys, "python -m stacks", *args), needle)
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("args, needle", [
    (["run", "local-agg", "--run-id", "../../escaped"], "not a plain folder name"),
    (["run", "local-agg", "--run-id", "/tmp/abs"], "not a plain folder name"),
    (["run", "local-agg", "--run-id", "a/b"], "not a plain folder name"),
    (["run", "local-agg", "--scale", "huge"], "'huge' is not one of 'quick', 'full'"),
    (["run", "local-agg", "--only", "sweep"], "'sweep' is not one of 'concurrency_sweep'"),
    (["run", "local-agg", "--outputs", "{missing}"], "Invalid value for '--outputs'"),
    (["run", "local-agg", "--runs-dir", "{file}"], "Invalid value for '--runs-dir'"),
    (["run", "local-agg", "--stacks-dir", "{missing}"], "Invalid value for '--stacks-dir'"),
    (["plan", "local-agg", "--only", "sweep"], "'sweep' is not one of"),
    (["bench", "--concurrencies", "1,x"], "give whole numbers separated by commas"),
])
def test_workloads_bad_paths_and_values_before_any_run(capsys, tmp_path, args, needle):
    (tmp_path / "file").write_text("")
    args = [a.format(file=tmp_path / "file", missing=tmp_path / "missing") for a in args]
    if args[0] == "run" and "--runs-dir" not in args:
        args += ["--runs-dir", str(tmp_path / "runs")]
    assert_one_line_error(*cli(capsys, "python -m workloads", *args), needle)
    assert not list(tmp_path.glob("runs")) and not (tmp_path.parent / "escaped").exists()


def test_the_runner_refuses_a_run_id_outside_runs_as_an_api_too(tmp_path):
    from stacks.config.loader import load_stack
    from workloads.manifest import Manifest, check_run_id

    for bad in ("..", "../x", "a/b", "/abs", ".hidden", "", "x" * 101):
        with pytest.raises(ValueError, match="plain folder name"):
            check_run_id(bad)
    assert check_run_id("20261130T040514Z") == "20261130T040514Z"
    with pytest.raises(ValueError, match="plain folder name"):
        Manifest.open(tmp_path / "m.json", stack=load_stack("local-agg"), run_id="../up",
                      scale="quick")


@pytest.mark.parametrize("prog, command, option, choices", [
    ("python -m stacks", "plan", "scale", ["quick", "full"]),
    ("python -m workloads", "run", "scale", ["quick", "full"]),
    ("python -m workloads", "plan", "scale", ["quick", "full"]),
    ("python -m workloads", "run", "only", list(WORKLOADS)),
    ("python -m workloads", "plan", "only", list(WORKLOADS)),
    ("python -m reports", "build", "user_speed", ["mean", "p50", "e2e"]),
    ("python -m reports", "compare", "user_speed", ["mean", "p50", "e2e"]),
])
def test_fixed_choices_are_choices_shown_in_help(capsys, monkeypatch, prog, command, option,
                                                 choices):
    cmd = typer.main.get_command(APPS[prog]).commands[command]
    (param,) = [p for p in cmd.params if p.name == option]
    assert isinstance(param.type, click.Choice) and list(param.type.choices) == choices
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = cli(capsys, prog, command, "--help")
    assert code == 0 and f"[{'|'.join(choices)}]" in out


@pytest.fixture()
def runs(tmp_path):
    return copy_runs(tmp_path)


def test_compare_needs_two_runs(capsys, runs, tmp_path):
    code, out, err = cli(capsys, "python -m reports", "compare", "local-agg", "--runs-root",
                         str(runs), "--out", str(tmp_path / "out"))
    assert_one_line_error(code, out, err, "compare needs two or more runs, got 1")
    assert not list((tmp_path / "out").glob("*/report.md"))


@pytest.mark.parametrize("args, needle", [
    (["build", "no-such-stack"], "python -m workloads run no-such-stack"),
    (["build", "local-agg", "--out", "{file}/x"], "Invalid value for '--out'"),
    (["build", "local-agg", "--user-speed", "fast"], "'fast' is not one of 'mean', 'p50'"),
    (["build", "local-agg", "--slo", "x:ttft=5"], "unknown key 'ttft'"),
    (["build", "local-agg", "--no-no-cache"], "Did you mean '--no-cache'"),
])
def test_reports_bad_input(capsys, runs, tmp_path, args, needle):
    (tmp_path / "file").write_text("")
    args = [a.format(file=tmp_path / "file") for a in args]
    code, out, err = cli(capsys, "python -m reports", *args, "--runs-root", str(runs))
    assert_one_line_error(code, out, err, needle)


def _age(run, seconds: float) -> None:
    os.utime(run / "manifest.json", (seconds, seconds))


def test_build_of_a_stack_picks_its_newest_complete_run_and_says_which(capsys, runs, tmp_path):
    older, newer = run_dir(runs, "local-agg"), run_dir(runs, "local-agg", "fixture-repeats")
    _age(older, 1_000_000)
    _age(newer, 2_000_000)
    doc = json.loads((newer / "manifest.json").read_text())
    doc["status"] = "interrupted"                      # the newest run did not finish
    (newer / "manifest.json").write_text(json.dumps(doc))
    _age(newer, 2_000_000)
    code, out, err = cli(capsys, "python -m reports", "build", "local-agg", "--runs-root",
                         str(runs), "--out", str(tmp_path / "out"), "--name", "r")
    assert code == 0, err
    said = " ".join(out.split())
    assert f"local-agg: newest complete run {older}" in said
    assert "newer, not complete, left out: fixture-repeats (interrupted)" in said
    doc["status"] = "complete"
    (newer / "manifest.json").write_text(json.dumps(doc))
    _age(newer, 2_000_000)
    code, out, _ = cli(capsys, "python -m reports", "build", "local-agg", "--runs-root",
                       str(runs), "--out", str(tmp_path / "out"), "--name", "r")
    assert code == 0 and f"newest complete run {newer}" in " ".join(out.split())


def test_a_stack_without_a_complete_run_names_the_fix(capsys, runs, tmp_path):
    for run in runs.joinpath("local-agg").iterdir():
        doc = json.loads((run / "manifest.json").read_text())
        (run / "manifest.json").write_text(json.dumps({**doc, "status": "failed"}))
    code, out, err = cli(capsys, "python -m reports", "build", "local-agg", "--runs-root",
                         str(runs), "--out", str(tmp_path / "out"))
    assert_one_line_error(code, out, err, "has no complete run",
                          "python -m workloads run local-agg --run-id")


@pytest.mark.parametrize("path", ["outputs.json", "stacks/agg-a100.outputs.json", "kubeconfig",
                                  "base-a100.kubeconfig"])
def test_files_holding_secret_outputs_are_git_ignored(path):
    root = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(["git", "check-ignore", "-q", path], cwd=root)
    assert done.returncode == 0, f"{path} is not git-ignored"
