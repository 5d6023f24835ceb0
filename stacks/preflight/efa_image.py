"""A pre-flight note for NIXL LIBFABRIC on an image that is not a Dynamo `-efa` build (pure).

NIXL's LIBFABRIC plugin needs the system libfabric.so.1, which only Dynamo's `-efa` images
install (ai-dynamo/dynamo container/templates/aws.Dockerfile); the recipe model builds have
none published (docs/fern/components/releases.data.ts MODEL_EA_BUILDS). Only the image can say
whether it carries it, so this is a note, not a refusal: every EFA worker pod checks its image
before the engine starts and the run stops at once on a refusal (components/libfabric_check.py);
the note gives the one command that answers it before paying for the nodes.
"""

from __future__ import annotations

import re

from stacks.config.loader import P
from stacks.config.schema import StackConfig, TransferBackend

# The tags the graph runs as EFA builds: `...-efa`, or Dynamo's own `vllm-runtime:X.Y.Z`, which
# components/efa.py `efa_runtime_image` turns into `X.Y.Z-efa`.
OFFICIAL_RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"


def runs_an_efa_build(image: str) -> bool:
    repo, _, tag = image.partition("@")[0].rpartition(":")
    return tag.endswith("-efa") or (repo == OFFICIAL_RUNTIME and
                                    re.fullmatch(r"\d+\.\d+\.\d+", tag) is not None)


def libfabric_image_notes(stack: StackConfig) -> list[str]:
    s = stack.serving
    if s is None or s.transfer != TransferBackend.NIXL_LIBFABRIC or runs_an_efa_build(s.image):
        return []
    return [f"{P}serving.image: {s.image} is not a Dynamo -efa build, and NIXL's LIBFABRIC "
            "plugin needs libfabric.so.1 in it (else vLLM fails at register_memory). Each EFA "
            "worker checks its image before it starts and the run stops at once without it; to "
            f"know before paying: docker run --rm --entrypoint sh {s.image} -c "
            "'ldconfig -p | grep libfabric.so.1 || ls /opt/amazon/efa/lib*/libfabric.so.1'"]
