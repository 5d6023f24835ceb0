"""Makes the simulation target of a stack (a thin shell): the model folder the mockers read,
pre-flight's KV blocks, the timing tables, the chat template's token counts, the engine setup.
"""

from __future__ import annotations

from pathlib import Path

from stacks.config.schema import StackConfig
from workloads.model_folder import build_model_folder, default_hf_home
from workloads.sim.engine_setup import setup
from workloads.sim.prompt_layout import ChatTemplate
from workloads.sim.target import SimExecutor, SimTarget
from workloads.targets.local import dynamo_version, engine_python, mocker_blocks
from workloads.targets.mocker_timings import MockerTimings, generic, resolve

# The ChatML pieces the project's model folder renders (workloads/model_folder.py CHAT_TEMPLATE).
USER_OPEN, CLOSE, ASSISTANT_OPEN = "<|im_start|>user\n", "<|im_end|>\n", "<|im_start|>assistant\n"


def chat_template(snapshot: Path) -> ChatTemplate:
    """The template's pieces counted with the model folder's own tokenizer (each piece starts
    or ends at a special token, so it tokenizes on its own: checked against the frontend's
    counts in tests/test_sim_layout.py)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(snapshot / "tokenizer.json"))

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)
    return ChatTemplate(count(USER_OPEN), count(CLOSE), count(ASSISTANT_OPEN),
                        source=f"{snapshot.parent.parent.name} tokenizer.json")


def make(stack: StackConfig, kv_capacity_tokens: list[int], hf_home: Path,
         timings: MockerTimings | None = None,
         base: StackConfig | None = None) -> tuple[SimTarget, SimExecutor]:
    """`base`: an attached variant's base (its node groups decide the GPU the tables model)."""
    model = build_model_folder(hf_home, stack.model.id, stack.model.arch)
    timings = timings or resolve(stack, base=base)
    tables = {role: str(path) for role, path in timings.tables.items()}
    sim = setup(stack, mocker_blocks(stack, kv_capacity_tokens), str(model.snapshot), tables)
    target = SimTarget(stack, sim, timings.record, dynamo_version(engine_python()))
    return target, SimExecutor(target, chat_template(model.snapshot))


def for_plan(stack: StackConfig, kv_capacity_tokens: list[int], base: StackConfig | None,
             predict: bool) -> tuple[SimTarget, ChatTemplate]:
    """The simulation target of a planned stack (`stacks plan`): AIConfigurator's timing
    tables, or the mocker's generic timings when predictions are off (--no-predict)."""
    timings = None if predict else generic("predictions off: --no-predict")
    target, ex = make(stack, kv_capacity_tokens, default_hf_home(), timings, base)
    return target, ex.template
