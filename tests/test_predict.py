"""Predictions (stacks/predict/): the stack's steps and workers as AIConfigurator queries, the
answers as the PREDICTED table, and the figures equal to `aiconfigurator cli estimate`'s for
the same configuration (that one needs .venv-predict: skipped locally without it, failed in
CI)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reports.tables.goodput import DEFAULT_SLOS
from stacks.config.loader import load_stack
from stacks.predict import predictor
from stacks.predict.rows import SLOS, row
from stacks.predict.shapes import StepShape, estimate_kwargs, layout, step_shapes
from stacks.predict.systems import systems_request
from workloads.steps import plan

CHECKPOINT = {"architecture": "Qwen3MoeForCausalLM", "num_experts": 128, "quant_algo": None,
              "kv_cache_quant_algo": None, "gemm": "bfloat16", "moe": "bfloat16"}
ANSWER = {"ttft_ms": 100.0, "tpot_ms": 10.0, "request_latency_ms": 5000.0,
          "tokens_per_s": 1600.0, "tokens_per_s_per_user": 100.0, "concurrency": 16,
          "backend_version": "0.14.0", "system": "a100_sxm_40gb"}


def _stack(name):
    s = load_stack(name)
    return s, (load_stack(s.cluster.attach_to) if s.cluster.attach_to else None)


def test_predicted_step_ids_are_the_planned_ones():
    """Each prediction is keyed by the id the runner gives the step (the reports join on it)."""
    s, _ = _stack("agg-a100")
    for scale in ("quick", "full"):
        shapes, skipped = step_shapes(s, scale)
        planned = {st.id for st in plan(s, scale)}
        assert {sh.id for sh in shapes} <= planned and shapes and not skipped


def test_a_fully_cached_prompt_still_computes_one_token():
    s, _ = _stack("agg-a100")
    share = {sh.id: sh for sh in step_shapes(s, "full")[0]}
    assert share["prefix_cache/share100"].prefix == 2047
    assert share["prefix_cache/share050"].prefix == 1024


def test_agg_splits_the_concurrency_over_replicas_and_prices_the_gpus():
    s, base = _stack("agg-a100")
    lay = layout(s, base)
    assert not isinstance(lay, str) and lay.gpus == 16
    assert lay.gpu_usd_per_hour == pytest.approx(2 * 21.957642)
    kw = estimate_kwargs(s.model.id, lay, StepShape("concurrency_sweep/c16", "cs", 16, 1024, 512),
                         "bfloat16")
    assert (kw["mode"], kw["batch_size"], kw["tp_size"], kw["system_name"]) == \
        ("agg", 4, 4, "a100_sxm_40gb")
    kw = estimate_kwargs(s.model.id, lay, StepShape("c6", "cs", 6, 1024, 512), "bfloat16")
    assert kw["batch_size"] == 2   # 4 replicas: the busiest holds 2


def test_disagg_with_a_decode_tier_on_another_gpu():
    s, base = _stack("disagg-l40s-decode")
    lay = layout(s, base)
    assert not isinstance(lay, str) and lay.gpus == 12
    assert lay.gpu_usd_per_hour == pytest.approx(21.957642 + 10.49264)
    kw = estimate_kwargs(s.model.id, lay, StepShape("c16", "cs", 16, 1024, 512), "bfloat16")
    assert (kw["system_name"], kw["decode_system_name"], kw["prefill_num_workers"],
            kw["decode_num_workers"], kw["decode_batch_size"]) == \
        ("a100_sxm_40gb", "l40s", 2, 1, 16)
    assert [x["name"] for x in systems_request(lay.systems)] == ["a100_sxm_40gb"]


def test_a_row_scales_the_configuration_to_the_step():
    s, base = _stack("agg-a100")
    lay = layout(s, base)
    assert not isinstance(lay, str)
    r = row(StepShape("concurrency_sweep/c8", "concurrency_sweep", 8, 1024, 512), lay,
            {**ANSWER, "concurrency": 2})   # one replica at bs 2; 4 replicas busy
    assert r.output_tok_s == pytest.approx(6400.0)
    assert r.tok_s_per_gpu == pytest.approx(400.0)
    assert r.usd_per_1m_output == pytest.approx(2 * 21.957642 / (6400 * 3600) * 1e6)
    assert (r.ttft_ms, r.itl_ms) == (100.0, 10.0)


def test_the_slos_are_the_reports_own():
    assert [(x.name, x.ttft_ms, x.min_tok_s_per_user, x.itl_ms) for x in SLOS] == \
        [(x.name, x.ttft_ms, x.min_tok_s_per_user, x.itl_ms) for x in DEFAULT_SLOS]


def _fake_runner(monkeypatch, models, calls=None):
    def fake(queries, systems):
        if calls is not None:
            calls.append(len(queries))
        out = []
        for q in queries:
            if q["op"] == "versions":
                out.append({"aiconfigurator": "0.12.0", "aiconfigurator_core": "0.12.0",
                            "models": models,
                            "databases": {"a100_sxm_40gb": {"vllm": ["0.14.0"]},
                                          "l40s": {"vllm": ["0.24.0"]}},
                            "latest": {"a100_sxm_40gb": "0.14.0", "l40s": "0.24.0"}})
            elif q["op"] == "checkpoint":
                out.append({m: CHECKPOINT if m in models else {"error": "not in the database"}
                            for m in q["models"]})
            else:
                c = q["kwargs"].get("batch_size") or q["kwargs"]["decode_batch_size"]
                out.append({**ANSWER, "concurrency": c,
                            "backend_version": "0.14.0-0.24.0"
                            if q["kwargs"].get("decode_system_name") else "0.14.0"})
        return out
    monkeypatch.setattr(predictor, "run_uncached", fake)


def test_a_model_the_database_lacks_predicts_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv(predictor.CACHE_VAR, str(tmp_path))
    monkeypatch.setattr(predictor, "predictor_python", lambda: tmp_path)
    _fake_runner(monkeypatch, ["Qwen/Qwen3-8B"])
    p = predictor.predict(*_reorder(_stack("agg-b200-motif3"), "full"))
    assert not p.rows and "not in AIConfigurator 0.12.0's database" in p.not_predicted


def _reorder(stack_base, scale):
    s, base = stack_base
    return s, scale, base


def test_a_prediction_names_its_database_and_departures_and_is_cached(monkeypatch, tmp_path):
    monkeypatch.setenv(predictor.CACHE_VAR, str(tmp_path))
    calls: list[int] = []
    _fake_runner(monkeypatch, ["Qwen/Qwen3-30B-A3B"], calls)
    p = predictor.predict(*_reorder(_stack("disagg-l40s-decode"), "full"))
    assert p.label == "PREDICTED" and p.rows and p.not_predicted is None
    assert p.database["backend_versions"] == {"a100_sxm_40gb": "0.14.0", "l40s": "0.24.0"}
    text = " ".join(p.departures)
    for needle in ("a100_sxm_40gb: database measured on vLLM 0.14.0",
                   "l40s: database measured on vLLM 0.24.0", "runs vLLM 0.31.0",
                   "1.555 TB/s", "KV transfer", "prefix reuse"):
        assert needle in text, needle
    assert "speculative" not in text and "KV-aware" not in text
    runs = len(calls)       # one runner per core (predictor.run_spread)
    again = predictor.predict(*_reorder(_stack("disagg-l40s-decode"), "full"))
    assert again.rows == p.rows and runs and len(calls) == runs   # the second: from the cache


# --- against AIConfigurator's own command line -------------------------------------------------

def _cli(args: list[str], systems_dir: str) -> tuple[float, float, float | None]:
    """TTFT, TPOT and (agg) the prefill step's time its debug log prints
    (aiconfigurator_core sdk/backends/base_backend.py run_agg: "ttft: prefill_step=...")."""
    python = predictor.predictor_python()
    assert python is not None
    cli = python.parent / "aiconfigurator"
    done = subprocess.run([str(cli), "cli", "estimate", "--model-path", "Qwen/Qwen3-30B-A3B",
                           "--backend", "vllm", "--systems-paths", systems_dir,
                           "--log-level", "DEBUG", *args],
                          capture_output=True, text=True, timeout=900, check=True)
    out = done.stdout
    ttft = re.search(r"TTFT:\s+([\d.,]+) ms", out)
    tpot = re.search(r"TPOT:\s+([\d.,]+) ms", out)
    assert ttft and tpot, out[-2000:]
    prefill = re.search(r"ttft: prefill_step=([\d.]+)ms", out + done.stderr)
    return (float(ttft[1].replace(",", "")), float(tpot[1].replace(",", "")),
            float(prefill[1]) if prefill else None)


@pytest.mark.predictor
def test_predicted_ttft_and_itl_equal_aiconfigurator_cli_estimate(tmp_path, monkeypatch):
    """agg-a100 and disagg-l40s-decode at c16: `stacks predict`'s TTFT and ITL, before the A100
    40 GB's bandwidth stretch, within 2 % of `aiconfigurator cli estimate` run by hand for the
    same configuration."""
    monkeypatch.setenv(predictor.CACHE_VAR, "")
    python = predictor.predictor_python()
    assert python is not None
    agg, agg_base = _stack("agg-a100")
    dis, dis_base = _stack("disagg-l40s-decode")
    lay = layout(agg, agg_base)
    assert not isinstance(lay, str)
    code = ("import json, pathlib, sys; sys.path.insert(0, sys.argv[1]); import aic_runner; "
            "print(aic_runner.make_systems_dir(json.loads(sys.argv[2]), "
            "pathlib.Path(sys.argv[3])))")
    systems_dir = subprocess.run(
        [str(python), "-c", code, str(predictor.RUNNER.parent),
         json.dumps(systems_request(lay.systems)), str(tmp_path)],
        capture_output=True, text=True, check=True).stdout.strip()
    want_agg = _cli(["--system", "a100_sxm_40gb", "--estimate-mode", "agg", "--tp-size", "4",
                     "--moe-tp-size", "4", "--moe-ep-size", "1", "--isl", "1024", "--osl", "512",
                     "--batch-size", "4"], systems_dir)
    want_dis = _cli(["--system", "a100_sxm_40gb", "--decode-system", "l40s", "--estimate-mode",
                     "disagg", "--prefill-tp-size", "4", "--prefill-moe-tp-size", "4",
                     "--prefill-moe-ep-size", "1", "--prefill-batch-size", "1",
                     "--prefill-num-workers", "2", "--decode-tp-size", "4",
                     "--decode-moe-tp-size", "4", "--decode-moe-ep-size", "1",
                     "--decode-batch-size", "16", "--decode-num-workers", "1",
                     "--isl", "1024", "--osl", "512"], systems_dir)
    for stack, base, (ttft, itl, prefill) in ((agg, agg_base, want_agg),
                                              (dis, dis_base, want_dis)):
        wl = stack.workloads
        c16 = wl.model_copy(update={"concurrency_sweep": wl.concurrency_sweep.model_copy(
            update={"concurrencies": [16]})}).restricted_to(["concurrency_sweep"], stack.name)
        only = stack.model_copy(update={"workloads": c16})
        got = {r.step: r for r in predictor.predict(only, "full", base).rows}
        r = got["concurrency_sweep/c16"]
        # the estimate as AIConfigurator gives it; the A100 40 GB's bandwidth stretch on top
        # (stacks/predict/bandwidth.py) is ours, kept beside it
        assert r.stretch is not None, stack.name
        assert r.stretch["unstretched_ttft_ms"] == pytest.approx(ttft, rel=0.02), stack.name
        assert r.stretch["unstretched_itl_ms"] == pytest.approx(itl, rel=0.02), stack.name
        # what the TTFT adds to the prefill kernels' time (the dispatch term and queueing
        # factor a mocker on the table does not run): AIConfigurator's TTFT minus its own
        # logged prefill step; the disagg estimate adds none
        if prefill is None:
            assert r.ttft_model_terms_ms is None, stack.name
        else:
            # (on the stretched basis: the row's TTFT less the stretched prefill step)
            assert r.ttft_model_terms_ms == pytest.approx(
                r.ttft_ms - prefill * r.stretch["prefill"], abs=0.05 + 0.005 * ttft)


def test_the_runner_imports_nothing_of_the_project():
    """It runs in the predictor's environment, which holds none of dynamo-bench."""
    src = predictor.RUNNER.read_text()
    assert not re.search(r"^\s*(from|import) (stacks|workloads|reports|components)\b", src,
                         re.M)


