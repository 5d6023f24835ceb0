"""Pre-flight checks of model-specific settings (pure): what a checkpoint and its runtime
demand (stacks.catalog.model_catalog.SERVING_RULES: images, speculative methods, kernels, parsers,
host memory, the disaggregated block size), RDMA wiring and the start-up budget.

Each check appends `Problem`s naming the stack field to change and how; nothing else.
"""

from __future__ import annotations

from stacks.catalog.instances import INSTANCE_TYPES, Fabric
from stacks.catalog.model_arch import AttentionKind, ModelArchitecture
from stacks.catalog.model_catalog import DRAFT_MODELS, SERVING_RULES, ServingRules
from stacks.config.loader import P, Problem
from stacks.config.recipe_config import Parsers
from stacks.config.schema import (
    ClusterConfig,
    ServingConfig,
    StackConfig,
    Topology,
    TransferBackend,
)
from stacks.preflight.checkpoint_checks import check_model_cache, check_precision
from stacks.sizing.estimate import estimated_load_seconds

# vLLM asserts at start-up without it when a disaggregated hybrid model moves its conv state
# ("3-read Mamba conv transfer requires DS conv state layout").
CONV_STATE_ENV = ("VLLM_SSM_CONV_STATE_LAYOUT", "DS")


def check_cluster_rdma(cluster: ClusterConfig, out: list[Problem]) -> None:
    """The RDMA plugin advertises devices on node groups that exist and have GPUs."""
    if cluster.rdma is None:
        return
    for i, name in enumerate(cluster.rdma.node_groups):
        group = cluster.group(name)
        if group is None or INSTANCE_TYPES.get(group.instance_type) is None \
                or INSTANCE_TYPES[group.instance_type].gpu is None:
            out.append(Problem(f"{P}cluster.rdma.nodeGroups[{i}]", f"'{name}' is not a GPU "
                               "node group of this cluster",
                               f"use one of {[g.name for g in cluster.node_groups]}"))


def _check_images(s: ServingConfig, model: str, rules: ServingRules, out: list[Problem]) -> None:
    if not rules.image_pinned:
        return
    for field, image in (("image", s.image), ("frontend.image", s.frontend.image)):
        if image is None or any(image == r or image.startswith(f"{r}@sha256:")
                                for r in rules.recipe_images):
            continue
        out.append(Problem(f"{P}serving.{field}", f"{model} runs only on its own runtime "
                           f"(its vLLM fork and kernels); '{image}' is another image",
                           f"use one of {', '.join(rules.recipe_images)}"))


def _check_speculative(s: ServingConfig, model: str, rules: ServingRules | None,
                       out: list[Problem]) -> None:
    spec = s.speculative
    if spec is None:
        return
    if rules is None or spec.method not in rules.speculative_methods:
        supported = [m.value for m in rules.speculative_methods] if rules else []
        out.append(Problem(f"{P}serving.speculative.method", f"{model} does not support "
                           f"{spec.method.value} speculative decoding (supported: "
                           f"{supported or 'none'})",
                           "use a supported method or remove serving.speculative"))
    if spec.draft_model and spec.draft_model not in DRAFT_MODELS:
        out.append(Problem(f"{P}serving.speculative.draftModel", f"draft model "
                           f"'{spec.draft_model}' is not in the catalogue, so its GPU memory "
                           "is unknown", "add it to DRAFT_MODELS in "
                           "stacks/catalog/model_catalog.py"))


def _check_kernels(s: ServingConfig, arch: ModelArchitecture, model: str,
                   rules: ServingRules | None, out: list[Problem]) -> None:
    backend, f = s.kernels.attention_backend, f"{P}serving.kernels"
    found = len(out)
    if backend is not None:
        why = rules.refused_attention_backends.get(backend) if rules else None
        mla = arch.attention_kind == AttentionKind.MLA
        if why:
            out.append(Problem(f"{f}.attentionBackend", f"{backend.value} is refused for "
                               f"{model}: {why}", "remove it (vLLM picks FlashInfer)"))
        elif backend.is_mla != mla:
            out.append(Problem(f"{f}.attentionBackend", f"{backend.value} is "
                               f"{'an MLA' if backend.is_mla else 'not an MLA'} backend and "
                               f"{model} {'uses' if mla else 'does not use'} MLA",
                               "pick a backend of the model's attention kind"))
        elif mla and backend.is_sparse != arch.sparse_mla:
            out.append(Problem(f"{f}.attentionBackend", f"{model} needs a "
                               f"{'sparse' if arch.sparse_mla else 'dense'} MLA backend, "
                               f"not {backend.value}", "use FLASHINFER_MLA_SPARSE or "
                               "FLASHMLA_SPARSE" if arch.sparse_mla else "use FLASHINFER_MLA"))
    if rules is not None and rules.required_attention_backends and len(out) == found and (
            backend not in rules.required_attention_backends):
        names = " or ".join(b.value for b in rules.required_attention_backends)
        why = rules.provenance.get("required_attention_backends", "")
        said = backend.value if backend else "unset (vLLM's choice)"
        out.append(Problem(f"{f}.attentionBackend", f"{model} needs its attention backend "
                           f"pinned to {names}, not {said}: {why}",
                           f"set kernels.attentionBackend: "
                           f"{rules.required_attention_backends[0].value}"))
    fp8_ok = rules.fp8_kv_attention_backends if rules else ()
    if fp8_ok and s.kv_cache_dtype == "fp8" and backend is not None and backend not in fp8_ok \
            and len(out) == found:
        names = ", ".join(b.value for b in fp8_ok)
        out.append(Problem(f"{f}.attentionBackend", f"{model} runs its FP8 KV cache on the "
                           f"{names} attention path, not {backend.value}",
                           f"remove it (vLLM picks {names}) or set kvCacheDtype: auto"))
    need = rules.required_moe_backend if rules else None
    if need is not None and s.kernels.moe_backend != need:
        assert rules is not None  # need is read from rules
        out.append(Problem(f"{f}.moeBackend", f"{model} requires the MoE backend "
                           f"{need.value}: {rules.provenance.get('required_moe_backend', '')}",
                           f"set kernels.moeBackend: {need.value}"))


