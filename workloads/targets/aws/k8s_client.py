"""The cluster runner's only door to Kubernetes: the official `kubernetes` client (no kubectl).

`connect(kubeconfig)` turns the stack's kubeconfig output into a `Kube`: the three API objects
the runner calls (CoreV1Api, BatchV1Api, CustomObjectsApi), a pod exec function and an httpx
transport to in-cluster Services. Everything else in the runner talks to these five, so the tests
swap exactly this bundle for an in-memory fake.

- Reads go through `to_dict`: the client's model objects become the same camelCase dicts
  `kubectl get -o json` prints, which is what the pure functions (k8s_graph, k8s_jobs) read.
- Exec uses the websocket channel protocol in binary mode (tar streams, JSON); stdin cannot be
  closed by that protocol, so writers send a byte count first (see k8s_scripts.WRITE_FILE).
- In-cluster URLs (`http://<svc>.<ns>.svc.cluster.local:<port>/...`) are what the AIPerf Job
  uses; from the runner's machine the same URLs go through the API server's service proxy
  (`/api/v1/namespaces/<ns>/services/<svc>:<port>/proxy/...`) with the kubeconfig's
  credentials, so smoke tests, warm-up and Prometheus queries need no port-forward. The
  bearer token is asked for on every request, so an exec-plugin token (EKS: `aws eks
  get-token`, 15 minutes) is refreshed by the client's own hook.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from workloads.targets.base import TargetError

STDIN_CHUNK = 256 << 10   # per websocket frame, well under any server limit


class KubeError(TargetError):
    """A Kubernetes call the runner needs failed (message names the object and the reason)."""


@dataclass(frozen=True)
class ExecResult:
    stdout: bytes
    stderr: bytes
    exit_code: int | None

    def check(self, what: str) -> bytes:
        if self.exit_code != 0:
            raise KubeError(f"{what} exited with {self.exit_code}: "
                            f"{self.stderr.decode(errors='replace')[-500:]}")
        return self.stdout


class Clock:
    """Time as the waits see it (the tests drive a fake one: no test waits on a real clock)."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wall(self) -> str:
        from workloads.manifest import now
        return now()


API_RETRIES = 5
API_RETRY_S = 5.0
# (connect, read) seconds for every API call. The client's default is none at all
# (kubernetes/client/rest.py: `_request_timeout` unset -> no urllib3 timeout), so a half-open
# connection (control-plane failover, a NAT idle timeout) would block a campaign for good
# while it bills GPU nodes. Reads here are single objects, small lists and a log capped at
# 32 MiB; the exec channel (connect_*) keeps its own deadline (`_exec`).
REQUEST_TIMEOUT_S = (10.0, 60.0)
# What a retry can cure: throttling (429) and server-side failures (5xx), or no answer at all.
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


def is_transient(exc: BaseException) -> bool:
    """A failure worth retrying: 429/5xx from the API server, or the connection failing (urllib3
    errors, socket errors and timeouts). 401/403/404/409/422 and programming errors are not."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        return status in TRANSIENT_STATUS
    import urllib3
    return isinstance(exc, (urllib3.exceptions.HTTPError, OSError, TimeoutError))


def retrying(clock: Clock, what: str, call: Callable[[], Any]) -> Any:
    """`call()`, retried on transient API failures (a blip in a multi-hour run must not end
    it) a bounded number of times; any other failure, or the last one, becomes a KubeError
    naming `what`."""
    for attempt in range(1, API_RETRIES + 1):
        try:
            return call()
        except TargetError:
            raise
        except Exception as exc:  # noqa: BLE001 - ApiException, urllib3/socket errors
            if not is_transient(exc) or attempt == API_RETRIES:
                raise KubeError(f"{what}: {exc}") from exc
            clock.sleep(API_RETRY_S * attempt)
    raise AssertionError("unreachable")


def creating(clock: Clock, what: str, call: Callable[[], Any]) -> None:
    """Create an object, retried like `retrying`; 409 AlreadyExists after a retry means an
    earlier attempt reached the server (its answer was lost) and is success. The runner's
    object names are unique per attempt (k8s_jobs.job_name), so a 409 is never someone
    else's object."""
    tried = False

    def once() -> None:
        nonlocal tried
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - the API's own exception type
            if not (tried and getattr(exc, "status", None) == 409):
                tried = True
                raise
        tried = True

    retrying(clock, what, once)


class TimedApi:
    """An API object whose calls carry `_request_timeout` unless the caller gives one (every
    generated kubernetes-client method takes it); the exec channel's `connect_*` calls are
    left alone."""

    def __init__(self, api: Any, timeout: tuple[float, float] = REQUEST_TIMEOUT_S):
        self._api, self._timeout = api, timeout

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._api, name)
        if name.startswith("connect_") or not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("_request_timeout", self._timeout)
            return attr(*args, **kwargs)
        return timed


# exec(namespace, pod, argv, container=None, stdin=None, timeout_s=600.0) -> ExecResult
ExecFn = Callable[..., ExecResult]


