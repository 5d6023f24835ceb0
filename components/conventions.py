"""Names shared by the infrastructure components (labels, taints, well-known object names).

Worker placement (node selectors, tolerations) and node creation (node group labels, taints,
Auto Mode NodePools) must agree on these, so they are defined once.
"""

from __future__ import annotations

# Every node a stack node group creates carries this label with the group's name; workers
# select their group with it.
NODE_GROUP_LABEL = "dynamo-bench.io/node-group"
# GPU nodes are tainted so only pods that asked for GPUs land there.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
GPU_TAINT_EFFECT = "NoSchedule"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"

# Kubernetes object names.
MODEL_CACHE_PVC = "model-cache"
RESULTS_PVC = "benchmark-results"
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_KEY = "HF_TOKEN"
EFS_STORAGE_CLASS = "efs-sc"
EBS_STORAGE_CLASS = "ebs-tagged"
LOADGEN_SERVICE_ACCOUNT = "dynamo-bench-loadgen"
MONITORING_NAMESPACE = "monitoring"
MODEL_CACHE_MOUNT = "/models"
