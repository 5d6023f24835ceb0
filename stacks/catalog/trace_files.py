"""The request traces a trace replay reads: the public ones shipped in stacks/catalog/traces/, or a
user's own file in the same (Mooncake) format. Pure reading and checking; no load is sent here.

A trace row is `{"timestamp": ms from the trace start, "input_length", "output_length",
"hash_ids": [...]}`: each hash id is one 512-token prefix block, equal ids are the same block
(stacks/catalog/traces/README.md). A public trace is verified against its published sha256 every
time it is loaded (a corrupt or edited copy is refused); a user's file against `traceReplay.sha256`
when the stack gives one, and its sha256 is recorded either way. Pre-flight loads the trace too, so
a missing file, a bad row or a wrong checksum is reported before `pulumi up` creates anything.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class TraceReplay(Protocol):
    """What reading a trace needs of a stack's `workloads.traceReplay` block
    (stacks.config.workload_config.TraceReplay; the catalogue imports no config, so the block is
    described here by the fields it reads)."""

    @property
    def source(self) -> str: ...
    @property
    def file(self) -> str | None: ...
    @property
    def sha256(self) -> str | None: ...
    @property
    def replays_trace(self) -> bool: ...
    @property
    def window_start_s(self) -> float: ...
    @property
    def window_s(self) -> float | None: ...
    @property
    def max_requests(self) -> int | None: ...


# Tokens per hash id in the Mooncake format (upstream FAST25-release/README.md).
TRACE_BLOCK = 512
TRACES_DIR = Path(__file__).resolve().parent / "traces"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_REPO = "kvcache-ai/Mooncake"
UPSTREAM_COMMIT = "3b5a594133958449a1feaf1c9e0fc1b553e34a28"
ROW_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass(frozen=True)
class PublicTrace:
    name: str
    file: str                 # in stacks/catalog/traces/, gzip-compressed
    upstream_path: str        # in UPSTREAM_REPO at UPSTREAM_COMMIT
    sha256: str               # of the uncompressed JSONL (= the upstream file)
    requests: int


PUBLIC_TRACES = {t.name: t for t in (
    PublicTrace("mooncake-conversation", "mooncake_conversation_trace.jsonl.gz",
                "FAST25-release/traces/conversation_trace.jsonl",
                "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df", 12031),
    PublicTrace("mooncake-synthetic", "mooncake_synthetic_trace.jsonl.gz",
                "FAST25-release/traces/synthetic_trace.jsonl",
                "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131", 3993),
)}


class TraceError(ValueError):
    """A trace that cannot be replayed; `field` is the stack field to change (camelCase, below
    workloads.traceReplay), the message says what is wrong and the fix."""

    def __init__(self, field: str, message: str, fix: str):
        self.field, self.message, self.fix = field, message, fix
        super().__init__(f"workloads.traceReplay.{field}: {message} -> fix: {fix}")


@dataclass(frozen=True)
class Trace:
    """A loaded, verified trace. `rows` is shared between callers: never modify a row."""

    source: str               # a public trace's name, or "file"
    path: Path
    sha256: str               # of the uncompressed JSONL
    rows: tuple[dict, ...]
    verified: str             # what the checksum was checked against

    def record(self) -> dict:
        """What the run record says about the trace."""
        out = {"source": self.source, "file": _shown(self.path), "sha256": self.sha256,
               "requests": len(self.rows), "verified": self.verified}
        if self.source in PUBLIC_TRACES:
            out |= {"upstream": f"{UPSTREAM_REPO}/{PUBLIC_TRACES[self.source].upstream_path}",
                    "upstream_commit": UPSTREAM_COMMIT, "licence": "Apache-2.0 "
                    "(stacks/catalog/traces/LICENSE-APACHE)"}
        return out


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def trace_path(cfg: TraceReplay) -> Path:
    if cfg.source in PUBLIC_TRACES:
        return TRACES_DIR / PUBLIC_TRACES[cfg.source].file
    path = Path(cfg.file or "")
    return path if path.is_absolute() else PROJECT_ROOT / path


def _check_row(row: object, line: int) -> None:
    def bad(what: str) -> TraceError:
        return TraceError("file", f"line {line}: {what}", "give every row timestamp (ms), "
                          "input_length, output_length and hash_ids, as the Mooncake format does")
    if not isinstance(row, dict):
        raise bad("not a JSON object")
    missing = [k for k in ROW_KEYS if k not in row]
    extra = sorted(set(row) - set(ROW_KEYS))
    if missing or extra:
        raise bad(f"missing {missing}" if missing else f"unknown field(s) {extra}")
    ts, isl, osl, ids = (row[k] for k in ROW_KEYS)
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts < 0:
        raise bad(f"timestamp {ts!r} is not a number of ms >= 0")
    for name, v in (("input_length", isl), ("output_length", osl)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise bad(f"{name} {v!r} is not a whole number >= 1")
    if not isinstance(ids, list) or not all(type(h) is int and h >= 0 for h in ids):
        raise bad("hash_ids is not a list of whole numbers >= 0")
    if len(ids) > math.ceil(isl / TRACE_BLOCK):
        raise bad(f"{len(ids)} hash ids of {TRACE_BLOCK} tokens for {isl} input tokens: the "
                  "last block would be empty")


def parse_rows(data: bytes) -> tuple[dict, ...]:
    """Rows of a Mooncake-format JSONL, each checked; timestamps must not go back in time."""
    rows, last = [], -math.inf
    for i, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise TraceError("file", f"line {i}: not JSON ({exc})",
                             "give one JSON object per line") from None
        _check_row(row, i)
        if row["timestamp"] < last:
            raise TraceError("file", f"line {i}: timestamp {row['timestamp']} is before the "
                             f"previous row's {last}", "sort the rows by timestamp")
        last = row["timestamp"]
        rows.append(row)
    if not rows:
        raise TraceError("file", "the trace has no rows", "point file at a non-empty trace")
    return tuple(rows)


@functools.lru_cache(maxsize=8)
def _read(path: Path, mtime_ns: int, size: int) -> tuple[str, tuple[dict, ...]]:
    raw = path.read_bytes()
    try:
        data = gzip.decompress(raw) if path.name.endswith(".gz") else raw
    except (OSError, EOFError) as exc:
        raise TraceError("file", f"{_shown(path)} is not a valid gzip file ({exc})",
                         "give a .jsonl file, or a .jsonl.gz that gunzip reads") from None
    return hashlib.sha256(data).hexdigest(), parse_rows(data)


def load_trace(cfg: TraceReplay) -> Trace:
    """The trace `cfg` replays, read and verified (cached per file and modification time)."""
    if not cfg.replays_trace:
        raise ValueError("source: synthetic generates its rows; there is no trace to load")
    path = trace_path(cfg)
    field = "source" if cfg.source in PUBLIC_TRACES else "file"
    if not path.is_file():
        fix = ("restore stacks/catalog/traces/ from the repository "
               "(git checkout stacks/catalog/traces)"
               if field == "source" else "give the path of an existing file, relative to the "
               "project root or absolute")
        raise TraceError(field, f"{_shown(path)} does not exist", fix)
    st = path.stat()
    sha, rows = _read(path, st.st_mtime_ns, st.st_size)
    expected: str | None
    if cfg.source in PUBLIC_TRACES:
        expected, against, where = PUBLIC_TRACES[cfg.source].sha256, "published sha256", "source"
    else:
        expected, against, where = cfg.sha256, "traceReplay.sha256", "sha256"
    if expected is not None and sha != expected:
        raise TraceError(where, f"{_shown(path)} has sha256 {sha}, not the {against} "
                         f"{expected}", "restore the original file "
                         "(git checkout stacks/catalog/traces)"
                         if where == "source" else "point file at the trace you meant, or "
                         "update sha256 if the trace changed on purpose")
    return Trace(cfg.source, path, sha, rows,
                 against if expected is not None else "not checked: no sha256 given")


def window(rows: tuple[dict, ...] | list[dict], start_s: float, window_s: float | None,
           max_requests: int | None) -> list[dict]:
    """The rows arriving in [start, start + window) seconds of trace time (to the end when
    window_s is None), then at most the first `max_requests` of them (shared, not copied)."""
    lo = start_s * 1000.0
    hi = math.inf if window_s is None else lo + window_s * 1000.0
    picked = [r for r in rows if lo <= r["timestamp"] < hi]
    return picked if max_requests is None else picked[:max_requests]


def window_rows(cfg: TraceReplay) -> list[dict]:
    """The rows of `cfg`'s trace its window (and sample) selects."""
    return window(load_trace(cfg).rows, cfg.window_start_s, cfg.window_s, cfg.max_requests)
