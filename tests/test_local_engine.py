"""The local Dynamo engine, live: loopback only, catalogue metric names, restarts, clean stop."""

from __future__ import annotations

import re

import httpx
import psutil
import pytest
from engine_support import needs_engine, start_local

from stacks.catalog import metrics
from workloads.smoke import smoke_test, stream_chat, warm_up
from workloads.targets.local import LocalTarget, registered_workers
from workloads.targets.processes import pid_alive

pytestmark = [pytest.mark.engine, needs_engine]

# Every name in the catalogue that the local engine can emit: not DCGM (real GPUs), not the
# vLLM-only prefix counters (the mocker has none), not Prometheus' own `up` (checked by the
# Prometheus test).
NOT_LOCAL = {*metrics.DCGM, *metrics.VLLM_ENGINE_ONLY, metrics.SCRAPE_UP}
# every metric-name constant of the catalogue (a metric name is [a-zA-Z_:][a-zA-Z0-9_:]*, which
# leaves out its other constants, such as the request trace's file path)
DYNAMO_NAMES = sorted(v for k, v in vars(metrics).items()
                      if k.isupper() and isinstance(v, str) and v not in NOT_LOCAL
                      and re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", v))


def _start(tmp_path, name: str, **stack_kw) -> LocalTarget:
    return start_local(tmp_path, name, **stack_kw)


@pytest.fixture(scope="module")
def kv_engine(tmp_path_factory):
    target = _start(tmp_path_factory.mktemp("kv"), "t-kv",
                    workers=[{"role": "worker", "replicas": 2}], router="kv")
    try:
        yield target
    finally:
        target.stop()


def _listening(pids: list[int]) -> list[tuple[int, str, int]]:
    out = []
    for pid in pids:
        try:
            procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for p in procs:
            for c in p.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN or c.type == 2:   # TCP listen or UDP
                    out.append((p.pid, c.laddr.ip, c.laddr.port))
    return out


def test_everything_listens_on_loopback_only(kv_engine):
    sockets = _listening([p.pid for p in kv_engine.processes()])
    assert len(sockets) >= 6          # broker x2, frontend HTTP, system ports, request planes
    assert {ip for _, ip, _ in sockets} == {"127.0.0.1"}, sockets


def test_smoke_and_warm_up_pass(kv_engine):
    ep = kv_engine.endpoints()
    result = smoke_test(ep.base_url, ep.model)
    assert result["usage"]["completion_tokens"] > 0 and result["content_chars"] > 0
    assert warm_up(ep.base_url, ep.model, 4)["requests"] == 4


def _live_names(urls: list[str]) -> set[str]:
    names = set()
    for url in urls:
        for line in httpx.get(url, timeout=10).text.splitlines():
            if line and not line.startswith("#"):
                names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def _covers(name: str, live: set[str]) -> bool:
    return bool({name, f"{name}_bucket", f"{name}_sum", f"{name}_count"} & live)


def test_catalogue_dynamo_metric_names_are_live(kv_engine):
    ep = kv_engine.endpoints()
    prompt = "the router caches the prefix " * 40
    for _ in range(3):   # repeated prefix: KV router hits, cached tokens, histograms filled
        stream_chat(ep.base_url, ep.model, prompt, 8)
    live = _live_names(ep.metrics_urls)
    missing = [n for n in DYNAMO_NAMES if not _covers(n, live)]
    assert missing == [], f"catalogue names not emitted by the local engine: {missing}"


def test_prefill_and_decode_workers_serve_a_disaggregated_request(tmp_path):
    target = _start(tmp_path, "t-disagg", topology="disaggregated", router="round-robin",
                    workers=[{"role": "prefill", "replicas": 1},
                             {"role": "decode", "replicas": 1}])
    try:
        ep = target.endpoints()
        smoke_test(ep.base_url, ep.model)
        per_worker = {}
        for name in ("prefill-0", "decode-0"):
            text = httpx.get(ep.metrics[name], timeout=10).text
            per_worker[name] = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                                   if line.startswith(metrics.WORKER_REQUESTS)
                                   and 'dynamo_endpoint="generate"' in line)
        assert per_worker["prefill-0"] >= 1 and per_worker["decode-0"] >= 1, per_worker
    finally:
        target.stop()
    assert not [p.pid for p in target.started if pid_alive(p.pid)]


def test_restart_workers_gives_new_processes_and_an_empty_cache(tmp_path):
    target = _start(tmp_path, "t-restart", workers=[{"role": "worker", "replicas": 1}],
                    router="round-robin")
    try:
        ep = target.endpoints()
        prompt = "a prefix that will be cached " * 40
        stream_chat(ep.base_url, ep.model, prompt, 4)
        warm = stream_chat(ep.base_url, ep.model, prompt, 4)["usage"]
        assert warm["prompt_tokens_details"]["cached_tokens"] > 0
        old = target.workers["worker-0"].pid
        target.restart_workers()
        assert target.workers["worker-0"].pid != old and not pid_alive(old)
        assert registered_workers(target.discovery_dir) == 1
        cold = stream_chat(ep.base_url, ep.model, prompt, 4)["usage"]
        assert cold["prompt_tokens_details"]["cached_tokens"] == 0
    finally:
        target.stop()
    assert len(target.started) == 4     # broker, frontend, worker, restarted worker
    assert not [p.pid for p in target.started if pid_alive(p.pid)]
