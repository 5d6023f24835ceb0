"""Server metrics of a step count each component once: AIPerf 0.13.0 also scrapes the inference
URL's /metrics, which on a cluster is the frontend Service while the runner names the frontend
pod, so the same frontend arrives twice under two URLs (see reports/records/exports.py)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from reports.records import exports, runs, server
from stacks.catalog import metrics as m

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "runs" / "local-agg" / "fixture"
STEP = "prefix_cache/share100"
LOCAL_FRONTEND = "http://127.0.0.1:20317/metrics"
POD = "http://10.0.3.17:8000/metrics"                            # the frontend pod the runner names
SERVICE = "http://agg-frontend.bench.svc.cluster.local:8000/metrics"  # AIPerf's --url scrape


def aws_like_run(tmp_path: Path, named: dict[str, str] | None) -> Path:
    """The fixture's step as an aws run: the frontend's series under its pod IP, and again
    under the Service URL (AIPerf's automatic scrape of the inference URL)."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURE / STEP, run / STEP)
    export = json.loads((run / STEP / exports.SERVER_METRICS).read_text())
    for metric in export["metrics"].values():
        extra = []
        for series in metric["series"]:
            if series["endpoint_url"] == LOCAL_FRONTEND:
                series["endpoint_url"] = POD
                extra.append({**copy.deepcopy(series), "endpoint_url": SERVICE})
        metric["series"] += extra
    (run / STEP / exports.SERVER_METRICS).write_text(json.dumps(export))
    manifest = json.loads((FIXTURE / runs.MANIFEST).read_text())
    manifest["steps"] = {STEP: {**manifest["steps"][STEP], "dataset": {},
                                **({"server_metrics": named} if named is not None else {})}}
    (run / runs.MANIFEST).write_text(json.dumps(manifest))
    return run


def frontend_requests(srv) -> float:
    return server.counter_total(srv, m.FRONTEND_REQUESTS)


def fixture_total(name: str) -> float:
    export = json.loads((FIXTURE / STEP / exports.SERVER_METRICS).read_text())
    return sum(s["stats"]["total"] for s in export["metrics"][server.family(name)]["series"])


def test_duplicate_frontend_under_the_service_url_is_counted_once(tmp_path):
    named = {"frontend": POD, "worker-0": "http://127.0.0.1:21616/metrics",
             "worker-1": "http://127.0.0.1:25074/metrics"}
    frames = runs.load_run(aws_like_run(tmp_path, named), use_cache=False)
    expected = fixture_total(m.FRONTEND_REQUESTS)
    assert expected > 0
    assert frontend_requests(frames.server) == pytest.approx(expected)
    assert server.counter_total(frames.server, m.FRONTEND_OUTPUT_TOKENS) == pytest.approx(
        fixture_total(m.FRONTEND_OUTPUT_TOKENS))
    assert SERVICE not in set(frames.server["endpoint"])
    assert {POD, *named.values()} == set(frames.server["endpoint"])


def test_every_series_kept_when_the_runner_named_no_frontend(tmp_path):
    # no frontend pod was ready: the inference URL's scrape is the only frontend view
    frames = runs.load_run(aws_like_run(tmp_path, {"worker-0": "http://127.0.0.1:21616"}),
                           use_cache=False)
    assert SERVICE in set(frames.server["endpoint"])
    assert frontend_requests(frames.server) == pytest.approx(2 * fixture_total(
        m.FRONTEND_REQUESTS))


@pytest.mark.parametrize("named, keep", [
    (None, None),
    ({"worker-0": "10.0.0.1:9090"}, None),
    ({"frontend-0": "10.0.0.2:8000/", "frontend-1": "http://10.0.0.3:8000/metrics"},
     {"http://10.0.0.2:8000/metrics", "http://10.0.0.3:8000/metrics"}),
])
def test_runner_endpoints_normalized_like_aiperf(named, keep):
    assert exports.runner_endpoints(named) == keep
