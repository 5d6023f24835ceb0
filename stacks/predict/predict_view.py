"""`python -m stacks predict` and `stacks plan`'s printed figures (rich tables): SIMULATED by
DynoSim where it runs the stack, with AIConfigurator's PREDICTED figures as a cross-check on the
concurrency sweep; where it cannot, why, and the PREDICTED table instead, labelled as such."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from stacks.predict.rows import LABEL, SLOS, PredictedRow, Prediction
from stacks.predict.simulated import CROSS_FIELDS, CrossCheck, cross_check, spread_words

COLUMNS = ("step", "c", "ISL/OSL", "TTFT ms", "TTFT likely", "ITL ms", "ITL likely",
           "req lat s", "out tok/s", "tok/s/GPU", "tok/s/user", "$/1M out")
STEP_WIDTH = len("sequence_distributions/lognormal")
SIMULATED_COLUMNS = ("step", "c", "ISL/OSL", "TTFT p50 ms", "TTFT likely", "ITL p50 ms",
                     "ITL likely", "req lat p50 s", "out tok/s", "tok/s/GPU", "tok/s/user p50",
                     "$/1M out")


def band_cell(band: tuple[float, float] | list[float] | None, digits: int) -> str:
    """'9.0-12.5' for a band (lo, hi), 'no band' without one."""
    return f"{band[0]:,.{digits}f}-{band[1]:,.{digits}f}" if band else "no band"


def _cells(r: PredictedRow) -> tuple[str, ...]:
    usd = f"{r.usd_per_1m_output:,.2f}" if r.usd_per_1m_output is not None else "unpriced"
    io = (f"{r.isl}/{r.osl}" + (f" ({r.prefix} cached)" if r.prefix else "")) if r.osl else "-"
    le = "<= " if r.upper_bound else ""   # latencies of suspect rows are upper bounds
    return (r.step, str(r.concurrency), io, f"{le}{r.ttft_ms:,.1f}",
            band_cell(r.ttft_band_ms, 1), f"{le}{r.itl_ms:.2f}", band_cell(r.itl_band_ms, 2),
            f"{le}{r.request_latency_ms / 1000:,.2f}", f"{r.output_tok_s:,.0f}",
            f"{r.tok_s_per_gpu:,.1f}", f"{r.tok_s_per_user:,.1f}", usd)


def band_lines(rows: list[PredictedRow]) -> list[str]:
    """Where the rows' bands come from (each distinct source once), or why they have none."""
    out: list[str] = []
    for metric, sources in (("TTFT", [r.ttft_band_source for r in rows]),
                            ("ITL", [r.itl_band_source for r in rows])):
        for src in dict.fromkeys(x for x in sources if x):
            out.append(f"{metric} likely: {src}")
    return out


def database_line(p: Prediction) -> str:
    d = p.database
    versions = ", ".join(f"{s} vLLM {v}" for s, v in d.get("backend_versions", {}).items())
    return (f"database: AIConfigurator {d.get('aiconfigurator', '?')} (core "
            f"{d.get('aiconfigurator_core', '?')}), backend {d.get('backend', '?')}"
            + (f", {versions}" if versions else ""))


def _best_points(console: Console, p: Prediction) -> None:
    word = p.label.split(" (")[0]      # SIMULATED or PREDICTED: the table's title names it whole
    for slo in SLOS:
        best = p.best(slo)
        verdict = ("no verdict: its latencies are upper bounds" if p.rows and all(
            r.upper_bound for r in p.rows) else "no concurrency_sweep step meets it")
        console.print(f"  {word} SLA best point ({slo.name}): " + (
            f"{best.step}, {best.tok_s_per_gpu:,.1f} tok/s/GPU" if best else verdict),
            markup=False)


def print_prediction(console: Console, p: Prediction,
                     workloads: tuple[str, ...] | None = None) -> None:
    """The PREDICTED table of `p` (only `workloads`' steps when given), its SLA best points,
    database and departures."""
    console.print(f"\n[bold]{p.stack}[/bold]: {LABEL} by AIConfigurator ({p.topology or '-'})")
    if p.not_predicted:
        console.print(f"  not predicted: {p.not_predicted}", markup=False)
        return
    t = Table(title=f"{p.stack}: {LABEL} per step", title_justify="left")
    for col in COLUMNS:
        t.add_column(col, justify="left" if col == "step" else "right")
    for r in p.rows:
        if workloads is None or r.workload in workloads:
            t.add_row(*_cells(r))
    console.print(t)
    shown = [r for r in p.rows if workloads is None or r.workload in workloads]
    for line in band_lines(shown):
        console.print(f"  {line}", markup=False)
    _best_points(console, p)
    console.print(f"  {database_line(p)}", markup=False)
    for d in p.departures:
        console.print(f"  departs: {d}", markup=False)
    for s in p.skipped:
        console.print(f"  skipped: {s}", markup=False)


