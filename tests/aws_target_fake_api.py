"""The client-boundary calls of the fake cluster (tests/aws_target_fake.py): the CoreV1Api,
BatchV1Api and CustomObjectsApi methods the aws target uses, with the real client's names and
arguments, over the cluster's in-memory objects. Creations are validated strictly (K8S_VERSION)."""

from __future__ import annotations

import copy
import re
from typing import Any

from kubernetes.client.exceptions import ApiException

from workloads.targets.aws.k8s_graph import OP_GRAPH_LABEL

JOB_LABEL = "batch.kubernetes.io/job-name"


def matches(labels: dict[str, str], selector: str | None) -> bool:
    """Kubernetes equality / set-based label selectors (`k=v`, `k!=v`, `k in (a,b)`, `k`)."""
    if not selector:
        return True
    for term in re.findall(r"[^,(]+(?:\([^)]*\))?", selector):
        term = term.strip()
        if m := re.fullmatch(r"(\S+)\s+in\s+\(([^)]*)\)", term):
            if labels.get(m[1]) not in [v.strip() for v in m[2].split(",")]:
                return False
        elif "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v:
                return False
        elif term not in labels:
            return False
    return True


def node_fits(node: dict, pod_spec: dict) -> bool:
    """The scheduler's view of requiredDuringScheduling node affinity (In only)."""
    labels = node["metadata"]["labels"]
    req = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = req.get("nodeSelectorTerms") or []
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    return not terms or any(all(labels.get(e["key"]) in e["values"]
                                for e in t["matchExpressions"]) for t in terms)


def _not_found(kind: str, name: str) -> ApiException:
    return ApiException(status=404, reason=f"{kind} {name} not found")


class FakeCoreV1:
    def __init__(self, c: Any):
        self.c = c

    def list_namespaced_pod(self, namespace, label_selector=None):
        for job in list(self.c.jobs.values()):
            self.c.advance_job(job)
        return {"items": [self.c.pod_view(p) for (ns, _), p in sorted(self.c.pods.items())
                          if ns == namespace and matches(p["metadata"]["labels"],
                                                         label_selector)]}

    def read_namespaced_pod(self, name, namespace):
        pod = self.c.pods.get((namespace, name))
        if pod is None:
            raise _not_found("pod", name)
        return self.c.pod_view(pod)

    def create_namespaced_pod(self, namespace, body):
        assert body["metadata"]["namespace"] == namespace
        if (namespace, body["metadata"]["name"]) in self.c.pods:
            raise ApiException(status=409, reason="AlreadyExists")
        self.c.record_create(body)
        pod = copy.deepcopy(body)
        pod["metadata"]["uid"] = self.c.uid()
        pod["_fake"] = {"created": self.c.clock.t, "transfer": True}
        self.c.pods[(namespace, body["metadata"]["name"])] = pod
        return self.c.pod_view(pod)

    def delete_namespaced_pod(self, name, namespace, body=None, grace_period_seconds=None):
        pod = self.c.pods.get((namespace, name))
        if pod is None:
            raise _not_found("pod", name)
        want = ((body or {}).get("preconditions") or {}).get("uid")
        if want and want != pod["metadata"]["uid"]:
            raise ApiException(status=409, reason="Precondition failed: UID mismatch")
        del self.c.pods[(namespace, name)]
        self.c.deleted.append(("Pod", namespace, name))
        self.c.serving.release(name)
        comp = pod["_fake"].get("comp")
        if comp is not None:   # the operator replaces it
            graph = pod["metadata"]["labels"][OP_GRAPH_LABEL]
            self.c._operator_pod(namespace, graph, comp, ready_now=False)
        return {"status": "Success"}

    def read_namespaced_pod_log(self, name, namespace, container=None, previous=False,
                                tail_lines=None, limit_bytes=None):
        pod = self.c.pods.get((namespace, name))
        if pod is None:
            raise _not_found("pod", name)
        fake = pod["_fake"]
        text = fake.get("log") or (fake["comp"].log if "comp" in fake else "")
        if tail_lines:
            text = "\n".join(text.splitlines()[-tail_lines:])
        return text[:limit_bytes] if limit_bytes else text

    def read_node(self, name):
        self.c.expire_nodes()
        if name not in self.c.nodes:
            raise _not_found("node", name)
        return copy.deepcopy(self.c.nodes[name])

    def list_node(self, label_selector=None):
        self.c.expire_nodes()
        return {"items": [copy.deepcopy(n) for n in self.c.nodes.values()
                          if matches(n["metadata"]["labels"], label_selector)]}

    def create_namespaced_config_map(self, namespace, body):
        assert body["metadata"]["namespace"] == namespace
        self.c.record_create(body)
        self.c.configmaps[(namespace, body["metadata"]["name"])] = copy.deepcopy(body)
        return body

    def delete_namespaced_config_map(self, name, namespace):
        if (namespace, name) not in self.c.configmaps:
            raise _not_found("configmap", name)
        del self.c.configmaps[(namespace, name)]
        self.c.deleted.append(("ConfigMap", namespace, name))

    def list_namespaced_config_map(self, namespace, label_selector=None):
        return {"items": [copy.deepcopy(c) for (ns, _), c in self.c.configmaps.items()
                          if ns == namespace and matches(c["metadata"].get("labels", {}),
                                                         label_selector)]}


