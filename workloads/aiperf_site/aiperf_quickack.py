"""`make bench`'s diagnostic pass only, never a measurement run: makes AIPerf's HTTP client
(aiohttp, AIPerf 0.13.0) ACK every segment at once by re-arming TCP_QUICKACK before each read
is handled, so the Dynamo frontend's Nagle delay never waits on a delayed ACK
(workloads/attest/first_data.py explains the stall). AIPerf itself sets TCP_QUICKACK once, at
socket creation (`aiperf/transports/http_defaults.py`), and Linux clears it again. The bench
runs the same AIPerf commands with and without it (sitecustomize.py applies it only when
SWITCH_ENV is 1): the difference in TTFT is the stall's size per step."""

from __future__ import annotations

import contextlib
import socket

SWITCH_ENV = "DYNAMO_BENCH_AIPERF_QUICKACK"


def apply() -> str:
    from aiohttp import client_proto

    original = client_proto.ResponseHandler.data_received

    def data_received(self, data, _orig=original):
        transport = self.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        return _orig(self, data)

    client_proto.ResponseHandler.data_received = data_received  # type: ignore[method-assign]
    return "applied"
