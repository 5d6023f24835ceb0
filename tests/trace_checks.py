"""trace_replay.csv recomputed from a run folder's raw files and the shipped trace, with plain
gzip, json, numpy and pandas (no project code): the manifest, the dataset file AIPerf replayed,
AIPerf's summary and per-request records, the server-metrics export. Used by the fixture test
and the engine test alike (test helper)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
TEMPLATE_MARGIN = 32   # tokens the runner keeps free for the chat template


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _trace_rows(record: dict) -> list[dict]:
    data = gzip.decompress((REPO / record["file"]).read_bytes())
    return [json.loads(x) for x in data.splitlines() if x.strip()]


def _block_bound(rows: list[dict]) -> float:
    ids = pd.DataFrame({"id": [r["hash_ids"] for r in rows]}).explode("id")["id"]
    return float(ids.duplicated().mean())


def _token_bound(rows: list[dict], block: int) -> float:
    """Per row (AIPerf layout: whole `block`-token ids, a partial last one), the tokens of its
    leading run of ids seen in earlier rows."""
    seen, hit, total = set(), 0, 0
    for r in rows:
        ids, isl = r["hash_ids"], r["input_length"]
        whole = ids if len(ids) * block <= isl else ids[:-1]
        n = 0
        while n < len(whole) and whole[n] in seen:
            n += 1
        hit, total = hit + n * block, total + isl
        seen.update(ids)
    return hit / total


def _hit_rate(export: dict) -> float:
    def sums(name: str) -> tuple[float, float]:
        series = export["metrics"][name]["series"]
        return (sum(s["stats"]["sum"] for s in series), sum(s["stats"]["count"] for s in series))
    cached, n_cached = sums("dynamo_frontend_cached_tokens")
    prompt, n_prompt = sums("dynamo_frontend_input_sequence_tokens")
    return (cached / n_cached) / (prompt / n_prompt)


def expected_rows(run_dir: Path) -> dict[str, dict]:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    serving = manifest["stack_config"]["serving"]
    limit = min(w["maxModelLen"] for w in serving["workers"])
    block = serving["mocker"]["blockSize"]   # the local engine's KV block
    out = {}
    for step_id, rec in manifest["steps"].items():
        trace = rec["dataset"]["trace"]
        d = run_dir / step_id
        sent = _jsonl(run_dir / rec["dataset"]["path"])
        window = trace["window"]
        lo, hi = window["start_s"] * 1000, (window["start_s"] + window["length_s"]) * 1000
        picked = [r for r in _trace_rows(trace) if lo <= r["timestamp"] < hi]
        picked = picked[:window["max_requests"]]
        kept = [i for i, r in enumerate(picked) if r["input_length"] < limit - TEMPLATE_MARGIN]
        assert [r["session_id"] for r in sent] == [f"req-{i:06d}" for i in kept]
        warm = rec["params"]["cache"] == "warm"
        summary = json.loads((d / "profile_export_aiperf.json").read_text())
        records = [r for r in _jsonl(d / "profile_export.jsonl")
                   if r["metadata"]["benchmark_phase"] == "profiling"]
        starts = np.array([r["metadata"]["request_start_ns"] for r in records], dtype=float)
        ends = np.array([r["metadata"]["request_end_ns"] for r in records], dtype=float)
        events = sorted([(e, -1) for e in ends] + [(s, 1) for s in starts])
        bound = 1.0 if warm else _block_bound([picked[i] for i in kept])
        tokens_bound = _token_bound(sent + sent if warm else sent, block)
        if warm:   # the cold pass cached the same rows: only the second pass counts
            n = sum(r["input_length"] for r in sent)
            tokens_bound = (tokens_bound * 2 * n - _token_bound(sent, block) * n) / n
        measured = _hit_rate(json.loads((d / "server_metrics_export.json").read_text()))
        out[step_id] = {
            "source": "mooncake-conversation", "trace_sha256": trace["sha256"],
            "cache": rec["params"]["cache"], "in_flight_cap": rec["concurrency"],
            "sent": len(sent), "requests_in_window": len(picked),
            "excluded_over_context": len(picked) - len(sent),
            "attempted": len(records), "completed": len(sent), "failed": 0, "truncated": 0,
            "step_flag": "", "usable": True,
            "reuse_upper_bound_blocks": bound, "reuse_upper_bound_tokens": tokens_bound,
            "measured_hit_rate": measured, "hit_rate_gap": tokens_bound - measured,
            "achieved_rate_rps": (len(starts) - 1) / ((starts.max() - starts.min()) / 1e9),
            "in_flight_mean": float((ends - starts).sum() / (ends.max() - starts.min())),
            "in_flight_max": float(np.cumsum([x for _, x in events]).max()),
            "aiperf_replay_sched_lag_p99_ms": summary["replay_sched_lag_p99"]["avg"],
            # completed requests only (all of them here), linear interpolation
            "ttft_p50_ms": float(np.percentile(
                [r["metrics"]["time_to_first_token"]["value"] for r in records], 50)),
            "itl_p50_ms": float(np.percentile(
                [r["metrics"]["inter_token_latency"]["value"] for r in records], 50)),
        }
    return out


def check_trace_table_against_raw(table: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """Assert every row of trace_replay.csv equals the independent figures; returns them."""
    got = table.set_index("step")
    expected = expected_rows(run_dir)
    assert sorted(got.index) == sorted(expected)
    for step_id, want in expected.items():
        for col, value in want.items():
            if isinstance(value, float):
                assert got.loc[step_id, col] == pytest.approx(value, rel=1e-5, abs=1e-6), \
                    (step_id, col)
            else:   # (a CSV reads an empty step_flag back as NaN)
                cell = got.loc[step_id, col]
                cell = "" if col == "step_flag" and pd.isna(cell) else cell
                assert cell == value, (step_id, col, cell)
    return got