class FakeBatchV1:
    def __init__(self, c: Any):
        self.c = c

    def create_namespaced_job(self, namespace, body):
        assert body["metadata"]["namespace"] == namespace
        key = (namespace, body["metadata"]["name"])
        if key in self.c.jobs:
            raise ApiException(status=409, reason="AlreadyExists")
        self.c.record_create(body)
        job = copy.deepcopy(body)
        job["_fake"] = {"created": self.c.clock.t}
        spec = job["spec"]["template"]["spec"]
        node = next((n for n in sorted(self.c.nodes) if node_fits(self.c.nodes[n], spec)),
                    None)
        pod_name = f"{body['metadata']['name']}-x7k2p"
        labels = {**job["spec"]["template"]["metadata"]["labels"],
                  JOB_LABEL: body["metadata"]["name"], "job-name": body["metadata"]["name"]}
        self.c.pods[(namespace, pod_name)] = {
            "metadata": {"name": pod_name, "namespace": namespace, "uid": self.c.uid(),
                         "labels": labels},
            "spec": {**copy.deepcopy(spec), "nodeName": node},
            "_fake": {"created": self.c.clock.t, "job": body["metadata"]["name"]}}
        job["_fake"]["pod"] = pod_name
        self.c.jobs[key] = job
        return body

    def read_namespaced_job_status(self, name, namespace):
        job = self.c.jobs.get((namespace, name))
        if job is None:
            raise _not_found("job", name)
        self.c.advance_job(job)
        out = {k: v for k, v in copy.deepcopy(job).items() if k != "_fake"}
        result = job["_fake"].get("result")
        if result is not None and self.c.clock.t - job["_fake"]["result_at"] < \
                self.c.job_condition_lag_s:
            # the pod has ended, the Job controller has not written the end yet (since
            # Kubernetes 1.31 a failing Job first carries FailureTarget)
            out["status"] = {"active": 0, "conditions": [] if result.exit_code == 0 else [
                {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded"}]}
        elif result is None:
            out["status"] = {"active": 1}
        elif result.exit_code == 0:
            out["status"] = {"succeeded": 1, "conditions": [
                {"type": "Complete", "status": "True"}]}
        else:
            out["status"] = {"failed": 1, "conditions": [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit"}]}
        return out

    def delete_namespaced_job(self, name, namespace, propagation_policy=None):
        if (namespace, name) not in self.c.jobs:
            raise _not_found("job", name)
        job = self.c.jobs.pop((namespace, name))
        self.c.deleted.append(("Job", namespace, name))
        assert propagation_policy in ("Background", "Foreground"), "orphaned pods"
        pod = job["_fake"].get("pod")
        if pod and (namespace, pod) in self.c.pods:
            del self.c.pods[(namespace, pod)]
            self.c.deleted.append(("Pod", namespace, pod))

    def list_namespaced_job(self, namespace, label_selector=None):
        return {"items": [{k: v for k, v in j.items() if k != "_fake"}
                          for (ns, _), j in self.c.jobs.items()
                          if ns == namespace and matches(j["metadata"].get("labels", {}),
                                                         label_selector)]}


class FakeCustomObjects:
    def __init__(self, c: Any):
        self.c = c

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        assert (group, version, plural) == ("nvidia.com", "v1beta1", "dynamographdeployments")
        if (namespace, name) not in self.c.dgds:
            raise _not_found("dynamographdeployment", name)
        return self.c.graph_view(namespace, name)
