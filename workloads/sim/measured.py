"""Measured steps read back from run records, for calibration (workloads/sim/calibrate.py).

A run directory (runs/<stack>/<run-id>/, its manifest.json) or a campaign's
(runs/campaigns/<base>/<run-id>/, its campaign.json naming each variant's run) gives, per
completed step, what the simulation needs to replay that very step (its AIPerf invocation
rebuilt from the step record: the dataset file the run wrote, its seed, concurrency, warm-up,
ramp, duration and grace; replayed by workloads/sim/target.py replay_inputs as the simulation
target replays a step) and what the serving side measured of it, per request, from the Dynamo
frontend's own request trace (request_trace.jsonl), never the client's (AIPerf's TTFT carries
the first-data stall of a kept-alive connection, which no simulation has: ../shared/design.md):
- ITL: avg_itl_ms, the mean gap between output tokens (first token to finish / (osl - 1)).
- TTFT: ttft_ms minus prefill_wait_time_ms where the trace has it, i.e. prefill_time_ms, from
  the router's dispatch to the worker to the first token. Dynamo's RequestTracker
  (lib/llm/src/protocols/common/timing.rs) times prefill_wait_time_ms from the request's
  receipt to `record_prefill_start`, which the router calls "right before pushing to backend"
  (lib/llm/src/kv_router/push_router.rs), so it is the frontend's own work (tokenization,
  templating, routing), which grows with the prompt: in a known-truth rehearsal on the 2-core
  machine (Dynamo 1.6.1, tests/test_calibrate_engine.py, one c1 step each) its median was
  2.0 ms at 1,038 prompt tokens and 7.7 ms at 4,110, where dispatch to first token took 24.6
  and 70.5 ms. No timing table models it, and a constant intercept cannot absorb a term that
  grows with the prompt as prefill does: left in, it put another such rehearsal's prefill
  factor (truth x0.8) at 0.862, taken out at 0.803. What is left (the request's and the first
  token's transport: 1.5 ms there) is the fit's intercept (calibrate_fit.py). A trace
  without the field gives ttft_ms, and the step says so.

Refused, naming the fix: a simulated run (`--target sim`, manifest target_info.kind "sim": its
figures are the simulation's own), a path that is neither kind of directory, a dataset whose
bytes are not the ones the step sent. Skipped with the reason: a step that did not complete, a
step without the frontend's records.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from stacks.config.loader import STACKS_DIR, StackError
from stacks.config.schema import StackConfig
from stacks.preflight.run import load_base
from workloads.aiperf_args import AiperfInvocation
from workloads.grace import MIN_GRACE_S
from workloads.request_trace import STEP_FILE
from workloads.routing_evidence import request_of
from workloads.sim.target import KIND as SIM_KIND

CAMPAIGN_FILE = "campaign.json"
DISPATCHED = "dispatch to first token (frontend ttft_ms - prefill_wait_time_ms)"
RECEIVED = "receipt to first token (frontend ttft_ms; its trace lacks prefill_wait_time_ms)"
MANIFEST = "manifest.json"


class NotMeasured(ValueError):
    """A path that holds no measured run: the message says what it is and what to pass."""


@dataclass(frozen=True)
class MeasuredStep:
    step: str
    invocation: AiperfInvocation    # what AIPerf sent (the replay's input)
    warm: bool                      # a warm pass after its cold pass (workloads/steps.py)
    ttft_ms: tuple[float, ...]      # the frontend's, per request (receipt to first token)
    itl_ms: tuple[float, ...]       # the frontend's mean gap per request (> 1 output token)
    # dispatch to the worker to first token, per request (empty: the trace lacks
    # prefill_wait_time_ms for some request)
    dispatched_ttft_ms: tuple[float, ...] = ()

    @property
    def ttft_basis(self) -> str:
        return DISPATCHED if self.dispatched_ttft_ms else RECEIVED

    @property
    def fit_ttft_ms(self) -> tuple[float, ...]:
        """The TTFTs the fit compares with DynoSim's: from dispatch where the trace says when."""
        return self.dispatched_ttft_ms or self.ttft_ms


@dataclass
class MeasuredRun:
    run_dir: Path
    stack: StackConfig
    base: StackConfig | None
    target: str                     # manifest target_info.kind: local | aws
    steps: list[MeasuredStep] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (step, why)

    @property
    def name(self) -> str:
        return f"{self.run_dir.parent.name}/{self.run_dir.name}"


def run_dirs(paths: list[Path]) -> list[Path]:
    """The run directories `paths` name: a run directory itself, or each variant's run of a
    campaign directory (its record's run_dir, else runs/<variant>/<run-id> beside the
    campaigns folder). Order kept, duplicates dropped."""
    out: list[Path] = []
    for path in paths:
        if (path / MANIFEST).exists():
            found = [path]
        elif (path / CAMPAIGN_FILE).exists():
            found = campaign_runs(path)
        else:
            raise NotMeasured(f"{path}: neither a run directory (no {MANIFEST}) nor a campaign "
                              f"directory (no {CAMPAIGN_FILE}); pass runs/<stack>/<run-id> or "
                              "runs/campaigns/<base>/<run-id>")
        out += [p.resolve() for p in found if p.resolve() not in out]
    return out


