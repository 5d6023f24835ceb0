"""Calibration: scale factors for the simulation's timing tables fitted to measured runs (the
shell around calibrate_fit.py's pure fit; `python -m workloads calibrate`, and `stacks explore
--calibrate` re-ranks its candidates on the calibrated tables).

    cal = calibrate([Path("runs/campaigns/base-a100/<id>")])
    cal.fit.prefill[key].value, cal.fit.decode[key].value, cal.fit.steps   # factors, residuals
    timings = cal.timings_for(stack, base)        # a stack's tables, calibrated where fitted
    target, ex = workloads.sim.build.make(stack, kv, hf_home, timings=timings, base=base)

For every measured run (workloads/sim/measured.py: not `--target sim` runs) the stack's own
simulation tables are the reference (mocker_timings.resolve: AIConfigurator's table per (GPU
system, TP, role), the ones `--target sim` and `stacks explore` simulate on, whatever a local
run's mockers ran on), its KV capacity pre-flight's, and each completed step is replayed by
DynoSim from its record exactly as the simulation target replays a step (target.py
replay_inputs, step_sim.simulate), on tables scaled by the current factors; the fit iterates
that (about 0.1 s a step). A run whose stack has no table (generic timings) is skipped with the
reason. The calibrated tables are written under the mocker tables folder
(`<tables>/calibrated/`), each with its record (source sha256, factors, the runs), plus the
whole result as calibration-<digest>.json.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stacks.config.loader import STACKS_DIR
from stacks.config.schema import StackConfig
from stacks.predict.mocker_table import MockerTable
from stacks.predict.table_scale import scale_table
from stacks.preflight.run import run_preflight
from workloads.runner import default_hf_home
from workloads.sim import calibrate_fit as cf
from workloads.sim.build import make
from workloads.sim.dispatch import SendPattern
from workloads.sim.exports import frontend_ttft_itl
from workloads.sim.measured import MeasuredRun, read_run, run_dirs
from workloads.sim.prompt_layout import Profiled
from workloads.sim.replay import Replayer
from workloads.sim.step_sim import StepSimulation, simulate
from workloads.sim.target import KV_ROUTER_RUNS, replay_inputs
from workloads.targets import mocker_timings
from workloads.targets.mocker_timings import MockerTimings, resolve

CALIBRATED = "calibrated"


def keys_of(timings: MockerTimings) -> dict[str, cf.Key]:
    """Role -> the table key of each table in `timings` (its record's system, TP, model)."""
    return {t["role"]: cf.Key(str(t["system"]), int(t["tp"]), str(t["role"]), str(t["model"]))
            for t in timings.record.get("tables", [])}


def informing(keys: dict[str, cf.Key]) -> tuple[cf.Key, cf.Key]:
    """The tables a step's TTFT and ITL inform: aggregated the workers' for both;
    disaggregated the prefill role's TTFT (the first token is streamed when the prefill ends:
    exports.first_token_ms) and the decode role's ITL."""
    if "worker" in keys:
        return keys["worker"], keys["worker"]
    return keys["prefill"], keys["decode"]


def prefill_curve(table: Path) -> tuple[list[float], list[float]]:
    """A table's prefill times by new prompt tokens (its axis and values)."""
    import numpy as np

    with np.load(table) as z:
        return [float(x) for x in z["prefill_isl"]], [float(x) for x in z["prefill_ttft_ms"]]


def sim_figures(sim: StepSimulation, curve: tuple[list[float], list[float]]) -> cf.SimFigures:
    """TTFT and per-request mean ITL as the frontend's trace records them (disaggregated, to
    and from the prefill's end: exports.frontend_ttft_itl), lower quartiles; own prefill
    (median of a request's prefill of its uncached tokens on the table, linear between its
    grid points as the mocker reads it) and prefill share (median of own prefill / TTFT); of
    the requests completed before the step's cut, pooled over the replay's runs (the KV
    router's random ties: several)."""
    import numpy as np

    ttft, itl, share, own = [], [], [], []
    for run in sim.runs:
        for r in run:
            if (sim.keep and r["session_id"] not in sim.keep) or \
                    (sim.cut_ms is not None and r["last_token_ms"] > sim.cut_ms):
                continue
            t, i = frontend_ttft_itl(r)
            ttft.append(t)
            if i:
                itl.append(i)
            prefill = float(np.interp(r["input_length"] - (r.get("reused_input_tokens") or 0),
                                      *curve))
            own.append(prefill)
            if t > 0:
                share.append(prefill / t)

    return cf.SimFigures(cf.quantile(ttft, cf.TTFT_QUANTILE), cf.quantile(itl, cf.ITL_QUANTILE),
                         cf.quantile(share, 0.5), cf.quantile(own, 0.5))


@dataclass
class RunModel:
    """One measured run ready to replay: its stack, tables, KV capacity and steps' inputs."""
    run: MeasuredRun
    timings: MockerTimings                      # the reference tables (uncalibrated)
    keys: dict[str, cf.Key]
    kv_capacity_tokens: list[int]
    inputs: dict[str, tuple[Profiled, SendPattern]] = field(default_factory=dict)


@dataclass
class Calibration:
    fit: cf.Fit
    runs: list[str]                                    # run directories fitted from
    skipped: list[tuple[str, str, str]]                # (run, step or "", why)
    tables: dict[cf.Key, MockerTable] = field(default_factory=dict)   # calibrated, written
    ttft_basis: dict[str, str] = field(default_factory=dict)   # run -> what its TTFT spans
    record_path: Path | None = None

    def factors(self, key: cf.Key) -> tuple[float, float] | None:
        """(prefill, decode) of a table key, None where no measured step informed it."""
        return self.fit.factors().get(key)

    def scales(self, timings: MockerTimings) -> dict[str, tuple[float, float]]:
        """Role -> (prefill, decode) for each of `timings`' tables the calibration covers."""
        return {role: f for role, key in keys_of(timings).items()
                if (f := self.factors(key)) is not None}

    def timings_for(self, stack: StackConfig, base: StackConfig | None = None,
                    folder: Path | None = None) -> MockerTimings:
        """`stack`'s simulation tables, each scaled by its key's factors where the
        calibration has them (a role without keeps AIConfigurator's table: the record and
        label say which roles are calibrated)."""
        timings = resolve(stack, base=base)
        scales = self.scales(timings)
        if not scales:
            return timings
        folder = folder or mocker_timings.tables_dir() / CALIBRATED
        return mocker_timings.scaled(timings, scales, folder, self.runs)

    def as_dict(self) -> dict[str, Any]:
        f = self.fit

        def factor(x: cf.Factor) -> dict[str, Any]:
            return {"value": x.value, "fitted": x.fitted, "steps": x.steps, "se": x.se,
                    "rms": x.rms}
        return {"runs": self.runs, "iterations": f.iterations, "converged": f.converged,
                "factors": [{"system": k.system, "tp": k.tp, "role": k.role, "model": k.model,
                             "prefill": factor(f.prefill[k]), "decode": factor(f.decode[k]),
                             "intercept": f.intercept_mode.get(k),
                             "ttft_steps": f.prefill_steps.get(k),
                             "table": str(self.tables[k].path) if k in self.tables else None}
                            for k in sorted(f.prefill)],
                "intercepts_ms": f.intercepts,
                "steps": [{"run": s.run, "step": s.step, "ttft_ms": s.ttft_ms,
                           "ttft_sim_ms": s.ttft_sim_ms, "ttft_error": s.ttft_error,
                           "itl_ms": s.itl_ms, "itl_sim_ms": s.itl_sim_ms,
                           "itl_error": s.itl_error, "prefill_share": s.prefill_share,
                           "fits_prefill": s.informs_prefill} for s in f.steps],
                "ttft_basis": self.ttft_basis,
                "statistics": {"ttft_quantile": cf.TTFT_QUANTILE, "itl_quantile": cf.ITL_QUANTILE,
                               "prefill_share": cf.PREFILL_SHARE},
                "skipped": [{"run": r, "step": s, "why": w} for r, s, w in self.skipped]}


def prepare(run: MeasuredRun, hf_home: Path, skipped: list) -> RunModel | None:
    timings = resolve(run.stack, base=run.base)
    if not timings.tables:
        skipped.append((run.name, "", "its stack has no AIConfigurator table to scale (generic "
                        f"timings: {timings.record.get('reason')})"))
        return None
    memory = run_preflight(run.stack, run.base).memory
    if not memory:
        skipped.append((run.name, "", "pre-flight gives its workers no KV capacity (python -m "
                        f"stacks check {run.stack.name})"))
        return None
    model = RunModel(run, timings, keys_of(timings), [m.kv_capacity_tokens for m in memory])
    target, ex = make(run.stack, model.kv_capacity_tokens, hf_home, timings=timings,
                      base=run.base)
    for step in run.steps:
        model.inputs[step.step] = replay_inputs(step.invocation, ex.template,
                                                target.setup.block_size)
    return model


def simulator(models: list[RunModel], hf_home: Path, replayer: Replayer, folder: Path):
    """The fit's `simulate`: every measured step replayed on tables scaled by `factors`."""
    def run_all(factors: cf.Factors) -> cf.Simulated:
        out: cf.Simulated = {}
        for m in models:
            scales = {role: factors[key] for role, key in m.keys.items() if key in factors}
            timings = mocker_timings.scaled(m.timings, scales, folder, [])
            target, _ = make(m.run.stack, m.kv_capacity_tokens, hf_home, timings=timings,
                             base=m.run.base)
            runs = KV_ROUTER_RUNS if target.setup.router_mode == "kv_router" else 1
            curve = prefill_curve(timings.tables[informing(m.keys)[0].role])
            for step in m.run.steps:
                requests, pattern = m.inputs[step.step]
                sim = simulate(requests, pattern, target.setup, replayer, runs=runs,
                               warm=step.warm)
                out[m.run.name, step.step] = sim_figures(sim, curve)
        return out
    return run_all


def evidence(models: list[RunModel]) -> list[cf.Evidence]:
    out = []
    for m in models:
        ttft_key, itl_key = informing(m.keys)
        out += [cf.Evidence(m.run.name, s.step, ttft_key, itl_key,
                            float(cf.quantile(s.fit_ttft_ms, cf.TTFT_QUANTILE) or 0.0),
                            cf.quantile(s.itl_ms, cf.ITL_QUANTILE)) for s in m.run.steps]
    return out


def calibrate(paths: list[Path], stacks_dir: Path = STACKS_DIR, hf_home: Path | None = None,
              folder: Path | None = None, replayer: Replayer | None = None) -> Calibration:
    """Fit prefill and decode factors per table key to the measured steps of `paths` (run or
    campaign directories) and write the calibrated tables (module docstring)."""
    hf_home = hf_home or default_hf_home()
    folder = folder or mocker_timings.tables_dir() / CALIBRATED
    dirs = run_dirs(paths)
    skipped: list[tuple[str, str, str]] = []
    models = []
    for d in dirs:
        run = read_run(d, stacks_dir)
        skipped += [(run.name, step, why) for step, why in run.skipped]
        if run.steps and (model := prepare(run, hf_home, skipped)) is not None:
            models.append(model)
    if not models:
        why = "; ".join(f"{r}{' ' + st if st else ''}: {w}" for r, st, w in skipped)
        raise cf.FitError("no measured step to fit"
                          + (f" ({why})" if why else ": the runs hold no completed step"))
    own = replayer is None
    replayer = replayer or Replayer()
    try:
        with tempfile.TemporaryDirectory(prefix="dynamo-bench-calibrate-") as tmp:
            result = cf.fit(evidence(models), simulator(models, hf_home, replayer, Path(tmp)))
    finally:
        if own:
            replayer.close()
    fitted_from = [str(m.run.run_dir) for m in models]
    cal = Calibration(result, fitted_from, skipped, ttft_basis={
        m.run.name: "; ".join(sorted({s.ttft_basis for s in m.run.steps})) for m in models})
    factors = result.factors()
    for m in models:
        rows = {t["role"]: {k: v for k, v in t.items() if k != "role"}
                for t in m.timings.record["tables"]}
        for role, key in m.keys.items():
            if key in factors and key not in cal.tables:
                prefill, decode = factors[key]
                cal.tables[key] = scale_table(m.timings.tables[role], prefill, decode, folder,
                                              fitted_from, rows[role], role)
    body = json.dumps(cal.as_dict(), indent=2, default=str)
    cal.record_path = folder / f"calibration-{hashlib.sha256(body.encode()).hexdigest()[:16]}.json"
    folder.mkdir(parents=True, exist_ok=True)
    cal.record_path.write_text(body + "\n")
    return cal
