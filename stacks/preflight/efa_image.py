"""Pre-flight of a disaggregated stack's KV path on AWS (pure): names the path every such stack
uses (stacks/conventions/kv_path.py) and refuses one that has none, with the field and the fix.

A LIBFABRIC stack needs libfabric.so.1 and its efa provider in the worker pods. Dynamo's `-efa`
runtimes carry them; the recipe model builds do not (dynamo.md F2, aws.md R6), so such a stack
names a Dynamo `-efa` runtime in `serving.efaUserspaceImage` whose EFA userspace an init
container copies into the pods (components/efa_userspace.py). Whether the copy loads in the
worker's image only the image can tell: the libfabric-check init container decides on the node
before the engine starts, and the runner stops at once on its refusal.
"""

from __future__ import annotations

from stacks.config.loader import P, Problem
from stacks.config.schema import StackConfig, TransferBackend
from stacks.conventions.kv_path import (
    EFA_HOME,
    KvPath,
    describe,
    image_tag,
    kv_path,
    release_line,
    runs_an_efa_build,
)

# Dynamo -efa runtimes upstream publishes, with where it says so (a donor outside this table is
# allowed; its pull is then first confirmed on the node).
PUBLISHED_EFA_RUNTIMES = {
    "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0-efa": (
        "docs.nvidia.com/dynamo, kubernetes/installation/managed-kubernetes/eks/eks-setup "
        "(lastmod 2026-09-24): the EKS disaggregated example moves KV with NIXL LIBFABRIC over "
        "EFA on it"),
    "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.2-efa": (
        "ai-dynamo/dynamo docs/fern/components/releases.data.ts@0059bada, ARTIFACTS "
        "vllm-runtime tags"),
}
UNLISTED = ("not in the table of -efa runtimes upstream publishes (stacks/preflight/"
            "efa_image.py): its pull is first confirmed on the node")
SUGGESTED_DONOR = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0-efa"
DONOR_FIELD = f"{P}serving.efaUserspaceImage"


def _donor_problems(stack: StackConfig) -> list[Problem]:
    s = stack.serving
    assert s is not None
    donor = s.efa_userspace_image
    if donor is None:
        return []
    if s.transfer != TransferBackend.NIXL_LIBFABRIC:
        return [Problem(DONOR_FIELD, f"an EFA userspace serves NIXL LIBFABRIC only, and "
                        f"serving.transfer is {s.transfer.value}",
                        "remove serving.efaUserspaceImage, or set transfer: nixl-libfabric")]
    if runs_an_efa_build(s.image):
        return [Problem(DONOR_FIELD, f"{s.image} runs as a Dynamo -efa build with its own EFA "
                        f"userspace ({EFA_HOME}); a donor's copy would shadow it",
                        "remove serving.efaUserspaceImage")]
    if not image_tag(donor).endswith("-efa"):  # used as given: no -efa tag is made up
        return [Problem(DONOR_FIELD, f"{donor} is not a Dynamo -efa runtime (a tag ending in "
                        f"-efa), so it has no {EFA_HOME} to copy",
                        f"use an -efa runtime tag such as {SUGGESTED_DONOR} (a digest goes "
                        "after the tag: repo:X.Y.Z-efa@sha256:...)")]
    return []


def check_kv_path(stack: StackConfig, out: list[Problem]) -> list[str]:
    """Problems of the KV path into `out`; returns the note naming it (AWS stacks only: the
    local engine moves KV between mockers by itself)."""
    s = stack.serving
    if s is None or stack.target != "aws":
        return []
    found = _donor_problems(stack)
    path = kv_path(s)
    if path == KvPath.MISSING:
        found.append(Problem(
            DONOR_FIELD, f"NIXL LIBFABRIC needs libfabric.so.1 and its efa provider in the "
            f"workers, and {s.image} is not a Dynamo -efa build: it carries neither (NIXL would "
            "skip its LIBFABRIC plugin and vLLM fail at register_memory after the nodes are "
            "paid for)", f"set serving.efaUserspaceImage: {SUGGESTED_DONOR} (its EFA "
            "userspace is copied into the pods and checked there), run an -efa image, or use "
            "transfer: nixl-ucx"))
    out += found
    if path == KvPath.NONE or found:
        return []
    note = f"{P}serving.transfer: KV path {path.value}: {describe(s)}"
    donor = s.efa_userspace_image
    if path == KvPath.EFA_DONOR and donor is not None:
        source = PUBLISHED_EFA_RUNTIMES.get(donor.partition("@")[0])
        note += f"; donor published per {source}" if source else f"; donor {UNLISTED}"
        line, want = release_line(image_tag(donor)), release_line(s.dynamo_version)
        if line and line != want:
            note += (f"; the donor is a Dynamo {line} runtime for a {want} image: the EFA "
                     "userspace does not depend on the Dynamo version, only on the image's "
                     "OS and loader, which the check on the node tries")
    return [note]