def _pred(name, gpus, disagg, systems, sweep, spread=0.05, upper=None):
    """A prediction of `sweep` {c: (TTFT, ITL, tok/s/GPU, $)} whose bands are ±`spread` (None:
    no band)."""
    from stacks.predict.rows import PredictedRow, Prediction

    def band(x):
        return None if spread is None else (x * (1 - spread), x * (1 + spread))
    rows = [PredictedRow(f"concurrency_sweep/c{c}", "concurrency_sweep", c, 1024, 512, 0,
                         ttft_ms=t, itl_ms=i, request_latency_ms=1.0, output_tok_s=g * gpus,
                         tok_s_per_gpu=g, tok_s_per_user=1000 / i, usd_per_1m_output=u,
                         ttft_band_ms=band(t), itl_band_ms=band(i), upper_bound=upper)
            for c, (t, i, g, u) in sweep.items()]
    return Prediction(name, rows=rows, gpus=gpus, disaggregated=disagg, tier_systems=systems)


def test_the_plan_questions_compare_like_with_like():
    from stacks.predict.questions import answers
    agg = _pred("agg", 16, False, ["a"], {1: (60, 4, 15, 50.0), 64: (100, 9, 400, 2.0)})
    twin = _pred("agg-kv", 16, False, ["a"], {1: (60, 4, 15, 50.0), 64: (100, 9, 400, 2.0)})
    dis = _pred("dis", 16, True, ["a", "a"], {1: (50, 4.5, 14, 55.0), 64: (55, 19, 420, 1.9)})
    l40 = _pred("dis-l40s", 12, True, ["a", "l40s"],
                {1: (50, 5, 16, 45.0), 64: (55, 40, 130, 5.0)})
    q1, q2, q3, q4 = answers([agg, twin, dis, l40])
    assert len(q1.lines) == 2
    assert all(line.startswith("dis vs agg (16 GPUs)") for line in q1.lines)
    assert q2.lines == ["dis-l40s (decode on l40s) vs dis c1: $45.00 vs $55.00 per 1M output "
                        "tokens (cheaper)",
                        "dis-l40s (decode on l40s) vs dis c64: $5.00 vs $1.90 per 1M output "
                        "tokens (dearer)"]
    assert "dis-l40s ttft2s-itl25ms: meets it at c1; best c1 16.0 tok/s/GPU" in q3.lines
    # disagg wins at c64 (more tok/s/GPU, both SLOs met), not at c1 (fewer); the kv twin that
    # predicts alike is compared once
    assert q4.lines == ["dis over agg (sla-tps50-ttft5s): c64",
                        "dis over agg (ttft2s-itl25ms): c64"]


