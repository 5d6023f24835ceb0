"""Which stack field an engine refusal is charged to (pure: no parser environment needed).
The messages are vLLM 0.31.0's own (vllm/config/model.py)."""

from __future__ import annotations

from stacks.engine_argv.argv import Arg
from stacks.preflight.engine_blame import blame

W = "serving.workers[0]"
ARGS = (Arg("--model", "(fixed)"),
        Arg("--tensor-parallel-size", f"{W}.tensorParallelSize"),
        Arg("3", f"{W}.tensorParallelSize"),
        Arg("--max-model-len", f"{W}.maxModelLen"), Arg("65536", f"{W}.maxModelLen"),
        Arg("--max-model-len", f"{W}.extraArgs[1]"),
        Arg("--max-model-len=90000", f"{W}.extraArgs[2]"))


def test_an_engine_config_error_is_charged_to_the_setting_it_names_in_words():
    heads = "Total number of attention heads (32) must be divisible by tensor parallel size (3)."
    assert blame(heads, ARGS, W) == [f"{W}.tensorParallelSize"]


def test_the_last_occurrence_of_the_named_setting_is_the_one_the_engine_used():
    too_long = ("User-specified max_model_len (90000) is greater than the derived max_model_len "
                "(max_position_embeddings=40960 or model_max_length=None in model's config.json).")
    assert blame(too_long, ARGS, W) == [f"{W}.extraArgs[2]"]


def test_a_message_that_names_no_setting_is_charged_to_the_whole_worker():
    assert blame("Pipeline parallelism is not supported for this model.", ARGS, W) == [W]


def test_a_parser_message_naming_a_flag_wins_over_words():
    msg = "argument --max-model-len: invalid int value: 'x' (tensor parallel size unaffected)"
    assert blame(msg, ARGS, W) == [f"{W}.extraArgs[2]"]     # argparse judges the last one