def _check_hybrid_disagg(s: ServingConfig, arch: ModelArchitecture, model: str,
                         out: list[Problem]) -> None:
    """Disaggregated hybrid models move linear-attention conv state: the DS layout is needed."""
    if arch.attention_kind != AttentionKind.HYBRID_LINEAR or s.topology != Topology.DISAGGREGATED:
        return
    key, value = CONV_STATE_ENV
    for i, w in enumerate(s.workers):
        if {**s.env, **w.env}.get(key) != value:
            out.append(Problem(f"{P}serving.workers[{i}].env", f"{model} is a hybrid "
                               f"linear-attention model: a disaggregated {w.role.value} worker "
                               f"without {key}={value} fails at start-up (conv-state transfer)",
                               f"set serving.env {key}: {value}"))


def _check_parsers(s: ServingConfig, model: str, rules: ServingRules | None,
                   out: list[Problem]) -> None:
    need = rules.required_parsers if rules else {}
    wrong = {k: v for k, v in need.items() if getattr(s.parsers, k) != v}
    if wrong:
        fields = Parsers.model_fields
        said = ", ".join(f"{fields[k].alias}: {v}" for k, v in need.items())
        first = next(iter(wrong))
        out.append(Problem(f"{P}serving.parsers.{fields[first].alias}", f"{model} needs its own "
                           f"parsers ({said}); {fields[first].alias} is "
                           f"{getattr(s.parsers, first)}: "
                           f"{rules.provenance.get('required_parsers', '') if rules else ''}",
                           f"set serving.parsers {said}"))


def _check_model_host_memory(s: ServingConfig, model: str, rules: ServingRules | None,
                             out: list[Problem]) -> None:
    per_gpu = rules.host_memory_gib_per_gpu if rules else 0
    short = [(i, w, per_gpu * w.gpus_per_pod) for i, w in enumerate(s.workers)
             if (w.host_memory_gib or 0) < per_gpu * w.gpus_per_pod]
    out += [Problem(f"{P}serving.workers[{i}].hostMemoryGib", f"{model} workers need {per_gpu} "
                    f"GiB of host memory per GPU, {need} GiB for this {w.gpus_per_pod}-GPU pod; "
                    f"it asks {f'{w.host_memory_gib} GiB' if w.host_memory_gib else 'unset'}",
                    f"set hostMemoryGib: {need}") for i, w, need in short]


def _check_disagg_block_size(s: ServingConfig, model: str, rules: ServingRules | None,
                             out: list[Problem]) -> None:
    if rules and rules.disagg_pins_block_size and s.topology == Topology.DISAGGREGATED \
            and s.block_size is None:
        out.append(Problem(f"{P}serving.blockSize", f"{model}: prefill and decode must run one "
                           "block size (and one speculative setting); unset, each engine picks "
                           f"its own: {rules.provenance.get('disagg_pins_block_size', '')}",
                           "set serving.blockSize (the recipe's 64)"))


