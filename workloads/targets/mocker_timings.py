"""Which timings each local mocker runs on, and the run record's word for them.

A local stack imitates the GPU and TP its cluster block and workers name (local-agg: p4d.24xlarge,
A100 40 GB, TP4). Its mockers run on a timing table (`--planner-profile-data <npz>`, Dynamo
1.6.1 dynamo/mocker/args.py) built from AIConfigurator's database for that GPU and TP
(stacks/predict/mocker_table.py), or, when the database lacks the model (the motif3 rehearsal
model) or the predictor is not installed (`make predictor`), on the mocker's generic timings:
the record says which, and why, never silently. KV capacity is not the table's: it stays from
`--num-gpu-blocks-override` (pre-flight's figure, local.py mocker_blocks).

Tables are built once per (system, TP, model, versions, grid) and kept under a git-ignored
folder (.cache/mocker-tables, or $DYNAMO_BENCH_MOCKER_TABLES); a second run reads the file.
`resolve` is the shell; `label`, `words` and `generic` are pure. `words` is the one place a
report's wording of a timing source comes from (reports/records/stackinfo.py timing_words): the
label on every figure, what it means in the summary, and the short form in titles.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from stacks.config.schema import StackConfig

REPO = Path(__file__).resolve().parents[2]
TABLES_VAR = "DYNAMO_BENCH_MOCKER_TABLES"
GENERIC_LABEL = "SIMULATED (mocker generic timings)"


def tables_dir() -> Path:
    return Path(os.environ.get(TABLES_VAR) or REPO / ".cache" / "mocker-tables")


@dataclass(frozen=True)
class MockerTimings:
    tables: dict[str, Path] = field(default_factory=dict)   # role ("worker", ...) -> npz
    record: dict = field(default_factory=dict)               # what the manifest keeps

    def table_for(self, role: str) -> Path | None:
        return self.tables.get(role)


def simulator_words(record: dict) -> str:
    """Who ran the timings: the live mocker processes, or DynoSim's replay of the same engine
    (a record the simulation target wrote names it: workloads/sim/target.py)."""
    if record.get("simulator") == "DynoSim":
        return f"DynoSim (dynamo.replay, ai-dynamo {record.get('dynamo_version', '?')})"
    return "mocker"


def label(record: dict) -> str:
    """The words a report puts on every figure the run measured on these timings."""
    tables = record.get("tables") or []
    who = simulator_words(record)
    if not tables:
        return GENERIC_LABEL if who == "mocker" else f"SIMULATED ({who}, generic timings)"
    parts = [f"{t['role']}: " if len(tables) > 1 else "" for t in tables]
    body = "; ".join(f"{p}timings from AIConfigurator {t['aiconfigurator']} {t['system']}/"
                     f"{t['backend']} {t['backend_version']}{calibrated_words(t)}, table "
                     f"sha256 {t['sha256'][:12]}"
                     + (", latencies upper bounds: suspect database rows"
                        if t.get("upper_bound") else "")
                     for p, t in zip(parts, tables, strict=True))
    return f"SIMULATED ({who}, {body})"


def calibrated_words(table: dict) -> str:
    """A calibrated table's words: its factors and how many measured runs they came from
    (stacks/predict/table_scale.py writes the record)."""
    cal = table.get("calibration")
    if not cal:
        return ""
    runs = len(cal.get("fitted_from") or [])
    return (f" x calibrated (prefill x{cal['prefill_factor']:.3f}, decode "
            f"x{cal['decode_factor']:.3f}, fitted to {runs} measured run{'s' * (runs != 1)})")


@dataclass(frozen=True)
class TimingWords:
    """How a report words one timing source: `label` on every figure (the Stacks table, the
    predicted-vs-measured lines), `meaning` in the summary's where-it-ran line, `short` in
    section and plot titles."""

    label: str
    meaning: str
    short: str


UNRECORDED = TimingWords(
    "SIMULATED (mocker; its timings were not recorded by this run)",
    "the run record does not say which timings its mockers ran on, so its figures stand on "
    "no stated model of any GPU", "mocker, timings not recorded")


def words(record: dict | None) -> TimingWords:
    """The words for a run's recorded timings (the manifest's `target.timings`), decided by
    its label: the mocker's generic timings model no GPU; a table from AIConfigurator's
    database is that tool's model of the imitated GPU, simulated, not a measurement of it."""
    if not record:
        return UNRECORDED
    tables = record.get("tables") or []
    text = str(record.get("label") or label(record))
    dynosim = record.get("simulator") == "DynoSim"
    who = ("NVIDIA DynoSim, Dynamo's offline replay of the mocker's scheduler on a virtual "
           "clock (no engine process ran, no request was sent), " if dynosim
           else "Dynamo's mocker ")
    prefix = "DynoSim, " if dynosim else ""
    if not tables:
        return TimingWords(text, f"{who}on its generic timings, a model of no GPU: "
                           "the figures rehearse the pipeline and predict no GPU's "
                           "performance", f"{prefix}mocker generic timings")
    tools = ", ".join(sorted({f"AIConfigurator {t.get('aiconfigurator', '?')}"
                              for t in tables}))
    systems = ", ".join(sorted({str(t.get("system", "?")) for t in tables}))
    calibrated = any(t.get("calibration") for t in tables)
    scaled_by = (", scaled by prefill and decode factors fitted to measured runs (the label "
                 "says which)" if calibrated else "")
    return TimingWords(text, f"{who}on step timings from {tools}'s database for "
                       f"{systems}{scaled_by}: simulated from a model of that GPU, a "
                       "prediction of its performance, not a measurement of it",
                       f"{prefix}timings from {tools} {systems}"
                       f"{', calibrated' if calibrated else ''}")


