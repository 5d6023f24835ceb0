"""A mocker timing table scaled by calibrated factors: every prefill time x `prefill`, every
decode step time x `decode` (deterministic: the same table and factors make the same bytes).

A table (stacks/predict/mocker_table.py; keys prefill_isl, prefill_ttft_ms,
decode_active_kv_tokens, decode_context_length, decode_itl, as Dynamo 1.6.1's
dynamo/mocker/utils/planner_profiler_perf_data_converter.py names them) is read by the mocker,
live or in DynoSim, by looking up and interpolating linearly between grid points, so a table
whose values are all multiplied by a factor is the same timing model that factor slower or
faster; the axes (lengths, KV tokens) stay as they are. What scaled it is kept in the record
beside the file (the source table's sha256 and record, the factors, the measured run
directories they were fitted from: workloads/sim/calibrate.py), so a figure simulated on it
can say it stands on a calibrated table, and on which measurements.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path
from typing import Any

from stacks.predict.mocker_table import MockerTable

PREFILL_KEYS = ("prefill_ttft_ms",)
DECODE_KEYS = ("decode_itl",)
AXES = ("prefill_isl", "decode_active_kv_tokens", "decode_context_length")
EPOCH = (1980, 1, 1, 0, 0, 0)    # the zip format's first date


class TableError(ValueError):
    """The table or the factors cannot be scaled: the message names what and the fix."""


def _check_factor(name: str, value: float) -> float:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise TableError(f"{name} factor {value!r}: a scale factor is a finite number > 0 "
                         "(1.0 leaves that phase as the table has it)")
    return float(value)


def scaled_arrays(arrays: dict[str, Any], prefill: float, decode: float) -> dict[str, Any]:
    """The table's arrays with every prefill time x `prefill` and decode step time x
    `decode`; the axes unchanged."""
    import numpy as np

    missing = [k for k in (*AXES, *PREFILL_KEYS, *DECODE_KEYS) if k not in arrays]
    if missing:
        raise TableError(f"not a mocker timing table: missing {', '.join(missing)} (make one "
                         "with stacks/predict/mocker_table.py)")
    p, d = _check_factor("prefill", prefill), _check_factor("decode", decode)
    out = {k: np.asarray(v) for k, v in arrays.items()}
    for k in PREFILL_KEYS:
        out[k] = out[k] * p
    for k in DECODE_KEYS:
        out[k] = out[k] * d
    return out


def npz_bytes(arrays: dict[str, Any]) -> bytes:
    """The table as .npz bytes: a zip of one .npy per key, as numpy.savez writes it, but with
    the keys sorted and a fixed member date (numpy stamps the current time), so the same arrays
    always give the same bytes and the sha256 names the content."""
    import zipfile

    import numpy as np

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for key in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(arrays[key]), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{key}.npy", date_time=EPOCH), member.getvalue())
    return buf.getvalue()


def scale_table(source: Path, prefill: float, decode: float, folder: Path,
                fitted_from: list[str], source_record: dict | None = None,
                role: str = "worker") -> MockerTable:
    """Write `source` scaled by (prefill, decode) into `folder` with its record (a .json
    beside it); an existing file of the same name is the same table and record."""
    import numpy as np

    if not source.exists():
        raise TableError(f"timing table {source} does not exist: build it first "
                         "(stacks/predict/mocker_table.py build)")
    raw = source.read_bytes()
    with np.load(io.BytesIO(raw)) as z:
        arrays = {k: z[k] for k in z.files}
    data = npz_bytes(scaled_arrays(arrays, prefill, decode))
    calibration = {"source_sha256": hashlib.sha256(raw).hexdigest(), "source_file": source.name,
                   "prefill_factor": float(prefill), "decode_factor": float(decode),
                   "fitted_from": sorted(fitted_from)}
    digest = hashlib.sha256(json.dumps(calibration, sort_keys=True).encode()).hexdigest()[:16]
    path = folder / f"{source.stem}-cal-{digest}.npz"
    base = dict(source_record or {})
    record = {**base, "sha256": hashlib.sha256(data).hexdigest(), "file": path.name,
              "source": f"{base.get('source', source.name)}, calibrated: prefill x"
                        f"{prefill:.3f}, decode x{decode:.3f}",
              "calibration": calibration}
    folder.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_bytes() != data:
        path.write_bytes(data)
    path.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return MockerTable(role, path, record)
