"""Database rows a prediction cannot stand on (pure): a quantized kernel slower than BF16.

A quantized GEMM moves at most half the weight bytes of its BF16 twin, and a decode step is
weight-bandwidth-bound: measured on the same GPU at the same shape it should not be slower,
let alone several times slower. AIConfigurator 0.12.0's l40s vLLM 0.24.0 block-scaled FP8 GEMM
rows are: Qwen3-30B-A3B-FP8 TP2 at batch 1, the attention's QKV and output GEMMs take 13.94
and 14.81 ms a step (48 layers) against 0.58 and 0.65 ms in BF16, 2.1 % and 1.6 % of their
bytes/bandwidth time (one QKV GEMM, m=4 n=2560 k=2048: 0.291 ms vs 0.0094 ms BF16), which makes
the FP8 decode step 31.9 ms against 4.4 ms in BF16. Whether vLLM's block-FP8 kernels on Ada
(sm89) are really that slow, or the collection went wrong, the database cannot say; its
figures for such a configuration are then upper bounds, labelled so, and no SLO verdict is
drawn from them (stacks/predict/rows.py PredictSlo.met).

The runner's `quant_check` answers a decode step's operations with the checkpoint's quant
modes and with BF16 ones (name, ms, roofline math ms, roofline bytes ms); an operation is
suspect when its quantized time exceeds SLOWER x its BF16 time.
"""

from __future__ import annotations

from typing import Any

SLOWER = 2.0


def suspects(answer: dict[str, Any]) -> list[tuple[str, float, float, float | None]]:
    """(op, quantized ms, BF16 ms, quantized bytes/bandwidth ms) of every suspect operation of
    a `quant_check` answer."""
    bf16 = {name: t for name, t, _, _ in answer.get("bf16") or []}
    return [(name, t, bf16[name], mem) for name, t, _, mem in answer.get("quant") or []
            if bf16.get(name, 0) > 0 and t > SLOWER * bf16[name]]


def upper_bound_note(system: str, precision: str, batch: int,
                     found: list[tuple[str, float, float, float | None]]) -> str:
    """Why a prediction's latencies are upper bounds, with the evidence."""
    ops = "; ".join(f"{name} {t:.2f} ms vs {b:.2f} ms BF16"
                    + (f" ({100 * mem / t:.1f} % of its bytes/bandwidth time)" if mem else "")
                    for name, t, b, mem in found)
    return (f"UPPER BOUND: AIConfigurator's {system} {precision} rows are suspect (a quantized "
            f"kernel more than {SLOWER:g}x slower than its BF16 twin; decode step at batch "
            f"{batch}, all layers: {ops}); latencies are upper bounds and no SLO verdict is "
            "drawn from them (stacks/predict/suspect.py)")
