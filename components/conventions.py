"""Names shared by the infrastructure components (labels, taints, well-known object names).

Worker placement (node selectors, tolerations) and node creation (node group labels, taints,
Auto Mode NodePools) must agree on these, so they are defined once. Names the cluster runner
(workloads/) also needs live in stacks/conventions/k8s_names.py and are re-exported here.
"""

from __future__ import annotations

from stacks.conventions.k8s_names import (  # noqa: F401 - re-exported for the components
    LOADGEN_SERVICE_ACCOUNT,
    MODEL_CACHE_MOUNT,
    MODEL_CACHE_PVC,
    MONITORING_NAMESPACE,
    NODE_GROUP_LABEL,
    RESULTS_PVC,
)

# GPU nodes are tainted so only pods that asked for GPUs land there.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
GPU_TAINT_EFFECT = "NoSchedule"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"

# Kubernetes object names.
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_KEY = "HF_TOKEN"
EFS_STORAGE_CLASS = "efs-sc"
EBS_STORAGE_CLASS = "ebs-tagged"
