"""`python -m workloads run`: pre-flight, start the target, smoke, warm-up, every step, stop.

Phases are timed in the manifest. A re-run with the same run id skips complete steps and redoes
missing, failed or interrupted ones. Ctrl-C (or SIGTERM) stops the running AIPerf first, then
the engine, and leaves a valid manifest marked `interrupted`. A step that fails while an
engine process has died ends the attempt (the remaining steps would only measure a broken
engine); resuming starts a fresh engine.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from rich.console import Console

from stacks.catalog.service_prices import price_record
from stacks.config.loader import STACKS_DIR, load_stack
from stacks.config.schema import StackConfig
from stacks.config.workload_config import Scale
from stacks.preflight.run import effective_cluster, require_valid
from stacks.sizing.estimate import instance_price
from workloads import predictions, smoke, step_exec
from workloads.manifest import COMPLETE, FAILED, INTERRUPTED, Manifest, versions
from workloads.model_folder import build_model_folder, default_hf_home
from workloads.progress import StepProgress
from workloads.steps import Step, plan
from workloads.targets import make_target
from workloads.targets.base import Target, TargetError

if TYPE_CHECKING:  # make_target imports each target where it is made
    from workloads.targets.local import LocalTarget

REPO = Path(__file__).resolve().parents[1]
# A simulated run's default id starts so: `reports` never takes one for the stack's measured run.
SIM_PREFIX = "sim-"


@dataclass
class RunOptions:
    stack: str
    scale: Scale = "quick"
    only: list[str] | None = None
    repeat: int | None = None
    run_id: str | None = None
    runs_dir: Path = REPO / "runs"
    stacks_dir: Path = STACKS_DIR
    hf_home: Path = field(default_factory=default_hf_home)
    show_progress: bool = True
    # aws stacks: `pulumi stack output --json --show-secrets` saved to a file (default: the
    # DYNAMO_BENCH_STACK_OUTPUTS env, else the Pulumi CLI).
    outputs_file: Path | None = None
    # --- set by a campaign (workloads/campaign/) ---
    # What the campaign records with the run (its id, base, the variant whose workers this one
    # kept); set, the run is part of a campaign: no step restarts the workers (steps.plan).
    campaign: dict | None = None
    # > 0 on workers that served these datasets before: every AIPerf seed is drawn anew.
    prompt_epoch: int = 0
    # A started target the campaign keeps across runs (kept local workers): the runner
    # neither starts nor stops it.
    target: Target | None = None
    # aws: the stack's outputs from the Automation API, and the clock of the target's waits.
    outputs: dict | None = None
    clock: object | None = None
    # "sim": the steps are replayed by DynoSim (workloads/sim/), not sent to the stack's target.
    simulate: bool = False


@dataclass
class RunResult:
    run_dir: Path
    status: str
    steps: dict[str, str]


class Interrupted(KeyboardInterrupt):
    """SIGTERM, turned into the same path as Ctrl-C."""


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises Interrupted for the run's length (SIGINT: the CLI's entry point makes
    sure Ctrl-C raises KeyboardInterrupt, workloads/__main__.py)."""
    if threading.current_thread() is not threading.main_thread():
        yield   # a campaign's concurrent run: its clock raises the interrupt instead
        return

    def handler(signum, frame):
        raise Interrupted(f"signal {signum}")
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def planned_prices(stack: StackConfig, stacks_dir: Path) -> dict[str, dict[str, object]]:
    """Price, source and verification of every instance type of the cluster it runs on."""
    base = load_stack(stack.cluster.attach_to, stacks_dir) \
        if stack.cluster.attach_to is not None else None  # is_attached
    prices = {g.instance_type: price for g in effective_cluster(stack, base).node_groups
              if (price := instance_price(g.instance_type, stack)) is not None}
    return price_record(prices, stack.cost.price_overrides)


