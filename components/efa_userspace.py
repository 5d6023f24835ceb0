"""The EFA userspace of an EFA worker pod (pure): where NIXL's LIBFABRIC backend gets
libfabric.so.1 and the efa provider, and the init containers that provide and verify it.

Two ways, chosen by stacks/conventions/kv_path.py:
- the image is a Dynamo `-efa` runtime: its own userspace under /opt/amazon/efa (the `aws` stage
  ran the AWS EFA installer there, ai-dynamo/dynamo container/templates/aws.Dockerfile);
- the image carries none (the recipe model builds): `serving.efaUserspaceImage` names a Dynamo
  `-efa` runtime, and the init container `efa-userspace` runs in it and copies into a pod-local
  emptyDir what the `-efa` image's loader would give NIXL there: /opt/amazon/efa/lib (libfabric,
  its provider directory), /opt/amazon/efa/bin/fi_info, and every library libfabric links as
  that image resolves it (`ldd`: rdma-core's libefa and libibverbs as the EFA installer put
  them, libnl, ...) except glibc, which must be the worker's own. The donor is an Ubuntu 24.04
  image (the 1.4 line's runtime stage plus the EFA installer's packages for it), as are the
  recipe builds whose release notes name a base ("Dynamo-built runtime on
  vllm/vllm-openai:v0.26.0-ubuntu2404" / "v0.28.0-ubuntu2404"), so the copied libraries were
  built for the worker's glibc; where the notes name none (Motif), the check below decides on
  the node. The worker's start shell puts the copy first in LD_LIBRARY_PATH, as the -efa
  image's ld.so.conf and LD_LIBRARY_PATH put /opt/amazon/efa/lib first (LD_LIBRARY_PATH is
  searched before the NIXL plugin's DT_RUNPATH `$ORIGIN`), and FI_PROVIDER_PATH at the copy's
  provider directory (libfabric's compiled-in one, /opt/amazon/efa/lib/libfabric, is absent in
  the worker image).

Either way the `libfabric-check` init container then runs in the worker's image with the
worker's library path and EFA devices (components/libfabric_check.py): libfabric loads with the
worker's loader and `fi_info -p efa` lists the efa provider, or the pod stops before the engine
starts. Kubernetes gives an init container the extended resources it requests, and the pod's
effective request is the larger of the init and app containers' (kubernetes.io, "Init
Containers", resource sharing within containers; the kubelet's device manager hands an init
container's devices on to the app containers, pkg/kubelet/cm/devicemanager/manager.go
`devicesToReuse`), so the check costs no extra EFA interfaces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components import efa, libfabric_check
from stacks.config.schema import ServingConfig
from stacks.conventions.k8s_names import EFA_USERSPACE_CONTAINER, LIBFABRIC_MISSING_EXIT
from stacks.conventions.kv_path import DONOR_HOME, EFA_HOME, KvPath, kv_path

VOLUME = "efa-userspace"
TERMINATION_LOG = libfabric_check.TERMINATION_LOG

# argv: <source home> <destination home> [termination log]. POSIX sh and coreutils, run in the
# donor image; the tests run it for real against a fake donor tree.
COPY_SCRIPT = r"""set -eu
src="$1" dst="$2" log="${3:-/dev/termination-log}"
fail() {
  msg=$(printf '{"ok": false, "error": "%s"}' "$(printf '%s' "$1" | tr '"\\\t\n' "'/  ")")
  echo "$msg" >&2; printf '%s' "$msg" > "$log" 2>/dev/null || true; exit EXIT_CODE
}
[ -e "$src/lib/libfabric.so.1" ] || fail "no $src/lib/libfabric.so.1: not a Dynamo -efa runtime"
[ -x "$src/bin/fi_info" ] || fail "no $src/bin/fi_info in the donor image"
deps=$(ldd "$src/lib/libfabric.so.1" 2>&1) || fail "ldd $src/lib/libfabric.so.1: $deps"
missing=$(printf '%s\n' "$deps" | grep 'not found' || true)
[ -z "$missing" ] || fail "libfabric's libraries are missing in the donor: $missing"
mkdir -p "$dst/lib" "$dst/bin"
cp -RP "$src/lib/." "$dst/lib/"
cp -L "$src/bin/fi_info" "$dst/bin/fi_info"
copied=""
for pair in $(printf '%s\n' "$deps" | awk '$2 == "=>" && $3 ~ /^\// {print $1 "=" $3}'); do
  name="${pair%%=*}" file="${pair#*=}"
  case "$name" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|ld-linux*) continue;;
  esac
  cp -L "$file" "$dst/lib/$name"
  copied="$copied${copied:+, }\"$name\""
done
printf '{"ok": true, "from": "%s", "linked": [%s]}' "$src" "$copied" > "$log" 2>/dev/null || true
echo "dynamo-bench: EFA userspace copied from $src to $dst (linked: $copied)" >&2
""".replace("EXIT_CODE", str(LIBFABRIC_MISSING_EXIT))


@dataclass(frozen=True)
class EfaUserspace:
    """What an EFA worker pod gets beside its main container's security context."""

    library_path: str
    env: dict[str, str] = field(default_factory=dict)
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)


def copy_container(donor: str) -> dict[str, Any]:
    """The init container that copies the donor's EFA userspace into the pod's volume."""
    return {"name": EFA_USERSPACE_CONTAINER, "image": donor,
            "command": ["/bin/sh", "-c", COPY_SCRIPT, "efa-userspace", EFA_HOME, DONOR_HOME,
                        TERMINATION_LOG],
            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
            "volumeMounts": [{"name": VOLUME, "mountPath": DONOR_HOME}]}


def for_worker(serving: ServingConfig, image: str, efa_devices: int) -> EfaUserspace:
    """The EFA userspace of a worker running `image` with `efa_devices` EFA interfaces.
    Raises ValueError on a stack with no path (pre-flight refuses it first, naming the field)."""
    path = kv_path(serving)
    if path == KvPath.EFA_IMAGE:
        check = libfabric_check.init_container(image, home=EFA_HOME, efa_devices=efa_devices)
        return EfaUserspace(library_path=efa.EFA_LIBRARY_PATH, init_containers=[check])
    if path != KvPath.EFA_DONOR or serving.efa_userspace_image is None:
        raise ValueError(f"no EFA userspace for NIXL LIBFABRIC on {image} (KV path "
                         f"{path.value}): set serving.efaUserspaceImage to a Dynamo -efa "
                         "runtime, or run an -efa image")
    library_path = f"{DONOR_HOME}/lib:{efa.EFA_LIBRARY_PATH}"
    env = {"FI_PROVIDER_PATH": f"{DONOR_HOME}/lib/libfabric"}
    mount = {"name": VOLUME, "mountPath": DONOR_HOME, "readOnly": True}
    check = libfabric_check.init_container(image, home=DONOR_HOME, efa_devices=efa_devices,
                                           library_path=library_path, env=env, mounts=[mount])
    return EfaUserspace(library_path=library_path, env=env,
                        init_containers=[copy_container(serving.efa_userspace_image), check],
                        volumes=[{"name": VOLUME, "emptyDir": {"sizeLimit": "2Gi"}}],
                        mounts=[mount])
