"""The `DynamoGraphDeployment` (nvidia.com/v1beta1) of a stack, built from its serving config.

Pure: `build_graph_deployment(stack, namespace=..., efa=...)` returns the custom resource as a
dict; the Dynamo component applies it. Field names follow the vendored CRD
(../shared/reference/crds/nvidia.com_dynamographdeployments.yaml, v1beta1): spec.backendFramework,
spec.env, spec.components[] {name, type, replicas, podTemplate (container `main`),
multinode.nodeCount, sharedMemorySize, runtimeVersionOverride}. vLLM and Dynamo flags were
checked against the installed ai-dynamo 1.6.1 (`dynamo.frontend`, `dynamo.vllm`); the command
lines come from stacks.engine_argv, which pre-flight runs through the engine's parsers. The
model-specific parts (speculative ConfigMap, kernel pins, parsers, RDMA, start-up probe) come
from components.recipe_specs; `recipe_configmaps` lists the objects the graph needs beside it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from components import efa, efa_userspace, kv_config, recipe_specs
from components.conventions import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    HF_TOKEN_KEY,
    HF_TOKEN_SECRET,
    MODEL_CACHE_MOUNT,
    MODEL_CACHE_PVC,
    NODE_GROUP_LABEL,
)
from components.placement import workers_zone, zone_affinity
from stacks.catalog.instances import INSTANCE_TYPES, InstanceType
from stacks.config.loader import P, Problem, StackError
from stacks.config.schema import (
    ClusterConfig,
    NodeGroup,
    ServingConfig,
    StackConfig,
    TransferBackend,
)
from stacks.conventions import frontend_trace
from stacks.conventions.k8s_names import (  # noqa: F401 - FRONTEND_*, GRAPH_LABEL, names re-exported
    DGD_API_VERSION,
    DGD_KIND,
    FRONTEND_COMPONENT,
    FRONTEND_PORT,
    GRAPH_LABEL,
    HF_HOME,
    component_names,
    deployment_name,
)
from stacks.conventions.pod_env import OFFLINE_ENV, WORKER_ENV, graph_env
from stacks.conventions.worker_identity import compile_cache_dir, compile_cache_env
from stacks.engine_argv.argv import frontend_argv, tokens, worker_argv
from stacks.preflight.efa_image import check_kv_path
from stacks.preflight.host_staging import host_staging_gib
from stacks.preflight.pods import (  # noqa: F401 - WORKER_BASE_MEMORY_GIB re-exported
    WORKER_BASE_MEMORY_GIB,
    WORKER_SHM_GIB,
    pod_cpus,
    pod_memory_gib,
)
from stacks.preflight.worker_checks import draft_weights_bytes

API_VERSION = DGD_API_VERSION
KIND = DGD_KIND

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def runtime_version_override(serving: ServingConfig, image: str | None = None) -> str | None:
    """The Dynamo version for `runtimeVersionOverride` when the image tag (of `image`, default
    serving.image) does not state it (a digest, or a tag that is not exactly the pinned
    version, such as the EFA build's `1.6.1-efa`); None otherwise."""
    image = image or serving.image
    core = "{}.{}.{}".format(*kv_config.version_tuple(serving.dynamo_version))
    tag = "" if "@sha256:" in image else image.rsplit("/", 1)[-1].partition(":")[2]
    return None if tag == core else core


def _env(values: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in values.items()]


def _hf_token_env() -> dict[str, Any]:
    return {"name": HF_TOKEN_KEY,
            "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": HF_TOKEN_KEY}}}


