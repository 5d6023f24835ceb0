"""The init container that checks an EFA worker's image can run NIXL's LIBFABRIC backend (pure).

Why (dynamo.md F2, aws.md R6): NIXL's LIBFABRIC plugin links the system `libfabric.so.1`
(nixl-cu13 1.4.1 wheel: `libplugin_LIBFABRIC.so` NEEDED libfabric.so.1, RUNPATH $ORIGIN, no
libfabric bundled); only Dynamo's `-efa` images install it (container/templates/aws.Dockerfile:
"AWS EFA installer which includes: libfabric and aws-ofi-nccl"), and the recipe model builds
(`1.4.1-a.x-k2-post.1`, ...) have no `-efa` variant. A plugin that cannot be loaded is not in
`getAvailPlugins()`; `nixl_agent.__init__` only warns "Skipping backend registration %s due to
the missing plugin." and vLLM's `register_memory(..., backends=["LIBFABRIC"])` then indexes
`self.backends["LIBFABRIC"]` -> KeyError (ai-dynamo/nixl src/api/python/_api.py): the worker
crash-loops at engine start, before the run-time attestation could say why. Whether an image
carries libfabric only the image can answer, so every EFA worker pod first runs this check in
its own image, with the library path the worker's start shell sets (components/efa.py): it
loads `libfabric.so.1` and lists NIXL's loadable plugins, writes what it saw as JSON to the
termination message (kept in the pod status, which the runner reads and the attestation
records), and exits LIBFABRIC_MISSING_EXIT when LIBFABRIC cannot load, so the pod never starts
an engine that would fail and the runner stops at once with the message.

The Dynamo operator keeps a podTemplate's initContainers: GenerateBasePodSpec merges the
component's pod spec over its base with `mergo.Merge(&podSpec, ...PodSpec, mergo.WithOverride)`
(ai-dynamo/dynamo deploy/operator/internal/dynamo/graph.go@d4872d7e).
"""

from __future__ import annotations

from typing import Any

from components import efa
from stacks.conventions.k8s_names import LIBFABRIC_CHECK_CONTAINER, LIBFABRIC_MISSING_EXIT

TERMINATION_LOG = "/dev/termination-log"

# argv: [termination-log path, library name]; standard library only, nixl when the image has it.
SCRIPT = r'''
import ctypes, json, sys
log_path = sys.argv[1] if len(sys.argv) > 1 else "/dev/termination-log"
lib = sys.argv[2] if len(sys.argv) > 2 else "libfabric.so.1"
seen = {"library": lib, "libfabric": None, "nixl_plugins": None}
try:
    ctypes.CDLL(lib)
    seen["libfabric"] = "loaded"
except OSError as exc:
    seen["libfabric"] = "missing: " + str(exc)[:200]
try:
    from nixl._api import nixl_agent, nixl_agent_config
    agent = nixl_agent("dynamo-bench-libfabric-check", nixl_agent_config(backends=[]))
    seen["nixl_plugins"] = sorted(agent.get_plugin_list())
except Exception as exc:
    seen["nixl_error"] = (type(exc).__name__ + ": " + str(exc))[:200]
plugins = seen["nixl_plugins"]
seen["ok"] = seen["libfabric"] == "loaded" and (plugins is None or "LIBFABRIC" in plugins)
text = json.dumps(seen, sort_keys=True)
print(text)
try:
    with open(log_path, "w") as f:
        f.write(text)
except OSError:
    pass
sys.exit(0 if seen["ok"] else EXIT_CODE)
'''.replace("EXIT_CODE", str(LIBFABRIC_MISSING_EXIT))


def init_container(image: str) -> dict[str, Any]:
    """The check, run in the worker's own image before the worker starts."""
    shell = (f'export LD_LIBRARY_PATH="{efa.EFA_LIBRARY_PATH}${{LD_LIBRARY_PATH:+:'
             '$LD_LIBRARY_PATH}"\nexec python3 -c "$0" "$@"')
    return {"name": LIBFABRIC_CHECK_CONTAINER, "image": image,
            "command": ["/bin/sh", "-c", shell, SCRIPT, TERMINATION_LOG],
            "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}
