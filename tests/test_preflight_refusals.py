"""Invalid stacks as a new user writes them: each is a valid sibling with ONE mistake.

Every case starts from a shipped stack (or from its text or bytes, for mistakes YAML would hide),
makes one change, runs `python -m stacks check` (CliRunner) and asserts exit 2, a problem line
starting with the exact field path, the message, and no decimal-GB figure (one unit per message:
GiB). Then the sibling (the unchanged stack, or the change plus its fix) must pass with exit 0,
so a check that fires on everything cannot pass. The cases cover the seven classes of issue 12:
file (stack files that cannot lie), aws, k8s, layout (one layout, one truth), program (what the
Pulumi program checks), recipe (B200 seed constraints) and message (how problems are said).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import stack_variants as sv
from preflight_refusal_cases import CASES, KINDS, Case
from stack_variants import both

from stacks.config.loader import STACKS_DIR

DECIMAL_GB = re.compile(r"\d GB\b")


def _write_variant(stacks_dir: Path, case: Case) -> None:
    path = stacks_dir / f"Pulumi.{case.name}.yaml"
    if case.change is not None:
        sv.write_stack(stacks_dir, case.name, sv.variant_config(case.source, case.change))
        return
    text = (STACKS_DIR / f"Pulumi.{case.source}.yaml").read_text()
    if case.raw is not None:
        path.write_bytes(case.raw(text))
    else:
        assert case.text is not None
        path.write_text(case.text(text))


def test_sixty_or_more_one_mistake_stacks_across_the_seven_classes() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 60
    kinds = Counter(c.kind for c in CASES)
    assert set(kinds) == set(KINDS), kinds
    assert all(n >= 3 for n in kinds.values()), kinds


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_one_mistake_is_refused_naming_the_field(case: Case, tmp_path: Path) -> None:
    stacks_dir = sv.copy_shipped(tmp_path)
    if case.setup:
        case.setup(stacks_dir)
    _write_variant(stacks_dir, case)
    code, out = sv.check(stacks_dir, case.name)
    assert code == 2, out
    assert "Traceback" not in out
    assert f"- {case.field}: " in out, out
    assert case.says in out, out
    line = out[out.index(f"- {case.field}: "):]
    line = line[:line.find(" - ", 3) if " - " in line[3:] else len(line)]
    assert not DECIMAL_GB.search(line), line   # one unit: GiB

    fixed = both(case.change, case.fix) if case.change and case.fix else None
    sv.write_stack(stacks_dir, "sibling", sv.variant_config(case.source, fixed) if fixed
                else sv.read_config(STACKS_DIR, case.source))
    code, out = sv.check(stacks_dir, "sibling")
    assert code == 0, out
    assert "1/1 stack(s) valid" in out
