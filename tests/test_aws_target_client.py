"""The real kubernetes client as the aws target uses it, against 127.0.0.1 servers: in-cluster
URLs through the API server's service proxy (with the kubeconfig's token), and pod exec over
the websocket channel protocol (binary stdin in chunks, stdout, stderr, the exit status)."""

from __future__ import annotations

import http.server
import json
import threading

import httpx
import pytest

from tests.aws_target_deploy import KUBECONFIG
from workloads.targets.aws.k8s_client import KubeError, connect, proxy_path


def test_service_urls_go_through_the_api_server_proxy_with_the_token():
    seen = []

    class Api(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append((self.path, self.headers.get("authorization")))
            body = json.dumps({"data": [{"id": "Qwen/Qwen3-30B-A3B"}]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cfg = json.loads(json.dumps(KUBECONFIG))
        cfg["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{server.server_port}"
        kube = connect(cfg)
        with kube.http() as client:
            r = client.get("http://agg-a100-frontend.dynamo.svc.cluster.local:8000/v1/models",
                           params={"x": "1"})
        assert r.json()["data"][0]["id"] == "Qwen/Qwen3-30B-A3B"
        assert seen == [("/api/v1/namespaces/dynamo/services/agg-a100-frontend:8000/proxy"
                         "/v1/models?x=1", "Bearer unused")]
    finally:
        server.shutdown()
    with pytest.raises(KubeError, match="in-cluster Service"):
        proxy_path(httpx.URL("http://example.com/v1/models"))


def test_pod_exec_through_the_real_client_streams_bytes_both_ways():
    """kube.exec against a 127.0.0.1 websocket server speaking the exec channel protocol
    (v4.channel.k8s.io): stdin in chunks, binary stdout, the exit code from the status."""
    import asyncio
    import hashlib
    from urllib.parse import parse_qs, urlsplit

    from websockets.asyncio.server import serve

    seen: dict = {}

    async def handler(ws):
        query = parse_qs(urlsplit(ws.request.path).query)
        seen.update(path=urlsplit(ws.request.path).path, query=query)
        command = query["command"]
        size = int(command[-1])
        data = b""
        while len(data) < size:
            frame = await ws.recv()
            assert frame[0] == 0            # stdin channel
            data += frame[1:]
        await ws.send(b"\x01" + hashlib.sha256(data).hexdigest().encode())
        await ws.send(b"\x02" + b"some warning")
        code = int(command[-2])
        status = {"status": "Success"} if code == 0 else {
            "status": "Failure", "details": {"causes": [{"reason": "ExitCode",
                                                         "message": str(code)}]}}
        await ws.send(b"\x03" + json.dumps(status).encode())
        await ws.close()

    loop = asyncio.new_event_loop()
    started = threading.Event()
    box = {}

    async def main():
        async with serve(handler, "127.0.0.1", 0, subprotocols=["v4.channel.k8s.io"],
                         close_timeout=0.2) as srv:
            box["port"] = srv.sockets[0].getsockname()[1]
            box["stop"] = asyncio.Event()
            started.set()
            await box["stop"].wait()

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    started.wait(10)
    try:
        cfg = json.loads(json.dumps(KUBECONFIG))
        cfg["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{box['port']}"
        kube = connect(cfg)
        payload = bytes(range(256)) * 6000          # 1.5 MB: six stdin frames
        ok = kube.exec("dynamo", "results-pod", ["python", "-c", "s", "0", str(len(payload))],
                       container="transfer", stdin=payload, timeout_s=30)
        assert ok.exit_code == 0 and ok.stdout == hashlib.sha256(payload).hexdigest().encode()
        assert ok.stderr == b"some warning"
        assert seen["path"] == "/api/v1/namespaces/dynamo/pods/results-pod/exec"
        assert seen["query"]["container"] == ["transfer"]
        bad = kube.exec("dynamo", "results-pod", ["python", "-c", "s", "3", "1"], stdin=b"x",
                        timeout_s=30)
        assert bad.exit_code == 3
        with pytest.raises(KubeError, match="exited with 3"):
            bad.check("the probe")
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        thread.join(10)
