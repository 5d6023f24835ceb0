"""Pre-flight checks of the checkpoints a stack loads (pure): the precision label is the
checkpoint's own, and the model cache holds every checkpoint that lands on it.

A run labelled FP8 must run FP8 weights: `model.precision` has to be the precision of the
checkpoint `model.id` names (stacks.catalog.model_catalog.CHECKPOINTS); the engine flags that could
change it (`--quantization`) are held to the same label by stacks.preflight.engine_flags.

The model cache of a base is shared: the base downloads its own model, and each variant adds
its model and any external draft beside it (components.downloads). So a variant needs room for
its base's checkpoint plus its own, and a stack never less than its recipe asks
(ServingRules.storage_gib_min, which includes download headroom).
"""

from __future__ import annotations

from stacks.catalog.model_catalog import CHECKPOINTS, DRAFT_MODELS, SERVING_RULES
from stacks.config.errors import Problem
from stacks.config.schema import StackConfig
from stacks.config.stack_file import PROJECT

P = f"{PROJECT}:"
GB_PER_GIB = 1024**3 / 1e9


def checkpoint_gb(stack: StackConfig) -> float | None:
    """Size on disk of the stack's model (decimal GB), or None when nothing says."""
    known = CHECKPOINTS.get(stack.model.id)
    if known is not None:
        return known.size_gb
    return stack.model.arch.checkpoint_gb


def checkpoint_precision(stack: StackConfig) -> str | None:
    known = CHECKPOINTS.get(stack.model.id)
    return known.precision if known is not None else stack.model.arch.checkpoint_precision


def check_precision(stack: StackConfig, out: list[Problem]) -> None:
    have, said = checkpoint_precision(stack), stack.model.precision.value
    if have and said != have:
        out.append(Problem(f"{P}model.precision", f"{stack.model.id} is a {have} checkpoint: a "
                           f"run labelled {said} would load {have} weights",
                           f"set model.precision: {have}, or use a {said} checkpoint"))


def _downloads(stack: StackConfig, base: StackConfig | None) -> dict[str, float]:
    """GB of every checkpoint on the model cache this stack uses (unknown sizes omitted)."""
    out: dict[str, float] = {}
    for owner in ([base] if base is not None else []) + [stack]:
        size = checkpoint_gb(owner)
        if size:
            out[owner.model.id] = size
    spec = stack.serving.speculative if stack.serving else None
    if spec is not None and spec.draft_model in DRAFT_MODELS:
        out[spec.draft_model] = DRAFT_MODELS[spec.draft_model].size_gb
    return out


def check_model_cache(stack: StackConfig, base: StackConfig | None,
                      out: list[Problem]) -> None:
    owner = base or stack
    have = owner.storage.model_cache_gib
    downloads = _downloads(stack, base)
    need_checkpoints = int(sum(downloads.values()) / GB_PER_GIB) + 1 if downloads else 0
    rules = SERVING_RULES.get(stack.model.id)
    need = max(need_checkpoints, rules.storage_gib_min if rules else 0)
    if have >= need:
        return
    where = f"base '{owner.name}' " if base is not None else ""
    listing = ", ".join(f"{m} {gb / GB_PER_GIB:.0f} GiB" for m, gb in downloads.items())
    why = (f"the checkpoints it holds ({listing})" if need == need_checkpoints else
           f"the recipe of {stack.model.id} ({need} GiB with download headroom)")
    out.append(Problem(f"{P}storage.modelCacheGib", f"{where}model cache {have} GiB is smaller "
                       f"than {why} need ({need} GiB)",
                       f"raise {where}storage.modelCacheGib to >= {need}"))
