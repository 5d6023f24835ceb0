"""`python -m stacks check <stack>... | --all`: pre-flight checks with the memory table and cost."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from stacks.loader import STACKS_DIR, StackError, all_stack_names
from stacks.preflight import PreflightReport, check_stack

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="What to test: check stack files before anything is created or run.")
console = Console(width=None if sys.stdout.isatty() else 200)


@app.callback()
def _commands() -> None:
    """Keep `check` a named subcommand (typer collapses a lone command into the app)."""


def _memory_table(report: PreflightReport) -> Table:
    t = Table(title=f"{report.stack.name}: memory per worker (per GPU)", title_justify="left")
    for col in ("role", "replicas", "TP", "GPU", "budget GiB", "weights GiB/GPU",
                "overhead GiB", "KV B/token/GPU", "KV full seq GiB", "KV capacity tokens",
                "fits"):
        t.add_column(col, justify="right" if col not in ("role", "GPU") else "left")
    for m in report.memory:
        t.add_row(m.role, str(m.replicas), str(m.tensor_parallel_size),
                  f"{m.gpu} ({m.instance_type})", f"{m.budget_gib:.1f}",
                  f"{m.weights_gib_per_gpu:.2f}", f"{m.overhead_gib:.1f}",
                  f"{m.kv_bytes_per_token_per_gpu:,}",
                  f"{m.full_sequence_kv_gib:.2f} ({m.full_sequence_tokens:,} tok)",
                  f"{m.kv_capacity_tokens:,}", "yes" if m.fits else "NO")
    return t


def _print_report(report: PreflightReport) -> None:
    s = report.stack
    kind = (f"attached to {s.cluster.attach_to}" if s.is_attached else
            "base" if s.is_base else "standalone")
    console.print(f"\n[bold]{s.name}[/bold] (target {s.target}, {kind})")
    if report.memory:
        console.print(_memory_table(report))
    label = "AWS-equivalent estimate (local run costs nothing)" if s.target == "local" else \
        "estimate"
    lines = ", ".join(f"{k} ${v:,.2f}" for k, v in report.hourly.lines.items())
    console.print(f"cost {label}: ${report.hourly.total:,.2f}/h ({lines})")
    console.print(f"planned: {report.planned_hours:.2f} h (setup {s.cost.setup_hours:.2f} h + "
                  f"workloads at full scale) = ${report.planned_cost:,.2f}; budget "
                  f"${s.cost.budget_usd:,.0f}")
    if report.ok:
        console.print("[green]OK[/green]")
    else:
        console.print(f"[red]{len(report.problems)} problem(s):[/red]")
        for p in report.problems:
            console.print(f"  - {p}", markup=False)


@app.command()
def check(stacks: list[str] = typer.Argument(None, help="Stack names (stacks/Pulumi.<name>.yaml)."),
          all_: bool = typer.Option(False, "--all", help="Check every stack in the stacks dir."),
          stacks_dir: Path = typer.Option(STACKS_DIR, "--stacks-dir", file_okay=False,
                                          help="Folder of Pulumi.<stack>.yaml files.")) -> None:
    """Validate stacks: schema, memory fit, GPU counts, topology, workloads, budget.

    Exits 0 when every stack is valid, 2 when any is not (every problem is listed with the
    field to change and how).
    """
    names = all_stack_names(stacks_dir) if all_ else list(stacks or [])
    if not names:
        console.print("name one or more stacks, or pass --all")
        raise typer.Exit(2)
    failed = 0
    for name in names:
        try:
            report = check_stack(name, stacks_dir)
        except StackError as exc:
            failed += 1
            console.print(f"\n[bold]{name}[/bold]\n[red]{len(exc.problems)} problem(s):[/red]")
            for p in exc.problems:
                console.print(f"  - {p}", markup=False)
            continue
        _print_report(report)
        failed += not report.ok
    console.print(f"\n{len(names) - failed}/{len(names)} stack(s) valid")
    raise typer.Exit(2 if failed else 0)


def main() -> None:
    app(prog_name="python -m stacks")


if __name__ == "__main__":
    sys.exit(main())
