"""What makes two workers the same, from the typed config (pure).

Two uses, one definition:
- **Kept workers.** A campaign runs two variants back to back on the same running workers when
  everything that reaches a worker pod is the same: model, image, layout, KV settings, env,
  node groups. They may differ in the frontend only (router, frontend replicas and flags):
  `workers_fingerprint`. The campaign then also compares the rendered worker specs byte for byte
  before it keeps anything (workloads/campaign/identity.py); the tests hold this fingerprint
  and the rendered specs to the same answer for every shipped pair.
- **Compile caches.** Each worker group keeps vLLM's compile and autotune caches on the shared
  model volume, in a directory keyed by model, image and layout (`compile_cache_dir`), so a
  second load of the same configuration finds them. What lives there (vLLM 0.31.0, the version
  ai-dynamo 1.6.1 pins, read in its sources): `VLLM_CACHE_ROOT` holds the torch.compile cache
  (`torch_compile_cache/<hash>/`, with the Inductor and Triton caches inside it unless
  TRITON_CACHE_DIR is set: vllm/compilation/backends.py, compiler_interface.py
  `initialize_cache`) and the FlashInfer autotune configs (`flashinfer_autotune_cache/`:
  vllm/model_executor/warmup/flashinfer_autotune_cache.py); `VLLM_CACHE_ROOT` itself is left out
  of vLLM's compile hash (vllm/envs.py `ignored_factors`), so moving it invalidates nothing.
  FlashInfer's JIT-built kernels go under `$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer`
  (flashinfer-python 0.7.0.post1, the version vLLM 0.31.0 pins: flashinfer/jit/env.py). vLLM
  writes compile artifacts atomically (compiler_interface.py
  `_patch_standalone_compile_atomic_save`, decorators.py), so replicas may share a directory;
  vLLM keys its own entries by its config hash inside it, so a wrong hit cannot load.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from stacks.config.schema import ClusterConfig, Role, RouterMode, ServingConfig, StackConfig
from stacks.conventions.k8s_names import MODEL_CACHE_MOUNT

COMPILE_CACHE_ROOT = f"{MODEL_CACHE_MOUNT}/compile-cache"

# Serving fields that reach only the frontend (or only name the graph): two variants may differ
# in these and still run the same workers. Everything else of `serving` reaches a worker.
FRONTEND_ONLY = ("router", "frontend", "deployment_name", "kv_events")


def publishes_kv_events(serving: ServingConfig, role: Role) -> bool:
    """Workers whose cache the KV router scores (aggregated and prefill workers) publish KV
    events with the KV router, or when the stack asks for them anyway (serving.kvEvents);
    components/kv_config.py renders the flag from this rule."""
    wanted = serving.kv_events if serving.kv_events is not None else \
        serving.router == RouterMode.KV
    return wanted and role in (Role.WORKER, Role.PREFILL)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _worker_fields(stack: StackConfig, cluster: ClusterConfig) -> dict[str, Any]:
    s = stack.serving
    assert s is not None
    serving = s.model_dump(mode="json", exclude=set(FRONTEND_ONLY))
    # The router reaches the workers only through their KV events (and, with the KV router,
    # the block size the frontend must share, which is already a worker field).
    if stack.target == "aws":   # the local mockers publish KV events whatever the router
        serving["kv_events_by_role"] = {r.value: publishes_kv_events(s, r) for r in Role}
    groups = {w.node_group: cluster.group(w.node_group) for w in s.workers}
    return {
        "target": stack.target,
        "model": stack.model.model_dump(mode="json"),
        "serving": serving,
        "node_groups": {n: g.model_dump(mode="json") if g else None for n, g in groups.items()},
    }


def workers_fingerprint(stack: StackConfig, cluster: ClusterConfig) -> str:
    """SHA-256 of everything that reaches the stack's worker pods (`cluster`: the cluster they
    run on, the base's groups for a variant)."""
    return _digest(_worker_fields(stack, cluster))


def same_workers(a: StackConfig, b: StackConfig, cluster_a: ClusterConfig,
                 cluster_b: ClusterConfig) -> bool:
    """Can `b` run on the workers `a` left running (the same worker fingerprint; on AWS both
    attached to one base and neither with node groups of its own; a local stack's node groups
    only name the hardware its mockers imitate)?"""
    if a.serving is None or b.serving is None or a.target != b.target:
        return False
    if a.target == "aws" and (a.cluster.attach_to != b.cluster.attach_to
                              or a.cluster.node_groups or b.cluster.node_groups):
        return False
    return workers_fingerprint(a, cluster_a) == workers_fingerprint(b, cluster_b)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "--", text).strip("-")[:80]


def compile_cache_key(stack: StackConfig, cluster: ClusterConfig, index: int) -> str:
    """`<model>/<image tag>/<role>-tp<TP>-<12 hex of the whole layout>` for worker group
    `index`: the same key means the same model, image and layout."""
    s = stack.serving
    assert s is not None
    w = s.workers[index]
    fields = _worker_fields(stack, cluster)
    fields["serving"]["workers"] = [fields["serving"]["workers"][index]]
    fields["serving"].pop("mocker", None)
    group = cluster.group(w.node_group)
    fields["instance_type"] = group.instance_type if group else None
    model = stack.model.id + (f"@{stack.model.revision}" if stack.model.revision else "")
    image = s.image.rsplit("/", 1)[-1]
    return (f"{_slug(model)}/{_slug(image)}/{w.role.value}-tp{w.tensor_parallel_size}-"
            f"{_digest(fields)[:12]}")


def compile_cache_dir(stack: StackConfig, cluster: ClusterConfig, index: int) -> str:
    return f"{COMPILE_CACHE_ROOT}/{compile_cache_key(stack, cluster, index)}"


def compile_cache_env(directory: str) -> dict[str, str]:
    """The env that puts vLLM's and FlashInfer's caches in `directory`."""
    return {"VLLM_CACHE_ROOT": f"{directory}/vllm",
            "FLASHINFER_WORKSPACE_BASE": f"{directory}/flashinfer"}
