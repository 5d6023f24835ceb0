"""Which steps count: status and client verdict re-judged with the runner's own rules, a flag
every table and plot shows, and the note saying what was left out (pure).

- status: the run record's (`recorded_status`) unless the exports show what the runner's rule
  (workloads.outcomes.step_problems) calls a failure, e.g. truncated streams in a run recorded
  before that rule: then `failed`, with the reasons;
- client-bound: workloads.saturation.verdict on the achieved concurrency the reports compute
  (the same definition as the runner's) and the client CPU the runner sampled;
- AIPerf's patches: a step whose AIPerf did not run the project's slot wait (or ran `make
  bench`'s quick-ACK client) is flagged `AIPERF UNPATCHED` (workloads/aiperf_site
  patch_problems on the step record's `aiperf_patches`); a record from before the patches
  existed has none and is not judged;
- `usable`: complete, not client-bound and AIPerf as patched. Best points, Pareto fronts, SLA
  verdicts, folded means and the hypotheses take usable steps only; the others stay in every
  table and plot, marked with `step_flag`.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from workloads.aiperf_site import patch_problems
from workloads.manifest import COMPLETE, FAILED
from workloads.outcomes import OutcomeCounts, step_problems
from workloads.saturation import Verdict, verdict

FLAG_COLUMNS = ["status", "status_reasons", "client_bound", "client_bound_reasons", "usable",
                "step_flag"]
DEFAULT_ERROR_RATE_THRESHOLD = 0.01   # stacks.config.workload_config's default, for old records


def _counts(st: pd.Series) -> OutcomeCounts:
    return OutcomeCounts(attempted=int(st["attempted"]), completed=int(st["completed"]),
                         failed=int(st["failed"]), truncated=int(st["truncated"]),
                         cancelled=int(st["cancelled"]))


def _none(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and pd.isna(v)) else v


def aiperf_patch_reason(st: pd.Series) -> str:
    """Why the step's client is not the one the project measures with, or "".

    Without the slot wait, AIPerf 0.13.0's concurrency loop busy-polls a core for the whole
    step, and the client's TTFT carries it: docs/testing.md measured the client / engine TTFT
    ratio without the first-data stall at 1.264 on c64 before the patch (and the sweep's
    warm-up), 1.047 after. The quick-ACK client is `make bench`'s diagnostic pass, not what a
    client of the frontend sees."""
    raw = _none(st.get("aiperf_patches"))
    if raw is None:
        return ""
    problems = patch_problems(json.loads(raw))
    # one part of step_flag: no "; " inside (report.md's flag cell splits the parts on it)
    return ("AIPERF UNPATCHED: " + ", and ".join(problems) + " (its TTFT and throughput stand "
            "on another client: docs/testing.md measured the client / engine TTFT at 1.264 on "
            "c64 without the slot wait, 1.047 with it)") if problems else ""


def aiperf_provenance(version: str, steps: dict[str, dict[str, Any]]) -> str:
    """The client a run measured with, for its record's provenance: `AIPerf <version> + slot
    wait` when every step that recorded its patches ran them (the run record's `steps`)."""
    recorded = [rec["aiperf_patches"] for rec in steps.values()
                if isinstance(rec.get("aiperf_patches"), dict)]
    if not recorded:
        return f"AIPerf {version} (its patches not recorded)"
    wrong = sum(1 for p in recorded if patch_problems(p))
    if not wrong:
        return f"AIPerf {version} + slot wait"
    return (f"AIPerf {version}, its patches not as measured on {wrong} of {len(recorded)} "
            "steps (AIPERF UNPATCHED)")


def judge(st: pd.Series, error_rate_threshold: float) -> dict[str, Any]:
    recorded = _none(st.get("recorded_status"))
    problems = step_problems(_counts(st), error_rate_threshold)
    if recorded not in (None, COMPLETE):
        status = str(recorded)
        reasons = _none(st.get("recorded_reasons")) or ""
    elif problems:
        status = FAILED
        reasons = "; ".join(problems) + (
            " (judged from the exports; the run record said complete)" if recorded else "")
    else:
        status, reasons = COMPLETE, ""
    requested, cores = _none(st.get("concurrency")), _none(st.get("host_cores"))
    # a replayed trace's concurrency is a cap, not a target (as the runner judges it)
    achieved = None if st.get("schedule") == "fixed" else _none(st.get("achieved_concurrency"))
    # without the host's core count the CPU half of the verdict cannot be judged
    client: Verdict
    client = verdict(int(requested), achieved,
                     _none(st.get("client_cpu_cores_mean")) if cores else None,
                     int(cores or 1)) if requested else {"client_bound": False, "reasons": []}
    bound = client["client_bound"]
    unpatched = aiperf_patch_reason(st)
    flag = ""
    if status != COMPLETE:
        flag = f"{status.upper()}: {reasons}" if reasons else status.upper()
    if bound:
        flag = "; ".join(x for x in (flag, "CLIENT-BOUND: " + "; ".join(client["reasons"])) if x)
    flag = "; ".join(x for x in (flag, unpatched) if x)
    return {"status": status, "status_reasons": reasons, "client_bound": bound,
            "client_bound_reasons": "; ".join(client["reasons"]),
            "usable": status == COMPLETE and not bound and not unpatched, "step_flag": flag}


def decode_only_reason(st: pd.Series) -> str:
    """Why a disaggregated stack's step measured aggregated serving, or "".

    Dynamo's frontend "Uses decode-only routing when no prefill service is registered"
    (docs.nvidia.com/dynamo/v1.6.0 knowledge-base/modular-components/router/
    disaggregated-serving): a prefill pod that restarted mid-sweep turns the step into a
    decode-only measurement without an error. NIXL's transfer count on the decode workers
    (reports.records.server `server_kv_transfers`) is then zero; a step whose server exported no
    NIXL metrics (NaN: the local mocker) cannot tell and is not flagged."""
    moved = _none(st.get("server_kv_transfers"))
    if moved is None or moved > 0:
        return ""
    return ("DECODE-ONLY: a disaggregated step with zero NIXL KV transfers (no prefill worker "
            "served it: the router falls back to decode-only routing)")


def mark_decode_only(row: dict[str, Any], st: pd.Series) -> dict[str, Any]:
    """`row` (judge's) unusable and flagged when decode_only_reason says so."""
    reason = decode_only_reason(st)
    if not reason:
        return row
    flag = "; ".join(x for x in (row["step_flag"], reason) if x)
    return {**row, "usable": False, "step_flag": flag}


def judge_steps(steps: pd.DataFrame, thresholds: dict[str, float],
                disaggregated: frozenset[str] = frozenset()) -> pd.DataFrame:
    """`steps` with FLAG_COLUMNS (thresholds: each stack's workloads.errorRateThreshold;
    disaggregated: the stacks whose steps must move KV, mark_decode_only)."""
    rows = []
    for _, st in steps.iterrows():
        row = judge(st, thresholds.get(st["stack"], DEFAULT_ERROR_RATE_THRESHOLD))
        rows.append(mark_decode_only(row, st) if st["stack"] in disaggregated else row)
    judged = pd.DataFrame(rows, index=steps.index, columns=FLAG_COLUMNS)
    return pd.concat([steps.drop(columns=[c for c in FLAG_COLUMNS if c in steps]), judged],
                     axis=1)


# What names a row, after its stack, in the note of what was left out.
_ROW_KEYS = ("step", "concurrency", "prefix_share", "distribution")


def _row_label(r: pd.Series) -> str:
    for key in _ROW_KEYS:
        if key in r and not pd.isna(r[key]):
            value = r[key]
            if key == "concurrency":
                return f"{r['stack']} c{int(value)}"
            if key == "prefix_share":
                return f"{r['stack']} share {value:.0%}"
            return f"{r['stack']} {value}"
    return str(r["stack"])


def left_out(frame: pd.DataFrame | None, what: str) -> str:
    """A note naming the flagged rows of a table and what they were left out of ('' if none).
    `frame` needs `usable` and `step_flag`."""
    if frame is None or frame.empty or "usable" not in frame:
        return ""
    bad = frame[frame["usable"].eq(False)]   # reference rows (published figures) have none
    if bad.empty:
        return ""
    names = dict.fromkeys(f"{_row_label(r)} ({r['step_flag']})" for _, r in bad.iterrows())
    return (f"Left out of {what}: " + "; ".join(names) + ". These rows stay in the table, "
            "marked in `step_flag`.")
