"""Every comparison the report draws, judged as one family (pure: rows in, a table out).

A comparison is a subject stack against a reference stack on one figure at one step (or the
steps a table row folds): the difference subject - reference with its 95 % interval
(stacks/sizing/sampling.py: the exact bootstrap of the two quantiles over requests; Welch's t
over repeats for whole-step figures; a normal interval from the request trace's standard
error for hit rates) and a verdict for the subject:

- better / worse: the difference is beyond what sampling explains, after Holm's adjustment
  over every judged comparison of the report (the family-wise error rate is held at 5 %: with
  m comparisons the most significant must reach p < 0.05 / m, the next 0.05 / (m - 1), ...);
- indistinguishable: at this sample, the data cannot tell the two apart (the adjusted p-value
  is 0.05 or more). Each interval shown is the comparison's own 95 %, so a difference whose
  interval excludes zero can still be indistinguishable once the family is counted;
- not resolved by the model: between two SIMULATED candidates, a difference sampling calls
  real (better / worse) whose figures' error bands from AIConfigurator's own measured rows
  overlap, or where a figure has no band (reports/comparisons/model_bands.py, issue 39): the
  timing model's error could reverse it;
- not judged: no interval exists (a single run of a whole-step figure, a p99 from fewer than
  368 requests a side, no standard error), and the row says why.

`comparisons.csv` holds every row; `first_screen` folds them into the table report.md opens
with (one line per question, stacks and figure), and `headline_lines` into the summary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from stacks.sizing.sampling import ALPHA, Difference, holm

BETTER, WORSE = "better", "worse"
INDISTINGUISHABLE = "indistinguishable"
NOT_JUDGED = "not judged"
NOT_RESOLVED = "not resolved by the model"
# `model_error` of a comparison between two simulated candidates (reports/comparisons/
# model_bands.py); "" elsewhere
MODEL_APART, MODEL_OVERLAP, MODEL_NO_BAND = "bands apart", "bands overlap", "no band"

COLUMNS = ["family", "question", "reference_stack", "subject_stack", "step", "figure", "unit",
           "reference_value", "subject_value", "difference", "difference_ci_low",
           "difference_ci_high",
           "relative_difference", "p_value", "p_holm", "verdict", "method", "stands_on",
           "note", "reference_likely_lo", "reference_likely_hi", "subject_likely_lo",
           "subject_likely_hi", "model_error"]

# The plan's questions, in the order the report answers them.
Q_TOPOLOGY = "Does disaggregation change TTFT, ITL and throughput?"
Q_PREFIX = "Does disaggregation change TTFT with shared prefixes?"
Q_ROUTER = "Does KV-aware routing cut recomputation?"
Q_DECODE_TIER = "Is a decode tier on another GPU cheaper per token?"
Q_CACHE = "What does a warm cache change (trace, cold vs warm pass)?"
Q_RECIPE = "Does each B200 recipe beat its baseline at the SLA?"
Q_SLA_TOPOLOGY = "Aggregated vs disaggregated recipe at the SLA"
Q_SIMULATION = "Does the simulation match the measurement?"
# The report's comparisons are one family; the simulation's fit to the measurement another (it
# asks whether the model holds, not what to deploy), held apart so neither dilutes the other.
FAMILY_REPORT, FAMILY_SIMULATION = "report", "simulated vs measured"
# A simulation against a measurement differs up or down; neither is better.
HIGHER, LOWER = "measured higher", "measured lower"
QUESTIONS = [Q_TOPOLOGY, Q_PREFIX, Q_ROUTER, Q_DECODE_TIER, Q_CACHE, Q_RECIPE,
             Q_SLA_TOPOLOGY, Q_SIMULATION]
# The first screen's words for each question (the full question is in the Comparisons table).
SHORT = {Q_TOPOLOGY: "agg vs disagg", Q_PREFIX: "agg vs disagg, prefix share",
         Q_ROUTER: "KV router", Q_DECODE_TIER: "decode tier on another GPU",
         Q_CACHE: "cold vs warm cache", Q_RECIPE: "recipe vs baseline",
         Q_SLA_TOPOLOGY: "recipe agg vs disagg", Q_SIMULATION: "simulated vs measured"}
FIRST_SCREEN = ["question", "compared", "difference [95 % CI]", "verdict", "stands on"]


@dataclass(frozen=True)
class Figure:
    """What is compared: the table column, how it reads, and which way is better."""

    name: str
    label: str
    unit: str
    lower_is_better: bool
    scale: float = 1.0       # shown x scale (a share as points: 100)


FIGURES = {f.name: f for f in [
    Figure("ttft_p50_ms", "TTFT p50", "ms", True),
    Figure("ttft_p99_ms", "TTFT p99", "ms", True),
    Figure("itl_p50_ms", "ITL p50", "ms", True),
    Figure("itl_p99_ms", "ITL p99", "ms", True),
    Figure("output_tok_s", "output tok/s", "tok/s", False),
    Figure("output_tok_s_per_gpu", "output tok/s per GPU", "tok/s/GPU", False),
    Figure("usd_per_1m_output_tokens", "$ per 1M output tokens", "$", True),
    Figure("server_hit_rate", "server prefix hit rate", "points", False, 100.0),
]}


def row(question: str, reference: str, subject: str, step: str, figure: Figure,
        reference_value: float, subject_value: float, diff: Difference, stands_on: str,
        note: str = "") -> dict:
    """One comparison, not yet judged with its family (see judge)."""
    value = subject_value - reference_value
    rel = value / reference_value if reference_value else math.nan
    return {"family": FAMILY_REPORT, "question": question, "reference_stack": reference,
            "subject_stack": subject,
            "step": step, "figure": figure.name, "unit": figure.unit,
            "reference_value": reference_value, "subject_value": subject_value,
            "difference": value, "difference_ci_low": diff.low,
            "difference_ci_high": diff.high,
            "relative_difference": rel, "p_value": diff.p_value, "p_holm": math.nan,
            "verdict": NOT_JUDGED, "method": diff.method, "stands_on": stands_on,
            "note": note, "reference_likely_lo": math.nan, "reference_likely_hi": math.nan,
            "subject_likely_lo": math.nan, "subject_likely_hi": math.nan, "model_error": ""}


def verdict(difference: float, p_holm: float, lower_is_better: bool,
            alpha: float = ALPHA) -> str:
    if math.isnan(p_holm):
        return NOT_JUDGED
    if p_holm >= alpha:
        return INDISTINGUISHABLE
    return BETTER if (difference < 0) == lower_is_better else WORSE


def judge(rows: list[dict], alpha: float = ALPHA, family: str = FAMILY_REPORT) -> pd.DataFrame:
    """The rows as one family: Holm-adjusted p-values and each subject's verdict."""
    table = pd.DataFrame(rows, columns=COLUMNS)
    if table.empty:
        return table
    table["family"] = family
    table["p_holm"] = holm([float(p) for p in table["p_value"]])
    table["verdict"] = [verdict(d, p, FIGURES[f].lower_is_better, alpha) for d, p, f in
                        zip(table["difference"], table["p_holm"], table["figure"],
                            strict=True)]
    # the timing model's error could reverse a real difference between simulated candidates
    table["verdict"] = [NOT_RESOLVED if v in (BETTER, WORSE) and e in (MODEL_OVERLAP,
                                                                        MODEL_NO_BAND) else v
                        for v, e in zip(table["verdict"], table["model_error"].fillna(""),
                                        strict=True)]
    if family == FAMILY_SIMULATION:     # up or down, not better or worse
        table["verdict"] = [v if v in (INDISTINGUISHABLE, NOT_JUDGED) else
                            HIGHER if d > 0 else LOWER
                            for v, d in zip(table["verdict"], table["difference"],
                                            strict=True)]
    order = {q: i for i, q in enumerate(QUESTIONS)}
    return table.sort_values(["question", "reference_stack", "subject_stack", "figure"],
                             key=lambda c: c.map(order) if c.name == "question" else c,
                             kind="stable").reset_index(drop=True)


