"""`python -m stacks predict` and `stacks plan`'s printed predictions (rich tables)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from stacks.predict.rows import LABEL, SLOS, PredictedRow, Prediction

COLUMNS = ("step", "c", "ISL/OSL", "TTFT ms", "TTFT likely", "ITL ms", "ITL likely",
           "req lat s", "out tok/s", "tok/s/GPU", "tok/s/user", "$/1M out")


def band_cell(band: tuple[float, float] | list[float] | None, digits: int) -> str:
    """'9.0-12.5' for a band (lo, hi), 'no band' without one."""
    return f"{band[0]:,.{digits}f}-{band[1]:,.{digits}f}" if band else "no band"


def _cells(r: PredictedRow) -> tuple[str, ...]:
    usd = f"{r.usd_per_1m_output:,.2f}" if r.usd_per_1m_output is not None else "unpriced"
    io = f"{r.isl}/{r.osl}" + (f" ({r.prefix} cached)" if r.prefix else "")
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
    for slo in SLOS:
        best = p.best(slo)
        verdict = ("no verdict: its latencies are upper bounds" if p.rows and all(
            r.upper_bound for r in p.rows) else "no concurrency_sweep step meets it")
        console.print(f"  {LABEL} SLA best point ({slo.name}): " + (
            f"{best.step}, {best.tok_s_per_gpu:,.1f} tok/s/GPU" if best else verdict),
            markup=False)
    console.print(f"  {database_line(p)}", markup=False)
    for d in p.departures:
        console.print(f"  departs: {d}", markup=False)
    for s in p.skipped:
        console.print(f"  skipped: {s}", markup=False)


def print_plan_predictions(console: Console, base: str, preds: list[Prediction]) -> None:
    """`stacks plan`'s predictions for a base: each variant's sweep, then the plan's four
    questions answered from them."""
    from stacks.predict.questions import render
    console.print(f"\n[bold]{base}[/bold]: {LABEL} per variant (concurrency sweep at the "
                  "plan's scale; `python -m stacks predict <variant>` shows every workload)")
    for p in preds:
        print_prediction(console, p, workloads=("concurrency_sweep",))
    console.print(f"\n[bold]{base}[/bold]: the plan's questions, {LABEL}")
    for line in render(preds):
        console.print(line, markup=False)
