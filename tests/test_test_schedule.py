"""`make test` runs the tests while the parser environments still build (Makefile, `test`): a
`parsers` test waits for the build's exit status, fails the run when the build failed, and the
files holding such tests are scheduled last, whole, so no worker waits while others have work.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from conftest import FILE_SECONDS, run_order
from engine_support import PARSERS_BUILD_VAR, missing_parsers, parsers_build_failed


def _later(path, text: str) -> threading.Thread:
    """Write `text` to `path` once the waiter has looked at least once."""
    def write() -> None:
        path.write_text(text)
    timer = threading.Timer(0.3, write)
    timer.start()
    return timer


@pytest.mark.parametrize(("code", "failed"), [("0", False), ("2", True)])
def test_a_parsers_test_waits_for_the_build_and_reads_its_status(tmp_path, monkeypatch, code,
                                                                 failed):
    status = tmp_path / "parsers-build.status"
    monkeypatch.setenv(PARSERS_BUILD_VAR, str(status))
    timer = _later(status, code + "\n")
    said = parsers_build_failed(poll_s=0.05)
    timer.join()
    assert status.read_text() == code + "\n"    # it returned only once the build had ended
    assert (said is not None) == failed
    if failed:
        assert said is not None and "failed (exit 2)" in said
        assert missing_parsers() == said       # the marker's check fails the test (skip off CI)


def test_without_a_build_beside_the_tests_nothing_is_waited_for(monkeypatch):
    monkeypatch.delenv(PARSERS_BUILD_VAR, raising=False)
    assert parsers_build_failed() is None


def _item(nodeid: str, *markers: str) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, get_closest_marker=lambda name: (
        SimpleNamespace(args=()) if name in markers else None))


def test_files_with_a_parsers_test_run_last_whole_and_the_load_lanes_first():
    longest = max(FILE_SECONDS, key=FILE_SECONDS.__getitem__)   # first, were it not waiting
    items = [_item(f"tests/{longest}::test_pins"),
             _item("tests/test_engine_parse.py::test_refused", "parsers"),
             _item("tests/test_no_figure.py::test_fuzz"),
             _item(f"tests/{longest}::test_parsers_env", "parsers"),
             _item("tests/test_runner_engine.py::test_run", "load")]
    waiting = frozenset(i.nodeid.split("::")[0] for i in items
                        if i.get_closest_marker("parsers") is not None)
    order = [i.nodeid for i in sorted(items, key=lambda i: run_order(i, waiting))]
    assert order == ["tests/test_runner_engine.py::test_run",
                     "tests/test_no_figure.py::test_fuzz",
                     f"tests/{longest}::test_pins",
                     f"tests/{longest}::test_parsers_env",
                     "tests/test_engine_parse.py::test_refused"]
