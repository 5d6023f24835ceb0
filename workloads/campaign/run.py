"""`python -m workloads campaign`: plan (refusing what cannot run), then execute, then measure.

Before anything is created: every stack passes pre-flight; on AWS the schedule is made with
the rendered worker specs (identity.py), its forecast must fit the base's
`cost.campaignBudgetUsd`, and the Pulumi CLI and a local backend passphrase must be there.
The record goes to `runs/campaigns/<base>/<run-id>/campaign.json` (`local` is the base of a
local campaign); the runs themselves to `runs/<stack>/<run-id>/` as `workloads run` writes them.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.console import Console
from rich.table import Table

from stacks.catalog.eks_versions import today
from stacks.config.loader import (
    STACKS_DIR,
    StackError,
    all_stack_names,
    derived_stack_names,
    load_stack,
)
from stacks.config.schema import StackConfig
from stacks.config.workload_config import WORKLOAD_NAMES, Scale
from stacks.plan.campaign_cost import base_campaign, budget_problems
from stacks.plan.schedule import gpu_groups
from stacks.preflight.run import consult_engine, engine_problem, first_time, require_valid
from stacks.sizing.step_itl import ForecastItl
from workloads.campaign.automation import PulumiError, PulumiStacks
from workloads.campaign.cpu_room import cpu_room_problems
from workloads.campaign.engine import Campaign
from workloads.campaign.identity import local_same_workers, rendered_same_workers
from workloads.campaign.plan import aws_plan, local_plan
from workloads.campaign.state import CampaignState
from workloads.campaign.timeline import measure
from workloads.model_folder import default_hf_home
from workloads.runner import REPO
from workloads.targets.aws.k8s_client import Clock

if TYPE_CHECKING:  # imported where used, at run time: each platform's libraries load lazily
    from workloads.campaign.platform_aws import AwsPlatform
    from workloads.campaign.platform_local import LocalPlatform

LOCAL = "local"


class CampaignRefused(ValueError):
    """The campaign cannot start (exit 2): every reason, each with its fix."""


@dataclass
class CampaignOptions:
    """`base` (a base stack, or `local`) and its `variants` (default: all), at `scale`; the
    run id is the campaign's and every run's; the rest as `workloads run` takes them."""

    base: str
    variants: list[str] = field(default_factory=list)
    # `--only`: a workload (every variant runs only the named ones) or `stack:workload` (that
    # variant only); a variant not named keeps all its enabled workloads
    only: list[str] = field(default_factory=list)
    dry_run: bool = False
    # the forecast (budget, load windows, scale-ahead) at each step's simulated figures where
    # DynoSim runs the variant, else its predicted ITL where AIConfigurator predicts it
    # (workloads/sim/forecast.py), else cost.assumedItlMs; `simulate` False: predicted only
    predict: bool = True
    simulate: bool = True
    destroy_base: bool = False
    backend_url: str | None = None          # Pulumi's state backend (default: a local one)
    scale: Scale = "quick"
    run_id: str | None = None
    show_progress: bool = True
    stacks_dir: Path = STACKS_DIR
    runs_dir: Path = REPO / "runs"
    hf_home: Path = field(default_factory=default_hf_home)


@dataclass
class CampaignResult:
    path: Path | None
    status: str
    plan: dict
    measured: dict | None = None


def only_by_variant(specs: list[str], names: list[str]) -> dict[str, list[str] | None]:
    """The workloads each variant runs under `--only` (None: all it enables), in plan order."""
    chosen: dict[str, set[str]] = {}
    problems = []
    for spec in specs:
        stack, _, workload = spec.rpartition(":")
        if stack and stack not in names:
            problems.append(f"--only {spec}: {stack} is not a variant of this campaign "
                            f"({', '.join(names)})")
        elif workload not in WORKLOAD_NAMES:
            problems.append(f"--only {spec}: no workload '{workload}': use one of "
                            f"{', '.join(WORKLOAD_NAMES)}, or <stack>:<workload>")
        else:
            for n in [stack] if stack else names:
                chosen.setdefault(n, set()).add(workload)
    if problems:
        raise CampaignRefused("\n".join(problems))
    return {n: [w for w in WORKLOAD_NAMES if w in chosen[n]] if n in chosen else None
            for n in names}


def _restricted(stack: StackConfig, only: list[str] | None) -> StackConfig:
    """The variant as the campaign runs it: only its `--only` workloads enabled (what the
    forecast and the schedule's restarts count); refused when one is disabled in the stack."""
    if not only:
        return stack
    try:
        return stack.model_copy(update={"workloads": stack.workloads.restricted_to(
            only, stack.name)})
    except ValueError as exc:
        raise CampaignRefused(f"--only: {exc}") from None


def _with_only(plan: dict, only: dict[str, list[str] | None]) -> dict:
    for s in plan["slots"]:
        s["only"] = only[s["name"]]
    return plan


def _validated(names: list[str], stacks_dir: Path, *, engine: bool = True) -> dict:
    """Pre-flight of every stack, then (`engine`) the engine's own parsers for all of them at
    once, as `stacks check` and each variant's `pulumi up` ask them
    (stacks.preflight.run.consult_engine): a command line the image refuses stops the campaign
    before anything is deployed."""
    reports, problems = {}, []
    for n in names:
        try:
            reports[n] = require_valid(n, stacks_dir)
        except StackError as exc:
            problems.append(str(exc))
    if problems:
        raise CampaignRefused("\n".join(problems))
    if not engine:
        return reports
    verdict = consult_engine(list(reports.values()))
    problems = [str(StackError(n, r.problems)) for n, r in reports.items() if r.problems]
    if verdict.fatal:
        problems.append(str(engine_problem(verdict)))
    if problems:
        raise CampaignRefused("\n".join(problems))
    if verdict.note and first_time(verdict.note):
        print(f"note: {verdict.note}", file=sys.stderr)
    return reports


def plan_local(opts: CampaignOptions) -> tuple[dict, dict]:
    names = opts.variants or [n for n in all_stack_names(opts.stacks_dir)
                              if _is_local(n, opts.stacks_dir)]
    reports = _validated(names, opts.stacks_dir)
    off = [n for n in names if reports[n].stack.target != "local"
           or reports[n].stack.serving is None]
    if off:
        raise CampaignRefused(f"{', '.join(off)}: not local stacks that serve; a local "
                              "campaign runs target: local stacks only")
    only = only_by_variant(opts.only, names)
    stacks = [_restricted(reports[n].stack, only[n]) for n in names]
    from workloads.campaign.platform_local import LocalPlatform

    argvs = LocalPlatform(reports, run_id="", runs_dir=opts.runs_dir,
                          stacks_dir=opts.stacks_dir, hf_home=opts.hf_home, workdir=Path("."),
                          scale=opts.scale, show_progress=False, console=Console()).argvs
    itls = _itls([(s, None) for s in stacks], opts)
    return _with_only(local_plan(stacks, local_same_workers(argvs), opts.scale, itls),
                      only), reports


def _itls(pairs: list[tuple[StackConfig, StackConfig | None]], opts: CampaignOptions
          ) -> dict[str, ForecastItl]:
    """Each variant's figures per step: simulated, else predicted (none with --no-predict,
    or with neither the engine nor the predictor); what is missing is said on stderr."""
    if not opts.predict:
        return {}
    from workloads.sim.forecast import forecast
    fc = forecast(pairs, opts.scale, simulate=opts.simulate)
    if fc.predictor_note:
        print(f"predictions: {fc.predictor_note}", file=sys.stderr)
    for s, _ in pairs:
        if opts.simulate and (why := fc.not_simulated(s.name)):
            print(f"{s.name}: not simulated ({why}); its steps at "
                  + ("the predicted ITL" if s.name in fc.itls else "cost.assumedItlMs"),
                  file=sys.stderr)
    return fc.itls


def _is_local(name: str, stacks_dir: Path) -> bool:
    try:
        s = load_stack(name, stacks_dir)
    except StackError:
        return False
    return s.target == "local" and s.serving is not None


def plan_aws(opts: CampaignOptions) -> tuple[dict, dict]:
    base = _validated([opts.base], opts.stacks_dir, engine=False)[opts.base].stack
    if not base.is_base or base.is_attached or base.target != "aws":
        raise CampaignRefused(f"{opts.base} is not a base stack (an aws stack with a cluster "
                              "and no serving): name a base, or `local`")
    names = opts.variants or [n for n in [*all_stack_names(opts.stacks_dir),
                                          *derived_stack_names(opts.stacks_dir)]
                              if _attached(n, base.name, opts.stacks_dir)]
    reports = _validated(names, opts.stacks_dir)
    strays = [n for n in names if reports[n].stack.cluster.attach_to != base.name]
    if strays:
        raise CampaignRefused(f"{', '.join(strays)} do not attach to {base.name}")
    only = only_by_variant(opts.only, names)
    variants = [_restricted(reports[n].stack, only[n]) for n in names]
    c = base_campaign(base, variants, opts.scale, on=today(),
                      same=rendered_same_workers(base),
                      itls=_itls([(v, base) for v in variants], opts))
    problems = [*budget_problems(c), *cpu_room_problems(base, c.slots, opts.scale)]
    if problems:
        raise CampaignRefused("\n".join(map(str, problems)))
    return _with_only(aws_plan(c, opts.scale), only), reports


def _attached(name: str, base: str, stacks_dir: Path) -> bool:
    try:
        return load_stack(name, stacks_dir).cluster.attach_to == base
    except StackError:
        return False


def print_plan(plan: dict, console: Console) -> None:
    t = Table(title=f"campaign {plan['base']} ({plan['scale']} scale): the order it runs",
              title_justify="left")
    for col in ("slot", "workloads", "workers", "prompt epoch", "nodes",
                "cold restarts skipped"):
        t.add_column(col)
    for s in plan["slots"]:
        workers = f"kept from {s['kept_from']}" if s["kept_from"] else "new"
        if s["hands_over_to"]:
            workers += f"; kept for {s['hands_over_to']}"
        t.add_row(s["name"], ", ".join(s.get("only") or ["all enabled"]), workers,
                  str(s["prompt_epoch"]),
                  ", ".join(f"{n} x {g}" for g, n in s["nodes"].items()) or "-",
                  str(s["forecast"]["skipped_restarts"]))
    console.print(t)


def check_account(plan: dict, reports: dict, opts: CampaignOptions, console: Console,
                  session: Any = None) -> None:
    """aws.md R3/R7 before the first `pulumi up`: the account's offerings (a type not offered
    in a pinned zone refuses the campaign), quotas and zone IDs (warnings with the numbers);
    without credentials one note says they were not checked."""
    from workloads.targets.aws.account_facts import campaign_stacks
    from workloads.targets.aws.account_facts import check_account as ask

    base = load_stack(plan["base"], opts.stacks_dir)
    variants = [reports[s["name"]].stack for s in plan["slots"] if s["name"] in reports]
    problems, notes = ask(campaign_stacks(base, variants), session)
    for note in notes:
        console.print(note, markup=False)
    if problems:
        raise CampaignRefused("\n".join(map(str, problems)))


def run_campaign(opts: CampaignOptions, console: Console | None = None,
                 stacks: PulumiStacks | None = None, clock=None,
                 aws_session: Any = None) -> CampaignResult:
    console = console or Console(stderr=True)
    local = opts.base == LOCAL
    plan, reports = plan_local(opts) if local else plan_aws(opts)
    print_plan(plan, console)
    if opts.dry_run:
        return CampaignResult(None, "planned", plan)
    if not local and stacks is None:
        stacks = PulumiStacks(opts.backend_url)
        problems = stacks.check_ready()
        if problems:
            raise CampaignRefused("\n".join(problems))
        check_account(plan, reports, opts, console, aws_session)
    elif not local and aws_session is not None:
        # a caller with its own stacks (a fake workspace) asks only the account it passes
        check_account(plan, reports, opts, console, aws_session)
    run_id = opts.run_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = Path(opts.runs_dir).resolve() / "campaigns" / plan["base"] / run_id / "campaign.json"
    state = CampaignState.open(path, plan)
    clock = clock or Clock()
    platform: LocalPlatform | AwsPlatform
    if local:
        from workloads.campaign.platform_local import LocalPlatform
        platform = LocalPlatform(reports, run_id=run_id, runs_dir=opts.runs_dir,
                                 stacks_dir=opts.stacks_dir, hf_home=opts.hf_home,
                                 workdir=path.parent / "engine", scale=opts.scale,
                                 show_progress=opts.show_progress, console=console)
    else:
        from workloads.campaign.platform_aws import AwsPlatform
        assert stacks is not None  # an AWS campaign got its PulumiStacks above
        platform = AwsPlatform(opts.base, stacks, run_id=run_id, runs_dir=opts.runs_dir,
                               stacks_dir=opts.stacks_dir, scale=opts.scale,
                               show_progress=opts.show_progress, console=console)
    campaign = Campaign(plan, state, platform, clock, report=console.print,
                        parallel=not local)
    status = "failed"
    try:
        if not local:
            base = load_stack(opts.base, opts.stacks_dir)
            sizes = state.data["sizes"] or {g.name: 0 for g in gpu_groups(base)}
            with state.action("prepare", clock, sizes=sizes):
                platform.prepare(sizes)
            state.set_sizes(sizes)
        status = campaign.execute()
        if status == "complete" and opts.destroy_base and not local:
            with state.action("destroy base", clock):
                # not local: the platform made above is the AwsPlatform
                cast("AwsPlatform", platform).destroy_base()
    except KeyboardInterrupt:
        status = "interrupted"
        console.print(f"[yellow]campaign interrupted: resume with --run-id {run_id}[/yellow]")
    except PulumiError as exc:
        # the base's own `up` (a scale) failed in the loop: the slots already running ended
        # first (their threads are joined), the record stays valid, and a resume scales again
        status = "failed"
        console.print(f"campaign stopped: {exc}\nthe deployments are as the record says; "
                      f"fix the cause, then resume with --run-id {run_id}", markup=False)
    finally:
        campaign.close()
        measured = measure(state.data, _manifests(plan, opts.runs_dir, run_id))
        state.finish(status, measured)
    print_measured(plan, measured, console)
    console.print(f"campaign {run_id}: [bold]{status}[/bold] ({path})")
    return CampaignResult(path, status, plan, measured)


def _manifests(plan: dict, runs_dir: Path, run_id: str) -> dict[str, dict]:
    out = {}
    for s in plan["slots"]:
        p = Path(runs_dir).resolve() / s["name"] / run_id / "manifest.json"
        if p.exists():
            out[s["name"]] = json.loads(p.read_text())
    return out


def print_measured(plan: dict, measured: dict, console: Console) -> None:
    t = Table(title="billed vs loaded GPU-hours: forecast and measured", title_justify="left")
    for col in ("group", "forecast billed / loaded", "measured billed / loaded"):
        t.add_column(col)
    for g, m in measured["groups"].items():
        f = plan["groups"].get(g, {})
        fc = (f"{f['billed_gpu_hours']:.2f} / {f['loaded_gpu_hours']:.2f}"
              + (f" = {f['billed_gpu_hours'] / f['loaded_gpu_hours']:.2f}x"
                 if f.get("loaded_gpu_hours") else "")
              if "billed_gpu_hours" in f else "n/a")
        t.add_row(g, fc, f"{m['billed_gpu_hours']:.4f} / {m['loaded_gpu_hours']:.4f} = "
                  + (f"{m['billed_over_loaded']:.2f}x" if m["billed_over_loaded"] else "n/a"))
    console.print(t)