def family_note(table: pd.DataFrame) -> str:
    mine = table[table["family"] == FAMILY_REPORT] if not table.empty else table
    judged = int(mine["p_value"].notna().sum()) if not mine.empty else 0
    return (f"Verdicts hold the family-wise error rate at {ALPHA:.0%} over the report's "
            f"{judged} judged comparison(s) (Holm); each interval is the comparison's own "
            "95 %, so a verdict can be indistinguishable while its interval misses zero. "
            "Between two SIMULATED candidates a better / worse stands only where "
            "the two figures' error bands (AIConfigurator's own measured rows) are apart; "
            "otherwise, or where a figure has no band, it is not resolved by the model. "
            "Quantiles: exact bootstrap of the two samples of requests (the wider of that and "
            "Welch's t over repeats where both sides repeated); whole-step figures: Welch's t "
            "over repeats (a single run is not judged); hit rates: the request trace's "
            "standard errors. Simulated vs measured (each measured step against its run's "
            "simulation: measured higher / lower / indistinguishable) is a family of its own. "
            "Every row is in comparisons.csv.")


def _num(v: float, figure: Figure, signed: bool = False) -> str:
    x = v * figure.scale
    body = f"{x:+,.1f}" if signed else f"{x:,.1f}"
    if abs(x) < 10:
        body = f"{x:+,.2f}" if signed else f"{x:,.2f}"
    return body


