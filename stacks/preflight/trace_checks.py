"""Pre-flight of a replayed trace (`workloads.traceReplay` with a public trace or a file).

Before anything is created or any load is sent: the trace loads and matches its checksum, its
rows are well formed, the window (at full and quick scale) holds requests and not only ones
longer than the smallest maxModelLen, and the engine's KV block divides the trace's 512-token
blocks, so the runner can map every trace block onto whole engine blocks (a shared 512-token
prefix then stays a shared prefix of whole engine blocks).
"""

from __future__ import annotations

from stacks.catalog.trace_files import TRACE_BLOCK, TraceError, load_trace, window
from stacks.config.loader import P, Problem
from stacks.config.schema import StackConfig
from stacks.preflight.workload_checks import SCALES

# The engine block assumed when an aws stack leaves serving.blockSize to vLLM: every block
# size vLLM accepts from 16 tokens up is a multiple of 16 and divides 512, so mapping the
# trace onto 16-token blocks keeps shared prefixes shared on any of them; the token reuse
# bound computed at 16 tokens is then an upper bound for a coarser real block.
UNSET_ENGINE_BLOCK = 16


def engine_block_size(stack: StackConfig) -> int:
    """Tokens per KV block of the engine this stack runs (the local mocker's, or vLLM's)."""
    assert stack.serving is not None
    if stack.target == "local":
        return stack.serving.mocker.block_size
    return stack.serving.block_size or UNSET_ENGINE_BLOCK


def engine_block_field(stack: StackConfig) -> str:
    return "serving.mocker.blockSize" if stack.target == "local" else "serving.blockSize"


def check_trace_replay(stack: StackConfig, out: list[Problem]) -> None:
    if stack.serving is None or "trace_replay" not in stack.workloads.enabled():
        return
    cfg = stack.workloads.trace_replay
    if not cfg.replays_trace:
        return
    block = engine_block_size(stack)
    if TRACE_BLOCK % block:
        out.append(Problem(f"{P}{engine_block_field(stack)}", f"{block}-token KV blocks do "
                           f"not divide the trace's {TRACE_BLOCK}-token blocks, so a shared "
                           "trace block would end inside an engine block",
                           "use a block size that divides 512 (16, 32, 64, 128, 256 or 512)"))
    try:
        trace = load_trace(cfg)
    except TraceError as exc:
        out.append(Problem(f"{P}workloads.traceReplay.{exc.field}", exc.message, exc.fix))
        return
    limit = min(w.max_model_len for w in stack.serving.workers)
    for scale, sub in SCALES:
        scaled = cfg.at_scale(scale)
        rows = window(trace.rows, scaled.window_start_s, scaled.window_s, scaled.max_requests)
        span_s = trace.rows[-1]["timestamp"] / 1000
        if not rows:
            out.append(Problem(f"{P}workloads.traceReplay{sub}.windowStartS",
                               f"the window starting at {scaled.window_start_s:g} s holds no "
                               f"request of {cfg.source} (last arrival at {span_s:,.0f} s)",
                               "move windowStartS into the trace or widen windowS"))
        elif all(r["input_length"] >= limit for r in rows):
            out.append(Problem(f"{P}workloads.traceReplay{sub}.windowS",
                               f"every one of the window's {len(rows)} requests is longer than "
                               f"the smallest worker maxModelLen {limit}: nothing would be sent",
                               "widen or move the window, or raise maxModelLen"))
