"""The trace replay section of the reports, on a committed real run (tests/fixtures/trace-runs:
local-recipe-motif3 replaying the public Mooncake conversation trace with the real AIPerf and
the real Dynamo mockers; `make_fixtures.py --trace-replay` regenerates it).

- trace_replay.csv equals an independent computation from the raw files and the shipped trace
  (tests/trace_checks.py): the trace and its sha256, exclusions, both reuse upper bounds, the
  server's hit rate and the gap, arrival rate, requests in flight, AIPerf's schedule lag;
- report.md shows the section and its timeline plot, a real image;
- the in-flight arithmetic by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from reports_fixtures import built_fixture_run
from trace_checks import check_trace_table_against_raw

from reports.records.flags import judge
from reports.tables.trace_report import flight_stats, in_flight
from stacks.catalog.trace_files import PUBLIC_TRACES

FIXTURE = Path(__file__).parent / "fixtures" / "trace-runs" / "local-recipe-motif3" / "fixture"


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    return built_fixture_run(FIXTURE, tmp_path_factory.mktemp("trace"), "replay")


def test_trace_table_equals_the_raw_exports_and_the_shipped_trace(replay) -> None:
    report = replay[1]
    got = check_trace_table_against_raw(report.tables["trace_replay"], replay[0])
    assert (got["trace_sha256"] == PUBLIC_TRACES["mooncake-conversation"].sha256).all()
    assert (got["excluded_over_context"] > 0).all()   # rows over maxModelLen 16384, counted
    cold, warm = got[got["cache"] == "cold"], got[got["cache"] == "warm"]
    # the mockers' B200-sized caches evict nothing here: the server hits what the trace allows
    assert (cold["hit_rate_gap"].abs() < 0.01).all() and (warm["hit_rate_gap"].abs() < 0.01).all()
    assert (warm["measured_hit_rate"] > 0.9).all() and (cold["measured_hit_rate"] < 0.2).all()
    # the cap holds: never more in flight than allowed
    assert (got["in_flight_max"] <= got["in_flight_cap"]).all()
    assert pd.read_csv(report.out_dir / "trace_replay.csv").shape == \
        report.tables["trace_replay"].shape


def test_manifest_names_the_trace_and_its_checksum(replay) -> None:
    run, _ = replay
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["traces"] == {"mooncake-conversation": {
        "file": "stacks/catalog/traces/mooncake_conversation_trace.jsonl.gz",
        "sha256": PUBLIC_TRACES["mooncake-conversation"].sha256,
        "verified": "published sha256",
        "upstream": "kvcache-ai/Mooncake/FAST25-release/traces/conversation_trace.jsonl",
        "upstream_commit": "3b5a594133958449a1feaf1c9e0fc1b553e34a28",
        "licence": "Apache-2.0 (stacks/catalog/traces/LICENSE-APACHE)"}}
    for rec in manifest["steps"].values():
        assert "--fixed-schedule" in rec["command"]
        assert rec["counts"]["failed"] == rec["counts"]["truncated"] == 0


def test_report_md_shows_the_section_and_a_real_timeline(replay) -> None:
    _, report = replay
    md = (report.out_dir / "report.md").read_text()
    section = md.split("## Trace replay")[1].split("\n## ")[0]
    for column in ("reuse_upper_bound_blocks", "reuse_upper_bound_tokens", "measured_hit_rate",
                   "hit_rate_gap", "excluded_over_context", "in_flight_max"):
        assert column in section
    assert section.count("| local-recipe-motif3 | trace_replay/") == 4
    assert "![trace replay timeline](trace_replay_timeline.png)" in section
    png = report.out_dir / "trace_replay_timeline.png"
    with Image.open(png) as img:
        assert img.format == "PNG" and img.height > img.width
        px = np.asarray(img.convert("L"), dtype=float)
    assert px.std() > 10 and (px < 128).mean() > 0.005


def test_in_flight_by_hand() -> None:
    # requests over [0, 4) s, [1, 2) and [1, 3): 1, then 3, then 2, then 1 in flight
    starts, ends = np.array([0.0, 1e9, 1e9]), np.array([4e9, 2e9, 3e9])
    times, level = in_flight(starts, ends)
    assert list(times) == [0, 1, 1, 2, 3, 4] and list(level) == [1, 2, 3, 2, 1, 0]
    stats = flight_stats(starts, ends)
    assert stats == {"in_flight_mean": pytest.approx((4 + 1 + 2) / 4), "in_flight_max": 3.0}
    # an end and a start at the same instant: the slot is freed first (no false peak)
    _, level = in_flight(np.array([0.0, 1e9]), np.array([1e9, 2e9]))
    assert level.max() == 1


def test_a_replay_under_its_cap_is_not_judged_client_bound() -> None:
    """The reports re-judge the client verdict with the runner's rule: a replayed trace's
    concurrency is a cap, so few requests in flight is the trace's own arrival rate."""
    step = pd.Series({"recorded_status": "complete", "attempted": 900, "completed": 900,
                      "failed": 0, "truncated": 0, "cancelled": 0, "concurrency": 22,
                      "host_cores": 8, "achieved_concurrency": 9.5,
                      "client_cpu_cores_mean": 1.0, "schedule": "fixed"})
    assert judge(step, 0.01)["usable"]
    driven = judge(step.drop("schedule"), 0.01)
    assert not driven["usable"] and "achieved concurrency" in driven["step_flag"]
