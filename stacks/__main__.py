"""`python -m stacks check <stack>... | --all`: pre-flight checks with the memory table and cost."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from stacks.catalog.eks_versions import today
from stacks.cli import (
    fail,
    problem_line,
    require_stack_names,
    run_cli,
    stack_error,
    writable_dir,
)
from stacks.config.loader import (
    STACKS_DIR,
    StackError,
    all_stack_names,
    derived_stack_names,
    load_stack,
)
from stacks.config.workload_config import Scale
from stacks.explore.judge import SLO_NAMES
from stacks.forecast_cli import (
    campaign_budget_problems,
    campaign_stacks,
    console,
    known_stacks,
    note_assumed_over_budget,
    print_forecast_notes,
    print_itl_sources,
    print_plan_resolution,
)
from stacks.plan.campaign_cost import BaseCampaign, budget_problems
from stacks.plan.forecast import plan_campaigns
from stacks.plan.plan_view import hours, print_base, print_standalone
from stacks.preflight.run import PreflightReport, check_stack, consult_engine
from stacks.sizing.estimate import cold_restarts, restart_seconds
from workloads.sim.forecast import forecast

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="What to test: check stack files before anything is created or run.")


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
        hours(each) if each >= 60 else f"{each:g} s") if restarts else ""
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
        fail(f"--as-of {value}: write a date as YYYY-MM-DD")


AS_OF_HELP = ("Estimate date YYYY-MM-DD (default today, UTC): EKS version support status and "
              "the control-plane rate (standard or extended support) are taken on this day.")


def _print_problems(name: str, problems: list) -> None:
    if len(problems) == 1 and problems[0].field == "stack":   # no such stack: one line
        print(f"error: {problem_line(name, problems[0])}", file=sys.stderr)
        return
    console.print(f"\n[bold]{name}[/bold]\n[red]{len(problems)} problem(s):[/red]")
    for p in problems:
        console.print(f"  - {p}", markup=False)


@app.command()
def check(stacks: list[str] = typer.Argument(None, help="Stack names (stacks/Pulumi.<name>.yaml), "
                                         "or <variant>.<base>: a variant on another base."),
          all_: bool = typer.Option(False, "--all", help="Check every stack in the stacks dir "
                                    "and every <variant>.<base> the bases allow."),
          stacks_dir: Path = typer.Option(STACKS_DIR, "--stacks-dir", file_okay=False,
                                          exists=True,
                                          help="Folder of Pulumi.<stack>.yaml files."),
          as_of: str = typer.Option(None, "--as-of", help=AS_OF_HELP),
          predict_: bool = typer.Option(True, "--predict/--no-predict",
                                        help="Price a base's campaign budget at each step's "
                                        "simulated figures (DynoSim, `make engine`), else its "
                                        "predicted ITL (AIConfigurator, `make predictor`); "
                                        "--no-predict: every step at cost.assumedItlMs."),
          simulate: bool = typer.Option(True, "--simulate/--no-simulate",
                                        help="--no-simulate: price the budget at "
                                        "AIConfigurator's predicted ITL alone.")) -> None:
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
    checked: list[tuple[str, PreflightReport | None]] = []
    for name in names:
        try:
            checked.append((name, check_stack(name, stacks_dir, on=on)))
        except StackError as exc:
            failed += 1
            _print_problems(name, exc.problems)
        except Exception as exc:  # noqa: BLE001 - a bug: say so in one line, check the rest
            failed += 1
            internal += 1
            console.print(f"\n[bold]{name}[/bold]")
            console.print(f"internal error while checking it: {type(exc).__name__}: {exc} (a "
                          "bug in dynamo-bench: please report it with the stack file)",
                          markup=False)
    verdict = consult_engine([r for _, r in checked if r is not None])
    for _name, report in checked:
        assert report is not None
        _print_report(report)
        problems = campaign_budget_problems(report, stacks_dir, on, predict_, simulate)
        for p in problems:
            console.print(f"  - {p}", markup=False)
        failed += bool(not report.ok or problems)
    if verdict.note and verdict.fatal:
        print(f"error: {verdict.note} (CI must consult them)", file=sys.stderr)
        failed += 1
    elif verdict.note:
        console.print(f"\nnote: {verdict.note}", markup=False)
    console.print(f"\n{len(names) - failed}/{len(names)} stack(s) valid")
    raise typer.Exit(1 if internal else 2 if failed else 0)


@app.command()
def plan(stacks: list[str] = typer.Argument(..., help="Stacks to plan; variants are grouped "
                                            "with their base, a lone base brings all its "
                                            "variants."),
         scale: Scale = typer.Option("full", help="Workload scale: the plan's values (full) "
                                     "or the local/CI sizes (quick)."),
         stacks_dir: Path = typer.Option(STACKS_DIR, "--stacks-dir", file_okay=False,
                                         exists=True,
                                         help="Folder of Pulumi.<stack>.yaml files."),
         as_of: str = typer.Option(None, "--as-of", help=AS_OF_HELP),
         predict_: bool = typer.Option(True, "--predict/--no-predict",
                                       help="Simulate every planned stack with DynoSim (needs "
                                       "`make engine`) and predict it with AIConfigurator "
                                       "(`make predictor`): each step's duration at its "
                                       "simulated ITL, a count-bounded step at its simulated "
                                       "window (else the predicted ITL, else "
                                       "cost.assumedItlMs), each variant's SIMULATED sweep with "
                                       "AIConfigurator's as a cross-check, and the plan's "
                                       "questions. --no-predict: every step at "
                                       "cost.assumedItlMs."),
         simulate: bool = typer.Option(True, "--simulate/--no-simulate",
                                       help="--no-simulate: AIConfigurator's predicted ITL "
                                       "alone, no simulation."),
         resolution: bool = typer.Option(True, "--resolution/--no-resolution",
                                         help="Per comparison the variants form, the smallest "
                                         "difference the simulated sample resolves and what "
                                         "the target would cost (from the simulation: none "
                                         "with --no-predict or --no-simulate)."),
         target_difference: float = typer.Option(5.0, "--target-difference", min=0.1,
                                                 max=100.0,
                                                 help="The difference to resolve, in % of "
                                                 "the reference's figure (hit rates: points).")
         ) -> None:
    """Forecast before `pulumi up`: the campaign's schedule (a base's variants as
    `python -m workloads campaign` runs them: concurrent on disjoint GPU groups, kept workers,
    idle GPU groups scaled to zero), wall time per phase and step, every dollar (attributed to
    a variant, shared, idle) and billed GPU-hours over GPU-hours under load. A step's decode
    lasts its simulated ITL (a count-bounded step its simulated window) where DynoSim runs the
    stack, else its predicted ITL where AIConfigurator predicts it, else the stack's
    cost.assumedItlMs; a line per stack says which. Then, per comparison the variants form
    (agg vs disagg, the KV router, KV offload, a decode tier on another GPU), the smallest
    difference its simulated sample resolves and what resolving --target-difference would
    cost in requests, repeats, hours and dollars. Exits 2 if a stack fails pre-flight or a
    base's campaign forecast exceeds its cost.campaignBudgetUsd."""
    on = _as_of(as_of) or today()
    require_stack_names(stacks, stacks_dir)
    try:
        named = [load_stack(n, stacks_dir) for n in stacks]
        bases = {s.cluster.attach_to: load_stack(s.cluster.attach_to, stacks_dir)
                 for s in named if s.cluster.attach_to is not None}  # is_attached
    except StackError as exc:
        console.print(str(exc), markup=False)
        raise typer.Exit(2) from None
    invalid = 0
    known = known_stacks(stacks_dir)
    assumed = plan_campaigns(named, bases, known, scale, on)
    by_name = {s.name: s for s in named}
    fc = forecast([pair for c in assumed for pair in campaign_stacks(c, by_name)], scale,
                  predict_, simulate)
    print_forecast_notes(fc)
    preds, itls = fc.predictions, fc.itls
    # the same campaigns, each step priced at its simulated or predicted figures
    campaigns = plan_campaigns(named, bases, known, scale, on, itls) if itls else assumed
    for c, at_assumed in zip(campaigns, assumed, strict=True):
        if isinstance(c, BaseCampaign):
            print_base(console, c)
        else:
            print_standalone(console, c)
        print_itl_sources(c, scale, fc, by_name)
        for name in [s.name for s in c.slots] if isinstance(c, BaseCampaign) else \
                [r.stack for r in c.runs]:
            problems = check_stack(name, stacks_dir, on=on).problems
            if problems:
                invalid += 1
                console.print(f"[red]{name}: {len(problems)} pre-flight problem(s); run "
                              f"`python -m stacks check {name}`[/red]")
        if isinstance(c, BaseCampaign):
            for p in budget_problems(c):
                invalid += 1
                console.print(f"[red]{p}[/red]", markup=False)
            if isinstance(at_assumed, BaseCampaign):
                note_assumed_over_budget(c, at_assumed)
            if preds:
                from stacks.predict.predict_view import print_plan_predictions
                from stacks.predict.simulated import simulated_table
                sims = [(simulated_table(slot.stack, c.base, scale, record), record)
                        for slot in c.slots
                        if (record := fc.simulations.get(slot.stack.name)) is not None]
                print_plan_predictions(console, c.name,
                                       [preds[slot.stack.name] for slot in c.slots],
                                       sims if len(sims) == len(c.slots) else None)
        if resolution:
            print_plan_resolution(c, by_name, scale, fc, target_difference / 100)
    raise typer.Exit(2 if invalid else 0)


