"""AIConfigurator's own measured rows, read as exact estimate configurations (pure).

AIConfigurator 0.12.0 ships end-to-end measurements of real serving runs
(aiconfigurator_core/systems/silicon_sample.csv: 5,221 rows of TTFT and TPOT, each with its
backend, system, model, quantization labels, parallelism, batch and ISL/OSL; 1,345 of them
vLLM). Running its estimate at a row's exact configuration and dividing the measured figure by
the estimate gives the model's own error where the world measured it: the error bands of
stacks/predict/bands.py stand on these ratios.

A row's configuration is what the CSV states: its columns are cli_estimate's own keyword
arguments (model_path, system, mode, isl, osl, batch_size, tp_size, ..., gemm_quant_mode,
moe_quant_mode), so each stated one is passed as it is, with one reading: a row labelled `fp8`
whose checkpoint carries block scales (AIConfigurator reads `weight_block_size` as fp8_block)
ran block-scaled FP8 (vLLM runs the checkpoint's own scales), so it is estimated and classed as
FP8 block. What a row does not state is left to AIConfigurator's defaults (the database's
current vLLM version, the KV cache dtype it infers), as its own estimate would. The precision
class of a row is the one of those quant modes (precision_class).

Two model ids are read under the name AIConfigurator ships their config by (MODEL_ALIASES).
Rows whose model the database does not ship, whose parallelism is incomplete, or which the
estimate refuses are left out; `exclusions` counts them by reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# The precision class of a quant mode name (aiconfigurator_core sdk/common.py GEMMQuantMode /
# MoEQuantMode names, which the CSV's labels also use).
CLASS_OF_MODE = {"bfloat16": "BF16", "float16": "BF16", "": "BF16", "fp8": "FP8",
                 "fp8_static": "FP8", "fp8_block": "FP8 block", "nvfp4": "NVFP4",
                 "w4a16_mxfp4": "MXFP4", "int4_wo": "INT4", "int8_wo": "INT8"}


# Model ids of silicon rows that AIConfigurator 0.12.0 ships under another name
# (aiconfigurator_core/model_configs/): Hugging Face renamed Meta's Llama 3.1 repositories from
# meta-llama/Meta-Llama-3.1-* to meta-llama/Llama-3.1-* (same weights); NVIDIA's per-tensor FP8
# export of the 8B Instruct model has the 8B architecture, its quantization stated by the row's
# labels.
MODEL_ALIASES = {"meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
                 "nvidia/Llama-3.1-8B-Instruct-FP8": "meta-llama/Meta-Llama-3.1-8B"}


def models_of(raws: list[dict[str, str]]) -> list[str]:
    """The database's model ids the rows need the checkpoint facts of."""
    return sorted({MODEL_ALIASES.get(r["model_path"], r["model_path"]) for r in raws})


def precision_class(gemm: str, moe: str, moe_model: bool) -> str:
    """BF16 / FP8 / FP8 block / NVFP4 / ...: the mode of the weights that dominate (the
    experts of a MoE model, the GEMMs of a dense one)."""
    mode = moe if moe_model else gemm
    return CLASS_OF_MODE.get(mode, mode)


@dataclass(frozen=True)
class SiliconRow:
    """One measured row, ready to be estimated: its exact cli_estimate kwargs, the shape the
    bands measure nearness by, and what it measured."""
    id: str
    system: str
    model: str
    architecture: str
    moe: bool
    precision: str           # precision class (precision_class)
    mode: str                # agg | disagg
    isl: int
    osl: int
    batch: int               # agg batch_size; disagg decode_batch_size (per decode worker)
    tp: int                  # agg tp_size; disagg decode_tp_size
    measured_ttft_ms: float
    measured_tpot_ms: float
    kwargs: dict[str, Any]


def _num(raw: dict[str, str], key: str) -> float | None:
    value = (raw.get(key) or "").strip()
    if not value:
        return None
    x = float(value)
    return None if math.isnan(x) else x


def _int(raw: dict[str, str], key: str, default: int | None = None) -> int | None:
    x = _num(raw, key)
    return default if x is None else int(x)


