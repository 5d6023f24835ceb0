"""One step: write its dataset, run the real AIPerf CLI against the target, judge the result.

The step's directory appears only when the step is over: AIPerf writes into
`<step>.partial/`, which is renamed to `<step>/` after the step record (`step.json`) is in
it, so no half-written step ever looks complete. A step directory left from a failed attempt
is moved to `.failed/` first. Ctrl-C stops AIPerf and re-raises.

Where AIPerf runs is the target's business, through a StepExecutor: `LocalAiperf` runs it here
as a subprocess (its whole process group is stopped on Ctrl-C); the aws target runs it as a
Kubernetes Job (workloads/targets/aws/k8s_step.py) and copies its artifacts back into the same
layout.
Either way the judge below reads the same exports.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workloads import aiperf_site, grace, predictions, request_trace, results, stagger, step_warmup
from workloads.aiperf_args import AiperfInvocation, profile_args
from workloads.attest.checks import AttestationRefused
from workloads.datasets import DatasetFile, block_reuse, fit_context, jsonl_bytes, write_jsonl
from workloads.manifest import COMPLETE, FAILED, INTERRUPTED, RUNNING, now
from workloads.outcomes import step_problems
from workloads.saturation import CpuSampler, verdict
from workloads.steps import Step
from workloads.targets.processes import start_process

PARTIAL = ".partial"
# AIPerf gets this long beyond its planned time before the runner stops it as hung.
AIPERF_SLACK_S = 300.0


def aiperf_executable() -> Path:
    return Path(sys.executable).with_name("aiperf")


@dataclass
class Execution:
    """How one AIPerf invocation went, wherever it ran."""

    exit_code: int | None
    cpu: CpuSampler                   # CPU samples of the client (summary over a window)
    wall_s: float
    command: list[str]
    host_cores: int                   # cores the client could use (host, or the Job's CPU request)
    failure: str | None = None        # why the client did not run to its end, if known
    record: dict[str, Any] = field(default_factory=dict)   # where it ran (job, pod, node)


class StepExecutor(Protocol):
    def run(self, step: Step, inv: AiperfInvocation, work: Path,
            on_tick: Callable[[float], None], note: Callable[..., None]) -> Execution:
        """Run AIPerf for `inv`, its artifacts ending up in `work`; `on_tick(elapsed)` reports
        progress, `note(**fields)` adds to the step's manifest record at once."""


def hung_limit_s(step: Step, inv: AiperfInvocation) -> float:
    """When an AIPerf that has not exited is taken for hung: the step's estimate, its duration
    and, for a duration-bounded step, its grace period, plus a fixed slack."""
    grace_s = inv.grace_period_s if inv.duration_s is not None else 0.0
    return step.eta_s + (step.duration_s or 0) + grace_s + AIPERF_SLACK_S


@dataclass
class LocalAiperf:
    """AIPerf as a subprocess on this machine (the local target)."""

    env: dict[str, str]
    host_cores: int

    def run(self, step: Step, inv: AiperfInvocation, work: Path,
            on_tick: Callable[[float], None], note: Callable[..., None]) -> Execution:
        command = [str(aiperf_executable()), *profile_args(inv)]
        note(command=command)
        proc = start_process("aiperf", command, aiperf_site.aiperf_env(self.env),
                             work / "aiperf.log", cwd=work)
        note(aiperf_pid=proc.pid)
        on_tick(0.0)
        sampler = CpuSampler(proc.pid).start()
        t0 = time.monotonic()
        limit = hung_limit_s(step, inv)
        try:
            while proc.popen.poll() is None:
                elapsed = time.monotonic() - t0
                if elapsed > limit:
                    proc.stop()
                    break
                on_tick(elapsed)
                time.sleep(0.5)
        except BaseException:
            # Ctrl-C / SIGTERM: the load stops first; the caller then stops the engine.
            proc.stop()
            sampler.stop()
            raise
        finally:
            proc.stop()  # no-op when it exited; reaps any worker it left behind
        sampler.stop()
        return Execution(proc.popen.returncode, sampler, time.monotonic() - t0, command,
                         self.host_cores)


