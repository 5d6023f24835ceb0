"""A replayed trace as AIPerf input: window, schedule, block mapping and reuse bounds (pure).

A step of a replayed trace (`traceReplay.source`: a public trace or a file) is built as:
1. the trace's window (and request sample), loaded and checksum-verified by
   `stacks.catalog.trace_files`; each row gets a session id and its arrival time in ms from the
   window start divided by the speed-up;
2. the runner's context fit (`workloads.datasets.fit_context`, as for every workload): rows
   whose prompt exceeds the smallest maxModelLen are dropped, outputs clipped, both counted;
3. `finish`: the reuse upper bounds of the rows really sent, then the 512-token block ids
   mapped onto the engine's blocks (below); AIPerf replays the file with `--fixed-schedule`
   (its own trace support: `--custom-dataset-type mooncake_trace`), the step's concurrency
   capping the requests in flight.

Why the block ids are mapped. AIPerf turns each hash id into `--isl-block-size` tokens and
gives one id exactly one size (aiperf 0.13.0 dataset/generator/prompt.py
`_build_token_sequence`: an id requested at two sizes is a ConfigurationError); the last id of
a row covers its partial last block. The engine caches whole blocks of its own size B only. So
every 512-token trace block h becomes 512/g sub-blocks of g = gcd(512, B) tokens (g = B for the
usual 16..512) with ids derived from (h, j): two rows sharing trace block h share the same
sub-block ids, hence the same tokens, hence the same engine blocks. The partial last block of a
row (t < 512 tokens) keeps its t // g whole sub-blocks (shared like any other) and gets one id
for its t % g leftover tokens keyed by (h, sub-block, size): that id has one size wherever it
appears, and the engine never caches a partial block anyway. Ids are renumbered compactly from
a per-step base, so no step re-uses another step's blocks (each step starts uncached).

AIPerf's own speed-up (`--synthesis-speedup-ratio`) runs the trace through its Synthesizer,
which rebuilds hash_ids from a radix tree (aiperf 0.13.0 dataset/loader/base_trace_loader.py
`_apply_synthesis`, dataset/synthesis/synthesizer.py), and `--replay-speedup` is for
baseten_trace only (config/flags/cli_config.py): so the speed-up divides the timestamps in the
file the runner writes, and the block ids stay exactly those of the trace. AIPerf's
`--fixed-schedule-start-offset/-end-offset` would filter rows after `--request-count` was set
(it must equal the rows): the window is cut here instead.
"""

from __future__ import annotations

from collections.abc import Callable
from math import gcd

from stacks.catalog.trace_files import TRACE_BLOCK, Trace, load_trace, window
from stacks.config.workload_config import TraceReplay
from workloads import datasets as ds


def aiperf_block_size(engine_block: int) -> int:
    """Tokens per hash id AIPerf gets (`--isl-block-size`): whole engine and trace blocks."""
    return gcd(TRACE_BLOCK, engine_block)


def scheduled_rows(rows: list[dict], start_s: float, speed_up: float) -> list[dict]:
    """The window's rows with a session id and arrival ms from the window start / speed-up."""
    start_ms = start_s * 1000.0
    return [{"session_id": f"req-{i:06d}",
             "timestamp": round((r["timestamp"] - start_ms) / speed_up),
             "input_length": r["input_length"], "output_length": r["output_length"],
             "hash_ids": r["hash_ids"]} for i, r in enumerate(rows)]


def remap_blocks(rows: list[dict], engine_block: int, id_base: int) -> list[dict]:
    """Rows whose 512-token block ids are mapped onto gcd(512, engine_block)-token blocks
    (module doc); lengths, timestamps and session ids are kept."""
    g = aiperf_block_size(engine_block)
    ids: dict[tuple, int] = {}

    def new(key: tuple) -> int:
        return ids.setdefault(key, id_base + len(ids))

    out = []
    for row in rows:
        isl, mapped = row["input_length"], []
        for i, h in enumerate(row["hash_ids"]):
            whole, rest = divmod(min(TRACE_BLOCK, isl - i * TRACE_BLOCK), g)
            mapped += [new((h, j)) for j in range(whole)]
            if rest:  # the partial last block's leftover tokens: one id of one size
                mapped.append(new((h, whole, rest)))
        out.append({**row, "hash_ids": mapped})
    return out


def block_reuse_bound(rows: list[dict], warm: bool = False) -> float:
    """The trace's own prefix reuse upper bound: the share of the rows' trace blocks whose id
    appeared in an earlier row (an infinite cache; stacks/catalog/traces/README.md's definition). On
    a warm replay every block was cached by the pass before."""
    return 1.0 if warm and rows else ds.block_reuse(rows)