def _moe_sizes(raw: dict[str, str], prefix: str) -> dict[str, int] | str:
    tp, ep = _int(raw, f"{prefix}moe_tp_size"), _int(raw, f"{prefix}moe_ep_size")
    if not tp and not ep:
        return "a MoE model without its expert parallelism"
    return {f"{prefix}moe_tp_size": tp or 1, f"{prefix}moe_ep_size": ep or 1}


def _quant(raw: dict[str, str], ckpt: dict[str, Any]) -> dict[str, str]:
    """The quant-mode kwargs the row states (its labels), fp8 read as fp8_block on a
    block-scaled checkpoint."""
    out = {}
    for key, ours in (("gemm_quant_mode", ckpt["gemm"]), ("moe_quant_mode", ckpt["moe"])):
        label = (raw.get(key) or "").strip()
        if label:
            out[key] = "fp8_block" if label == "fp8" and ours == "fp8_block" else label
    return out


def row_of(raw: dict[str, str], checkpoints: dict[str, dict[str, Any]]) -> SiliconRow | str:
    """The row as an exact estimate configuration, or why it cannot be one."""
    model = MODEL_ALIASES.get(raw["model_path"], raw["model_path"])
    ckpt = checkpoints.get(model)
    if ckpt is None or "error" in ckpt:
        return "model not in the database"
    quant = _quant(raw, ckpt)
    moe_model = ckpt["num_experts"] > 0
    mode = raw["mode"]
    kwargs: dict[str, Any] = {"model_path": model, "system_name": raw["system"],
                              "backend_name": raw["backend"], "mode": mode,
                              "isl": int(raw["isl"]), "osl": int(raw["osl"]), **quant}
    if mode == "agg":
        batch, tp = _int(raw, "batch_size"), _int(raw, "tp_size")
        if not batch or not tp:
            return "batch or TP not stated"
        kwargs |= {"batch_size": batch, "tp_size": tp, "pp_size": _int(raw, "pp_size", 1),
                   "attention_dp_size": _int(raw, "attention_dp_size", 1)}
        prefixes = [""]
    elif mode == "disagg":
        needed = ("prefill_batch_size", "prefill_num_workers", "prefill_tp_size",
                  "decode_batch_size", "decode_num_workers", "decode_tp_size")
        if any(not _int(raw, k) for k in needed):
            return "disagg workers not stated"
        kwargs |= {k: _int(raw, k) for k in needed}
        for role in ("prefill", "decode"):
            kwargs |= {f"{role}_pp_size": _int(raw, f"{role}_pp_size", 1),
                       f"{role}_attention_dp_size": _int(raw, f"{role}_attention_dp_size", 1)}
        batch, tp = kwargs["decode_batch_size"], kwargs["decode_tp_size"]
        prefixes = ["prefill_", "decode_"]
    else:
        return f"mode {mode}"
    if moe_model:
        for prefix in prefixes:
            sizes = _moe_sizes(raw, prefix)
            if isinstance(sizes, str):
                return sizes
            kwargs |= sizes
    ttft, tpot = _num(raw, "silicon_ttft_ms"), _num(raw, "silicon_tpot_ms")
    if not ttft or not tpot:
        return "no measured TTFT or TPOT"
    return SiliconRow(raw["id"], raw["system"], model, ckpt["architecture"],
                      moe_model, precision_class(kwargs.get("gemm_quant_mode", ckpt["gemm"]),
                                                 kwargs.get("moe_quant_mode", ckpt["moe"]),
                                                 moe_model),
                      mode, int(raw["isl"]), int(raw["osl"]), int(batch), int(tp),
                      ttft, tpot, kwargs)


def rows_of(raws: list[dict[str, str]], checkpoints: dict[str, dict[str, Any]]
            ) -> tuple[list[SiliconRow], dict[str, int]]:
    """The estimable rows, and how many were left out by reason."""
    rows: list[SiliconRow] = []
    exclusions: dict[str, int] = {}
    for raw in raws:
        r = row_of(raw, checkpoints)
        if isinstance(r, str):
            exclusions[r] = exclusions.get(r, 0) + 1
        else:
            rows.append(r)
    return rows, exclusions