@app.command()
def predict(stacks: list[str] = typer.Argument(..., help="Stacks to predict (a variant is "
                                               "predicted on its base's nodes)."),
            scale: Scale = typer.Option("full", help="Workload scale: the plan's values (full) "
                                        "or the local/CI sizes (quick)."),
            stacks_dir: Path = typer.Option(STACKS_DIR, "--stacks-dir", file_okay=False,
                                            exists=True,
                                            help="Folder of Pulumi.<stack>.yaml files."),
            json_out: Path = typer.Option(None, "--json", dir_okay=False,
                                          help="Also write the figures to this file (per "
                                          "stack: AIConfigurator's prediction and the "
                                          "simulation record)."),
            mocker_tables: Path = typer.Option(None, "--mocker-tables", file_okay=False,
                                               help="Also write each stack's mocker timing "
                                               "tables (--planner-profile-data .npz, with a "
                                               ".json record) into this folder."),
            simulate: bool = typer.Option(True, "--simulate/--no-simulate",
                                          help="--no-simulate: AIConfigurator's PREDICTED "
                                          "figures alone.")
            ) -> None:
    """SIMULATED per step before anything runs: every step of the stack's plan replayed by
    NVIDIA DynoSim (Dynamo's own scheduler in virtual time, `make engine`) on timing tables
    from AIConfigurator's measured GPU database (`make predictor`): TTFT, ITL, request latency,
    output tok/s, tok/s per GPU and per user, $ per 1M output tokens, the SLA best points, the
    KV router's spread over its seeded runs; on the concurrency sweep AIConfigurator's static
    estimate beside it as a cross-check with the difference, and every way its database
    departs from the stack. Where DynoSim cannot run the stack, it says why and shows the
    PREDICTED figures instead. Exits 2 when neither the simulation nor the predictor runs."""
    from stacks.predict.predict_view import print_simulation
    from stacks.predict.predictor import PredictorUnavailable
    from stacks.predict.predictor import predict as predict_stack
    from stacks.predict.rows import Prediction
    from stacks.predict.simulated import simulated_table
    from workloads.sim.forecast import simulate_stacks

    require_stack_names(stacks, stacks_dir)
    try:
        named = [load_stack(n, stacks_dir) for n in stacks]
        pairs = [(s, load_stack(s.cluster.attach_to, stacks_dir)
                  if s.cluster.attach_to is not None else None) for s in named]
        preds: dict[str, Prediction] = {}
        unavailable = None
        for s, base in pairs:
            try:
                preds[s.name] = predict_stack(s, scale, base)
            except PredictorUnavailable as exc:
                unavailable = exc
            if mocker_tables is not None:
                from stacks.predict.mocker_table import build
                for t in build(s, writable_dir(mocker_tables, "--mocker-tables"), base):
                    console.print(f"{s.name} {t.role}: {t.path} ({t.record['source']}, "
                                  f"sha256 {t.record['sha256'][:12]})", markup=False)
        records = simulate_stacks(pairs, scale, preds) if simulate else {
            s.name: {"steps": {}, "not_simulated": "simulation off: --no-simulate"}
            for s, _ in pairs}
    except StackError as exc:
        stack_error(exc)
    except PredictorUnavailable as exc:
        fail(exc, code=2)
    if unavailable is not None:
        console.print(f"predictions: {unavailable}; no cross-check", markup=False)
        if not any(r.get("steps") for r in records.values()):
            fail(unavailable, code=2)
    for s, base in pairs:
        print_simulation(console, simulated_table(s, base, scale, records[s.name]),
                         records[s.name], preds.get(s.name))
    if json_out is not None:
        json_out.write_text(json.dumps([
            {**(preds[s.name].as_record() if s.name in preds else {"stack": s.name}),
             "simulation": records[s.name]} for s, _ in pairs], indent=2) + "\n")


