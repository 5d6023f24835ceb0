"""The cluster runner's PromQL, evaluated by a real Prometheus scraping the local engine."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import time

import httpx
import pytest
from engine_support import needs_engine, wait_for, write_stack

from stacks.catalog import metrics
from stacks.preflight.run import check_stack
from workloads.model_folder import build_model_folder
from workloads.promql import QUERIES, step_queries
from workloads.smoke import stream_chat
from workloads.targets.local import LocalTarget
from workloads.targets.processes import free_port

# every name the catalogue spells, alone or as one of a metric's names across versions
CATALOGUE = {n for k, v in vars(metrics).items() if k.isupper()
             for n in ((v,) if isinstance(v, str) else v if isinstance(v, tuple) else ())
             if isinstance(n, str)}


def test_queries_read_only_catalogue_metrics():
    for q in QUERIES:
        text = q.render(120)
        assert q.metrics and set(q.metrics) <= CATALOGUE, q.name
        for name in q.metrics:
            assert name in text, (q.name, name)
        # no metric-looking identifier outside the catalogue (functions and labels aside)
        idents = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\[|\{|\)|_bucket|_sum|_count)",
                                text))
        unknown = {i for i in idents if i not in CATALOGUE and i.removesuffix("_bucket")
                   .removesuffix("_sum").removesuffix("_count") not in CATALOGUE}
        assert not unknown - {"le", "dynamo_component", "pod", "transfer_type"}, (q.name, unknown)
    assert "[120s]" in step_queries(120)["ttft_p50_s"]


PROMETHEUS = shutil.which("prometheus")   # its tests are marked: conftest.py says when absent


@pytest.fixture(scope="module")
def scraped_engine(tmp_path_factory):
    root = tmp_path_factory.mktemp("prom")
    write_stack(root / "stacks", "t-prom", workers=[{"role": "worker", "replicas": 2}],
                router="kv")
    report = check_stack("t-prom", root / "stacks")
    model = build_model_folder(root / "hf", report.stack.model.id, report.stack.model.arch)
    target = LocalTarget(report.stack, root / "engine", model=model,
                         kv_capacity_tokens=[m.kv_capacity_tokens for m in report.memory])
    prom = None
    try:
        target.start()
        ep = target.endpoints()
        targets = [u.removeprefix("http://").removesuffix("/metrics") for u in ep.metrics_urls]
        port = free_port()
        (root / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n  - job_name: dynamo-local\n    static_configs:\n"
            f"      - targets: {targets}\n")
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={root / 'prometheus.yml'}",
             f"--storage.tsdb.path={root / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=(root / "prometheus.log").open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True)
        api = f"http://127.0.0.1:{port}"
        wait_for(lambda: _ok(f"{api}/-/ready"), 60, "Prometheus ready")
        # load with a repeated prefix over several scrapes: histograms, KV hits, counters
        prompt = "the router caches the prefix of every long request " * 30
        t_end = time.monotonic() + 8
        while time.monotonic() < t_end:
            stream_chat(ep.base_url, ep.model, prompt, 16)
            stream_chat(ep.base_url, ep.model, f"{time.monotonic()} fresh " * 50, 16)
        # two more scrapes of every target after the last request (1 s interval)
        last_request = time.time()
        wait_for(lambda: _scraped_since(api, targets, last_request + 1.0), 30,
                 "two scrapes of every target after the last request")
        yield api, targets
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=30)
        target.stop()


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _scraped_since(api: str, targets: list[str], since: float) -> bool:
    """Every target's latest scrape (the timestamp of its `up` sample) is after `since`."""
    last = {r["metric"]["instance"]: float(r["value"][1])
            for r in _query(api, "timestamp(up)")}
    return set(last) == set(targets) and min(last.values()) > since


def _query(api: str, promql: str) -> list[dict]:
    r = httpx.get(f"{api}/api/v1/query", params={"query": promql}, timeout=10).json()
    assert r["status"] == "success", (promql, r)
    return r["data"]["result"]


@pytest.mark.engine
@pytest.mark.prometheus
@needs_engine
def test_every_target_is_up(scraped_engine):
    api, targets = scraped_engine
    up = _query(api, metrics.SCRAPE_UP)
    assert {r["metric"]["instance"] for r in up if r["value"][1] == "1"} == set(targets)


@pytest.mark.engine
@pytest.mark.prometheus
@needs_engine
@pytest.mark.parametrize("name", [q.name for q in QUERIES if q.engine])
def test_promql_returns_data_from_the_local_engine(scraped_engine, name):
    api, _ = scraped_engine
    result = _query(api, step_queries(30, engine_only=True)[name])
    assert result, f"{name}: empty result"
    values = [float(r["value"][1]) for r in result]
    assert all(math.isfinite(v) for v in values), (name, values)
    if name in ("ttft_p50_s", "itl_p50_s", "request_rate", "output_tokens_per_s",
                "prefix_hit_ratio", "router_kv_hit_rate_mean", "kv_blocks_total"):
        assert max(values) > 0, (name, values)
