"""The init container that checks an EFA worker's image can run NIXL's LIBFABRIC backend (pure).

Why (dynamo.md F2, aws.md R6): NIXL's LIBFABRIC plugin links the system `libfabric.so.1`
(nixl-cu13 1.4.1 wheel: `libplugin_LIBFABRIC.so` NEEDED libfabric.so.1, RUNPATH $ORIGIN, no
libfabric bundled); only Dynamo's `-efa` images install it (container/templates/aws.Dockerfile:
"AWS EFA installer which includes: libfabric and aws-ofi-nccl"), and the recipe model builds
(`1.4.1-a.x-k2-post.1`, ...) have no `-efa` variant. A plugin that cannot be loaded is not in
`getAvailPlugins()`; `nixl_agent.__init__` only warns "Skipping backend registration %s due to
the missing plugin." and vLLM's `register_memory(..., backends=["LIBFABRIC"])` then indexes
`self.backends["LIBFABRIC"]` -> KeyError (ai-dynamo/nixl src/api/python/_api.py): the worker
crash-loops at engine start, before the run-time attestation could say why. Whether the EFA
userspace loads in an image only the image can answer, so every EFA worker pod first runs this
check in the worker's image, with the library path, libfabric env and EFA interfaces the worker
gets (components/efa_userspace.py: the image's own /opt/amazon/efa, or a donor's copy): it
loads `libfabric.so.1` and records which file the loader mapped, runs `fi_info --version` and
`fi_info -p efa` from the same userspace (the efa provider must list a domain), lists NIXL's
loadable plugins, writes what it saw as JSON to the termination message (kept in the pod status,
which the runner reads and the attestation records), and exits LIBFABRIC_MISSING_EXIT when any
of that fails, so the pod never starts an engine that would fail or fall back, and the runner
stops at once with the message.

The Dynamo operator keeps a podTemplate's initContainers: GenerateBasePodSpec merges the
component's pod spec over its base with `mergo.Merge(&podSpec, ...PodSpec, mergo.WithOverride)`
(ai-dynamo/dynamo deploy/operator/internal/dynamo/graph.go@d4872d7e).
"""

from __future__ import annotations

from typing import Any

from components import efa
from components.conventions import EFA_RESOURCE
from stacks.conventions.k8s_names import LIBFABRIC_CHECK_CONTAINER, LIBFABRIC_MISSING_EXIT

TERMINATION_LOG = "/dev/termination-log"

# argv: [termination-log path, library name, fi_info path ('' to skip)]; standard library
# only, nixl when the image has it. Records which libfabric file the loader mapped, the
# libfabric version fi_info reports and the providers/domains `fi_info -p efa` lists.
SCRIPT = r"""
import ctypes, json, subprocess, sys
log_path = sys.argv[1] if len(sys.argv) > 1 else "/dev/termination-log"
lib = sys.argv[2] if len(sys.argv) > 2 else "libfabric.so.1"
fi_info = sys.argv[3] if len(sys.argv) > 3 else ""
seen = {"library": lib, "libfabric": None, "nixl_plugins": None}
try:
    ctypes.CDLL(lib)
    seen["libfabric"] = "loaded"
except OSError as exc:
    seen["libfabric"] = "missing: " + str(exc)[:200]
try:
    stem = lib.split(".so")[0] + ".so"
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split(None, 5)[5].strip() for line in maps
                        if len(line.split(None, 5)) == 6 and stem in line.rsplit("/", 1)[-1]})
    seen["libfabric_path"] = paths[0] if paths else None
except OSError:
    seen["libfabric_path"] = None
if fi_info and seen["libfabric"] == "loaded":
    try:
        version = subprocess.run([fi_info, "--version"], capture_output=True, text=True,
                                 timeout=60)
        seen["fi_info_version"] = " ".join(version.stdout.split())[:120]
        out = subprocess.run([fi_info, "-p", "efa"], capture_output=True, text=True,
                             timeout=120)
        fields = [line.strip().split(":", 1) for line in out.stdout.splitlines() if ":" in line]
        seen["fi_info_exit"] = out.returncode
        seen["efa_providers"] = sorted({v.strip() for k, v in fields if k == "provider"})
        seen["efa_domains"] = sorted({v.strip() for k, v in fields if k == "domain"})[:16]
        if out.returncode:
            seen["fi_info_error"] = (out.stderr or out.stdout).strip()[-200:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        seen["fi_info_exit"], seen["fi_info_error"] = None, str(exc)[:200]
try:
    from nixl._api import nixl_agent, nixl_agent_config
    agent = nixl_agent("dynamo-bench-libfabric-check", nixl_agent_config(backends=[]))
    seen["nixl_plugins"] = sorted(agent.get_plugin_list())
except Exception as exc:
    seen["nixl_error"] = (type(exc).__name__ + ": " + str(exc))[:200]
plugins = seen["nixl_plugins"]
seen["ok"] = (seen["libfabric"] == "loaded" and (plugins is None or "LIBFABRIC" in plugins)
              and (not fi_info or (seen.get("fi_info_exit") == 0
                                   and "efa" in seen.get("efa_providers", []))))
text = json.dumps(seen, sort_keys=True)
print(text)
try:
    with open(log_path, "w") as f:
        f.write(text)
except OSError:
    pass
sys.exit(0 if seen["ok"] else EXIT_CODE)
""".replace("EXIT_CODE", str(LIBFABRIC_MISSING_EXIT))


def init_container(image: str, *, home: str | None = None, efa_devices: int = 0,
                   library_path: str = efa.EFA_LIBRARY_PATH, env: dict[str, str] | None = None,
                   mounts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The check, run in the worker's own image (`image`) before the worker starts, with the
    worker's library path, libfabric env and EFA interfaces: `home` is where fi_info is
    (`<home>/bin/fi_info`; None: load libfabric and list NIXL's plugins only). With EFA
    devices it runs with the worker's privileges, as opening them takes in the worker."""
    shell = (f'export LD_LIBRARY_PATH="{library_path}${{LD_LIBRARY_PATH:+:'
             '$LD_LIBRARY_PATH}"\nexec python3 -c "$0" "$@"')
    fi_info = f"{home}/bin/fi_info" if home else ""
    requests: dict[str, str] = {"cpu": "250m", "memory": "1Gi"}
    out: dict[str, Any] = {
        "name": LIBFABRIC_CHECK_CONTAINER, "image": image,
        "command": ["/bin/sh", "-c", shell, SCRIPT, TERMINATION_LOG, "libfabric.so.1", fi_info],
        "resources": {"requests": requests}}
    if efa_devices:
        requests[EFA_RESOURCE] = str(efa_devices)
        out["resources"]["limits"] = {EFA_RESOURCE: str(efa_devices)}
        out["securityContext"] = efa.security_context()
        out["env"] = [{"name": k, "value": v} for k, v in {**efa.REQUIRED_ENV,
                                                           **(env or {})}.items()]
    if mounts:
        out["volumeMounts"] = mounts
    return out
