"""What the engine sees of each request a step sends: its prompt's tokens as named segments, and
the engine's KV block hashes of them (pure).

A simulated step must meet the same prefix reuse as the live run, so its hash ids are made from
the same tokens the live run sends, block by block, not from the dataset's 512-token ids. What
decides those tokens, read in AIPerf 0.13.0 and Dynamo 1.6.1:
- AIPerf turns each hash id of a Mooncake row into one block of `block_size` tokens (the last
  block of a row holds the rest of its input_length), the same tokens wherever the id appears in
  one file and seeded run, different tokens in another file or under another seed
  (aiperf/dataset/generator/prompt.py `_build_token_sequence`, reseeded per (trace id, hash id);
  each block opens with the tokenizer's block-separation token, so the text it decodes to
  tokenizes back block by block).
- A multi-turn turn is sent with the whole conversation so far, AIPerf's own answers included
  (workloads/datasets.py multi_turn_rows); the frontend renders the messages with the model's
  chat template (ChatML here: `<|im_start|>role\\n` ... `<|im_end|>\\n`, and the generation prompt
  `<|im_start|>assistant\\n`) and tokenizes the result.
- The frontend hashes the prompt in KV blocks of the engine's block size, each hash chained on the
  one before it (its request trace's `replay.input_sequence_hashes`, one per block, the last one
  partial): two prompts share a block only if they share every token up to its end.
Checked against the frontend's own records of a live rehearsal (tests/test_sim_layout.py): the
same token counts (1,038 for a 1,024-token sweep prompt; 526 / 1,070 for multi-turn turns 1 / 2)
and the same shared leading blocks between every pair of requests of a step.

An answer the engine generated is re-tokenized by the frontend in the next turn; its blocks are
new to the engine (the live frontend's cached_tokens stop before it), so an answer is a segment of
its own, `output_length` tokens long.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Segment = tuple[tuple, int]          # (what the tokens are, how many)


@dataclass(frozen=True)
class ChatTemplate:
    """Tokens the chat template adds: before a user message, after any message, before an
    answer (also the generation prompt); counted with the model's tokenizer."""
    user_open: int
    close: int
    assistant_open: int
    source: str = ""

    @property
    def single_turn(self) -> int:
        return self.user_open + self.close + self.assistant_open


def content_segments(row: dict, block_size: int, scope: str, row_key: tuple) -> list[Segment]:
    """A row's prompt content as AIPerf builds it: one segment per hash id (the last one holds
    the rest of input_length), then fresh tokens (unique to the row, `row_key`) for a tail no
    id covers."""
    ids, length = row.get("hash_ids") or [], row["input_length"]
    if not ids:
        return [(("fresh", scope, row_key), length)]
    m = len(ids)
    if m * block_size > length:   # the last block is partial
        sizes = [block_size] * (m - 1) + [length - (m - 1) * block_size]
        tail = 0
    else:
        sizes, tail = [block_size] * m, length - m * block_size
    out: list[Segment] = [(("blk", scope, h), n) for h, n in zip(ids, sizes, strict=True)]
    if tail:
        out.append((("fresh", scope, row_key), tail))
    return out


def conversation_prompts(rows: list[dict], block_size: int, scope: str,
                         template: ChatTemplate) -> list[list[Segment]]:
    """The prompt of every turn of one conversation (its rows in order): turn k is the history
    (every earlier user message and answer) plus its own message and the generation prompt."""
    history: list[Segment] = []
    out = []
    for turn, row in enumerate(rows):
        user = [(("user_open",), template.user_open),
                *content_segments(row, block_size, scope, (row.get("session_id"), turn)),
                (("close",), template.close)]
        out.append([*history, *user, (("assistant_open",), template.assistant_open)])
        answer = (("answer", scope, row.get("session_id"), turn), row["output_length"])
        history += [*user, (("assistant_open",), template.assistant_open), answer,
                    (("close",), template.close)]
    return out


@dataclass
class BlockHasher:
    """Chained block hashes as small ints, equal exactly where two prompts share every token up
    to a block's end. One hasher per replay: its numbering is shared by all its requests."""
    block: int
    ids: dict = field(default_factory=dict)
    issued: int = 0

    def fresh(self, tokens: int) -> list[int]:
        """Hashes of a prompt that shares no token with any other past its first block's
        template tokens: every block is its own (a sweep's or a distribution's rows)."""
        n = -(-tokens // self.block)
        self.issued += n
        return list(range(self.issued - n, self.issued))

    def hashes(self, segments: list[Segment]) -> tuple[int, list[int]]:
        """(prompt tokens, one hash per block of `block` tokens, the last block partial)."""
        out: list[int] = []
        parent = -1
        pieces: list[tuple] = []
        filled = 0
        for key, n in segments:
            start = 0
            while start < n:
                take = min(n - start, self.block - filled)
                pieces.append((key, start, start + take))
                start += take
                filled += take
                if filled == self.block:
                    parent = self._id(parent, pieces)
                    out.append(parent)
                    pieces, filled = [], 0
        if pieces:
            out.append(self._id(parent, pieces))
        return sum(n for _, n in segments), out

    def _id(self, parent: int, pieces: list[tuple]) -> int:
        key = (parent, tuple(pieces))
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = self.issued
            self.issued += 1
        return found


def step_requests(rows: list[dict], block_size: int, scope: str, template: ChatTemplate,
                  hasher: BlockHasher) -> list:
    """Every row of a step as the request the engine sees: conversation and turn as AIPerf
    names them (a row's session_id; rows of one session are its turns in order), the prompt's
    tokens and block hashes, the output length and a later turn's think time."""
    from workloads.sim.dispatch import Request

    sessions: dict[str, list[tuple[int, dict]]] = {}
    for i, row in enumerate(rows):
        sessions.setdefault(str(row.get("session_id") or f"session_{i:06d}"), []).append((i, row))
    uses: dict[int, int] = {}
    for row in rows:
        for h in row.get("hash_ids") or []:
            uses[h] = uses.get(h, 0) + 1
    out = []
    for conv, turns in sessions.items():
        prompts = conversation_prompts([r for _, r in turns], block_size, scope, template)
        alone = len(turns) == 1 and all(uses[h] == 1 for h in turns[0][1].get("hash_ids") or [])
        for turn, ((i, row), segments) in enumerate(zip(turns, prompts, strict=True)):
            if alone:   # shares no block with any row: no need to compare its tokens
                tokens = sum(n for _, n in segments)
                hashes = hasher.fresh(tokens)
            else:
                tokens, hashes = hasher.hashes(segments)
            out.append(Request(index=i, conversation=conv, turn=turn, input_length=tokens,
                               output_length=row["output_length"], hash_ids=tuple(hashes),
                               think_ms=float(row.get("delay") or 0.0),
                               timestamp_ms=row.get("timestamp")))
    return sorted(out, key=lambda r: r.index)
