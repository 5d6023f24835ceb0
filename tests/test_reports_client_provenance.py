"""The client a figure stands on is checked, not only recorded: a step whose AIPerf did not
run the project's slot wait is flagged and left out of verdicts, the run's provenance says
"AIPerf 0.13.0 + slot wait" only where it applied, `make bench` keeps and checks every pass's
patch status lines, and a sweep step's warm-up rows are not counted as requested."""

from __future__ import annotations

import json
import sys

from reports_fixtures import copy_runs, manifest, run_dir

from reports.build import build_report
from workloads import aiperf_site, bench
from workloads.aiperf_site import NO_SITE, patch_problems

OLD_AIPERF = "not applied: aiperf 0.14.0, the patch was read against 0.13.0"
APPLIED = {"aiperf_slot_wait": "applied"}


def _report(tmp_path, edit):
    rd = run_dir(copy_runs(tmp_path), "local-agg")
    doc = manifest(rd)
    edit(doc)
    (rd / "manifest.json").write_text(json.dumps(doc))
    report = build_report([rd], tmp_path / "out", name="provenance")
    return report, (report.out_dir / "report.md").read_text()


def test_a_step_whose_aiperf_ran_unpatched_is_flagged_and_left_out(tmp_path):
    def edit(doc):
        for step_id, rec in doc["steps"].items():
            rec["aiperf_patches"] = {"concurrency_sweep/c4": {"aiperf_slot_wait": OLD_AIPERF},
                                     "multi_turn/conv4": {}}.get(step_id, APPLIED)
    report, text = _report(tmp_path, edit)
    steps = report.steps.set_index("step")
    for step, why in (("concurrency_sweep/c4", OLD_AIPERF), ("multi_turn/conv4", NO_SITE)):
        assert not steps.loc[step, "usable"]
        assert steps.loc[step, "step_flag"].startswith(f"AIPERF UNPATCHED: slot wait {why}")
        assert f"local-agg {step} (run fixture): AIPERF UNPATCHED" in text   # a warning
    assert steps.loc["concurrency_sweep/c1", "usable"]
    assert "| AIPERF UNPATCHED |" in text                   # the sweep table's flag cell
    assert "AIPerf 0.13.0, its patches not as measured on 2 of 8 steps" in text
    assert "AIPerf 0.13.0 + slot wait" not in text


def test_the_provenance_says_slot_wait_only_where_every_step_ran_it(tmp_path):
    def edit(doc):
        for rec in doc["steps"].values():
            rec["aiperf_patches"] = dict(APPLIED)
    report, text = _report(tmp_path, edit)
    assert "AIPerf 0.13.0 + slot wait, Dynamo 1.6.1" in text
    assert report.steps["usable"].sum() == len(report.steps) - 1   # share050: client-bound
    # the committed fixtures predate the patches: said, not judged
    _, old = _report(tmp_path / "old", lambda doc: None)
    assert "AIPerf 0.13.0 (its patches not recorded)" in old and "UNPATCHED" not in old


def test_a_sweep_steps_warm_up_rows_are_not_requested(tmp_path):
    """c4's dataset has 100 rows; with 4 of them its AIPerf's warm-up (one per slot,
    workloads/step_warmup.py) the measurement requested 96."""
    def edit(doc):
        doc["steps"]["concurrency_sweep/c4"]["aiperf_warmup_requests"] = 4
    report, _ = _report(tmp_path, edit)
    steps = report.steps.set_index("step")
    assert steps.loc["concurrency_sweep/c4", "requested_rows"] == 96
    assert steps.loc["concurrency_sweep/c1", "requested_rows"] == 25    # no warm-up recorded


def test_which_client_each_pass_must_run():
    assert patch_problems(APPLIED) == []
    assert patch_problems({"aiperf_slot_wait": "already applied"}) == []
    assert patch_problems({}) == [f"slot wait {NO_SITE}"]
    assert patch_problems({"aiperf_slot_wait": OLD_AIPERF}) == [f"slot wait {OLD_AIPERF}"]
    both = {**APPLIED, "aiperf_quickack": "applied"}
    assert patch_problems(both, quickack=True) == []
    assert patch_problems(APPLIED, quickack=True) == [f"quick-ACK client {NO_SITE}"]
    assert patch_problems(both) == ["quick-ACK client applied: the bench's diagnostic client "
                                    "ran, not AIPerf's own"]


def test_the_bench_keeps_each_passs_status_lines_and_checks_them(tmp_path):
    """The quick-ACK pass's AIPerf output is kept (not sent to /dev/null), so the bench can
    show that its client ACKed at once and the others did not; a pass that did not is named."""
    env = aiperf_site.aiperf_env({}, quickack=True)
    log = tmp_path / "c1" / "aiperf.log"
    status = bench.run_aiperf([sys.executable, "-c", "print('profiling')"], env, log)
    assert status == {"aiperf_slot_wait": "applied", "aiperf_quickack": "applied"}
    assert "dynamo-bench: aiperf_quickack applied" in log.read_text()
    assert "profiling" in log.read_text()
    runner = {"aiperf_patches": dict(APPLIED)}
    good = bench.pass_patch_problems(runner, "c1", {"patches": {"c1": dict(APPLIED)}},
                                     {"patches": {"c1": status}})
    assert good == []
    blind = bench.pass_patch_problems(runner, "c1", {"patches": {"c1": status}},
                                      {"patches": {"c1": {}}})
    assert blind == ["bare pass: quick-ACK client applied: the bench's diagnostic client ran, "
                     "not AIPerf's own", f"quick-ACK pass: slot wait {NO_SITE}",
                     f"quick-ACK pass: quick-ACK client {NO_SITE}"]
    assert [h for _, h, _ in bench.COLUMNS][-1] == "AIPerf patches"
