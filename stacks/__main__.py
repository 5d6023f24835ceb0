"""`python -m stacks check <stack>... | --all`: pre-flight checks with the memory table and cost."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from stacks.eks_versions import today
from stacks.estimate import cold_restarts, restart_seconds
from stacks.forecast import Campaign, plan_campaigns
from stacks.loader import (
    STACKS_DIR,
    StackError,
    all_stack_names,
    derived_stack_names,
    load_stack,
)
from stacks.preflight import PreflightReport, check_stack

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="What to test: check stack files before anything is created or run.")
console = Console(width=None if sys.stdout.isatty() else 200)


@app.callback()
def _commands() -> None:
    """Keep `check` a named subcommand (typer collapses a lone command into the app)."""


def _memory_table(report: PreflightReport) -> Table:
    t = Table(title=f"{report.stack.name}: memory per worker (per GPU)", title_justify="left")
    # sliding-window / linear-attention state: fixed MiB per running sequence (x sequences
    # reserved), and the hybrid page in tokens; only for models that have them
    fixed = any(m.sequence_fixed_bytes_per_gpu for m in report.memory)
    for col in ("role", "replicas", "TP", "GPU", "budget GiB", "weights GiB/GPU",
                "overhead GiB", "KV B/token/GPU", "KV full seq GiB",
                *(("state MiB/seq (x seqs)", "page tok") if fixed else ()),
                "KV capacity tokens", "fits"):
        t.add_column(col, justify="right" if col not in ("role", "GPU") else "left")
    for m in report.memory:
        state = (f"{m.sequence_fixed_bytes_per_gpu / 2**20:.1f} (x{m.concurrent_sequences})",
                 str(m.page_tokens or "-")) if fixed else ()
        t.add_row(m.role, str(m.replicas), str(m.tensor_parallel_size),
                  f"{m.gpu} ({m.instance_type})", f"{m.budget_gib:.1f}",
                  f"{m.weights_gib_per_gpu:.2f}", f"{m.overhead_gib:.1f}",
                  f"{m.kv_bytes_per_token_per_gpu:,}",
                  f"{m.full_sequence_kv_gib:.2f} ({m.full_sequence_tokens:,} tok)", *state,
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
    h = report.hourly
    lines = ", ".join(f"{k} ${v:,.2f}" for k, v in h.lines.items())
    total = f"${h.total:,.2f}/h" if h.complete else f"at least ${h.total:,.2f}/h (incomplete)"
    console.print(f"cost {label}: {total} ({lines})", markup=False)
    shared = ("shared with its base's other variants" if s.is_attached else
              "cluster fixed costs")
    console.print(f"  of which {shared}: ${h.shared_total:,.2f}/h; not included: "
                  f"{'; '.join(h.excluded)}", markup=False)
    for item in h.unknown:
        console.print(f"  [red]price unknown[/red]: {item}")
    if note := h.unverified_note():
        console.print(f"  [yellow]{note}[/yellow]")
    restarts = cold_restarts(s) if s.serving else 0
    each = restart_seconds(s)
    restart_text = f" + {restarts} cold restart(s) x " + (
        _hours(each) if each >= 60 else f"{each:g} s") if restarts else ""
    console.print(f"planned: {report.planned_hours:.2f} h (setup {s.cost.setup_hours:.2f} h + "
                  f"workloads at full scale{restart_text}) = ${report.planned_cost:,.2f}; budget "
                  f"${s.cost.budget_usd:,.0f}")
    for note in report.notes:
        console.print(f"note: {note}", markup=False)
    if report.ok:
        console.print("[green]OK[/green]")
    else:
        console.print(f"[red]{len(report.problems)} problem(s):[/red]")
        for p in report.problems:
            console.print(f"  - {p}", markup=False)


def _as_of(value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        console.print(f"--as-of {value}: write a date as YYYY-MM-DD")
        raise typer.Exit(2) from None


AS_OF_HELP = ("Estimate date YYYY-MM-DD (default today, UTC): EKS version support status and "
              "the control-plane rate (standard or extended support) are taken on this day.")


def _print_problems(name: str, problems: list) -> None:
    console.print(f"\n[bold]{name}[/bold]\n[red]{len(problems)} problem(s):[/red]")
    for p in problems:
        console.print(f"  - {p}", markup=False)


@app.command()
def check(stacks: list[str] = typer.Argument(None, help="Stack names (stacks/Pulumi.<name>.yaml), "
                                         "or <variant>.<base>: a variant on another base."),
          all_: bool = typer.Option(False, "--all", help="Check every stack in the stacks dir "
                                    "and every <variant>.<base> the bases allow."),
          stacks_dir: Path = typer.Option(STACKS_DIR, "--stacks-dir", file_okay=False,
                                          help="Folder of Pulumi.<stack>.yaml files."),
          as_of: str = typer.Option(None, "--as-of", help=AS_OF_HELP)) -> None:
    """Validate stacks: the file itself, schema, AWS and Kubernetes rules, memory fit, node
    packing, engine flags, topology, workloads, budget.

    Exits 0 when every stack is valid, 2 when any is not (every problem is listed with the
    field to change and how), 1 on an internal error. A file that cannot be read is reported
    and the others are still checked.
    """
    on = _as_of(as_of)
    names = ([*all_stack_names(stacks_dir), *derived_stack_names(stacks_dir)] if all_
             else list(stacks or []))
    if not names:
        console.print("name one or more stacks, or pass --all")
        raise typer.Exit(2)
    failed = internal = 0
    for name in names:
        try:
            report = check_stack(name, stacks_dir, on=on)
        except StackError as exc:
            failed += 1
            _print_problems(name, exc.problems)
            continue
        except Exception as exc:  # noqa: BLE001 - a bug: say so in one line, check the rest
            failed += 1
            internal += 1
            console.print(f"\n[bold]{name}[/bold]")
            console.print(f"internal error while checking it: {type(exc).__name__}: {exc} (a "
                          "bug in dynamo-bench: please report it with the stack file)",
                          markup=False)
            continue
        _print_report(report)
        failed += not report.ok
    console.print(f"\n{len(names) - failed}/{len(names)} stack(s) valid")
    raise typer.Exit(1 if internal else 2 if failed else 0)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _print_campaign(c: Campaign) -> None:
    what = "standalone" if c.kind == "standalone" else "base; its variants run one after another"
    t = Table(title=f"{c.name} ({what})", title_justify="left")
    for col in ("stack", "phase", "wall", "GPUs under load", "$ attributed"):
        t.add_column(col, justify="left" if col in ("stack", "phase") else "right")
    if c.kind == "base":
        t.add_row(c.name, "start-up (cluster, storage, model download)", _hours(c.base_startup_s),
                  "0", "")
    for r in c.runs:
        t.add_row(r.stack, "start-up", _hours(r.startup_s), "0", "")
        t.add_row("", "model load (assumed)", _hours(r.model_load_s), "0", "")
        if r.restarts:
            t.add_row("", f"cold restarts ({r.restarts} x {_hours(r.restart_s)})",
                      _hours(r.restarts_s), "0", "")
        for step, sec in r.steps_s.items():
            t.add_row("", step, _hours(sec), str(r.gpus_loaded), "")
        t.add_row("", "[bold]total[/bold]", _hours(r.wall_s), "",
                  f"${r.attributed_usd:,.2f} (${r.hourly.total:,.2f}/h)")
    console.print(t)
    for r in c.runs:
        if r.warning:
            console.print(f"[yellow]{r.stack}: {r.warning}[/yellow]")
    ratio = c.billed_over_loaded
    console.print(f"campaign {c.name}: wall {_hours(c.wall_s)}, ${c.cost_usd:,.2f} billed "
                  f"(${c.hourly.total:,.2f}/h for {c.billed_gpus} GPUs and fixed fees); "
                  f"GPU-hours billed {c.billed_gpu_hours:,.2f} / under load "
                  f"{c.loaded_gpu_hours:,.2f} = "
                  + (f"{ratio:.2f}x" if ratio else "n/a (nothing runs load)"))


@app.command()
def plan(stacks: list[str] = typer.Argument(..., help="Stacks to plan; variants are grouped "
                                            "with their base, a lone base brings all its "
                                            "variants."),
         scale: str = typer.Option("full", help="Workload scale: full or quick."),
         stacks_dir: Path = typer.Option(STACKS_DIR, "--stacks-dir", file_okay=False,
                                         help="Folder of Pulumi.<stack>.yaml files."),
         as_of: str = typer.Option(None, "--as-of", help=AS_OF_HELP)) -> None:
    """Forecast before `pulumi up`: wall time per phase and step, dollars, and the campaign's
    billed GPU-hours over GPU-hours under load. Exits 2 if a stack fails pre-flight."""
    on = _as_of(as_of) or today()
    if scale not in ("full", "quick"):
        console.print(f"--scale {scale}: use full or quick")
        raise typer.Exit(2)
    try:
        named = [load_stack(n, stacks_dir) for n in stacks]
        bases = {s.cluster.attach_to: load_stack(s.cluster.attach_to, stacks_dir)
                 for s in named if s.is_attached}
    except StackError as exc:
        console.print(str(exc), markup=False)
        raise typer.Exit(2) from None
    known = []
    for n in [*all_stack_names(stacks_dir), *derived_stack_names(stacks_dir)]:
        try:
            known.append(load_stack(n, stacks_dir))
        except StackError:
            continue  # `stacks check` reports it; it cannot be one of the planned variants
    invalid = 0
    for c in plan_campaigns(named, bases, known, scale, on):  # type: ignore[arg-type]
        _print_campaign(c)
        for r in c.runs:
            problems = check_stack(r.stack, stacks_dir, on=on).problems
            if problems:
                invalid += 1
                console.print(f"[red]{r.stack}: {len(problems)} pre-flight problem(s); run "
                              f"`python -m stacks check {r.stack}`[/red]")
    raise typer.Exit(2 if invalid else 0)


@app.command()
def render(stack: str = typer.Argument(..., help="Stack name (stacks/Pulumi.<name>.yaml)."),
           out: Path = typer.Option(Path("rendered"), "--out",
                                    help="Folder for <out>/<stack>/*.yaml.")) -> None:
    """Write the Kubernetes objects, Helm releases and AWS resources `pulumi up` would create.

    Runs the Pulumi program offline (mocks: no cloud, no Pulumi CLI). Exits 2 and lists every
    problem when the stack fails pre-flight (nothing is rendered then).
    """
    from stacks.render import render_stack, type_counts  # pulumi is only needed here

    try:
        result = render_stack(stack, out)
    except StackError as exc:
        console.print(f"[red]{len(exc.problems)} problem(s):[/red]")
        for p in exc.problems:
            console.print(f"  - {p}", markup=False)
        raise typer.Exit(2) from None
    counts = type_counts(result.run)
    t = Table(title=f"{stack}: {sum(counts.values())} resources -> {result.folder}",
              title_justify="left")
    t.add_column("type")
    t.add_column("count", justify="right")
    for kind, n in sorted(counts.items()):
        t.add_row(kind, str(n))
    console.print(t)


def main() -> None:
    app(prog_name="python -m stacks")


if __name__ == "__main__":
    sys.exit(main())
