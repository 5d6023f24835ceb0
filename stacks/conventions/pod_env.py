"""The env a serving pod's container starts with, as far as the engine's own parsers read it.

The graph (components/graph.py) sets `spec.env` on every component (RUNTIME_ENV plus the stack's
`serving.env`) and each container's own env (a worker's `serving.workers[i].env` last, so the
stack's value wins). Dynamo's parsers take env defaults when they parse (`env_or_default`,
dynamo/common/configuration/utils.py:83, ai-dynamo 1.6.1) and vLLM reads its `VLLM_*`
variables when the engine config is built (vllm/envs.py `__getattr__`, vLLM 0.31.0), so
pre-flight parses each command line with this env and no other: the host's shell is not the pod.

Left out on purpose (tests/test_engine_parse_env.py holds the list against the rendered graph):
paths on the pod's volumes (HF_HOME, VLLM_CACHE_ROOT, FLASHINFER_WORKSPACE_BASE,
HF_MODULES_CACHE, DYN_KVBM_DISK_CACHE_DIR: the parse runs in a temporary folder), values only
the running pod knows (the pod IP, the HF token Secret, the ConfigMap's speculative config, which
pre-flight expands into the command line itself), and the variables only a running process reads
(libfabric's FI_*, the EFA shell's GPU count, KVBM's cache sizes, the request-trace sink).
"""

from __future__ import annotations

from stacks.config.schema import StackConfig

# Frontends and workers talk over TCP and publish events over ZMQ: no NATS, no etcd (the
# platform chart is installed with both off and Kubernetes discovery).
RUNTIME_ENV = {"DYN_REQUEST_PLANE": "tcp", "DYN_EVENT_PLANE": "zmq"}
# What the graph sets on every worker and frontend container beyond the stack's own env.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1"}
WORKER_ENV = {**OFFLINE_ENV, "PYTHONHASHSEED": "0"}


def graph_env(stack: StackConfig) -> dict[str, str]:
    """The graph's `spec.env`: every component's container gets it."""
    assert stack.serving is not None
    return {**RUNTIME_ENV, **stack.serving.env}


def worker_parse_env(stack: StackConfig, index: int) -> dict[str, str]:
    """Worker group `index`'s container env the parsers can read."""
    assert stack.serving is not None
    return {**graph_env(stack), **WORKER_ENV, **stack.serving.workers[index].env}


def frontend_parse_env(stack: StackConfig) -> dict[str, str]:
    """The frontend container's env the parsers can read."""
    return {**graph_env(stack), **OFFLINE_ENV}
