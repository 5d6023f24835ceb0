"""What the fake cluster's serving pods show the attestation (tests/aws_target_fake.py): the
device plugin's GPU allocation and what a container sees of it, the workers' logs (vLLM's
engine-config line, NIXL's backend line), each pod's /metrics in Prometheus text format, and
the counters a chat completion moves. Knobs let a test break one thing at a time."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from components.efa import PIN_GPUS_SCRIPT
from stacks.conventions.k8s_names import DEVICE_LIST_DIR

GPUS_PER_NODE = 8
BLOCK = 64
DRIVER = "580.159.03"


def node_uuids(node: str, count: int = GPUS_PER_NODE) -> list[str]:
    """Stable, realistic GPU UUIDs of a node."""
    return [f"GPU-{abs(hash((node, i))) % 16**8:08x}-1c2d-4e5f-8a9b-{i:012x}"
            for i in range(count)]


def engine_log(model_id: str, *, revision: str | None, dtype: str = "torch.bfloat16",
               quantization: str | None = None, tp: int = 4,
               kv_cache_dtype: str = "auto") -> str:
    """vLLM's start-up line (VllmConfig.__str__), as a real worker logs it."""
    return (f"INFO 12-01 10:00:03 [core.py:93] Initializing a V1 LLM engine (v0.31.0) with "
            f"config: model='{model_id}', speculative_config=None, tokenizer='{model_id}', "
            f"skip_tokenizer_init=False, tokenizer_mode=auto, revision={revision}, "
            f"tokenizer_revision=None, trust_remote_code=False, dtype={dtype}, "
            f"max_seq_len=32768, download_dir=None, load_format=auto, "
            f"tensor_parallel_size={tp}, pipeline_parallel_size=1, data_parallel_size=1, "
            f"disable_custom_all_reduce=False, quantization={quantization}, "
            f"enforce_eager=False, kv_cache_dtype={kv_cache_dtype}, device_config=cuda, "
            f"seed=0, served_model_name={model_id}, enable_prefix_caching=True\n")


@dataclass
class GraphServing:
    """One graph's serving: its model, topology and the counters its requests move."""

    model: str = "Qwen/Qwen3-30B-A3B"
    disaggregated: bool = False
    router_kv: bool = False
    offload: bool = False
    counters: dict[str, float] = field(default_factory=lambda: {
        "cached": 0.0, "events": 0.0, "nixl": 0.0, "offload": 0.0, "failed": 0.0})
    prompts: set[str] = field(default_factory=set)


def serving_of(stack) -> GraphServing:
    """What a stack's graph serves, from its config."""
    s = stack.serving
    return GraphServing(model=stack.model.name,
                        disaggregated=s.topology.value == "disaggregated",
                        router_kv=s.router.value == "kv", offload=s.kv_offload.kind != "none")


