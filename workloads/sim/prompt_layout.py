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

from collections import Counter
from dataclasses import dataclass, field
from itertools import chain

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
    """What each turn of one conversation (its rows in order) adds to the token stream: turn
    k's prompt is the history (every earlier user message and answer) plus its own message and
    the generation prompt, so it is turn k-1's prompt followed by the answer to it, a close,
    and turn k's own message and generation prompt. The first item is turn 0's whole prompt."""
    out = []
    for turn, row in enumerate(rows):
        user = [(("user_open",), template.user_open),
                *content_segments(row, block_size, scope, (row.get("session_id"), turn)),
                (("close",), template.close), (("assistant_open",), template.assistant_open)]
        if turn:
            before = rows[turn - 1]
            answer = (("answer", scope, before.get("session_id"), turn - 1),
                      before["output_length"])
            user = [answer, (("close",), template.close), *user]
        out.append(user)
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
        stream = HashStream(self)
        stream.feed(segments)
        return stream.prompt()

    def _id(self, parent: int, pieces: list[tuple]) -> int:
        key = (parent, tuple(pieces))
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = self.issued
            self.issued += 1
        return found


@dataclass
class HashStream:
    """A prompt's block hashes as its tokens arrive: a conversation's turn k extends turn
    k-1's prompt, so its hashes continue turn k-1's (linear in the conversation's tokens,
    where hashing each turn's prompt anew would be quadratic)."""
    hasher: BlockHasher
    out: list[int] = field(default_factory=list)
    parent: int = -1
    pieces: list[tuple] = field(default_factory=list)
    filled: int = 0
    tokens: int = 0

    def feed(self, segments: list[Segment]) -> None:
        block = self.hasher.block
        for key, n in segments:
            self.tokens += n
            start = 0
            while start < n:
                take = min(n - start, block - self.filled)
                self.pieces.append((key, start, start + take))
                start += take
                self.filled += take
                if self.filled == block:
                    self.parent = self.hasher._id(self.parent, self.pieces)
                    self.out.append(self.parent)
                    self.pieces, self.filled = [], 0

    def prompt(self) -> tuple[int, list[int]]:
        """The tokens so far and their hashes, the last partial block included."""
        tail = [self.hasher._id(self.parent, self.pieces)] if self.pieces else []
        return self.tokens, [*self.out, *tail]


def step_requests(rows: list[dict], block_size: int, scope: str, template: ChatTemplate,
                  hasher: BlockHasher) -> list:
    """Every row of a step as the request the engine sees (StepLayout, all conversations)."""
    return StepLayout(rows, block_size, scope, template, hasher).take(None)


@dataclass(frozen=True)
class RowIndex:
    """What a layout looks up in a step's rows, whatever the engine: each conversation's turns
    (row order), its place, and how many rows hold each hash id. Depends on the rows alone, so
    one index serves every candidate simulating the step (plan_sim.Datasets keeps it)."""
    sessions: list[tuple[str, list[tuple[int, dict]]]]
    order: dict[str, int]
    uses: Counter[int]

    @classmethod
    def of(cls, rows: list[dict]) -> RowIndex:
        grouped: dict[str, list[tuple[int, dict]]] = {}
        for i, row in enumerate(rows):
            grouped.setdefault(str(row.get("session_id") or f"session_{i:06d}"),
                               []).append((i, row))
        sessions = list(grouped.items())
        return cls(sessions, {conv: k for k, (conv, _) in enumerate(sessions)},
                   Counter(chain.from_iterable(row.get("hash_ids") or [] for row in rows)))


@dataclass
class StepLayout:
    """A step's rows as the requests the engine sees, conversation by conversation on demand
    (a duration-bounded step's dataset holds far more rows than its duration sends).
    `index`: the rows' RowIndex if made already."""
    rows: list[dict]
    block_size: int
    scope: str
    template: ChatTemplate
    hasher: BlockHasher
    built: list = field(default_factory=list)      # requests of the first `done` sessions
    done: int = 0
    index: RowIndex | None = None

    def __post_init__(self) -> None:
        index = self.index or RowIndex.of(self.rows)
        self.sessions, self.order, self.uses = index.sessions, index.order, index.uses

    @property
    def conversations(self) -> int:
        return len(self.sessions)

    def take(self, conversations: int | None) -> list:
        """The requests of the first `conversations` conversations (None: all), row order."""
        limit = len(self.sessions) if conversations is None else min(conversations,
                                                                       len(self.sessions))
        while self.done < limit:
            self.built += self._requests(*self.sessions[self.done])
            self.done += 1
        out = [r for r in self.built if self.order[r.conversation] < limit]
        return sorted(out, key=lambda r: r.index)

    def _requests(self, conv: str, turns: list[tuple[int, dict]]) -> list:
        from workloads.sim.dispatch import Request

        rows = [r for _, r in turns]
        added = conversation_prompts(rows, self.block_size, self.scope, self.template)
        alone = len(turns) == 1 and all(self.uses[h] == 1 for h in rows[0].get("hash_ids") or [])
        stream = HashStream(self.hasher)
        out = []
        for turn, ((i, row), segments) in enumerate(zip(turns, added, strict=True)):
            if alone:   # shares no block with any row: no need to compare its tokens
                tokens = sum(n for _, n in segments)
                hashes = self.hasher.fresh(tokens)
            else:
                stream.feed(segments)
                tokens, hashes = stream.prompt()
            out.append(Request(index=i, conversation=conv, turn=turn, input_length=tokens,
                               output_length=row["output_length"], hash_ids=tuple(hashes),
                               think_ms=float(row.get("delay") or 0.0),
                               timestamp_ms=row.get("timestamp")))
        return out


@dataclass
class Profiled:
    """The requests a step profiles: its layout after the warm-up rows (a sweep step's first
    rows, one conversation each: workloads/step_warmup.py), the first k conversations on
    demand (workloads/sim/step_sim.py simulate)."""
    layout: StepLayout
    warmup: int = 0

    def __call__(self, conversations: int | None) -> list:
        taken = self.layout.take(None if conversations is None else conversations + self.warmup)
        return [r for r in taken if r.index >= self.warmup]

    @property
    def conversations(self) -> int:
        return self.layout.conversations - self.warmup