def _figure(value: float, field: str) -> str:
    return f"{value:,.0f}" if field == "output_tok_s" else f"{value:,.2f}"


def _check_cell(check: CrossCheck, field: str) -> str:
    diff = check.difference.get(field)
    return _figure(check.predicted[field], field) + (f" ({diff:+.0%})" if diff is not None
                                                     else "")


def print_simulation(console: Console, sim: Prediction, record: dict[str, Any],
                     pred: Prediction | None, workloads: tuple[str, ...] | None = None) -> None:
    """The SIMULATED table (only `workloads`' steps when given) with AIConfigurator's figures
    beside the sweep steps, the SLA best points, the KV router's spread; where nothing was
    simulated, why, and the PREDICTED table in its place."""
    if sim.not_predicted:
        console.print(f"\n[bold]{sim.stack}[/bold]: not simulated "
                      f"({escape(sim.not_predicted)}); {LABEL} figures instead, from "
                      "AIConfigurator's static estimate")
        if pred is not None:
            print_prediction(console, pred, workloads)
        return
    console.print(f"\n[bold]{sim.stack}[/bold]: {escape(sim.label)} ({sim.topology})")
    rows = [r for r in sim.rows if workloads is None or r.workload in workloads]
    t = Table(title=f"{sim.stack}: SIMULATED per step", title_justify="left")
    for col in SIMULATED_COLUMNS:
        t.add_column(col, justify="left" if col == "step" else "right",
                     min_width=STEP_WIDTH if col == "step" else None)
    for r in rows:
        t.add_row(*_cells(r))
    console.print(t)
    for line in band_lines(rows):
        console.print(f"  {line}", markup=False)
    checks = cross_check(sim, pred)
    if any(r.step in checks for r in rows):
        t = Table(title=f"{sim.stack}: cross-check, {LABEL} by AIConfigurator's static "
                  "estimate on the concurrency sweep (difference: predicted / simulated - 1)",
                  title_justify="left")
        t.add_column("step", min_width=STEP_WIDTH)
        for _, word in CROSS_FIELDS:
            t.add_column(f"SIMULATED {word}", justify="right")
            t.add_column(f"{LABEL} {word}", justify="right")
        for r in rows:
            if (check := checks.get(r.step)) is not None:
                t.add_row(r.step, *(cell for f, _ in CROSS_FIELDS
                                    for cell in (_figure(getattr(r, f), f),
                                                 _check_cell(check, f))))
        console.print(t)
    _best_points(console, sim)
    if pred is not None and not pred.not_predicted:
        _best_points(console, pred)
        console.print(f"  cross-check {database_line(pred)}", markup=False)
        for d in pred.departures:
            console.print(f"  the timing tables depart: {d}", markup=False)
    elif pred is not None:
        console.print(f"  no cross-check: not predicted ({pred.not_predicted})", markup=False)
    for r in sim.rows:
        if (workloads is None or r.workload in workloads) and (words := spread_words(
                record, r.step)):
            console.print(f"  KV router runs of {r.step}: {words}", markup=False)
    for s in sim.skipped:
        console.print(f"  skipped: {s}", markup=False)


def print_plan_predictions(console: Console, base: str, preds: list[Prediction],
                           sims: list[tuple[Prediction, dict[str, Any]]] | None = None) -> None:
    """`stacks plan`'s figures for a base: each variant's sweep (SIMULATED with the PREDICTED
    cross-check where `sims` has it, else PREDICTED), then the plan's four questions answered
    from AIConfigurator's predictions."""
    from stacks.predict.questions import render
    console.print(f"\n[bold]{base}[/bold]: per variant, the concurrency sweep at the plan's "
                  "scale (`python -m stacks predict <variant>` shows every workload)")
    for i, p in enumerate(preds):
        if sims is not None:
            sim, record = sims[i]
            print_simulation(console, sim, record, p, workloads=("concurrency_sweep",))
        else:
            print_prediction(console, p, workloads=("concurrency_sweep",))
    console.print(f"\n[bold]{base}[/bold]: the plan's questions, {LABEL}")
    for line in render(preds):
        console.print(line, markup=False)
