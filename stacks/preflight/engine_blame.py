"""Which stack field a refusal by the engine's parsers is charged to (pure).

A parser names a flag ("argument --kv-cache-dtype: invalid choice"), quotes the tokens it did
not recognise ("unrecognized arguments: --bogus 9"), or, in an engine-config check, names a
setting in words ("must be divisible by tensor parallel size"); `blame` maps each to the
stack field that wrote the token (stacks.engine_argv's Arg.field).
"""

from __future__ import annotations

import re

from stacks.engine_argv.argv import Arg


def _quoted(token: str, message: str) -> bool:
    return re.search(rf"(^|[\s'\"\[,(=]){re.escape(token)}($|[\s'\"\],:)=])", message) is not None


# How vLLM 0.31.0's engine-config checks name a setting in words, not as a flag, and the flag
# that sets it (vllm/config/model.py verify_with_parallel_config: "must be divisible by tensor
# parallel size"; _get_and_verify_max_len: "User-specified max_model_len (N) is greater than
# the derived max_model_len"; the other fields' own names in vllm/config/*.py).
ENGINE_CONFIG_SETTINGS = (
    # the GPU check's refusal of a chosen attention backend (engine_parse_gpu.py, worded as
    # vllm/platforms/cuda.py:460-464 words it): the backend first, then what its reason names
    (re.compile(r"Selected backend [\w.]+ is not valid"), "--attention-backend"),
    (re.compile(r"tensor[ _]parallel[ _]size", re.I), "--tensor-parallel-size"),
    (re.compile(r"pipeline[ _]parallel[ _]size", re.I), "--pipeline-parallel-size"),
    (re.compile(r"data[ _]parallel[ _]size", re.I), "--data-parallel-size"),
    (re.compile(r"max_model_len", re.I), "--max-model-len"),
    (re.compile(r"kv[ _]cache[ _]dtype", re.I), "--kv-cache-dtype"),
    (re.compile(r"max_num_batched_tokens", re.I), "--max-num-batched-tokens"),
    (re.compile(r"max_num_seqs", re.I), "--max-num-seqs"),
    (re.compile(r"gpu_memory_utilization", re.I), "--gpu-memory-utilization"),
    (re.compile(r"block[ _]size", re.I), "--block-size"),
)


def engine_config_flags(message: str) -> list[str]:
    """The flags an engine-config message names in words, in the order of ENGINE_CONFIG_SETTINGS."""
    return [flag for pattern, flag in ENGINE_CONFIG_SETTINGS if pattern.search(message)]


def blame(message: str, args: tuple[Arg, ...], where: str) -> list[str]:
    """The stack fields of the tokens the parser's message names (flags, or an extraArgs entry
    such as garbage or an empty string), or of the setting an engine-config message names in
    words (the last occurrence of its flag: the one the engine used); `where` when it names
    none."""
    fields = _named_tokens(message, args)
    if not fields:
        for flag in engine_config_flags(message):
            last = next((a.field for a in reversed(args)
                         if a.token.split("=", 1)[0] == flag), None)
            if last is not None and last not in fields:
                fields.append(last)
    return fields or [where]


def _named_tokens(message: str, args: tuple[Arg, ...]) -> list[str]:
    fields: list[str] = []
    unrecognized = "unrecognized arguments" in message or "Unknown arguments" in message
    flag = re.search(r"argument (--[\w-]+)", message)
    for a in reversed(args):
        name = a.token.split("=", 1)[0]
        extra = ".extraArgs[" in a.field
        hit = (flag is not None and name in (flag[1], "--kernel-config" if
                                             flag[1] == "--moe-backend" else flag[1]))
        if flag is None and name and (name.startswith("-") or extra):
            hit = _quoted(name, message)
        if unrecognized and extra and a.token == "":
            hit = True
        if hit and a.field not in fields:
            fields.append(a.field)
        if hit and flag is not None:
            break  # argparse judges the last occurrence of a flag
    return list(reversed(fields))
