"""A stand-in for the DynoSim simulator for the explore's pure tests: timing tables written as
the mocker's npz, and step figures from a closed form that behaves as the simulation does where
the search relies on it (more concurrency: a larger decode batch, a slower step, more output),
so the search's logic is tested in milliseconds. tests/test_explore_engine.py runs the same
search on the real simulation."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stacks.config.schema import StackConfig

ISL, OSL = 1024, 512


def table(path: Path, tp: int) -> Path:
    """A table whose decode step grows with the active KV tokens, faster with TP."""
    kv = np.array([0.0, 1e4, 1e5, 1e6, 4e6])
    ctx = np.array([1.0, 1024.0, 4096.0, 32768.0])
    itl = np.array([[3.0 + k * 4e-5 / tp + c * 1e-5 for c in ctx] for k in kv])
    isl = np.array([1.0, 1024.0, 8192.0, 32768.0])
    np.savez(path, prefill_isl=isl, prefill_ttft_ms=5.0 + isl * 0.08 / tp,
             decode_active_kv_tokens=kv, decode_context_length=ctx, decode_itl=itl)
    return path


@dataclass
class FakePrepared:
    fingerprint: str
    label: str
    engine: str
    timings: tuple[str, ...]
    tables: dict[str, Path]
    records: dict[str, dict]
    stack: StackConfig
    kv_tokens: list[int]


class FakeSimulator:
    """Figures per step from the tables' own step times: a decoding worker at batch b steps in
    t(b) (+ its share of prefill when aggregated) x `slowdown`, so the search's bound (A2)
    holds whenever slowdown >= 1; the KV router is a little faster, offload changes nothing
    (same fingerprint)."""

    def __init__(self, folder: Path, scale: str = "full", slowdown: float = 1.15) -> None:
        self.folder, self.scale, self.slowdown = folder, scale, slowdown
        self.calls: list[tuple[str, str, int]] = []

    def prepare(self, stack: StackConfig, kv_tokens: list[int]) -> FakePrepared | str:
        assert stack.serving is not None
        if any(w.tensor_parallel_size == 8 for w in stack.serving.workers):
            return "no timing table: (fake) the database has no TP8"
        tables = {w.role.value: self.folder / f"tp{w.tensor_parallel_size}.npz"
                  for w in stack.serving.workers}
        for path in tables.values():
            if not path.exists():
                table(path, int(path.stem[2:]))
        setup = [(w.role.value, w.tensor_parallel_size, w.replicas, w.node_group)
                 for w in stack.serving.workers] + [stack.serving.router.value]
        fp = hashlib.sha256(json.dumps(setup).encode()).hexdigest()
        return FakePrepared(fp, "SIMULATED (fake)", "fake simulator",
                            tuple(f"fake table tp{p.stem[2:]}" for p in tables.values()),
                            tables, {role: {"role": role} for role in tables}, stack,
                            kv_tokens)

    def _sweep(self, stack: StackConfig, kv_tokens: list[int], c: int,
               isl: int = ISL) -> dict[str, Any]:
        from stacks.explore.bounds import load_table
        assert stack.serving is not None
        s = stack.serving
        agg = s.topology.value == "aggregated"
        dec = [w for w in s.workers if w.role.value in ("worker", "decode")]
        n = sum(w.replicas for w in dec)
        t = load_table(self.folder / f"tp{dec[0].tensor_parallel_size}.npz")
        # a worker runs at most the sequences its KV cache holds; the rest wait their turn
        kv = min(k for w, k in zip(s.workers, kv_tokens, strict=True) if w in dec)
        b = min(c / n, kv // ISL)
        step = t.decode_ms(b, isl) + (b * ISL / (OSL * t.prefill_tok_per_ms) if agg else 0.0)
        step *= self.slowdown * (0.97 if s.router.value == "kv" else 1.0)
        pre = [w for w in s.workers if w.role.value in ("worker", "prefill")]
        busy = ISL / t.prefill_tok_per_ms
        # queueing for the prefill, and the wait for a free KV slot once the cache is full
        ttft = busy * (1 + c / (20.0 * sum(w.replicas for w in pre))) + (c / n - b) / b * OSL * step
        tp = load_table(self.folder / f"tp{pre[0].tensor_parallel_size}.npz")
        prefill_cap = sum(w.replicas for w in pre) * tp.prefill_tok_per_ms * 1000 * OSL / ISL
        out = min(n * b * 1000.0 / step * OSL / (OSL + busy / step), 0.9 * prefill_cap)
        return {"step": f"concurrency_sweep/c{c}", "concurrency": c, "ttft_p50_ms": ttft,
                "itl_p50_ms": step, "tok_s_per_user_p50": 1000.0 / step, "output_tok_s": out,
                "window_s": 120.0, "requests": max(1, int(out * 120 / OSL))}

    def run(self, prepared: Any, stack: StackConfig, workload: str) -> list[dict[str, Any]]:
        w = getattr(stack.workloads, workload).at_scale(self.scale).model_dump()
        cs = w.get("concurrencies") or [w.get("conversations") or w.get("concurrency")]
        self.calls += [(stack.name, workload, c) for c in cs]
        isl = w.get("isl_min") or w.get("isl") or ISL
        return [self._sweep(stack, prepared.kv_tokens, c, isl) | {"step": f"{workload}/c{c}"}
                for c in cs]
