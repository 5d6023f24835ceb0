"""How `reports cost` shows a computed period cost: each line with the part it belongs to, the
split between a base's shared fixed costs and the GPU nodes a stack occupies, the prices used
(and which of them nobody verified), what is unknown, and what is not included.

A base and its variants are one bill: the variants run one at a time on the base's nodes, so
`reports cost <variant>` attributes part of the base's cost to the variant (the nodes its run
record lists, plus the base's fixed costs over its window) and `reports cost <base>` holds it
all. The split says which is which, and neither figure is to be added to the other.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from reports.accounting.node_hours import NodeUsage, PeriodCost
from reports.accounting.pricing import PriceQuote
from stacks.catalog.service_prices import SERVICE_PRICES
from stacks.config.schema import StackConfig


def part_names(stack: StackConfig) -> tuple[str, str]:
    """(name of the stack's own part, name of the shared part)."""
    if stack.is_attached:
        return "this variant", f"shared ({stack.cluster.attach_to}'s fixed costs)"
    return "GPU nodes", "shared fixed costs"


def unverified_prices(computed: PeriodCost, quotes: dict[str, PriceQuote]) -> list[str]:
    out = [f"{q.instance_type} ({q.source} {q.date})" for q in quotes.values()
           if not q.verified and q.instance_type in computed.prices]
    out += [f"{k} ({SERVICE_PRICES[k].unit})" for k in sorted(computed.prices)
            if k in SERVICE_PRICES and not SERVICE_PRICES[k].verified]
    return out


def split_note(stack: StackConfig) -> str:
    if stack.is_attached:
        base = stack.cluster.attach_to
        return (f"{stack.name} runs on {base}'s cluster: every line above bills under {base}'s "
                f"tag and is inside `reports cost {base}` for the same period (the shared part "
                "is its fixed costs over this window, variants running one at a time); never "
                f"add this figure to {base}'s or to another variant's.")
    if stack.is_base:
        return ("The GPU nodes are the capacity its variants run on: `reports cost <variant>` "
                "attributes parts of this total to each variant; they are not additions to it.")
    return "A standalone stack owns every line above."


def print_computed(console: Console, stack: StackConfig, computed: PeriodCost,
                   quotes: dict[str, PriceQuote], usage: list[NodeUsage]) -> None:
    own, shared = part_names(stack)
    t = Table(title=f"{stack.name}: computed cost {computed.start:%Y-%m-%d %H:%M} to "
              f"{computed.end:%Y-%m-%d %H:%M} UTC ({computed.hours:.2f} h, {len(usage)} "
              "node(s))", title_justify="left")
    for col in ("what", "part", "USD"):
        t.add_column(col, justify="right" if col == "USD" else "left")
    for what, usd in computed.lines.items():
        t.add_row(what, shared if what in computed.shared else own, f"{usd:,.2f}")
    for it, hours in computed.unknown.items():
        t.add_row(f"nodes {it} ({hours:.2f} node-h, no price)", own, "unknown")
    t.add_row(f"[bold]{own}[/bold]", "", f"{computed.total - computed.shared_total:,.2f}"
              + ("+" if computed.unknown else ""))
    t.add_row(f"[bold]{shared}[/bold]", "", f"{computed.shared_total:,.2f}")
    t.add_row("[bold]total[/bold]", "", f"[bold]{computed.total:,.2f}"
              + (" + unknown" if computed.unknown else "") + "[/bold]")
    console.print(t)
    console.print(split_note(stack), markup=False)
    for q in quotes.values():
        console.print(f"price {q.instance_type}: ${q.usd_per_hour:.4f}/h ({q.describe()})",
                      markup=False)
    if computed.unknown:
        console.print(f"[red]price unknown[/red] for {', '.join(computed.unknown)}: not in the "
                      "catalogue, no cost.priceOverrides, none recorded with the run and the "
                      "pricing API did not answer; the total is a lower bound")
    if bad := unverified_prices(computed, quotes):
        console.print(f"[yellow]unverified prices: {', '.join(bad)}[/yellow]")
    console.print(f"not included: {'; '.join(computed.excluded)}", markup=False)
    for n in usage:
        if n.note:
            console.print(f"[yellow]{n.node}: {n.note}[/yellow]")
