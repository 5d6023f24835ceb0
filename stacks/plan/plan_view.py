"""What `python -m stacks plan` prints: a campaign's schedule, every dollar and the assumptions,
and what each comparison of the plan can resolve (stacks/plan/resolution.py).

Rendering only (rich tables from stacks/plan/forecast.py and stacks/plan/campaign_cost.py); nothing
here computes a figure the forecast does not.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from stacks.config.schema import ComputeMode
from stacks.plan.campaign_cost import BaseCampaign
from stacks.plan.forecast import Campaign
from stacks.plan.resolution import LABELS, SPREAD_FLOOR, Resolution
from stacks.plan.schedule import Slot
from stacks.preflight.auto_mode import EMPTY_NODE_GRACE_S
from stacks.sizing.estimate import ENGINE_INIT_S, MODEL_LOAD_GIB_PER_S, WARM_ENGINE_INIT_S


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _ratio(c: Campaign | BaseCampaign) -> str:
    r = c.billed_over_loaded
    return (f"GPU-hours billed {c.billed_gpu_hours:,.2f} / under load "
            f"{c.loaded_gpu_hours:,.2f} = " + (f"{r:.2f}x" if r else "n/a (nothing runs load)"))


def print_standalone(console: Console, c: Campaign) -> None:
    t = Table(title=f"{c.name} (standalone)", title_justify="left")
    for col in ("stack", "phase", "wall", "GPUs under load", "$ attributed"):
        t.add_column(col, justify="left" if col in ("stack", "phase") else "right")
    for r in c.runs:
        t.add_row(r.stack, "start-up", hours(r.startup_s), "0", "")
        t.add_row("", "model load (assumed)", hours(r.model_load_s), "0", "")
        if r.restarts:
            t.add_row("", f"cold restarts ({r.restarts} x {hours(r.restart_s)})",
                      hours(r.restarts_s), "0", "")
        for step, sec in r.steps_s.items():
            t.add_row("", step, hours(sec), str(r.gpus_loaded), "")
        t.add_row("", "[bold]total[/bold]", hours(r.wall_s), "",
                  f"${r.attributed_usd:,.2f} (${r.hourly.total:,.2f}/h)")
    console.print(t)
    for r in c.runs:
        if r.warning:
            console.print(f"[yellow]{r.stack}: {r.warning}[/yellow]")
    console.print(f"campaign {c.name}: wall {hours(c.wall_s)}, ${c.cost_usd:,.2f} billed "
                  f"(${c.hourly.total:,.2f}/h for {c.billed_gpus} GPUs and fixed fees); "
                  + _ratio(c))


def _load_phase(s: Slot) -> str:
    if s.load_kind == "kept":
        return f"model load: none (workers kept from {s.kept_from}; frontend replaced)"
    if s.load_kind == "repeat":
        return "model load (repeat: compile/autotune caches on the model volume, assumed)"
    return "model load (first, assumed)"


def _slot_rows(t: Table, c: BaseCampaign, s: Slot) -> None:
    deploy = "start-up (frontend swap)" if s.kept_from else "start-up (deploy)"
    t.add_row(s.name, deploy, hours(s.start_s), hours(s.startup_s), "0", "")
    t.add_row("", _load_phase(s), "", hours(s.load_s), "0", "")
    if s.skipped_restarts:
        t.add_row("", f"cold restarts: none of the {s.skipped_restarts} coldRestart names (the "
                  "deployment starts cold; every step has fresh hash ids)", "", "0 s", "0", "")
    t0 = s.start_s + s.startup_s + s.load_s
    for step, sec in s.steps_s.items():
        t.add_row("", step, hours(t0), hours(sec), str(s.loaded_gpus), "")
        t0 += sec
    nodes = ", ".join(f"{n} x {g}" for g, n in s.nodes.items())
    t.add_row("", f"[bold]total[/bold] ({nodes}; prompt epoch {s.prompt_epoch})", "",
              hours(s.wall_s), "", f"${c.attributed_usd(s):,.2f}")


def print_base(console: Console, c: BaseCampaign) -> None:
    sch = c.schedule
    t = Table(title=f"{c.name} (base; campaign schedule: concurrent on disjoint GPU groups, "
              "kept workers, idle GPU groups scaled to zero)", title_justify="left")
    for col in ("stack", "phase", "start", "wall", "GPUs under load", "$ attributed"):
        t.add_column(col, justify="left" if col in ("stack", "phase") else "right")
    t.add_row(c.name, "start-up (cluster, storage, model download; GPU groups at 0)", "0.0 min",
              hours(sch.base_ready_s), "0", "")
    for s in sorted(c.slots, key=lambda s: (s.start_s, s.name)):
        _slot_rows(t, c, s)
    console.print(t)
    for s in c.slots:
        if s.warning:
            console.print(f"[yellow]{s.name}: {s.warning}[/yellow]")
    g = Table(title=f"{c.name}: GPU node groups", title_justify="left")
    for col in ("group", "scale events (time: nodes)", "billed GPU-h", "under load GPU-h",
                "billed / loaded", "idle $"):
        g.add_column(col, justify="left" if col in ("group", "scale events (time: nodes)")
                     else "right")
    for name, plan in sch.groups.items():
        events = ", ".join(f"{hours(e.t_s)}: {e.nodes}" for e in sch.events if e.group == name)
        billed, loaded = c.group_billed_gpu_hours(name), c.group_loaded_gpu_hours(name)
        g.add_row(f"{name} ({plan.group.count} x {plan.group.instance_type})", events or "-",
                  f"{billed:,.2f}", f"{loaded:,.2f}",
                  f"{billed / loaded:.2f}x" if loaded else "n/a",
                  f"${c.idle_node_s(name) * c.per_node[name] / 3600:,.2f}")
    console.print(g)
    attributed = sum(c.attributed_usd(s) for s in c.slots)
    lines = ", ".join(f"{k} ${v:,.2f}/h" for k, v in c.shared.lines.items())
    console.print(f"every dollar: ${attributed:,.2f} attributed to variants + ${c.shared_usd:,.2f} "
                  f"shared (of which base start-up ${c.base_startup_usd:,.2f}; {lines}) + "
                  f"${c.idle_usd:,.2f} idle GPU nodes = ${c.cost_usd:,.2f}", markup=False)
    for item in c.unknown:
        console.print(f"  [red]price unknown[/red]: {item} (the total is a lower bound)")
    if note := c.shared.unverified_note():
        console.print(f"  [yellow]{note}[/yellow]")
    a = sch.assumptions
    console.print(
        f"assumptions: a GPU node is Ready {hours(a.node_ready_s)} after it is asked for and "
        f"bills {hours(a.node_release_s)} after it is let go" + (
            f" ({hours(EMPTY_NODE_GRACE_S)} more when its dynamic Auto Mode NodePool is "
            "lowered but not parked: the pool's empty-node grace)"
            if c.base.cluster.compute_mode == ComputeMode.AUTO else "") + "; each "
        "variant's start-up is its cost.setupHours minus its model load, also for a frontend "
        "swap; a first model load reads the checkpoint at "
        f"{MODEL_LOAD_GIB_PER_S:g} GiB/s + {ENGINE_INIT_S:.0f} s engine start (or "
        "serving.startupBudgetMinutes); a repeat load of the same model, image and layout "
        f"reads the checkpoint + {WARM_ENGINE_INIT_S:.0f} s (compile and autotune caches "
        "warm); steps as `stacks check` estimates them, each step's decode at its ITL (the "
        "lines below say which: simulated, predicted, or cost.assumedItlMs; a step bounded by "
        "a request count at its simulated window where there is one)", markup=False)
    budget = c.base.cost.campaign_budget_usd
    verdict = ("no cost.campaignBudgetUsd on the base" if budget is None else
               f"budget ${budget:,.2f} (cost.campaignBudgetUsd): "
               + ("[red]OVER[/red]" if c.over_budget else "[green]within[/green]"))
    console.print(f"campaign {c.name}: wall {hours(c.wall_s)}, ${c.cost_usd:,.2f} billed; "
                  f"{_ratio(c)}; {verdict}")


def _share(x: float, figure: str) -> str:
    if math.isnan(x):
        return "n/a"
    return f"{x * 100:.1f} points" if figure == "reuse" else f"{x:.1%}"


def _step(step: str) -> str:
    return step.split("/", 1)[-1]


def resolution_line(rows: list[Resolution]) -> tuple[str, str]:
    """(what the planned sample resolves, what the target would cost) over one comparison's
    steps of one figure."""
    figure = rows[0].figure
    judged = [r for r in rows if not math.isnan(r.mdd)]
    if judged:
        worst = max(judged, key=lambda r: r.mdd)
        best = min(judged, key=lambda r: r.mdd)
        resolves = (_share(worst.mdd, figure) + f" ({_step(worst.step)})" if worst is best else
                    f"{_share(best.mdd, figure)} ({_step(best.step)}) to "
                    f"{_share(worst.mdd, figure)} ({_step(worst.step)})")
    else:
        resolves = f"not judged: {rows[0].note}" if rows[0].note else "not judged"
    short = [r for r in rows if not r.resolved]
    if not short:
        return resolves, "resolved at every step"
    most = max((r.needed_repeats or 10**9) for r in short)
    reps = "more than 20 repeats" if most == 10**9 else \
        f"{most} repeat(s) a side (~{max(r.needed_requests or 0 for r in short):,} requests)"
    hours_ = hours(sum(r.extra_s for r in short))
    usd = sum(r.extra_usd for r in short)
    return resolves, (f"{len(short)} of {len(rows)} step(s) short: up to {reps}, "
                      f"+{hours_}, +${usd:,.2f}")


def print_resolution(console: Console, name: str, rows: list[Resolution],
                     target: float, note: str = "") -> None:
    """Per question, stacks and figure: the smallest difference the planned sample resolves
    (95 % / 80 % power) and what resolving the target would add."""
    if note:
        console.print(f"{name}: resolvable differences: {note}", markup=False)
    if not rows:
        return
    t = Table(title=f"{name}: the smallest difference each comparison resolves (95 % "
              f"confidence, 80 % power; SIMULATED by DynoSim) and what resolving "
              f"{target:.0%} would cost", title_justify="left")
    for col in ("question", "compared", "figure", "requests a side", "resolves",
                f"to resolve {target:.0%}"):
        t.add_column(col, justify="left")
    groups: dict[tuple[str, str, str, str], list[Resolution]] = {}
    for r in rows:
        groups.setdefault((r.question, r.subject, r.reference, r.figure), []).append(r)
    for (q, sub, ref, fig), rs in groups.items():
        resolves, cost = resolution_line(rs)
        n = sorted({r.requests for r in rs})
        t.add_row(q, f"{sub} vs {ref}", LABELS[fig],
                  f"{n[0]:,}" if len(n) == 1 else f"{n[0]:,}-{n[-1]:,}", resolves, cost)
    console.print(t)
    console.print("resolves: the smallest difference (a share of the reference's figure; a hit "
                  "rate in points) its sample tells apart from noise (the report's method: "
                  "exact bootstrap of the requests' medians, Welch's t over repeats for "
                  "output tok/s); each side's spread is the simulation's, at least "
                  + ", ".join(f"{LABELS[k]} {v:.1%}" for k, v in SPREAD_FLOOR.items())
                  + " (the noise DynoSim lacks; docs/stacks.md). The report holds the "
                  "family-wise error over all its comparisons (Holm), so its first verdicts "
                  "need somewhat more.", markup=False)