@dataclass
class Kube:
    core: Any                      # kubernetes.client.CoreV1Api (or the tests' fake)
    batch: Any                     # kubernetes.client.BatchV1Api
    custom: Any                    # kubernetes.client.CustomObjectsApi
    exec: ExecFn
    transport: httpx.BaseTransport  # in-cluster Service URLs, reached from this machine

    def http(self, timeout_s: float = 30.0) -> httpx.Client:
        return httpx.Client(transport=self.transport, timeout=timeout_s)


_serializer = None


def to_dict(obj: Any) -> Any:
    """A client model object (or a dict) as its JSON form with camelCase keys."""
    global _serializer
    if isinstance(obj, (dict, list, str, int, float, bool)) or obj is None:
        return obj
    if _serializer is None:
        from kubernetes.client import ApiClient
        _serializer = ApiClient()
    return _serializer.sanitize_for_serialization(obj)


def items(result: Any) -> list[dict]:
    """The `items` of a list call, as dicts."""
    return list(to_dict(result).get("items") or [])


def is_not_found(exc: BaseException) -> bool:
    return getattr(exc, "status", None) == 404


def connect(kubeconfig: dict, context: str | None = None) -> Kube:
    """The real client from a kubeconfig dict (the stack's `kubeconfig` output)."""
    from kubernetes import client, config

    api = config.new_client_from_config_dict(kubeconfig, context=context, persist_config=False)
    core = client.CoreV1Api(api)
    return Kube(core=TimedApi(core), batch=TimedApi(client.BatchV1Api(api)),
                custom=TimedApi(client.CustomObjectsApi(api)),
                exec=lambda *a, **k: _exec(core, *a, **k),
                transport=ServiceProxyTransport(api.configuration))


def _exec(core: Any, namespace: str, pod: str, argv: list[str], container: str | None = None,
          stdin: bytes | None = None, timeout_s: float = 600.0) -> ExecResult:
    from kubernetes.stream import stream

    kwargs: dict[str, Any] = {"command": argv, "stdin": stdin is not None, "stdout": True,
                              "stderr": True, "tty": False, "_preload_content": False,
                              "binary": True}
    if container:
        kwargs["container"] = container
    ws = stream(core.connect_get_namespaced_pod_exec, pod, namespace, **kwargs)
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        if stdin is not None:
            for i in range(0, len(stdin), STDIN_CHUNK):
                ws.write_stdin(stdin[i:i + STDIN_CHUNK])
        while ws.is_open():
            if time.monotonic() > deadline:
                raise KubeError(f"exec {argv[0]} in pod {namespace}/{pod} took over "
                                f"{timeout_s:.0f} s")
            ws.update(timeout=1)
            out += ws.read_stdout(timeout=0) or b""
            err += ws.read_stderr(timeout=0) or b""
        out += ws.read_stdout(timeout=0) or b""
        err += ws.read_stderr(timeout=0) or b""
        try:
            code = ws.returncode   # from the error channel's status object
        except (TypeError, KeyError, ValueError, IndexError):
            code = None            # closed without a status: treat as failed
        return ExecResult(bytes(out), bytes(err), code)
    finally:
        ws.close(timeout=1)   # the server already said goodbye; do not linger


def service_host(host: str) -> tuple[str, str]:
    """(service, namespace) of an in-cluster host name `<svc>.<ns>.svc[.cluster.local]`."""
    parts = host.split(".")
    if len(parts) < 3 or parts[2:] not in (["svc"], ["svc", "cluster", "local"]):
        raise KubeError(f"'{host}' is not an in-cluster Service name (<svc>.<ns>.svc"
                        ".cluster.local): the runner reaches only Services through the API "
                        "server proxy")
    return parts[0], parts[1]


def proxy_path(url: httpx.URL) -> str:
    """The API server path that proxies `url` (an in-cluster Service URL)."""
    svc, ns = service_host(url.host)
    port = url.port or (443 if url.scheme == "https" else 80)
    scheme = "https:" if url.scheme == "https" else ""
    return f"/api/v1/namespaces/{ns}/services/{scheme}{svc}:{port}/proxy{url.path}"


class ServiceProxyTransport(httpx.BaseTransport):
    """Sends requests for in-cluster Service URLs through the API server's service proxy."""

    def __init__(self, configuration: Any):
        self.cfg = configuration
        verify: ssl.SSLContext | bool = False
        if configuration.verify_ssl:
            verify = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
            if configuration.cert_file:
                verify.load_cert_chain(configuration.cert_file, configuration.key_file)
        self._inner = httpx.HTTPTransport(verify=verify)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = httpx.URL(self.cfg.host.rstrip("/") + proxy_path(request.url),
                        query=request.url.query)
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        headers["host"] = url.netloc.decode()
        token = self.cfg.get_api_key_with_prefix("authorization")
        if token:
            headers["authorization"] = token
        proxied = httpx.Request(request.method, url, headers=headers, stream=request.stream,
                                extensions=request.extensions)
        return self._inner.handle_request(proxied)

    def close(self) -> None:
        self._inner.close()
