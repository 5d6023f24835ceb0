"""Pre-flight refusals of the B200 recipe settings: each case is a shipped recipe stack with one
change (its unchanged stack passes, tests/test_recipes_stacks.py), refused naming the field."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from recipe_stacks import (
    BASE,
    DELETE,
    IB_RECIPE_EDITS,
    F,
    changed,
    ib_base,
    ib_recipe,
    problem_fields,
    problems,
    use_infiniband,
)
from typer.testing import CliRunner

from stacks.__main__ import app
from stacks.catalog.instances import INSTANCE_TYPES, Fabric, InstanceType
from stacks.config.loader import STACKS_DIR, StackError, load_stack


@dataclass(frozen=True)
class Case:
    id: str
    stack: str
    edits: dict[str, Any]
    field: str
    says: str
    base_edits: dict[str, Any] = field(default_factory=dict)
    # On the InfiniBand twin of base-b200, the stack with its recipe's UCX/RDMA settings.
    infiniband: bool = False


SWAPPED = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0"
CASES = [
    Case("k-exaone-tp2", "agg-b200-kexaone", {"serving.workers.0.tensorParallelSize": 2},
         "serving.workers[0].tensorParallelSize", "does not fit"),
    Case("solar-disagg-without-conv-layout", "disagg-b200-solar2",
         {"serving.env.VLLM_SSM_CONV_STATE_LAYOUT": DELETE}, "serving.workers[0].env",
         "VLLM_SSM_CONV_STATE_LAYOUT=DS"),
    Case("solar-conv-layout-wrong-value", "disagg-b200-solar2",
         {"serving.env.VLLM_SSM_CONV_STATE_LAYOUT": "SD"}, "serving.workers[1].env",
         "VLLM_SSM_CONV_STATE_LAYOUT=DS"),
    Case("solar-flash-attention", "agg-b200-solar2",
         {"serving.kernels.attentionBackend": "FLASH_ATTN"}, "serving.kernels.attentionBackend",
         "fails at start-up"),
    Case("motif-swapped-image", "agg-b200-motif3", {"serving.image": SWAPPED},
         "serving.image", "its own runtime"),
    Case("motif-swapped-frontend-image", "disagg-b200-motif3",
         {"serving.frontend.image": SWAPPED}, "serving.frontend.image", "its own runtime"),
    Case("k-exaone-without-moe-pin", "agg-b200-kexaone", {"serving.kernels": DELETE},
         "serving.kernels.moeBackend", "flashinfer_cutlass"),
    Case("k-exaone-auto-moe", "baseline-b200-kexaone",
         {"serving.kernels.moeBackend": "flashinfer_trtllm"}, "serving.kernels.moeBackend",
         "silently"),
    Case("solar-speculative-decoding", "agg-b200-solar2",
         {"serving.speculative": {"method": "mtp", "numTokens": 2}},
         "serving.speculative.method", "does not support"),
    Case("ax-k2-mtp-instead-of-eagle3", "agg-b200-axk2",
         {"serving.speculative": {"method": "mtp", "numTokens": 2}},
         "serving.speculative.method", "does not support"),
    Case("ax-k2-dense-mla-backend", "agg-b200-axk2",
         {"serving.kernels.attentionBackend": "FLASHINFER_MLA"},
         "serving.kernels.attentionBackend", "sparse MLA"),
    Case("ax-k2-gqa-backend", "agg-b200-axk2",
         {"serving.kernels.attentionBackend": "FLASHINFER"},
         "serving.kernels.attentionBackend", "not an MLA"),
    Case("k-exaone-mla-backend", "agg-b200-kexaone",
         {"serving.kernels.attentionBackend": "FLASHMLA"},
         "serving.kernels.attentionBackend", "does not use MLA"),
    Case("unknown-draft-model", "agg-b200-axk2",
         {"serving.speculative.draftModel": "someone/Other-EAGLE3"},
         "serving.speculative.draftModel", "not in the catalogue"),
    Case("precision-not-the-checkpoint", "agg-b200-axk2", {"model.precision": "bf16"},
         "model.precision", "nvfp4 checkpoint"),
    Case("ucx-over-infiniband-on-efa", "disagg-b200-axk2", IB_RECIPE_EDITS["disagg-b200-axk2"],
         "serving.rdma", "nixl-libfabric"),
    Case("rdma-without-ucx-on-efa", "disagg-b200-motif3",
         {"serving.rdma": {"resourceName": "rdma/shared_ib"}}, "serving.rdma", "nixl-ucx"),
    Case("rdma-name-not-the-plugin", "disagg-b200-axk2",
         {"serving.rdma.resourceName": "rdma/ib"}, "serving.rdma.resourceName",
         "rdma/shared_ib", infiniband=True),
    Case("rdma-on-aggregated", "agg-b200-axk2",
         {"serving.rdma": {"resourceName": "rdma/shared_ib"}}, "serving.rdma",
         "disaggregated"),
    Case("ucx-without-rdma-on-an-ib-cluster", "disagg-b200-kexaone", {"serving.rdma": DELETE},
         "serving.rdma", "TCP", infiniband=True),
    Case("rdma-base-without-plugin", "disagg-b200-solar2", {}, "serving.rdma.resourceName",
         "no RDMA device plugin", base_edits={"cluster.rdma": DELETE}, infiniband=True),
    Case("rdma-more-than-a-node-advertises", "disagg-b200-kexaone", {},
         "serving.rdma.perWorker", "exceeds", base_edits={"cluster.rdma.perNode": 2},
         infiniband=True),
    Case("start-up-budget-shorter-than-the-read", "agg-b200-kexaone",
         {"serving.startupBudgetMinutes": 10}, "serving.startupBudgetMinutes",
         "checkpoint read"),
    Case("model-cache-too-small", "agg-b200-kexaone", {}, "storage.modelCacheGib", "652",
         base_edits={"storage.modelCacheGib": 600}),
    Case("host-memory-over-the-node", "agg-b200-solar2",
         {"serving.workers.0.hostMemoryGib": 1900}, "serving.workers[0].hostMemoryGib",
         "ask more memory than one p6-b200.48xlarge allows (90% of 2048 GiB"),
    Case("frontend-image-of-another-version", "agg-b200-kexaone",
         {"serving.frontend.image": "nvcr.io/nvidia/ai-dynamo/dynamo-frontend:1.6.1"},
         "serving.frontend.image", "dynamoVersion 1.4.1"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_refused_naming_the_field(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    if case.infiniband:
        use_infiniband(monkeypatch)
        base = ib_base(case.base_edits)
        stack = ib_recipe(case.stack, case.edits)
    else:
        base = changed(BASE, case.base_edits) if case.base_edits else None
        stack = changed(case.stack, case.edits)
    found = problems(stack, base)
    hits = [p for p in found if p.field == F + case.field]
    assert hits, [str(p) for p in found]
    assert any(case.says in p.message or case.says in p.fix for p in hits), \
        [str(p) for p in hits]
    assert all(p.fix for p in found)


def test_efa_refusal_names_the_node_type_and_replaces_every_other_rdma_finding() -> None:
    stack = changed("disagg-b200-kexaone", IB_RECIPE_EDITS["disagg-b200-kexaone"])
    found = [p for p in problems(stack) if "rdma" in p.field]
    # base-b200 declares no plugin; the fabric, not the missing plugin, is what to fix
    assert [p.field for p in found] == [F + "serving.rdma"]
    assert "p6-b200.48xlarge" in found[0].message and "EFA" in found[0].message
    assert "remove serving.rdma" in found[0].fix


@pytest.mark.parametrize("name", sorted(IB_RECIPE_EDITS))
def test_recipe_ucx_settings_pass_on_an_infiniband_cluster(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    use_infiniband(monkeypatch)
    assert problems(ib_recipe(name), ib_base()) == []
    # ... and the shipped stack (LIBFABRIC) is refused there: no EFA on that node type
    assert "serving.transfer" in problem_fields(load_stack(name), ib_base())


def test_rdma_plugin_on_a_cpu_group_is_refused_on_the_base(
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_infiniband(monkeypatch)
    base = ib_base({"cluster.rdma.nodeGroups": ["cpu"]})
    assert "cluster.rdma.nodeGroups[0]" in problem_fields(base)
    assert "serving.workers[0].nodeGroup" in problem_fields(ib_recipe("disagg-b200-axk2"), base)


LOAD_TIME = [
    ("eagle3-without-draft", {"serving.speculative.draftModel": DELETE,
                              "serving.speculative.draftRevision": DELETE},
     "serving.speculative.draftModel"),
    ("synthetic-without-length", {"serving.speculative.acceptance": "synthetic",
                                  "serving.speculative.syntheticAcceptanceLength": DELETE},
     "serving.speculative.syntheticAcceptanceLength"),
    ("synthetic-length-over-tokens", {"serving.speculative.syntheticAcceptanceLength": 4.5},
     "serving.speculative.syntheticAcceptanceLength"),
    ("flags-cannot-carry-a-draft", {"serving.speculative.delivery": "flags"},
     "serving.speculative.delivery"),
    ("unknown-dynamo-parser", {"serving.parsers.toolCall": "solar_open2"},
     "serving.parsers.toolCall"),
    ("auto-tool-choice-needs-vllm", {"serving.parsers.autoToolChoice": True},
     "serving.parsers.autoToolChoice"),
    ("memory-limit-below-request", {"serving.workers.0.hostMemoryLimitGib": 100},
     "serving.workers[0].hostMemoryLimitGib"),
    ("start-up-budget-over-120", {"serving.startupBudgetMinutes": 150},
     "serving.startupBudgetMinutes"),
    ("unknown-rdma-name", {"serving.rdma": {"resourceName": "rdma/hca"}},
     "serving.rdma.resourceName"),
    ("unknown-attention-backend", {"serving.kernels.attentionBackend": "FLASH_MLA"},
     "serving.kernels.attentionBackend"),
]


@pytest.mark.parametrize(("edits", "where"), [c[1:] for c in LOAD_TIME],
                         ids=[c[0] for c in LOAD_TIME])
def test_refused_when_loaded(edits: dict[str, Any], where: str) -> None:
    with pytest.raises(StackError) as exc:
        changed("agg-b200-axk2", edits)
    assert F + where in [p.field for p in exc.value.problems]


def test_mtp_with_a_draft_model_is_refused_when_loaded() -> None:
    with pytest.raises(StackError) as exc:
        changed("agg-b200-motif3", {"serving.speculative.draftModel": "skt/A.X-K2-EAGLE3"})
    assert [p.field for p in exc.value.problems] == [F + "serving.speculative.draftModel"]


def test_cli_refuses_k_exaone_at_tp2_and_passes_tp4(tmp_path: Path) -> None:
    for name in (BASE, "agg-b200-kexaone"):
        shutil.copy(STACKS_DIR / f"Pulumi.{name}.yaml", tmp_path)
    doc = yaml.safe_load((STACKS_DIR / "Pulumi.agg-b200-kexaone.yaml").read_text())
    doc["config"]["dynamo-bench:serving"]["workers"][0]["tensorParallelSize"] = 2
    (tmp_path / "Pulumi.kexaone-tp2.yaml").write_text(yaml.safe_dump(doc))
    runner = CliRunner()
    bad = runner.invoke(app, ["check", "kexaone-tp2", "--stacks-dir", str(tmp_path)])
    assert bad.exit_code == 2
    assert f"{F}serving.workers[0].tensorParallelSize: does not fit" in bad.output
    good = runner.invoke(app, ["check", "agg-b200-kexaone", "--stacks-dir", str(tmp_path)])
    assert good.exit_code == 0, good.output


def test_catalogue_fabric_is_efa_exactly_where_efa_interfaces_are() -> None:
    for inst in INSTANCE_TYPES.values():
        assert (inst.fabric == Fabric.EFA) == (inst.efa_interfaces > 0), inst.name
    assert INSTANCE_TYPES["p6-b200.48xlarge"].fabric == Fabric.EFA
    b200 = INSTANCE_TYPES["p6-b200.48xlarge"].model_dump()
    with pytest.raises(ValueError, match="EFA interfaces"):
        InstanceType(**{**b200, "fabric": "efa", "efa_interfaces": 0})
    with pytest.raises(ValueError, match="EFA interfaces"):
        InstanceType(**{**b200, "fabric": "infiniband"})
    assert InstanceType(**{**b200, "fabric": "infiniband", "efa_interfaces": 0}).fabric == \
        Fabric.INFINIBAND
