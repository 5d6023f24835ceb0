"""Kernel times measured on one memory bandwidth, stretched to another (pure; standard library
only, because the predictor's runner, stacks/predict/aic_runner.py, imports this file beside
itself in AIConfigurator's environment).

Why: AWS p4d's A100-SXM4-40GB (1.555 TB/s) has no database of its own; AIConfigurator 0.12.0's
`a100_sxm` kernels were measured on the 80 GB part (2.039 TB/s). Its SILICON mode reads those
kernel times whatever the systems file says, and so do HYBRID and EMPIRICAL (measured here:
Qwen3-30B-A3B TP4, ISL 1024 / OSL 512, batch 16, vLLM 0.14.0, TPOT on a100_sxm vs our
a100_sxm_40gb file: SILICON 9.429 vs 9.443 ms, HYBRID 9.429 vs 9.443, EMPIRICAL 9.436 vs 9.451;
only SOL, the roofline with no measurement at all, follows the file: 7.943 vs 10.368 ms). So
the correction is ours, per operation of a step:

    stretched = measured + min(measured, bytes_ms) x (ratio - 1)

for an operation whose roofline is memory (its bytes at the measured part's bandwidth,
`bytes_ms`, at least its math at peak), and `measured` unchanged otherwise (compute-bound GEMMs
of a prefill, communication, operations AIConfigurator has no roofline for). `ratio` is the
measured part's bandwidth over the target's (2.039 / 1.555 = 1.311). Only the part of an
operation's time its bytes can account for is stretched: a decode GEMM measured at 3x its
bytes/bandwidth time spends the rest on launch, synchronisation and tile tails, which a slower
memory does not lengthen; the MoE experts of a decode step at batch 16 (measured at 0.75x the
roofline's bytes: not every expert is read) stretch in full.

Checked on the database's own measurements of the same compute at two bandwidths: h100_sxm
(3.35 TB/s) and h200_sxm (4.8 TB/s) kernels, vLLM 0.24.0, Qwen3-30B-A3B TP2 decode at context
1280. Stretching h200's per-operation times by 4.8 / 3.35 this way gives h100's decode step at
batch 1 / 4 / 16 / 64 as 1.075 / 1.155 / 1.309 / 1.269 x h200's, against the measured 0.974 /
1.132 / 1.213 / 1.254; stretching every memory-bound operation's whole time would give 1.38-1.41.
The rule errs on the slow side by at most 0.10, and never exceeds the bandwidth ratio.
"""

from __future__ import annotations

from collections.abc import Sequence


def stretched_ms(measured_ms: float, math_ms: float | None, bytes_ms: float | None,
                 ratio: float) -> float:
    """One operation's time at the lower bandwidth (module docstring)."""
    if bytes_ms is None or math_ms is None or bytes_ms <= 0 or bytes_ms < math_ms:
        return measured_ms
    return measured_ms + min(measured_ms, bytes_ms) * (ratio - 1.0)


def stretch(ops: Sequence[tuple[str, float, float | None, float | None]],
            ratio: float) -> dict[str, object]:
    """A step's operations (name, measured ms, roofline math ms, roofline bytes ms; None where
    AIConfigurator has no roofline for it) at the lower bandwidth: the step's factor (its
    stretched time over its measured time, 1.0 for an empty step) and each operation's
    figures, for the record."""
    rows = [{"op": name, "measured_ms": round(t, 5),
             "bytes_ms": None if mem is None else round(mem, 5),
             "stretched_ms": round(stretched_ms(t, math, mem, ratio), 5)}
            for name, t, math, mem in ops]
    measured = sum(t for _, t, _, _ in ops)
    stretched = sum(stretched_ms(t, math, mem, ratio) for _, t, math, mem in ops)
    return {"factor": stretched / measured if measured > 0 else 1.0, "ops": rows}
