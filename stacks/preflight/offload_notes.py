"""A pre-flight note for disaggregated serving with vLLM's native KV offload (pure).

Dynamo's own support matrix marks the combination the stack builds on its prefill workers,
`MultiConnector[NixlConnector, OffloadingConnector]`, as "available but not yet validated end to
end" (docs.nvidia.com/dynamo/v1.6.2/knowledge-base/modular-components/backends/v-llm/
native-kv-offloading, "Support Matrix": "Disaggregated serving (MultiConnector: NixlConnector +
OffloadingConnector) ⚠️ Validated end to end with the pending Dynamo fix in #11219"; the same row
on the v1.5.0 page). The combination is available, so pre-flight does not refuse it: it notes it,
so the stack's numbers are read as experimental. The part of #11219 the project depends on (the
NIXL side channel inside a MultiConnector) is covered by the downward-API pod IP
(stacks/engine_argv/kv.py), and a step with no NIXL transfer is flagged DECODE-ONLY (dynamo.md F5).
KVBM (Dynamo < 1.6) is another connector and not this row.
"""

from __future__ import annotations

from stacks.config.loader import P
from stacks.config.schema import StackConfig, Topology
from stacks.engine_argv.kv import uses_kvbm

UPSTREAM_MATRIX = ("docs.nvidia.com/dynamo/v1.6.2/knowledge-base/modular-components/backends/"
                   "v-llm/native-kv-offloading (Support Matrix)")


def disagg_native_offload_notes(stack: StackConfig) -> list[str]:
    s = stack.serving
    if (s is None or s.topology != Topology.DISAGGREGATED or s.kv_offload.kind == "none"
            or uses_kvbm(s)):
        return []
    return [f"{P}serving.kvOffload: stack {stack.name} runs disaggregated serving with vLLM's "
            "native KV offload (MultiConnector: NixlConnector + OffloadingConnector), which "
            "Dynamo marks 'available but not yet validated end to end' (validated only with "
            f"the pending fix ai-dynamo/dynamo#11219; {UPSTREAM_MATRIX}); read its numbers as "
            "experimental, or set kvOffload.kind: none to measure a validated combination"]
