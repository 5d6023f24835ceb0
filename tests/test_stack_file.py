"""No input reaches the user as a traceback, and what YAML would hide is refused.

- a real `python -m stacks check --all` process over a folder of broken files (binary, empty,
  huge, wrongly encoded, YAML bombs, self-referencing aliases, ...) and one valid stack: exit 2,
  no traceback, every broken file reported in one line, the valid one still checked;
- seeded random damage to every shipped stack file, checked in-process: exit 0 or 2, never an
  exception (exit 1 is the CLI's "internal error" and fails the test);
- the Pulumi program refuses a config key `stacks check` refuses (one rule: config_key_problems).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pulumi_harness import raw_config
from stack_variants import check

from stacks.config import stack_file
from stacks.config.errors import StackError
from stacks.config.loader import STACKS_DIR, all_stack_names, read_stack_file
from stacks.config.stack_file import MAX_BYTES, MAX_DEPTH, MAX_NODES
from stacks.render.offline import config_strings, run_program

REPO = STACKS_DIR.parent
VALID = (STACKS_DIR / "Pulumi.local-agg.yaml").read_bytes()


def _bomb(levels: int) -> str:
    """A 'billion laughs' document: each level lists the previous one ten times."""
    rows = ['a0: &a0 ["lol"]']
    rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    last = f"*a{levels - 1}"
    return "\n".join(rows) + f"\nconfig:\n  dynamo-bench:tags: {{extra: {{x: {last}}}}}\n"


BROKEN: dict[str, tuple[bytes, str]] = {
    "binary": (bytes(range(256)) * 4, "contains NUL bytes: it is binary"),
    "empty": (b"", "is empty: it has no `config:` block"),
    "blank": (b"\n\n   \n", "is empty: it has no `config:` block"),
    "huge": (b"config:\n" + b"#" * (MAX_BYTES + 1), f"a stack file is a few KB (limit "
             f"{MAX_BYTES:,})"),
    "bom": (b"\xef\xbb\xbf" + VALID, "byte-order mark"),
    "utf16": (VALID.decode().encode("utf-16"), "UTF-16 or UTF-32"),
    "utf16-no-bom": (VALID.decode().encode("utf-16-le"), "looks UTF-16 encoded"),
    "latin1": ("# Grüße\n".encode("latin-1") + VALID, "byte 0xFC at line 1, column 5"),
    "bad-continuation": (VALID + b"# \xe2\x28\xa1\n", "is not UTF-8"),
    "control-character": (VALID + b"# bell \x07\n", "character U+0007 at line 32"),
    "tabs": (b"config:\n\tdynamo-bench:target: local\n", "is not valid YAML"),
    "two-documents": (VALID + b"---\nconfig: {}\n", "is not valid YAML"),
    "python-tag": (b"config: !!python/object/apply:os.system ['true']\n", "is not valid YAML"),
    "scalar": (b"just some words\n", "is a YAML str, not a mapping with `config:`"),
    "list": (b"- config\n", "is a YAML list, not a mapping"),
    "config-list": (b"config:\n  - dynamo-bench:target\n", "`config:` is a list"),
    "deep": (b"config: " + b"[" * 5000 + b"]" * 5000 + b"\n",
             f"nests more than {MAX_DEPTH} levels deep"),
    # Deep enough to crash LibYAML's composer (stacks/config/stack_file.py _FAST_LOADER): the
    # pure-Python loader must read it.
    "deeper": (b"config: " + b"{a: " * 60_000 + b"1" + b"}" * 60_000 + b"\n",
               f"nests more than {MAX_DEPTH} levels deep"),
    "bomb": (_bomb(7).encode(), f"expands to more than {MAX_NODES:,} values"),
    "self-reference": (b"config: &c\n  dynamo-bench:tags: {extra: *c}\n",
                       "an alias refers to the value that contains it"),
    "complex-key": (b"config:\n  ? [a, b]\n  : 1\n", "a key is a YAML mapping or list"),
}


@pytest.fixture
def broken_dir(tmp_path: Path) -> Path:
    for name, (data, _) in BROKEN.items():
        (tmp_path / f"Pulumi.{name}.yaml").write_bytes(data)
    (tmp_path / "Pulumi.unreadable.yaml").mkdir()  # a directory where a file should be
    (tmp_path / "Pulumi.local-agg.yaml").write_bytes(VALID)
    return tmp_path


def test_check_all_reports_each_broken_file_in_one_line_and_goes_on(broken_dir: Path) -> None:
    env = {**os.environ, "COLUMNS": "400"}
    proc = subprocess.run([sys.executable, "-m", "stacks", "check", "--all", "--stacks-dir",
                           str(broken_dir), "--as-of", "2026-12-01"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert proc.returncode == 2, proc.stdout + proc.stderr
    for name, (_, says) in BROKEN.items():
        block = proc.stdout.split(f"\n{name}\n", 1)[1].split("\n\n", 1)[0]
        assert "1 problem(s):" in block, (name, block)
        assert f"Pulumi.{name}.yaml" in block and says in block, (name, block)
    assert "cannot be read" in proc.stdout.split("\nunreadable\n", 1)[1]
    assert "local-agg: memory per worker" in proc.stdout
    total = len(BROKEN) + 2
    assert f"1/{total} stack(s) valid" in proc.stdout


def _damage(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    kind = rng.randrange(7)
    if kind == 0:
        return data[:rng.randrange(len(data))]
    if kind == 1:
        i = rng.randrange(len(data))
        return data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
    if kind == 2:
        i = rng.randrange(len(data))
        return data[:i] + bytes([rng.randrange(256)]) + data[i:]
    if kind == 3:
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i] + [lines[i]] + lines[i:])
    if kind == 4:
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i] + lines[i + 1:])
    if kind == 5:
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i] + [b" " + lines[i]] + lines[i + 1:])
    words = [b"null", b".nan", b"-1", b"yes", b"~", b"[]", b"{}", b"*x", b"&x", b"'", b'"']
    i = rng.randrange(len(lines))
    head = lines[i].split(b":")[0]
    return b"\n".join(lines[:i] + [head + b": " + rng.choice(words)] + lines[i + 1:])


def test_random_damage_to_any_shipped_stack_never_ends_in_a_traceback(tmp_path: Path) -> None:
    rng = random.Random(20261201)
    shipped = {p.name: p.read_bytes() for p in STACKS_DIR.glob("Pulumi.*.yaml")}
    for path_name, data in shipped.items():
        (tmp_path / path_name).write_bytes(data)
    names, codes = sorted(shipped), []
    for trial in range(240):
        target = names[trial % len(names)]
        (tmp_path / "Pulumi.fuzz.yaml").write_bytes(_damage(shipped[target], rng))
        code, out = check(tmp_path, "fuzz")   # asserts no exception escaped the CLI
        assert code in (0, 2), (target, out)
        assert "internal error" not in out, (target, out)
        codes.append(code)
    assert codes.count(2) > 60  # most damage is caught, not silently accepted


def test_duplicate_keys_are_refused_but_yaml_merge_keys_are_not(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.m.yaml"
    path.write_text("config:\n  dynamo-bench:tags:\n    extra: &d {team: a}\n"
                    "    experiment: x\n  dynamo-bench:cost: {priceOverrides: *d}\n")
    assert read_stack_file(path)["tags"] == {"extra": {"team": "a"}, "experiment": "x"}
    path.write_text("config:\n  dynamo-bench:tags:\n    extra:\n      <<: {team: a}\n"
                    "      team: b\n")
    assert read_stack_file(path)["tags"] == {"extra": {"team": "b"}}
    path.write_text("config:\n  dynamo-bench:tags:\n    extra: {team: a, team: b}\n")
    with pytest.raises(StackError) as err:
        read_stack_file(path)
    (problem,) = err.value.problems
    assert problem.field == "dynamo-bench:tags.extra.team"
    assert "appears twice (lines 3 and 3)" in problem.message


def test_every_shipped_stack_file_passes_the_file_checks() -> None:
    for name in all_stack_names():
        assert read_stack_file(STACKS_DIR / f"Pulumi.{name}.yaml"), name
        # the shipped files are plain: no key YAML would read as anything but a string
        yaml.safe_load((STACKS_DIR / f"Pulumi.{name}.yaml").read_text())


def test_libyaml_reads_every_shipped_stack_as_the_pure_python_loader_does() -> None:
    """The fast path (LibYAML) is taken for the shipped files and gives the same data; a file
    LibYAML refuses is read again by the pure-Python loader, whose error is the one shown."""
    for name in all_stack_names():
        path = STACKS_DIR / f"Pulumi.{name}.yaml"
        text = path.read_text()
        assert stack_file._parse_fast(path, text) == (True, yaml.load(text, yaml.SafeLoader))
    tabs = "config:\n\tdynamo-bench:target: local\n"
    assert stack_file._parse_fast(Path("Pulumi.tabs.yaml"), tabs) == (False, None)
    # PyYAML's words (LibYAML says "found character that cannot start any token")
    said = "(line 2, column 1): while scanning for the next token: found character '\\t'"
    with pytest.raises(StackError, match=re.escape(said)):
        stack_file.parse_yaml(Path("Pulumi.tabs.yaml"), tabs)


def test_the_pulumi_program_refuses_a_key_stacks_check_refuses() -> None:
    config = config_strings(raw_config("agg-a100"), "hf_placeholder")
    config["dynamo_bench:cost"] = '{"budgetUsd": 100000}'   # a typo, silently ignored before
    result = run_program("agg-a100", config, region="us-east-1")
    assert isinstance(result.error, StackError), result.error
    problem = next(p for p in result.error.problems if p.field == "dynamo_bench:cost")
    assert "namespace 'dynamo_bench' is not the project's" in problem.message
    assert problem.fix == "write dynamo-bench:cost"
    assert result.resources == []


def test_the_pulumi_program_refuses_an_empty_token() -> None:
    config = config_strings(raw_config("base-a100"), "   ")
    result = run_program("base-a100", config, region="us-east-1")
    assert isinstance(result.error, StackError), result.error
    problem = next(p for p in result.error.problems if p.field == "dynamo-bench:hfToken")
    assert "the Hugging Face token is empty" in problem.message
    assert result.resources == []
