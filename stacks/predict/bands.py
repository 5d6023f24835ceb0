"""Error bands for PREDICTED figures from AIConfigurator's own measured rows (pure).

AIConfigurator was measured against real serving runs (stacks/predict/silicon.py reads them);
stacks/predict/silicon_estimates.json keeps, for every vLLM row, what was measured and what the
estimate says at the row's exact configuration (`python -m stacks.predict.silicon_refresh`
writes it with the pinned predictor; tests/test_bands.py checks it against the predictor). A
prediction's band is the spread of measured / predicted over the rows nearest to it, times the
prediction: "ITL 9.4 ms, true likely 9.0-12.5 ms (AIConfigurator's own vLLM BF16 rows on
h100_sxm, n=16)". Where no row is near, there is no band, and the reason says why.

"Nearest", in this order (`select`):
1. the same backend and precision class (BF16, FP8, FP8 block, NVFP4, ...; silicon.py says how a
   row's class is read): a BF16 row says nothing of an FP8 kernel's error;
2. the same GPU (a system of ours over another's measurements counts as that one: a100_sxm_40gb
   is an A100, a100_sxm) when it has at least MIN_ROWS such rows, else the nearest GPU
   generation that has: the smallest SM-version distance, then the closest memory bandwidth
   (GPUS), and the band says it was borrowed;
3. the same serving mode (agg / disagg); TTFT never crosses modes (the disagg estimate's TTFT is
   one prefill x a fixed factor, its agg TTFT a mixed-step schedule: one's error says nothing
   of the other's), ITL may, and says so;
4. the same model architecture when it has MIN_ROWS rows, else the same kind (MoE or dense),
   else any, said;
5. of those, the NEAREST rows closest in shape: batch per worker, TP, ISL and OSL, each on a log2
   scale (a doubling counts alike on every axis).
The band is the QUANTILES of measured / predicted over those rows, times the prediction:
(0.0, 1.0), the whole range of the nearest rows' ratios. Chosen by the calibration
(`leave_one_out`, printed by `python -m stacks bands`, held by tests/test_bands.py): a band
built without a row covers that row's measured value in >= 80 % of the cases in every group
(system, precision, mode) with its own GPU's other rows, 80-100 %; the 5th-95th percentiles held
every group but the smallest (gb200 NVFP4 disagg, 13 rows: 77 %).

A band borrowed from another GPU is not calibrated for the GPU it is used on, and says so: held
out all of one GPU's rows, the nearest other GPU's bands covered them in as little as 3 % of the
cases in a group (h100_sxm FP8 block from h200_sxm: AIConfigurator's error differs per GPU
database), and in most groups 50-95 %. The snapshot keeps that cross-GPU calibration
(`calibration`), and a borrowed band's words quote it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).resolve().parent / "silicon_estimates.json"
MIN_ROWS = 8
NEAREST = 16
QUANTILES = (0.0, 1.0)
# SM version and memory bandwidth (TB/s) of the database's systems and ours
# (aiconfigurator_core 0.12.0 systems/<name>.yaml gpu.sm_version, gpu.mem_bw;
# stacks/predict/systems/a100_sxm_40gb.yaml), for the nearest generation; `measured` names the
# system whose rows stand for one of ours.
GPUS: dict[str, tuple[int, float]] = {
    "a100_sxm": (80, 2.039), "a100_sxm_40gb": (80, 1.555), "l40s": (89, 0.864),
    "h100_sxm": (90, 3.35), "h200_sxm": (90, 4.8), "b200_sxm": (100, 7.7), "gb200": (100, 8.0),
    "b300_sxm": (103, 7.75), "gb300": (103, 8.0)}
SAME_GPU = {"a100_sxm_40gb": "a100_sxm"}
BACKEND_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TRT-LLM"}
NOT_RESOLVED = ("not resolved by the model: the predictions' error bands overlap (AIConfigurator's "
                "own measured rows, stacks/predict/bands.py)")


@dataclass(frozen=True)
class EstimatedRow:
    """A measured row and the estimate at its exact configuration (silicon_estimates.json)."""
    id: str
    system: str
    model: str
    architecture: str
    moe: bool
    precision: str
    mode: str
    isl: int
    osl: int
    batch: int
    tp: int
    measured_ttft_ms: float
    measured_tpot_ms: float
    predicted_ttft_ms: float
    predicted_tpot_ms: float

    def ratio(self, metric: str) -> float:
        """measured / predicted of `metric` ("ttft" or "itl")."""
        if metric == "ttft":
            return self.measured_ttft_ms / self.predicted_ttft_ms
        return self.measured_tpot_ms / self.predicted_tpot_ms


@dataclass(frozen=True)
class BandQuery:
    """What a prediction is of: the rows are chosen by it."""
    precision: str
    system: str
    architecture: str
    moe: bool
    mode: str
    batch: int
    tp: int
    isl: int
    osl: int


@dataclass(frozen=True)
class Band:
    """measured / predicted over the nearest rows: `lo`-`hi` (QUANTILES) and the median."""
    metric: str
    lo: float
    hi: float
    median: float
    n: int
    source: str          # "AIConfigurator's own vLLM BF16 rows on h100_sxm, n=16"
    notes: tuple[str, ...] = field(default=())   # where "nearest" had to reach further

    def around(self, predicted: float) -> tuple[float, float]:
        return predicted * self.lo, predicted * self.hi

    def describe(self) -> str:
        """Which rows: "AIConfigurator's own vLLM BF16 rows on h100_sxm, n=16; <notes>"."""
        return "; ".join((self.source, *self.notes))

    def words(self, predicted: float, unit: str = "ms") -> str:
        lo, hi = self.around(predicted)
        return f"true likely {lo:,.1f}-{hi:,.1f} {unit} ({self.describe()})"


@dataclass(frozen=True)
class NoBand:
    metric: str
    reason: str


def borrowed_words(metric: str, path: Path = SNAPSHOT) -> str:
    """What the snapshot's cross-GPU calibration says of borrowed bands of `metric`."""
    try:
        cal = load(path)[0].get("calibration", {}).get("borrowed", {}).get(metric)
    except FileNotFoundError:
        cal = None
    if not cal:
        return ""
    return (f" (held out a GPU's rows, other GPUs' bands covered {cal['min']:.0%}-"
            f"{cal['max']:.0%} of them per group, median {cal['median']:.0%})")


