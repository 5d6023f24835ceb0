"""One wording per timing source, everywhere in a report: the run's recorded timings decide
the label (workloads/targets/mocker_timings.py `label`) and, from it, what the summary says
they are, the Stacks table, section titles, plot titles and the predicted-vs-measured lines
(mocker_timings.words, through reports/records/stackinfo.py timing_words). A rehearsal on
AIConfigurator's table is a model of the imitated GPU, not "the mocker's" timings; one on the
mocker's generic timings models no GPU."""

from __future__ import annotations

import json

from reports_fixtures import copy_runs, manifest, run_dir

from reports.build import build_report, combine
from reports.records.runs import load_run
from reports.render.plots import rehearsal_tag
from workloads.targets.mocker_timings import GENERIC_LABEL

TABLE_LABEL = ("SIMULATED (mocker, timings from AIConfigurator 0.12.0 a100_sxm_40gb/vllm "
               "0.14.0, table sha256 7bec7f1d1f0c)")
TABLE = {"source": "aiconfigurator", "label": TABLE_LABEL, "tables": [
    {"role": "worker", "aiconfigurator": "0.12.0", "system": "a100_sxm_40gb",
     "backend": "vllm", "backend_version": "0.14.0", "sha256": "7bec7f1d1f0c" + "0" * 52}]}
GENERIC = {"source": "generic", "reason": "the predictor is not installed", "tables": [],
           "label": GENERIC_LABEL}


def _report(tmp_path, timings_by_stack: dict[str, dict | None]):
    root = copy_runs(tmp_path)
    runs = []
    for stack, timings in timings_by_stack.items():
        rd = run_dir(root, stack)
        doc = manifest(rd)
        doc["attempts"][-1]["target"].pop("timings", None)
        if timings is not None:
            doc["attempts"][-1]["target"]["timings"] = timings
        (rd / "manifest.json").write_text(json.dumps(doc))
        runs.append(rd)
    report = build_report(runs, tmp_path / "out", name="timings")
    infos = combine([load_run(r) for r in runs])[2]
    return infos, (report.out_dir / "report.md").read_text()


def _where(text: str, stack: str) -> str:
    where = text[text.index("**Where it ran**"):text.index("**What was measured**")]
    (line,) = [x for x in where.splitlines() if x.startswith(f"- `{stack}`: ")]
    return line


def test_a_rehearsal_on_aiconfigurators_table_is_worded_as_its_label_everywhere(tmp_path):
    infos, text = _report(tmp_path, {"local-agg": TABLE, "local-disagg": GENERIC})
    agg, disagg = _where(text, "local-agg"), _where(text, "local-disagg")
    # the summary's words are the label's: the table is a model of the A100, not "the mocker's"
    assert f"**REHEARSAL on the local mocker, {TABLE_LABEL}**" in agg
    assert "AIConfigurator 0.12.0's database for a100_sxm_40gb" in agg
    assert "not a measurement" in agg and "not a prediction of GPU performance" not in text
    assert f"**REHEARSAL on the local mocker, {GENERIC_LABEL}**" in disagg
    assert "a model of no GPU" in disagg
    # the Stacks table says their short words, the same labels in full below it
    assert "| local-agg | local | timings from AIConfigurator 0.12.0 a100_sxm_40gb |" in text
    assert "| local-disagg | local | mocker generic timings |" in text
    stacks = text[text.index("## Stacks"):text.index("## SLOs")]
    assert f"- `local-agg`: {TABLE_LABEL}" in stacks
    assert f"- `local-disagg`: {GENERIC_LABEL}" in stacks
    # titles: each rehearsal stack with the short form of its own timings
    both = ("local-agg: timings from AIConfigurator 0.12.0 a100_sxm_40gb; local-disagg: "
            "mocker generic timings")
    assert f"## Concurrency sweep — REHEARSAL ({both})" in text
    assert f"## Hypotheses — REHEARSAL figures ({both})" in text
    assert f"**Headline answers — REHEARSAL ({both})**" in text
    assert f"## Answers — REHEARSAL ({both})" in text
    assert "local mocker timings" not in text
    # plots: the same words (the stacks named, as their timings differ)
    assert rehearsal_tag(infos) == f"REHEARSAL on the local mocker ({both})\n"
    agg_only = {"local-agg": infos["local-agg"]}
    assert rehearsal_tag(agg_only) == ("REHEARSAL on the local mocker, timings from "
                                       "AIConfigurator 0.12.0 a100_sxm_40gb\n")


def test_a_run_without_recorded_timings_says_so_and_no_more(tmp_path):
    _, text = _report(tmp_path, {"local-agg": None})
    line = _where(text, "local-agg")
    assert "**REHEARSAL on the local mocker, SIMULATED (mocker; its timings were not recorded " \
           "by this run)**" in line
    assert "## Concurrency sweep — REHEARSAL (local-agg: mocker, timings not recorded)" in text


def test_a_stacks_runs_on_different_timings_are_each_named():
    """Two runs of one stack, one on the table and one on the generic timings: one label for
    both would hide one of them."""
    from reports.records.stackinfo import runs_timing, timing_words

    on_table = timing_words({"attempts": [{"target": {"timings": TABLE}}]}, "local")
    generic = timing_words({"attempts": [{"target": {"timings": GENERIC}}]}, "local")
    assert runs_timing({"a": on_table, "b": on_table}) == on_table
    mixed = runs_timing({"a": on_table, "b": generic})
    assert mixed.label == f"run a: {TABLE_LABEL}; run b: {GENERIC_LABEL}"
    assert "a model of no GPU" in mixed.meaning and "a100_sxm_40gb" in mixed.meaning
    assert timing_words({"attempts": [{"target": {"timings": TABLE}}]}, "aws").label == \
        "MEASURED"
