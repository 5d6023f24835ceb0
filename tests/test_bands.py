"""Error bands from AIConfigurator's own measured rows (stacks/predict/bands.py, silicon.py):
which rows are "nearest", what a band is, when there is none, its calibration on the rows
themselves, and the snapshot against the installed predictor (that one needs .venv-predict)."""

from __future__ import annotations

import pytest

from stacks.predict import bands
from stacks.predict.bands import (
    NOT_RESOLVED,
    BandQuery,
    EstimatedRow,
    NoBand,
    band,
    leave_one_out,
    overlap,
)
from stacks.predict.silicon import precision_class, row_of

QWEN32 = "Qwen3ForCausalLM"
QWEN_MOE = "Qwen3MoeForCausalLM"


def _row(i, system="h100_sxm", precision="BF16", mode="agg", arch=QWEN32, batch=16, tp=4,
         isl=1024, osl=512, ttft=(100.0, 100.0), tpot=(10.0, 10.0)):
    """A row measured at ttft[0] / tpot[0] and estimated at ttft[1] / tpot[1]."""
    return EstimatedRow(f"r{i}", system, "Qwen/Qwen3-32B", arch, arch != QWEN32, precision,
                        mode, isl, osl, batch, tp, ttft[0], tpot[0], ttft[1], tpot[1])


def _query(system="a100_sxm_40gb", precision="BF16", mode="agg", arch=QWEN_MOE, batch=16):
    return BandQuery(precision, system, arch, arch == QWEN_MOE, mode, batch, 4, 1024, 512)


def test_a_band_is_the_spread_of_measured_over_predicted_times_the_prediction():
    rows = [_row(i, tpot=(10.0 * (0.9 + 0.02 * i), 10.0)) for i in range(16)]
    b = band(rows, _query(), "itl")
    assert not isinstance(b, NoBand)
    # the range of the nearest rows' ratios (QUANTILES 0 and 1: the calibration's choice)
    assert b.n == 16 and b.lo == pytest.approx(0.9) and b.hi == pytest.approx(0.9 + 0.02 * 15)
    assert b.median == pytest.approx(0.9 + 0.02 * 7.5)
    lo, hi = b.around(9.4)
    assert (lo, hi) == (pytest.approx(9.4 * b.lo), pytest.approx(9.4 * b.hi))
    assert b.words(9.4).startswith(f"true likely {9.4 * b.lo:.1f}-{9.4 * b.hi:.1f} ms "
                                   "(AIConfigurator's own vLLM BF16 rows on h100_sxm, n=16")


def test_nearest_is_the_same_gpu_else_the_nearest_generation_and_says_so():
    """An A100 40 GB prediction is an a100_sxm one; without A100 rows it borrows Hopper's, the
    closer bandwidth first (h100 3.35 TB/s before h200 4.8), never Blackwell's, and says so."""
    h100 = [_row(i, system="h100_sxm") for i in range(10)]
    h200 = [_row(i + 10, system="h200_sxm") for i in range(10)]
    b200 = [_row(i + 20, system="b200_sxm") for i in range(10)]
    b = band(h100 + h200 + b200, _query(), "itl")
    assert not isinstance(b, NoBand)
    assert "rows on h100_sxm" in b.source and "nearest GPU generation" in b.describe()
    own = [_row(i + 30, system="a100_sxm") for i in range(10)]
    b = band(h100 + own, _query(), "itl")
    assert not isinstance(b, NoBand)
    assert "rows on a100_sxm" in b.source and "nearest GPU" not in b.describe()
    b = band(h100[:5] + h200, _query(), "itl")      # too few on h100: the next one
    assert not isinstance(b, NoBand) and "h200_sxm" in b.source


def test_precision_never_crosses_and_ttft_never_crosses_modes():
    rows = [_row(i) for i in range(12)]
    assert isinstance(band(rows, _query(precision="FP8 block"), "itl"), NoBand)
    disagg = _query(mode="disagg")
    got = band(rows, disagg, "ttft")
    assert isinstance(got, NoBand) and "no BF16 disagg rows" in got.reason
    itl = band(rows, disagg, "itl")
    assert not isinstance(itl, NoBand) and "too few disagg" in itl.describe()


