"""The pieces pre-flight is built from: the EKS lifecycle catalogue and its control-plane rate,
vLLM's way of reading flags, the catalogues every model must be in, and the words for every
schema pattern."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from stacks.catalog.eks_versions import (
    EKS_VERSIONS,
    EXTENDED_USD_PER_HOUR,
    STANDARD_USD_PER_HOUR,
    SupportStatus,
    control_plane_usd_per_hour,
    offered,
    version_problem,
)
from stacks.catalog.model_catalog import CHECKPOINTS, DRAFT_MODELS, SERVING_RULES
from stacks.catalog.models import MODELS
from stacks.config.loader import PATTERN_RULES, STACKS_DIR, load_stack
from stacks.preflight.engine_flags import FRONTEND_RULES, WORKER_RULES, parse_flags
from stacks.preflight.run import effective_cluster
from stacks.sizing.estimate import hourly_cost


def _months_later(day: dt.date, months: int) -> dt.date:
    y, m = divmod(day.month - 1 + months, 12)
    return day.replace(year=day.year + y, month=m + 1)


@pytest.mark.parametrize("version", list(EKS_VERSIONS))
def test_each_version_follows_the_14_plus_12_month_lifecycle(version: str) -> None:
    """AWS: standard support for 14 months from the EKS release, then 12 months extended."""
    v = EKS_VERSIONS[version]
    assert v.end_of_standard == _months_later(v.eks_release, 14)
    assert v.end_of_extended == _months_later(v.end_of_standard, 12)


def test_status_and_rate_change_on_the_utc_day_support_ends() -> None:
    v = EKS_VERSIONS["1.33"]
    day_before = v.end_of_standard - dt.timedelta(days=1)
    assert v.status(day_before) == SupportStatus.STANDARD
    assert control_plane_usd_per_hour("1.33", day_before) == STANDARD_USD_PER_HOUR == 0.10
    assert v.status(v.end_of_standard) == SupportStatus.EXTENDED
    assert control_plane_usd_per_hour("1.33", v.end_of_standard) == EXTENDED_USD_PER_HOUR == 0.60
    assert v.status(v.end_of_extended) == SupportStatus.ENDED
    assert version_problem("1.33", v.end_of_extended - dt.timedelta(days=1)) is None
    assert "EKS no longer offers 1.33" in version_problem("1.33", v.end_of_extended)
    assert "1.33" not in offered(v.end_of_extended)
    assert "released on EKS only on 2026-01-27" in version_problem("1.35", dt.date(2026, 1, 1))


def test_a_variant_is_priced_on_its_bases_eks_version() -> None:
    variant, base = load_stack("agg-a100"), load_stack("base-a100")
    old = base.model_copy(update={"cluster": base.cluster.model_copy(
        update={"eks_version": "1.32"})})
    cluster = effective_cluster(variant, old)
    on = dt.date(2026, 5, 1)  # 1.32 in extended support, 1.33 (the variant's default) not yet
    cost = hourly_cost(variant, cluster.node_groups, cluster.compute_mode, 200, on=on,
                       eks_version=old.cluster.eks_version)
    assert cost.lines["EKS control plane (EKS 1.32 in extended support on 2026-05-01)"] == 0.60
    undated = hourly_cost(variant, cluster.node_groups, cluster.compute_mode, 200)
    assert undated.lines["EKS control plane"] == 0.10  # callers without a date (reports today)


def _flags(args: list[str], rules=WORKER_RULES) -> list[tuple[int, str, str | None, bool]]:
    return [(f.index, f.rule.names[0], f.value, f.negated) for f in parse_flags(args, rules)]


def test_flags_are_read_the_way_vllm_reads_them() -> None:
    args = ["--max_num_seqs", "8",                       # not owned: ignored
            "--tensor_parallel_size", "2",               # '_' -> '-'
            "--max-model-len=32k",                       # --opt=value
            "--speculative-config.method", "ngram",      # a key of a JSON option
            "--tensor-par", "4",                         # a unique prefix
            "--no-enable-prefix-caching",                # a --no- switch
            "-tp", "8", "-1"]                            # a short form; a number is a value
    assert _flags(args) == [
        (2, "--tensor-parallel-size", "2", False),
        (4, "--max-model-len", "32k", False),
        (5, "--speculative-config", "ngram", False),
        (7, "--tensor-parallel-size", "4", False),
        (9, "--enable-prefix-caching", None, True),
        (10, "--tensor-parallel-size", "8", False)]
    # an ambiguous prefix is not guessed (argparse refuses it too)
    assert _flags(["--data-parallel", "1"]) == []
    assert _flags(["--router-mode", "kv"], FRONTEND_RULES) == [(0, "--router-mode", "kv", False)]


def test_the_shipped_recipes_redundant_flags_are_accepted() -> None:
    """Recipes copy flags that state the typed value (--data-parallel-size 1, Motif's
    --quantization=modelopt_nvfp4): those agree and pass (`stacks check --all` is valid)."""
    motif = load_stack("agg-b200-motif3").serving.workers[0].extra_args
    assert {f.rule.names[0] for f in parse_flags(motif, WORKER_RULES)} == {
        "--quantization", "--data-parallel-size", "--data-parallel-size-local"}


def test_every_model_has_a_checkpoint_and_serving_rules() -> None:
    for model in MODELS:
        assert CHECKPOINTS[model].size_gb > 0, model
        assert CHECKPOINTS[model].precision in ("bf16", "fp8", "nvfp4"), model
        assert CHECKPOINTS[model].provenance.startswith(
            ("VERIFIED", "THIRD-PARTY", "ESTIMATED")), model
        assert model in SERVING_RULES, model
    assert CHECKPOINTS["Qwen/Qwen3-30B-A3B"].size_gb == pytest.approx(61.06, abs=0.01)
    assert CHECKPOINTS["Qwen/Qwen3-30B-A3B-FP8"].precision == "fp8"
    assert all(d.size_gb > 0 for d in DRAFT_MODELS.values())


def test_every_schema_pattern_is_said_in_words() -> None:
    sources = ("schema.py", "recipe_config.py", "workload_config.py")
    patterns = {m for name in sources for m in
                re.findall(r'pattern=r"([^"]+)"', (STACKS_DIR / "config" / name).read_text())}
    assert patterns and patterns <= set(PATTERN_RULES), patterns - set(PATTERN_RULES)


def test_graph_and_preflight_ask_for_the_same_pod_memory() -> None:
    """One truth: the graph's worker pods request what stacks.preflight.pods packs onto the
    nodes."""
    from components.graph import build_graph_deployment
    from stacks.preflight.pods import pod_memory_gib

    stack = load_stack("disagg-a100-kv-offload")
    base = load_stack("base-a100")
    graph = build_graph_deployment(stack, namespace="dynamo", efa=True,
                                   cluster=effective_cluster(stack, base))
    workers = [c for c in graph["spec"]["components"] if c["type"] != "frontend"]
    for comp, w in zip(workers, stack.serving.workers, strict=True):
        (main,) = comp["podTemplate"]["spec"]["containers"]
        assert main["resources"]["requests"]["memory"] == f"{pod_memory_gib(stack.serving, w)}Gi"



def test_a_multi_turn_workload_that_can_move_in_lockstep_gets_a_note() -> None:
    """Fixed pauses and a conversation count that is a multiple of the routed workers is the
    accidental-affinity trap: pre-flight names the field and the fix. The shipped stacks'
    random pauses and odd counts get no note."""
    from stacks.config.loader import parse_config
    from stacks.preflight.run import run_preflight

    base = load_stack("local-agg")
    assert not [n for n in run_preflight(base).notes if "lockstep" in n]
    raw = {"target": "local", "cluster": base.cluster.model_dump(by_alias=True),
           "model": base.model.model_dump(by_alias=True),
           "serving": base.serving.model_dump(by_alias=True, exclude_defaults=True),
           "workloads": {"multiTurn": {"quick": {"conversations": 4, "turnDelaySigma": 0}}}}
    lockstep = parse_config("lockstep", raw)
    notes = [n for n in run_preflight(lockstep).notes if "lockstep" in n]
    assert len(notes) == 1 and "workloads.multiTurn.quick.conversations" in notes[0]
    assert "2 routed workers" in notes[0] and "turnDelaySigma > 0" in notes[0]
