"""Kubernetes calls have a timeout, and transient API failures are retried, a bounded number
of times, where the run would otherwise end (issue 28, runner.md R4)."""

from __future__ import annotations

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from tests.aws_target_fake import FakeClock
from tests.test_aws_target_fake import _run_one, _started
from workloads.manifest import COMPLETE
from workloads.targets.aws.k8s_client import (
    API_RETRIES,
    REQUEST_TIMEOUT_S,
    KubeError,
    TimedApi,
    connect,
    creating,
    is_transient,
    retrying,
)


class _Api:
    def __init__(self):
        self.calls: list[tuple[str, dict]] = []

    def read_namespaced_pod(self, name, namespace, **kwargs):
        self.calls.append(("read", kwargs))
        return {"metadata": {"name": name}}

    def connect_get_namespaced_pod_exec(self, *args, **kwargs):
        self.calls.append(("exec", kwargs))


def test_every_api_call_carries_a_request_timeout_but_exec_keeps_its_own():
    api = _Api()
    timed = TimedApi(api)
    timed.read_namespaced_pod("p", "ns")
    timed.read_namespaced_pod("p", "ns", _request_timeout=5)
    timed.connect_get_namespaced_pod_exec("p", "ns")
    assert api.calls == [("read", {"_request_timeout": REQUEST_TIMEOUT_S}),
                         ("read", {"_request_timeout": 5}), ("exec", {})]
    assert all(0 < t <= 60 for t in REQUEST_TIMEOUT_S)


def test_the_real_client_is_built_with_timed_apis():
    kube = connect({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                    "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:9"}}],
                    "users": [{"name": "u", "user": {"token": "t"}}],
                    "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]})
    assert all(isinstance(api, TimedApi) for api in (kube.core, kube.batch, kube.custom))
    # the generated client takes the keyword: the call fails on the connection, not on it
    with pytest.raises(urllib3.exceptions.HTTPError):
        kube.core.read_namespaced_pod("p", "ns", _request_timeout=(0.5, 0.5))


@pytest.mark.parametrize(("exc", "transient"), [
    (ApiException(status=503), True), (ApiException(status=429), True),
    (ApiException(status=500), True), (ApiException(status=403), False),
    (ApiException(status=401), False), (ApiException(status=404), False),
    (ApiException(status=409), False), (ApiException(status=422), False),
    (urllib3.exceptions.ProtocolError("connection reset"), True),
    (urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"), True),
    (ConnectionResetError(), True), (TimeoutError(), True),
    (ValueError("bad argument"), False), (KeyError("x"), False),
])
def test_only_throttling_server_errors_and_lost_connections_are_retried(exc, transient):
    assert is_transient(exc) is transient
    calls = []

    def call():
        calls.append(1)
        raise exc

    with pytest.raises(KubeError):
        retrying(FakeClock(), "reading x", call)
    assert len(calls) == (API_RETRIES if transient else 1)


def test_a_create_whose_answer_was_lost_is_not_created_twice():
    calls = []

    def create():
        calls.append(1)
        if len(calls) == 1:
            raise urllib3.exceptions.ProtocolError("connection reset")  # it did reach the server
        raise ApiException(status=409, reason="AlreadyExists")

    creating(FakeClock(), "creating Job x", create)
    assert len(calls) == 2
    first_409 = [ApiException(status=409, reason="AlreadyExists")]
    with pytest.raises(KubeError, match="AlreadyExists"):   # someone else's object
        creating(FakeClock(), "creating Job x", lambda: (_ for _ in ()).throw(first_409[0]))


def _failing_once(method, status):
    state = {"failed": False}

    def wrapped(*args, **kwargs):
        if not state["failed"]:
            state["failed"] = True
            raise ApiException(status=status, reason="Service Unavailable")
        return method(*args, **kwargs)
    return wrapped, state


def test_one_503_on_job_and_configmap_creation_does_not_end_the_step(tmp_path):
    d, target, _ = _started(tmp_path)
    d.cluster.batch.create_namespaced_job, job_blip = _failing_once(
        d.cluster.batch.create_namespaced_job, 503)
    d.cluster.core.create_namespaced_config_map, cm_blip = _failing_once(
        d.cluster.core.create_namespaced_config_map, 429)
    _, rec, _, _ = _run_one(tmp_path, d, target)
    assert job_blip["failed"] and cm_blip["failed"]
    assert rec["status"] == COMPLETE, rec["failure_reasons"]


def test_a_refused_job_ends_the_step_at_once_with_the_reason(tmp_path):
    d, target, _ = _started(tmp_path)
    calls = []

    def forbidden(*args, **kwargs):
        calls.append(1)
        raise ApiException(status=403, reason="Forbidden")
    d.cluster.batch.create_namespaced_job = forbidden
    with pytest.raises(KubeError, match=r"(?s)cannot create Job .*Forbidden"):
        _run_one(tmp_path, d, target)
    assert len(calls) == 1 and not d.cluster.jobs


def test_cold_restart_survives_a_blip_listing_and_deleting_workers(tmp_path):
    d, target, _ = _started(tmp_path)
    d.cluster.core.list_namespaced_pod, list_blip = _failing_once(
        d.cluster.core.list_namespaced_pod, 503)
    d.cluster.core.delete_namespaced_pod, delete_blip = _failing_once(
        d.cluster.core.delete_namespaced_pod, 502)
    restart = target.restart_workers()
    assert list_blip["failed"] and delete_blip["failed"] and restart["deleted"]



def test_one_503_reading_a_worker_log_neither_refuses_the_run_nor_hides_the_backend(tmp_path):
    """The attestation reads every worker's log for NIXL's backend line and vLLM's engine
    config, and start() reads them for the KV transfer evidence: one blip there made the log
    "(log unavailable)", which fails nixl_backend and refuses the whole run (runner.md R4)."""
    from stacks.preflight.run import check_stack
    from tests.aws_target_deploy import aws_target, deploy
    from workloads.attest.checks import PASS

    d = deploy(tmp_path, "disagg-a100")
    at_start, start_blip = _failing_once(d.cluster.core.read_namespaced_pod_log, 503)
    d.cluster.core.read_namespaced_pod_log = at_start
    target = aws_target(d, tmp_path, kv_capacity_tokens=[
        m.kv_capacity_tokens for m in check_stack("disagg-a100").memory])
    target.start()
    assert start_blip["failed"]
    assert all(e["log_backends"] for e in target.kv["pods"]), target.kv   # every line read
    in_attest, attest_blip = _failing_once(at_start, 502)
    d.cluster.core.read_namespaced_pod_log = in_attest
    att = target.attest("test")
    assert attest_blip["failed"]
    assert att.ok, att.refusal()
    assert {c.name: c.status for c in att.checks}["nixl_backend"] == PASS
