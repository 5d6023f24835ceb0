"""boto3 clients of one region, made once each (credentials and AWS_ENDPOINT_URL the usual
boto3 way)."""

from __future__ import annotations

from typing import Any

import boto3

from reports.audit import Clients


def clients_for(region: str) -> Clients:
    session = boto3.session.Session(region_name=region)
    made: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in made:
            made[service] = session.client(service, region_name=region)
        return made[service]
    return client


def default_region() -> str | None:
    return boto3.session.Session().region_name