def calibration(rows: list[EstimatedRow]) -> dict[str, Any]:
    """The coverage summary the snapshot keeps: per metric, for bands from the row's own GPU
    (`own`) and from other GPUs only (`borrowed`), the lowest, highest and median coverage
    over the groups with at least MIN_ROWS banded rows."""
    out: dict[str, Any] = {}
    for kind, borrowed in (("own", False), ("borrowed", True)):
        out[kind] = {}
        for metric in ("ttft", "itl"):
            cov = sorted(g["covered"] / g["banded"]
                         for g in leave_one_out(rows, metric, borrowed).values()
                         if g["banded"] >= MIN_ROWS)
            if cov:
                out[kind][metric] = {"min": round(cov[0], 3), "max": round(cov[-1], 3),
                                     "median": round(quantile(cov, 0.5), 3),
                                     "groups": len(cov)}
    return out


def overlap(a_band: tuple[float, float] | None, b_band: tuple[float, float] | None) -> bool:
    """Whether two predicted figures' bands (lo, hi: Band.around) overlap, so the model cannot
    tell which of the two candidates is really better: say NOT_RESOLVED instead of ranking
    them. A missing band (None: no measured rows near) overlaps everything: an unbanded figure
    resolves nothing. Touching edges overlap."""
    if a_band is None or b_band is None:
        return True
    return a_band[0] <= b_band[1] and b_band[0] <= a_band[1]


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def gpu_order(system: str, candidates: set[str]) -> list[str]:
    """`candidates` from the same GPU outwards: SM-version distance, then bandwidth ratio."""
    own = SAME_GPU.get(system, system)
    sm, bw = GPUS.get(system, GPUS.get(own, (0, 1.0)))

    def key(s: str) -> tuple[int, float, float, str]:
        s_sm, s_bw = GPUS.get(s, (10**3, 1.0))
        return (0 if s == own else 1, abs(s_sm - sm), abs(math.log(s_bw / bw)), s)
    return sorted(candidates, key=key)


def _distance(r: EstimatedRow, q: BandQuery) -> float:
    return math.sqrt(sum(math.log2(max(a, 1) / max(b, 1)) ** 2
                         for a, b in ((r.batch, q.batch), (r.tp, q.tp), (r.isl, q.isl),
                                      (r.osl, q.osl))))


def select(rows: list[EstimatedRow], q: BandQuery, metric: str
           ) -> tuple[list[EstimatedRow], str, tuple[str, ...]] | str:
    """The rows nearest to `q` for `metric`, the system they are on and the notes on how far
    "nearest" reached (module docstring), or why there are none."""
    pool = [r for r in rows if r.precision == q.precision]
    if not pool:
        return f"no {q.precision} rows"
    notes: list[str] = []
    if metric == "ttft":
        pool = [r for r in pool if r.mode == q.mode]
        if not pool:
            return f"no {q.precision} {q.mode} rows (TTFT is not compared across modes)"
    chosen = None
    for system in gpu_order(q.system, {r.system for r in pool}):
        on = [r for r in pool if r.system == system]
        if len(on) >= MIN_ROWS:
            chosen = system
            pool = on
            break
    if chosen is None:
        return f"fewer than {MIN_ROWS} {q.precision} rows on any GPU"
    if chosen != SAME_GPU.get(q.system, q.system):
        notes.append(f"no {q.system} rows: nearest GPU generation, not calibrated for "
                     f"{q.system}{borrowed_words(metric)}")
    same_mode = [r for r in pool if r.mode == q.mode]
    if len(same_mode) >= MIN_ROWS:
        pool = same_mode
    else:
        notes.append(f"{' and '.join(sorted({r.mode for r in pool}))} rows: too few {q.mode}")
    kind = "MoE" if q.moe else "dense"
    for pick, note in ((lambda r: r.architecture == q.architecture, None),
                       (lambda r: r.moe == q.moe, f"no {q.architecture} rows: {kind} models"),
                       (lambda r: True, f"too few {kind} rows: any model")):
        narrowed = [r for r in pool if pick(r)]
        if len(narrowed) >= MIN_ROWS:
            pool = narrowed
            if note:
                notes.append(note)
            break
    near = sorted(pool, key=lambda r: (_distance(r, q), r.id))[:NEAREST]
    return near, chosen, tuple(notes)


