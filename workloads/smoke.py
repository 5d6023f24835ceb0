"""Smoke test and warm-up over plain HTTP (httpx), before any AIPerf load.

Smoke: `/v1/models` lists the served model, and one streaming chat completion returns content
and a usage block. Warm-up: a few short streaming requests in parallel, so the first measured
step does not pay for lazy initialisation. Both raise SmokeError with what was wrong.
`client`: an httpx client to send through (a cluster target's frontend is reached via its API
server); by default plain httpx.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx


class SmokeError(RuntimeError):
    pass


def list_models(base_url: str, timeout_s: float = 10.0,
                client: httpx.Client | None = None) -> list[str]:
    r = (client or httpx).get(f"{base_url}/v1/models", timeout=timeout_s)
    r.raise_for_status()
    return [m.get("id") for m in r.json().get("data", [])]


def stream_chat(base_url: str, model: str, prompt: str, max_tokens: int,
                timeout_s: float = 60.0, client: httpx.Client | None = None) -> dict:
    """One streaming chat completion; returns content, usage, TTFT and total seconds."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    content, usage, ttft = [], None, None
    t0 = time.perf_counter()
    with (client or httpx).stream("POST", f"{base_url}/v1/chat/completions", json=body,
                                  timeout=timeout_s) as r:
        if r.status_code != 200:
            raise SmokeError(f"chat completion returned HTTP {r.status_code}: "
                             f"{r.read().decode()[:300]}")
        for line in r.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    ttft = ttft if ttft is not None else time.perf_counter() - t0
                    content.append(text)
            if chunk.get("usage"):
                usage = chunk["usage"]
    return {"content": "".join(content), "usage": usage, "ttft_s": ttft,
            "total_s": time.perf_counter() - t0}


def smoke_test(base_url: str, model: str, client: httpx.Client | None = None) -> dict:
    """Raise SmokeError unless the model is listed and a streamed answer has content + usage."""
    try:
        models = list_models(base_url, client=client)
        if model not in models:
            raise SmokeError(f"/v1/models lists {models}, not '{model}'")
        reply = stream_chat(base_url, model, "Say something about prefix caches.", 16,
                            client=client)
    except httpx.HTTPError as exc:
        raise SmokeError(f"{base_url} is not answering: {exc}") from exc
    if not reply["content"]:
        raise SmokeError("the streamed chat completion carried no content")
    usage = reply["usage"] or {}
    if not usage.get("completion_tokens"):
        raise SmokeError(f"the streamed chat completion carried no usage: {usage}")
    return {"models": models, "content_chars": len(reply["content"]), "usage": usage,
            "ttft_s": round(reply["ttft_s"], 4), "total_s": round(reply["total_s"], 4)}


def warm_up(base_url: str, model: str, requests: int, concurrency: int = 4,
            client: httpx.Client | None = None) -> dict:
    """`requests` short streamed completions (distinct prompts); raises if any fails."""
    if requests <= 0:
        return {"requests": 0}
    prompts = [f"Warm-up request {i}: " + "the router caches the prefix " * (8 + i)
               for i in range(requests)]
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, requests))) as pool:
        try:
            replies = list(pool.map(lambda p: stream_chat(base_url, model, p, 32,
                                                          client=client), prompts))
        except (httpx.HTTPError, SmokeError) as exc:
            raise SmokeError(f"warm-up request failed: {exc}") from exc
    empty = sum(1 for r in replies if not r["content"])
    if empty:
        raise SmokeError(f"{empty} of {requests} warm-up requests returned no content")
    return {"requests": requests, "mean_total_s": round(
        sum(r["total_s"] for r in replies) / requests, 4)}