def _gpu_tolerations() -> list[dict[str, str]]:
    return [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": GPU_TAINT_EFFECT}]


def recipe_configmaps(stack: StackConfig, namespace: str,
                      name: str | None = None) -> list[dict[str, Any]]:
    """ConfigMaps the graph's workers read (the speculative config); create them first.
    `name`: the graph's name (default deployment_name(stack))."""
    return recipe_specs.speculative_configmaps(stack, namespace, name or deployment_name(stack))


def _model_cache_volume() -> dict[str, Any]:
    return {"name": MODEL_CACHE_PVC, "persistentVolumeClaim": {"claimName": MODEL_CACHE_PVC}}


def _frontend(stack: StackConfig, labels: dict[str, str]) -> dict[str, Any]:
    serving = stack.serving
    assert serving is not None
    # The frontend reads the tokenizer, chat template and context length of the model card from
    # the model cache, as Dynamo's own recipes mount it ("Frontend needs read access to the
    # model cache to register the model card", ai-dynamo/dynamo recipes/qwen3-32b/vllm/
    # cloud-providers/disagg-1p1d-aws-efa/deploy.yaml); offline, like the workers.
    modules_volumes, modules_mounts = recipe_specs.remote_code_volumes(stack)
    scratch = serving.frontend.scratch
    scratch_volumes, scratch_mounts = recipe_specs.scratch_volumes(scratch)
    requests = {"cpu": str(serving.frontend.cpu), "memory": f"{serving.frontend.memory_gib}Gi"}
    if scratch.ephemeral_storage_gib:
        requests["ephemeral-storage"] = f"{scratch.ephemeral_storage_gib}Gi"
    pod: dict[str, Any] = {
        "containers": [{
            "name": "main",
            "image": serving.frontend.image or serving.image,
            "command": ["python3", "-m", "dynamo.frontend"],
            "args": tokens(frontend_argv(stack)),
            # plus its record of every request: the runner reads it after each step (routing
            # evidence: which worker, how many cached tokens; workloads.request_trace)
            "env": _env({"HF_HOME": HF_HOME, **OFFLINE_ENV,
                         **recipe_specs.remote_code_env(stack),
                         **frontend_trace.request_trace_env(frontend_trace.REQUEST_TRACE_POD_PATH)}),
            "resources": {"requests": requests},
            "volumeMounts": [{"name": MODEL_CACHE_PVC, "mountPath": MODEL_CACHE_MOUNT,
                              "readOnly": True}, *modules_mounts, *scratch_mounts],
        }],
        "volumes": [_model_cache_volume(), *modules_volumes, *scratch_volumes],
    }
    if serving.frontend.node_group:
        pod["nodeSelector"] = {NODE_GROUP_LABEL: serving.frontend.node_group}
        # a GPU group's nodes are tainted; the Solar recipe's frontends tolerate it and share
        # the GPU nodes (recipes/solar-open2-250b/vllm/*/deploy.yaml@099afba4), and on a CPU
        # group the toleration changes nothing
        pod["tolerations"] = _gpu_tolerations()
    return _component(serving, FRONTEND_COMPONENT, "frontend", serving.frontend.replicas,
                      {"metadata": {"labels": labels}, "spec": pod})


def _component(serving: ServingConfig, name: str, kind: str, replicas: int,
               pod_template: dict[str, Any]) -> dict[str, Any]:
    comp: dict[str, Any] = {"name": name, "type": kind, "replicas": replicas,
                            "podTemplate": pod_template}
    override = runtime_version_override(
        serving, pod_template["spec"]["containers"][0]["image"])
    if override:
        comp["runtimeVersionOverride"] = override
    return comp


class _Worker:
    """Everything the pod of one worker group needs, derived once."""

    def __init__(self, stack: StackConfig, index: int, cluster: ClusterConfig, efa: bool,
                 graph: str):
        serving = stack.serving
        assert serving is not None
        self.stack, self.serving, self.i = stack, serving, index
        self.cluster, self.graph = cluster, graph
        self.w = serving.workers[index]
        self.field = f"{P}serving.workers[{index}]"
        group = cluster.group(self.w.node_group)
        if group is None:
            raise StackError(stack.name, [Problem(
                f"{self.field}.nodeGroup", f"node group '{self.w.node_group}' is not in the "
                f"cluster given ({[g.name for g in cluster.node_groups]})",
                "pass the effective cluster (base + variant groups) as cluster=")])
        self.group = group
        self.instance: InstanceType | None = INSTANCE_TYPES.get(group.instance_type)
        self.rdma = kv_config.uses_rdma(serving, efa)
        if self.w.tensor_parallel_size % self.w.node_count:
            raise StackError(stack.name, [Problem(
                f"{self.field}.nodeCount", f"TP {self.w.tensor_parallel_size} does not split "
                f"evenly over {self.w.node_count} nodes", "use a nodeCount that divides TP")])
        # A multinode worker runs one pod per node; each requests its share of the TP group.
        self.gpus_per_pod = self.w.gpus_per_pod
        if self.rdma and self.w.node_count > 1:
            raise StackError(stack.name, [Problem(
                f"{self.field}.nodeCount", "a multinode worker's command is rewritten by the "
                "Dynamo operator, which would drop the GPU pinning an EFA (privileged) worker "
                "needs", "use nodeCount 1 with nixl-libfabric")])

    def args(self) -> list[str]:
        return tokens(worker_argv(self.stack, self.i, rdma=self.rdma))

    def env(self, fabric: dict[str, str]) -> list[dict[str, Any]]:
        values = {
            "HF_HOME": HF_HOME,
            # The model download Job fills the cache; workers must never download themselves
            # (HF_HUB_OFFLINE). Deterministic block hashes across workers, so KV events match
            # between them (PYTHONHASHSEED). Pre-flight parses with them too (pod_env).
            **WORKER_ENV,
            # vLLM's compile/autotune and FlashInfer's JIT caches on the model volume, keyed by
            # model, image and layout: a second load of this configuration finds them.
            **compile_cache_env(compile_cache_dir(self.stack, self.cluster, self.i)),
            **kv_config.kvbm_env(self.serving, self.w.role),
            **recipe_specs.remote_code_env(self.stack),
        }
        if self.rdma:
            values.update({**efa.worker_env(self.gpus_per_pod), **fabric})
        values.update(self.w.env)  # the stack's own env wins
        pod_ip = ([] if kv_config.SIDE_CHANNEL_HOST_ENV in self.w.env
                  else kv_config.side_channel_env(self.serving, self.w.role))
        return [*_env(values), *pod_ip, _hf_token_env(),
                *recipe_specs.speculative_env(self.serving, self.graph)]

    def memory_gib(self) -> int:
        # the same request pre-flight packs onto the nodes (stacks.preflight.pods), NIXL's
        # host staging buffers included (stacks.preflight.host_staging)
        staging = 0.0 if self.instance is None else host_staging_gib(
            self.stack, self.w, self.instance, rdma=self.rdma,
            draft_weights_bytes=draft_weights_bytes(self.serving))
        return pod_memory_gib(self.serving, self.w, staging)

    def kvbm_disk(self) -> str | None:
        """The size of KVBM's disk tier (an emptyDir), when this worker has one."""
        if "DYN_KVBM_DISK_CACHE_DIR" not in kv_config.kvbm_env(self.serving, self.w.role):
            return None
        # Gi, not G: the KVBM cache may count its GB in either unit, and an emptyDir that
        # its cache outgrows gets the pod evicted; Gi is the larger, safe for both readings
        return f"{math.ceil(self.serving.kv_offload.disk_gb)}Gi"

    def efa_devices(self) -> int:
        """EFA interfaces per pod: the node's interfaces shared by the pods on it."""
        inst = self.instance
        if inst is None or inst.efa_interfaces == 0:
            raise StackError(self.stack.name, [Problem(
                f"{P}serving.transfer", f"nixl-libfabric needs EFA, and node group "
                f"'{self.group.name}' ({self.group.instance_type}) has none",
                "use nixl-ucx or an EFA instance type")])
        return max(1, inst.efa_interfaces * self.gpus_per_pod // inst.gpus_per_node)

    def resources(self) -> dict[str, Any]:
        gpus = str(self.gpus_per_pod)
        requests: dict[str, str] = {"cpu": str(pod_cpus(self.w)),
                                    "memory": f"{self.memory_gib()}Gi", GPU_RESOURCE: gpus}
        limits: dict[str, str] = {GPU_RESOURCE: gpus}
        if self.w.host_memory_limit_gib is not None:
            limits["memory"] = f"{self.w.host_memory_limit_gib}Gi"
        if self.rdma:
            requests[EFA_RESOURCE] = limits[EFA_RESOURCE] = str(self.efa_devices())
        for name, count in recipe_specs.rdma_devices(self.serving, self.w).items():
            requests[name] = limits[name] = count
        disk = self.kvbm_disk()
        if self.w.scratch.ephemeral_storage_gib:
            # the recipe's scratch request plus any KVBM disk tier, both on the root volume
            gib = recipe_specs.ephemeral_storage_gib(
                self.w.scratch, self.serving.kv_offload.disk_gb if disk else 0.0)
            requests["ephemeral-storage"] = f"{math.ceil(gib)}Gi"
        elif disk:
            requests["ephemeral-storage"] = disk
        return {"requests": requests, "limits": limits}

    def check_fits(self) -> None:
        """Pods packed on one node must fit its memory (the CPU KV cache is the big part)."""
        inst = self.instance
        if inst is None or not inst.gpus_per_node:
            return
        per_node = self.w.pods_per_node(inst.gpus_per_node)
        if per_node * self.memory_gib() > 0.9 * inst.memory_gib:
            own = self.w.host_memory_gib is not None
            raise StackError(self.stack.name, [Problem(
                f"{self.field}.hostMemoryGib" if own else f"{P}serving.kvOffload.cpuGb",
                f"{per_node} worker pod(s) of {self.memory_gib()} GiB each do not fit one "
                f"{inst.name} ({inst.memory_gib} GiB)",
                "lower hostMemoryGib" if own else
                "lower cpuGb or TP-pack fewer workers per node")])

    def pod_template(self, labels: dict[str, str]) -> dict[str, Any]:
        image = efa.efa_runtime_image(self.serving.image) if self.rdma else self.serving.image
        # libfabric + the efa provider for NIXL: the image's own or a donor's (checked in-pod)
        fabric = efa_userspace.for_worker(self.serving, image, self.efa_devices()) \
            if self.rdma else None
        container: dict[str, Any] = {
            "name": "main", "image": image,
            "command": efa.pinned_command(efa.pin_gpus_script(
                library_path=fabric.library_path)) if fabric else list(efa.WORKER_MODULE),
            "args": self.args(),
            "env": self.env(fabric.env if fabric else {}),
            "resources": self.resources(),
            "volumeMounts": [{"name": MODEL_CACHE_PVC, "mountPath": MODEL_CACHE_MOUNT},
                             *(fabric.mounts if fabric else [])],
        }
        modules_volumes, modules_mounts = recipe_specs.remote_code_volumes(self.stack)
        container["volumeMounts"] += modules_mounts
        scratch_volumes, scratch_mounts = recipe_specs.scratch_volumes(self.w.scratch)
        container["volumeMounts"] += scratch_mounts
        volumes: list[dict[str, Any]] = [_model_cache_volume(), *modules_volumes,
                                         *scratch_volumes, *(fabric.volumes if fabric else [])]
        if self.kvbm_disk():
            volumes.append({"name": "kvbm-disk", "emptyDir": {"sizeLimit": self.kvbm_disk()}})
            container["volumeMounts"].append({"name": "kvbm-disk",
                                              "mountPath": kv_config.KVBM_DISK_DIR})
        spec: dict[str, Any] = {
            "containers": [container],
            "volumes": volumes,
            "nodeSelector": {NODE_GROUP_LABEL: self.w.node_group},
            "tolerations": _gpu_tolerations(),
        }
        probe = recipe_specs.startup_probe(self.serving)
        if probe is not None:
            container["startupProbe"] = probe
        if recipe_specs.rdma_devices(self.serving, self.w):
            container["securityContext"] = {
                "capabilities": {"add": list(recipe_specs.RDMA_CAPABILITIES)}}
        if fabric:
            # NIXL registers GPU memory with the EFA NIC, which needs a privileged container;
            # the command pins the device plugin's GPUs (components/efa.py). EFA traffic does
            # not cross AZs, so all EFA workers of the graph share one zone.
            container["securityContext"] = efa.security_context()
            spec["initContainers"] = fabric.init_containers
            labels = {**labels, efa.ZONE_GROUP_LABEL: labels[GRAPH_LABEL]}
            spec["affinity"] = efa.one_zone_affinity(labels[GRAPH_LABEL],
                                                     self.group.availability_zone)
        return {"metadata": {"labels": labels}, "spec": spec}

    def component(self, name: str, labels: dict[str, str]) -> dict[str, Any]:
        self.check_fits()
        comp = _component(self.serving, name, self.w.role.value, self.w.replicas,
                          self.pod_template(labels))
        comp["sharedMemorySize"] = f"{self.w.shared_memory_gib or WORKER_SHM_GIB}Gi"
        if self.w.node_count > 1:
            comp["multinode"] = {"nodeCount": self.w.node_count}
        return comp


def _check_supported(stack: StackConfig, efa: bool) -> None:
    serving = stack.serving
    if serving is None:
        raise StackError(stack.name, [Problem(f"{P}serving", "this stack serves nothing; "
                                              "a base stack has no graph", "add serving")])
    problems = []
    if serving.kv_offload.kind == "disk" and not kv_config.uses_kvbm(serving):
        problems.append(Problem(f"{P}serving.kvOffload.kind", "disk offload needs KVBM, and "
                                f"dynamoVersion {serving.dynamo_version} uses vLLM's native "
                                "offloading, which has no disk tier in Dynamo yet",
                                "use kind: cpu, or a dynamoVersion below 1.6"))
    if serving.transfer == TransferBackend.NIXL_LIBFABRIC and not efa:
        problems.append(Problem(f"{P}serving.transfer", "nixl-libfabric needs EFA devices on "
                                "the worker nodes, and the cluster offers none (efa=False)",
                                "use nixl-ucx, or EFA-enabled node groups"))
    check_kv_path(stack, problems)  # LIBFABRIC needs an EFA userspace: the image's or a donor's
    if problems:
        raise StackError(stack.name, problems)


def _check_one_zone(stack: StackConfig, groups: list[NodeGroup]) -> None:
    zones = sorted({g.availability_zone for g in groups if g.availability_zone})
    if len(zones) > 1:
        raise StackError(stack.name, [Problem(
            f"{P}cluster.nodeGroups", f"EFA workers sit in node groups pinned to different "
            f"zones {zones}; EFA traffic stays in one AZ", "pin those groups to one zone")])


def build_graph_deployment(stack: StackConfig, *, namespace: str, efa: bool,
                           cluster: ClusterConfig | None = None,
                           name: str | None = None) -> dict[str, Any]:
    """The DynamoGraphDeployment of `stack` in `namespace`.

    `efa`: the worker nodes have EFA devices and the EFA device plugin. `cluster`: the cluster
    the workers run on; defaults to the stack's own, so an attached variant must pass the
    effective cluster (its base's node groups plus its own,
    `stacks.preflight.run.effective_cluster`).
    `name`: the graph's name, default deployment_name(stack) (a campaign gives two variants
    that share workers one name: stacks/config/campaign_config.py).
    Raises StackError (field and fix named) for settings the graph cannot express.
    """
    _check_supported(stack, efa)
    serving = stack.serving
    assert serving is not None
    if not _DNS_LABEL.match(namespace):
        raise ValueError(f"namespace '{namespace}' is not a DNS label")
    name = name or deployment_name(stack)
    labels = {"app.kubernetes.io/part-of": "dynamo-bench", GRAPH_LABEL: name}
    cluster = cluster or stack.cluster
    workers = [_Worker(stack, i, cluster, efa, name) for i in range(len(serving.workers))]
    _check_one_zone(stack, [w.group for w in workers if w.rdma])
    components = [_frontend(stack, labels)]
    # the frontend joins the workers' zone (components.placement.workers_zone)
    affinity = zone_affinity(workers_zone(stack, cluster))
    if affinity:
        components[0]["podTemplate"]["spec"]["affinity"] = affinity
    if serving.speculative is not None:  # real or synthetic acceptance, on every worker pod
        labels = {**labels, recipe_specs.ACCEPTANCE_LABEL: serving.speculative.acceptance}
    for worker, comp_name in zip(workers, component_names(serving), strict=True):
        components.append(worker.component(comp_name, labels))
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"backendFramework": serving.backend,
                 "env": _env(graph_env(stack)), "components": components},
    }