def token_reuse_bound(mapped: list[dict], engine_block: int, warm: bool = False) -> float:
    """Prompt tokens an infinite cache of `engine_block`-token blocks could serve, over all
    prompt tokens: per row, the whole engine blocks inside its leading run of already-seen
    whole sub-blocks (a prefix cache hits a prefix only). Comparable with the server's hit
    rate (cached / prompt tokens)."""
    g = aiperf_block_size(engine_block)
    seen: set[int] = {h for r in mapped for h in r["hash_ids"]} if warm else set()
    hit = total = 0
    for row in mapped:
        isl, ids = row["input_length"], row["hash_ids"]
        whole = min(len(ids), isl // g)           # a trailing partial id is never a hit
        lead = next((i for i, h in enumerate(ids[:whole]) if h not in seen), whole)
        hit += (lead * g // engine_block) * engine_block
        total += isl
        seen.update(ids)
    return hit / total if total else 0.0


def finish(rows: list[dict], trace: Trace, cfg: TraceReplay, engine_block: int, id_base: int,
           requests_in_window: int, warm: bool) -> tuple[list[dict], dict]:
    """The rows AIPerf gets (block ids mapped) and the step's trace record, from the rows the
    context fit kept (bounds are of what is really sent)."""
    mapped = remap_blocks(rows, engine_block, id_base)
    span_ms = rows[-1]["timestamp"] - rows[0]["timestamp"] if rows else 0
    blocks = block_reuse_bound(rows, warm)
    record = {
        **trace.record(),
        "window": {"start_s": cfg.window_start_s, "length_s": cfg.window_s,
                   "max_requests": cfg.max_requests},
        "speed_up": cfg.speed_up, "requests_in_window": requests_in_window, "sent": len(rows),
        "scheduled_span_s": round(span_ms / 1000.0, 3),
        "offered_rate_rps": round((len(rows) - 1) * 1000.0 / span_ms, 4) if span_ms else None,
        "block_mapping": {"trace_block": TRACE_BLOCK, "engine_block": engine_block,
                          "aiperf_block": aiperf_block_size(engine_block),
                          "ids": len({h for r in mapped for h in r["hash_ids"]})},
        "reuse_upper_bound_blocks": round(blocks, 6),
        "reuse_upper_bound_tokens": round(token_reuse_bound(mapped, engine_block, warm), 6),
        "cache": "warm" if warm else "cold",
    }
    # block_reuse: the column sla.csv reads for every trace step (trace_block_reuse)
    return mapped, {"block_reuse": round(blocks, 6), "trace": record}


Builder = tuple[str, int, None, bool, Callable[[], list[dict]], dict,
                Callable[[list[dict]], tuple[list[dict], dict]]]


def replay_steps(w: TraceReplay, seed: int, engine_block: int) -> list[Builder]:
    """The steps of a replayed trace, one per in-flight cap (plus its warm replay), in the
    shape workloads.steps builds: (name, cap, duration, cold, rows, params, finish)."""
    trace = load_trace(w)
    picked = window(trace.rows, w.window_start_s, w.window_s, w.max_requests)
    if not picked:
        raise ValueError(f"workloads.traceReplay: the window starting at {w.window_start_s:g} s "
                         f"holds no request of {w.source}: move windowStartS or widen windowS")
    span_s = (picked[-1]["timestamp"] - picked[0]["timestamp"]) / 1000.0 / w.speed_up
    params = {"source": w.source, "trace_sha256": trace.sha256,
              "window_start_s": w.window_start_s, "window_s": w.window_s,
              "max_requests": w.max_requests, "speed_up": w.speed_up, "rows": len(picked),
              "mean_osl": sum(r["output_length"] for r in picked) / len(picked),
              "block_size": aiperf_block_size(engine_block), "engine_block_size": engine_block,
              "trace_block_size": TRACE_BLOCK, "schedule": "fixed",
              "replay_s": round(span_s, 3)}

    def rows() -> list[dict]:
        return scheduled_rows(picked, w.window_start_s, w.speed_up)

    def finisher(base: int, warm: bool) -> Callable[[list[dict]], tuple[list[dict], dict]]:
        return lambda kept: finish(kept, trace, w, engine_block, base, len(picked), warm)

    out: list[Builder] = []
    for c in w.concurrencies:
        base = ds.stable_seed(seed, "trace", c) % 10**9
        step = {**params, "in_flight_cap": c}
        out.append((f"c{c}", c, None, True, rows, {**step, "cache": "cold"},
                    finisher(base, warm=False)))
        if w.warm_pass:   # the same rows, ids and (see plan) AIPerf seed: the same prompts
            out.append((f"c{c}-warm", c, None, False, rows,
                        {**step, "cache": "warm", "warm_after": f"c{c}"},
                        finisher(base, warm=True)))
    return out
