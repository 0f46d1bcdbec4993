"""Speculative decoding with a draft model: a smaller model of the same vocabulary proposes each step's drafts,
which the engine's model verifies as it does prompt lookup's (:mod:`tritium.engine.speculative`), so the tokens
are the ones the engine's model alone gives.

The draft model keeps a KV cache of its own over the engine's pages: the sequences' block tables index it too,
so it needs no pages or bookkeeping of its own (the cache's size counts both models' bytes a page). A sequence's
``draft_computed`` counts the positions whose K/V the draft model holds for the sequence's tokens. A draft of
``k`` tokens for a sequence of ``N`` tokens is then:

1. catching up: the positions from ``draft_computed`` to ``N - 2``. After a draft verified in part this is
   nothing: the window below wrote the K/V of the draft's tokens, and those accepted are the sequence's
   (:meth:`Drafter.verified`). After a whole draft accepted it is one position (the draft's last token, whose K/V
   no step wrote): a decode step of the draft model (its CUDA graph). Else (a prompt, tokens of steps that drafted
   nothing) prefill rows, no logits, in chunks of ``max_num_batched_tokens``;
2. a greedy window of the draft model from the last token (:meth:`ModelRunner.start_window`: CUDA-graph replays,
   the next input fed on the device): ``k`` steps, whose tokens are the draft.

(Step 1's decode step after a whole draft accepted costs what a ``k + 1``-th window step writing the draft's last
K/V would, but only as often as whole drafts are accepted.)

Draft K/V is written only to positions the sequence's pages were reserved for (the scheduler grows them for the
draft's verification); a rejected token's K/V lies past ``draft_computed`` and is overwritten later, as the
engine's own.
"""

from __future__ import annotations

import types

from tritium.engine.runner import ModelRunner
from tritium.engine.scheduler import ScheduledBatch
from tritium.engine.sequence import Sequence
from tritium.models.llama import LlamaModel

_VIEW_PARAMS = types.SimpleNamespace(pooling=None, max_tokens=1)  # what ModelRunner reads of a view's params
# a draft model's decode step against its weights' share of the model's: a small model's step is further from its
# weight-read time (one H200, decode graphs replayed alone: Llama-3.2-1B's shape 0.85 ms for 2.47 GB, Llama-3-8B's
# 4.08 ms for 15.0 GB; 0.208 against 0.165)
STEP_OVERHEAD = 1.3


def token_cost(draft: LlamaModel, model: LlamaModel) -> float:
    """What a draft token costs in the model's decode steps: ``STEP_OVERHEAD`` times the ratio of the bytes a
    decode step of each reads (this rank's share of the model's under tensor parallelism, whose ranks run its step
    side by side). Drafts are cut to the tokens worth it (:meth:`~tritium.engine.speculative.Acceptance.length`)."""
    return STEP_OVERHEAD * draft.weight_bytes() / model.weight_bytes()


class _View:
    """A sequence as the draft model's runner plans it (:meth:`ModelRunner.plan_step`): its first ``num_tokens``
    tokens, its pages and the positions the draft model computed; no draft, adapter, prompt scores or pooling of
    its own."""

    __slots__ = ("token_ids", "num_computed", "block_table", "num_tokens")
    draft = ()
    lora_slot = None
    scores_prompt = False
    params = _VIEW_PARAMS

    def __init__(self, seq: Sequence, num_computed: int, num_tokens: int):
        self.token_ids, self.block_table = seq.token_ids, seq.block_table
        self.num_computed, self.num_tokens = num_computed, num_tokens


class Drafter:
    """Drafts from the model ``runner`` runs (its cache over the engine's pages). ``max_tokens``: the most
    tokens one catching-up step computes. Counts: ``num_windows`` draft windows run, ``num_steps`` their steps,
    ``num_catch_up_tokens`` positions computed to catch up."""

    def __init__(self, runner: ModelRunner, max_tokens: int):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.runner = runner
        self.max_tokens = max_tokens
        self.num_windows = self.num_steps = self.num_catch_up_tokens = 0

    def propose(self, seqs: list[Sequence], lengths: list[int]) -> list[list[int]]:
        """Draft ``lengths[i]`` (>= 1) tokens after the last token of each of ``seqs`` (running sequences whose
        pages cover their positions up to ``num_tokens - 1 + lengths[i]``)."""
        if len(seqs) != len(lengths) or not seqs:
            raise ValueError(f"propose() takes one length per sequence, got {len(seqs)} sequences and "
                             f"{len(lengths)} lengths")
        if min(lengths) < 1:
            raise ValueError(f"draft lengths must be >= 1, got {lengths}")
        self._catch_up(seqs)
        views = [_View(seq, seq.num_tokens - 1, seq.num_tokens) for seq in seqs]
        steps = max(lengths)
        stops = [seq.num_tokens - 1 + k for seq, k in zip(seqs, lengths)]  # position of each row's last token
        window = self.runner.start_window(ScheduledBatch(views, [1] * len(views)), steps, stops)
        tokens = window.tokens()
        self.num_windows += 1
        self.num_steps += steps
        for seq in seqs:
            seq.draft_computed = seq.num_tokens - 1  # and the draft's positions, once verified
        return [row[:k] for row, k in zip(tokens, lengths)]

    def _catch_up(self, seqs: list[Sequence]) -> None:
        behind = [seq for seq in seqs if seq.draft_computed < seq.num_tokens - 1]
        if behind and all(seq.draft_computed == seq.num_tokens - 2 for seq in behind):
            # one position each (whole drafts accepted): a decode step, its graph (its logits unused)
            views = [_View(seq, seq.num_tokens - 2, seq.num_tokens - 1) for seq in behind]
            self.runner.run(ScheduledBatch(views, [1] * len(views)))
            for seq in behind:
                seq.draft_computed += 1
            self.num_catch_up_tokens += len(behind)
            return
        while behind:
            views, counts, rest, budget = [], [], [], self.max_tokens
            for seq in behind:
                n = min(seq.num_tokens - 1 - seq.draft_computed, budget)
                if n <= 0:
                    rest.append(seq)
                    continue
                views.append(_View(seq, seq.draft_computed, seq.num_tokens))
                counts.append(n)
                budget -= n
                seq.draft_computed += n
                self.num_catch_up_tokens += n
                if seq.draft_computed < seq.num_tokens - 1:
                    rest.append(seq)
            self.runner.run(ScheduledBatch(views, counts))  # no row reaches its view's end: no logits
            behind = rest

    @staticmethod
    def verified(seq: Sequence, draft: list[int], base: int) -> None:
        """After ``seq``'s ``draft``, proposed when it held ``base`` tokens, was verified: the draft model's cache
        holds the positions whose token is now the draft's and whose K/V the window wrote (position ``base + j``
        holds ``draft[j]``'s for ``j < len(draft) - 1``), never the sequence's last."""
        ok = 0
        while ok < len(draft) - 1 and base + ok < seq.num_tokens and seq.token_ids[base + ok] == draft[ok]:
            ok += 1
        seq.draft_computed = min(base + ok, seq.num_tokens - 1)
