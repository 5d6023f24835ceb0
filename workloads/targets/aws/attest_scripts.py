"""Programs the attestation runs inside a serving pod (`python3 -c SCRIPT args...`), standard
library only; the tests run each for real with the local interpreter.

- GPU_PROBE `[environ file]`: the GPUs the serving process can use. It reads the environment of
  PID 1 (the engine: the EFA workers' shell `exec`s it, components/efa.py), lists the node's
  GPUs with `nvidia-smi --query-gpu=index,uuid,driver_version --format=csv,noheader` (which
  itself ignores CUDA_VISIBLE_DEVICES and, in a privileged container, sees every GPU of the
  node), and keeps those CUDA_VISIBLE_DEVICES names (by UUID or index), as CUDA does. It also
  records how the device plugin answered (the entries under /var/run/nvidia-container-devices
  of its volume-mounts strategy) and how the EFA workers' shell pinned (its
  DYNAMO_BENCH_GPU_SOURCE). Prints JSON {cuda_visible_devices, nvidia_visible_devices,
  device_list_mounts, pinned_by, gpus: [{index, uuid, driver}], nvidia_smi_exit, stderr}.
- METRICS_GET `<port>`: the pod's own /metrics on 127.0.0.1 (the API server proxies Services,
  not pod ports; exec reaches every pod).
- LOADED_FABRIC `[proc root]`: what the EFA worker's processes really loaded for NIXL
  LIBFABRIC. vLLM's NIXL agents live in its TP worker processes, not only in PID 1, so every
  process of the container's PID namespace is read: the libfabric, libefa and libibverbs files
  each maps (/proc/<pid>/maps; the path the loader resolved, e.g. a donor's copy or the -efa
  image's /opt/amazon/efa/lib) and how many EFA devices it holds open (/proc/<pid>/fd links to
  /dev/infiniband/uverbs*: the efa provider opens one per domain). Prints JSON {libfabric,
  libefa, libibverbs: {path: [pids]}, uverbs_fds: {pid: n}}.
"""

from __future__ import annotations

from stacks.conventions.k8s_names import DEVICE_LIST_DIR, GPU_SOURCE_ENV

GPU_PROBE = r'''
import json, os, subprocess, sys
path = sys.argv[1] if len(sys.argv) > 1 else "/proc/1/environ"
listing = sys.argv[2] if len(sys.argv) > 2 else "{DEVICE_LIST_DIR}"
try:
    mounts = sorted(os.listdir(listing))
except OSError:
    mounts = None
try:
    raw = open(path, "rb").read().decode(errors="replace")
except OSError as exc:
    raw = ""
env = dict(kv.split("=", 1) for kv in raw.split("\0") if "=" in kv)
try:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,driver_version",
                          "--format=csv,noheader"], capture_output=True, text=True, timeout=60)
    code, stdout, stderr = out.returncode, out.stdout, out.stderr
except (OSError, subprocess.TimeoutExpired) as exc:
    code, stdout, stderr = 127, "", str(exc)
gpus = []
for line in stdout.splitlines():
    cols = [c.strip() for c in line.split(",")]
    if len(cols) >= 3:
        gpus.append({"index": cols[0], "uuid": cols[1], "driver": cols[2]})
visible = env.get("CUDA_VISIBLE_DEVICES")
if visible is not None:
    by_name = {g["uuid"]: g for g in gpus} | {g["index"]: g for g in gpus}
    kept = []
    for name in [v.strip() for v in visible.split(",") if v.strip()]:
        if name not in by_name:
            break  # CUDA stops at the first name it cannot resolve
        kept.append(by_name[name])
    gpus = kept
print(json.dumps({"cuda_visible_devices": visible,
                  "nvidia_visible_devices": env.get("NVIDIA_VISIBLE_DEVICES"),
                  "device_list_mounts": mounts,
                  "pinned_by": env.get("{GPU_SOURCE_ENV}"),
                  "gpus": gpus, "nvidia_smi_exit": code, "stderr": stderr[-300:]}))
'''

# the names both sides agree on (stacks/conventions/k8s_names.py), put in without an f-string
GPU_PROBE = (GPU_PROBE.replace("{DEVICE_LIST_DIR}", DEVICE_LIST_DIR)
             .replace("{GPU_SOURCE_ENV}", GPU_SOURCE_ENV))

METRICS_GET = r'''
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=20) as r:
    sys.stdout.write(r.read().decode(errors="replace"))
'''

LOADED_FABRIC = r'''
import json, os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else "/proc"
names = {"libfabric": re.compile(r"^libfabric[.-]"), "libefa": re.compile(r"^libefa\.so"),
         "libibverbs": re.compile(r"^libibverbs\.so")}
mapped = {k: {} for k in names}
uverbs = {}
for pid in sorted((p for p in os.listdir(root) if p.isdigit()), key=int):
    try:
        with open(os.path.join(root, pid, "maps")) as f:
            lines = f.read().splitlines()
    except OSError:
        continue
    for line in lines:
        parts = line.split(None, 5)
        path = parts[5].strip() if len(parts) == 6 else ""
        for key, rx in names.items():
            if rx.match(path.rsplit("/", 1)[-1]):
                mapped[key].setdefault(path, set()).add(int(pid))
    fd_dir = os.path.join(root, pid, "fd")
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        fds = []
    held = 0
    for fd in fds:
        try:
            held += os.readlink(os.path.join(fd_dir, fd)).startswith("/dev/infiniband/uverbs")
        except OSError:
            pass
    if held:
        uverbs[pid] = held
out = {key: {path: sorted(pids) for path, pids in m.items()} for key, m in mapped.items()}
print(json.dumps({**out, "uverbs_fds": uverbs}))
'''
