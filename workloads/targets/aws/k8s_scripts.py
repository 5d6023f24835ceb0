"""Small Python programs the cluster runner runs inside pods (`python3 -c SCRIPT args...`).

They are plain strings so the Job and exec specs carry them; the tests run each one for real
with the local interpreter. Only the standard library is used: the AIPerf image and the vLLM
runtime image both ship Python 3, nothing else is assumed.

- CLIENT_WRAPPER: runs AIPerf as a child, forwards SIGTERM/SIGINT to it, exits with its code,
  and samples the CPU of the whole container every SAMPLE_S into `<dir>/client_cpu.jsonl`
  ({"t_ns", "cores"} per line) so the saturation guard judges the in-cluster client the same way
  as the local one. Source: the container's cgroup (v2 `cpu.stat` usage_usec, v1
  `cpuacct.usage`), else the sum of every process's utime+stime under /proc (the container's
  own PID namespace). Before AIPerf starts it writes the project's AIPerf start-up files
  (workloads/aiperf_site RUN_FILES) into SITE_DIR and puts that
  first on AIPerf's PYTHONPATH, so the in-cluster client runs AIPerf as the local one does.
- WRITE_FILE: `WRITE_FILE <path> <bytes>`: reads exactly that many bytes from stdin into the
  file. The exec protocol (v4.channel.k8s.io) cannot close stdin, so the size says when to stop.
- PACK_DIR: `PACK_DIR <dir>`: writes a gzip tar of the directory's contents to stdout.
- VERSIONS: prints JSON {distribution: version or null} of the serving stack's Python packages.
- READ_TRACE: the frontend's request-trace lines written since a byte offset.
"""

from __future__ import annotations

from workloads import aiperf_site

SAMPLE_S = 0.5
CPU_SAMPLES = "client_cpu.jsonl"
# In the load generator's /tmp (an emptyDir, k8s_jobs.loadgen_job).
SITE_DIR = "/tmp/dynamo-bench-aiperf-site"

CLIENT_WRAPPER = r'''
import json, os, signal, subprocess, sys, time
out_dir = sys.argv[1]
argv = sys.argv[sys.argv.index("--") + 1:]
os.makedirs(out_dir, exist_ok=True)
HZ = os.sysconf("SC_CLK_TCK")

def cgroup_seconds():
    try:
        with open("/sys/fs/cgroup/cpu.stat") as f:
            for line in f:
                k, v = line.split()
                if k == "usage_usec":
                    return int(v) / 1e6, "cgroup-v2"
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpuacct/cpuacct.usage") as f:
            return int(f.read()) / 1e9, "cgroup-v1"
    except (OSError, ValueError):
        pass
    total = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
            except (OSError, IndexError, ValueError):
                pass
    return total / HZ, "proc"

site_dir = "%SITE_DIR%"
os.makedirs(site_dir, exist_ok=True)
for name, text in %SITE_FILES%.items():
    with open(os.path.join(site_dir, name), "w") as f:
        f.write(text)
env = dict(os.environ, PYTHONPATH=os.pathsep.join(
    p for p in (site_dir, os.environ.get("PYTHONPATH")) if p))
child = subprocess.Popen(argv, env=env)
def forward(signum, frame):
    child.send_signal(signum)
signal.signal(signal.SIGTERM, forward)
signal.signal(signal.SIGINT, forward)
with open(os.path.join(out_dir, "%CPU_SAMPLES%"), "w") as out:
    last_cpu, source = cgroup_seconds()
    last_t = time.monotonic()
    out.write(json.dumps({"source": source}) + "\n")
    while child.poll() is None:
        time.sleep(%SAMPLE_S%)
        cpu, _ = cgroup_seconds()
        t = time.monotonic()
        out.write(json.dumps({"t_ns": time.time_ns(),
                              "cores": round((cpu - last_cpu) / max(t - last_t, 1e-6), 4)}) + "\n")
        out.flush()
        last_cpu, last_t = cpu, t
sys.exit(child.returncode if child.returncode >= 0 else 128 - child.returncode)
'''.replace("%CPU_SAMPLES%", CPU_SAMPLES).replace("%SAMPLE_S%", str(SAMPLE_S)).replace(
    "%SITE_DIR%", SITE_DIR).replace("%SITE_FILES%", repr(aiperf_site.run_sources()))

WRITE_FILE = r'''
import os, sys
path, size = sys.argv[1], int(sys.argv[2])
os.makedirs(os.path.dirname(path), exist_ok=True)
left = size
with open(path + ".part", "wb") as f:
    while left:
        chunk = sys.stdin.buffer.read(min(left, 1 << 20))
        if not chunk:
            break
        f.write(chunk)
        left -= len(chunk)
if left:
    os.remove(path + ".part")
    sys.exit("stdin ended after %d of %d bytes" % (size - left, size))
os.replace(path + ".part", path)
print(size)
'''

PACK_DIR = r'''
import gzip, os, sys, tarfile
src = sys.argv[1]
if not os.path.isdir(src):
    sys.exit("no such directory: " + src)
with gzip.GzipFile(fileobj=sys.stdout.buffer, mode="wb", compresslevel=1) as gz:
    with tarfile.open(fileobj=gz, mode="w|") as tar:
        for name in sorted(os.listdir(src)):
            tar.add(os.path.join(src, name), arcname=name)
'''

VERSION_DISTRIBUTIONS = ("ai-dynamo", "ai-dynamo-runtime", "vllm", "nixl", "nixl-cu12",
                         "nixl-cu13", "torch", "ucx-py")

VERSIONS = r'''
import json
from importlib import metadata
out = {}
for dist in %DISTS%:
    try:
        out[dist] = metadata.version(dist)
    except metadata.PackageNotFoundError:
        out[dist] = None
print(json.dumps(out))
'''.replace("%DISTS%", repr(VERSION_DISTRIBUTIONS))


# `READ_TRACE <path> <offset>`: the frontend's request-trace lines (workloads.request_trace)
# written since byte `offset`, whole lines only, after a first line {"end": <next offset>,
# "size": <file size>}; a file shorter than `offset` (a restarted pod) is read from its start.
READ_TRACE = r'''
import json, os, sys
path, offset = sys.argv[1], int(sys.argv[2])
size = os.path.getsize(path) if os.path.exists(path) else 0
if size < offset:
    offset = 0
data = b""
if size > offset:
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(size - offset)
whole = data[:data.rfind(b"\n") + 1]
sys.stdout.write(json.dumps({"end": offset + len(whole), "size": size}) + "\n")
sys.stdout.flush()
sys.stdout.buffer.write(whole)
'''


# The interpreter's name in each image: the AIPerf image's own Job specs run `python`
# (aiperf/kubernetes/jobset.py, results sidecar); the graph runs `python3 -m dynamo.vllm`.
AIPERF_PYTHON = "python"
RUNTIME_PYTHON = "python3"


def python(script: str, *args: str, exe: str = AIPERF_PYTHON) -> list[str]:
    """The argv that runs `script` with the image's interpreter."""
    return [exe, "-c", script, *args]
