"""Upper bounds on what a candidate can deliver, from the timing tables its simulated workers run
on (pure but for `load_table`). They let the search skip a candidate that cannot reach the top
without simulating it, and say why.

A mocker's step takes the table's time (Dynamo 1.6.1 dynamo/mocker planner_profiler_perf_data_
converter.py: a decode step of b sequences holding kv active tokens looks up decode_itl at
(kv, kv / b); a prefill chunk of n new tokens, prefill_ttft_ms at n); a decode step yields at
most one token per running sequence. Two bounds follow:

- `fixed_tok_s`, for a step at fixed concurrency c (multi-turn, the sequence distributions, the
  prefix cache, a trace's cap): at most c requests run, split over the decoding workers; a
  worker running b of them yields b tokens per decode step of at least t(b), the fastest step
  the table gives b sequences of any context from their prompt up (within the KV capacity), so
  output tok/s <= the best split's sum of b / t(b), and <= c / (the table's fastest step).
- `slo_tok_s`, for the operating point under an SLO whose per-user speed or ITL bound sets an
  ITL limit L (sla-tps50-ttft5s: 1000 / 50 = 20 ms; ttft2s-itl25ms: 25 ms): a decode worker
  delivers at most max b / step(b) over the batches b whose step is within L and b <= KV
  capacity / prompt, step(b) the fastest decode step t(b) the table gives b sequences of any
  context from the sweep's prompt up; an aggregated worker's step also carries its requests'
  prefill: b prompts per OSL steps at the table's fastest prefill rate. A prefill tier delivers
  at most its fastest prefill rate x OSL / ISL. ASSUMED (A2): at the operating point a worker's
  batch is one whose step meets L (the median request's ITL is its steps' mean, and a closed
  loop of equal requests holds its batch steady), and a step that carries prefill tokens takes
  at least their prefill time on top of the decode step. The search checks A2 on every candidate
  it simulates (simulated <= bound) and, if any breaks it, searches that SLO again without
  pruning.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Table:
    """A mocker timing table (--planner-profile-data npz; stacks/predict/mocker_table.py)."""
    prefill_isl: np.ndarray
    prefill_ms: np.ndarray
    kv: np.ndarray            # decode_active_kv_tokens (rows)
    ctx: np.ndarray           # decode_context_length (columns)
    itl_ms: np.ndarray        # decode_itl[kv, ctx]

    def decode_ms(self, batch: float, context: float) -> float:
        """The step time of `batch` sequences of `context` tokens (bilinear, clamped)."""
        kv = batch * context
        j = int(np.clip(np.searchsorted(self.ctx, context) - 1, 0, len(self.ctx) - 2))
        lo, hi = (float(np.interp(kv, self.kv, self.itl_ms[:, k])) for k in (j, j + 1))
        return float(np.interp(context, self.ctx[j:j + 2], [lo, hi]))

    def decode_many(self, batches: np.ndarray, context: float) -> np.ndarray:
        """decode_ms for many batches at one context (the same interpolation)."""
        kv = batches * context
        j = int(np.clip(np.searchsorted(self.ctx, context) - 1, 0, len(self.ctx) - 2))
        lo, hi = (np.interp(kv, self.kv, self.itl_ms[:, k]) for k in (j, j + 1))
        w = (context - self.ctx[j]) / (self.ctx[j + 1] - self.ctx[j])
        w = min(max(w, 0.0), 1.0)
        return np.asarray(lo * (1 - w) + hi * w, dtype=float)

    def decode_floor(self, batches: np.ndarray, context: float, kv_max: float) -> np.ndarray:
        """The fastest step each batch can take with every context at least `context` (and
        batch x context within `kv_max`): the table's step is not monotonic in context
        everywhere (AIConfigurator's points), so the minimum over the grid's contexts is taken
        rather than the value at the shortest."""
        samples = [context, *(c for c in self.ctx if c > context)]
        out = self.decode_many(batches, context)
        for c in samples[1:]:
            t = self.decode_many(batches, float(c))
            out = np.where(batches * c <= kv_max, np.minimum(out, t), out)
        return out

    @property
    def fastest_decode_ms(self) -> float:
        return float(self.itl_ms.min())

    @property
    def prefill_tok_per_ms(self) -> float:
        """The fastest prefill rate any chunk size reaches."""
        return float(np.max(self.prefill_isl / np.maximum(self.prefill_ms, 1e-9)))


def load_table(path: Path) -> Table:
    z = np.load(path)
    return Table(z["prefill_isl"], z["prefill_ttft_ms"], z["decode_active_kv_tokens"],
                 z["decode_context_length"], z["decode_itl"])


def fixed_tok_s(concurrency: int, table: Table, workers: int, context: int,
                kv_capacity: int) -> float:
    """Output tok/s a step at `concurrency` cannot exceed on `workers` decoding workers of
    `table`: the best split of at most `concurrency` requests over them, worker w yielding
    b_w tokens per step of at least t(b_w) (any context from the step's shortest prompt up);
    never above concurrency / the table's fastest step."""
    c = max(1, concurrency)
    b = np.arange(0, c + 1, dtype=float)
    rate = np.zeros(c + 1)
    step = table.decode_floor(b[1:], max(context, 1), kv_capacity)
    rate[1:] = b[1:] * 1000.0 / np.maximum(step, 1e-9)
    best = rate.copy()                   # best[s]: the most s requests yield on the workers
    for _ in range(1, min(workers, c)):
        best = np.array([max(best[s - k] + rate[k] for k in range(s + 1))
                         for s in range(c + 1)])
    return float(min(best.max(), c * 1000.0 / table.fastest_decode_ms))


@dataclass(frozen=True)
class WorkerBound:
    """One decoding worker under an ITL limit: its largest batch within the limit and tok/s."""
    batch: int
    tok_s: float


def decode_bound(table: Table, itl_limit_ms: float, isl: int, osl: int, kv_capacity: int,
                 prefills: bool, ceiling: int = 4096) -> WorkerBound:
    """max b / step(b) over b <= KV capacity / isl with step(b) <= the limit (A2), where
    step(b) = t(b), plus for a worker that also prefills (aggregated) the prefill its b
    requests' prompts take per decode step at the fastest prefill rate: b x isl / (osl x P)."""
    b = np.arange(1, max(1, min(ceiling, kv_capacity // max(isl, 1))) + 1, dtype=float)
    per_seq = isl / (osl * table.prefill_tok_per_ms) if prefills else 0.0
    step = table.decode_floor(b, isl, kv_capacity) + b * per_seq
    within = np.flatnonzero(step > itl_limit_ms)
    n = int(within[0]) if within.size else len(b)     # the batches before the first too slow
    if n == 0:
        return WorkerBound(0, 0.0)
    rate = b[:n] * 1000.0 / step[:n]
    i = int(np.argmax(rate))
    return WorkerBound(int(b[i]), float(rate[i]))


def prefill_tok_s(table: Table, isl: int, osl: int) -> float:
    """Output tok/s a prefilling worker's prompts allow: its fastest prefill x OSL / ISL."""
    return table.prefill_tok_per_ms * 1000.0 * osl / isl


@dataclass(frozen=True)
class SloBound:
    tok_s: float           # output tok/s the candidate cannot exceed at the operating point
    concurrency: int       # the decode batches within the limit, summed: a first probe above


def slo_bound(tiers: list[tuple[str, int, Table, int]], itl_limit_ms: float, isl: int,
              osl: int) -> SloBound:
    """`tiers`: (role, replicas, table, KV capacity tokens per worker)."""
    decode = prefill = 0.0
    batch = 0
    for role, replicas, table, kv in tiers:
        if role in ("worker", "decode"):
            w = decode_bound(table, itl_limit_ms, isl, osl, kv, prefills=role == "worker")
            decode += replicas * w.tok_s
            batch += replicas * w.batch
        if role in ("worker", "prefill"):
            prefill += replicas * prefill_tok_s(table, isl, osl)
        if role == "prefill":
            batch += replicas
    return SloBound(min(decode, prefill), batch)
