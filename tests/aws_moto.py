"""Shared moto set-up for the AWS tests: fake credentials isolated from any real AWS config,
and a moto server on 127.0.0.1 (free port) that boto3 reaches through AWS_ENDPOINT_URL.
Import both names where `moto_server` is used: it depends on `aws_env`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto.server import ThreadedMotoServer

REGION = "us-east-1"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": REGION, "AWS_CONFIG_FILE": str(tmp_path / "none"),
                 "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def moto_server(aws_env, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A moto server on 127.0.0.1; AWS_ENDPOINT_URL points at it until the test ends."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        yield url
    finally:
        server.stop()
