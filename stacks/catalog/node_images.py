"""The NVIDIA driver the GPU nodes run and the one the serving image needs (pure data).

Node image: managed node groups run the EKS-optimized AL2023 NVIDIA AMI, pinned to one AMI
release per Kubernetes minor (`release_version` of the node group), so a node replaced during a
campaign comes back with the same driver. Release v20260714 of awslabs/amazon-eks-ami
(CHANGELOG.md "AMI Release v20260714", commit 81fec2e8): AL2023_x86_64_NVIDIA ships
kmod-nvidia-latest-dkms 580.159.03 for every Kubernetes minor it builds (1.30-1.36; for the
shipped stacks' 1.35: amazon-eks-node-al2023-x86_64-nvidia-1.35-v20260714, release
1.35.6-20260714, nvidia-container-toolkit 1.19.1, efa 3.1.0, kernel 6.12). Older
releases shipped 570.x (e.g. 1.33.5-20251023: 570.195.03), too old for CUDA 13.
EKS Auto Mode owns its node AMIs: nothing to pin; the run records the driver the pods report.
Pre-flight compares the two in stacks.preflight.node_driver.

Serving image: Dynamo's vLLM runtime images are CUDA 13.0 builds from 1.3.0 on ("CUDA 12
container images discontinued", ai-dynamo/dynamo docs/fern/components/releases.data.ts,
CUDA_HISTORY: vLLM 13.0 -> minimum driver 580.xx+ for 1.3.0-1.4.2; docs.nvidia.com/dynamo
v1.5.0 compatibility: vLLM CUDA 13.0, driver 580.xx+); ai-dynamo 1.6.1 itself pins
nixl[cu13]==1.4.1 for vLLM (its wheel metadata). Before 1.3.0 the default tag was CUDA 12.9
(driver 575.xx+) and `-cuda13` tags CUDA 13.0; 0.7.x vLLM was CUDA 12.8 (570.xx+).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

AMI_RELEASE = "v20260714"
AMI_SOURCE = "awslabs/amazon-eks-ami CHANGELOG.md, AMI Release v20260714"


@dataclass(frozen=True)
class NodeImage:
    release_version: str   # the managed node group's `release_version`
    nvidia_driver: str     # kmod-nvidia-latest-dkms of AL2023_x86_64_NVIDIA


NVIDIA_AMI: dict[str, NodeImage] = {
    "1.30": NodeImage("1.30.14-20260714", "580.159.03"),
    "1.31": NodeImage("1.31.14-20260714", "580.159.03"),
    "1.32": NodeImage("1.32.13-20260714", "580.159.03"),
    "1.33": NodeImage("1.33.13-20260714", "580.159.03"),
    "1.34": NodeImage("1.34.9-20260714", "580.159.03"),
    "1.35": NodeImage("1.35.6-20260714", "580.159.03"),
    "1.36": NodeImage("1.36.2-20260714", "580.159.03"),
}


@dataclass(frozen=True)
class CudaNeed:
    cuda: str
    min_driver: int        # driver major version (580 means 580.xx or newer)


def _version(text: str) -> tuple[int, int, int] | None:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def image_cuda(image: str, dynamo_version: str) -> CudaNeed:
    """The CUDA toolkit a Dynamo vLLM runtime image is built on and the driver it needs; the
    Dynamo version is the image tag's when it states one (model builds such as
    `1.4.1-a.x-k2-post.1` too), else `dynamoVersion`."""
    tag = "" if "@sha256:" in image else image.rpartition(":")[2]
    version = _version(tag) or _version(dynamo_version) or (0, 0, 0)
    if version >= (1, 3, 0) or "cuda13" in tag:
        return CudaNeed("13.0", 580)
    if version >= (0, 8, 0):
        return CudaNeed("12.9", 575)
    return CudaNeed("12.8", 570)


def driver_major(driver: str) -> int:
    return int(driver.split(".", 1)[0])
