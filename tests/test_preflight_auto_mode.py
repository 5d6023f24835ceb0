"""Pre-flight on EKS Auto Mode: `stacks check` / `stacks plan` on the Auto Mode base and the A100
variants derived onto it, and every combination Auto Mode cannot run, refused with its source
(stacks/auto_mode.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from stack_variants import F, check, copy_shipped, edit, read_config, variant_config, write_stack
from typer.testing import CliRunner

from stacks import auto_mode
from stacks.__main__ import app
from stacks.loader import StackError, load_stack
from stacks.preflight import check_stack

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
    assert "EFA on Auto Mode comes without a cluster placement group" in out
    assert "built-in system / general-purpose NodePools" in out   # said, not priced


def test_plan_of_the_auto_mode_base_brings_every_derived_variant_with_the_fee() -> None:
    res = CliRunner().invoke(app, ["plan", BASE, "--as-of", DAY])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    for variant in ("agg-a100", "disagg-a100", "disagg-l40s-decode"):
        assert f"{variant}.{BASE}" in out
    hourly = check_stack(BASE).hourly
    assert hourly.lines["auto mode fee p4d"] == pytest.approx(2 * P4D * FEE)
    assert f"(${hourly.total:,.2f}/h for 20 GPUs and fixed fees)" in out


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
    from stacks.catalog import INSTANCE_TYPES
    assert {it.family for it in INSTANCE_TYPES.values()} <= auto_mode.SUPPORTED_FAMILIES
