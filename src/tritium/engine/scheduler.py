"""Continuous batching: which tokens of which sequences run in the next step.

Every step has a token budget (``max_num_batched_tokens``). Running sequences go first (a decode costs one
token; a prompt still being prefilled takes what is left of the budget: chunked prefill), then waiting
sequences are admitted in arrival order while budget, sequence slots and KV pages last. When a running
sequence needs a page and none is free, the most recently admitted running sequence is preempted: its
pages are freed and it goes back to the front of the queue, to be recomputed (prompt and generated tokens
alike) when it is admitted again; the prefix cache usually makes that cheap.

The scheduler also plans greedy decode *windows*: a decode batch of greedy sequences with nobody waiting
runs up to ``decode_steps`` steps back to back on the device; the scheduler reserves the pages those steps
write (and, to let the runner queue the next window before the host has read this one, the page of the
position after it). It is the only caller of the block manager: every page a sequence holds was handed
out here and is freed here (finish, abort, preemption).

With speculative decoding (``num_speculative_tokens`` > 0), a running greedy sequence at its last token whose
suffix occurred before gets a draft (``seq.draft``, :mod:`tritium.engine.speculative`) and computes ``1 +
len(draft)`` tokens in the step, when budget and pages allow and the step's tokens stay within
``max_decode_rows`` (``EngineConfig.max_decode_rows``: the largest decode graph's rows; else it decodes one token
as usual: a draft never preempts anyone). The engine verifies the draft and advances
the sequence by what it accepted. A draft is cut to the tokens likely enough to be accepted, or left out, by the
sequence's recent acceptance (``seq.acceptance``, :class:`~tritium.engine.speculative.Acceptance`;
``adaptive_drafts`` False: every draft found is verified whole).
"""

from __future__ import annotations

import collections
import dataclasses

from tritium.engine.block_manager import BlockManager
from tritium.engine.lora import LoRASlots
from tritium.engine.sequence import Sequence, Status


@dataclasses.dataclass
class ScheduledBatch:
    """Sequences of one step and how many new tokens each computes (same order)."""

    seqs: list[Sequence]
    num_new: list[int]
    window: int = 1            # greedy decode steps run back to back (1: one step, sampled on the host)
    continuable: bool = False  # the window's pages include the position after it: it may be continued

    @property
    def num_tokens(self) -> int:
        return sum(self.num_new)

    @property
    def is_decode(self) -> bool:
        """Every sequence computes exactly its last token (no prompt work)."""
        return all(n == 1 and s.num_computed + 1 == s.num_tokens for s, n in zip(self.seqs, self.num_new))


