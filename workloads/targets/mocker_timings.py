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
`resolve` is the shell; `label` and `generic` are pure.
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


def label(record: dict) -> str:
    """The words a report puts on every figure the run measured on these timings."""
    tables = record.get("tables") or []
    if not tables:
        return GENERIC_LABEL
    parts = [f"{t['role']}: " if len(tables) > 1 else "" for t in tables]
    body = "; ".join(f"{p}timings from AIConfigurator {t['aiconfigurator']} {t['system']}/"
                     f"{t['backend']} {t['backend_version']}, table sha256 {t['sha256'][:12]}"
                     + (", latencies upper bounds: suspect database rows"
                        if t.get("upper_bound") else "")
                     for p, t in zip(parts, tables, strict=True))
    return f"SIMULATED (mocker, {body})"


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


def resolve(stack: StackConfig, folder: Path | None = None) -> MockerTimings:
    """The timings `stack`'s mockers run on: tables from the database for the GPU and TP it
    imitates, else the generic timings with the reason."""
    from stacks.predict.mocker_table import build
    from stacks.predict.predictor import PredictorUnavailable, predict
    try:
        tables = build(stack, folder or tables_dir())
        if tables:
            return from_tables(tables)
        why = predict(stack, "quick").not_predicted or "the database cannot predict this stack"
        return generic(why)
    except PredictorUnavailable as exc:
        return generic(f"AIConfigurator is unavailable ({exc})")
