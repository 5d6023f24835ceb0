"""The world's facts, as data, each with its source and date: GPUs and instance types with their
prices (instances), the models and their geometry (models, model_arch, model_catalog), prices of
what else a stack pays for (service_prices), EKS versions and their support windows
(eks_versions), the node images' drivers (node_images), GPUDirect RDMA support (gpudirect), the
public request traces shipped in traces/ (trace_files), every metric name (metrics), the links KV
cache moves over (interconnects) and the bandwidth a KV transfer gets on each path (kv_transfer),
and what vLLM 0.31.0 decides for a worker that leaves a setting unset (vllm_defaults).

The catalogue imports nothing of the project's: config validates against it, pre-flight and the
plan read it, components, workloads and reports use its names.
"""
