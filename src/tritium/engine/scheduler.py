"""Continuous batching: which tokens of which sequences run in the next step.

Every step has a token budget (``max_num_batched_tokens``). Running sequences go first (a decode costs one
token; a prompt still being prefilled takes what is left of the budget: chunked prefill), then waiting
sequences are admitted in arrival order while budget, sequence slots and KV pages last. When a running
sequence needs a page and none is free, the most recently admitted running sequence is preempted: its
pages are freed and it goes back to the front of the queue, to be recomputed (prompt and generated tokens
alike) when it is admitted again; the prefix cache usually makes that cheap.
"""

from __future__ import annotations

import collections
import dataclasses
import enum

from tritium.engine.block_manager import BlockManager
from tritium.engine.sampling import SamplingParams


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclasses.dataclass(eq=False)
class Sequence:
    """One request: its tokens (prompt then generated), pages and progress.

    ``num_computed`` tokens have their K/V in the cache; the step computes ``token_ids[num_computed:
    num_computed + n]`` and, when that reaches the end, samples one more token.
    """

    seq_id: int
    token_ids: list[int]
    params: SamplingParams
    prompt_len: int = 0
    num_computed: int = 0
    block_table: list[int] = dataclasses.field(default_factory=list)
    block_keys: list[int] = dataclasses.field(default_factory=list)
    status: Status = Status.WAITING
    finish_reason: str | None = None
    num_preemptions: int = 0
    generator: object = None  # torch.Generator of a seeded request
    prompt_text: str | None = None
    text: str | None = None  # set when a stop string cut the output

    def __post_init__(self):
        self.prompt_len = self.prompt_len or len(self.token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def output_ids(self) -> list[int]:
        return self.token_ids[self.prompt_len:]


@dataclasses.dataclass
class ScheduledBatch:
    """Sequences of one step and how many new tokens each computes (same order)."""

    seqs: list[Sequence]
    num_new: list[int]

    @property
    def num_tokens(self) -> int:
        return sum(self.num_new)

    @property
    def is_decode(self) -> bool:
        """Every sequence computes exactly its last token (no prompt work)."""
        return all(n == 1 and s.num_computed + 1 == s.num_tokens for s, n in zip(self.seqs, self.num_new))


class Scheduler:
    def __init__(self, block_manager: BlockManager, *, max_num_batched_tokens: int, max_num_seqs: int,
                 enable_chunked_prefill: bool = True):
        self.blocks = block_manager
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.enable_chunked_prefill = enable_chunked_prefill
        self.waiting: collections.deque[Sequence] = collections.deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> ScheduledBatch:
        budget = self.max_num_batched_tokens
        seqs, num_new = [], []
        # 1. running sequences, oldest first; preempt from the newest end when pages run out.
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            while not self.blocks.append_slots(seq.block_table, seq.num_computed + n):
                victim = self.running[-1]
                self._preempt(victim)
                if victim is seq:
                    self._fail_if_never_fits(seq)
                    break
            else:
                seqs.append(seq)
                num_new.append(n)
                budget -= n
                i += 1
                continue
            break  # seq itself was preempted: it was the newest, nothing after it runs
        # 2. waiting sequences in arrival order.
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if not seq.block_table:
                seq.block_table, seq.block_keys = self.blocks.allocate_prefix(seq.token_ids)
                seq.num_computed = len(seq.block_table) * self.blocks.block_size
            remaining = seq.num_tokens - seq.num_computed
            n = min(remaining, budget)
            if (n < remaining and not self.enable_chunked_prefill) or \
                    not self.blocks.append_slots(seq.block_table, seq.num_computed + n):
                if not self.running and not seqs:
                    self._fail_if_never_fits(seq)
                self._release(seq)
                break
            self.waiting.popleft()
            seq.status = Status.RUNNING
            self.running.append(seq)
            seqs.append(seq)
            num_new.append(n)
            budget -= n
        return ScheduledBatch(seqs, num_new)

    def _fail_if_never_fits(self, seq: Sequence) -> None:
        need = -(-seq.num_tokens // self.blocks.block_size)
        if need > self.blocks.num_blocks:
            raise RuntimeError(f"sequence {seq.seq_id} needs {need} KV-cache pages, the cache has "
                               f"{self.blocks.num_blocks}; give a larger KV-cache budget")
        if not self.enable_chunked_prefill and seq.num_tokens - seq.num_computed > self.max_num_batched_tokens:
            raise RuntimeError(f"prompt of {seq.num_tokens} tokens exceeds max_num_batched_tokens "
                               f"{self.max_num_batched_tokens} and chunked prefill is off")

    def _release(self, seq: Sequence) -> None:
        self.blocks.free(seq.block_table)
        seq.block_keys = []
        seq.num_computed = 0

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._release(seq)
        seq.status = Status.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def update(self, batch: ScheduledBatch) -> list[Sequence]:
        """After the model ran ``batch``: advance progress and publish filled pages. Returns the
        sequences whose every token is now computed (they get a sampled token)."""
        done = []
        for seq, n in zip(batch.seqs, batch.num_new):
            self.advance(seq, n)
            if seq.num_computed == seq.num_tokens:
                done.append(seq)
        return done

    def advance(self, seq: Sequence, n: int) -> None:
        """``n`` more tokens of ``seq`` have their K/V in the cache: count them and publish filled pages."""
        seq.num_computed += n
        self.blocks.register(seq.block_table, seq.block_keys, seq.token_ids, seq.num_computed)

    def finish(self, seq: Sequence, reason: str) -> None:
        seq.status = Status.FINISHED
        seq.finish_reason = reason
        self.running.remove(seq)
        self.blocks.free(seq.block_table)
        seq.block_keys = []
