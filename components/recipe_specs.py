"""The model-specific parts of a graph, from the typed recipe settings (pure).

The flags are built in stacks.engine_argv.recipe (pre-flight parses them there too);
`components.graph` calls these for every worker and the frontend; the Pulumi side creates
`components.graph.recipe_configmaps(stack, namespace)` before the DynamoGraphDeployment (the
workers read their speculative config from it). Flags follow the recipe manifests of
ai-dynamo/dynamo (recipes/ax-k2, k-exaone-2.0, solar-open2-250b, motif-3) and were checked
against the installed ai-dynamo 1.6.1 where it has them (stacks.config.recipe_config: parser split).
"""

from __future__ import annotations

import json
from typing import Any

from stacks.config.recipe_config import (
    SPEC_CONFIG_KEY,
    SPEC_CONFIG_SYNTHETIC_KEY,
    SpeculativeDecoding,
)
from stacks.config.schema import Role, ScratchSpace, ServingConfig, StackConfig, WorkerGroup
from stacks.engine_argv.recipe import (  # noqa: F401 - re-exported: the flags live with the argv
    SPEC_ENV,
    frontend_recipe_args,
    kernel_args,
    speculative_args,
    worker_recipe_args,
)

# Labels the pods and the ConfigMap carry, so every run can be told real from synthetic.
ACCEPTANCE_LABEL = "dynamo-bench.io/speculative-acceptance"
SYNTHETIC_NOTE_ANNOTATION = "dynamo-bench.io/speculative-config-synthetic"
# The operator's system port (commonconsts.DynamoSystemPort); the recipes probe /live on it.
SYSTEM_PORT = 9090
STARTUP_PROBE_PERIOD_S = 60
# Every B200 recipe's startupProbe gives /live 20 s (a 700B worker capturing CUDA graphs can
# answer slower than 5 s, and one miss burns a 60 s period): e.g. ai-dynamo/dynamo
# recipes/ax-k2/vllm/agg-b200-chat/deploy.yaml@146bf3f1 `timeoutSeconds: 20` (dynamo.md F10).
STARTUP_PROBE_TIMEOUT_S = 20
# UCX over InfiniBand pins (locks) the KV buffers: the recipes add these and `ulimit -l`.
RDMA_CAPABILITIES = ["IPC_LOCK", "SYS_RESOURCE"]
# transformers copies a trust-remote-code model's .py files into HF_MODULES_CACHE (default
# $HF_HOME/modules) and imports them from there: transformers/utils/hub.py `HF_MODULES_CACHE =
# os.getenv("HF_MODULES_CACHE", os.path.join(constants.HF_HOME, "modules"))`, written by
# dynamic_module_utils.py `init_hf_modules` / `create_dynamic_module` / `get_cached_module_file`
# (os.makedirs, touch, shutil.copyfile; transformers 4.x through 5.24). The frontend mounts the
# model cache read-only (EROFS), and pods sharing it on EFS would race: the copy is guarded only
# by a process-local `_HF_REMOTE_CODE_LOCK = threading.Lock()`. Every pod of such a model gets
# its own writable module cache.
REMOTE_CODE_VOLUME = "hf-modules"
REMOTE_CODE_DIR = "/hf-modules"
# The recipes' pod-local /tmp (`runtime-tmp`: e.g. recipes/solar-open2-250b/vllm/
# agg-b200-chat/deploy.yaml@099afba4, workers `sizeLimit: 100Gi`, frontend `20Gi`;
# recipes/ax-k2/vllm/agg-b200-chat/deploy.yaml@146bf3f1 `emptyDir: {}`).
SCRATCH_VOLUME = "runtime-tmp"
SCRATCH_DIR = "/tmp"


