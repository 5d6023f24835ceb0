"""Mutation scores per module from mutmut's verdicts and the equivalent-mutant list (pure).

A module's score is killed / (mutants - equivalent): a mutant that no test kills and that is
not listed in `equivalent.md` with the reason it cannot change behaviour counts against it, and
so does a mutant no selected test even runs ("no tests"). Timeouts count as killed (the mutant
changed behaviour: an endless loop). An entry of the list whose mutant was killed or no longer
exists is stale, and reported, so the list never excuses a mutant that is not there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

EQUIVALENT_FILE = Path(__file__).with_name("equivalent.md")
KILLED_STATUSES = ("killed", "timeout")
_ENTRY = re.compile(r"^- `(?P<name>[^`]+)`: (?P<reason>.*\S.*)$")


def parse_equivalents(text: str) -> dict[str, str]:
    """`- `<mutant name>`: <reason>` lines -> {name: reason}; a bullet that breaks the format
    (no name in backticks, no reason) or names a mutant twice is an error, not a skip."""
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.startswith("- "):
            continue
        m = _ENTRY.match(line)
        if m is None:
            raise ValueError(f"{EQUIVALENT_FILE.name} line {n}: write entries as "
                             "- `<mutant name>`: <why it cannot change behaviour>")
        if m["name"] in out:
            raise ValueError(f"{EQUIVALENT_FILE.name} line {n}: {m['name']} is listed twice")
        out[m["name"]] = m["reason"].strip()
    return out


def module_of(mutant: str) -> str:
    """`workloads.outcomes.x_classify__mutmut_3` -> `workloads/outcomes.py`."""
    parts = mutant.split(".")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i].startswith(("x_", "xǁ")):
            return "/".join(parts[:i]) + ".py"
    raise ValueError(f"'{mutant}' is not a mutmut mutant name")


@dataclass
class ModuleScore:
    module: str
    total: int = 0
    killed: int = 0
    timeouts: int = 0                                       # of the killed
    equivalent: list[str] = field(default_factory=list)
    survived: list[str] = field(default_factory=list)       # not killed, not listed
    stale: list[str] = field(default_factory=list)          # listed, yet killed or gone

    @property
    def counted(self) -> int:
        return self.total - len(self.equivalent)

    @property
    def score(self) -> float:
        return self.killed / self.counted if self.counted else 1.0


def score_module(module: str, statuses: Mapping[str, str],
                 equivalents: Mapping[str, str]) -> ModuleScore:
    """`statuses`: mutmut's verdict of every mutant of `module` by name."""
    out = ModuleScore(module, total=len(statuses))
    for name, status in sorted(statuses.items()):
        if status in KILLED_STATUSES:
            out.killed += 1
            out.timeouts += status == "timeout"
            if name in equivalents:
                out.stale.append(name)
        elif name in equivalents:
            out.equivalent.append(name)
        else:
            out.survived.append(f"{name} ({status})" if status != "survived" else name)
    out.stale += sorted(n for n in equivalents if module_of(n) == module and n not in statuses)
    return out


def table(scores: list[ModuleScore], min_score: float) -> str:
    """The per-module table (markdown, readable as plain text)."""
    lines = ["| module | mutants | killed (timeouts) | equivalent | survived | score | >= "
             f"{min_score:.0%} |", "|---|---:|---:|---:|---:|---:|:---:|"]
    for s in scores:
        lines.append(f"| {s.module} | {s.total} | {s.killed} ({s.timeouts}) | "
                     f"{len(s.equivalent)} | "
                     f"{len(s.survived)} | {s.score:.1%} | "
                     f"{'yes' if s.score >= min_score else 'NO'} |")
    total = sum(s.total for s in scores)
    killed = sum(s.killed for s in scores)
    equivalent = sum(len(s.equivalent) for s in scores)
    counted = total - equivalent
    lines.append(f"| **all** | {total} | {killed} ({sum(s.timeouts for s in scores)}) | "
                 f"{equivalent} | "
                 f"{sum(len(s.survived) for s in scores)} | "
                 f"{killed / counted if counted else 1.0:.1%} | |")
    return "\n".join(lines)
