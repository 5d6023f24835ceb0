"""Benchmark (not a test): time `reports build` on a synthesised 100,000-request run.

`python -m reports.bench [--requests 100000] [--osl 128]` (or `make bench-reports`) writes a
run folder shaped like the runner's (manifest + 16 steps of AIPerf 0.13.0 exports: summary
JSON, per-request JSONL rows with the same metadata/metrics keys and an inter-chunk latency
array of OSL values per request, a server-metrics export) into a temp dir, then times the
report build cold (parsing every export) and warm (from the parquet cache).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from reports.build import build_report

STEPS = ([f"concurrency_sweep/c{c}" for c in (1, 2, 4, 8, 16, 32, 64)] + ["multi_turn/conv8"]
         + [f"sequence_distributions/{d}" for d in ("uniform", "zipf", "lognormal")]
         + [f"prefix_cache/share{s:03d}" for s in (0, 25, 50, 75, 100)])
STACK_CONFIG = {
    "target": "local",
    "cluster": {"nodeGroups": [{"name": "p4d", "instanceType": "p4d.24xlarge", "count": 1}]},
    "serving": {"topology": "aggregated", "workers": [
        {"role": "worker", "replicas": 2, "tensorParallelSize": 4, "nodeGroup": "p4d"}]},
}


def _stats(values: np.ndarray, unit: str) -> dict:
    qs = {f"p{q}": float(np.percentile(values, q)) for q in (1, 5, 10, 25, 50, 75, 90, 95, 99)}
    return {"unit": unit, "avg": float(values.mean()), **qs, "min": float(values.min()),
            "max": float(values.max()), "std": float(values.std()), "count": len(values),
            "sum": float(values.sum())}


def _histogram(name: str, total: float, count: int) -> dict:
    total = float(total)
    return {"type": "histogram", "series": [{"endpoint_url": "http://127.0.0.1:8000/metrics",
                                             "labels": {"model": "m"},
                                             "stats": {"count": count, "sum": total,
                                                       "avg": total / max(count, 1)}}]}


def write_step(step_dir: Path, n: int, concurrency: int, osl: int, rng: np.random.Generator,
               t0: int) -> int:
    step_dir.mkdir(parents=True)
    ttft = rng.gamma(4, 12 * concurrency ** 0.5, n)
    itl = rng.normal(5 + concurrency / 8, 0.3, n)
    isl = rng.integers(200, 2000, n)
    lat = ttft + itl * (osl - 1)
    starts = t0 + np.cumsum(rng.exponential(lat.mean() / concurrency * 1e6, n)).astype(np.int64)
    with (step_dir / "profile_export.jsonl").open("wb") as f:
        for i in range(n):
            chunks = rng.normal(itl[i], 0.2, osl - 1).round(4).tolist()
            rec = {"metadata": {
                "session_num": i, "x_request_id": f"r{i:08d}", "conversation_id":
                f"session_{i:06d}", "turn_index": 0, "request_start_ns": int(starts[i]),
                "request_end_ns": int(starts[i] + lat[i] * 1e6), "benchmark_phase": "profiling",
                "phase_name": "profiling", "was_cancelled": False},
                "metrics": {
                "time_to_first_token": {"value": float(ttft[i]), "unit": "ms"},
                "inter_token_latency": {"value": float(itl[i]), "unit": "ms"},
                "request_latency": {"value": float(lat[i]), "unit": "ms"},
                "input_sequence_length": {"value": int(isl[i]), "unit": "tokens"},
                "output_sequence_length": {"value": osl, "unit": "tokens"},
                "output_token_throughput_per_user": {"value": 1000 / float(itl[i]),
                                                     "unit": "tokens/sec/user"},
                "usage_prompt_cache_read_tokens": {"value": 0, "unit": "tokens"},
                "inter_chunk_latency": {"value": chunks, "unit": "ms"}}}
            f.write(orjson.dumps(rec) + b"\n")
    duration = float((starts[-1] + lat[-1] * 1e6 - starts[0]) / 1e9)
    summary = {
        "aiperf_version": "0.13.0", "time_to_first_token": _stats(ttft, "ms"),
        "inter_token_latency": _stats(itl, "ms"), "request_latency": _stats(lat, "ms"),
        "output_token_throughput": {"unit": "tokens/sec", "avg": n * osl / duration},
        "output_token_throughput_per_user": _stats(1000 / itl, "tokens/sec/user"),
        "request_count": {"unit": "requests", "avg": float(n)},
        "total_output_tokens": {"unit": "tokens", "avg": float(n * osl)},
        "benchmark_duration": {"unit": "sec", "avg": duration},
        "input_config": {"phases": [{"kind": "profiling", "concurrency": concurrency}],
                         "datasets": [{"type": "synthetic"}]}}
    (step_dir / "profile_export_aiperf.json").write_bytes(orjson.dumps(summary))
    server = {"metrics": {
        "dynamo_frontend_time_to_first_token_seconds": _histogram("", ttft.sum() / 1e3, n),
        "dynamo_frontend_inter_token_latency_seconds": _histogram("", itl.sum() / 1e3, n),
        "dynamo_frontend_cached_tokens": _histogram("", float(isl.sum()) * 0.1, n),
        "dynamo_frontend_input_sequence_tokens": _histogram("", float(isl.sum()), n)}}
    (step_dir / "server_metrics_export.json").write_bytes(orjson.dumps(server))
    return int(starts[-1] + lat[-1] * 1e6)


def synthesise(run_dir: Path, requests: int, osl: int, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    per = requests // len(STEPS)
    t = 1_800_000_000 * 10**9
    for i, step in enumerate(STEPS):
        n = per + (requests - per * len(STEPS) if i == 0 else 0)
        c = int(step.rsplit("/c", 1)[1]) if step.startswith("concurrency") else 16
        t = write_step(run_dir / step, n, c, osl, rng, t) + 10**9
    manifest = {"stack": "local-agg", "run_id": run_dir.name, "stack_config": STACK_CONFIG,
                "versions": {"aiperf": "0.13.0"},
                "steps": {s: {"status": "complete"} for s in STEPS}}
    (run_dir / "manifest.json").write_bytes(orjson.dumps(manifest))
    return run_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--osl", type=int, default=128)
    ap.add_argument("--keep", action="store_true", help="keep the synthesised run")
    opts = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="reports-bench-"))
    try:
        t0 = time.perf_counter()
        run = synthesise(tmp / "runs" / "local-agg" / "bench", opts.requests, opts.osl)
        size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        print(f"synthesised {opts.requests:,} requests in {len(STEPS)} steps "
              f"({size / 1e6:.0f} MB of exports) in {time.perf_counter() - t0:.1f} s")
        for label, cache in (("cold (parse every export)", True),
                             ("warm (parquet cache)", True)):
            t0 = time.perf_counter()
            rep = build_report([run], tmp / "out", name="bench", use_cache=cache)
            print(f"reports build, {label}: {time.perf_counter() - t0:.1f} s "
                  f"({len(rep.requests):,} requests, {len(rep.steps)} steps)")
    finally:
        if opts.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
