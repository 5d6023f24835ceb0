"""The first-data stall probe: does the client see the first token when the frontend sends it?

Measured on this machine (docs/testing.md, "The first-token stall"): Dynamo 1.6.1's frontend
accepts HTTP connections without TCP_NODELAY (`lib/llm/src/http/service/service_v2.rs`,
`run_inner`: `axum::serve(listener, router)`, no nodelay on the accepted stream; strace shows
no setsockopt on the HTTP connections while the request-plane ones get TCP_NODELAY). On a
kept-alive connection the response headers go out as one small segment and the first SSE data
as a second one, which Nagle's algorithm holds until the headers are ACKed; the client has
nothing to send, so it delays that ACK (Linux: 40 ms minimum; AIPerf 0.13.0 sets TCP_QUICKACK
once at socket creation, `aiperf/transports/http_defaults.py`, and Linux clears it again). The
first token then reaches the client up to ~40 ms late. The first request of a connection is not
held (the handshake's quick-ACK mode is still on).

PROBE (`python3 -c PROBE host port model n`, standard library only, run in the frontend's pod
on a cluster and beside the local frontend here): one warm request, then `n` streaming requests
on one kept-alive connection as any client sends them, then `n` with TCP_QUICKACK re-armed
before every read (the client ACKs at once, so Nagle never waits); per mode the first-data
times and the frontend's own TTFT over them (its histogram's sum/count delta). Prints JSON.
`stall_ms` is the plain mode's median first-data time minus the quick-ACK mode's.

The stall is a floor, not a constant: the client sees its first data at about max(the
frontend's TTFT, the headers' write + the client's delayed-ACK minimum, 40 ms on Linux), so a
request whose first token takes longer than the plain mode's first data carries none of it.
A loopback repro on this machine (a server without TCP_NODELAY writing its headers, then its
first data T ms later, to a kept-alive client; medians of 9): T = 8 / 20 / 35 / 60 ms reached a
plain client at 44 / 44 / 44 / 60 ms (48 in some runs), a quick-ACK client at 8 / 20 / 35 / 60;
`make bench` measured the stall falling from 13.5 ms at c1 to 1.7 ms at c64 (docs/testing.md).
`check_first_data` judges the probe (pure): above STALL_BOUND_MS it is flagged with its size and
the plain first data, never a refusal of the run (the server answers correctly); a probe
without TCP_QUICKACK is refused as a measurement. The report weighs it per step, against each
step's own client and frontend TTFT (reports/tables/tables.py ttft_gap).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any
from urllib.parse import urlparse

STALL_BOUND_MS = 5.0
PROBE_REQUESTS = 8

PROBE = r'''
import json, socket, statistics, sys, time, urllib.request
host, port, model, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
QUICKACK = getattr(socket, "TCP_QUICKACK", None)

def ttft_totals():
    total = count = 0.0
    url = f"http://{host}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=30) as r:
        for line in r.read().decode(errors="replace").splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name == "dynamo_frontend_time_to_first_token_seconds_sum":
                total += float(line.rsplit(" ", 1)[1])
            elif name == "dynamo_frontend_time_to_first_token_seconds_count":
                count += float(line.rsplit(" ", 1)[1])
    return total, count

class Conn:
    def __init__(self):
        self.sock = socket.create_connection((host, port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.quickack = False

    def recv(self):
        if self.quickack and QUICKACK is not None:
            self.sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("the frontend closed the connection")
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self.recv()
        out, self.buf = self.buf.split(b"\r\n", 1)
        return out

    def exactly(self, k):
        while len(self.buf) < k:
            self.recv()
        out, self.buf = self.buf[:k], self.buf[k:]
        return out

    def stream(self, i):
        body = json.dumps({"model": model, "stream": True, "max_tokens": 4, "messages": [
            {"role": "user", "content": f"first-data probe {time.time_ns()} {i} " + "w " * 64}]})
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
                "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                f"Content-Length: {len(body)}\r\n\r\n")
        t0 = time.perf_counter()
        self.sock.sendall(head.encode() + body.encode())   # one write, as AIPerf's client
        status = self.line().decode()
        if " 200 " not in status + " ":
            raise RuntimeError(f"frontend answered {status!r}")
        headers = {}
        while True:
            h = self.line()
            if not h:
                break
            k, _, v = h.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        first = None
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int(self.line().split(b";")[0], 16)
                chunk = self.exactly(size)
                self.exactly(2)
                if size == 0:
                    break
                if first is None and b"data:" in chunk:
                    first = time.perf_counter()
        else:
            self.exactly(int(headers.get("content-length", "0")))
            first = time.perf_counter()
        return 1000 * ((first or time.perf_counter()) - t0)

conn = Conn()
conn.stream(-1)   # the first request of a connection is never held: open it
out = {"requests": n, "quickack_supported": QUICKACK is not None}
for mode in ("plain", "quickack"):
    conn.quickack = mode == "quickack"
    s0, k0 = ttft_totals()
    times = [conn.stream(i) for i in range(n)]
    s1, k1 = ttft_totals()
    out[mode] = {"first_data_ms": [round(t, 3) for t in times],
                 "first_data_p50_ms": round(statistics.median(times), 3),
                 "frontend_ttft_mean_ms": round(1000 * (s1 - s0) / (k1 - k0), 3)
                 if k1 > k0 else None}
out["stall_ms"] = round(out["plain"]["first_data_p50_ms"]
                        - out["quickack"]["first_data_p50_ms"], 3)
print(json.dumps(out))
'''


def stall_ms(evidence: dict[str, Any] | None) -> float | None:
    """The measured stall, None when the probe did not run or failed."""
    if not evidence or evidence.get("error"):
        return None
    value = evidence.get("stall_ms")
    return float(value) if isinstance(value, (int, float)) else None


def gap_ms(evidence: dict[str, Any], mode: str = "plain") -> float | None:
    """Client first-data p50 minus the frontend's own mean TTFT, for one mode."""
    m = evidence.get(mode) or {}
    if m.get("frontend_ttft_mean_ms") is None or m.get("first_data_p50_ms") is None:
        return None
    return float(m["first_data_p50_ms"]) - float(m["frontend_ttft_mean_ms"])


def parse_probe(stdout: bytes | str, error: str = "") -> dict[str, Any]:
    """The probe's JSON, or {"error": ...} (a failed probe is recorded, never dropped)."""
    if error:
        return {"error": error[-300:]}
    text = stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout
    try:
        out = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"unreadable probe output: {text[-200:]!r}"}
    return out if isinstance(out, dict) else {"error": f"unexpected probe output: {out!r}"}


def run_here(base_url: str, model: str, n: int = PROBE_REQUESTS,
             timeout_s: float = 300.0) -> dict[str, Any]:
    """The probe against a frontend this machine reaches directly (the local target)."""
    url = urlparse(base_url)
    try:
        res = subprocess.run([sys.executable, "-c", PROBE, url.hostname or "127.0.0.1",
                              str(url.port or 80), model, str(n)], capture_output=True,
                             text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"the probe did not finish in {timeout_s:g} s"}
    return parse_probe(res.stdout, "" if res.returncode == 0 else
                       f"exit {res.returncode}: {res.stderr}")
