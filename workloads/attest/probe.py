"""The attestation's requests and the metrics read around them (I/O shared by both targets).

One prompt is sent (prefix workers + 1) times, so that whatever the router does, one worker
sees it twice and must report cached tokens; on a disaggregated stack every send also moves its
KV from prefill to decode. With KV offload, distinct prompts totalling more than the offloading
workers' GPU KV capacity (pre-flight's figure) follow, so the CPU tier must take blocks. The
metric totals (workloads/attest/parse.py) are read before the first request and polled after
the last until every configured signal has moved or POLL_S has passed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from workloads.attest.parse import Expected, metric_totals
from workloads.smoke import list_models

# Long enough for several full KV blocks at any block size the stacks use (16-128 tokens).
PROMPT_WORDS = 640
OFFLOAD_PROMPT_TOKENS = 8192
OFFLOAD_SAFETY = 1.2        # words are not tokens: send more than the capacity asks
OFFLOAD_CONCURRENCY = 8
POLL_S = 30.0
POLL_EVERY_S = 1.0
Scrape = Callable[[], dict[str, tuple[str, str]]]


def prompt(tag: str, words: int = PROMPT_WORDS) -> str:
    """A deterministic prompt unique to `tag` (never the prefix of a workload's prompt)."""
    return f"dynamo-bench attestation {tag}: " + " ".join(
        f"w{(i * 7919) % 10007}" for i in range(words))


def send(client: httpx.Client, base_url: str, model: str, text: str, max_tokens: int = 4,
         timeout_s: float = 120.0) -> dict:
    """One non-streaming chat completion; returns its usage block."""
    body = {"model": model, "messages": [{"role": "user", "content": text}],
            "max_tokens": max_tokens, "stream": False}
    r = client.post(f"{base_url}/v1/chat/completions", json=body, timeout=timeout_s)
    r.raise_for_status()
    return r.json().get("usage") or {}


def cached_tokens(usage: dict) -> int:
    return int(((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)


def signals(x: Expected) -> list[str]:
    """The metric totals that must move under the probe for this stack (aws or local)."""
    keys = ["frontend_cached_tokens"] if x.prefix_caching else []
    keys += ["router_kv_events_stored"] if x.kv_router else []
    if x.target == "aws":
        keys += ["nixl_bytes_transferred"] if x.nixl_backend else []
        keys += ["offload_store_bytes"] if x.kv_offload else []
    return keys


def offload_requests(capacity_tokens: int) -> int:
    return math.ceil(OFFLOAD_SAFETY * capacity_tokens / OFFLOAD_PROMPT_TOKENS)


def collect(x: Expected, *, base_url: str, client: httpx.Client, scrape: Scrape, tag: str,
            offload_capacity_tokens: int = 0, sleep: Callable[[float], None] = time.sleep,
            now: Callable[[], float] = time.monotonic) -> dict:
    """Send the probe requests and return the evidence they leave (models, cached tokens,
    metric totals before and after)."""
    evidence: dict = {"models": list_models(base_url, client=client)}
    before = metric_totals(scrape())
    text = prompt(tag)
    evidence["repeat_cached_tokens"] = [
        cached_tokens(send(client, base_url, x.model_name, text))
        for _ in range(x.prefix_workers + 1)]
    if x.kv_offload and x.target == "aws" and offload_capacity_tokens:
        n = offload_requests(offload_capacity_tokens)
        words = OFFLOAD_PROMPT_TOKENS // 2     # ~2 tokens per word of this prompt
        with ThreadPoolExecutor(OFFLOAD_CONCURRENCY) as pool:
            list(pool.map(lambda i: send(client, base_url, x.model_name,
                                         prompt(f"{tag}-overflow-{i}", words), max_tokens=1),
                          range(n)))
        evidence["offload_requests"] = {"requests": n, "capacity_tokens":
                                        offload_capacity_tokens}
    deadline = now() + POLL_S
    while True:
        after = metric_totals(scrape())
        moved = all((after.get(k) or 0) > (before.get(k) or 0) for k in signals(x))
        if moved or now() >= deadline:
            break
        sleep(POLL_EVERY_S)
    evidence["before"], evidence["after"] = before, after
    return evidence