@dataclass
class StepContext:
    run_dir: Path
    target: Any                       # workloads.targets.Target
    executor: StepExecutor
    tokenizer: str
    error_rate_threshold: float
    request_timeout_s: float
    tokenizer_revision: str | None = None
    tokenizer_trust_remote_code: bool = False
    # The inter-token latency the grace period is sized from (workloads/grace.py): the stack's
    # cost.assumedItlMs, or a prediction where one exists; and where that figure came from.
    expected_itl_ms: float = 25.0
    expected_itl_source: str = "default"
    # the run's predictions (manifest `predictions`, workloads/predictions.py): a step's own
    # predicted ITL, where there is one, is used before expected_itl_ms
    predictions: dict | None = None


def attest(target: Any, manifest, when: str) -> str:
    """Attest the target, keep the record in the manifest (`attestations`) and refuse with the
    evidence when a check failed; returns the attestation's one-line verdict."""
    attestation = target.attest(when)
    manifest.data.setdefault("attestations", []).append({"at": now(), **attestation.record()})
    manifest.save()
    if not attestation.ok:
        raise AttestationRefused(attestation.refusal())
    return attestation.line()


def step_dir(run_dir: Path, step: Step) -> Path:
    return run_dir / step.id


def dataset_path(run_dir: Path, step: Step) -> Path:
    """The step's dataset file. A warm replay sends its cold step's rows with its cold step's
    seed (steps.plan), so it names the cold step's file: AIPerf keys the prompts it builds on
    the input file's name, bytes and seed (aiperf 0.13.0, aiperf/dataset/mmap_cache.py,
    compute_cache_key: input_file_name, input_file_sha256), and so reuses the cold pass's
    prompts instead of building them again (7-16 s of CPU a step on 2 cores)."""
    warm_after = step.params.get("warm_after")
    file_id = step.id.replace(f"/{step.name}", f"/{warm_after}", 1) if warm_after else step.id
    return run_dir / "datasets" / f"{file_id}.jsonl"


def write_dataset(rows: list[dict], path: Path) -> DatasetFile:
    """Write the step's rows; a file already there (a warm replay's cold step, a resumed
    step) is kept, and must hold the same bytes, or a step's recorded dataset would change
    under it."""
    if not path.exists():
        return write_jsonl(rows, path)
    data = path.read_bytes()
    if data != jsonl_bytes(rows):
        raise RuntimeError(f"{path} already holds other rows than this step sends: the warm "
                           "replay's rows differ from its cold step's (a bug in the plan)")
    return DatasetFile(path=path, sha256=hashlib.sha256(data).hexdigest(), rows=len(rows))


def is_complete(run_dir: Path, step: Step, manifest_status: str | None) -> bool:
    record = step_dir(run_dir, step) / "step.json"
    if manifest_status != COMPLETE or not record.exists():
        return False
    try:
        return json.loads(record.read_text()).get("status") == COMPLETE
    except ValueError:
        return False


def clear_partials(run_dir: Path) -> list[Path]:
    """Remove step directories an interrupted attempt left half-written."""
    found = sorted(run_dir.rglob(f"*{PARTIAL}")) if run_dir.exists() else []
    for p in found:
        shutil.rmtree(p, ignore_errors=True)
    return found


def fixed_schedule(step: Step) -> bool:
    """A replayed trace: AIPerf sends its rows at their timestamps."""
    return step.params.get("schedule") == "fixed"


def step_dataset(step: Step) -> tuple[list[dict], dict]:
    """The rows AIPerf gets (fitted to the context limit) and what the run record says of them:
    rows dropped or clipped for exceeding maxModelLen and, for a reuse-shaped trace, the block
    reuse the rows really carry (what an unbounded cache would hit)."""
    rows = step.rows()
    record: dict = {}
    if step.max_model_len is not None:
        rows, fit = fit_context(rows, step.max_model_len)
        record["context_limit"] = fit.as_dict()
    if step.finish is not None:
        rows, extra = step.finish(rows)
        record.update(extra)
    if "target_reuse" in step.params:
        record["block_reuse"] = round(block_reuse(rows), 6)
    return rows, record