def _json(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def spec_configmap_name(graph_name: str) -> str:
    return f"{graph_name}-speculative"


def _uses_configmap(serving: ServingConfig) -> SpeculativeDecoding | None:
    spec = serving.speculative
    return spec if spec is not None and spec.delivery == "configmap" else None


def speculative_configmaps(stack: StackConfig, namespace: str,
                           graph_name: str) -> list[dict]:
    """The ConfigMap of the speculative config (both keys), or [] when none is read."""
    assert stack.serving is not None
    spec = _uses_configmap(stack.serving)
    if spec is None:
        return []
    data = {SPEC_CONFIG_KEY: _json(spec.config())}
    annotations = {}
    if spec.synthetic_acceptance_length is not None:
        data[SPEC_CONFIG_SYNTHETIC_KEY] = _json(spec.config(synthetic=True))
        annotations[SYNTHETIC_NOTE_ANNOTATION] = (
            f"forces acceptance length {spec.synthetic_acceptance_length:g}: throughput-only "
            "profile, not real acceptance; runs that read it are labelled synthetic")
    return [{
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": spec_configmap_name(graph_name), "namespace": namespace,
                     "labels": {"app.kubernetes.io/part-of": "dynamo-bench",
                                "dynamo-bench.io/graph": graph_name,
                                ACCEPTANCE_LABEL: spec.acceptance},
                     **({"annotations": annotations} if annotations else {})},
        "data": data,
    }]


def speculative_env(serving: ServingConfig, graph_name: str) -> list[dict[str, Any]]:
    spec = _uses_configmap(serving)
    if spec is None:
        return []
    return [{"name": SPEC_ENV, "valueFrom": {"configMapKeyRef": {
        "name": spec_configmap_name(graph_name), "key": spec.config_key}}}]


def startup_probe(serving: ServingConfig) -> dict[str, Any] | None:
    """Give a worker its whole start-up budget before Kubernetes restarts it."""
    if serving.startup_budget_minutes is None:
        return None
    return {"httpGet": {"path": "/live", "port": SYSTEM_PORT},
            "periodSeconds": STARTUP_PROBE_PERIOD_S, "timeoutSeconds": STARTUP_PROBE_TIMEOUT_S,
            "failureThreshold": serving.startup_budget_minutes * 60 // STARTUP_PROBE_PERIOD_S}


def rdma_devices(serving: ServingConfig, w: WorkerGroup) -> dict[str, str]:
    """The RDMA resource one pod of `w` requests (and limits), or {} without RDMA."""
    req = serving.rdma
    if req is None or w.role == Role.WORKER:
        return {}
    count = req.per_worker or w.gpus_per_pod
    return {req.resource_name.value: str(count)}


def remote_code_env(stack: StackConfig) -> dict[str, str]:
    """HF_MODULES_CACHE on the pod-local volume, for a model that loads its own code."""
    return {"HF_MODULES_CACHE": REMOTE_CODE_DIR} if stack.model.trust_remote_code else {}


def remote_code_volumes(stack: StackConfig) -> tuple[list[dict[str, Any]],
                                                     list[dict[str, Any]]]:
    """(volumes, volumeMounts) of that pod-local module cache: an emptyDir, or none."""
    if not stack.model.trust_remote_code:
        return [], []
    return ([{"name": REMOTE_CODE_VOLUME, "emptyDir": {}}],
            [{"name": REMOTE_CODE_VOLUME, "mountPath": REMOTE_CODE_DIR}])


def scratch_volumes(scratch: ScratchSpace) -> tuple[list[dict[str, Any]],
                                                   list[dict[str, Any]]]:
    """(volumes, volumeMounts) of a pod's /tmp emptyDir, or none."""
    if not scratch.tmp_dir:
        return [], []
    size = ({"sizeLimit": f"{scratch.tmp_size_limit_gib}Gi"}
            if scratch.tmp_size_limit_gib is not None else {})
    return ([{"name": SCRATCH_VOLUME, "emptyDir": size}],
            [{"name": SCRATCH_VOLUME, "mountPath": SCRATCH_DIR}])


def ephemeral_storage_gib(scratch: ScratchSpace, kvbm_disk_gib: float = 0.0) -> float:
    """The pod's ephemeral-storage request in GiB: its scratch plus a KVBM disk tier (an emptyDir
    on the same root volume)."""
    return (scratch.ephemeral_storage_gib or 0) + kvbm_disk_gib


def checkpoints_to_download(stack: StackConfig) -> list[tuple[str, str | None]]:
    """(repo, revision) of every checkpoint the workers load offline: the model and an external
    draft model. The model download Job must fetch them all (workers run HF_HUB_OFFLINE=1)."""
    out = [(stack.model.id, stack.model.revision)]
    spec = stack.serving.speculative if stack.serving else None
    if spec is not None and spec.draft_model:
        out.append((spec.draft_model, spec.draft_revision))
    return out