def band(rows: list[EstimatedRow], q: BandQuery, metric: str, backend: str = "vllm"
         ) -> Band | NoBand:
    """The band of `metric` ("ttft" or "itl") for a prediction of `q`, or why there is none."""
    name = BACKEND_NAMES.get(backend, backend)
    if not rows:
        return NoBand(metric, f"no band: no measured rows loaded ({SNAPSHOT.name} missing: "
                              "`python -m stacks bands --refresh` makes it)")
    picked = select(rows, q, metric)
    if isinstance(picked, str):
        return NoBand(metric, f"no band: {picked} among AIConfigurator's own {name} rows")
    near, system, notes = picked
    ratios = [r.ratio(metric) for r in near]
    models = sorted({r.model.split("/")[-1] for r in near})
    return Band(metric, quantile(ratios, QUANTILES[0]), quantile(ratios, QUANTILES[1]),
                quantile(ratios, 0.5), len(near),
                f"AIConfigurator's own {name} {q.precision} rows on {system}, n={len(near)}",
                (*notes, f"models: {', '.join(models)}"))


@cache
def load(path: Path = SNAPSHOT) -> tuple[dict[str, Any], list[EstimatedRow]]:
    """The snapshot's provenance and its estimated rows (those the estimate answered), read
    once per process."""
    doc = json.loads(path.read_text())
    cols = doc["columns"]
    rows = [EstimatedRow(**dict(zip(cols, values, strict=True))) for values in doc["rows"]]
    meta = {k: v for k, v in doc.items() if k not in ("columns", "rows")}
    return meta, [r for r in rows if r.predicted_ttft_ms > 0 and r.predicted_tpot_ms > 0]


def simulated_band(record: dict[str, Any], metric: str, value: float, *, batch: int, isl: int,
                   osl: int, rows: list[EstimatedRow] | None = None
                   ) -> tuple[tuple[float, float] | None, str]:
    """The band of a SIMULATED figure (the local mockers' or DynoSim's TTFT or ITL, `value`
    ms, at the figure's own batch per worker and ISL / OSL) run on a mocker table whose record
    is `record` (stacks/predict/mocker_table.py MockerTable.record; its "band" entry names the
    GPU, precision, model and mode, `metrics` what the role's timings decide): (lo, hi) ms and
    the words, or None and why there is none. It is the table's source's error, the model's;
    what the simulation adds to it (its fidelity to the engine) is on top. A table on suspect
    rows (record["upper_bound"]) says so in the words."""
    b = record.get("band") or {}
    if metric not in (b.get("metrics") or []):
        return None, f"no band: this table does not decide {metric}"
    q = b.get("query") or {}
    if not q.get("precision"):
        return None, "no band: the table's record names no precision"
    found = band(rows if rows is not None else load()[1],
                 BandQuery(**q, batch=batch, isl=isl, osl=osl), metric, b.get("rows") or "vllm")
    if isinstance(found, NoBand):
        return None, found.reason
    upper = record.get("upper_bound")
    return found.around(value), found.words(value) + (f"; {upper}" if upper else "")


def query_of(r: EstimatedRow) -> BandQuery:
    return BandQuery(r.precision, r.system, r.architecture, r.moe, r.mode, r.batch, r.tp,
                     r.isl, r.osl)


def leave_one_out(rows: list[EstimatedRow], metric: str, borrowed: bool = False
                  ) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per group (system, precision class, mode): of its rows, how many the band built without
    that row (its own query, every other row available: the same-GPU case) covers, and the
    bands' widths (hi / lo). `borrowed`: built without any row of the row's own GPU, as a
    prediction on a GPU with no rows of its own borrows the nearest generation's (the A100 and
    the L40S today). A row with no band counts in `no_band`, not against the coverage."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        others = [x for x in rows if (x.system != r.system if borrowed else x.id != r.id)]
        b = band(others, query_of(r), metric)
        g = out.setdefault((r.system, r.precision, r.mode),
                           {"rows": 0, "banded": 0, "covered": 0, "no_band": 0, "widths": []})
        g["rows"] += 1
        if isinstance(b, NoBand):
            g["no_band"] += 1
            continue
        g["banded"] += 1
        g["covered"] += b.lo - 1e-9 <= r.ratio(metric) <= b.hi + 1e-9
        g["widths"].append(b.hi / b.lo)
    return out