def difference_cell(r: pd.Series) -> str:
    """`+33.5 ms [+30.1, +36.8]` (a share in points); no interval: the difference alone."""
    f = FIGURES[r["figure"]]
    unit = "" if f.unit == "$" else f" {f.unit}"
    d = float(r["difference"])
    if math.isnan(d):
        return "n/a"
    head = (f"{'+' if d >= 0 else '-'}${abs(d):,.2f}" if f.unit == "$"
            else f"{_num(d, f, signed=True)}{unit}")
    lo, hi = float(r["difference_ci_low"]), float(r["difference_ci_high"])
    if math.isnan(lo) or math.isnan(hi):
        return head
    return f"{head} [{_num(lo, f, True)}, {_num(hi, f, True)}]"


def _step_name(step: str) -> str:
    return step.split("/")[-1] if "/" in step else step


def _verdicts(rows: pd.DataFrame) -> str:
    by: dict[str, list[str]] = {}
    for _, r in rows.iterrows():
        by.setdefault(str(r["verdict"]), []).append(_step_name(str(r["step"])))
    if len(rows) == 1:
        return str(rows["verdict"].iloc[0])
    return "; ".join(f"{v} at {', '.join(s)}" for v, s in by.items())


def _differences(rows: pd.DataFrame, limit: int = 2) -> str:
    shown = rows if len(rows) <= limit else rows.iloc[[0, len(rows) - 1]]
    parts = [f"{_step_name(str(r['step']))} {difference_cell(r)}" for _, r in shown.iterrows()]
    return "; ".join(parts) + (f" ({len(rows)} steps)" if len(rows) > limit else "")