def _check_fabric(s: ServingConfig, cluster: ClusterConfig, out: list[Problem]) -> bool:
    """NIXL over UCX with an RDMA device needs InfiniBand HCAs on every worker's node type.

    On EFA (every AWS GPU type with a fast fabric) the RDMA shared device plugin finds no umad
    device and advertises 0 units, so the pods stay Pending; UCX's rc transports do not run on
    EFA either. True when refused (the other RDMA checks would only repeat it).
    """
    if s.rdma is None or s.transfer != TransferBackend.NIXL_UCX:
        return False
    types = {}
    for w in s.workers:
        group = cluster.group(w.node_group)
        inst = INSTANCE_TYPES.get(group.instance_type) if group else None
        if inst is not None and inst.fabric != Fabric.INFINIBAND:
            types[inst.name] = inst.fabric
    if not types:
        return False
    names = ", ".join(sorted(types))
    if Fabric.EFA in types.values():
        out.append(Problem(f"{P}serving.rdma", f"NIXL over UCX on InfiniBand was requested "
                           f"({s.rdma.resource_name.value}), but the catalogue fabric of "
                           f"{names} is EFA only: the RDMA device plugin advertises 0 units "
                           "on EFA (no umad device), so the workers stay Pending, and UCX's "
                           "InfiniBand transports do not run on EFA",
                           "set serving.transfer: nixl-libfabric and remove serving.rdma "
                           "(KV over EFA with vpc.amazonaws.com/efa)"))
    else:
        out.append(Problem(f"{P}serving.rdma", f"{names} has no RDMA fabric (catalogue "
                           f"fabric tcp), so {s.rdma.resource_name.value} never schedules",
                           "remove serving.rdma, or place the workers on InfiniBand nodes"))
    return True


def _check_rdma(stack: StackConfig, cluster: ClusterConfig, out: list[Problem]) -> None:
    s = stack.serving
    assert s is not None
    if _check_fabric(s, cluster, out):
        return
    req, plugin, f = s.rdma, cluster.rdma, f"{P}serving.rdma"
    if req is None:
        if (stack.target == "aws" and plugin is not None and s.transfer ==
                TransferBackend.NIXL_UCX and s.topology == Topology.DISAGGREGATED):
            out.append(Problem(f, "NIXL over UCX without an RDMA device: the HCAs are not "
                               "mounted and UCX silently moves KV over TCP",
                               f"set serving.rdma.resourceName: {plugin.resource_name.value}"))
        return
    if s.topology != Topology.DISAGGREGATED or s.transfer != TransferBackend.NIXL_UCX:
        out.append(Problem(f, "RDMA devices serve NIXL/UCX KV transfer between disaggregated "
                           "workers only", "remove serving.rdma, or use topology "
                           "disaggregated with transfer nixl-ucx"))
    if plugin is None:
        out.append(Problem(f"{f}.resourceName", f"the cluster has no RDMA device plugin, so "
                           f"{req.resource_name.value} never schedules",
                           "set cluster.rdma on the base stack"))
        return
    if req.resource_name != plugin.resource_name:
        out.append(Problem(f"{f}.resourceName", f"{req.resource_name.value} is not what the "
                           f"cluster's plugin advertises ({plugin.resource_name.value}); a "
                           "wrong name leaves UCX on TCP or unschedulable",
                           f"use {plugin.resource_name.value}"))
    for i, w in enumerate(s.workers):
        count = req.per_worker or w.gpus_per_pod
        if w.node_group not in plugin.node_groups:
            out.append(Problem(f"{P}serving.workers[{i}].nodeGroup", f"'{w.node_group}' has "
                               "no RDMA devices (cluster.rdma.nodeGroups)",
                               f"use one of {plugin.node_groups}"))
        elif count > plugin.per_node:
            out.append(Problem(f"{f}.perWorker", f"{count} per pod exceeds the "
                               f"{plugin.per_node} a node advertises", "lower perWorker"))


def _check_startup(stack: StackConfig, out: list[Problem]) -> None:
    s = stack.serving
    assert s is not None
    budget = s.startup_budget_minutes
    need = estimated_load_seconds(stack) / 60
    if budget is not None and need > budget:
        out.append(Problem(f"{P}serving.startupBudgetMinutes", f"{budget} min is shorter "
                           f"than the checkpoint read and engine start alone (~{need:.0f} "
                           "min): the startup probe would restart the worker while it loads",
                           f"raise it to >= {need:.0f} (at most 120)"))


def check_recipe(stack: StackConfig, base: StackConfig | None, cluster: ClusterConfig,
                 out: list[Problem]) -> None:
    """Model-specific pre-flight of a serving stack."""
    s, model = stack.serving, stack.model
    assert s is not None
    arch, rules = model.arch, SERVING_RULES.get(model.id)
    check_precision(stack, out)
    if rules is not None:
        _check_images(s, model.id, rules, out)
    _check_speculative(s, model.id, rules, out)
    _check_kernels(s, arch, model.id, rules, out)
    _check_hybrid_disagg(s, arch, model.id, out)
    _check_parsers(s, model.id, rules, out)
    _check_model_host_memory(s, model.id, rules, out)
    _check_disagg_block_size(s, model.id, rules, out)
    _check_rdma(stack, cluster, out)
    check_model_cache(stack, base, out)
    _check_startup(stack, out)
