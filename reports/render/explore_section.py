"""The explore's answer inside a report (pure but for reading the folder): `stacks explore
<base> --out DIR` writes explore.md, explore.csv and explore-pareto.png; `reports build/compare
--explore DIR` copies them beside the report and adds a section with, per SLO, the sweep's top
candidates at their operating points, labelled as explore.md labels every figure (SIMULATED by
DynoSim with its timing sources: never MEASURED)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

FILES = ("explore.md", "explore.csv", "explore-pareto.png")
SHOWN = ["rank", "candidate", "gpus", "concurrency", "output_tok_s_per_gpu", "tok_s_per_user",
         "ttft_p50_ms", "ttft_p50_likely_ms", "itl_p50_ms", "itl_p50_likely_ms",
         "usd_per_1m_output_tokens", "pareto"]
TOP = 3


class ExploreMissing(ValueError):
    """The folder holds no explore output: the message names the command that makes it."""


def read(folder: Path) -> tuple[pd.DataFrame, str, str]:
    """(explore.csv, the label explore.md gives every figure, the base's name)."""
    missing = [f for f in FILES[:2] if not (folder / f).is_file()]
    if missing:
        raise ExploreMissing(f"--explore {folder}: no {', '.join(missing)} there (make it with "
                             "`python -m stacks explore <base> --out DIR`)")
    md = (folder / "explore.md").read_text().splitlines()
    label = next((line.removeprefix("Every figure: ").rstrip(".") for line in md
                  if line.startswith("Every figure: ")), "SIMULATED")
    base = md[0].removeprefix("# Explore ").strip() if md else "?"
    return pd.read_csv(folder / "explore.csv"), label, base


def top_rows(table: pd.DataFrame, slo: str, k: int = TOP) -> pd.DataFrame:
    """The concurrency sweep's ranked candidates meeting `slo`, best first, at most k."""
    sweep = table[(table["workload"] == "concurrency_sweep") & (table["slo"] == slo)
                  & table["rank"].notna()]
    top = sweep.sort_values("rank").head(k).copy()
    for col in ("rank", "gpus", "concurrency"):    # counts, not measures: no decimals
        if col in top:
            top[col] = top[col].astype("Int64")
    return top


def section(table: pd.DataFrame, label: str, base: str, where: str = "explore") -> str:
    """The report's explore section (markdown)."""
    from reports.render.markdown import md_table

    out = [f"\n## Explore {base}: the configurations its node groups hold — {label}\n\n",
           f"Every candidate pre-flight accepts, simulated on the plan's workloads; the "
           f"operating point is the highest concurrency still meeting the SLO. Top {TOP} per "
           f"SLO on the concurrency sweep below; the whole ranking, the Pareto frontier, the "
           f"plan's four questions and what was refused: [{where}/explore.md]({where}/"
           f"explore.md), [{where}/explore.csv]({where}/explore.csv).\n"]
    for slo in sorted(table["slo"].dropna().unique()):
        top = top_rows(table, str(slo))
        out.append(f"\n### {slo}\n\n")
        out.append(md_table(top, [c for c in SHOWN if c in top]) if not top.empty
                   else "No candidate meets the SLO.\n")
    out.append(f"\n![explore Pareto frontier]({where}/explore-pareto.png)\n")
    return "".join(out)


def copy_into(folder: Path, out_dir: Path) -> None:
    """The explore's files beside the report (out_dir/explore/)."""
    (out_dir / "explore").mkdir(parents=True, exist_ok=True)
    for f in FILES:
        if (folder / f).is_file():
            shutil.copy2(folder / f, out_dir / "explore" / f)
