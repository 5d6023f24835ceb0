"""Seeded, byte-stable AIPerf datasets (Mooncake-trace JSONL), one generator per workload shape.

Every row is `{"input_length", "output_length", "hash_ids"[, "session_id", "delay"]}`. AIPerf
turns each hash id into one block of `block_size` tokens with the run's tokenizer, seeded by
(--random-seed, file content, hash id): equal ids in one file are equal token blocks, so a
shared prefix is exact, and a different file never repeats another file's blocks. That makes
the same dataset portable across tokenizers (local engine, real Qwen on AWS).

Randomness comes only from `random.Random(seed)` and inverse-CDF sampling, so the same seed
gives the same bytes on any machine. Rows keep the requested lengths; the runner records the
server-counted ones next to them.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

Row = dict


def stable_seed(*parts: object) -> int:
    """A 63-bit seed from any parts (a step id, a purpose), stable across processes."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def blocks_for(length: int, block_size: int) -> int:
    return max(1, math.ceil(length / block_size))


def _fresh_ids(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


def _row(i: int, isl: int, osl: int, hash_ids: list[int]) -> Row:
    # A session id per row lets the runner match AIPerf's records back to requested lengths.
    return {"session_id": f"req-{i:06d}", "input_length": isl, "output_length": osl,
            "hash_ids": hash_ids}


# --- fixed-length rows (concurrency sweep) and exact shared prefixes (prefix cache) -----------

def prefix_blocks(isl: int, block_size: int, share: float) -> int:
    """Leading blocks shared by every row for `share` of the input; refuses an inexact share."""
    if isl % block_size:
        raise ValueError(f"isl {isl} is not a whole number of {block_size}-token blocks")
    blocks = isl // block_size
    shared = share * blocks
    if abs(shared - round(shared)) > 1e-9:
        raise ValueError(f"share {share:g} of {blocks} blocks ({isl}/{block_size}) is not a "
                         "whole number of blocks: change the share, isl or blockSize")
    return round(shared)


def prefix_share_rows(n: int, isl: int, osl: int, block_size: int, share: float,
                      id_base: int) -> list[Row]:
    """`n` rows whose first `share` of blocks are the same ids in every row, the rest fresh.

    share 0 gives unique rows (the concurrency sweep uses that); share 1 makes every row the
    same prompt. Ids start at `id_base`, so each step can use a range no other step touched.
    """
    shared = prefix_blocks(isl, block_size, share)
    total = isl // block_size
    common = _fresh_ids(id_base, shared)
    rows, next_id = [], id_base + shared
    for i in range(n):
        own = _fresh_ids(next_id, total - shared)
        next_id += len(own)
        rows.append(_row(i, isl, osl, common + own))
    return rows


def unique_rows(n: int, isl: int, osl: int, block_size: int, id_base: int) -> list[Row]:
    """`n` rows of exactly `isl` input tokens that share nothing (no accidental cache hits)."""
    rows, next_id = [], id_base
    for i in range(n):
        k = blocks_for(isl, block_size)
        rows.append(_row(i, isl, osl, _fresh_ids(next_id, k)))
        next_id += k
    return rows


def shared_prefix_fraction(rows: list[Row]) -> float:
    """Share of each row's blocks that are a prefix common to all rows (exact, in blocks)."""
    first = rows[0]["hash_ids"]
    n = len(first)
    for row in rows[1:]:
        ids = row["hash_ids"]
        n = next((i for i, (a, b) in enumerate(zip(first[:n], ids, strict=False)) if a != b),
                 min(n, len(ids)))
    return n / len(first)


# --- length distributions (sequence distributions) --------------------------------------------

@dataclass(frozen=True)
class LengthDistribution:
    """A distribution over integer lengths in [lo, hi] (truncated to the range)."""

    kind: str                  # uniform | zipf | lognormal
    lo: int
    hi: int
    zipf_exponent: float = 1.5
    lognormal_sigma: float = 0.8

    def __post_init__(self) -> None:
        if self.kind not in ("uniform", "zipf", "lognormal"):
            raise ValueError(f"unknown distribution '{self.kind}' (uniform, zipf, lognormal)")
        if not 1 <= self.lo <= self.hi:
            raise ValueError(f"length range [{self.lo}, {self.hi}] is empty or below 1")

    @property
    def lognormal_mu(self) -> float:
        # Median at the geometric middle of the range, so the body sits inside it.
        return 0.5 * (math.log(self.lo) + math.log(self.hi))

    def _zipf_cumulative(self) -> list[float]:
        weights = [k ** -self.zipf_exponent for k in range(self.lo, self.hi + 1)]
        total, acc, out = sum(weights), 0.0, []
        for w in weights:
            acc += w
            out.append(acc / total)
        return out

    def cdf(self, x: float) -> float:
        """The target CDF (truncated to [lo, hi]); discrete kinds step at integers."""
        if x < self.lo:
            return 0.0
        if x >= self.hi:
            return 1.0
        if self.kind == "uniform":
            return (math.floor(x) - self.lo + 1) / (self.hi - self.lo + 1)
        if self.kind == "zipf":
            return self._zipf_cumulative()[math.floor(x) - self.lo]
        normal = NormalDist(self.lognormal_mu, self.lognormal_sigma)
        a, b = normal.cdf(math.log(self.lo)), normal.cdf(math.log(self.hi))
        return (normal.cdf(math.log(x)) - a) / (b - a)

    def sample(self, n: int, seed: int) -> list[int]:
        """`n` lengths by inverse-CDF sampling from `random.Random(seed)` (byte-stable)."""
        rng = random.Random(seed)
        if self.kind == "uniform":
            return [self.lo + math.floor(rng.random() * (self.hi - self.lo + 1)) for _ in range(n)]
        if self.kind == "zipf":
            cum = self._zipf_cumulative()
            return [self.lo + min(bisect.bisect_left(cum, rng.random()), len(cum) - 1)
                    for _ in range(n)]
        normal = NormalDist(self.lognormal_mu, self.lognormal_sigma)
        a, b = normal.cdf(math.log(self.lo)), normal.cdf(math.log(self.hi))
        out = []
        for _ in range(n):
            u = a + rng.random() * (b - a)
            out.append(min(self.hi, max(self.lo, round(math.exp(normal.inv_cdf(u))))))
        return out


def length_rows(isl: LengthDistribution, osl: LengthDistribution, n: int, seed: int,
                block_size: int, id_base: int) -> list[Row]:
    """Rows whose requested input/output lengths follow `isl` / `osl`, no shared blocks."""
    inputs = isl.sample(n, stable_seed(seed, "isl"))
    outputs = osl.sample(n, stable_seed(seed, "osl"))
    rows, next_id = [], id_base
    for n_row, (i, o) in enumerate(zip(inputs, outputs, strict=True)):
        k = blocks_for(i, block_size)
        rows.append(_row(n_row, i, o, _fresh_ids(next_id, k)))
        next_id += k
    return rows


# --- multi-turn conversations ----------------------------------------------------------------

def multi_turn_rows(conversations: int, turns: int, isl: int, osl: int, block_size: int,
                    id_base: int, turn_delay_ms: float = 0.0, turn_delay_sigma: float = 0.0,
                    seed: int = 0) -> list[Row]:
    """Sessions of `turns` rows; each turn adds `isl` fresh tokens to the growing history.

    AIPerf sends the whole conversation so far (its answers included) with every turn, so
    turn k's prompt is the history plus this row's new user message. Every turn after the
    first waits `delay` ms after the previous answer (think time): lognormal with mean
    `turn_delay_ms` and shape `turn_delay_sigma`, drawn from the conversation's own seed
    (`stable_seed(seed, "conversation", c)`), so conversations drift apart instead of
    advancing in lockstep, and conversation c's pauses do not depend on how many others the
    step has. Sigma 0 gives every pause exactly `turn_delay_ms`. (AIPerf 0.13.0 reads a
    trace row's `delay` in ms, aiperf/dataset/loader/mooncake_trace.py and models.py, clamped
    only by --inter-turn-delay-cap-seconds, which the runner does not pass; its
    --conversation-turn-delay-* options shape its synthetic conversations, not a file's.)
    """
    rows, next_id = [], id_base
    for c in range(conversations):
        delays = think_times(turns - 1, turn_delay_ms, turn_delay_sigma,
                             stable_seed(seed, "conversation", c))
        for t in range(turns):
            k = blocks_for(isl, block_size)
            row = {"session_id": f"conv-{c:05d}", "input_length": isl, "output_length": osl,
                   "hash_ids": _fresh_ids(next_id, k)}
            if t > 0:
                row["delay"] = delays[t - 1]
            rows.append(row)
            next_id += k
    return rows


def think_times(n: int, mean_ms: float, sigma: float, seed: int) -> list[float]:
    """`n` pauses (ms, 0.1 ms resolution), lognormal with this mean; all `mean_ms` at sigma 0.

    Inverse-CDF sampling from `random.Random(seed)`: the same seed gives the same pauses on
    any machine. mu = ln(mean) - sigma^2 / 2 makes the mean exact.
    """
    if sigma == 0 or mean_ms == 0:
        return [float(mean_ms)] * n
    rng, normal = random.Random(seed), NormalDist()
    mu = math.log(mean_ms) - sigma * sigma / 2
    return [round(math.exp(mu + sigma * normal.inv_cdf(min(max(rng.random(), 1e-12),
                                                           1 - 1e-12))), 1)
            for _ in range(n)]


# --- trace replay ------------------------------------------------------------------------------

def trace_rows(n: int, isl: int, osl: int, reuse: float, block_size: int, seed: int,
               id_base: int, isl_sigma: float = 0.0) -> list[Row]:
    """A Mooncake-style trace whose blocks are `reuse` re-used from earlier requests.

    Requests draw a context from a small pool (Zipf-like popularity, like shared system
    prompts / documents) and take its first R blocks, then fresh blocks. The first use of a
    context is a miss, so R is raised by n / (n - contexts) to land the dataset-level reuse
    (see `block_reuse`) on the target. With `isl_sigma` > 0 input lengths are lognormal around
    the median `isl` (a chat trace's long tail) and each row re-uses the same share of its own
    blocks (contexts are as long as the longest row). Lengths come from their own seeded
    stream, so sigma 0 gives the same bytes as before lengths varied.
    """
    rng = random.Random(seed)
    lengths = lognormal_lengths(n, isl, isl_sigma, stable_seed(seed, "isl"))
    ks = [blocks_for(length, block_size) for length in lengths]
    contexts = max(1, n // 16)
    first_use_loss = contexts / n if n > contexts else 0.0
    share = min(1.0, reuse / max(1e-9, 1 - first_use_loss))
    pool_blocks = max(ks)
    pool = [_fresh_ids(id_base + c * pool_blocks, pool_blocks) for c in range(contexts)]
    weights = [1 / (c + 1) for c in range(contexts)]
    next_id = id_base + contexts * pool_blocks
    rows = []
    for i, (length, k) in enumerate(zip(lengths, ks, strict=True)):
        ctx = rng.choices(range(contexts), weights=weights)[0]
        # AIPerf gives a hash id one fixed size: with varying lengths rows share whole blocks
        # only, so no id is a full block in one row and the partial last block of another.
        whole = k if isl_sigma == 0 else length // block_size
        shared = min(whole, round(share * k))
        own = _fresh_ids(next_id, k - shared)
        next_id += len(own)
        rows.append(_row(i, length, osl, pool[ctx][:shared] + own))
    return rows


def lognormal_lengths(n: int, median: int, sigma: float, seed: int) -> list[int]:
    """`n` integer lengths, lognormal with this median (all equal to it when sigma is 0)."""
    if sigma == 0:
        return [median] * n
    rng = random.Random(seed)
    return [max(1, round(median * math.exp(sigma * rng.gauss(0.0, 1.0)))) for _ in range(n)]


def block_reuse(rows: list[Row]) -> float:
    """Fraction of all blocks whose id appeared in an earlier row (what a big cache would hit)."""
    seen: set[int] = set()
    hit = total = 0
    for row in rows:
        for h in row["hash_ids"]:
            hit += h in seen
            total += 1
        seen.update(row["hash_ids"])
    return hit / total if total else 0.0


# --- the serving context limit ------------------------------------------------------------------

# Tokens the chat template adds around a row's prompt (role markers): kept free below the limit.
TEMPLATE_MARGIN = 32


@dataclass(frozen=True)
class ContextFit:
    """What fitting a dataset to the smallest worker maxModelLen did to it."""

    max_model_len: int
    margin: int
    requested_rows: int
    dropped: int           # prompt alone over the limit: never sent (the source "excluded" them)
    clipped: int           # prompt fits, prompt + output did not: output shortened to fit

    def as_dict(self) -> dict:
        return {"max_model_len": self.max_model_len, "margin": self.margin,
                "requested_rows": self.requested_rows, "dropped": self.dropped,
                "clipped": self.clipped}


def fit_context(rows: list[Row], max_model_len: int,
                margin: int = TEMPLATE_MARGIN) -> tuple[list[Row], ContextFit]:
    """Rows that fit `max_model_len` (prompt + output + template margin), and the counts.

    A row whose prompt leaves no room for one output token is dropped; one whose prompt fits
    but whose output does not has its output clipped (a server would reject it: vLLM refuses
    prompt + max_tokens beyond its context). Multi-turn rows are judged on their own length
    (the history AIPerf prepends is the runner's business, bounded by pre-flight).
    """
    budget = max_model_len - margin
    kept, dropped, clipped = [], 0, 0
    for row in rows:
        isl, osl = row["input_length"], row["output_length"]
        if isl >= budget:
            dropped += 1
            continue
        if isl + osl > budget:
            row = {**row, "output_length": budget - isl}
            clipped += 1
        kept.append(row)
    return kept, ContextFit(max_model_len, margin, len(rows), dropped, clipped)


# --- files -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DatasetFile:
    path: Path
    sha256: str
    rows: int


def jsonl_bytes(rows: Iterable[Row]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n"
                   for r in rows).encode()


def write_jsonl(rows: list[Row], path: Path) -> DatasetFile:
    data = jsonl_bytes(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return DatasetFile(path=path, sha256=hashlib.sha256(data).hexdigest(), rows=len(rows))
