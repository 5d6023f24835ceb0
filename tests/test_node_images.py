"""The pinned node AMI release and its NVIDIA driver against the serving image's CUDA
(stacks/catalog/node_images.py; sources: awslabs/amazon-eks-ami CHANGELOG v20260714, Dynamo's CUDA
and driver table)."""

from __future__ import annotations

import pytest
from graph_stacks import variant
from pulumi_harness import run

from stacks.catalog import node_images
from stacks.catalog.node_images import NVIDIA_AMI, NodeImage, image_cuda
from stacks.config.loader import load_stack
from stacks.preflight.run import run_preflight


@pytest.mark.parametrize(("image", "cuda", "driver"), [
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1", "13.0", 580),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1-efa", "13.0", 580),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.1-a.x-k2-post.1", "13.0", 580),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1", "12.9", 575),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1-cuda13", "13.0", 580),
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.1", "12.8", 570),
])
def test_image_cuda_follows_dynamos_table(image: str, cuda: str, driver: int) -> None:
    need = image_cuda(image, "1.6.1")
    assert (need.cuda, need.min_driver) == (cuda, driver)


def test_a_digest_takes_the_version_from_dynamo_version() -> None:
    digest = "nvcr.io/nvidia/ai-dynamo/vllm-runtime@sha256:" + "a" * 64
    assert image_cuda(digest, "1.6.1").min_driver == 580
    assert image_cuda(digest, "1.2.0").min_driver == 575


def test_every_managed_node_group_runs_the_pinned_ami_release() -> None:
    base = load_stack("base-a100")
    groups = run("base-a100").of_type("eks:index:ManagedNodeGroup")
    assert len(groups) == len(base.cluster.node_groups)
    for g in groups:
        assert g.inputs["releaseVersion"] == NVIDIA_AMI[base.cluster.eks_version] \
            .release_version == "1.35.6-20260714"
    assert run("base-a100").outputs["nodeNvidiaDriver"] == "580.159.03"


def test_a_stack_whose_ami_driver_is_too_old_for_its_image_is_refused(monkeypatch) -> None:
    # An AMI release of the 570 driver line, e.g. 1.33.5-20251023 with kmod-nvidia-latest-dkms
    # 570.195.03 (amazon-eks-ami CHANGELOG), pinned for the base's Kubernetes version.
    version = load_stack("base-a100").cluster.eks_version
    monkeypatch.setitem(node_images.NVIDIA_AMI, version, NodeImage("1.33.5-20251023",
                                                                   "570.195.03"))
    report = run_preflight(load_stack("agg-a100"), load_stack("base-a100"))
    (problem,) = report.problems
    assert problem.field == "dynamo-bench:serving.image"
    assert "CUDA 13.0" in problem.message and "570.195.03" in problem.message
    older = variant("agg-a100", image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1",
                    dynamoVersion="1.2.1", platformChartVersion="1.2.1")
    (problem,) = [p for p in run_preflight(older, load_stack("base-a100")).problems
                  if p.field == "dynamo-bench:serving.image"]
    assert "CUDA 12.9" in problem.message and "575" in problem.message


def test_an_eks_version_without_a_pinned_ami_is_refused() -> None:
    base = load_stack("base-a100")
    old = base.model_copy(update={"cluster": base.cluster.model_copy(
        update={"eks_version": "1.29"})})
    fields = [p.field for p in run_preflight(old).problems]
    assert "dynamo-bench:cluster.eksVersion" in fields
