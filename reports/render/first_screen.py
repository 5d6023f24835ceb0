"""What report.md (and index.html) show before any scrolling: the plan's questions answered
(pure: the judged comparisons in, markdown out).

1. `## Answers`: one line per question, stacks and figure (reports/comparisons/verdicts.py
   first_screen): the difference per step with its 95 % interval, the verdict (better / worse /
   indistinguishable at this sample, Holm over the report's comparisons) and what it stands on
   (MEASURED, REHEARSAL or SIMULATION; the title names each stack's timings);
2. the Pareto plot;
3. the warnings, one short line each (their details are in the summary below).
The summary (where it ran, what was measured, headline answers, the warnings in full) follows.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports.comparisons.verdicts import FAMILY_REPORT, NOT_JUDGED, first_screen

ANSWERS = "Answers"
GLANCE = "**Warnings at a glance** (details in the summary below)"


def _cell(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def answers_table(comparisons: pd.DataFrame) -> tuple[str, str]:
    """(the answers table, the line naming what was not judged). When every answer stands on
    the same figures (the title says which), the column says only MEASURED / REHEARSAL /
    SIMULATION."""
    table = first_screen(comparisons)
    if table.empty:
        return ("_No comparison: these runs hold no two stacks that share a step "
                "(agg vs disagg, a one-setting pair, cold vs warm)._\n", "")
    skipped = table[table["question"] == NOT_JUDGED]
    table = table[table["question"] != NOT_JUDGED]
    unjudged = f"Not judged: {skipped['difference [95 % CI]'].iloc[0]}. " if len(skipped) \
        else ""
    # MEASURED / REHEARSAL / SIMULATION: the title names each stack's timings
    table = table.assign(**{"stands on": table["stands on"].str.split(" \\(").str[0]})
    if table.empty:
        return "_No comparison could be judged._\n", unjudged
    cols = list(table.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(v) for v in r) + " |"
              for r in table.itertuples(index=False)]
    return "\n".join(lines) + "\n", unjudged


def _family(comparisons: pd.DataFrame, unjudged: str) -> str:
    mine = comparisons[comparisons["family"] == FAMILY_REPORT] if not comparisons.empty \
        else comparisons
    judged = int(mine["p_value"].notna().sum()) if not mine.empty else 0
    return (f"\n{unjudged}better / worse: the first stack against the second after Holm over "
            f"{judged} comparisons; indistinguishable: this sample cannot tell them apart "
            "([method, every row](#comparisons)).\n")


def render(comparisons: pd.DataFrame | None, pareto: Path | None, glance: list[str],
           label: str = "") -> str:
    """`## Answers` (with the title's label), the Pareto plot and the warnings at a glance."""
    comparisons = comparisons if comparisons is not None else pd.DataFrame()
    table, unjudged = answers_table(comparisons)
    out = [f"\n## {ANSWERS}{label}\n\n", table, _family(comparisons, unjudged)]
    if pareto is not None:
        out.append(f"\n![pareto]({pareto.name})\n")
    if glance:
        out += [f"\n{GLANCE}\n\n", *[f"- {g}\n" for g in dict.fromkeys(glance)]]
    return "".join(out)
