"""The local rehearsal of a B200 recipe end to end, with the REAL AIPerf CLI and the REAL local
Dynamo engine: the shipped local-recipe-motif3 stack (3 prefill + 1 decode mockers behind the
KV router, KV blocks from pre-flight on p6-b200) replays a window of the REAL Mooncake
conversation trace (shipped in stacks/catalog/traces/) on AIPerf's fixed schedule, capped at 6 and
11 requests in flight, each cold then warm. Zero errors; the manifest names the trace and its
checksum; `python -m reports build` writes sla.csv and trace_replay.csv, which must equal what
the raw exports and the trace say (tests/sla_checks.py, tests/trace_checks.py), and report.md
shows the reuse upper bound, the measured hit rate and the exclusions. The trace's first 16
requests (make demo: 24 at c6 only).
"""

from __future__ import annotations

import json
import subprocess

import pandas as pd
import pytest
import yaml
from engine_support import REPO, needs_engine, read_manifest, runner_cmd, runner_env
from sla_checks import check_sla_against_raw
from trace_checks import check_trace_table_against_raw
from typer.testing import CliRunner

from reports.__main__ import app
from reports.tables.published import PUBLISHED_LABEL
from stacks.catalog.model_catalog import MOTIF_3
from stacks.catalog.trace_files import PUBLIC_TRACES
from stacks.config.loader import STACKS_DIR
from workloads.datasets import TEMPLATE_MARGIN

pytestmark = [pytest.mark.engine, pytest.mark.load(2), needs_engine]
STACK = "local-recipe-motif3"


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    root = tmp_path_factory.mktemp("rehearsal")
    stacks = root / "stacks"
    stacks.mkdir()
    doc = yaml.safe_load((STACKS_DIR / f"Pulumi.{STACK}.yaml").read_text())
    trace = doc["config"]["dynamo-bench:workloads"]["traceReplay"]
    trace["quick"] = {**trace["quick"], "maxRequests": 16, "concurrencies": [6, 11]}
    (stacks / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc))
    cmd = runner_cmd(STACK, stacks, root / "runs", "r1", "--scale", "quick")
    out = subprocess.run(cmd, env=runner_env(root / "hf"), capture_output=True, text=True,
                         timeout=900, cwd=REPO)
    run_dir = root / "runs" / STACK / "r1"
    return out, run_dir, root


def test_rehearsal_runs_the_recipe_layout_cold_and_warm(rehearsal) -> None:
    out, run_dir, _ = rehearsal
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    manifest = read_manifest(run_dir)
    assert list(manifest["steps"]) == ["trace_replay/c6", "trace_replay/c6-warm",
                                       "trace_replay/c11", "trace_replay/c11-warm"]
    # coldRestart first-step (the trace default, as on the B200 stacks): only the first step
    # restarts the workers; c11's prompts are fresh hash ids, so its cache is still cold
    assert {s: (r["cold"], r["params"]["cache"]) for s, r in manifest["steps"].items()} == {
        "trace_replay/c6": (True, "cold"), "trace_replay/c6-warm": (False, "warm"),
        "trace_replay/c11": (False, "cold"), "trace_replay/c11-warm": (False, "warm")}
    assert "cold_restart_s" in manifest["steps"]["trace_replay/c6"]
    assert "cold_restart_s" not in manifest["steps"]["trace_replay/c11"]
    (attempt,) = manifest["attempts"]
    workers = attempt["target"]["workers"]
    assert sorted(w["role"] for w in workers) == ["decode", "prefill", "prefill", "prefill"]
    # every mocker holds a TP2 B200 worker's KV capacity, in the recipe's 128-token blocks
    assert {w["block_size"] for w in workers} == {128}
    assert min(w["kv_blocks"] for w in workers) > 10_000
    for step_id, rec in manifest["steps"].items():
        limit = rec["dataset"]["context_limit"]
        sent = [json.loads(x) for x in (run_dir / rec["dataset"]["path"]).read_text()
                .splitlines()]
        assert len(sent) == limit["requested_rows"] - limit["dropped"]
        assert all(r["input_length"] + r["output_length"] <= 16384 - TEMPLATE_MARGIN
                   for r in sent)
        assert rec["counts"]["failed"] == rec["counts"]["truncated"] == 0, step_id
    # the trace's first requests include prompts past maxModelLen 16384: dropped and counted
    assert manifest["steps"]["trace_replay/c11"]["dataset"]["context_limit"]["dropped"] > 0
    # the run record names the trace it replayed and the checksum it was verified against
    assert manifest["traces"]["mooncake-conversation"]["sha256"] == \
        PUBLIC_TRACES["mooncake-conversation"].sha256
    for rec in manifest["steps"].values():
        assert rec["dataset"]["trace"]["verified"] == "published sha256"
        assert rec["command"][rec["command"].index("--isl-block-size") + 1] == "128"
        assert "--fixed-schedule" in rec["command"]


@pytest.fixture(scope="module")
def report_dir(rehearsal):
    """`python -m reports build` of the rehearsal run."""
    out, run_dir, root = rehearsal
    assert out.returncode == 0
    result = CliRunner().invoke(app, ["build", str(run_dir), "--out", str(root / "out"),
                                      "--name", "rehearsal"])
    assert result.exit_code == 0, result.output
    return root / "out" / "rehearsal"


def test_sla_csv_from_the_rehearsal_equals_the_raw_exports(rehearsal, report_dir) -> None:
    run_dir = rehearsal[1]
    sla = pd.read_csv(report_dir / "sla.csv")
    measured = check_sla_against_raw(sla, run_dir)
    assert set(measured["cache"]) == {"cold", "warm"}
    assert measured.loc["trace_replay/c11", "excluded_over_context"] > 0
    # the warm replay finds the prompts the cold pass cached
    assert measured.loc["trace_replay/c11-warm", "measured_kv_reuse"] > \
        measured.loc["trace_replay/c11", "measured_kv_reuse"]
    published = sla[sla["row_kind"] == PUBLISHED_LABEL]
    assert set(published["model"]) == {MOTIF_3} and len(published) == 3


def test_report_shows_the_bound_the_measured_hit_rate_and_the_exclusions(rehearsal,
                                                                        report_dir) -> None:
    table = pd.read_csv(report_dir / "trace_replay.csv")
    got = check_trace_table_against_raw(table, rehearsal[1])
    assert (got["completed"] == got["attempted"]).all() and got["usable"].all()
    assert (got["excluded_over_context"] > 0).all()
    # no eviction at this scale: the server hits about what the trace allows, cold and warm
    assert (got["hit_rate_gap"].abs() < 0.02).all()
    section = (report_dir / "report.md").read_text().split(
        "## Trace replay")[1].split("\n## ")[0]
    for column in ("reuse_upper_bound_blocks", "reuse_upper_bound_tokens",
                   "measured_hit_rate", "hit_rate_gap", "excluded_over_context"):
        assert column in section
    assert section.count("| local-recipe-motif3 | trace_replay/") == 4
