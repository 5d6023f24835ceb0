"""`make mutate`'s own parts, fast enough for `make test`: the equivalent-mutant list parses and
names only target modules, every planted bug still finds its text in the code (a refactor that
moves it would otherwise retire the check silently), every target file exists, and the
score arithmetic counts what it says."""

from __future__ import annotations

from pathlib import Path

import pytest
from mutation.planted import PLANTED
from mutation.scores import (
    EQUIVALENT_FILE,
    module_of,
    parse_equivalents,
    score_module,
    table,
)
from mutation.targets import GROUPS, MIN_SCORE, group

REPO = Path(__file__).resolve().parents[1]
TARGETS = {m for g in GROUPS for m in g.modules}


def test_targets_exist_and_groups_are_unique():
    assert len({g.name for g in GROUPS}) == len(GROUPS)
    for g in GROUPS:
        assert all((REPO / p).is_file() for p in (*g.modules, *g.tests)), g.name
        assert all(t.startswith("tests/test_") for t in g.tests)
    assert group("slo").modules == ("reports/tables/goodput.py", "reports/tables/sla.py")
    with pytest.raises(KeyError, match="no mutation group 'nope'"):
        group("nope")


def test_the_equivalent_list_names_target_modules_with_reasons():
    entries = parse_equivalents(EQUIVALENT_FILE.read_text())
    assert entries
    assert {module_of(name) for name in entries} <= TARGETS
    assert all(len(reason) > 10 for reason in entries.values())


def test_every_planted_bug_still_finds_its_text():
    assert len({b.name for b in PLANTED}) == len(PLANTED)
    for bug in PLANTED:
        assert bug.module in TARGETS, bug.name
        assert (REPO / bug.module).read_text().count(bug.old) == 1, bug.name
        assert bug.old != bug.new


def test_malformed_entries_are_errors_not_skips():
    assert parse_equivalents("# title\n\n- `a.b.x_f__mutmut_1`: the default.\ntext\n") == {
        "a.b.x_f__mutmut_1": "the default."}
    for bad in ("- a.b.x_f__mutmut_1: no backticks", "- `a.b.x_f__mutmut_1`:",
                "- `a.x_f__mutmut_1`: one\n- `a.x_f__mutmut_1`: twice"):
        with pytest.raises(ValueError):
            parse_equivalents(bad)


def test_module_of_a_mutant():
    assert module_of("workloads.outcomes.x_classify__mutmut_3") == "workloads/outcomes.py"
    assert module_of("workloads.outcomes.xǁOutcomeCountsǁas_dict__mutmut_2") == \
        "workloads/outcomes.py"
    with pytest.raises(ValueError):
        module_of("not_a_mutant")


def test_score_counts_equivalents_out_and_everything_else_in():
    m = "workloads.outcomes"
    statuses = {f"{m}.x_f__mutmut_1": "killed", f"{m}.x_f__mutmut_2": "timeout",
                f"{m}.x_f__mutmut_3": "survived", f"{m}.x_f__mutmut_4": "no tests",
                f"{m}.x_f__mutmut_5": "survived", f"{m}.x_f__mutmut_6": "killed"}
    equivalents = {f"{m}.x_f__mutmut_5": "default", f"{m}.x_f__mutmut_6": "wrongly listed",
                   f"{m}.x_f__mutmut_9": "gone", "reports.tables.goodput.x_g__mutmut_1": "other"}
    s = score_module("workloads/outcomes.py", statuses, equivalents)
    assert (s.total, s.killed, s.timeouts, s.counted) == (6, 3, 1, 5)
    assert s.equivalent == [f"{m}.x_f__mutmut_5"]
    assert s.survived == [f"{m}.x_f__mutmut_3", f"{m}.x_f__mutmut_4 (no tests)"]
    assert s.stale == [f"{m}.x_f__mutmut_6", f"{m}.x_f__mutmut_9"]
    assert s.score == pytest.approx(3 / 5)
    text = table([s], MIN_SCORE)
    assert "| workloads/outcomes.py | 6 | 3 (1) | 1 | 2 | 60.0% | NO |" in text
    assert text.splitlines()[-1] == "| **all** | 6 | 3 (1) | 1 | 2 | 60.0% | |"
