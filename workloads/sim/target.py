"""The simulation target: a stack's steps replayed by NVIDIA DynoSim (Dynamo 1.6.1's offline
replay, the mocker's scheduler on a virtual clock) instead of sent to a deployment.

`python -m workloads run <stack> --target sim` runs the runner's whole path (pre-flight, the
plan, every step's dataset, grace and ramp, the judge, the manifest) with two parts swapped:
`SimTarget`, which serves nothing (no smoke test, warm-up or attestation can be made; the
record says so), and `SimExecutor`, which replays each step's dataset through DynoSim where
AIPerf would have sent it, and writes AIPerf's exports of the result (workloads/sim/exports.py)
plus the frontend's request trace of it (worker, cached tokens), so `reports build` reads a
simulated run like any other while every figure says SIMULATED (DynoSim, its timing source).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stacks.config.schema import StackConfig
from workloads.aiperf_args import AiperfInvocation
from workloads.attest.checks import CHECKS, Attestation, Check
from workloads.sim import exports
from workloads.sim.dispatch import SendPattern
from workloads.sim.engine_setup import SimSetup
from workloads.sim.prompt_layout import BlockHasher, ChatTemplate, Profiled, StepLayout
from workloads.sim.replay import Replayer
from workloads.sim.step_sim import StepSimulation, simulate
from workloads.targets import mocker_timings
from workloads.targets.base import Endpoints

KIND = "sim"
SIMULATION = "not applicable (simulation)"
# Runs of a step's last replay when the KV router picks among equal-cost workers at random.
KV_ROUTER_RUNS = 3


def timings_record(timings: dict[str, Any], version: str) -> dict[str, Any]:
    """The timing record of a simulated run: the tables it replayed on, and the simulator."""
    record = {**timings, "simulator": "DynoSim", "dynamo_version": version}
    return {**record, "label": mocker_timings.label(record)}


def label(timings: dict[str, Any], version: str) -> str:
    """The words every figure of a simulated run carries: the simulator and its timings."""
    return str(timings_record(timings, version)["label"])


class NoClientCpu:
    """A replay has no client process: no CPU samples, no client-bound verdict from them."""

    def summary(self, window_ns: tuple[int, int] | None = None) -> dict:
        return {}


@dataclass
class SimTarget:
    stack: StackConfig
    setup: SimSetup
    timings: dict[str, Any]                    # the timing record (mocker_timings)
    version: str = "unknown"
    kind: str = KIND
    attestations: int = 0
    replayer: Replayer = field(default_factory=Replayer)
    _trace: list[str] = field(default_factory=list)

    def start(self) -> None:
        """Nothing to start: every step is its own replay (the replay process starts on the
        first)."""

    def stop(self) -> None:
        self.replayer.close()

    def endpoints(self) -> Endpoints:
        return Endpoints(base_url="sim://dynosim", model=self.stack.model.name)

    def restart_workers(self) -> dict:
        return {"simulated": "every step is replayed on empty caches; nothing to restart"}

    def attest(self, when: str) -> Attestation:
        self.attestations += 1
        return Attestation(when, KIND, [Check(name, SIMULATION, "nothing is deployed: the "
                                              "steps are replayed by DynoSim")
                                        for name in CHECKS])

    def problems(self) -> list[str]:
        return []

    def request_trace(self, since_ms: float, until_ms: float) -> list[str]:
        """The last step's requests as the frontend's trace lines (what routing evidence
        reads), written by the executor; the window is the runner's wall clock, not the
        replay's, so it is not applied."""
        return list(self._trace)

    def describe(self) -> dict:
        return {"kind": KIND, "dynamo_version": self.version, "simulator": "DynoSim",
                "router": self.setup.router_mode, "topology": (
                    "disaggregated" if len(self.setup.roles) == 2 else "aggregated"),
                "workers": [{"role": r.role, "count": r.count, "argv": r.argv}
                            for r in self.setup.roles],
                "block_size": self.setup.block_size, "notes": self.setup.notes,
                "timings": timings_record(self.timings, self.version)}