def test_the_mocker_grid_rises_strictly():
    from stacks.predict.mocker_table import grid
    g = grid()
    for axis in g.values():
        assert all(a < b for a, b in zip(axis, axis[1:], strict=False))
    assert g["kv"][-1] >= 800_000 and g["ctx"][-1] == g["prefill_isl"][-1] == 32_768


@pytest.mark.predictor
def test_the_mocker_table_is_what_dynamo_reads_and_is_recorded(tmp_path, monkeypatch):
    """The five arrays Dynamo 1.6.1's mocker reads (float64, decode_itl shaped kv x ctx), the
    record's sha256 the file's, and a second build the same file."""
    import hashlib

    import numpy as np

    from stacks.predict import mocker_table
    s, _ = _stack("local-agg")
    fake = predictor.DatabaseFacts(layout(s, None), database={"aiconfigurator": "0.12.0",
                                             "aiconfigurator_core": "0.12.0", "backend": "vllm",
                                             "backend_versions": {"a100_sxm_40gb": "0.14.0"},
                                             "kv_cache": "bfloat16",
                                             "model": {"precision": "BF16", "moe": True,
                                                       "architecture": "Qwen3MoeForCausalLM"},
                                             "bands": {"backend": "vllm"}})
    monkeypatch.setattr(mocker_table, "database_facts", lambda *a: fake)
    (t,) = mocker_table.build(s, tmp_path)
    z = np.load(t.path)
    assert set(z.files) == {"prefill_isl", "prefill_ttft_ms", "decode_active_kv_tokens",
                            "decode_context_length", "decode_itl"}
    assert all(z[k].dtype == np.float64 for k in z.files)
    assert z["decode_itl"].shape == (len(z["decode_active_kv_tokens"]),
                                     len(z["decode_context_length"]))
    assert np.all(np.diff(z["prefill_ttft_ms"]) > -1e-6)   # a longer prefill is no faster
    assert t.record["sha256"] == hashlib.sha256(t.path.read_bytes()).hexdigest()
    assert t.record["source"].startswith("SIMULATED from AIConfigurator 0.12.0")
    # the workers' sharding, KV cache and the 40 GB part's stretch, and what a SIMULATED
    # figure on the table stands on (stacks/predict/bands.py simulated_band)
    assert (t.record["moe_tp"], t.record["moe_ep"], t.record["kv_cache"]) == (4, 1, "bfloat16")
    assert t.record["stretch_from"] == "a100_sxm" and t.record["upper_bound"] is None
    assert t.record["band"]["query"] == {"precision": "BF16", "system": "a100_sxm_40gb",
                                         "architecture": "Qwen3MoeForCausalLM", "moe": True,
                                         "mode": "agg", "tp": 4}
    assert t.record["band"]["metrics"] == ["ttft", "itl"]
    mtime = t.path.stat().st_mtime_ns
    (again,) = mocker_table.build(s, tmp_path)
    assert again.path == t.path and again.path.stat().st_mtime_ns == mtime


