"""What `stacks explore` shows and writes: the terminal tables (rich), and
reports/out/explore-<base>/ with explore.md, explore.csv and explore-pareto.png (matplotlib),
every figure labelled SIMULATED with its timing source. Text is made by pure functions; `write`
is the thin shell."""

from __future__ import annotations

import csv
from pathlib import Path

from rich.console import Console
from rich.table import Table

from stacks.explore.bracket import STEPS_PER_DOUBLING
from stacks.explore.figure_bands import figure_bands
from stacks.explore.figure_bands import words as band_words
from stacks.explore.questions import answers
from stacks.explore.results import CSV_COLUMNS, Ranked, csv_rows, grouped, ranked
from stacks.explore.run import Exploration
from stacks.explore.search import SWEEP, simulated_label


def label(ex: Exploration) -> str:
    return simulated_label(ex.subjects)


def _f(x: float | None, d: int = 0) -> str:
    return "-" if x is None else f"{x:,.{d}f}"


def top_rows(ex: Exploration, workload: str, slo: str) -> list[tuple[Ranked, list[Ranked]]]:
    """The top K and every other frontier point, in rank order, each with its twins (the
    candidates simulated on the very same engine setup) folded under it."""
    return grouped([r for r in ranked(ex, workload, slo) if r.rank is not None
                    and (r.rank <= ex.k or r.pareto)])


def _twins(twins: list[Ranked]) -> str:
    return f" (+{len(twins)} on the same engine: {', '.join(t.candidate.label for t in twins)})" \
        if twins else ""


def table(ex: Exploration, workload: str, slo: str) -> Table:
    t = Table(title=f"{workload} @ {slo}: top {ex.k} and the Pareto frontier (*)",
              title_justify="left")
    for col in ("rank", "candidate", "GPUs", "conc", "tok/s/GPU", "tok/s/user",
                "TTFT p50 ms", "ITL p50 ms", "$/1M out"):
        t.add_column(col, justify="left" if col == "candidate" else "right")
    for r, twins in top_rows(ex, workload, slo):
        row = r.outcome.row
        assert row is not None
        t.add_row(f"{r.rank}{'*' if r.pareto else ''}",
                  r.candidate.label + (f" (+{len(twins)} twin)" if twins else ""),
                  str(r.candidate.gpus),
                  str(row.concurrency), _f(r.tok_s_per_gpu), _f(r.tok_s_per_user, 1),
                  _f(row.ttft_p50_ms), _f(row.itl_p50_ms, 2), _f(r.outcome.usd, 3))
    return t


def summary_lines(ex: Exploration) -> list[str]:
    counts = {k: sum(o.status == k for o in ex.outcomes) for k in ("simulated", "pruned")}
    sp = ex.screened.space
    return [
        f"space: {sp.size} candidate(s) of base {ex.base} ({len(ex.screened.accepted)} accepted "
        f"by pre-flight, {len(ex.refused)} refused; {len(sp.tp_refused)} (group, precision, TP) "
        f"refused by the TP screen); {len(ex.unsimulated)} without a simulation",
        f"search: {counts['simulated']} row(s) simulated, {counts['pruned']} pruned by a bound"
        f"{' (exhaustive: none pruned)' if ex.exhaustive else ''}; {ex.stats.probes} step(s) "
        f"simulated, {ex.stats.cache_hits} read from the cache; {ex.seconds:.1f} s",
        f"scale {ex.scale}; SLOs {', '.join(s.name for s in ex.slos)}; top {ex.k}",
        *[f"A2 room at {slo}: the simulated operating points reach at most {r:.0%} of their "
          "bound" for slo, r in ex.stats.a2_ratio.items()],
        *[f"check: {c}" for c in ex.stats.checks]]


def print_exploration(console: Console, ex: Exploration) -> None:
    console.print(f"\n[bold]explore {ex.base}[/bold]: {label(ex)}", highlight=False)
    for line in ex.calibration:
        console.print(f"calibrated: {line}", markup=False)
    for line in summary_lines(ex):
        console.print(line, markup=False)
    for w in ex.workloads:
        for slo in ex.slos:
            console.print(table(ex, w, slo.name))
    for a in answers(ex):
        if a.workload == SWEEP:
            console.print(f"{a.question} [{a.slo}]: {a.text}", markup=False)


def _likely(band: tuple[float, float] | None) -> str:
    return "" if band is None else f" (likely {band_words(band)})"


