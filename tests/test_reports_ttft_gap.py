"""The first-data stall as what it is: a floor under short TTFTs, weighed per step from the
step's own records, flagged only where the client's TTFT is materially above the frontend's
own (reports/tables/tables.py ttft_gap), never one sentence over every TTFT of a run."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from reports_fixtures import (
    completed,
    copy_runs,
    histogram_totals,
    manifest,
    metric,
    profiling_records,
    run_dir,
)

from reports.build import build_report
from reports.render.summary import ttft_gap_warnings
from reports.tables.goodput import Slo
from reports.tables.tables import GAP_MATERIAL_MS, GAP_MATERIAL_SHARE, ttft_gap

FLOOR_MS = 43.9     # the attestation's plain first data on this machine (docs/testing.md)


def _fid(client: list[float], frontend: list[float], p50: list[float] | None = None
         ) -> pd.DataFrame:
    n = len(client)
    return pd.DataFrame({"stack": ["agg"] * n, "run_id": ["r1"] * n,
                         "step": [f"concurrency_sweep/c{2 ** i}" for i in range(n)],
                         "client_ttft_mean_ms": client, "server_ttft_mean_ms": frontend,
                         "client_ttft_p50_ms": p50 or client})


def test_a_gap_is_material_only_above_both_bounds():
    """Material: more than 5 ms and more than 5 % of the frontend's TTFT. The bench's c1 step
    (46.2 vs 31.5 ms) is; the gap left without the stall (+2.3 ms at c64) is not, nor is a few
    ms on a long TTFT, nor a step without the frontend's figure."""
    assert (GAP_MATERIAL_MS, GAP_MATERIAL_SHARE) == (5.0, 0.05)
    fid = ttft_gap(_fid([46.2, 51.5, 506.0, 33.0, 20.0], [31.5, 49.2, 500.0, 30.0, math.nan]),
                   {})
    assert fid["ttft_gap_ms"].tolist()[:4] == pytest.approx([14.7, 2.3, 6.0, 3.0])
    assert fid["ttft_gap_material"].tolist() == [True, False, False, False, False]
    assert fid["stall_estimate_ms"].isna().all()     # no attested floor: no estimate


def test_the_stall_estimate_is_the_floor_over_the_frontend_ttft_and_zero_above_it():
    """The client sees its first token at about max(frontend TTFT, the attested first data):
    a step whose frontend TTFT is above the floor carries no stall."""
    fid = ttft_gap(_fid([46.2, 53.2, 80.0], [31.5, 49.2, 78.0]), {("agg", "r1"): FLOOR_MS})
    assert fid["stall_estimate_ms"].tolist() == pytest.approx([FLOOR_MS - 31.5, 0.0, 0.0])
    assert fid["first_data_floor_ms"].tolist() == [FLOOR_MS] * 3
    other_run = ttft_gap(_fid([46.2], [31.5]), {("agg", "r2"): FLOOR_MS})
    assert other_run["stall_estimate_ms"].isna().all()


def test_no_sentence_where_no_step_is_material_even_with_a_flagged_stall():
    slo = Slo("tight", ttft_ms=2000)
    quiet = ttft_gap(_fid([51.5, 506.0], [49.2, 500.0]), {("agg", "r1"): FLOOR_MS})
    assert ttft_gap_warnings(quiet, slo) == []


def test_a_material_step_is_named_with_its_gap_and_a_verdict_that_turns_on_it():
    slo = Slo("tight", ttft_ms=2000)
    fid = ttft_gap(_fid([46.2, 51.5], [31.5, 49.2]), {("agg", "r1"): FLOOR_MS})
    (line,) = ttft_gap_warnings(fid, slo)
    assert line.startswith("TTFT of agg (run r1): the client's exceeds the frontend's own by "
                           "more than 5 ms and 5%, or by enough to turn a verdict, at 1 of 2 "
                           "step(s): concurrency_sweep/c1 +14.7 ms (+47%; first-data stall est. "
                           "12.4 ms)")
    assert "concurrency_sweep/c2 " not in line            # +2.3 ms: not material
    assert "43.9 ms" in line and "verdict of" not in line
    # 25 ms on 1990 ms is not material by size, but p50 2010 ms fails TTFT < 2000 ms and would
    # pass 25 ms sooner: the verdict turns on the gap, so it is named
    fid = ttft_gap(_fid([2015.0, 2400.0], [1990.0, 2380.0], p50=[2010.0, 2390.0]), {})
    assert not fid["ttft_gap_material"].any()
    (line,) = ttft_gap_warnings(fid, slo)
    assert "at 1 of 2 step(s): concurrency_sweep/c1 +25.0 ms (+1%)" in line
    assert line.endswith("`tight`'s TTFT verdict of concurrency_sweep/c1 turns on the gap")
    assert "first-data" not in line                       # no attested floor, none claimed


def _client_minus_frontend(step) -> float:
    client = [metric(r, "time_to_first_token") for r in profiling_records(step) if completed(r)]
    total, count = histogram_totals(step, "dynamo_frontend_time_to_first_token_seconds")
    return sum(client) / len(client) - total / count * 1000


def test_a_real_run_is_weighed_per_step_from_its_own_exports(tmp_path):
    """A real run (the committed fixture, made before the slot wait: its gaps are 12-25 ms)
    with a flagged stall in its attestation: each step's gap is its AIPerf records' mean TTFT
    minus the frontend histogram's, per step in fidelity.csv and in one summary warning, and
    no sentence puts the stall on every TTFT of the run."""
    rd = run_dir(copy_runs(tmp_path), "local-agg")
    doc = manifest(rd)
    doc["attestations"] = [{"ok": True, "line": "passed", "checks": [
        {"name": "first_data", "status": "flagged", "detail": "",
         "evidence": {"stall_ms": 23.4, "plain_first_data_p50_ms": FLOOR_MS, "bound_ms": 5.0,
                      "quickack_first_data_p50_ms": 20.5, "frontend_ttft_mean_ms": 20.1}}]}]
    (rd / "manifest.json").write_text(json.dumps(doc))
    report = build_report([rd], tmp_path / "out", name="gap")
    fid = pd.read_csv(report.out_dir / "fidelity.csv").set_index("step")
    for step in ("concurrency_sweep/c1", "concurrency_sweep/c4", "multi_turn/conv4"):
        row = fid.loc[step]
        assert row["ttft_gap_ms"] == pytest.approx(_client_minus_frontend(rd / step), rel=1e-9)
        assert row["stall_estimate_ms"] == pytest.approx(
            max(0.0, FLOOR_MS - row["server_ttft_mean_ms"]), rel=1e-9)
        assert bool(row["ttft_gap_material"])
    text = (report.out_dir / "report.md").read_text()
    warnings = text[text.index("**Warnings**"):text.index("## Stacks")]
    assert "every TTFT" not in text and "carry it" not in text
    (line,) = [w for w in warnings.splitlines() if w.startswith("- TTFT of local-agg")]
    c1 = fid.loc["concurrency_sweep/c1"]
    assert f"concurrency_sweep/c1 {c1['ttft_gap_ms']:+.1f} ms" in line
    assert f"first-data stall est. {c1['stall_estimate_ms']:.1f} ms" in line