def run(opts: RunOptions, console: Console | None = None) -> RunResult:
    console = console or Console(stderr=True)
    report = require_valid(opts.stack, opts.stacks_dir)   # refuse before any load
    stack = report.stack
    if stack.serving is None:
        raise TargetError(f"stack '{stack.name}' serves nothing: nothing to load")
    repeats = opts.repeat if opts.repeat is not None else stack.workloads.repeats
    steps = plan(stack, opts.scale, opts.only, repeats, prompt_epoch=opts.prompt_epoch,
                 campaign=opts.campaign is not None)
    run_id = opts.run_id or (SIM_PREFIX if opts.simulate else "") + time.strftime(
        "%Y%m%dT%H%M%SZ", time.gmtime())
    run_dir = Path(opts.runs_dir).resolve() / stack.name / run_id
    manifest = Manifest.open(run_dir / "manifest.json", stack=stack, run_id=run_id,
                             scale=opts.scale)
    manifest.durable = not opts.simulate
    manifest.data.setdefault("repeats", repeats)
    # The instance prices the run is planned with: a report prices it from these when the
    # catalogue no longer knows a type (reports/records/stackinfo.py,
    # reports/accounting/aws_cli.py).
    manifest.data.setdefault("prices", planned_prices(stack, opts.stacks_dir))
    # What AIConfigurator expects of every step, kept at run start: a report compares measured
    # with predicted from the record alone (reports/comparisons/predicted_vs_measured.py), and a
    # step's grace period is sized from its predicted ITL (workloads/predictions.py).
    base = load_stack(stack.cluster.attach_to, opts.stacks_dir) \
        if stack.cluster.attach_to is not None else None
    if "predictions" not in manifest.data:
        manifest.data["predictions"] = predictions.record(stack, opts.scale, base)
    # What DynoSim makes of the run's own steps, kept at run start beside the prediction (it
    # changes nothing the run sends): a report puts each step's measured figures beside its
    # simulated ones (reports/comparisons/simulated_vs_measured.py). A simulated run is the
    # simulation.
    if "simulation" not in manifest.data and not opts.simulate:
        manifest.data["simulation"] = _simulation(stack, steps, report, base, manifest, opts,
                                                  console)
    if manifest.data["repeats"] != repeats:
        raise ValueError(f"run '{run_id}' was made with {manifest.data['repeats']} repeat(s): "
                         f"resume with --repeat {manifest.data['repeats']} or use a new --run-id")
    cleared = step_exec.clear_partials(run_dir)
    pending = [s for s in steps
               if not step_exec.is_complete(run_dir, s, manifest.step_status(s.id))]
    manifest.begin_attempt(command=sys.argv, only=opts.only, planned=[s.id for s in steps],
                           pending=[s.id for s in pending],
                           cleared_partials=[str(p.relative_to(run_dir)) for p in cleared])
    if opts.campaign is not None:
        manifest.attempt["campaign"] = {**opts.campaign, "prompt_epoch": opts.prompt_epoch}
    console.print(f"[bold]{stack.name}[/bold] run {run_id}: {len(steps)} step(s), "
                  f"{len(steps) - len(pending)} already complete -> {run_dir}")
    if not pending:
        manifest.end_attempt(_final_status(manifest, steps))
        return RunResult(run_dir, manifest.data["status"], _statuses(manifest, steps))

    status, error, target = FAILED, None, None
    with _sigterm_as_interrupt():
        try:
            workdir = run_dir / "engine" / f"attempt-{len(manifest.data['attempts'])}"
            executor: step_exec.StepExecutor | None
            if opts.target is not None:   # a campaign's running target (kept workers)
                target = opts.target
                # a local campaign hands over its LocalTarget (platform_local.py)
                executor = step_exec.LocalAiperf(
                    env={**os.environ, **cast("LocalTarget", target).model.env},
                    host_cores=os.cpu_count() or 1) if stack.target == "local" else None
            elif opts.simulate:
                from workloads.sim.build import make
                target, executor = make(stack, [m.kv_capacity_tokens for m in report.memory],
                                        opts.hf_home, base=base)
            elif stack.target == "local":
                model = build_model_folder(opts.hf_home, stack.model.id, stack.model.arch)
                target = make_target(stack, workdir, model=model, kv_capacity_tokens=[
                    m.kv_capacity_tokens for m in report.memory])
                executor = step_exec.LocalAiperf(env={**os.environ, **model.env},
                                                 host_cores=os.cpu_count() or 1)
            else:   # a deployed stack: AIPerf runs as a Kubernetes Job in its cluster
                target = make_target(stack, workdir, run_id=run_id, stacks_dir=opts.stacks_dir,
                                     outputs_file=opts.outputs_file, outputs=opts.outputs,
                                     clock=opts.clock,
                                     report=lambda msg: console.print(msg, markup=False),
                                     kv_capacity_tokens=[m.kv_capacity_tokens
                                                         for m in report.memory])
                executor = None   # the target's own, once it has started
            _serve_and_load(stack, target, executor, manifest, pending, run_dir, opts, console)
            status = _final_status(manifest, steps)
        except KeyboardInterrupt as exc:   # Ctrl-C, or SIGTERM as Interrupted
            status, error = INTERRUPTED, f"interrupted ({exc or 'Ctrl-C'})"
            console.print("[yellow]interrupted: load stopped, stopping the engine[/yellow]")
        except (TargetError, smoke.SmokeError) as exc:
            status, error = FAILED, str(exc)
            console.print(f"[red]{exc}[/red]")
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            for s in pending:
                step_exec.mark_interrupted(manifest, s.id)
            if target is not None:
                with manifest.phase("shutdown"):
                    if opts.target is None:   # a campaign stops the targets it keeps itself
                        target.stop()
                    manifest.attempt["target"] = target.describe()
                    # The nodes that served the run (a cluster target), for node-hour costs.
                    manifest.merge_nodes(manifest.attempt["target"].get("nodes") or [])
            manifest.end_attempt(status, error)
    console.print(f"run {run_id}: [bold]{status}[/bold] ({run_dir / 'manifest.json'})")
    return RunResult(run_dir, status, _statuses(manifest, steps))


