"""`python -m reports cost <stack>` and `python -m reports audit <stack>`: the AWS side
(the audit itself: reports.audit_cli).

Mount on the reports CLI with `register(app)`; `python -m reports.aws_cli ...` runs them alone.
boto3 finds credentials and `AWS_ENDPOINT_URL` the usual way.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.table import Table

from reports.audit import Clients
from reports.audit_cli import audit_cmd
from reports.aws_session import clients_for
from reports.cost_explorer import (
    BILLING_LAG_NOTE,
    CE_REGION,
    activate_cost_allocation_tags,
    billed_by_stack,
)
from reports.node_hours import (
    NodeUsage,
    PeriodCost,
    as_utc,
    list_stack_instances,
    period_cost,
    usage_from_manifest,
)
from reports.pricing import DEFAULT_CACHE, PriceQuote, PriceUnavailable, resolve_prices
from stacks.loader import StackError, load_stack
from stacks.schema import ComputeMode, StackConfig

aws_app = typer.Typer(add_completion=False, no_args_is_help=True,
                      help="AWS side: billed vs computed cost, teardown audit.")
console = Console(width=None if sys.stdout.isatty() else 200)


@aws_app.callback()
def _commands() -> None:
    """Billed vs computed cost, and the teardown audit."""


def _load(stack: str) -> tuple[StackConfig, StackConfig | None]:
    s = load_stack(stack)
    return s, load_stack(s.cluster.attach_to) if s.cluster.attach_to else None


def _nodes(stack: StackConfig, nodes_file: Path | None, c: Clients) -> list[NodeUsage]:
    if nodes_file is not None:
        return usage_from_manifest(json.loads(nodes_file.read_text()))
    if stack.is_attached:
        console.print(f"{stack.name} is attached to {stack.cluster.attach_to}: its nodes are the "
                      "base's, tagged with the base; pass --nodes <run manifest> (its 'nodes')")
        raise typer.Exit(2)
    return list_stack_instances(c("ec2"), stack.name)


def _window(nodes: list[NodeUsage], start: datetime | None, end: datetime | None,
            now: datetime) -> tuple[datetime, datetime]:
    start, end = start and as_utc(start), end and as_utc(end)
    if start is None:
        start = min((n.start for n in nodes), default=None) or (now - timedelta(days=7))
    if end is None:
        ends = [n.end or now for n in nodes]
        end = max(ends) if ends and all(n.end for n in nodes) else now
    return start, min(end, now)


@aws_app.command()
def cost(stack: str = typer.Argument(..., help="Stack to account for."),
         start: datetime = typer.Option(None, help="Period start (UTC); default: the first "
                                        "node's start, or 7 days ago."),
         end: datetime = typer.Option(None, help="Period end (UTC); default: now."),
         nodes: Path = typer.Option(None, "--nodes", exists=True, dir_okay=False,
                                    help="Run manifest (or JSON list) with the nodes it ran on "
                                    "(required for a stack attached to a base)."),
         activate_tags: bool = typer.Option(False, "--activate-tags", help="Activate stack, "
                                            "project and experiment as cost allocation tags."),
         region: str = typer.Option(None, help="Region; default: the stack's."),
         price_cache: Path = typer.Option(DEFAULT_CACHE, help="Dated price cache (JSON)."),
         price_max_age_days: int = typer.Option(7, help="Re-ask the pricing API after this.")
         ) -> None:
    """Computed cost of a period (node-hours x prices + fees) beside what Cost Explorer billed
    to the stack's tag."""
    try:
        s, base = _load(stack)
    except StackError as exc:
        console.print(str(exc), markup=False)
        raise typer.Exit(2) from None
    region = region or (base or s).cluster.region
    c = clients_for(region)
    usage = _nodes(s, nodes, c)
    now = datetime.now(UTC)
    t0, t1 = _window(usage, start, end, now)
    try:
        quotes = resolve_prices({n.instance_type for n in usage}, region, cache_path=price_cache,
                                max_age_days=price_max_age_days,
                                overrides=s.cost.price_overrides)
        computed = period_cost(usage, t0, t1, {k: q.usd_per_hour for k, q in quotes.items()},
                               auto_mode=(base or s).cluster.compute_mode == ComputeMode.AUTO,
                               efs_gib=(base or s).storage.model_cache_gib)
    except (PriceUnavailable, ValueError) as exc:
        console.print(str(exc), markup=False)
        raise typer.Exit(2) from None
    _print_computed(stack, computed, quotes, usage)
    ce = boto3.session.Session().client("ce", region_name=CE_REGION)
    try:
        for problem in activate_cost_allocation_tags(ce) if activate_tags else []:
            console.print(f"[yellow]tag not activated: {problem}[/yellow]")
        billed = billed_by_stack(ce, t0.date(), (t1 - timedelta(microseconds=1)).date()
                                 + timedelta(days=1))
    except (BotoCoreError, ClientError) as exc:
        console.print(f"Cost Explorer unavailable: {exc}", markup=False)
        raise typer.Exit(1) from None
    t = Table(title=f"billed by Cost Explorer, {billed.start} to {billed.end} (exclusive), "
              f"{billed.metric}{' (estimated)' if billed.estimated else ''}", title_justify="left")
    t.add_column("stack tag")
    t.add_column(f"billed {billed.unit}", justify="right")
    for name, usd in sorted(billed.by_stack.items()):
        t.add_row(f"[bold]{name}[/bold]" if name == stack else name, f"{usd:,.2f}")
    console.print(t)
    console.print(f"{stack}: computed ${computed.total:,.2f} vs billed "
                  f"${billed.for_stack(stack):,.2f}. {BILLING_LAG_NOTE}")
    if s.is_attached:
        console.print(f"Nodes of an attached stack bill under the base's tag "
                      f"({s.cluster.attach_to}); its own tag covers only its own resources.")


def _print_computed(stack: str, computed: PeriodCost, quotes: dict[str, PriceQuote],
                    usage: list[NodeUsage]) -> None:
    t = Table(title=f"{stack}: computed cost {computed.start:%Y-%m-%d %H:%M} to "
              f"{computed.end:%Y-%m-%d %H:%M} UTC ({computed.hours:.2f} h, {len(usage)} "
              "node(s))", title_justify="left")
    t.add_column("what")
    t.add_column("USD", justify="right")
    for what, usd in computed.lines.items():
        t.add_row(what, f"{usd:,.2f}")
    t.add_row("[bold]total[/bold]", f"[bold]{computed.total:,.2f}[/bold]")
    console.print(t)
    for q in quotes.values():
        console.print(f"price {q.instance_type}: ${q.usd_per_hour:.4f}/h ({q.describe()})",
                      markup=False)
    for n in usage:
        if n.note:
            console.print(f"[yellow]{n.node}: {n.note}[/yellow]")


def register(app: typer.Typer) -> None:
    """Add `cost` and `audit` to another typer app (the reports CLI)."""
    app.command("cost")(cost)
    app.command("audit")(audit_cmd)


aws_app.command("audit")(audit_cmd)


if __name__ == "__main__":
    aws_app(prog_name="python -m reports.aws_cli")