@dataclass
class FakeServing:
    driver: str = DRIVER
    # The device plugin hands out UUIDs; a privileged container that does not pin them sees
    # every GPU of its node (NVIDIA/k8s-device-plugin#336).
    allocated: dict[str, list[str]] = field(default_factory=dict)   # pod -> UUIDs
    probe_override: dict[str, dict] = field(default_factory=dict)   # pod -> probe JSON
    fabric_override: dict[str, dict] = field(default_factory=dict)  # pod -> libfabric probe
    # How the device plugin passes the allocation: "envvar" (UUIDs in NVIDIA_VISIBLE_DEVICES,
    # our own plugin on node groups) or "volume-mounts" (indices as entries under
    # /var/run/nvidia-container-devices, Bottlerocket's default, so Auto Mode's).
    plugin_strategy: str = "envvar"
    cache_hits: bool = True
    kv_events: bool = True
    kv_bytes_per_request: int = 3_145_728
    offload_bytes_per_request: int = 6_291_456
    exports_nixl: bool = True
    # what each graph serves and counts, by graph name (side-by-side campaign variants each
    # have their own frontend, workers and counters)
    graphs: dict[str, GraphServing] = field(default_factory=dict)

    def graph(self, name: str) -> GraphServing:
        return self.graphs.setdefault(name, GraphServing())

    # --- device plugin ---------------------------------------------------------------------
    def allocate(self, pod: dict, nodes: list[str]) -> str:
        """Schedule a GPU pod like the scheduler and device plugin would: the first of `nodes`
        with enough free GPUs gets it; returns that node."""
        limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
        want = int(limits.get("nvidia.com/gpu", 0))
        taken = {u for uuids in self.allocated.values() for u in uuids}
        for node in nodes:
            free = [u for u in node_uuids(node) if u not in taken]
            if len(free) >= want:
                self.allocated[pod["metadata"]["name"]] = free[:want]
                return node
        raise AssertionError(f"no fake node has {want} free GPUs for {pod['metadata']['name']}")

    def release(self, pod: str) -> None:
        self.allocated.pop(pod, None)

    def probe(self, pod: dict) -> bytes:
        name = pod["metadata"]["name"]
        if name in self.probe_override:
            return json.dumps(self.probe_override[name]).encode()
        main = pod["spec"]["containers"][0]
        privileged = (main.get("securityContext") or {}).get("privileged")
        pinned = PIN_GPUS_SCRIPT in (main.get("command") or [])
        mine = self.allocated.get(name, [])
        node = node_uuids(pod["spec"]["nodeName"])
        seen = node if privileged and not pinned else mine
        gpus = [{"index": str(node.index(u)), "uuid": u, "driver": self.driver} for u in seen]
        if self.plugin_strategy == "volume-mounts":
            ids = [str(node.index(u)) for u in mine]
            visible, mounts = DEVICE_LIST_DIR, ids
        else:
            ids, visible, mounts = mine, ",".join(mine), None
        return json.dumps({"cuda_visible_devices": ",".join(ids) if pinned else None,
                           "nvidia_visible_devices": visible, "device_list_mounts": mounts,
                           "pinned_by": self.plugin_strategy if pinned else None,
                           "gpus": gpus, "nvidia_smi_exit": 0, "stderr": ""}).encode()

    def loaded_fabric(self, pod: dict) -> bytes:
        """What the loaded-libfabric probe prints for an EFA worker: the engine's processes map
        libfabric from the EFA userspace its libfabric check tried (the fi_info the check ran
        is `<home>/bin/fi_info`), as the loader would, and hold one EFA device open each."""
        name = pod["metadata"]["name"]
        if name in self.fabric_override:
            return json.dumps(self.fabric_override[name]).encode()
        check = next(c for c in pod["spec"]["initContainers"] if c["name"] == "libfabric-check")
        home = check["command"][-1].rsplit("/bin/fi_info", 1)[0]
        lib = f"{home}/lib/libfabric.so.1.29.0"
        return json.dumps({"libfabric": {lib: [41, 42]}, "libefa": {f"{home}/lib/libefa.so.1": [
            41, 42]}, "libibverbs": {}, "uverbs_fds": {"41": 1, "42": 1}}).encode()

    # --- requests ----------------------------------------------------------------------------
    def chat(self, graph: str, text: str) -> dict:
        g = self.graph(graph)
        tokens = len(text.split()) * 2
        cached = (tokens // BLOCK) * BLOCK if text in g.prompts and self.cache_hits else 0
        g.prompts.add(text)
        g.counters["cached"] += cached
        if g.router_kv and self.kv_events:
            g.counters["events"] += max(1, tokens // BLOCK - cached // BLOCK)
        if g.disaggregated:
            g.counters["nixl"] += self.kv_bytes_per_request
        if g.offload:
            g.counters["offload"] += self.offload_bytes_per_request
        return {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1,
                "prompt_tokens_details": {"cached_tokens": cached}}

    # --- /metrics ----------------------------------------------------------------------------
    def metrics(self, graph: str, kind: str, first: bool) -> bytes:
        """A pod's /metrics; its graph's counters show on the graph's first pod of each kind."""
        g = self.graph(graph)
        c = g.counters if first else dict.fromkeys(g.counters, 0.0)
        lines = []
        if kind == "frontend":
            lines += ["# HELP dynamo_frontend_cached_tokens Number of cached tokens",
                      "# TYPE dynamo_frontend_cached_tokens histogram",
                      f'dynamo_frontend_cached_tokens_sum{{model="m"}} {c["cached"]}',
                      'dynamo_frontend_cached_tokens_count{model="m"} 3']
            if g.router_kv:
                lines += ['# TYPE dynamo_component_kv_cache_events_applied counter',
                          'dynamo_component_kv_cache_events_applied{dynamo_component="backend",'
                          'event_type="stored",status="ok",worker_id="7f3a"} '
                          f'{c["events"]}',
                          'dynamo_component_kv_cache_events_applied{dynamo_component="backend",'
                          'event_type="removed",status="ok",worker_id="7f3a"} 0']
        if kind == "decode" and self.exports_nixl:
            lines += ["# TYPE vllm:nixl_bytes_transferred histogram",
                      f'vllm:nixl_bytes_transferred_sum{{engine="0"}} {c["nixl"]}',
                      'vllm:nixl_bytes_transferred_count{engine="0"} 4',
                      "# TYPE vllm:nixl_num_failed_transfers counter",
                      f'vllm:nixl_num_failed_transfers_total{{engine="0"}} {c["failed"]}']
        if kind in ("worker", "prefill") and g.offload:
            lines += ["# TYPE vllm:kv_offload_store_bytes counter",
                      f'vllm:kv_offload_store_bytes_total{{engine="0"}} {c["offload"]}']
        lines += ['vllm:kv_cache_usage_perc{engine="0"} 0.01'] if kind != "frontend" else []
        return ("\n".join(lines) + "\n").encode()