def test_a_disagg_roles_table_charges_the_steps_its_prediction_charges():
    """A disagg decode mocker is compared with AIConfigurator's disagg TPOT, which is the
    decode step x 1.08 (and its TTFT the prefill step x 1.1); an agg worker with the agg
    estimate, which scales nothing. Each role's table query carries its prediction's scales,
    and they are in the table's cache key (a table made without them is not reused)."""
    from stacks.predict.mocker_table import table_query
    from stacks.predict.predictor import cache_key
    from stacks.predict.shapes import Tier
    from stacks.predict.systems import SYSTEMS
    tier = Tier(SYSTEMS["A100-SXM4-40GB"], 4, 2)
    agg = table_query("m", "worker", tier, "0.14.0", "bfloat16")
    pre = table_query("m", "prefill", tier, "0.14.0", "bfloat16")
    dec = table_query("m", "decode", tier, "0.14.0", "bfloat16")
    assert (agg["prefill_scale"], agg["decode_scale"]) == (1.0, 1.0)
    assert (pre["prefill_scale"], pre["decode_scale"]) == (1.1, 1.0)
    assert (dec["prefill_scale"], dec["decode_scale"]) == (1.0, 1.08)
    assert len({cache_key(q, []) for q in (agg, pre, dec)}) == 3


