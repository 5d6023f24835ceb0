"""`make mutate`: mutation testing of the modules that produce figures and decisions.

For each group of tests/mutation/targets.py, mutmut (3.8.1, requirements-mutate.txt) copies the
packages into `.mutmut/<group>/mutants/`, mutates the group's modules there and runs, for every
mutant, the group's tests that execute the mutated function. Then every bug of
tests/mutation/planted.py is applied to a scratch copy and the group's tests must fail.
Prints a score per module, every surviving mutant with its diff, and the planted bugs'
verdicts; writes the same to `.mutmut/report.md`. Exit 1 when a module scores under the bar,
a planted bug survives or the equivalent-mutant list is stale.

    .venv/bin/python tests/mutation/run.py [--only GROUP]... [--max-children N] [--no-planted]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from mutation.planted import PLANTED, Planted  # noqa: E402
from mutation.scores import (  # noqa: E402
    EQUIVALENT_FILE,
    ModuleScore,
    parse_equivalents,
    score_module,
    table,
)
from mutation.targets import GROUPS, MIN_SCORE, Group, group  # noqa: E402

WORK = REPO / ".mutmut"
PACKAGES = ("stacks", "components", "workloads", "reports")
ALSO_COPY = ("Pulumi.yaml", "__main__.py")
# The unit tests only: the engine and Prometheus tests start processes per test.
PYTEST_ARGS = ["-p", "no:cacheprovider", "-m", "not engine and not prometheus"]
GROUP_TIMEOUT_S = 45 * 60
PLANTED_TIMEOUT_S = 10 * 60


def _link_shared(work: Path) -> None:
    """Tests find the project's reference data as `../shared` beside the checkout, i.e.
    parents[2] of a test file: beside `mutants/` here."""
    shared = REPO.parent / "shared"
    if shared.is_dir() and not (work / "shared").exists():
        (work / "shared").symlink_to(shared)


def _toml_list(items) -> str:
    return "[" + ", ".join(json.dumps(str(i)) for i in items) + "]"


def prepare(g: Group) -> Path:
    """A fresh mutmut work directory for `g`: links to the packages and tests, and a
    pyproject.toml with the project's pytest settings plus the group's [tool.mutmut]."""
    work = WORK / g.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name in (*PACKAGES, "tests", *ALSO_COPY):
        (work / name).symlink_to(REPO / name)
    _link_shared(work)
    missing = [t for t in g.tests if not (REPO / t).exists()]
    if missing:
        raise SystemExit(f"group {g.name}: test files {missing} do not exist "
                         "(fix tests/mutation/targets.py)")
    config = "\n".join([
        "", "[tool.mutmut]",
        f"source_paths = {_toml_list(PACKAGES)}",
        f"only_mutate = {_toml_list(g.modules)}",
        f"also_copy = {_toml_list(ALSO_COPY)}",
        f"pytest_add_cli_args_test_selection = {_toml_list(g.tests)}",
        f"pytest_add_cli_args = {_toml_list(PYTEST_ARGS)}",
        "use_git_change_detection = false", ""])
    (work / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text() + config)
    return work


def run_mutmut(g: Group, work: Path, max_children: int) -> float:
    mutmut = Path(sys.executable).with_name("mutmut")
    if not mutmut.exists():
        raise SystemExit("mutmut is not installed: make mutate installs "
                         "requirements-mutate.txt")
    start = time.monotonic()
    log = work / "mutmut.log"
    with log.open("w") as out:
        proc = subprocess.run([str(mutmut), "run", "--max-children", str(max_children)],
                              cwd=work, stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, "MPLBACKEND": "Agg"},
                              timeout=GROUP_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"group {g.name}: mutmut exited {proc.returncode}; its log "
                         f"({log}) ends with:\n{tail}")
    return time.monotonic() - start


def statuses(work: Path, module: str) -> dict[str, str]:
    from mutmut.stats import status_by_exit_code

    meta = json.loads((work / "mutants" / f"{module}.meta").read_text())
    return {name: status_by_exit_code[code]
            for name, code in meta["exit_code_by_key"].items()}


def diff(work: Path, module: str, mutant: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    here = Path.cwd()
    os.chdir(work)
    try:
        return get_diff_for_mutant(mutant.split(" ")[0], path=module)
    finally:
        os.chdir(here)


def _copy_repo(dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in (*PACKAGES, "tests"):
        shutil.copytree(REPO / name, dest / name, ignore=ignore)
    for name in (*ALSO_COPY, "pyproject.toml"):
        shutil.copy2(REPO / name, dest / name)


def check_planted(bugs: tuple[Planted, ...]) -> list[tuple[Planted, str, float]]:
    """(bug, verdict, seconds): `killed` when the tests fail with the bug in place."""
    scratch = WORK / "planted"
    _copy_repo(scratch / "repo")
    _link_shared(scratch)
    out = []
    for bug in bugs:
        path = scratch / "repo" / bug.module
        original = path.read_text()
        if original.count(bug.old) != 1:
            out.append((bug, f"NOT PLANTED: the text occurs {original.count(bug.old)} times",
                        0.0))
            continue
        tests = next(g.tests for g in GROUPS if bug.module in g.modules)
        path.write_text(original.replace(bug.old, bug.new))
        start = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", *PYTEST_ARGS,
                                   *tests], cwd=scratch / "repo", capture_output=True,
                                  text=True, timeout=PLANTED_TIMEOUT_S, check=False)
        finally:
            path.write_text(original)
        verdict = {0: "SURVIVED", 1: "killed"}.get(
            proc.returncode, f"ERROR: pytest exited {proc.returncode}")
        out.append((bug, verdict, time.monotonic() - start))
        print(f"  planted {bug.name}: {verdict}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[], metavar="GROUP",
                    help=f"run only these groups ({', '.join(g.name for g in GROUPS)})")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2,
                    help="mutants tested in parallel (default: the CPU count)")
    ap.add_argument("--no-planted", action="store_true", help="skip the planted bugs")
    args = ap.parse_args(argv)
    groups = [group(n) for n in args.only] if args.only else list(GROUPS)
    equivalents = parse_equivalents(EQUIVALENT_FILE.read_text())

    started = time.monotonic()
    scores: list[ModuleScore] = []
    survivors: list[str] = []
    timings: list[str] = []
    for g in groups:
        print(f"[{g.name}] mutating {', '.join(g.modules)} against {len(g.tests)} test files",
              flush=True)
        work = prepare(g)
        seconds = run_mutmut(g, work, args.max_children)
        timings.append(f"{g.name}: {seconds:.0f} s")
        found = []
        for module in g.modules:
            s = score_module(module, statuses(work, module), equivalents)
            scores.append(s)
            print(f"[{g.name}] {module}: {s.killed}/{s.counted} killed ({s.score:.1%}), "
                  f"{len(s.equivalent)} equivalent, {seconds:.0f} s for the group", flush=True)
            found += [f"### {name}\n```diff\n{diff(work, module, name)}\n```"
                      for name in s.survived]
        (work / "survivors.md").write_text("\n".join(found) + "\n")
        survivors += found

    planted = []
    if not args.no_planted:
        names = {m for g in groups for m in g.modules}
        print("planted bugs:", flush=True)
        planted = check_planted(tuple(b for b in PLANTED if b.module in names))
    wall = time.monotonic() - started

    stale = [f"- {n} ({s.module})" for s in scores for n in s.stale]
    report = ["## Mutation scores", "", table(scores, MIN_SCORE), "",
              f"Wall time {wall / 60:.1f} min ({'; '.join(timings)}), "
              f"{args.max_children} mutants in parallel.", "",
              f"## Surviving mutants ({len(survivors)})", "", *survivors]
    if stale:
        report += ["", f"## Stale entries of {EQUIVALENT_FILE.name} (killed or gone)", "",
                   *stale]
    if planted:
        report += ["", "## Planted bugs", "", "| bug | module | verdict | s |",
                   "|---|---|---|---:|"]
        report += [f"| {b.name} | {b.module} | {v} | {t:.0f} |" for b, v, t in planted]
    text = "\n".join(report) + "\n"
    WORK.mkdir(exist_ok=True)
    (WORK / "report.md").write_text(text)
    print()
    print(text)
    failed = ([s.module for s in scores if s.score < MIN_SCORE] + stale
              + [b.name for b, v, _ in planted if v != "killed"])
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