def test_the_model_narrows_to_its_architecture_then_its_kind():
    dense = [_row(i, arch=QWEN32, tpot=(20.0, 10.0)) for i in range(10)]
    moe = [_row(i + 10, arch="MiniMaxM2ForCausalLM", tpot=(5.0, 10.0)) for i in range(10)]
    moe_q = _query(arch=QWEN_MOE)
    b = band(dense + moe, moe_q, "itl")
    assert not isinstance(b, NoBand) and b.median == pytest.approx(0.5)
    assert f"no {QWEN_MOE} rows: MoE models" in b.describe()
    b = band(dense, moe_q, "itl")      # no MoE rows at all: any model, said
    assert not isinstance(b, NoBand) and "any model" in b.describe()


def test_the_nearest_rows_are_the_closest_in_shape():
    far = [_row(i, batch=256, tpot=(30.0, 10.0)) for i in range(16)]
    near = [_row(i + 16, batch=16, tpot=(11.0, 10.0)) for i in range(16)]
    b = band(far + near, _query(batch=16), "itl")
    assert not isinstance(b, NoBand) and b.lo == b.hi == pytest.approx(1.1)


def test_no_rows_near_gives_no_band_and_says_why():
    got = band([_row(i) for i in range(bands.MIN_ROWS - 1)], _query(), "itl")
    assert isinstance(got, NoBand) and got.reason.startswith("no band:")
    assert f"fewer than {bands.MIN_ROWS} BF16 rows" in got.reason


def test_overlapping_bands_are_not_resolved():
    assert overlap((9.0, 12.5), (12.0, 13.0)) and overlap((9.0, 12.5), (12.5, 13.0))
    assert not overlap((9.0, 12.4), (12.5, 13.0))
    assert overlap(None, (1.0, 2.0)) and overlap((1.0, 2.0), None)
    assert NOT_RESOLVED.startswith("not resolved by the model")


def test_a_silicon_row_is_its_csv_configuration_read_against_the_checkpoint():
    """The CSV's columns are cli_estimate's kwargs; `fp8` on a block-scaled checkpoint is FP8
    block; an unquantized checkpoint labelled fp8 ran FP8 (its label passed on); the row's
    shape is its decode worker's."""
    block = {"architecture": QWEN_MOE, "num_experts": 128, "gemm": "fp8_block",
             "moe": "fp8_block"}
    raw = {"id": "x", "backend": "vllm", "model_path": "Qwen/Qwen3-235B-A22B-FP8",
           "system": "h200_sxm", "mode": "agg", "isl": "1000", "osl": "100",
           "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8", "batch_size": "16.0",
           "tp_size": "2.0", "moe_tp_size": "2.0", "moe_ep_size": "1.0",
           "silicon_ttft_ms": "243.96", "silicon_tpot_ms": "52.16"}
    r = row_of(raw, {"Qwen/Qwen3-235B-A22B-FP8": block})
    assert not isinstance(r, str) and r.precision == "FP8 block"
    assert r.kwargs["gemm_quant_mode"] == "fp8_block" and r.kwargs["moe_tp_size"] == 2
    assert (r.batch, r.tp, r.measured_tpot_ms) == (16, 2, 52.16)
    dense = {"architecture": QWEN32, "num_experts": 0, "gemm": "bfloat16", "moe": "bfloat16"}
    r = row_of({**raw, "model_path": "Qwen/Qwen3-32B", "moe_quant_mode": ""},
               {"Qwen/Qwen3-32B": dense})
    assert not isinstance(r, str) and r.precision == "FP8" and "moe_tp_size" not in r.kwargs
    assert row_of({**raw, "model_path": "x/y"}, {}) == "model not in the database"
    assert precision_class("bfloat16", "w4a16_mxfp4", True) == "MXFP4"


@pytest.fixture(scope="module")
def snapshot():
    return bands.load()


