"""Pre-flight on EKS Auto Mode: `stacks check` / `stacks plan` on the Auto Mode base and the A100
variants derived onto it, and every combination Auto Mode cannot run, refused with its source
(stacks/preflight/auto_mode.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from stack_variants import F, check, copy_shipped, edit, read_config, variant_config, write_stack
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.config.loader import (
    StackError,
    all_stack_names,
    derived_stack_names,
    load_stack,
    load_stack_file,
)
from stacks.plan.campaign_cost import base_campaign
from stacks.preflight import auto_mode
from stacks.preflight.run import check_stack

BASE = "base-a100-auto"
DAY = "2026-12-01"   # EKS 1.35 in standard support: the $0.10/h control plane
P4D, M7I, FEE = 21.957642, 0.8064, 0.12


def test_check_passes_on_the_auto_mode_base_and_two_derived_variants_with_the_fee() -> None:
    code, out = check(Path(__file__).parents[1] / "stacks", BASE, f"agg-a100.{BASE}",
                      f"disagg-a100.{BASE}")
    assert code == 0, out
    assert "3/3 stack(s) valid" in out
    assert f"agg-a100.{BASE} (target aws, attached to {BASE})" in out
    assert f"disagg-a100.{BASE}: memory per worker (per GPU)" in out
    # 2 x p4d 43.92 + its fee 12 % 5.27; the CPU pool 1.61 + its fee 0.19
    assert f"auto mode fee p4d ${2 * P4D * FEE:.2f}" in out
    assert f"auto mode fee cpu ${2 * M7I * FEE:.2f}" in out
    assert "unverified prices: EKS Auto Mode fee" in out
    assert "the dynamic GPU pools get a cluster placement group" in out
    assert "built-in system / general-purpose NodePools" in out   # said, not priced


def test_plan_of_the_auto_mode_base_brings_every_derived_variant_with_the_fee() -> None:
    res = CliRunner().invoke(app, ["plan", BASE, "--as-of", DAY, "--no-predict",
                                   "--no-resolution"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    for variant in ("agg-a100", "disagg-a100", "disagg-l40s-decode"):
        assert f"{variant}.{BASE}" in out
    hourly = check_stack(BASE).hourly
    assert hourly.lines["auto mode fee p4d"] == pytest.approx(2 * P4D * FEE)
    # the campaign prices each GPU node with its Auto Mode fee (and its root volume)
    c = base_campaign(load_stack(BASE), [load_stack(n) for n in derived_stack_names()
                                         if n.endswith(f".{BASE}")],
                      on=dt.date.fromisoformat(DAY))
    assert len(c.slots) == 7
    assert c.per_node["p4d"] > P4D * (1 + FEE) > c.per_node["p4d"] - 0.1
    assert f"campaign {BASE}: wall {c.wall_s / 3600:.2f} h, ${c.cost_usd:,.2f} billed" in out


def test_a_derived_name_needs_a_variant_and_a_base_that_runs_its_base_variants() -> None:
    with pytest.raises(StackError) as err:
        load_stack("agg-a100.base-b200")   # base-b200 runs no base-a100 variant
    (problem,) = err.value.problems
    assert "base 'base-b200' does not run the variants of 'base-a100'" in problem.message
    assert f"agg-a100.{BASE}" in problem.fix
    with pytest.raises(StackError) as err:
        load_stack(f"base-a100.{BASE}")      # a base is no variant
    assert "attaches to no base" in err.value.problems[0].message
    derived = load_stack(f"agg-a100.{BASE}")
    assert derived.cluster.attach_to == BASE and derived.name == f"agg-a100.{BASE}"


def test_a_derived_stacks_own_file_carries_what_pulumi_writes_there(tmp_path: Path) -> None:
    """`pulumi stack init` (a passphrase's salt) and `pulumi config set` (the campaign's key,
    through the Automation API) write Pulumi.<variant>.<base>.yaml; the stack stays the
    variant on that base, with those keys, and is no stack of its own."""
    stacks_dir = copy_shipped(tmp_path)
    name = f"agg-a100.{BASE}"
    own = stacks_dir / f"Pulumi.{name}.yaml"
    own.write_text("encryptionsalt: v1:abc:def\n")
    assert load_stack(name, stacks_dir).cluster.attach_to == BASE
    own.write_text("encryptionsalt: v1:abc:def\nconfig:\n  dynamo-bench:campaign: "
                   "'{\"graphName\":\"agg-a100\",\"adopt\":true}'\n")
    file = load_stack_file(name, stacks_dir)
    assert file.campaign == '{"graphName":"agg-a100","adopt":true}'
    assert file.config == load_stack_file(name).config      # the variant's, on this base
    assert name not in all_stack_names(stacks_dir)
    assert derived_stack_names(stacks_dir).count(name) == 1
    code, out = check(stacks_dir, name)
    assert code == 0, out
    # experiment config there would fork the variant silently: refused, naming the key
    own.write_text("config:\n  dynamo-bench:cost:\n    budgetUsd: 10\n")
    with pytest.raises(StackError) as err:
        load_stack(name, stacks_dir)
    (problem,) = err.value.problems
    assert problem.field == f"Pulumi.{name}.yaml: config"
    assert "sets dynamo-bench:cost" in problem.message and "Pulumi.agg-a100.yaml" in problem.fix


def _checked(tmp_path: Path, name: str, source: str, *mutations) -> tuple[int, str]:
    stacks_dir = copy_shipped(tmp_path)
    config = variant_config(source, lambda c: None)
    for m in mutations:
        m(config)
    write_stack(stacks_dir, name, config)
    return check(stacks_dir, name)


def test_a_static_gpu_pool_cannot_carry_nixl_over_libfabric(tmp_path: Path) -> None:
    stacks_dir = copy_shipped(tmp_path)
    base = read_config(stacks_dir, BASE)
    base["cluster"]["nodeGroups"][0]["provisioning"] = "static"
    write_stack(stacks_dir, BASE, base)
    code, out = check(stacks_dir, f"disagg-a100.{BASE}", f"agg-a100.{BASE}")
    assert code == 2, out
    assert (f"- {F}serving.workers[0].nodeGroup: NIXL over LIBFABRIC needs EFA, and group "
            "'p4d' is a static-capacity Auto Mode NodePool (EKS user guide, 'Manage EFA devices "
            "on Amazon EKS'") in out
    assert "set provisioning: dynamic on that group, or use transfer: nixl-ucx" in out
    assert f"agg-a100.{BASE} (target aws" in out and "1/2 stack(s) valid" in out  # no EFA asked


def test_provisioning_is_refused_off_auto_mode(tmp_path: Path) -> None:
    code, out = _checked(tmp_path, "base-ng-static", "base-a100",
                         edit("cluster.nodeGroups.0.provisioning", "static"))
    assert code == 2, out
    assert (f"- {F}cluster.nodeGroups[0].provisioning: only EKS Auto Mode NodePools have a "
            "provisioning mode; this cluster is nodegroups") in out


def test_a_family_auto_mode_does_not_list_is_refused(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(auto_mode, "SUPPORTED_FAMILIES", auto_mode.SUPPORTED_FAMILIES - {"g6e"})
    code, out = check(Path(__file__).parents[1] / "stacks", BASE)
    assert code == 2, out
    assert (f"- {F}cluster.nodeGroups[1].instanceType: EKS Auto Mode does not list the g6e "
            "family (EKS user guide automode-learn-instances.adoc") in out
    assert all(load_stack(BASE).cluster.group(n) for n in ("p4d", "g6e", "cpu"))


def test_every_catalogue_family_is_one_auto_mode_lists() -> None:
    from stacks.catalog.instances import INSTANCE_TYPES
    assert {it.family for it in INSTANCE_TYPES.values()} <= auto_mode.SUPPORTED_FAMILIES