def run_step(step: Step, ctx: StepContext, manifest, on_tick: Callable[[float], None]) -> dict:
    """Run `step`; returns its final record (also written to the manifest and step.json)."""
    final = step_dir(ctx.run_dir, step)
    work = final.with_name(final.name + PARTIAL)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    record = {"id": step.id, "workload": step.workload, "name": step.name,
              "repeat": step.repeat, "status": RUNNING, "start": now(), "end": None,
              "cold": step.cold, "concurrency": step.concurrency, "seed": step.seed,
              "duration_s": step.duration_s, "params": step.params}
    manifest.begin_step(step.id, record)
    if step.cold:
        t0 = time.monotonic()
        restart = ctx.target.restart_workers()
        manifest.update_step(step.id, cold_restart_s=round(time.monotonic() - t0, 3),
                             **({"cold_restart": restart} if restart else {}))
        # New pods: attest them again before any load reaches them (a replay has none).
        if ctx.target.kind != "sim":
            manifest.update_step(step.id, attestation=attest(
                ctx.target, manifest, f"after the cold restart of {step.id}"))

    endpoints = ctx.target.endpoints()   # after a restart: a cluster's pod IPs change
    rows, dataset = step_dataset(step)
    dfile = write_dataset(rows, dataset_path(ctx.run_dir, step))
    dataset = {"path": str(dfile.path.relative_to(ctx.run_dir)), "sha256": dfile.sha256,
               "rows": dfile.rows, **dataset}
    grace_rec = step_grace(step, rows, ctx)
    ramp_rec = step_ramp(step, grace_rec, ctx)
    warmup = step_warmup.warmup_requests(step.workload, step.concurrency, dfile.rows)
    inv = AiperfInvocation(
        model=endpoints.model, url=endpoints.base_url, tokenizer=ctx.tokenizer,
        input_file=dfile.path, request_count=dfile.rows - warmup, warmup_requests=warmup,
        concurrency=step.concurrency,
        seed=step.seed, artifact_dir=work, server_metrics=tuple(endpoints.metrics_urls),
        duration_s=step.duration_s, grace_period_s=grace_rec["grace_period_s"],
        concurrency_ramp_s=ramp_rec["concurrency_ramp_s"] if ramp_rec else None,
        block_size=step.params.get("block_size", 512),
        fixed_schedule=fixed_schedule(step),
        request_timeout_s=ctx.request_timeout_s, tokenizer_revision=ctx.tokenizer_revision,
        tokenizer_trust_remote_code=ctx.tokenizer_trust_remote_code)
    manifest.update_step(step.id, dataset=dataset, server_metrics=endpoints.metrics,
                         **({"grace": grace_rec} if step.duration_s is not None else {}),
                         **({"ramp": ramp_rec} if ramp_rec else {}),
                         aiperf_warmup_requests=warmup,
                         artifact_dir=str(final.relative_to(ctx.run_dir)))

    since_ms = time.time() * 1000
    ex = ctx.executor.run(step, inv, work, on_tick,
                          lambda **fields: manifest.update_step(step.id, **fields))
    records = results.read_records(work)
    outcome = judge(work, rows, step, ex, ctx.error_rate_threshold, records)
    # The frontend's records of the profiled requests only: a sweep step's warm-up requests
    # (workloads/step_warmup.py) all arrived a request latency before its first profiled one
    # started. The trace stamps arrival in whole ms (request_received_ms), so the window opens
    # 1 ms before that start, not at it.
    window = results.load_window_ns(records)
    outcome["routing_evidence"] = request_trace.save_step_trace(
        ctx.target, work, max(since_ms, window[0] / 1e6 - 1.0) if window else since_ms,
        time.time() * 1000,
        expected=outcome["counts"]["completed"])
    log = work / "aiperf.log"
    if "simulation" not in ex.record:   # a replayed step ran no AIPerf to patch
        outcome["aiperf_patches"] = aiperf_site.patch_status(
            log.read_text(errors="replace") if log.exists() else "")
    outcome |= {"aiperf_exit_code": ex.exit_code, "aiperf_wall_s": round(ex.wall_s, 3),
                "end": now(), **ex.record}
    (work / "step.json").write_text(json.dumps({**record, **outcome, "dataset": dataset,
                                                "command": ex.command}, indent=2))
    _publish(work, final, ctx.run_dir)
    manifest.update_step(step.id, **outcome)
    return {**record, **outcome}


