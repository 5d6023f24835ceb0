"""The runner's RBAC covers every Kubernetes call the runner makes (runner.md M3): a quick run
on the fake cluster, each call recorded and mapped to the (API group, resource, verb, namespace)
the API server would authorise, checked against components/runner_rbac.py's rules; and every
client method the runner's source calls is in that mapping, so a call added later without RBAC
fails here. The load generator's ServiceAccount has no Role (its pods mount no token)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import httpx
import pytest

from components.loadgen_specs import loadgen_rbac
from components.monitoring import PROMETHEUS_SERVICE
from components.runner_rbac import (
    RUNNER_GROUP,
    node_rules,
    prometheus_rbac,
    prometheus_rules,
    runner_rules,
)
from stacks.conventions.k8s_names import MONITORING_NAMESPACE
from tests.aws_target_deploy import NAMESPACE, connect_runner, deploy
from tests.k8s_validation import validate_builtin
from workloads.runner import RunOptions, run
from workloads.targets.aws.k8s_client import Kube, proxy_path

ROOT = Path(__file__).resolve().parents[1]
# client method -> (API group, resource, verb); the namespace comes from the call
CALLS = {
    "list_namespaced_pod": ("", "pods", "list"), "read_namespaced_pod": ("", "pods", "get"),
    "create_namespaced_pod": ("", "pods", "create"),
    "delete_namespaced_pod": ("", "pods", "delete"),
    "read_namespaced_pod_log": ("", "pods/log", "get"),
    "read_node": ("", "nodes", "get"), "list_node": ("", "nodes", "list"),
    "create_namespaced_config_map": ("", "configmaps", "create"),
    "list_namespaced_config_map": ("", "configmaps", "list"),
    "delete_namespaced_config_map": ("", "configmaps", "delete"),
    "create_namespaced_job": ("batch", "jobs", "create"),
    "list_namespaced_job": ("batch", "jobs", "list"),
    "delete_namespaced_job": ("batch", "jobs", "delete"),
    "read_namespaced_job_status": ("batch", "jobs/status", "get"),
    "get_namespaced_custom_object": ("nvidia.com", "dynamographdeployments", "get"),
    "connect_get_namespaced_pod_exec": ("", "pods/exec", "create"),
}
CLUSTER_SCOPED = {"read_node", "list_node"}


def allowed(rules: list[dict], group: str, resource: str, verb: str, name: str | None) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
               and ("resourceNames" not in r or name in r["resourceNames"]) for r in rules)


class _Recorder:
    def __init__(self, api, calls: list) -> None:
        self._api, self._calls = api, calls

    def __getattr__(self, method: str):
        real = getattr(self._api, method)

        def call(*args, **kwargs):
            # the kubernetes client's argument order: (namespace, ...) for create/list,
            # (name, namespace, ...) for read/delete, (group, version, namespace, ...) custom
            at = 2 if "custom_object" in method else 0 if method.startswith(
                ("create_", "list_")) else 1
            ns = kwargs.get("namespace", args[at] if "namespaced" in method else None)
            self._calls.append((method, ns, None))
            return real(*args, **kwargs)
        return call


def recording(kube: Kube, calls: list) -> Kube:
    def exec_(namespace, pod, *a, **k):
        calls.append(("connect_get_namespaced_pod_exec", namespace, None))
        return kube.exec(namespace, pod, *a, **k)

    def http(request: httpx.Request) -> httpx.Response:
        path = proxy_path(request.url).split("/")   # /api/v1/namespaces/<ns>/services/<n>/proxy
        calls.append((f"proxy:{request.method}", path[4], path[6]))
        return kube.transport.handle_request(request)

    return Kube(core=_Recorder(kube.core, calls), batch=_Recorder(kube.batch, calls),
                custom=_Recorder(kube.custom, calls), exec=exec_,
                transport=httpx.MockTransport(http))


def _covered(method: str, ns: str | None, name: str | None) -> bool:
    if method.startswith("proxy:"):
        verb = "get" if method == "proxy:GET" else "create"
        rules = (prometheus_rules(PROMETHEUS_SERVICE) if ns == MONITORING_NAMESPACE
                 else runner_rules() if ns == NAMESPACE else [])
        return allowed(rules, "", "services/proxy", verb, name)
    group, resource, verb = CALLS[method]
    if method in CLUSTER_SCOPED:
        return allowed(node_rules(), group, resource, verb, None)
    return ns == NAMESPACE and allowed(runner_rules(), group, resource, verb, None)


def test_every_call_of_a_run_is_allowed_by_the_runners_rbac(tmp_path, monkeypatch) -> None:
    d = connect_runner(monkeypatch, deploy(tmp_path, "agg-a100"))
    calls: list = []
    monkeypatch.setattr("workloads.targets.aws.target.connect",
                        lambda cfg: recording(d.cluster.kube(), calls))
    result = run(RunOptions(stack="agg-a100", scale="quick", run_id="rbac",
                            runs_dir=tmp_path / "runs", outputs_file=d.outputs,
                            show_progress=False))
    assert result.status == "complete", result.steps
    seen = {(m, ns, n) for m, ns, n in calls}
    assert {m for m, _, _ in seen} >= {"create_namespaced_job", "read_namespaced_pod_log",
                                      "connect_get_namespaced_pod_exec", "proxy:POST",
                                      "proxy:GET", "list_node"}
    assert any(ns == MONITORING_NAMESPACE for _, ns, _ in seen)   # the Prometheus queries
    refused = sorted(c for c in seen if not _covered(*c))
    assert refused == []


def test_every_client_method_the_runner_calls_is_mapped() -> None:
    api_methods = set()
    for path in [*(ROOT / "workloads").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and re.fullmatch(
                    r"(list|read|create|delete|patch|replace|get|connect)_\w*(namespaced|node)"
                    r"\w*", node.attr):
                api_methods.add(node.attr)
    assert api_methods and api_methods <= set(CALLS), api_methods - set(CALLS)


@pytest.mark.parametrize("obj", [*loadgen_rbac(NAMESPACE), *prometheus_rbac(PROMETHEUS_SERVICE)],
                         ids=lambda o: f"{o['kind']}/{o['metadata']['name']}")
def test_the_rbac_objects_are_valid_and_bound_to_the_runner_group(obj) -> None:
    validate_builtin(obj)
    if obj["kind"].endswith("Binding"):
        assert obj["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                    "name": RUNNER_GROUP}]


def test_the_load_generator_account_has_no_role() -> None:
    objs = loadgen_rbac(NAMESPACE)
    bound = [s for o in objs if o["kind"].endswith("Binding") for s in o["subjects"]]
    assert all(s["kind"] == "Group" for s in bound)     # no ServiceAccount is bound