def test_the_bands_cover_held_out_rows_at_least_80_percent_of_the_time_per_group(snapshot):
    """Leave-one-out on AIConfigurator's own rows: the band built without a row covers that
    row's measured / predicted in >= 80 % of the cases, per group (system, precision, mode) of
    at least MIN_ROWS banded rows, for TTFT and ITL; `python -m stacks bands` prints the table."""
    _, rows = snapshot
    for metric in ("ttft", "itl"):
        groups = leave_one_out(rows, metric)
        judged = {k: g for k, g in groups.items() if g["banded"] >= bands.MIN_ROWS}
        assert judged, metric
        low = {k: round(g["covered"] / g["banded"], 3) for k, g in judged.items()
               if g["covered"] < 0.8 * g["banded"]}
        assert not low, (metric, low)


def test_the_snapshot_is_of_the_pinned_predictor(snapshot):
    meta, rows = snapshot
    pins = (bands.SNAPSHOT.parents[2] / "requirements-predict.txt").read_text()
    assert f"aiconfigurator=={meta['aiconfigurator']}" in pins
    assert meta["backend"] == "vllm" and len(rows) > 500


def test_a_simulated_figure_on_a_table_gets_the_tables_band_at_its_own_shape():
    """A mocker table's record names its GPU, precision, model and mode; a SIMULATED figure
    on it takes the band of the rows nearest that and its own shape, for the metrics the
    role's timings decide."""
    from stacks.predict.bands import simulated_band
    rows = [_row(i, tpot=(10.0 * (1.0 + 0.01 * i), 10.0)) for i in range(16)]
    record = {"band": {"query": {"precision": "BF16", "system": "a100_sxm_40gb",
                                 "architecture": QWEN_MOE, "moe": True, "mode": "agg",
                                 "tp": 4},
                       "metrics": ["ttft", "itl"], "rows": "vllm"}}
    got, words = simulated_band(record, "itl", 9.4, batch=16, isl=1024, osl=512, rows=rows)
    assert got is not None and got == (pytest.approx(9.4), pytest.approx(9.4 * 1.15))
    assert "AIConfigurator's own vLLM BF16 rows on h100_sxm" in words
    decode = {"band": {**record["band"], "metrics": ["itl"]}}
    assert simulated_band(decode, "ttft", 50.0, batch=16, isl=1024, osl=512, rows=rows)[0] \
        is None
    bound = {**record, "upper_bound": "UPPER BOUND: suspect"}
    assert "UPPER BOUND" in simulated_band(bound, "itl", 9.4, batch=16, isl=1024, osl=512,
                                           rows=rows)[1]


@pytest.mark.predictor
def test_the_snapshot_is_what_the_installed_predictor_says(snapshot, tmp_path, monkeypatch):
    """The rows and the estimates the bands stand on are the installed AIConfigurator's: the
    same silicon_sample.csv (sha256), and two rows (one BF16 dense, one FP8 block MoE)
    re-estimated at their exact configuration give the snapshot's figures. A new
    AIConfigurator fails here: `python -m stacks bands --refresh`."""
    from stacks.predict.predictor import CACHE_VAR, run
    from stacks.predict.silicon import models_of
    monkeypatch.setenv(CACHE_VAR, str(tmp_path))
    meta, rows = snapshot
    picks = [next(r for r in rows if r.precision == p and r.mode == "agg")
             for p in ("BF16", "FP8 block")]
    (info, silicon, checkpoints) = run([
        {"op": "versions"}, {"op": "silicon_rows", "backend": "vllm"},
        {"op": "checkpoint", "models": sorted({r.model for r in picks})}], [])
    assert (info["aiconfigurator"], info["aiconfigurator_core"]) == \
        (meta["aiconfigurator"], meta["aiconfigurator_core"])
    assert silicon["sha256"] == meta["silicon_sample_sha256"]
    raws = [next(x for x in silicon["rows"] if x["id"] == r.id) for r in picks]
    assert sorted({r.model for r in picks}) == models_of(raws)
    answers = run([{"op": "estimate", "kwargs": row_of(x, checkpoints).kwargs} for x in raws],
                  [])
    for r, a in zip(picks, answers, strict=True):
        assert a["ttft_ms"] == pytest.approx(r.predicted_ttft_ms, rel=1e-3), r.id
        assert a["tpot_ms"] == pytest.approx(r.predicted_tpot_ms, rel=1e-3), r.id