@app.command()
def bands(refresh: bool = typer.Option(False, "--refresh",
                                       help="First re-estimate AIConfigurator's own measured "
                                       "rows with the installed predictor (~25 min of one "
                                       "core) and rewrite stacks/predict/silicon_estimates.json."),
          recalibrate: bool = typer.Option(False, "--recalibrate",
                                           help="First recompute the snapshot's stored "
                                           "calibration from its rows (after a change to the "
                                           "band rule; no predictor needed).")
          ) -> None:
    """The error bands every PREDICTED figure carries: AIConfigurator's own measured vLLM rows
    (its silicon_sample.csv) against its estimate at each row's exact configuration, and the
    bands' leave-one-out calibration per group (system, precision, mode): how often the band
    built without a row covers that row's measured value. Exits 2 when --refresh finds no
    predictor."""
    from stacks.predict.bands import NEAREST, QUANTILES, load
    from stacks.predict.predictor import PredictorUnavailable
    from stacks.predict.silicon_refresh import calibration_lines, no_band_reasons
    from stacks.predict.silicon_refresh import recalibrate as recalibrate_snapshot
    from stacks.predict.silicon_refresh import refresh as refresh_snapshot

    if refresh:
        try:
            meta = refresh_snapshot(progress=lambda done, n: console.print(
                f"estimated {done} of {n} rows", markup=False))
        except PredictorUnavailable as exc:
            fail(exc, code=2)
        console.print(f"rewrote the snapshot: {meta}", markup=False)
    elif recalibrate:
        console.print(f"recalibrated: {recalibrate_snapshot()['calibration']}", markup=False)
    meta, rows = load()
    console.print(f"{len(rows)} rows estimated by AIConfigurator {meta['aiconfigurator']} "
                  f"(silicon_sample.csv sha256 {meta['silicon_sample_sha256'][:12]}; left out: "
                  f"{meta['excluded']}); band = measured/predicted {QUANTILES[0]:.0%}-"
                  f"{QUANTILES[1]:.0%} quantiles of the {NEAREST} nearest rows", markup=False)
    for borrowed, title in ((False, "held-out row, band from its own GPU's other rows"),
                            (True, "held-out row, band from other GPUs' rows only "
                                   "(as for the A100 and the L40S)")):
        console.print(f"\nleave-one-out: {title}", markup=False)
        for line in calibration_lines(rows, borrowed):
            console.print(line, markup=False)
    for metric in ("ttft", "itl"):
        for reason, n in sorted(no_band_reasons(rows, metric).items()):
            console.print(f"{metric} held out with no band ({n}): {reason}", markup=False)


