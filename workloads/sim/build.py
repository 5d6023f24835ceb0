"""Makes the simulation target of a stack (a thin shell): the model folder the mockers read,
pre-flight's KV capacity, the timing tables, the chat template's token counts, the engine setup
(engine_setup.py: a local stack on its live mockers' command lines, an aws stack on what its
vLLM workers would run on the nodes of its cluster, a variant's being its base's).
"""

from __future__ import annotations

from pathlib import Path

from stacks.config.schema import StackConfig
from workloads.model_folder import build_model_folder
from workloads.sim.engine_setup import SimSetup, cluster_setup, setup
from workloads.sim.prompt_layout import ChatTemplate
from workloads.sim.target import SimExecutor, SimTarget
from workloads.targets.local import dynamo_version, engine_python, mocker_blocks
from workloads.targets.mocker_timings import MockerTimings, resolve

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


def sim_setup(stack: StackConfig, kv_capacity_tokens: list[int], model_path: str,
              tables: dict[str, str], base: StackConfig | None = None) -> SimSetup:
    """The engine setup of `stack`; an aws stack runs on its cluster's nodes (an attached
    variant's: its base's groups plus its own, `base` loaded from the stacks folder when not
    given, as pre-flight loads it)."""
    if stack.target == "local":
        return setup(stack, mocker_blocks(stack, kv_capacity_tokens), model_path, tables)
    from stacks.preflight.run import effective_cluster, load_base
    base = base if base is not None or not stack.is_attached else load_base(stack)
    return cluster_setup(stack, kv_capacity_tokens, model_path, tables,
                         effective_cluster(stack, base), base or stack)


def make(stack: StackConfig, kv_capacity_tokens: list[int], hf_home: Path,
         timings: MockerTimings | None = None,
         base: StackConfig | None = None) -> tuple[SimTarget, SimExecutor]:
    """`base`: an attached variant's base (its node groups decide the GPU the tables model and
    the engine the workers run)."""
    model = build_model_folder(hf_home, stack.model.id, stack.model.arch)
    timings = timings or resolve(stack, base=base)
    tables = {role: str(path) for role, path in timings.tables.items()}
    sim = sim_setup(stack, kv_capacity_tokens, str(model.snapshot), tables, base)
    target = SimTarget(stack, sim, timings.record, dynamo_version(engine_python()))
    return target, SimExecutor(target, chat_template(model.snapshot))