def generic(reason: str) -> MockerTimings:
    """No table: the mockers keep Dynamo's generic timings, and the record says why."""
    record = {"source": "generic", "reason": reason, "tables": []}
    return MockerTimings({}, {**record, "label": label(record)})


def from_tables(tables: list) -> MockerTimings:
    """The timings of built tables (stacks.predict.mocker_table.MockerTable: role, path,
    record with sha256, versions and how it was made)."""
    rows = [{"role": t.role, **t.record} for t in tables]
    record = {"source": "aiconfigurator", "tables": rows}
    return MockerTimings({t.role: t.path for t in tables}, {**record, "label": label(record)})


def scaled(timings: MockerTimings, factors: dict[str, tuple[float, float]], folder: Path,
           fitted_from: list[str]) -> MockerTimings:
    """`timings` with each role's table scaled by its (prefill, decode) factors (a role not in
    `factors` keeps its table); the record names the source tables, the factors and the runs
    they were fitted from. Generic timings have no table to scale: refused."""
    from stacks.predict.mocker_table import MockerTable
    from stacks.predict.table_scale import TableError, scale_table

    if not timings.tables:
        raise TableError("these timings are the mocker's generic ones: there is no table to "
                         "scale (calibration scales AIConfigurator's tables: `make predictor`)")
    rows = {t["role"]: {k: v for k, v in t.items() if k != "role"}
            for t in timings.record.get("tables", [])}
    out = []
    for role, path in timings.tables.items():
        if role in factors:
            prefill, decode = factors[role]
            out.append(scale_table(path, prefill, decode, folder, fitted_from,
                                   rows.get(role), role))
        else:
            out.append(MockerTable(role, path, rows.get(role, {})))
    done = from_tables(out)
    record = {**done.record, "source": "aiconfigurator, calibrated" if factors
              else done.record["source"]}
    return MockerTimings(done.tables, record)


def resolve(stack: StackConfig, folder: Path | None = None,
            base: StackConfig | None = None) -> MockerTimings:
    """The timings `stack`'s mockers run on: tables from the database for the GPU and TP it
    imitates (a variant's GPUs are its `base`'s node groups), else the generic timings with
    the reason."""
    from stacks.predict.mocker_table import build
    from stacks.predict.predictor import PredictorUnavailable, predict
    try:
        tables = build(stack, folder or tables_dir(), base)
        if tables:
            return from_tables(tables)
        why = (predict(stack, "quick", base).not_predicted
               or "the database cannot predict this stack")
        return generic(why)
    except PredictorUnavailable as exc:
        return generic(f"AIConfigurator is unavailable ({exc})")
