"""The typed schema of a stack: one pydantic model per Pulumi config key.

A stack file `stacks/Pulumi.<stack>.yaml` holds `config: {dynamo-bench:<key>: ...}` with the keys
`target`, `cluster`, `storage`, `monitoring`, `model`, `serving`, `workloads`, `cost`, `tags`.
Keys are camelCase in YAML (Pulumi's convention) and snake_case in Python. Unknown keys are
errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt, field_validator, model_validator

from stacks.catalog.model_arch import ModelArchitecture
from stacks.catalog.models import MODELS
from stacks.config.errors import field_error
from stacks.config.recipe_config import (
    KernelPins,
    Parsers,
    RdmaRequest,
    SpeculativeDecoding,
)
from stacks.config.revision import Revision
from stacks.config.schema_base import Schema
from stacks.config.schema_cluster import (  # noqa: F401  (re-exported: stacks.config.schema is the one import)
    CapacityType,
    ClusterConfig,
    ComputeMode,
    MonitoringConfig,
    NodeGroup,
    Provisioning,
    StorageConfig,
    VpcConfig,
)
from stacks.config.workload_config import WorkloadsConfig

# --- model ---------------------------------------------------------------------------------

class Precision(str, Enum):
    BF16 = "bf16"
    FP8 = "fp8"
    NVFP4 = "nvfp4"


class ModelConfig(Schema):
    id: Annotated[str, Field(pattern=r"^[\w.-]+/[\w.-]+$")] = "Qwen/Qwen3-30B-A3B"
    served_name: str | None = None
    precision: Precision = Precision.BF16
    # A100 has no FP8 tensor cores: vLLM can only run FP8 weights as weight-only (Marlin),
    # which is a different path from L40S/H100. Refused unless the stack accepts it knowingly.
    accept_fp8_weight_only_fallback: StrictBool = False
    # a 40-hex commit or a git ref name (stacks/config/revision.py)
    revision: Revision | None = None
    architecture: ModelArchitecture | None = None
    # Workers and frontend load the model's own code (Motif 3).
    trust_remote_code: StrictBool = False

    @model_validator(mode="after")
    def _known_or_given(self) -> ModelConfig:
        if self.architecture is None and self.id not in MODELS:
            raise field_error("id", message=f"model '{self.id}' is not in the catalogue "
                              f"({', '.join(MODELS)}): add model.architecture")
        return self

    @property
    def arch(self) -> ModelArchitecture:
        return self.architecture or MODELS[self.id]

    @property
    def name(self) -> str:
        return self.served_name or self.id


# --- serving -------------------------------------------------------------------------------

class Topology(str, Enum):
    AGGREGATED = "aggregated"
    DISAGGREGATED = "disaggregated"


class RouterMode(str, Enum):
    ROUND_ROBIN = "round-robin"
    RANDOM = "random"
    KV = "kv"


class Role(str, Enum):
    WORKER = "worker"
    PREFILL = "prefill"
    DECODE = "decode"


class TransferBackend(str, Enum):
    NONE = "none"
    NIXL_UCX = "nixl-ucx"
    NIXL_LIBFABRIC = "nixl-libfabric"


class KvOffload(Schema):
    kind: Literal["none", "cpu", "disk"] = "none"
    cpu_gb: Annotated[StrictFloat, Field(ge=0)] = 0
    disk_gb: Annotated[StrictFloat, Field(ge=0)] = 0

    @model_validator(mode="after")
    def _sizes_match_kind(self) -> KvOffload:
        if self.kind in ("cpu", "disk") and self.cpu_gb <= 0:
            raise field_error("cpuGb", message=f"kvOffload kind {self.kind} needs cpuGb > 0 "
                              "(the disk tier stages through CPU memory): set it")
        if self.kind == "disk" and self.disk_gb <= 0:
            raise field_error("diskGb", message="kvOffload kind disk needs diskGb > 0: set it")
        if self.kind == "none" and (self.cpu_gb or self.disk_gb):
            raise field_error("kind", message="kvOffload sizes are set but kind is none: set "
                              "kind cpu or disk, or remove the sizes")
        return self


# One command-line argument of a worker or the frontend, passed to the engine as it is: an empty
# (or all-space) entry would reach vLLM's or Dynamo's parser as an empty positional argument.
# What a non-empty entry says is checked against the engine's own parser by pre-flight.
CommandArg = Annotated[str, Field(pattern=r"\S")]


class ScratchSpace(Schema):
    """Pod-local scratch as the B200 recipes give their pods (dynamo.md F10): /tmp on an emptyDir
    (vLLM's inductor, Triton and FlashInfer temp files land there, not in the container's
    writable layer) and the ephemeral storage the pod requests, so the scheduler places it where
    the root volume has room. Unset: neither (the Qwen stacks' defaults)."""

    tmp_dir: StrictBool = False
    tmp_size_limit_gib: Annotated[StrictInt | None, Field(ge=1, le=4096)] = None
    ephemeral_storage_gib: Annotated[StrictInt | None, Field(ge=1, le=4096)] = None

    @model_validator(mode="after")
    def _limit_needs_the_dir(self) -> ScratchSpace:
        if self.tmp_size_limit_gib is not None and not self.tmp_dir:
            raise field_error("tmpSizeLimitGib", message="a /tmp size limit needs the /tmp "
                              "emptyDir: set tmpDir: true, or remove tmpSizeLimitGib")
        return self


class WorkerGroup(Schema):
    role: Role
    replicas: Annotated[StrictInt, Field(ge=1, le=64)] = 1
    tensor_parallel_size: Annotated[StrictInt, Field(ge=1, le=64)] = 1
    expert_parallel: StrictBool = False
    node_group: str
    max_model_len: Annotated[StrictInt, Field(ge=256)] = 32768
    gpu_memory_utilization: Annotated[StrictFloat, Field(gt=0.1, le=0.98)] = 0.90
    # Nodes one worker spans (multinode TP/PP); 1 unless cluster.allowMultinode.
    node_count: Annotated[StrictInt, Field(ge=1, le=16)] = 1
    extra_args: list[CommandArg] = []
    env: dict[str, str] = {}
    # Host memory per pod (request, optional limit) and /dev/shm; unset: the graph's estimate.
    host_memory_gib: Annotated[StrictInt | None, Field(ge=1, le=4096)] = None
    host_memory_limit_gib: Annotated[StrictInt | None, Field(ge=1, le=4096)] = None
    shared_memory_gib: Annotated[StrictInt | None, Field(ge=1, le=1024)] = None
    scratch: ScratchSpace = ScratchSpace()

    @model_validator(mode="after")
    def _limit_above_request(self) -> WorkerGroup:
        limit, request = self.host_memory_limit_gib, self.host_memory_gib
        if limit is not None and (request is None or limit < request):
            raise field_error("hostMemoryLimitGib", message="the limit needs hostMemoryGib "
                              "at or below it: set hostMemoryGib <= hostMemoryLimitGib")
        return self

    @property
    def gpus_per_pod(self) -> int:
        """GPUs of one pod: a replica over nodeCount nodes splits its TP among nodeCount pods."""
        return self.tensor_parallel_size // self.node_count

    def pods_per_node(self, gpus_per_node: int) -> int:
        """Pods of this worker packed on one node of `gpus_per_node` GPUs (at least one)."""
        return min(self.replicas, max(1, gpus_per_node // self.gpus_per_pod))

    @property
    def gpus(self) -> int:
        return self.replicas * self.tensor_parallel_size


# [registry[:port]/]path[:tag][@sha256:digest] (the OCI distribution reference grammar,
# simplified: lowercase path components, a tag of word characters, '.' and '-').
_IMAGE = re.compile(r"(?:[A-Za-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*"
                    r"(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*"
                    r"(?::(?P<tag>\w[\w.-]{0,127}))?(?:@sha256:(?P<digest>[0-9a-f]{64}))?")


def image_reference(v: str) -> str:
    """An image pinned by a tag or a digest: without one (or with `latest`) the registry decides
    what runs, and two runs of one stack could measure different software."""
    m = _IMAGE.fullmatch(v)
    if m is None:
        raise ValueError(f"'{v}' is not an image reference: write registry/repo:tag or "
                         "registry/repo@sha256:<64 lowercase hex digits>")
    if not m["tag"] and not m["digest"]:
        raise ValueError(f"'{v}' has neither a tag nor a digest, so the registry's `latest` "
                         "would run: pin a version tag (repo:1.6.1) or a digest")
    if m["tag"] == "latest" and not m["digest"]:
        raise ValueError(f"'{v}' uses the moving tag `latest`: pin a version tag or a digest")
    return v


class FrontendConfig(Schema):
    replicas: Annotated[StrictInt, Field(ge=1, le=16)] = 1
    node_group: str | None = None
    # The frontend's own image (K-EXAONE's recipe: dynamo-frontend); unset: serving.image.
    image: str | None = None
    # Recipe frontend flags without a typed setting (router tuning, chat template kwargs).
    extra_args: list[CommandArg] = []
    # The frontend pod's requests. The defaults suit the Qwen stacks' Rust preprocessor; a recipe
    # stack sets its recipe's (the vLLM chat processor and 8K-1M-token prompts are frontend CPU
    # and memory: Solar's recipe asks 16 CPU / 128Gi, dynamo.md F6). Pre-flight packs the
    # frontend on its nodeGroup with the workers (stacks/preflight/pods.py).
    cpu: Annotated[StrictInt, Field(ge=1, le=64)] = 2
    memory_gib: Annotated[StrictInt, Field(ge=1, le=512)] = 4
    scratch: ScratchSpace = ScratchSpace()

    @field_validator("image")
    @classmethod
    def _image_ref(cls, v: str | None) -> str | None:
        return None if v is None else image_reference(v)


class MockerConfig(Schema):
    """How the local Dynamo engine (mocker workers) imitates this stack's workers."""

    speedup_ratio: Annotated[StrictFloat, Field(gt=0, le=1000)] = 1.0
    block_size: Annotated[StrictInt, Field(ge=16, le=1024)] = 64
    # KV blocks per mocker; default: the KV capacity pre-flight computes for the real GPU.
    num_gpu_blocks: Annotated[StrictInt | None, Field(ge=16)] = None


class ServingConfig(Schema):
    namespace: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")] = "dynamo"
    deployment_name: Annotated[str | None,
                               Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")] = None
    dynamo_version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+")] = "1.6.1"
    # vLLM runtime image; a digest (repo@sha256:...) is allowed and then needs
    # runtimeVersionOverride in the graph, which the component sets from dynamoVersion.
    image: str = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"
    platform_chart_version: str = "1.6.1"
    backend: Literal["vllm"] = "vllm"
    topology: Topology = Topology.AGGREGATED
    router: RouterMode = RouterMode.ROUND_ROBIN
    prefix_caching: StrictBool = True
    transfer: TransferBackend = TransferBackend.NONE
    kv_offload: KvOffload = KvOffload()
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    # Per-GPU memory vLLM needs beyond weights and KV cache: activations at the batch-token
    # budget, CUDA graphs, NCCL buffers. Stated, not measured; pre-flight prints it.
    runtime_overhead_gib: Annotated[StrictFloat, Field(ge=0, le=64)] = 4.0
    frontend: FrontendConfig = FrontendConfig()
    workers: Annotated[list[WorkerGroup], Field(min_length=1)]
    mocker: MockerConfig = MockerConfig()
    # --- model-specific recipe settings (stacks.config.recipe_config) ---
    speculative: SpeculativeDecoding | None = None
    kernels: KernelPins = KernelPins()
    parsers: Parsers = Parsers()
    # vLLM `--block-size` on every worker and, with the KV router, the frontend's
    # `--kv-cache-block-size` (they must agree); unset: vLLM's choice.
    block_size: Annotated[StrictInt | None, Field(ge=1, le=4096)] = None
    rdma: RdmaRequest | None = None
    # NIXL LIBFABRIC on an image without the EFA userspace (the recipe model builds): a Dynamo
    # `-efa` runtime whose /opt/amazon/efa (libfabric, the efa provider, fi_info) and the
    # libraries libfabric links an init container copies into the worker pods, where a second
    # one checks it loads in the worker's own image before the engine starts
    # (stacks/conventions/kv_path.py, components/efa_userspace.py).
    efa_userspace_image: str | None = None
    # Minutes a worker may take to load and start before Kubernetes restarts it (startupProbe)
    # and the forecast's model-load time; unset: the operator's probes and the estimate.
    startup_budget_minutes: Annotated[StrictInt | None, Field(ge=5, le=120)] = None
    # Env of every component of the graph (DynamoGraphDeployment spec.env).
    env: dict[str, str] = {}
    # Workers publish KV events with any router (the KV router reads them; round-robin ignores
    # them): a round-robin variant and its KV-router twin then run byte-identical workers, so a
    # campaign keeps them and swaps only the frontend. Unset: only with router kv.
    kv_events: StrictBool | None = None

    @field_validator("image")
    @classmethod
    def _image_ref(cls, v: str) -> str:
        return image_reference(v)

    @field_validator("efa_userspace_image")
    @classmethod
    def _donor_ref(cls, v: str | None) -> str | None:
        return None if v is None else image_reference(v)

    @property
    def image_is_digest(self) -> bool:
        return "@sha256:" in self.image

    def by_role(self, role: Role) -> list[WorkerGroup]:
        return [w for w in self.workers if w.role == role]


# --- cost / tags ---------------------------------------------------------------------------

class CostConfig(Schema):
    budget_usd: Annotated[StrictFloat, Field(gt=0)] = 500.0
    # A base's ceiling for its whole campaign (base start-up, idle and every variant's time):
    # `stacks plan` and `stacks check <base>` refuse a campaign forecast above it.
    campaign_budget_usd: Annotated[StrictFloat | None, Field(gt=0)] = None
    price_overrides: dict[str, Annotated[StrictFloat, Field(gt=0)]] = {}
    # Wall time outside the workloads: cluster creation, node start, model download and load.
    setup_hours: Annotated[StrictFloat, Field(ge=0, le=48)] = 1.0
    # Assumed decode speed for count-based workload estimates (no measurement exists yet).
    assumed_itl_ms: Annotated[StrictFloat, Field(gt=0, le=1000)] = 25.0


class TagsConfig(Schema):
    """Cost tags; AWS's tag rules are checked by pre-flight (stacks.preflight.aws_checks)."""

    experiment: Annotated[str, Field(min_length=1)] = "default"
    extra: dict[str, str] = {}


# --- the stack -----------------------------------------------------------------------------

class StackConfig(Schema):
    """Everything one stack file says, validated once at the edge."""

    name: str
    target: Literal["local", "aws"] = "aws"
    cluster: ClusterConfig = ClusterConfig()
    storage: StorageConfig = StorageConfig()
    monitoring: MonitoringConfig = MonitoringConfig()
    model: ModelConfig = ModelConfig()
    serving: ServingConfig | None = None
    workloads: WorkloadsConfig = WorkloadsConfig()
    cost: CostConfig = CostConfig()
    tags: TagsConfig = TagsConfig()

    @property
    def is_attached(self) -> bool:
        return self.cluster.attach_to is not None

    @property
    def is_base(self) -> bool:
        """A base stack owns a cluster and serves nothing itself."""
        return self.serving is None

    def resource_tags(self) -> dict[str, str]:
        return {"project": "dynamo-bench", "stack": self.name,
                "experiment": self.tags.experiment, **self.tags.extra}


CONFIG_KEYS = ("target", "cluster", "storage", "monitoring", "model", "serving", "workloads",
               "cost", "tags")
