"""Pre-flight of the node image's NVIDIA driver against the serving image's CUDA (pure).

The facts (the pinned AL2023 NVIDIA AMI per Kubernetes minor, the CUDA each Dynamo runtime image
is built on) are in stacks.catalog.node_images, with their sources.
"""

from __future__ import annotations

from stacks.catalog.node_images import AMI_SOURCE, NVIDIA_AMI, driver_major, image_cuda
from stacks.config.loader import P, Problem
from stacks.config.schema import ComputeMode, StackConfig


def check_node_driver(stack: StackConfig, base: StackConfig | None,
                      out: list[Problem]) -> None:
    """A stack on managed node groups needs a pinned AMI for its Kubernetes version, and the
    AMI's driver must be new enough for the serving image."""
    owner = base or stack
    if stack.target != "aws" or owner.cluster.compute_mode != ComputeMode.NODEGROUPS:
        return
    eks = owner.cluster.eks_version
    node = NVIDIA_AMI.get(eks)
    if node is None:
        out.append(Problem(f"{P}cluster.eksVersion", f"no AL2023 NVIDIA AMI release is pinned "
                           f"for Kubernetes {eks} ({AMI_SOURCE} builds {sorted(NVIDIA_AMI)})",
                           "use one of those versions, or pin its release in "
                           "stacks/catalog/node_images.py from the amazon-eks-ami changelog"))
        return
    if stack.serving is None:
        return
    need = image_cuda(stack.serving.image, stack.serving.dynamo_version)
    if driver_major(node.nvidia_driver) < need.min_driver:
        out.append(Problem(f"{P}serving.image", f"{stack.serving.image} is built on CUDA "
                           f"{need.cuda}, which needs NVIDIA driver {need.min_driver} or newer; "
                           f"the pinned node AMI {node.release_version} ships "
                           f"{node.nvidia_driver}", "pin a newer AMI release in "
                           "stacks/catalog/node_images.py, or use an image built on an older CUDA"))
