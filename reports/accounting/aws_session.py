"""boto3 clients of one region, made once each (credentials and AWS_ENDPOINT_URL the usual
boto3 way).

A command that reaches several regions (the audit's --all-regions, then IAM, then its
deletions) passes one boto3 session to every `clients_for`: botocore parses each service's
model (ec2's alone is megabytes of JSON) once per session, so a session per region repeated
that for every region, and made client creation most of an audit's time. A session is not
thread-safe, its clients are (boto3 guide "Multithreading or multiprocessing with clients";
boto/botocore#2991: make clients in one thread, then share them), so clients are made one at a
time under a lock and used in parallel."""

from __future__ import annotations

import threading
from typing import Any

import boto3

from reports.accounting.audit import Clients

_MAKING = threading.Lock()


def clients_for(region: str, session: boto3.session.Session | None = None) -> Clients:
    session = session or boto3.session.Session(region_name=region)
    made: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in made:
            with _MAKING:
                made[service] = session.client(service, region_name=region)
        return made[service]
    return client


def default_region() -> str | None:
    return boto3.session.Session().region_name
