"""Shared moto set-up for the AWS tests: fake credentials isolated from any real AWS config,
and a moto server on 127.0.0.1 (free port) that boto3 reaches through AWS_ENDPOINT_URL.
Import both names where `moto_server` is used: it depends on `aws_env`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from moto.server import ThreadedMotoServer

REGION = "us-east-1"


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_DEFAULT_REGION": REGION, "AWS_CONFIG_FILE": str(tmp_path / "none"),
                 "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                 # moto's EC2 loads its catalogue of public AMIs in every region it first
                 # serves unless this is "false" (moto 5.2.5: moto/settings.py
                 # ec2_load_default_amis, read in moto/ec2/models/amis.py): most of an
                 # audit's time here, and no test needs a listed AMI (run_instances takes any
                 # image id)
                 "MOTO_EC2_LOAD_DEFAULT_AMIS": "false"}.items():
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
        # moto keeps its state per process, not per server: start each test empty
        requests.post(f"{url}/moto-api/reset", timeout=10).raise_for_status()
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        yield url
    finally:
        server.stop()


# --- placement groups: moto 5.2.5 has no EC2 placement-group API ---------------------------
# The audit lists and deletes cluster placement groups (components/nodegroups.py creates one
# per EFA node group). moto answers those calls with "not implemented", so the tests add the
# three calls to moto's EC2 responder, in memory, keyed by account and region. Shapes follow
# botocore's model (moto serialises ActionResult dicts with it). Without the shim the audit
# reports the listing as failed and exits "incomplete" (tests/test_aws_audit.py checks that).

_PLACEMENT_GROUPS: dict[tuple[str, str], dict[str, dict]] = {}


def _pg_store(resp) -> dict[str, dict]:
    return _PLACEMENT_GROUPS.setdefault((resp.current_account, resp.region), {})


def _create_placement_group(self):
    from moto.core.responses import ActionResult

    name = self._get_param("GroupName")
    tags = self._parse_tag_specification("placement-group").get("placement-group", {})
    group = {"GroupName": name, "Strategy": self._get_param("Strategy"), "State": "available",
             "GroupId": f"pg-{abs(hash((self.region, name))) % 16**17:017x}",
             "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
    _pg_store(self)[name] = group
    return ActionResult({"PlacementGroup": group})


def _describe_placement_groups(self):
    from moto.core.responses import ActionResult

    names = self._get_param("GroupNames", [])
    groups = [g for n, g in _pg_store(self).items() if not names or n in names]
    return ActionResult({"PlacementGroups": groups})


def _delete_placement_group(self):
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError

    name = self._get_param("GroupName")
    if _pg_store(self).pop(name, None) is None:
        raise EC2ClientError("InvalidPlacementGroup.Unknown",
                             f"The Placement Group '{name}' is unknown.")
    return ActionResult({})


@pytest.fixture
def placement_groups(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Teach moto's EC2 (in-process and ThreadedMotoServer alike) the placement-group calls."""
    from moto.ec2.responses import EC2Response

    for name, fn in (("create_placement_group", _create_placement_group),
                     ("describe_placement_groups", _describe_placement_groups),
                     ("delete_placement_group", _delete_placement_group)):
        monkeypatch.setattr(EC2Response, name, fn, raising=False)
    _PLACEMENT_GROUPS.clear()
    yield
    _PLACEMENT_GROUPS.clear()


@pytest.fixture
def three_regions(monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    """moto lists ~38 regions; an account has fewer enabled. Three keep --all-regions quick
    on 2 cores (describe_regions without RegionNames answers these only)."""
    from moto.core.responses import ActionResult
    from moto.ec2.responses import EC2Response

    enabled = ("eu-west-1", "us-east-1", "us-west-2")

    def describe_regions(self):
        names = self._get_param("RegionNames", []) or list(enabled)
        return ActionResult({"Regions": self.ec2_backend.describe_regions(names)})
    monkeypatch.setattr(EC2Response, "describe_regions", describe_regions)
    return enabled