def _simulation(stack: StackConfig, steps: list[Step], report, base: StackConfig | None,
                manifest: Manifest, opts: RunOptions, console: Console) -> dict:
    t0 = time.monotonic()
    from workloads.sim.record import simulate_steps
    record = simulate_steps(stack, steps, [m.kv_capacity_tokens for m in report.memory],
                            base=base, predictions=manifest.data.get("predictions"),
                            hf_home=opts.hf_home)
    took = time.monotonic() - t0       # what the simulation adds to the run, imports included
    if record.get("not_simulated"):
        console.print(f"simulation: not simulated ({record['not_simulated']}; {took:.1f} s)",
                      markup=False)
    else:
        kept = " (kept from an earlier run)" if record["cache"]["kept"] else ""
        console.print(f"simulation: {len(record['steps'])} step(s) {record['label']} in "
                      f"{took:.1f} s{kept}", markup=False)
    return {**record, "run_seconds": round(took, 3)}


def _serve_and_load(stack, target, executor, manifest: Manifest, pending: list[Step],
                    run_dir: Path, opts: RunOptions, console: Console) -> None:
    with manifest.phase("startup") as phase:
        if opts.target is None:
            target.start()
        ep = target.endpoints()
        info = target.describe()
        manifest.data.update(endpoints={"base_url": ep.base_url, "model": ep.model,
                                        "metrics": ep.metrics},
                             target_info=info)
        manifest.attempt["versions"] = versions(info.get("dynamo_version", "unknown"))
        phase["endpoints"] = ep.metrics
        if info.get("startup"):   # a cluster's model load and start-up, apart from the load
            phase["target_startup"] = info["startup"]
    # Before any load: is the deployment what the stack says? A failed check refuses the run
    # with its evidence (workloads/attest/checks.py).
    with manifest.phase("attestation") as phase:
        phase["result"] = step_exec.attest(target, manifest, "before the smoke test")
        console.print(f"attestation: {phase['result']}", markup=False)
    # How this machine reaches the frontend: directly (local), or through the cluster's API
    # server (aws); `None` means plain httpx.
    http = target.http_client() if hasattr(target, "http_client") else None
    if target.kind == "sim":   # nothing serves: the steps are replayed
        for name in ("smoke", "warmup"):
            with manifest.phase(name) as phase:
                phase["result"] = "skipped: DynoSim replays each step; nothing serves"
    else:
        _smoke_and_warm_up(stack, ep, manifest, http)

    ctx = step_exec.StepContext(
        run_dir=run_dir, target=target, executor=executor or target.step_executor(),
        tokenizer=stack.model.id,
        error_rate_threshold=stack.workloads.error_rate_threshold,
        request_timeout_s=stack.workloads.request_timeout_s,
        expected_itl_ms=stack.cost.assumed_itl_ms,
        expected_itl_source=predictions.ASSUMED_SOURCE,
        predictions=manifest.data.get("predictions"),
        tokenizer_revision=stack.model.revision,
        tokenizer_trust_remote_code=stack.model.trust_remote_code)
    # a bar in a terminal; in a log or CI one line per step start and end (k/N, elapsed, ETA)
    with StepProgress(console, stack.name, [s.eta_s for s in pending],
                      opts.show_progress) as progress:
        for step in pending:
            progress.start(step.id)
            with manifest.phase(f"step:{step.id}") as phase:
                rec = step_exec.run_step(step, ctx, manifest, progress.tick)
                manifest.end_phase(phase, rec["status"])
            progress.end(rec["status"])
            c = rec["counts"]
            flag = " [yellow]client-bound[/yellow]" if rec["client"]["client_bound"] else ""
            colour = "green" if rec["status"] == COMPLETE else "red"
            progress.console.print(
                f"  [{colour}]{rec['status']:>8}[/{colour}] {step.id}: {c['attempted']} req: "
                f"{c['completed']} completed, {c['failed']} failed, {c['truncated']} "
                f"truncated, {c['cancelled']} cut at the step's end{flag}")
            for why in rec.get("failure_reasons") or []:
                progress.console.print(f"           {why}", markup=False)
            problems = target.problems()
            if problems:
                raise TargetError("engine process died: " + "; ".join(problems) +
                                  f" -> resume with --run-id {run_dir.name}")


def _smoke_and_warm_up(stack, ep, manifest: Manifest, http) -> None:
    try:
        with manifest.phase("smoke") as phase:
            phase["result"] = smoke.smoke_test(ep.base_url, ep.model, client=http)
        with manifest.phase("warmup") as phase:
            phase["result"] = smoke.warm_up(ep.base_url, ep.model,
                                            stack.workloads.warmup_requests, client=http)
    finally:
        if http is not None:
            http.close()


def _statuses(manifest: Manifest, steps: list[Step]) -> dict[str, str]:
    return {s.id: manifest.step_status(s.id) or "missing" for s in steps}


def _final_status(manifest: Manifest, steps: list[Step]) -> str:
    statuses = _statuses(manifest, steps).values()
    return COMPLETE if all(s == COMPLETE for s in statuses) else FAILED