def replay_inputs(inv: AiperfInvocation, template: ChatTemplate,
                  block_size: int) -> tuple[Profiled, SendPattern]:
    """What DynoSim replays for one AIPerf invocation: the profiled requests of its dataset file
    as the engine sees them (KV blocks of `block_size` tokens, hashed from the same tokens the
    seed gives AIPerf's prompts) and how AIPerf sends them (concurrency, warm-up, ramp,
    duration, grace, schedule). The simulation target replays a step from it; calibration
    replays a measured step from the invocation its record describes (calibrate.py)."""
    data = Path(inv.input_file).read_bytes()
    rows = [json.loads(line) for line in data.splitlines() if line.strip()]
    scope = f"{hashlib.sha256(data).hexdigest()}:{inv.seed}"
    requests = Profiled(StepLayout(rows, inv.block_size, scope, template,
                                   BlockHasher(block_size)), inv.warmup_requests)
    pattern = SendPattern(inv.concurrency, inv.warmup_requests, inv.concurrency_ramp_s,
                          inv.duration_s, inv.grace_period_s if inv.duration_s else 0.0,
                          inv.fixed_schedule)
    return requests, pattern


@dataclass
class SimExecutor:
    """Replays each step where AIPerf would send it (workloads.step_exec.StepExecutor)."""
    target: SimTarget
    template: ChatTemplate
    host_cores: int = field(default_factory=lambda: os.cpu_count() or 1)

    def run(self, step, inv: AiperfInvocation, work: Path,
            on_tick: Callable[[float], None], note: Callable[..., None]):
        from workloads.step_exec import Execution
        t0 = time.monotonic()
        on_tick(0.0)
        setup = self.target.setup
        requests, pattern = replay_inputs(inv, self.template, setup.block_size)
        runs = KV_ROUTER_RUNS if setup.router_mode == "kv_router" else 1
        replayer = self.target.replayer
        sim = simulate(requests, pattern, setup, replayer, runs=runs,
                       warm=bool(step.params.get("warm_after")))
        versions = replayer.versions
        epoch_ns = time.time_ns()
        records = [exports.request_record(r, sim.plan, epoch_ns, sim.cut_ms)
                   for r in sim.requests]
        simulated_by = {"simulator": "DynoSim", **versions, "replays": sim.replays,
                        "runs": runs, "spread": spread(sim), "label": label(
                            self.target.timings, versions.get("ai-dynamo", "unknown"))}
        with (work / "profile_export.jsonl").open("w") as f:
            for rec in records:
                f.write(json.dumps(rec) + "\n")
        (work / "profile_export_aiperf.json").write_text(json.dumps(exports.summary(
            records, pattern, str(inv.input_file), simulated_by), indent=2))
        self.target._trace = exports.trace_lines(sim, epoch_ns)
        command = ["dynosim", "replay", f"--concurrency={inv.concurrency}",
                   f"--input-file={inv.input_file}", f"--runs={runs}"]
        return Execution(0, NoClientCpu(), time.monotonic() - t0, command,  # type: ignore[arg-type]
                         self.host_cores, record={"simulation": simulated_by})


def spread(sim: StepSimulation) -> dict[str, Any]:
    """Per run of the step's last replay: TTFT and ITL p50 and output tok/s (the KV router's
    random ties make runs differ), with their min and max."""
    per_run = []
    for run in sim.runs:
        reqs = [r for r in run if not sim.keep or r["session_id"] in sim.keep]
        timings = [exports.ttft_itl(r) for r in reqs]
        ttft = [t for t, _ in timings]
        itl = [i for _, i in timings if i]
        start = min((r["arrival_time_ms"] for r in reqs), default=0.0)
        end = max((r["terminal_time_ms"] for r in reqs), default=0.0)
        tokens = sum(r["output_length"] for r in reqs)
        per_run.append({"ttft_p50_ms": statistics.median(ttft) if ttft else None,
                        "itl_p50_ms": statistics.median(itl) if itl else None,
                        "output_tok_s": tokens / ((end - start) / 1000) if end > start else None})
    out: dict[str, Any] = {"runs": per_run}
    for key in ("ttft_p50_ms", "itl_p50_ms", "output_tok_s"):
        vals = [float(v) for r in per_run if (v := r[key]) is not None]
        if vals:
            out[key] = {"min": min(vals), "max": max(vals)}
    return out
