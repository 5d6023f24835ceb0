"""`python -m workloads run <stack>` (and `plan`, `account`, `campaign`, `bench`): the load
phase's one CLI."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click
import typer
from rich.console import Console
from rich.table import Table

from stacks.cli import fail, require_stack_names, run_cli, stack_error
from stacks.config.loader import STACKS_DIR, StackError
from stacks.config.workload_config import Scale
from workloads.manifest import check_run_id
from workloads.steps import WORKLOADS, plan

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Drive AIPerf workloads against a stack and record everything.")
console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

_ONLY = typer.Option(None, "--only", click_type=click.Choice(WORKLOADS),
                     help="Run only this workload (repeat the option for several).")
_SCALE = typer.Option("quick", "--scale", click_type=click.Choice(["quick", "full"]),
                      help="quick (local/CI sizes) or full (the plan's values).")
_STACKS_DIR = typer.Option(STACKS_DIR, "--stacks-dir", exists=True, file_okay=False,
                           help="Folder of Pulumi.<stack>.yaml files.")


def _run_id(value: str | None) -> str | None:
    try:
        return None if value is None else check_run_id(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _check_scale(scale: str) -> None:
    if scale not in ("quick", "full"):
        console.print(f"--scale must be quick or full, not '{scale}'")
        raise typer.Exit(2)


@app.command()
def run(stack: str = typer.Argument(..., help="Stack name (stacks/Pulumi.<name>.yaml)."),
        scale: Scale = _SCALE,
        only: list[str] = _ONLY,
        repeat: int = typer.Option(None, "--repeat", min=1, max=20,
                                   help="Repeats per step (default: workloads.repeats)."),
        run_id: str = typer.Option(None, "--run-id", callback=_run_id,
                                   help="Resume this run, a folder name under "
                                   "runs/<stack>/ (default: a new UTC timestamp)."),
        runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", file_okay=False,
                                      help="Where runs/<stack>/<run-id>/ are written."),
        stacks_dir: Path = _STACKS_DIR,
        outputs: Path = typer.Option(
            None, "--outputs", exists=True, dir_okay=False,
            help="aws stacks: `pulumi stack output --json --show-secrets` saved to a file "
            "readable by you only (default: $DYNAMO_BENCH_STACK_OUTPUTS, else the Pulumi CLI)."),
        no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar or "
                                         "progress lines."),
        target: str = typer.Option(
            "stack", "--target", click_type=click.Choice(["stack", "sim"]),
            help="stack: the stack's own target (local engine or the deployed cluster); sim: "
            "replay every step through NVIDIA DynoSim (Dynamo 1.6.1's offline replay, virtual "
            "time, no GPU) and record it as a run whose figures say SIMULATED (run id "
            "sim-<UTC> by default).")) -> None:
    """Pre-flight, start the target, smoke test, warm up, run every step, stop.

    Exit codes: 0 all steps complete, 1 a step failed or the engine broke, 2 invalid stack or
    options, 130 interrupted.
    """
    from workloads.runner import RunOptions
    from workloads.runner import run as run_stack
    from workloads.targets.base import TargetError

    _check_scale(scale)
    opts = RunOptions(stack=stack, scale=scale, only=only or None, repeat=repeat,
                      run_id=run_id, runs_dir=runs_dir, stacks_dir=stacks_dir,
                      show_progress=not no_progress, outputs_file=outputs,
                      simulate=target == "sim")
    try:
        result = run_stack(opts, console)
    except StackError as exc:
        stack_error(exc)
    except (ValueError, TargetError) as exc:
        console.print(f"error: {exc}", markup=False)
        raise typer.Exit(2) from None
    raise typer.Exit({"complete": 0, "interrupted": 130}.get(result.status, 1))


@app.command("plan")
def show_plan(stack: str = typer.Argument(..., help="Stack name (stacks/Pulumi.<name>.yaml)."),
              scale: Scale = _SCALE, only: list[str] = _ONLY,
              repeat: int = typer.Option(None, "--repeat", min=1, max=20),
              stacks_dir: Path = _STACKS_DIR) -> None:
    """List the steps a run would make, with their sizes and estimated times."""
    from stacks.config.loader import load_stack

    _check_scale(scale)
    try:
        cfg = load_stack(stack, stacks_dir)
        steps = plan(cfg, scale, only or None, repeat)
    except StackError as exc:
        stack_error(exc)
    except ValueError as exc:
        console.print(str(exc), markup=False)
        raise typer.Exit(2) from None
    t = Table(title=f"{stack} at {scale} scale")
    for col in ("step", "concurrency", "rows", "duration s", "cold", "ETA s"):
        t.add_column(col, justify="left" if col == "step" else "right")
    for s in steps:
        t.add_row(s.id, str(s.concurrency), str(s.params.get("rows", "")),
                  f"{s.duration_s:g}" if s.duration_s else "-", "yes" if s.cold else "",
                  f"{s.eta_s:.0f}")
    Console().print(t)
    Console().print(f"total ETA ~{sum(s.eta_s for s in steps) / 60:.1f} min (plus start-up)")


@app.command()
def account(stack: str = typer.Argument(..., help="Stack name (stacks/Pulumi.<name>.yaml)."),
            stacks_dir: Path = _STACKS_DIR) -> None:
    """Ask the AWS account (boto3's credentials) what `pulumi up` of this stack would meet:
    its types offered in the pinned zones (else refused, exit 2), zone IDs EKS refuses, vCPU
    and VPC / internet gateway / Elastic IP quotas (warnings with needed, in use and quota).
    A variant is asked with its base. Without credentials it says so and exits 0."""
    from stacks.config.loader import load_stack
    from workloads.targets.aws.account_facts import campaign_stacks, check_account

    try:
        cfg = load_stack(stack, stacks_dir)
        base = (load_stack(cfg.cluster.attach_to, stacks_dir)
                if cfg.cluster.attach_to is not None else cfg)
    except StackError as exc:
        stack_error(exc)
    if cfg.target != "aws":
        fail(f"{stack} is not an aws stack: there is no account to ask")
    problems, notes = check_account(campaign_stacks(base, [cfg] if cfg is not base else []))
    for note in notes:
        console.print(note, markup=False)
    for p in problems:
        console.print(f"{stack}: {p}", markup=False)
    raise typer.Exit(2 if problems else 0)


@app.command()
def campaign(
        base: str = typer.Argument(..., help="The base stack (its variants share its "
                                   "cluster), or `local` for local stacks."),
        variants: list[str] = typer.Argument(None, help="Variants to run (default: every "
                                             "stack attached to the base, and every "
                                             "<variant>.<base> it runs; for `local`, every "
                                             "local stack)."),
        scale: Scale = _SCALE,
        only: list[str] = typer.Option(
            None, "--only", metavar="[STACK:]WORKLOAD",
            help="Run only this workload: in every variant (WORKLOAD), or in one variant "
            "(STACK:WORKLOAD, e.g. local-agg-kv:multi_turn); repeat the option for several. A "
            "variant not named runs every workload it enables."),
        run_id: str = typer.Option(None, "--run-id", callback=_run_id,
                                   help="Resume this campaign, a plain folder name (default: "
                                   "a new UTC timestamp); each run is runs/<stack>/<run-id>."),
        runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", file_okay=False,
                                      help="Where the runs and runs/campaigns/ are written."),
        stacks_dir: Path = _STACKS_DIR,
        backend_url: str = typer.Option(None, "--backend-url", help="Pulumi state backend "
                                        "(default: $PULUMI_BACKEND_URL, else file://~)."),
        destroy_base: bool = typer.Option(False, "--destroy-base", help="Destroy the base "
                                          "when every variant is done (default: leave it up "
                                          "with its GPU groups at zero)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, run nothing."),
        predict_: bool = typer.Option(True, "--predict/--no-predict",
                                      help="Forecast (budget, load windows, scale-ahead) each "
                                      "step at its simulated figures (DynoSim, `make "
                                      "engine`), else its predicted ITL (AIConfigurator, "
                                      "`make predictor`); --no-predict: every step at "
                                      "cost.assumedItlMs."),
        simulate: bool = typer.Option(True, "--simulate/--no-simulate",
                                      help="--no-simulate: the forecast at AIConfigurator's "
                                      "predicted ITL alone."),
        no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar or "
                                         "progress lines.")) -> None:
    """Run a base's variants as one scheduled campaign.

    Variants on disjoint GPU node groups run side by side; variants with identical workers
    run back to back on the same workers (rendered worker specs compared byte for byte), only
    their frontend replaced, each with a new prompt epoch; no cold restart where the
    deployment is already cold and every step's hash ids are fresh; GPU groups no scheduled
    variant needs are scaled to zero and back ahead of need through the base's
    dynamo-bench:nodeGroupSizes (a managed node group's desired size, an Auto Mode NodePool's
    limits); a let-go node bills until the cluster no longer lists it. Every deployment goes
    through Pulumi's Automation API (local backend by default). Refused (exit 2) when a
    stack fails pre-flight or the forecast (each step at its simulated figures, else its
    predicted ITL, as `stacks plan` prices it) exceeds the base's cost.campaignBudgetUsd. The
    record is runs/campaigns/<base>/<run-id>/campaign.json; the same --run-id resumes, never
    redoing a finished variant. Exit codes: 0 complete, 1 a variant failed, 2 refused, 130
    interrupted.
    """
    from workloads.campaign.run import CampaignOptions, CampaignRefused, run_campaign

    opts = CampaignOptions(base=base, variants=variants or [], scale=scale, only=only or [],
                           run_id=run_id, runs_dir=runs_dir, stacks_dir=stacks_dir,
                           backend_url=backend_url,
                           destroy_base=destroy_base, dry_run=dry_run, predict=predict_,
                           simulate=simulate, show_progress=not no_progress)
    try:
        result = run_campaign(opts, console)
    except (CampaignRefused, StackError, ValueError) as exc:
        console.print(f"campaign refused:\n{exc}", markup=False)
        raise typer.Exit(2) from None
    raise typer.Exit({"complete": 0, "planned": 0, "interrupted": 130}.get(result.status, 1))


@app.command()
def bench(concurrencies: str = typer.Option("1,2,4,8,16,32,64", "--concurrencies",
                                           help="Comma-separated concurrencies."),
          stack: str = typer.Option("local-agg", "--stack"),
          duration_s: float = typer.Option(15.0, "--duration"),
          out: Path = typer.Option(None, "--out", help="Also write the table (markdown).")) -> None:
    """Client vs engine timing on the local engine, c = 1..64 (a measurement, not a test)."""
    from workloads.bench import main as bench_main

    try:
        levels = [int(c) for c in concurrencies.split(",")]
    except ValueError:
        fail(f"--concurrencies {concurrencies}: give whole numbers separated by commas, "
             "e.g. 1,2,4")
    require_stack_names([stack])
    bench_main(levels, stack, duration_s, out, console)


@app.command()
def calibrate(
        paths: list[Path] = typer.Argument(..., help="Measured runs: run directories "
                                           "(runs/<stack>/<run-id>) or campaign directories "
                                           "(runs/campaigns/<base>/<run-id>: every variant's "
                                           "run)."),
        stacks_dir: Path = _STACKS_DIR,
        out: Path = typer.Option(None, "--out", file_okay=False,
                                 help="Where the calibrated tables and the record go (default: "
                                 "<mocker tables folder>/calibrated, beside the tables they "
                                 "scale).")) -> None:
    """Fit prefill and decode scale factors for the simulation's timing tables to measured runs.

    Each timing table (AIConfigurator's, per GPU system, TP and worker role: the ones `--target
    sim` and `stacks explore` simulate on) gets the factors by which its prefill and decode
    times must be multiplied for DynoSim's replay of every measured step (the same dataset,
    seed, concurrency, ramp, warm-up, grace and duration, from the step record) to show what
    the Dynamo frontend measured (its request trace: TTFT from the dispatch to the worker,
    and per-request mean ITL, each step's lower quartile; never the client's figures). The fit
    iterates the replay: decode from the ITL of every step; prefill from the TTFT of the
    steps whose TTFT is mostly their own prefill, with a per-run intercept for the transport
    time no table models. It prints each factor with its residual error and every step
    against its replay, and writes the calibrated tables (each with its source table's
    sha256, the factors and the runs) and calibration-<digest>.json. Simulated runs
    (`--target sim`) are refused. Exit codes: 0 fitted, 2 bad input or nothing to fit.
    """
    from stacks.predict.table_scale import TableError
    from workloads.sim.calibrate import calibrate as fit_runs
    from workloads.sim.calibrate_fit import FitError
    from workloads.sim.calibrate_view import render
    from workloads.sim.measured import NotMeasured
    from workloads.sim.replay import SimUnavailable

    try:
        cal = fit_runs(paths, stacks_dir=stacks_dir, folder=out)
    except StackError as exc:
        stack_error(exc)
    except (NotMeasured, FitError, TableError, SimUnavailable) as exc:
        console.print(f"calibrate: {exc}", markup=False)
        raise typer.Exit(2) from None
    render(cal, Console(width=None if sys.stdout.isatty() else 200))


def main() -> int:
    # Ctrl-C must reach a run or a campaign even when this process was started from a script's
    # background job (`cmd &` without job control): it inherits SIGINT ignored, Python keeps
    # it so, and the interrupt would be lost while the run goes on to exit 0.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return run_cli(app, "python -m workloads")


if __name__ == "__main__":
    sys.exit(main())