def first_screen(table: pd.DataFrame) -> pd.DataFrame:
    """One line per question, stacks and figure with a judged comparison: the difference per
    step (the first and the last), the verdicts, what they stand on. Figures nothing judged are
    folded into one last line naming why."""
    out: list[dict[str, str]] = []
    unjudged: dict[str, str] = {}
    if not table.empty:     # the plan's questions (the simulation's fit has its own section)
        table = table[table["family"] == FAMILY_REPORT]
    if table.empty:
        return pd.DataFrame(columns=FIRST_SCREEN)
    for (q, ref, sub, fig), rows in table.groupby(
            ["question", "reference_stack", "subject_stack", "figure"], sort=False):
        f = FIGURES[str(fig)]
        if (rows["verdict"] == NOT_JUDGED).all():
            unjudged.setdefault(f.label, str(rows["method"].iloc[0]).removeprefix(
                "not judged: "))
            continue
        out.append({"question": f"{SHORT.get(str(q), q)}: {f.label}",
                    "compared": f"{sub} vs {ref}", "difference [95 % CI]": _differences(rows),
                    "verdict": _verdicts(rows), "stands on": rows["stands_on"].iloc[0]})
    if unjudged:     # the figures by the reason they share
        by_why: dict[str, list[str]] = {}
        for label, why in unjudged.items():
            by_why.setdefault(why, []).append(label)
        out.append({"question": NOT_JUDGED, "compared": "",
                    "difference [95 % CI]": "; ".join(f"{', '.join(labels)} ({why})" for
                                                      why, labels in by_why.items()),
                    "verdict": "", "stands on": ""})
    return pd.DataFrame(out, columns=FIRST_SCREEN)


def headline_lines(table: pd.DataFrame) -> list[str]:
    """The summary's answers: each question, stacks and figure with its verdicts."""
    lines = []
    for _, r in first_screen(table).iterrows():
        if r["question"] == NOT_JUDGED:
            lines.append(f"not judged: {r['difference [95 % CI]']}")
            continue
        lines.append(f"{r['question']}, {r['compared']}: {r['verdict']} "
                     f"({r['difference [95 % CI]']}; {r['stands on']})")
    return lines


def phrase(table: pd.DataFrame | None, question: str, reference: str, subject: str,
           step: str, figure: str) -> str:
    """` [95 % CI ...]: verdict` of one comparison, for the hypotheses' lines ("" if none)."""
    if table is None or table.empty:
        return ""
    hit = table[(table["question"] == question) & (table["reference_stack"] == reference)
                & (table["subject_stack"] == subject) & (table["step"] == step)
                & (table["figure"] == figure)]
    if hit.empty:
        return ""
    r = hit.iloc[0]
    return f" ({difference_cell(r)}: {r['verdict']} at this sample)"


def attach(side: pd.DataFrame, table: pd.DataFrame, question: str, figure: str, column: str,
           step_of) -> pd.DataFrame:
    """A side-by-side table (aggregated_stack, disaggregated_stack, one row per step) with one
    comparison's columns: `<column>` (the difference), its `_ci_low` / `_ci_high` and
    `<column>_verdict`, looked up in the judged `table` (`step_of(row)`: its step label)."""
    out = side.copy()
    if out.empty:
        return out
    hits = {(str(r["reference_stack"]), str(r["subject_stack"]), str(r["step"])): r
            for _, r in table[(table["question"] == question)
                              & (table["figure"] == figure)].iterrows()} \
        if not table.empty else {}
    found = [hits.get((str(r["aggregated_stack"]), str(r["disaggregated_stack"]), step_of(r)))
             for _, r in out.iterrows()]
    for name, src in ((column, "difference"), (f"{column}_ci_low", "difference_ci_low"),
                      (f"{column}_ci_high", "difference_ci_high"),
                      (f"{column}_verdict", "verdict")):
        out[name] = [h[src] if h is not None else (NOT_JUDGED if src == "verdict"
                                                   else math.nan) for h in found]
    return out


def adjusted(table: pd.DataFrame, question: str) -> dict[tuple[str, str, str], float]:
    """{(reference, subject, step): Holm-adjusted p} of one question's comparisons."""
    if table.empty:
        return {}
    rows = table[table["question"] == question]
    return {(str(r["reference_stack"]), str(r["subject_stack"]), str(r["step"])):
            float(r["p_holm"]) for _, r in rows.iterrows()}