class Scheduler:
    """Continuous batching over one :class:`BlockManager`.

    ``max_model_len`` (None: unbounded) and ``decode_steps`` (1: no windows) plan greedy decode windows.
    ``model_drafts``: speculative decoding's drafts come from a draft model (or a request's prediction).
    """

    def __init__(self, block_manager: BlockManager, *, max_num_batched_tokens: int, max_num_seqs: int,
                 enable_chunked_prefill: bool = True, max_model_len: int | None = None, decode_steps: int = 1,
                 num_speculative_tokens: int = 0, max_decode_rows: int | None = None, model_drafts: bool = False):
        self.blocks = block_manager
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_num_seqs = max_num_seqs
        self.enable_chunked_prefill = enable_chunked_prefill
        self.max_model_len = max_model_len
        self.decode_steps = decode_steps
        self.num_speculative_tokens = num_speculative_tokens
        # drafts from a draft model (EngineConfig.speculative_model): a sequence that drafts gets a placeholder of
        # the draft's length, which the engine fills before the step runs
        self.model_drafts = model_drafts
        self.draft_token_cost = 0.0  # a draft token's cost in plain decode steps (Acceptance.length); 0: lookup's
        self.adaptive_drafts = True  # drafts cut or left out by each sequence's acceptance (False: the bench's)
        self.max_decode_rows = max(max_num_seqs, 1 + num_speculative_tokens) if max_decode_rows is None \
            else max_decode_rows
        self.waiting: collections.deque[Sequence] = collections.deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self.loras: LoRASlots | None = None  # the engine's LoRA adapter slots (enable_lora)

    def add(self, seq: Sequence) -> None:
        """Queue ``seq``; ValueError (nothing queued) for a prompt this engine could never compute: more pages
        than the KV cache (or the windowed layers' pool) holds, or more tokens than a step takes with chunked
        prefill off. (Checked again at scheduling, as a RuntimeError, where a sequence outgrows the cache.)"""
        why = self._never_fits(seq, f"the prompt of {seq.num_tokens} tokens")
        if why is not None:
            raise ValueError(why)
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> ScheduledBatch:
        budget = self.max_num_batched_tokens
        seqs, num_new = [], []
        # 1. running sequences, oldest first; preempt from the newest end when pages run out.
        i = drafted = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = min(seq.num_tokens - seq.num_computed, budget)
            # a draft's tokens run as decode rows of their own: the step's rows stay within max_decode_rows (the
            # largest decode graph)
            room = min(budget - n, self.max_decode_rows - len(self.running) - drafted)
            seq.draft_from_model = False
            seq.draft = self._draft(seq, room) if n == 1 and seq.num_computed + 1 == seq.num_tokens else []
            if seq.draft and self.blocks.grow(seq, seq.num_computed + 1 + len(seq.draft)):
                seqs.append(seq)
                num_new.append(1 + len(seq.draft))
                budget -= 1 + len(seq.draft)
                drafted += len(seq.draft)
                i += 1
                continue
            seq.draft, seq.draft_from_model = [], False
            while not self.blocks.grow(seq, seq.num_computed + n):
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
            if seq.lora is not None and seq.lora_slot is None:  # its adapter in a slot, or it waits for one
                seq.lora_slot = self.loras.acquire(seq.lora.name)
                if seq.lora_slot is None:
                    break
            if not seq.block_table:
                self.blocks.take_prefix(seq)
                seq.num_computed = len(seq.block_table) * self.blocks.block_size
            remaining = seq.num_tokens - seq.num_computed
            n = min(remaining, budget)
            if (n < remaining and not self.enable_chunked_prefill) or \
                    not self.blocks.grow(seq, seq.num_computed + n):
                if not self.running and not seqs:
                    self._fail_if_never_fits(seq)
                self._release(seq)
                break
            self.waiting.popleft()
            if seq.num_cached_tokens is None:  # its first admission: what the prefix cache spared its prompt
                seq.num_cached_tokens = min(seq.num_computed, seq.prompt_len)
            seq.status = Status.RUNNING
            self.running.append(seq)
            seqs.append(seq)
            num_new.append(n)
            budget -= n
        batch = ScheduledBatch(seqs, num_new)
        self._plan_window(batch)
        return batch

    def _repeating(self, batch: ScheduledBatch) -> bool:
        """Speculative decoding: whether a sequence of ``batch`` whose acceptance lets it draft (:meth:`_may_draft`)
        finds a draft now or repeated a ``prompt_lookup_max``-gram within its last ``decode_steps`` tokens."""
        return bool(self.num_speculative_tokens) and any(
            (s.lookup is not None or self.model_drafts and s.acceptance is not None) and self._may_draft(s)
            and (self.model_drafts or s.lookup.repeating(s.token_ids, self.decode_steps))
            for s in batch.seqs)

    def _may_draft(self, seq: Sequence) -> bool:
        """Whether ``seq``'s acceptance lets it verify a draft now (a full one, in a batch of the running)."""
        return (not self.adaptive_drafts or seq.acceptance is None
                or seq.acceptance.length(self.num_speculative_tokens, len(self.running), seq.num_tokens,
                                         self._token_cost(seq)) > 0)

    def _token_cost(self, seq: Sequence) -> float:
        return self.draft_token_cost if self.model_drafts and seq.lookup is None else 0.0

    def _draft(self, seq: Sequence, room: int) -> list[int]:
        """A draft for ``seq`` (running, at its last token) of at most ``room`` tokens, none past what it may
        still sample (the step's own token counts as one); [] when it gets none."""
        drafter = self.model_drafts and seq.acceptance is not None  # (the engine gives a drafting sequence one)
        if not self.num_speculative_tokens or (seq.lookup is None and not drafter):
            return []
        k = min(self.num_speculative_tokens, room, self.to_sample(seq) - 1)
        draft = seq.lookup.propose(seq.token_ids, k) if k > 0 and seq.lookup is not None else []
        seq.draft_predicted = bool(draft) and seq.lookup.from_prediction
        if drafter and not seq.draft_predicted and k > 0:
            draft = [0] * k  # the draft model's, proposed once the step is scheduled (LLMEngine)
            seq.draft_from_model = True
        if draft and self.adaptive_drafts and seq.acceptance is not None:
            cost = self.draft_token_cost if seq.draft_from_model else 0.0
            draft = draft[:seq.acceptance.length(len(draft), len(self.running), seq.num_tokens, cost)]
        seq.draft_from_model = seq.draft_from_model and bool(draft)
        return draft

    # -- greedy decode windows -----------------------------------------------------------------------------
    def to_sample(self, seq: Sequence, ahead: int = 0) -> int:
        """Tokens ``seq`` may still sample, ``ahead`` steps past the host's state (max_tokens, context)."""
        left = seq.params.max_tokens - len(seq.output_ids)
        if self.max_model_len is not None:
            left = min(left, self.max_model_len - seq.num_tokens)
        return left - ahead

    def stop_position(self, seq: Sequence) -> int:
        """Position of the last token ``seq`` may sample: a window's row stops on the device after it."""
        return seq.num_tokens - 1 + self.to_sample(seq)

    def window_len(self, batch: ScheduledBatch, ahead: int = 0) -> int:
        """Steps a greedy window of ``batch`` runs, ``ahead`` steps past the host's state: > 1 only for a
        greedy decode batch of running sequences with nobody waiting; up to ``decode_steps`` and the
        longest-running sequence (a sequence with fewer tokens to go stops on the device at its last one).
        With speculative decoding, 1 while a sequence's text repeats itself (:meth:`_repeating`): drafts are
        looked for every step then."""
        if self.decode_steps <= 1 or self.waiting or not batch.is_decode \
                or not all(s.params.device_greedy and s.status is Status.RUNNING for s in batch.seqs) \
                or self._repeating(batch):
            return 1
        return min(self.decode_steps, max(self.to_sample(seq, ahead) for seq in batch.seqs))

    def _reserve(self, batch: ScheduledBatch, k: int, ahead: int, ahead_page: bool) -> bool:
        """Pages for the positions every sequence computes in a window of ``k`` steps ``ahead`` steps on,
        and with ``ahead_page`` the position after them for the sequences that go on (the window's last
        step writes its slot: a window is continued only from such a one)."""
        for seq in batch.seqs:
            n = self.to_sample(seq, ahead)
            need = ahead + min(k, n) + (1 if ahead_page and n > k else 0)
            if need > 0 and not self.blocks.grow(seq, seq.num_computed + need):
                return False
        return True

    def _plan_window(self, batch: ScheduledBatch) -> None:
        """Set ``batch.window`` (and whether it may be continued) once the pages for it are in hand."""
        k = self.window_len(batch)
        if k <= 1:
            return
        # schedule() gave each sequence one slot; the window needs up to k, continuing it one more
        if self._reserve(batch, k, 0, ahead_page=True):
            batch.window, batch.continuable = k, True
        elif self._reserve(batch, k, 0, ahead_page=False):
            batch.window = k

    def continue_window(self, batch: ScheduledBatch, ahead: int) -> int:
        """Steps of a window that continues ``batch``'s window in flight, ``ahead`` steps past the host's
        state, with its pages reserved; 0 when there is none (a sequence finished or was aborted, someone
        is waiting, nothing is left to sample, or pages ran out), or when a sequence's text repeats itself at
        the host's state (speculative decoding: the batch is scheduled again once the window in flight is played
        back, and drafts are looked for there)."""
        k = self.window_len(batch, ahead)
        if k > 1 and self._reserve(batch, k, ahead, ahead_page=True):
            return k
        return 0

    def _fail_if_never_fits(self, seq: Sequence) -> None:
        why = self._never_fits(seq, f"sequence {seq.seq_id}")
        if why is not None:
            raise RuntimeError(why)

    def _never_fits(self, seq: Sequence, who: str) -> str | None:
        """Why ``seq`` (``who`` in the message) could never be computed as it stands, or None."""
        need = -(-seq.num_tokens // self.blocks.block_size)
        if need > self.blocks.num_blocks:
            return (f"{who} needs {need} KV-cache pages, the cache has {self.blocks.num_blocks}; give a larger "
                    f"KV-cache budget")
        wp = self.blocks.window_pool
        if wp is not None:  # its window and the chunk after it
            window_need = min(need, -(-(self.blocks.window + self.max_num_batched_tokens) // self.blocks.block_size)
                              + 1)
            if window_need > wp.num_blocks:
                return (f"{who} needs {window_need} pages of the windowed layers' KV cache, it has {wp.num_blocks}; "
                        f"give more num_window_blocks")
        if not self.enable_chunked_prefill and seq.num_tokens - seq.num_computed > self.max_num_batched_tokens:
            return (f"prompt of {seq.num_tokens} tokens exceeds max_num_batched_tokens {self.max_num_batched_tokens} "
                    f"and chunked prefill is off")
        return None

    def _release(self, seq: Sequence) -> None:
        self.blocks.free_seq(seq)
        self._release_lora(seq)
        seq.num_computed = 0
        seq.draft = []

    def _release_lora(self, seq: Sequence) -> None:
        if seq.lora_slot is not None:
            self.loras.release(seq.lora_slot)
            seq.lora_slot = None

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._release(seq)
        seq.pool_sum = None  # an embedding request computes its prompt again, and pools it again
        seq.draft_computed = 0  # and the draft model's cache of it (its pages are gone)
        seq.status = Status.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def update(self, batch: ScheduledBatch) -> list[Sequence]:
        """After the model ran ``batch``: advance progress and publish filled pages. Returns the
        sequences whose every token is now computed (they get a sampled token). (Sequences with a draft are
        advanced by the engine, token by token as it accepts them: :meth:`advance`.)"""
        done = []
        for seq, n in zip(batch.seqs, batch.num_new):
            self.advance(seq, n)
            if seq.num_computed == seq.num_tokens:
                done.append(seq)
        return done

    def advance(self, seq: Sequence, n: int) -> None:
        """``n`` more tokens of ``seq`` have their K/V in the cache: count them, publish filled pages and
        release the window pages behind its window."""
        seq.num_computed += n
        self.blocks.computed(seq)

    def finish(self, seq: Sequence, reason: str) -> None:
        """End a running or waiting sequence (a finish or an abort): its pages are freed at once."""
        if seq.status is Status.RUNNING:
            self.running.remove(seq)
        elif seq.status is Status.WAITING:
            self.waiting.remove(seq)
        seq.status = Status.FINISHED
        seq.finish_reason = reason
        self.blocks.free_seq(seq)
        self._release_lora(seq)
