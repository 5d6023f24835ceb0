"""`python -m reports build <run-dir>...` and `python -m reports compare <stack|run-dir>...`."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import click
import typer
from rich.console import Console

from reports.build import build_report
from reports.records.runs import RunError, resolve_run_dirs
from reports.render.explore_section import ExploreMissing
from reports.tables.goodput import DEFAULT_SLOS, parse_slo
from reports.tables.sla import USER_SPEEDS
from stacks.cli import fail, run_cli, writable_dir

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Reports: tables, goodput, Pareto, cost and comparisons from run folders.")
console = Console(width=None if sys.stdout.isatty() else 200)

SLO_HELP = ("SLO as name:ttft_ms=5000,tok_s_per_user=50[,itl_ms=25] (repeatable; default: "
            + "; ".join(f"{s.name}: {s.definition}" for s in DEFAULT_SLOS) + ")")


USER_SPEED_HELP = ("per-user speed sla.csv judges: " + "; ".join(
    f"{k} = {v}" for k, v in USER_SPEEDS.items()) + " (default: the definition each model's "
                   "published figure used; p50 for other models)")
NO_CACHE_HELP = "Re-parse the exports, ignore the parquet cache beside each run."
_USER_SPEED = typer.Option(None, "--user-speed", click_type=click.Choice(list(USER_SPEEDS)),
                           help=USER_SPEED_HELP)


_EXPLORE = typer.Option(None, "--explore", file_okay=False, exists=True,
                        help="A `python -m stacks explore <base> --out DIR` folder: its files "
                        "go beside the report and its top candidates per SLO into a section "
                        "(SIMULATED, as explore.md labels them).")


def _run(targets: list[str], out: Path, name: str | None, slo: list[str] | None,
         runs_root: Path, with_compare: bool, no_cache: bool,
         user_speed: str | None = None, explore: Path | None = None) -> None:
    try:
        slos = tuple(parse_slo(s) for s in slo) if slo else DEFAULT_SLOS
        writable_dir(out)
        dirs = resolve_run_dirs(targets, runs_root, say=console.print)
    except (ValueError, RunError) as exc:
        fail(exc)
    if with_compare and len(dirs) < 2:
        fail(f"compare needs two or more runs, got {len(dirs)} ({', '.join(targets)}): name "
             "more stacks or run folders, or use `python -m reports build` for one run")
    t0 = time.perf_counter()
    with console.status(f"loading {len(dirs)} run(s) and building the report"):
        try:
            report = build_report(dirs, out, name=name, slos=slos, with_compare=with_compare,
                                  use_cache=not no_cache, user_speed=user_speed,
                                  explore=explore)
        except (RunError, ExploreMissing) as exc:
            fail(exc)
    n_req = len(report.requests)
    console.print(f"report [bold]{report.name}[/bold]: {len(report.steps)} steps, {n_req:,} "
                  f"requests, {time.perf_counter() - t0:.1f} s -> {report.out_dir / 'report.md'}"
                  f" and {report.out_dir / 'index.html'} (open it in a browser)")
    for key, table in report.tables.items():
        console.print(f"  {key}.csv: {len(table)} rows")


@app.command()
def build(run_dirs: list[str] = typer.Argument(..., help="Run folders runs/<stack>/<run-id>, "
                                             "or stack names (each its newest complete run)."),
          out: Path = typer.Option(Path("reports/out"), help="Parent folder of the report."),
          name: str = typer.Option(None, help="Report folder name (default from the runs)."),
          slo: list[str] = typer.Option(None, help=SLO_HELP),
          runs_root: Path = typer.Option(Path("runs"), help="Where stack names are looked up."),
          no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
          user_speed: str = _USER_SPEED, explore: Path = _EXPLORE) -> None:
    """Tables, plots and report.md for one or more runs."""
    _run(run_dirs, out, name, slo, runs_root, False, no_cache, user_speed, explore)


@app.command("compare")
def compare_cmd(targets: list[str] = typer.Argument(..., help="Two or more stack names (each "
                                                 "its newest complete run) or run folders."),
                out: Path = typer.Option(Path("reports/out"), help="Parent folder of the "
                                         "report."),
                name: str = typer.Option(None, help="Report folder name (default from the "
                                         "stacks)."),
                slo: list[str] = typer.Option(None, help=SLO_HELP),
                runs_root: Path = typer.Option(Path("runs"), help="Where stack names are "
                                               "looked up."),
                no_cache: bool = typer.Option(False, "--no-cache", help=NO_CACHE_HELP),
                user_speed: str = _USER_SPEED, explore: Path = _EXPLORE) -> None:
    """Everything `build` writes, plus aggregated vs disaggregated side-by-side tables and,
    for recipe stacks, optimized/baseline and aggregated/disaggregated tok/s/GPU at the SLA."""
    _run(targets, out, name, slo, runs_root, True, no_cache, user_speed, explore)


@app.command("campaign")
def campaign_cmd(campaign_dir: Path = typer.Argument(..., help="runs/campaigns/<base>/<run-id>"),
                 out: Path = typer.Option(Path("reports/out")),
                 name: str = typer.Option(None, help="Report folder (default: campaign-<base>)"
                                          )) -> None:
    """A campaign's forecast against what it measured: billed vs loaded GPU-hours per node
    group, and per variant its order, kept workers (with their evidence), prompt epochs, wall
    and load window (campaign.md, campaign_groups.csv, campaign_slots.csv)."""
    from reports.render.campaign import load, write

    try:
        data = load(campaign_dir)
    except (OSError, ValueError) as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    path = write(data, out / (name or f"campaign-{data['plan']['base']}"))
    console.print(f"campaign report -> {path}")


_register_aws: Callable[[typer.Typer], None] | None
try:  # `cost` and `audit` (the AWS side) live in reports.accounting.aws_cli and mount here
    from reports.accounting.aws_cli import register as _register_aws
except ImportError:  # pragma: no cover - only while that module is absent
    _register_aws = None
if _register_aws is not None:
    _register_aws(app)


def main() -> int:
    return run_cli(app, "python -m reports")


if __name__ == "__main__":
    sys.exit(main())
