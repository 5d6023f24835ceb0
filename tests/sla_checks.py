"""sla.csv recomputed from a run folder's raw files, with plain json and numpy (no reports
code): the manifest, AIPerf's summary and per-request records, and the server-metrics export.
Used by the fixture test and the engine rehearsal test alike (test helper)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

LIMIT_TTFT_MS, MIN_USER_TOK_S = 5000.0, 50.0


def _stat_sums(export: dict, name: str) -> tuple[float, float]:
    series = export["metrics"][name]["series"]
    return (sum(s["stats"]["sum"] for s in series), sum(s["stats"]["count"] for s in series))


def expected_rows(run_dir: Path) -> dict[str, dict]:
    """What sla.csv must say of every trace step of the run (p50 user speed)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    workers = manifest["stack_config"]["serving"]["workers"]
    gpus = sum(w["replicas"] * w["tensorParallelSize"] for w in workers)
    out = {}
    for step_id, rec in manifest["steps"].items():
        if rec["workload"] != "trace_replay":
            continue
        d = run_dir / step_id
        records = [json.loads(x) for x in (d / "profile_export.jsonl").read_text().splitlines()
                   if x.strip()]
        records = [r for r in records if r["metadata"]["benchmark_phase"] == "profiling"]
        # completed: no error, not cancelled, the server's usage block arrived
        ok = [r for r in records if "error" not in r and not r["metadata"]["was_cancelled"]
              and "usage_completion_tokens" in r["metrics"]]
        window_s = (max(r["metadata"]["request_end_ns"] for r in records)
                    - min(r["metadata"]["request_start_ns"] for r in records)) / 1e9
        tokens = sum(r["metrics"]["usage_completion_tokens"]["value"] for r in ok)
        # a one-token answer has no inter-token time, so AIPerf gives it no per-user speed
        # (the real conversation trace holds 72 such requests): the p50 is over those that have one
        per_user = [r["metrics"]["output_token_throughput_per_user"]["value"] for r in ok
                    if "output_token_throughput_per_user" in r["metrics"]]
        export = json.loads((d / "server_metrics_export.json").read_text())
        cached, n_cached = _stat_sums(export, "dynamo_frontend_cached_tokens")
        prompt, n_prompt = _stat_sums(export, "dynamo_frontend_input_sequence_tokens")
        sent = [json.loads(x) for x in (run_dir / rec["dataset"]["path"]).read_text()
                .splitlines() if x.strip()]
        ttft = float(np.percentile([r["metrics"]["time_to_first_token"]["value"] for r in ok],
                                   50))
        user = float(np.percentile(per_user, 50))
        out[step_id] = {
            # the step's own cache state: a cold pass the policy did not restart is cold too
            "cache": rec["params"]["cache"],
            "attempted": len(records),
            "completed": len(ok),
            "ttft_p50_ms": ttft,
            "user_tok_s": user,
            "output_tok_s_per_gpu": tokens / window_s / gpus,
            "measured_kv_reuse": (cached / n_cached) / (prompt / n_prompt),
            "excluded_over_context": rec["params"]["rows"] - len(sent),
            "meets_sla": ttft < LIMIT_TTFT_MS and user >= MIN_USER_TOK_S,
            "gpus": gpus,
        }
    return out


REHEARSAL_ROW = "rehearsal on the local mocker, not a GPU measurement"


def check_sla_against_raw(sla: pd.DataFrame, run_dir: Path) -> pd.DataFrame:
    """Assert every measured sla.csv row equals the independent figures; returns those rows.
    A local run's rows are labelled rehearsals, never plain measurements."""
    assert not (sla["row_kind"] == "measurement").any()
    measured = sla[sla["row_kind"] == REHEARSAL_ROW].set_index("step")
    expected = expected_rows(run_dir)
    assert sorted(measured.index) == sorted(expected)
    for step_id, want in expected.items():
        got = measured.loc[step_id]
        for col, value in want.items():
            if isinstance(value, float):
                assert got[col] == pytest.approx(value, rel=1e-9), (step_id, col)
            else:
                assert got[col] == value, (step_id, col, got[col], value)
        assert got["user_speed_definition"].startswith("p50:")
    # the best point of each cache state is its SLA step with the most tok/s per GPU
    for cache, rows in measured.groupby("cache"):
        meeting = rows[rows["meets_sla"].astype(bool)]
        best = rows[rows["best_point"].astype(bool)]
        assert len(best) == (1 if len(meeting) else 0), cache
        if len(meeting):
            assert best["output_tok_s_per_gpu"].iloc[0] == meeting["output_tok_s_per_gpu"].max()
    return measured
