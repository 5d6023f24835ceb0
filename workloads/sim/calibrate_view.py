"""`python -m workloads calibrate`'s tables (rich): the factors per timing table with their
residual error, every measured step against its replay, the runs' intercepts, the calibrated
tables written, and what was skipped and why."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from workloads.sim import calibrate_fit as cf
from workloads.sim.calibrate import Calibration


def _pct(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x * 100:+.1f} %" if signed else f"{x * 100:.1f} %"


def _factor(f: cf.Factor) -> str:
    if not f.fitted:
        return "1.000 (not fitted: no step informs it)"
    se = f" ± {f.se * 100:.1f} %" if f.se is not None else " (± -: as many steps as unknowns)"
    return f"{f.value:.3f}{se}"


def factors_table(cal: Calibration) -> Table:
    fit = cal.fit
    t = Table(title="Calibrated factors: the timing table x factor replays the MEASURED steps "
              "(SIMULATED by DynoSim)", title_justify="left")
    for col in ("GPU system", "TP", "role", "model", "prefill factor", "TTFT residual rms",
                "TTFT fitted on", "decode factor", "ITL residual rms"):
        t.add_column(col)
    for key in sorted(fit.prefill):
        p, d = fit.prefill[key], fit.decode[key]
        how = (f"{fit.prefill_steps[key]}, intercept {fit.intercept_mode[key]}"
               if key in fit.prefill_steps else "-")
        t.add_row(key.system, str(key.tp), key.role, key.model, _factor(p),
                  f"{_pct(p.rms)} over {p.steps}" if p.fitted else "-", how, _factor(d),
                  f"{_pct(d.rms)} over {d.steps}" if d.fitted else "-")
    return t


def summary_lines(cal: Calibration) -> list[str]:
    """One line per fitted table key (its factors, their standard errors and the residual
    error of the steps they were fitted on), then the runs and the record: what a report that
    ranks on the calibrated tables says it stands on."""
    fit = cal.fit
    out = []
    for key in sorted(fit.prefill):
        p, d = fit.prefill[key], fit.decode[key]
        out.append(f"{key.system} TP{key.tp} {key.role} ({key.model}): prefill x{_factor(p)}"
                   f"{f', TTFT residual rms {_pct(p.rms)} over {p.steps}' if p.fitted else ''}"
                   f"; decode x{_factor(d)}"
                   f"{f', ITL residual rms {_pct(d.rms)} over {d.steps}' if d.fitted else ''}")
    state = "converged" if fit.converged else "NOT converged"
    out.append(f"fitted on {', '.join(cal.runs)} ({fit.iterations} replays of every step, "
               f"{state}); record {cal.record_path}")
    return out


def steps_table(cal: Calibration) -> Table:
    t = Table(title=f"Per step: MEASURED (frontend, lower quartiles: TTFT from dispatch, ITL) vs "
              f"SIMULATED at the fitted factors (TTFT + the run's intercept); prefill-dominated "
              f"steps (own prefill >= {cf.PREFILL_SHARE:.0%} of TTFT) fit the prefill factor",
              title_justify="left")
    for col in ("run", "step", "TTFT ms", "sim", "error", "ITL ms", "sim", "error",
                "prefill share", "fits prefill"):
        t.add_column(col, justify="left" if col in ("run", "step") else "right")
    for s in cal.fit.steps:
        t.add_row(s.run, s.step, f"{s.ttft_ms:.2f}",
                  "-" if s.ttft_sim_ms is None else f"{s.ttft_sim_ms:.2f}",
                  _pct(s.ttft_error, True), "-" if s.itl_ms is None else f"{s.itl_ms:.3f}",
                  "-" if s.itl_sim_ms is None else f"{s.itl_sim_ms:.3f}",
                  _pct(s.itl_error, True), _pct(s.prefill_share),
                  "yes" if s.informs_prefill else "")
    return t


def render(cal: Calibration, console: Console) -> None:
    fit = cal.fit
    console.print(factors_table(cal))
    console.print(steps_table(cal))
    for run, c in sorted(fit.intercepts.items()):
        console.print(f"intercept {run}: {c:+.2f} ms added to every simulated TTFT (the "
                      "measured time DynoSim has no part of: request and first-token "
                      "transport)", markup=False)
    for key, mode in sorted(fit.intercept_mode.items()):
        if mode == cf.NONE:
            console.print(f"no intercept for {key}: its prefill-dominated steps' own "
                          f"prefills are within {cf.SPREAD}x of each other, too alike to tell "
                          "a scale from an offset, so its prefill factor is a plain ratio, "
                          "biased up by the transport time; a c1 step of another prompt "
                          "length in the runs fits it (docs/calibration.md)", markup=False)
    for run, basis in sorted(cal.ttft_basis.items()):
        console.print(f"TTFT of {run}: {basis}", markup=False)
    state = "converged" if fit.converged else "NOT converged (the last factors are shown)"
    console.print(f"fit: {fit.iterations} replays of every step, {state}", markup=False)
    for key, table in sorted(cal.tables.items()):
        console.print(f"calibrated table {key}: {table.path}", markup=False)
    for run, step, why in cal.skipped:
        console.print(f"skipped {run}{' ' + step if step else ''}: {why}", markup=False)
    if cal.record_path is not None:
        console.print(f"record: {cal.record_path}", markup=False)