def step_grace(step: Step, rows: list[dict], ctx: StepContext) -> dict:
    """The step's grace period and what it was sized from (recorded with the step)."""
    itl_ms, source = predictions.expected_itl(ctx.predictions, step.id, ctx.expected_itl_ms)
    if source == predictions.ASSUMED_SOURCE:
        source = ctx.expected_itl_source
    expected = grace.expected_request_s(rows, itl_ms)
    return {"grace_period_s": grace.grace_period_s(expected),
            "expected_longest_request_s": round(expected, 3),
            "itl_ms": itl_ms, "itl_source": source}


def step_ramp(step: Step, grace_rec: dict, ctx: StepContext) -> dict | None:
    """The step's concurrency ramp (workloads/stagger.py), sized from its predicted request
    latency where one exists, else from the expected request the grace period (`grace_rec`,
    step_grace's) was sized from."""
    if step.workload not in stagger.SPREAD_WORKLOADS:
        return None
    row = predictions.predicted_step(ctx.predictions, step.id) or {}
    if row.get("request_latency_ms"):
        request_s = float(row["request_latency_ms"]) / 1000.0
        source = predictions.source_words(ctx.predictions or {})
    else:
        request_s = grace_rec["expected_longest_request_s"]
        source = grace_rec["itl_source"]
    return stagger.step_ramp(step.workload, step.concurrency, request_s, source)


def judge(work: Path, rows: list[dict], step: Step, ex: Execution,
          error_rate_threshold: float, records: list[dict] | None = None) -> dict:
    """The step's counts by request outcome, client verdict and status, from AIPerf's exports
    in `work` (the request classes and the step rules are workloads.outcomes', which the
    reports apply too); `records`: the profiled records, when the caller has read them."""
    if records is None:
        records = results.read_records(work)
    cpu = ex.cpu.summary(results.load_window_ns(records))
    per_request = results.outcomes(records, rows,
                                   results.step_expectations(work, ex.command))
    counts = results.count(records, per_request)
    achieved = results.achieved_concurrency(records, step.concurrency,
                                            per_conversation=step.workload == "multi_turn")
    with (work / "requests.jsonl").open("w") as f:
        for r in per_request:
            f.write(json.dumps(r) + "\n")
    client = {"cpu": cpu, "requested_concurrency": step.concurrency,
              "achieved_concurrency": round(achieved, 3) if achieved is not None else None,
              "aiperf_effective_concurrency": results.summary_metric(
                  work, "effective_concurrency"),
              "host_cores": ex.host_cores,
              # a replayed trace's concurrency is only a cap: the trace's arrivals decide how
              # many are in flight (its schedule lag is AIPerf's replay_sched_lag_*)
              **verdict(step.concurrency, None if fixed_schedule(step) else achieved,
                        cpu.get("mean_cores"), ex.host_cores)}
    reasons = []
    if ex.failure:
        reasons.append(ex.failure)
    if ex.exit_code != 0:
        reasons.append(f"aiperf exited with code {ex.exit_code}")
    reasons += step_problems(counts, error_rate_threshold)
    return {"status": FAILED if reasons else COMPLETE, "failure_reasons": reasons,
            "counts": counts.as_dict(), "errors": results.error_summary(records),
            "client": client}


def _publish(work: Path, final: Path, run_dir: Path) -> None:
    """Rename the finished step into place; an older attempt's directory goes to .failed/."""
    if final.exists():
        rel = str(final.relative_to(run_dir)).replace("/", "__")
        graveyard = run_dir / ".failed" / f"{rel}-{time.strftime('%Y%m%dT%H%M%S')}"
        graveyard.parent.mkdir(parents=True, exist_ok=True)
        final.rename(graveyard)
    work.rename(final)


def mark_interrupted(manifest, step_id: str) -> None:
    if manifest.step_status(step_id) == RUNNING:
        manifest.update_step(step_id, status=INTERRUPTED, end=now())
