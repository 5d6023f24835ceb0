"""The frontend pods' request traces on a cluster (workloads.request_trace), read by pod exec.

Each frontend pod writes its own file (stacks.conventions.frontend_trace.REQUEST_TRACE_POD_PATH, set
in the graph by components.graph). After each step the runner asks every frontend pod for the lines
written since its last read (k8s_scripts.READ_TRACE: whole lines from a byte offset, so a run never
re-reads a long file) and keeps those whose request arrived in the step's window. The window
is this machine's clock, the records the pod's: both NTP-synchronised on EKS.
"""

from __future__ import annotations

import json

from stacks.conventions.frontend_trace import REQUEST_TRACE_POD_PATH
from workloads.routing_evidence import request_of
from workloads.targets.aws import k8s_graph, k8s_scripts
from workloads.targets.aws.k8s_client import Kube, KubeError


class FrontendTraces:
    def __init__(self, kube: Kube, namespace: str):
        self.kube, self.namespace = kube, namespace
        self.offsets: dict[str, int] = {}               # pod name -> bytes already read
        self.seen: list[tuple[float, str]] = []          # (received ms, line) not yet past

    def read(self, frontends: list[dict], since_ms: float, until_ms: float) -> list[str]:
        """The finished-request lines of every frontend pod received within the window."""
        for pod in frontends:
            name = pod["metadata"]["name"]
            argv = k8s_scripts.python(k8s_scripts.READ_TRACE, REQUEST_TRACE_POD_PATH,
                                      str(self.offsets.get(name, 0)),
                                      exe=k8s_scripts.RUNTIME_PYTHON)
            out = self.kube.exec(self.namespace, name, argv,
                                 container=k8s_graph.MAIN_CONTAINER, timeout_s=120).check(
                f"reading the request trace of {name}")
            head, _, body = out.partition(b"\n")
            try:
                self.offsets[name] = int(json.loads(head)["end"])
            except (ValueError, KeyError, TypeError) as exc:
                raise KubeError(f"request trace of {name}: unexpected reply {head[:200]!r}"
                                ) from exc
            for line in body.decode(errors="replace").splitlines():
                req = request_of(line)
                received = req.get("request_received_ms") if req else None
                if isinstance(received, int | float):
                    self.seen.append((float(received), line))
        # steps run one after another: what arrived before this window is never asked again
        self.seen = [(t, line) for t, line in self.seen if t >= since_ms]
        return [line for t, line in self.seen if t <= until_ms]