def _md_table(ex: Exploration, workload: str, slo: str) -> list[str]:
    out = ["| rank | candidate | GPUs | concurrency | tok/s/GPU | tok/s/user | TTFT p50 ms | "
           "ITL p50 ms | $/1M out | frontier |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r, twins in top_rows(ex, workload, slo):
        row = r.outcome.row
        assert row is not None
        b = figure_bands(r.outcome)
        out.append(f"| {r.rank} | {r.candidate.label} (`{r.candidate.name}`){_twins(twins)} | "
                   f"{r.candidate.gpus} | {row.concurrency} | {_f(r.tok_s_per_gpu)} | "
                   f"{_f(r.tok_s_per_user, 1)} | {_f(row.ttft_p50_ms)}{_likely(b['ttft'])} | "
                   f"{_f(row.itl_p50_ms, 2)}{_likely(b['itl'])} | {_f(r.outcome.usd, 3)} | "
                   f"{'yes' if r.pareto else ''} |")
    return out if len(out) > 2 else ["No candidate meets the SLO."]


ASSUMPTIONS = (
    "- The operating point is the highest concurrency of a grid (2^(k/"
    f"{STEPS_PER_DOUBLING}), neighbours at most ~9 % apart above 16, plus the plan's own "
    "steps) whose step on the concurrency sweep's request shape meets the SLO, found by "
    "bracketing. ASSUMED (A1): SLO attainment is monotonic in concurrency (a step that misses "
    "at c misses at every higher c); the bracket search then equals a linear scan of the grid.",
    "- A candidate is skipped (pruned) when its bound on $ per 1M is above the top K's: "
    "fixed-concurrency steps by concurrency / the fastest decode step (no assumption); the "
    "operating point by the decode batches within the SLO's ITL (ASSUMED (A2), "
    "stacks/explore/bounds.py) and, once a probe misses the SLO, by that probe's own $ "
    "(ASSUMED (A3): output tok/s does not fall as concurrency rises).",
    "- Every assumption is checked on what was simulated (the `check:` lines above list any "
    "breach; A2 broken: the SLO is searched again without the table bound; A3 broken on a "
    "candidate: its probes never prune it).",
)


def markdown(ex: Exploration) -> str:
    sp = ex.screened.space
    out = [f"# Explore {ex.base}", "", f"Every figure: {label(ex)}.", "",
           *[f"- {line}" for line in summary_lines(ex)], ""]
    if ex.calibration:
        out += ["## Calibrated", "", "Ranked on timing tables scaled by factors fitted to "
                "MEASURED runs (`--calibrate`; a table whose GPU, TP and role no measured step "
                "informs keeps AIConfigurator's):", "", *[f"- {c}" for c in ex.calibration], ""]
    out += ["## How it searched", "", *ASSUMPTIONS, ""]
    for w in ex.workloads:
        for slo in ex.slos:
            out += [f"## {w} @ {slo.name}", "", *_md_table(ex, w, slo.name), ""]
    out += ["## The plan's four questions", ""]
    for a in answers(ex):
        out.append(f"- **{a.question}**, {a.workload} @ {a.slo}: {a.text} ({a.label})")
    out += ["", "## What the space left out", "", *[f"- {e}" for e in sp.excluded]]
    out += [f"- TP {tp} on {g} ({p}): {'; '.join(why)}" for g, p, tp, why in sp.tp_refused]
    if ex.refused:
        out += ["", "## Refused by pre-flight", ""]
        out += [f"- {r.candidate.label} (`{r.candidate.name}`): {r.rules}" for r in ex.refused]
    reasons: dict[str, list[str]] = {}
    for s in ex.unsimulated:
        reasons.setdefault(s.unsimulated or "", []).append(s.candidate.label)
    if reasons:
        out += ["", "## Not simulated", ""]
        out += [f"- {len(v)} candidate(s) ({', '.join(v[:3])}{', ...' if len(v) > 3 else ''}): "
                f"{why}" for why, v in reasons.items()]
    return "\n".join(out) + "\n"


def plot(ex: Exploration, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(ex.slos), len(ex.workloads), squeeze=False,
                             figsize=(4.2 * len(ex.workloads), 3.6 * len(ex.slos)))
    for i, slo in enumerate(ex.slos):
        for j, w in enumerate(ex.workloads):
            ax = axes[i][j]
            good = [r for r in ranked(ex, w, slo.name) if r.rank is not None]
            ax.scatter([r.tok_s_per_user or 0 for r in good],
                       [r.tok_s_per_gpu or 0 for r in good], s=10, color="0.6")
            front = sorted((r for r in good if r.pareto), key=lambda r: r.tok_s_per_user or 0)
            ax.plot([r.tok_s_per_user or 0 for r in front], [r.tok_s_per_gpu or 0 for r in front],
                    "o-", color="tab:blue", ms=4)
            if good:
                ax.annotate(f"#1 {good[0].candidate.label}", (good[0].tok_s_per_user or 0,
                                                              good[0].tok_s_per_gpu or 0),
                            fontsize=6)
            ax.ticklabel_format(useOffset=False)
            ax.set_title(f"{w} @ {slo.name} (simulated candidates; pruned ones not drawn)",
                         fontsize=7)
            ax.set_xlabel("tok/s per user", fontsize=7)
            ax.set_ylabel("output tok/s per GPU", fontsize=7)
    fig.suptitle(label(ex), fontsize=7, wrap=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write(ex: Exploration, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    md, table_csv = folder / "explore.md", folder / "explore.csv"
    md.write_text(markdown(ex))
    with table_csv.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_rows(ex))
    return [md, table_csv, plot(ex, folder / "explore-pareto.png")]
