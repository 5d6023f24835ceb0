"""`python -m stacks check`: exit codes, the memory table and the cost lines it prints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.config.loader import STACKS_DIR, all_stack_names, derived_stack_names, load_stack

REPO = STACKS_DIR.parent
# Pinned estimate dates: EKS 1.35 (every shipped stack) is in standard support on both; the
# second is the EKS catalogue's date (stacks.catalog.eks_versions), so no test changes with the
# calendar.
STANDARD_DAY, CATALOGUE_DAY = "2026-07-01", "2026-12-01"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_check_all_in_a_real_process_passes_and_prints_every_table() -> None:
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "stacks", "check", "--all", "--as-of",
                           CATALOGUE_DAY], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [*all_stack_names(), *derived_stack_names()]   # `<variant>.<base>` pairs too
    assert "agg-a100.base-a100-auto" in names
    for name in names:
        stack = load_stack(name)
        assert f"\n{name} (target {stack.target}," in proc.stdout
        if stack.serving is not None:
            assert f"{name}: memory per worker (per GPU)" in proc.stdout
    assert "base-a100: memory per worker" not in proc.stdout  # a base serves nothing
    assert proc.stdout.count("\nOK\n") == len(names)
    assert f"{len(names)}/{len(names)} stack(s) valid" in proc.stdout


def table_row(out: str, role: str) -> list[str]:
    row = next(line for line in out.splitlines() if line.startswith(f"│ {role} "))
    return [cell.strip() for cell in row.strip("│").split("│")]


def test_memory_table_and_cost_of_one_stack() -> None:
    code, out = run("check", "agg-a100", "--as-of", STANDARD_DAY)
    assert code == 0, out
    role, replicas, tp, gpu, budget, weights, overhead, kv_token, full_seq, capacity, fits = \
        table_row(out, "worker")
    assert (role, replicas, tp) == ("worker", "4", "4")
    assert gpu == "A100-SXM4-40GB (p4d.24xlarge)"
    assert (budget, weights, overhead) == ("36.0", "14.20", "4.0")
    assert (kv_token, full_seq, capacity, fits) == ("24,576", "0.75 (32,768 tok)", "777,577",
                                                    "yes")
    assert "cost estimate: $45.91/h (nodes p4d (2 x p4d.24xlarge) $43.92," in out
    # shared: CPU group 1.6128 + its root volumes 0.0438 + EKS 0.10 + EFS 0.0822 + NAT 0.05
    assert "of which shared with its base's other variants: $1.89/h; not included: network " \
        "transfer and NAT data processing" in out
    assert "unverified prices: m7i.4xlarge (catalogue 2025-01-01)" in out
    # 5 prefix-cache restarts x 353.62 s model load: 0.25 + (3824.8 + 1768.1) / 3600 = 1.80 h
    assert ("planned: 1.80 h (setup 0.25 h + workloads at full scale + 5 cold restart(s) x "
            "5.9 min) = $82.81; budget $200") in out
    assert "1/1 stack(s) valid" in out


def test_disaggregated_table_has_a_row_per_role() -> None:
    code, out = run("check", "disagg-l40s-decode")
    assert code == 0, out
    assert table_row(out, "prefill")[3] == "A100-SXM4-40GB (p4d.24xlarge)"
    assert table_row(out, "decode")[3] == "L40S (g6e.12xlarge)"


def test_local_stack_is_priced_as_its_aws_equivalent() -> None:
    code, out = run("check", "local-agg", "--as-of", STANDARD_DAY)
    assert code == 0, out
    # 1 x p4d 21.9576 + its 200 GiB root volume 0.0219 + the CPU group AWS would need
    # (2 x m7i.4xlarge 1.6128 + 2 x 200 GiB 0.0438) + EKS 0.10 + EFS 0.0822 + NAT 0.05
    assert "cost AWS-equivalent estimate (local run costs nothing): $23.87/h" in out
    assert "nodes cpu (2 x m7i.4xlarge, assumed: the CPU group an AWS cluster needs) $1.61" \
        in " ".join(out.split())


def test_control_plane_is_priced_at_the_extended_rate_past_standard_support() -> None:
    """EKS 1.35: standard support ends 2027-03-27 (EKS release calendar), $0.10 -> $0.60/h."""
    code, before = run("check", "agg-a100", "--as-of", "2027-03-26")
    assert code == 0, before
    assert "EKS control plane $0.10" in " ".join(before.split())
    assert "note: EKS 1.35: standard support until 2027-03-27" in " ".join(before.split())
    code, after = run("check", "agg-a100", "--as-of", "2027-03-27")
    assert code == 0, after
    flat = " ".join(after.split())
    assert "EKS control plane (EKS 1.35 in extended support on 2027-03-27) $0.60" in flat
    assert "cost estimate: $46.41/h" in flat   # 45.91 + 0.50
    assert "note: EKS 1.35: extended support since 2027-03-27, until 2028-03-27" in flat


def test_a_version_eks_no_longer_offers_is_refused_listing_the_offered_ones() -> None:
    code, out = run("check", "base-a100", "--as-of", "2028-03-27")
    flat = " ".join(out.split())
    assert code == 2, out
    assert ("- dynamo-bench:cluster.eksVersion: EKS no longer offers 1.35: its extended support "
            "ended 2028-03-27; on 2028-03-27 EKS offers none in the catalogue") in flat


def test_as_of_must_be_a_date() -> None:
    code, out = run("check", "agg-a100", "--as-of", "tomorrow")
    assert code == 2 and "--as-of tomorrow: write a date as YYYY-MM-DD" in out


def test_one_invalid_stack_fails_the_run_but_the_others_are_still_checked(
        tmp_path: Path) -> None:
    shutil.copy(STACKS_DIR / "Pulumi.local-agg.yaml", tmp_path)
    text = (STACKS_DIR / "Pulumi.local-disagg.yaml").read_text()
    (tmp_path / "Pulumi.broken.yaml").write_text(text.replace("transfer: nixl-ucx",
                                                              "transfer: none"))
    code, out = run("check", "--all", "--stacks-dir", str(tmp_path))
    assert code == 2
    assert "- dynamo-bench:serving.transfer: disaggregated needs a KV transfer backend" in out
    assert "local-agg: memory per worker (per GPU)" in out
    assert "1/2 stack(s) valid" in out


def test_unknown_stack_and_no_stack_exit_2() -> None:
    code, out = run("check", "no-such-stack")
    assert code == 2
    assert "error: no stack file Pulumi.no-such-stack.yaml" in " ".join(out.split())
    code, out = run("check")
    assert code == 2
    assert "name one or more stacks, or pass --all" in out