@pytest.mark.predictor
def test_the_role_scales_are_aiconfigurators_own():
    """The installed AIConfigurator's disagg correction scales (cli/api.py) are the ones the
    tables charge: a new AIConfigurator that changes them fails here, not in a demo."""
    from stacks.predict.mocker_table import ROLE_SCALES
    python = predictor.predictor_python()
    assert python is not None
    code = ("import json, warnings; warnings.filterwarnings('ignore'); "
            "from aiconfigurator.cli import api; print(json.dumps("
            "[api.DEFAULT_PREFILL_LATENCY_CORRECTION_SCALE, "
            "api.DEFAULT_DECODE_LATENCY_CORRECTION_SCALE]))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    assert json.loads(out) == [ROLE_SCALES["prefill"][0], ROLE_SCALES["decode"][1]]


@pytest.mark.predictor
def test_the_disagg_decode_table_gives_the_predicted_itl(tmp_path, monkeypatch):
    """local-disagg: the decode mocker's table at a step's mid-request context (ISL + OSL/2)
    and batch (active KV tokens = batch x that context, how Dynamo 1.6.1's mocker looks it up)
    is the predicted ITL of that step within 1 %: the same quantity on both sides."""
    import numpy as np

    from stacks.predict import mocker_table
    s, _ = _stack("local-disagg")
    monkeypatch.setenv(predictor.CACHE_VAR, str(tmp_path / "cache"))
    wl = s.workloads
    sweep = wl.model_copy(update={"concurrency_sweep": wl.concurrency_sweep.model_copy(
        update={"concurrencies": [1, 16]})}).restricted_to(["concurrency_sweep"], s.name)
    s = s.model_copy(update={"workloads": sweep})
    rows = {r.concurrency: r for r in predictor.predict(s, "quick").rows}
    tables = {t.role: t for t in mocker_table.build(s, tmp_path)}
    z = np.load(tables["decode"].path)
    kv, ctx, itl = (z["decode_active_kv_tokens"], z["decode_context_length"], z["decode_itl"])
    for c, r in rows.items():
        mid = r.isl + r.osl // 2
        i, j = int(np.searchsorted(kv, c * mid)), int(np.searchsorted(ctx, mid))
        assert (kv[i], ctx[j]) == (c * mid, mid)   # on the grid: no interpolation in between
        assert itl[i, j] == pytest.approx(r.itl_ms, rel=0.01), c


def test_a_disagg_prediction_says_its_ttft_does_not_rise_with_concurrency():
    """AIConfigurator's disagg TTFT is one batch-1 prefill x 1.1 x a fixed 1.8 at every step
    (disagg-a100: 56.2 ms at c1 ... c64): the departures say so for disagg stacks only."""
    from stacks.predict.systems import DISAGG_TTFT, departures
    for name, disagg in (("disagg-a100", True), ("agg-a100", False)):
        s, base = _stack(name)
        lay = layout(s, base)
        assert not isinstance(lay, str)
        assert (DISAGG_TTFT in departures(s, lay.systems, {})) is disagg, name
    assert "same at every concurrency" in DISAGG_TTFT and "1.8" in DISAGG_TTFT


def test_uncached_queries_run_one_runner_a_core_and_come_back_in_order(monkeypatch, tmp_path):
    """The runner's estimates are dealt round-robin to one process per core; every answer
    lands beside its own query, and few queries keep one process."""
    monkeypatch.setenv(predictor.CACHE_VAR, str(tmp_path))
    monkeypatch.setattr(predictor.os, "cpu_count", lambda: 2)
    calls: list[list[int]] = []

    def fake(queries, systems):
        calls.append([q["n"] for q in queries])
        return [{"answer": q["n"]} for q in queries]
    monkeypatch.setattr(predictor, "run_uncached", fake)
    queries = [{"op": "estimate", "n": n} for n in range(9)]
    assert predictor.run(queries, []) == [{"answer": n} for n in range(9)]
    assert sorted(calls) == [[0, 2, 4, 6, 8], [1, 3, 5, 7]]
    calls.clear()
    assert predictor.run([{"op": "estimate", "n": n} for n in range(10, 13)], []) == [
        {"answer": n} for n in range(10, 13)]
    assert calls == [[10, 11, 12]]
    calls.clear()
    assert predictor.run(queries, []) == [{"answer": n} for n in range(9)] and not calls


def test_a_variant_of_upper_bounds_gets_no_slo_verdict_and_overlapping_bands_no_winner():
    """agg-l40s-fp8's kind (suspect rows) gets no verdict instead of "meets it at no step";
    a disagg win on throughput alone whose ITL bands overlap the agg's is not resolved."""
    from stacks.predict.questions import answers
    upper = _pred("fp8", 4, False, ["l40s"], {1: (130, 31.9, 8, 90.0)}, spread=None,
                  upper="UPPER BOUND: suspect")
    (*_, q3, _) = answers([upper])
    assert q3.lines == ["fp8 sla-tps50-ttft5s: no verdict at c1 (upper bounds)",
                        "fp8 ttft2s-itl25ms: no verdict at c1 (upper bounds)"]
    agg = _pred("agg", 16, False, ["a"], {64: (100, 9, 400, 2.0)}, spread=0.3)
    dis = _pred("dis", 16, True, ["a", "a"], {64: (55, 10, 420, 1.9)}, spread=0.3)
    (q1, *_, q4) = answers([agg, dis])
    assert q1.lines[0].endswith("(TTFT and ITL not resolved by the model: the predictions' "
                                "error bands overlap (AIConfigurator's own measured rows, "
                                "stacks/predict/bands.py))")
    assert q4.lines[0] == ("dis over agg (sla-tps50-ttft5s): c64 (c64: not resolved by the "
                           "model: the predictions' error bands overlap (AIConfigurator's own "
                           "measured rows, stacks/predict/bands.py))")


@pytest.mark.predictor
def test_a_tables_database_facts_are_what_the_estimate_ran_on():
    """A mocker table asks the database's facts, not an estimate (stacks/predict/mocker_table.py
    `build`): the backend version per system it records is the one cli_estimate resolved, and
    a quantized checkpoint on suspect rows is an upper bound in both."""
    for name in ("disagg-l40s-decode", "agg-l40s-fp8"):
        s, base = _stack(name)
        facts = predictor.database_facts(s, base)
        p = predictor.predict(s, "quick", base)
        assert p.rows and facts.not_predicted is None
        assert facts.database["backend_versions"] == p.database["backend_versions"], name
        assert facts.database["kv_cache"] == p.database["kv_cache"]
        assert facts.upper == next((r.upper_bound for r in p.rows if r.upper_bound), None)
    assert facts.upper is not None       # agg-l40s-fp8's FP8 rows (issue 39)


@pytest.mark.predictor
def test_a_kept_runner_answers_as_fresh_ones_and_starts_once():
    """The predictor's runner is kept for the process's life (stacks/predict/runner_pool.py), a
    database loaded once: three requests (the A100 40 GB as an extra system, then a packaged
    system alone, then the extra system again with the versions) start one runner, and their
    answers are those of a new runner per request, byte for byte (nothing of one request leaks
    into the next)."""
    from stacks.predict.runner_pool import RunnerPool

    python = predictor.predictor_python()
    assert python is not None
    s, base = _stack("agg-a100")
    lay = layout(s, base)
    assert not isinstance(lay, str)
    shape = StepShape("concurrency_sweep/c16", "cs", 16, 1024, 512)
    a100 = {"op": "estimate", "kwargs": estimate_kwargs(s.model.id, lay, shape, "bfloat16")}
    h100 = {"op": "estimate", "kwargs": {**a100["kwargs"], "system_name": "h100_sxm"}}
    h100["kwargs"].pop("stretch", None)
    extra = systems_request(lay.systems)
    requests = [{"systems": extra, "queries": [a100]}, {"systems": [], "queries": [h100]},
                {"systems": extra, "queries": [a100, {"op": "versions"}]}]
    kept = RunnerPool(keep=1)
    try:
        together = [kept.ask(python, predictor.RUNNER, r, 600) for r in requests]
    finally:
        kept.close()
    assert kept.started == 1
    assert all("error" not in a for out in together for a in out["answers"]), together
    apart = [together[0]]
    for r in requests[1:]:
        fresh = RunnerPool(keep=0)      # a runner of its own, ended after its request
        apart.append(fresh.ask(python, predictor.RUNNER, r, 600))
        assert fresh.started == 1
    assert json.dumps(together, sort_keys=True) == json.dumps(apart, sort_keys=True)


def test_a_runner_that_dies_is_a_predictor_failure_and_is_not_kept(tmp_path, monkeypatch):
    """A runner that exits mid-request fails the request with its exit code and last words
    (PredictorUnavailable names the fix), and the next request starts a new one."""
    from stacks.predict.runner_pool import RunnerPool

    script = tmp_path / "runner.py"
    script.write_text("import sys\nline = sys.stdin.readline()\n"
                      "if 'die' in line:\n    print('boom', file=sys.stderr); sys.exit(3)\n"
                      "print('{\"answers\": [1]}', flush=True)\nsys.stdin.readline()\n")
    pool = RunnerPool(keep=1)
    monkeypatch.setattr(predictor, "RUNNERS", pool)
    monkeypatch.setattr(predictor, "RUNNER", script)
    monkeypatch.setattr(predictor, "predictor_python", lambda: Path(sys.executable))
    monkeypatch.setenv(predictor.CACHE_VAR, "")
    with pytest.raises(predictor.PredictorUnavailable, match=r"exit 3: boom"):
        predictor.run([{"op": "die"}], [])
    assert predictor.run([{"op": "x"}], []) == [1]
    assert pool.started == 2
    pool.close()