def campaign_runs(path: Path) -> list[Path]:
    record = json.loads((path / CAMPAIGN_FILE).read_text())
    runs_dir = path.resolve().parents[2]         # runs/campaigns/<base>/<id> -> runs
    out = []
    for slot in record["plan"]["slots"]:
        state = record.get("slots", {}).get(slot["name"], {})
        recorded = Path(state["run_dir"]) if state.get("run_dir") else None
        here = runs_dir / slot["name"] / path.name
        run = recorded if recorded is not None and (recorded / MANIFEST).exists() else here
        if (run / MANIFEST).exists():
            out.append(run)
    if not out:
        raise NotMeasured(f"{path}: the campaign has no variant run yet (no "
                          f"runs/<variant>/{path.name}/{MANIFEST}); run it first")
    return out


def invocation(record: dict, run_dir: Path, stack: StackConfig) -> AiperfInvocation:
    """The AIPerf invocation a completed step record describes (the fields the runner's
    run_step recorded from it: workloads/step_exec.py), with its dataset checked against the
    recorded sha256. The URL and tokenizer are not replayed: placeholders."""
    dataset = record["dataset"]
    path = run_dir / dataset["path"]
    if not path.exists():
        raise NotMeasured(f"{run_dir.name}: step {record['id']}'s dataset {path} is missing: "
                          "the run record is incomplete, calibrate from a whole run directory")
    if hashlib.sha256(path.read_bytes()).hexdigest() != dataset["sha256"]:
        raise NotMeasured(f"{path}: its bytes are not the ones step {record['id']} sent "
                          f"(sha256 {dataset['sha256'][:12]} recorded): restore the run's "
                          "dataset")
    params = record.get("params") or {}
    warmup = int(record.get("aiperf_warmup_requests") or 0)
    return AiperfInvocation(
        model=stack.model.name, url="recorded://", tokenizer=stack.model.id, input_file=path,
        request_count=int(dataset["rows"]) - warmup, warmup_requests=warmup,
        concurrency=int(record["concurrency"]), seed=int(record["seed"]),
        artifact_dir=run_dir / record.get("artifact_dir", record["id"]),
        duration_s=record.get("duration_s"),
        grace_period_s=float((record.get("grace") or {}).get("grace_period_s", MIN_GRACE_S)),
        concurrency_ramp_s=(record.get("ramp") or {}).get("concurrency_ramp_s"),
        block_size=int(params.get("block_size", 512)),
        fixed_schedule=params.get("schedule") == "fixed")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def frontend_figures(lines: list[str]) -> tuple[list[float], list[float], list[float]]:
    """Per request of the frontend's trace: TTFT from receipt, the mean ITL of those with more
    than one output token (avg_itl_ms), and TTFT from dispatch (ttft_ms -
    prefill_wait_time_ms; empty unless every request has both)."""
    ttft, itl, dispatched = [], [], []
    for line in lines:
        req = request_of(line)
        if req is None or not _number(req.get("ttft_ms")):
            continue
        ttft.append(float(req["ttft_ms"]))
        if _number(req.get("prefill_wait_time_ms")):
            dispatched.append(float(req["ttft_ms"]) - float(req["prefill_wait_time_ms"]))
        if (req.get("output_tokens") or 0) > 1 and _number(req.get("avg_itl_ms")):
            itl.append(float(req["avg_itl_ms"]))
    return ttft, itl, dispatched if len(dispatched) == len(ttft) else []


def read_run(run_dir: Path, stacks_dir: Path = STACKS_DIR) -> MeasuredRun:
    """A measured run's completed steps with the frontend's figures; a simulated run refused.
    An attached variant's base is read from `stacks_dir` (its GPUs decide the tables)."""
    manifest = json.loads((run_dir / MANIFEST).read_text())
    kind = (manifest.get("target_info") or {}).get("kind") or manifest.get("target")
    if kind == SIM_KIND:
        raise NotMeasured(f"{run_dir}: a simulated run (--target sim): its figures are DynoSim's "
                          "own; calibrate from runs measured on the local engine or a cluster")
    stack = StackConfig.model_validate(manifest["stack_config"])
    try:
        base = load_base(stack, stacks_dir)
    except StackError as exc:
        raise NotMeasured(f"{run_dir}: {exc}") from None
    run = MeasuredRun(run_dir, stack, base, str(kind))
    for step_id, record in manifest.get("steps", {}).items():
        if record.get("status") != "complete":
            run.skipped.append((step_id, f"status {record.get('status')}"))
            continue
        trace = run_dir / record.get("artifact_dir", step_id) / STEP_FILE
        lines = trace.read_text().splitlines() if trace.exists() else []
        ttft, itl, dispatched = frontend_figures(lines)
        if not ttft:
            run.skipped.append((step_id, "no frontend request trace (calibration reads the "
                                         "frontend's TTFT; the client's carries its "
                                         "first-data stall)"))
            continue
        run.steps.append(MeasuredStep(step_id, invocation(record, run_dir, stack),
                                      bool((record.get("params") or {}).get("warm_after")),
                                      tuple(ttft), tuple(itl), tuple(dispatched)))
    return run
