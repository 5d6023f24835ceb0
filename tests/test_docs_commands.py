"""The commands in README.md and docs/*.md cannot rot: every `python -m stacks|workloads|reports`
command shown in a code block is answered by that command's `--help` (exit 0), and every option
it uses is one the command offers; every `make` target shown exists in the Makefile; every path
a shown command reads (a policy pack, a stack file) exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from reports.__main__ import app as reports_app
from stacks.__main__ import app as stacks_app
from workloads.__main__ import app as workloads_app

REPO = Path(__file__).resolve().parents[1]
APPS = {"stacks": stacks_app, "workloads": workloads_app, "reports": reports_app}
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
PY_CMD = re.compile(r"(?:\.venv/bin/)?python -m (stacks|workloads|reports)\b(.*)")
MAKE_CMD = re.compile(r"^make\s+([\w-]+)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def shown_lines() -> list[tuple[str, str]]:
    """(doc, command line) for every line of every fenced block, continuations joined and
    trailing comments dropped."""
    out = []
    for doc in DOCS:
        for block in FENCE.findall(doc.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split("  #")[0].strip()
                if line:
                    out.append((doc.name, line))
    return out


def python_commands() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(doc, module, subcommand, options) of every shown `python -m` command."""
    found = []
    for doc, line in shown_lines():
        for part in re.split(r"&&|;|\|", line):
            m = PY_CMD.match(part.strip().lstrip("("))
            if not m:
                continue
            words = m.group(2).split()
            sub = next((w for w in words if not w.startswith(("-", "<", "["))), "")
            found.append((doc, m.group(1), sub, tuple(OPTION.findall(m.group(2)))))
    return found


HELP_ENV = {"COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}


@cache
def help_text(module: str, sub: str) -> str:
    """The command's --help, from its app in this process (one real process per entry point
    below: `python -m <module> --help`)."""
    args = [*([sub] if sub else []), "--help"]
    done = CliRunner().invoke(APPS[module], args, env=HELP_ENV, prog_name=f"python -m {module}")
    assert done.exit_code == 0, f"`python -m {module} {' '.join(args)}` exits " \
        f"{done.exit_code}: {done.output}"
    return done.output


@pytest.mark.parametrize("module", sorted(APPS))
def test_every_entry_point_answers_help_as_a_real_process(module):
    env = {**os.environ, **HELP_ENV}
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # the same commands as the app the tests read in-process
    assert set(typer.main.get_command(APPS[module]).commands) <= set(done.stdout.split())


def test_the_docs_show_commands_of_every_entry_point():
    modules = {m for _, m, _, _ in python_commands()}
    assert modules == {"stacks", "workloads", "reports"}


@pytest.mark.parametrize("module,sub", sorted({(m, s) for _, m, s, _ in python_commands()}))
def test_every_documented_command_exists_and_offers_the_options_shown(module, sub):
    text = help_text(module, sub)
    for doc, m, s, options in python_commands():
        if (m, s) != (module, sub):
            continue
        for opt in options:
            if opt == "--help":
                continue
            assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text), (
                f"{doc}: `python -m {module} {sub}` has no option {opt}")


def test_every_documented_make_target_exists():
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    shown = {MAKE_CMD.match(line).group(1) for _, line in shown_lines() if MAKE_CMD.match(line)}
    assert shown, "no make command shown"
    assert shown <= targets, f"targets shown but not in the Makefile: {shown - targets}"


def test_paths_the_documented_commands_read_exist():
    for doc, line in shown_lines():
        for path in re.findall(r"--policy-pack\s+(\S+)", line):
            assert (REPO / path).is_dir(), f"{doc}: {path}"
        for stack in re.findall(r"pulumi stack select\s+([\w.-]+)", line):
            variant, _, base = stack.partition(".")
            for name in filter(None, (variant, base)):
                assert (REPO / "stacks" / f"Pulumi.{name}.yaml").is_file(), f"{doc}: {stack}"


def test_the_check_catches_a_command_or_option_that_does_not_exist():
    """The guard itself: an invented option and an invented subcommand are caught."""
    assert "--no-such-option" not in help_text("workloads", "run")
    args = [sys.executable, "-m", "workloads", "no-such-command", "--help"]
    assert subprocess.run(args, cwd=REPO, capture_output=True).returncode != 0
