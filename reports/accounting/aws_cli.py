"""`python -m reports cost <stack>` and `python -m reports audit <stack>`: the AWS side
(the audit itself: reports.accounting.audit_cli).

Mount on the reports CLI with `register(app)`; `python -m reports.accounting.aws_cli ...` runs them
alone. boto3 finds credentials and `AWS_ENDPOINT_URL` the usual way.
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

from reports.accounting.audit import Clients
from reports.accounting.audit_cli import audit_cmd
from reports.accounting.aws_session import clients_for
from reports.accounting.cost_explorer import (
    BILLING_LAG_NOTE,
    CE_REGION,
    activate_cost_allocation_tags,
    billed_by_stack,
)
from reports.accounting.cost_split import print_computed
from reports.accounting.node_hours import (
    NodeUsage,
    as_utc,
    list_stack_instances,
    period_cost,
    usage_from_manifest,
)
from reports.accounting.pricing import DEFAULT_CACHE, PriceQuote, resolve_prices
from stacks.catalog.service_prices import recorded_prices
from stacks.cli import run_cli, stack_error
from stacks.config.loader import StackError, load_stack
from stacks.config.schema import ComputeMode, StackConfig
from stacks.preflight.run import effective_cluster

aws_app = typer.Typer(add_completion=False, no_args_is_help=True,
                      help="AWS side: billed vs computed cost, teardown audit.")
console = Console(width=None if sys.stdout.isatty() else 200)


@aws_app.callback()
def _commands() -> None:
    """Billed vs computed cost, and the teardown audit."""


def _load(stack: str) -> tuple[StackConfig, StackConfig | None]:
    s = load_stack(stack)
    return s, load_stack(s.cluster.attach_to) if s.cluster.attach_to else None


def _nodes(stack: StackConfig, nodes_file: Path | None, c: Clients
           ) -> tuple[list[NodeUsage], dict[str, float]]:
    """The nodes to account for, and the instance prices their run record carries."""
    if nodes_file is not None:
        doc = json.loads(nodes_file.read_text())
        return usage_from_manifest(doc), recorded_prices(doc) if isinstance(doc, dict) else {}
    if stack.is_attached:
        console.print(f"{stack.name} is attached to {stack.cluster.attach_to}: its nodes are the "
                      "base's, tagged with the base; pass --nodes <run manifest> (its 'nodes')")
        raise typer.Exit(2)
    return list_stack_instances(c("ec2"), stack.name), {}


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
        stack_error(exc)
    owner = base or s
    region = region or owner.cluster.region
    c = clients_for(region)
    usage, recorded = _nodes(s, nodes, c)
    now = datetime.now(UTC)
    t0, t1 = _window(usage, start, end, now)
    try:
        quotes = resolve_prices({n.instance_type for n in usage}, region, cache_path=price_cache,
                                max_age_days=price_max_age_days,
                                overrides=s.cost.price_overrides, missing_ok=True)
        for it in ({n.instance_type for n in usage} - set(quotes)) & set(recorded):
            quotes[it] = PriceQuote(it, region, recorded[it], "recorded", "with the run",
                                    "not in the catalogue; the price the run record carries")
        cluster = effective_cluster(s, base)
        computed = period_cost(usage, t0, t1, {k: q.usd_per_hour for k, q in quotes.items()},
                               auto_mode=cluster.compute_mode == ComputeMode.AUTO,
                               efs_gib=owner.storage.model_cache_gib,
                               nat_gateways=0 if cluster.vpc.id else 1,
                               root_gib={g.name: g.disk_gib for g in cluster.node_groups},
                               eks_version=cluster.eks_version)
    except ValueError as exc:
        console.print(str(exc), markup=False)
        raise typer.Exit(2) from None
    print_computed(console, s, computed, quotes, usage)
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
    total = f"${computed.total:,.2f}" if computed.complete else \
        f"at least ${computed.total:,.2f} (some node prices unknown)"
    console.print(f"{stack}: computed {total} vs billed "
                  f"${billed.for_stack(stack):,.2f}. {BILLING_LAG_NOTE}")
    if s.is_attached:
        console.print(f"Nodes of an attached stack bill under the base's tag "
                      f"({s.cluster.attach_to}); its own tag covers only its own resources.")


def register(app: typer.Typer) -> None:
    """Add `cost` and `audit` to another typer app (the reports CLI)."""
    app.command("cost")(cost)
    app.command("audit")(audit_cmd)


aws_app.command("audit")(audit_cmd)


if __name__ == "__main__":
    sys.exit(run_cli(aws_app, "python -m reports.accounting.aws_cli"))
