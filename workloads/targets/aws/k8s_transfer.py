"""Files in and out of the results PVC, through this run's transfer pod (exec, no kubectl cp).

One small pod per run mounts the PVC (k8s_jobs.transfer_pod). Datasets too large for a
ConfigMap are written through it before their Job starts; every Job's artifacts are read back
through it as one gzip tar (k8s_scripts.PACK_DIR) and unpacked into the step's local directory
with tarfile's `data` filter (no absolute paths, links or devices from the archive).
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from workloads.targets.aws import k8s_scripts
from workloads.targets.aws.k8s_client import (
    Clock,
    Kube,
    KubeError,
    is_not_found,
    retrying,
    to_dict,
)
from workloads.targets.aws.k8s_graph import pod_state

POLL_S = 2.0
START_TIMEOUT_S = 600.0
EXEC_TIMEOUT_S = 900.0


class ResultsVolume:
    """The results PVC as seen from this machine, through the run's transfer pod."""

    def __init__(self, kube: Kube, pod: dict, clock: Clock):
        self.kube, self.spec, self.clock = kube, pod, clock
        self.name = pod["metadata"]["name"]
        self.namespace = pod["metadata"]["namespace"]
        self._ready = False

    def ensure(self) -> None:
        """Create the pod if it is missing and wait (bounded) until it runs."""
        if self._ready:
            return
        retrying(self.clock, f"cannot create transfer pod {self.name}", self._create_once)
        deadline = self.clock.now() + START_TIMEOUT_S
        last = "pending"
        while self.clock.now() < deadline:
            pod = to_dict(retrying(self.clock, f"reading transfer pod {self.name}", lambda: (
                self.kube.core.read_namespaced_pod(self.name, self.namespace))))
            state = pod_state(pod)
            if state.ready:
                self._ready = True
                return
            if state.fatal:
                raise KubeError(f"transfer pod {self.name}: {state.problem}")
            last = state.problem or pod.get("status", {}).get("phase", "pending")
            self.clock.sleep(POLL_S)
        raise KubeError(f"transfer pod {self.name} not running after {START_TIMEOUT_S:.0f} s "
                        f"({last}): does the results PVC exist and can a CPU node mount it?")

    def _create_once(self) -> None:
        try:
            self.kube.core.create_namespaced_pod(self.namespace, self.spec)
        except Exception as exc:  # noqa: BLE001 - the API's own exception type
            if getattr(exc, "status", None) != 409:   # 409: a resumed run's pod is there
                raise

    def _exec(self, argv: list[str], stdin: bytes | None = None):
        self.ensure()
        return self.kube.exec(self.namespace, self.name, argv, container="transfer",
                              stdin=stdin, timeout_s=EXEC_TIMEOUT_S)

    def write(self, remote_path: str, data: bytes) -> None:
        out = self._exec(k8s_scripts.python(k8s_scripts.WRITE_FILE, remote_path,
                                            str(len(data))), stdin=data)
        out.check(f"writing {remote_path} on the results PVC")

    def fetch_dir(self, remote_dir: str, local_dir: Path) -> list[str]:
        """Copy the contents of `remote_dir` into `local_dir`; returns the names copied."""
        raw = self._exec(k8s_scripts.python(k8s_scripts.PACK_DIR, remote_dir)).check(
            f"reading {remote_dir} from the results PVC")
        local_dir.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
            names = tar.getnames()
            tar.extractall(local_dir, filter="data")
        return names

    def delete(self) -> None:
        try:
            self.kube.core.delete_namespaced_pod(self.name, self.namespace,
                                                 grace_period_seconds=5)
        except Exception as exc:  # noqa: BLE001
            if not is_not_found(exc):
                raise
        self._ready = False
