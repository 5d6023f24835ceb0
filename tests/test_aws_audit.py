"""Teardown audit end to end against a moto server on 127.0.0.1 (AWS_ENDPOINT_URL), through the
real CLI in a subprocess: planted leftovers of every kind the stacks create (IAM included) for
stack s1 (plus what controllers make for its cluster with only cluster tags), the same for
stack s2, for a stack whose file is gone, project-only and untagged. The audit lists exactly
s1's, reports the orphans apart, --delete removes exactly s1's, and a mistyped stack name exits
with its own code and the list of stacks present."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aws_moto import aws_env, moto_server, placement_groups  # noqa: F401 (fixtures)
from aws_plant import REGION, exists, plant, plant_controller_made, stack_tags

from reports.accounting.audit_cli import (
    EXIT_ERROR,
    EXIT_LEFT,
    EXIT_ORPHANS,
    EXIT_UNKNOWN_STACK,
)
from reports.accounting.aws_session import clients_for

ROOT = Path(__file__).resolve().parents[1]
KINDS_PER_SET = 27   # what plant() makes; + 4 controller-made for s1


def _cli(*args: str, stacks_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "reports.accounting.aws_cli", "audit", *args,
                           "--stacks-dir", str(stacks_dir)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def _section(out: str, title_start: str) -> str:
    """The lines of one section of the audit's output (up to the next unindented line)."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(title_start))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")),
               len(lines))
    return "\n".join(lines[start:end])


@pytest.fixture
def planted(tmp_path):
    """s1 and s2 have stack files; 'gone' (a stack whose file was removed) does not."""
    stacks_dir = tmp_path / "stacks"
    stacks_dir.mkdir()
    for name in ("s1", "s2"):
        (stacks_dir / f"Pulumi.{name}.yaml").write_text("config: {}\n")
    c = clients_for(REGION)
    sets = {"s1": plant(c, "s1", stack_tags("s1"), "10.1.0.0/16", "dynamo-bench-s1")}
    sets["made"] = plant_controller_made(c, "dynamo-bench-s1", sets["s1"]["efs"])
    sets["s2"] = plant(c, "s2", stack_tags("s2"), "10.2.0.0/16", "dynamo-bench-s2")
    sets["gone"] = plant(c, "gone", stack_tags("gone"), "10.3.0.0/16", "dynamo-bench-gone")
    sets["project"] = plant(c, "po", stack_tags(None), "10.4.0.0/16", "po-eks")
    sets["untagged"] = plant(c, "un", {}, "10.5.0.0/16", "un-eks")
    return c, sets, stacks_dir


@pytest.mark.usefixtures("moto_server", "placement_groups")
def test_audit_lists_exactly_this_stack_orphans_apart_and_delete_removes_only_it(planted):
    c, sets, stacks_dir = planted
    assert c("ec2").meta.endpoint_url == os.environ["AWS_ENDPOINT_URL"]   # 127.0.0.1:<port>
    mine = {**sets["s1"], **sets["made"]}

    listed = _cli("s1", "--region", REGION, stacks_dir=stacks_dir)
    assert listed.returncode == EXIT_LEFT, listed.stdout + listed.stderr
    out = listed.stdout
    own = _section(out, f"{len(mine)} resource(s) of stack s1")
    assert len(mine) == KINDS_PER_SET + 4
    # every id whole on its line (ARNs included), nothing else in the section
    own_ids = {ln.split()[2] for ln in own.splitlines()[1:]}
    assert own_ids == set(mine.values())
    assert "log group named after the cluster" in own
    assert f"{mine['csi-ap']}  in {mine['efs']}  [parent {mine['efs']}" in own
    assert "cluster tag aws:eks:cluster-name" in own and "eks:cluster-name" in own
    # 'gone' (27, its log group by name) + project-only (26: its cluster's untagged log group
    # is not the project's)
    orphans = _section(out, f"{2 * KINDS_PER_SET - 1} orphan(s)")
    orphan_ids = {ln.split()[2] for ln in orphans.splitlines()[1:]}
    assert orphan_ids == {*sets["gone"].values(), *sets["project"].values()} - {
        sets["project"]["log"]}
    assert "other stacks' resources (untouched): s2 (27)" in out
    for rid in (*sets["s2"].values(), *sets["untagged"].values()):
        assert rid not in out

    deleted = _cli("s1", "--region", REGION, "--delete", "--yes", "--poll-s", "0",
                   stacks_dir=stacks_dir)
    # s1 is gone; the orphans stay (never deleted by a stack's --delete): exit 4, not 0
    assert deleted.returncode == EXIT_ORPHANS, deleted.stdout + deleted.stderr
    assert f"{len(mine)} handled, 0 failed, 0 left" in deleted.stdout
    assert not [k for k, rid in mine.items() if exists(c, k, rid)]
    for other in ("s2", "gone", "project", "untagged"):
        assert all(exists(c, k, rid) for k, rid in sets[other].items()), other
    again = _cli("s1", "--region", REGION, stacks_dir=stacks_dir)
    assert again.returncode == EXIT_ORPHANS
    assert "nothing tagged stack=s1 (or made for its cluster) left in us-east-1" in again.stdout


@pytest.mark.usefixtures("moto_server", "placement_groups")
def test_a_mistyped_stack_name_is_not_clean(planted):
    _, _, stacks_dir = planted
    res = _cli("s11", "--region", REGION, stacks_dir=stacks_dir)
    assert res.returncode == EXIT_UNKNOWN_STACK, res.stdout + res.stderr
    out = res.stdout
    assert "unknown stack 's11'" in out and "a mistyped name is not clean" in out
    present = {m.group(1): (int(m.group(2)), m.group(3)) for m in re.finditer(
        r"^  (\S+(?: stack tag\))?)\s+(\d+) resource\(s\)\s+(stack file: \w+)?", out, re.M)}
    assert present == {"s1": (KINDS_PER_SET + 4, "stack file: yes"),
                       "s2": (KINDS_PER_SET, "stack file: yes"),
                       "gone": (KINDS_PER_SET, "stack file: no"),
                       "(no stack tag)": (KINDS_PER_SET - 1, None)}
    # a name with a stack file and nothing left is clean (apart from the orphans)
    (stacks_dir / "Pulumi.s3.yaml").write_text("config: {}\n")
    known = _cli("s3", "--region", REGION, stacks_dir=stacks_dir)
    assert known.returncode == EXIT_ORPHANS and "nothing tagged stack=s3" in known.stdout


@pytest.mark.usefixtures("moto_server")
def test_delete_needs_a_stack_name(tmp_path):
    res = _cli("--all-regions", "--delete", stacks_dir=tmp_path)
    assert res.returncode == EXIT_ERROR and "--delete needs a stack name" in res.stdout
