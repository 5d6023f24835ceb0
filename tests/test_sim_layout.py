"""The simulation's prompts are the live run's, block by block (workloads/sim/prompt_layout.py).

Fixtures (tests/fixtures/sim/): two steps of a live rehearsal of local-agg (quick scale, Dynamo
1.6.1 frontend + mockers, AIPerf 0.13.0, 2026-12-06): the step's dataset rows and, per request,
what the frontend's own request trace recorded (input_tokens, its KV block hashes at the
engine's 64-token block). The layout built from the rows alone must give the frontend's token
counts and, between every pair of requests, the same number of shared leading blocks (what
the engine's prefix cache can reuse), without ever seeing a token.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from workloads.model_folder import build_model_folder
from workloads.sim.build import chat_template
from workloads.sim.prompt_layout import BlockHasher, ChatTemplate, step_requests

FIXTURES = Path(__file__).parent / "fixtures" / "sim"
MODEL = "Qwen/Qwen3-30B-A3B"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> ChatTemplate:
    from stacks.config.schema import ModelConfig
    folder = build_model_folder(tmp_path_factory.mktemp("hf"), MODEL, ModelConfig(id=MODEL).arch)
    return chat_template(folder.snapshot)


def _shared(a: list, b: list) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def _load(name: str) -> tuple[list[dict], list[dict]]:
    rows = [json.loads(x) for x in (FIXTURES / f"{name}.rows.jsonl").read_text().splitlines()]
    live = [json.loads(x) for x in (FIXTURES / f"{name}.frontend.jsonl").read_text()
            .splitlines()]
    return rows, live


def test_the_template_adds_what_the_frontend_counted(template):
    """A 1,024-token sweep prompt reached the frontend as 1,038 tokens: 4 + 2 + 8 of ChatML."""
    assert (template.user_open, template.close, template.assistant_open) == (4, 2, 8)
    assert template.single_turn == 14


@pytest.mark.parametrize("name", ["prefix_cache-share050", "multi_turn-conv5"])
def test_prompts_share_the_blocks_the_live_frontend_saw(template, name):
    rows, live = _load(name)
    block = live[0]["trace_block_size"]
    reqs = step_requests(rows, 512, "scope", template, BlockHasher(block))
    ours = {(r.conversation, r.turn): r for r in reqs}
    for rec in live:
        mine = ours[rec["conversation_id"], rec["turn_index"]]
        # a re-tokenized answer can come back one token longer: at most one per earlier turn
        assert 0 <= rec["input_tokens"] - mine.input_length <= rec["turn_index"]
        assert len(mine.hash_ids) == -(-mine.input_length // block)
    for a, b in itertools.combinations(live, 2):
        mine_a = ours[a["conversation_id"], a["turn_index"]].hash_ids
        mine_b = ours[b["conversation_id"], b["turn_index"]].hash_ids
        assert _shared(list(mine_a), list(mine_b)) == _shared(
            a["input_sequence_hashes"], b["input_sequence_hashes"]), (a["conversation_id"],
                                                                       a["turn_index"],
                                                                       b["conversation_id"],
                                                                       b["turn_index"])


def test_the_cached_prefix_a_turn_met_live_is_an_earlier_prompt(template):
    """Multi-turn: where the frontend found a prefix cached, it was exactly the whole blocks of
    an earlier turn's prompt (the one the same worker served last: round-robin alternates),
    never the answer's blocks after it; the layout's shared blocks give those counts."""
    rows, live = _load("multi_turn-conv5")
    reqs = {(r.conversation, r.turn): r for r in step_requests(
        rows, 512, "scope", template, BlockHasher(64))}
    hits = [rec for rec in live if rec["cached_tokens"]]
    assert len(hits) >= 3
    for rec in hits:
        now = list(reqs[rec["conversation_id"], rec["turn_index"]].hash_ids)
        earlier = [reqs[rec["conversation_id"], t] for t in range(rec["turn_index"])]
        assert rec["cached_tokens"] in {_shared(now, list(e.hash_ids)) * 64 for e in earlier}
        assert rec["cached_tokens"] in {e.input_length // 64 * 64 for e in earlier}


def test_another_file_or_seed_shares_no_block(template):
    """The same hash ids in another dataset file (or under another seed) are other tokens
    (AIPerf reseeds per trace file and hash id): no block in common."""
    rows, _ = _load("prefix_cache-share050")
    hasher = BlockHasher(64)
    one = step_requests(rows, 512, "file-a", template, hasher)
    two = step_requests(rows, 512, "file-b", template, hasher)
    assert not set(one[0].hash_ids) & set(two[0].hash_ids)
    again = step_requests(rows, 512, "file-a", template, hasher)
    assert again[0].hash_ids == one[0].hash_ids