@app.command()
def render(stack: str = typer.Argument(..., help="Stack name (stacks/Pulumi.<name>.yaml)."),
           out: Path = typer.Option(Path("rendered"), "--out",
                                    help="Folder for <out>/<stack>/*.yaml.")) -> None:
    """Write the Kubernetes objects, Helm releases and AWS resources `pulumi up` would create.

    Runs the Pulumi program offline (mocks: no cloud, no Pulumi CLI). Exits 2 and lists every
    problem when the stack fails pre-flight (nothing is rendered then).
    """
    from stacks.render.write import render_stack, type_counts  # pulumi is only needed here

    require_stack_names([stack])
    try:
        result = render_stack(stack, writable_dir(out))
    except StackError as exc:
        stack_error(exc)
    counts = type_counts(result.run)
    t = Table(title=f"{stack}: {sum(counts.values())} resources -> {result.folder}",
              title_justify="left")
    t.add_column("type")
    t.add_column("count", justify="right")
    for kind, n in sorted(counts.items()):
        t.add_row(kind, str(n))
    console.print(t)


@app.command()
def explore(base: str = typer.Argument(..., help="A base stack: every configuration its node "
                                       "groups hold."),
            slo: list[str] = typer.Option(None, "--slo", help="An SLO to rank by (repeat it; "
                                          f"default all: {', '.join(SLO_NAMES)})."),
            top: int = typer.Option(3, "--top", min=1, help="K: the top K per workload and "
                                    "SLO, and what --write writes."),
            write_: bool = typer.Option(False, "--write", help="Write the sweep's top K as the "
                                        "base's variant stack files, Pulumi.explore-<base>-<id>"
                                        ".yaml, each with its operating points as sweep steps."),
            scale: Scale = typer.Option("full", help="Workload scale (full: the plan's)."),
            exhaustive: bool = typer.Option(False, "--exhaustive", help="Simulate every "
                                            "candidate (no pruning by bounds)."),
            out: Path = typer.Option(None, "--out", file_okay=False, help="Folder for "
                                     "explore.md, .csv and the plot (default "
                                     "reports/out/explore-<base>)."),
            calibrate: list[Path] = typer.Option(
                None, "--calibrate", exists=True, help="A measured run or campaign directory "
                "(repeat it): fit prefill and decode factors per (GPU, TP, role) to its steps "
                "(as `python -m workloads calibrate`), show them with their residual error, and "
                "rank the candidates on the calibrated tables."),
            stacks_dir: Path = typer.Option(STACKS_DIR, "--stacks-dir", file_okay=False,
                                            exists=True, help="Folder of stack files.")) -> None:
    """SIMULATED before anything is paid for: every configuration the base's node groups hold
    (precision, TP, replicas, prefill/decode splits, a decode tier on another GPU, router, host
    offload), pre-flight's refusals listed with their rule, the rest simulated on the plan's
    workloads with NVIDIA DynoSim (the operating point per SLO by bracketing the concurrency),
    ranked by $ per 1M output tokens with the Pareto frontier, and the plan's four questions.
    Cached in .cache/explore. Needs `make engine` and `make predictor` (timing tables)."""
    from stacks.explore.command import command
    from stacks.predict.predictor import PredictorUnavailable
    from workloads.sim.calibrate import calibrate as fit_runs
    from workloads.sim.calibrate_view import factors_table, summary_lines
    from workloads.sim.on_base import BaseSimulator
    from workloads.sim.replay import SimUnavailable

    require_stack_names([base], stacks_dir)
    try:
        b = load_stack(base, stacks_dir)
        folder = writable_dir(out or STACKS_DIR.parent / "reports" / "out" / f"explore-{base}")
        sim = BaseSimulator.for_base(b, scale)
        try:
            lines = None
            if calibrate:
                sim.calibration = fit_runs(calibrate, stacks_dir, replayer=sim.replayer)
                console.print(factors_table(sim.calibration))
                lines = summary_lines(sim.calibration)
            command(b, sim, slo, top, exhaustive, folder, stacks_dir if write_ else None,
                    console, lines)
        finally:
            sim.close()
    except StackError as exc:
        stack_error(exc)
    except (ValueError, PredictorUnavailable, SimUnavailable) as exc:   # FitError is one
        fail(exc, code=2)


def main() -> int:
    return run_cli(app, "python -m stacks")


if __name__ == "__main__":
    sys.exit(main())
