"""Speculative decoding by prompt lookup (n-gram drafts), verified by the model in one step.

A sequence often repeats what it has already seen: code being edited, a document being summarised or
quoted, a JSON answer echoing its input. :class:`NgramIndex` finds the most recent earlier occurrence of the
sequence's last ``n`` tokens (``n`` from ``prompt_lookup_max`` down to ``prompt_lookup_min``) in its prompt
and output, and proposes the tokens that followed it as a *draft*. The engine then computes the last token
and the draft in one step (a decode row per token: ``ModelRunner.plan_step``) and, for a greedy request,
takes the model's argmax at each of those positions: the draft's tokens are
accepted while they equal the model's own choice, and the choice at the first difference (or after the
whole draft) is accepted too. So a step yields 1 to ``1 + len(draft)`` tokens, every one the token plain
greedy decoding picks there; the K/V of rejected draft tokens is written past the sequence's computed
length and overwritten later.

Sampled requests (temperature, top-k, top-p, min-p) verify by rejection sampling (:func:`accept_sampled`): the
tokens keep the distribution plain sampling gives them, though not the same draws (a seeded request is
reproducible with the same engine settings, not across them).

Drafts back off where they do not pay (:class:`Acceptance`): a verification step costs more than a plain one
(a step of 1 + d rows, and no greedy decode window around it), so a sequence drafts only while its recent drafts
were accepted often enough to repay that, and otherwise tries a draft again every ``PROBE_AFTER`` tokens.

The index is built incrementally (each token is hashed once per n-gram size, when it first lies before
the suffix looked up); a hash collision can only propose a wrong draft, which verification rejects.
"""

from __future__ import annotations

import bisect
import itertools

import torch

from tritium.engine.sampling import draw


class NgramIndex:
    """For one sequence: the latest end of each n-gram (``n_min <= n <= n_max``) among its tokens, indexed
    up to (not including) the n-gram that ends at its last token.

    With a ``prediction`` (OpenAI's predicted outputs: token ids the answer is expected to repeat, such as the
    file an edit rewrites), drafts come first from it: while the answer so far equals the prediction's start,
    the prediction's next tokens; after a difference, those that follow the answer's last ``n`` tokens in the
    prediction, at the first such place at or after where the last such draft was found (``cursor``: an
    answer walks through its prediction in order, so a repeated line of code resumes at its next copy), else
    at the nearest before it; the sequence's own text is looked up only when the prediction has no match of
    that length. Until the prediction is used up, an answer that found a draft in it within the last
    ``PROBE_AFTER`` tokens counts as repeating (:meth:`repeating`: drafts looked for every step), as it may come
    back to the prediction at any token. ``start``: where the answer begins among the sequence's tokens (the
    prompt's length).
    ``from_prediction``: whether the last draft proposed came from the prediction."""

    __slots__ = ("n_min", "n_max", "ends", "indexed", "last_repeat", "prediction", "start", "pred_ends", "cursor",
                 "aligned", "from_prediction", "hit")

    def __init__(self, n_min: int, n_max: int, prediction: list[int] | None = None, start: int = 0):
        self.n_min, self.n_max = n_min, n_max
        self.ends: list[dict[int, int]] = [{} for _ in range(n_max - n_min + 1)]
        self.indexed = 0  # n-grams ending before this position are in ``ends``
        self.last_repeat = -1  # end of the latest ``n_max``-gram indexed that had occurred before it
        self.prediction = list(prediction or ())
        self.start = start
        # per n: each n-gram of the prediction -> the ends of its occurrences, ascending
        self.pred_ends: list[dict[int, list[int]]] = [{} for _ in range(n_max - n_min + 1)]
        for end in range(n_min, len(self.prediction) + 1):
            for i, table in enumerate(self.pred_ends):
                n = n_min + i
                if end >= n:
                    table.setdefault(hash(tuple(self.prediction[end - n:end])), []).append(end)
        self.cursor = 0  # the prediction's position where its last draft began
        self.hit = start  # the sequence's length when it last found a draft in the prediction
        self.aligned = 0  # the answer's first ``aligned`` tokens equal the prediction's (-1: they differ)
        self.from_prediction = False

    def _index(self, tokens: list[int], upto: int) -> None:
        """Record the n-grams that end at positions ``indexed .. upto - 1`` (exclusive ends ``<= upto``)."""
        for end in range(self.indexed + 1, upto + 1):  # tokens[end - n:end]
            for i, table in enumerate(self.ends):
                n = self.n_min + i
                if end >= n:
                    key = hash(tuple(tokens[end - n:end]))
                    if n == self.n_max and key in table:
                        self.last_repeat = end
                    table[key] = end
        self.indexed = max(self.indexed, upto)

    def repeating(self, tokens: list[int], span: int) -> bool:
        """Whether the text repeats itself lately: a draft now, or an ``n_max``-gram among those that end in the
        last ``span`` tokens occurred before (the engine then looks for drafts every step instead of running
        greedy windows between looks)."""
        if self.propose(tokens, 1):  # (indexes up to the last token)
            return True
        if self.prediction and self.cursor < len(self.prediction) and len(tokens) - self.hit <= PROBE_AFTER:
            return True  # an answer that left its prediction lately may come back to it at any token
        return self.last_repeat > len(tokens) - 1 - span

    def _aligned(self, tokens: list[int]) -> int:
        """The answer's length if it so far equals the prediction's start, else -1 (checked once a token)."""
        answer = len(tokens) - self.start
        if self.aligned < 0 or answer < 0:
            return -1
        pred = self.prediction
        while self.aligned < answer:
            i = self.aligned
            if i >= len(pred) or tokens[self.start + i] != pred[i]:
                self.aligned = -1
                return -1
            self.aligned += 1
        return answer

    def _predicted(self, suffix: list[int], i: int) -> int | None:
        """The end of the prediction's occurrence of ``suffix`` (an n-gram of table ``i``) nearest at or after
        the cursor, else nearest before it; None without one."""
        ends = self.pred_ends[i].get(hash(tuple(suffix)))
        if not ends:
            return None
        j = bisect.bisect_left(ends, self.cursor)
        n = len(suffix)
        for end in itertools.chain(ends[j:], reversed(ends[:j])):
            if end < len(self.prediction) and self.prediction[end - n:end] == suffix:
                return end
        return None

    def propose(self, tokens: list[int], k: int) -> list[int]:
        """Up to ``k`` tokens that followed the latest earlier occurrence of the longest suffix of ``tokens``
        (``n_max`` down to ``n_min`` tokens) that occurred before (with a prediction: see the class); [] when
        none did."""
        self.from_prediction = False
        length = len(tokens)
        if k < 1:
            return []
        if self.prediction:
            answer = self._aligned(tokens)
            if 0 <= answer < len(self.prediction):
                self.cursor, self.from_prediction, self.hit = answer, True, length
                return self.prediction[answer:answer + k]
        if length <= self.n_min:
            return []
        self._index(tokens, length - 1)  # every n-gram but those ending at the last token
        for i in range(len(self.ends) - 1, -1, -1):
            n = self.n_min + i
            if n >= length:
                continue
            suffix = tokens[length - n:]
            if self.prediction:
                end = self._predicted(suffix, i)
                if end is not None:
                    self.cursor, self.from_prediction, self.hit = end, True, length
                    return self.prediction[end:end + k]
            end = self.ends[i].get(hash(tuple(suffix)))
            if end is not None and tokens[end - n:end] == suffix:
                return tokens[end:end + k]
        return []


# What a draft must be expected to gain, in accepted tokens, for its step to pay: a verification step's extra
# cost over a plain decode step, as a fraction of one, by the decode batch's size (running sequences). Measured on
# an H200 (Llama-3-8B shape, `python -m tritium.bench speculative`, bench/NOTES.md "Speculative decoding"; stop 74,
# with the skinny GEMM for 2-32 rows): 0.15-0.21 at batch 1, 0.08-0.23 at 4, 0.22-0.64 at 16 (draft lengths 1-7);
# beyond 16, more.
BREAK_EVEN = ((4, 0.2), (16, 0.45), (None, 0.7))
PRIOR_RATE, PRIOR_WEIGHT = 0.5, 2.0  # a sequence's acceptance before any draft: 0.5, worth two draft tokens
DECAY = 0.75  # each verified draft weighs the ones before it by this (recent text decides)
TAIL = 0.1  # a draft ends where the chance that its next token is accepted falls below this
PROBE_AFTER = 32  # tokens since the last verified draft after which a sequence that backed off drafts again


def break_even(running: int) -> float:
    """Accepted draft tokens a sequence's draft must be expected to yield in a decode batch of ``running``."""
    return next(cost for size, cost in BREAK_EVEN if size is None or running <= size)


class Acceptance:
    """One sequence's recent draft acceptance and what it makes of the next draft (:meth:`length`).

    The model: each draft token is accepted with probability ``rate`` given that the ones before it were
    (a draft stops at its first rejection), estimated from the verified drafts with the older ones weighed
    down by ``DECAY`` each and a prior of ``PRIOR_RATE``. A draft of ``d`` tokens is then expected to gain
    ``rate + rate^2 + ... + rate^d`` tokens."""

    __slots__ = ("hits", "trials", "last")

    def __init__(self, position: int = 0):
        self.hits = self.trials = 0.0
        self.last = position  # the sequence's length at its last verified draft (or at its start)

    @property
    def rate(self) -> float:
        return (self.hits + PRIOR_RATE * PRIOR_WEIGHT) / (self.trials + PRIOR_WEIGHT)

    def length(self, proposed: int, running: int, position: int, token_cost: float = 0.0) -> int:
        """How many of ``proposed`` draft tokens to verify for a sequence ``position`` tokens long in a decode
        batch of ``running``: those whose chance of acceptance is at least ``TAIL`` and ``token_cost`` (at least
        one), where their expected gain less their cost reaches :func:`break_even`, or ``PROBE_AFTER`` tokens after
        the last verified draft; else 0 (no draft this step). ``token_cost``: what proposing a draft token costs,
        in plain decode steps (a draft model's step: :func:`tritium.engine.draft.token_cost`; prompt lookup's: 0)."""
        if proposed < 1:
            return 0
        p = self.rate
        keep, chance, gain = 0, 1.0, 0.0
        while keep < proposed:
            chance *= p
            if keep and (chance < TAIL or chance < token_cost):
                break
            keep += 1
            gain += chance
        if gain - token_cost * keep >= break_even(running) or position - self.last >= PROBE_AFTER:
            return keep
        return 0

    def pays(self, running: int, k: int, token_cost: float = 0.0) -> bool:
        """Whether a draft of ``k`` tokens would be verified now (without a probe)."""
        return self.length(k, running, self.last, token_cost) > 0

    def record(self, drafted: int, accepted: int, position: int) -> None:
        """A verified draft of ``drafted`` tokens of which the first ``accepted`` were, the sequence then
        ``position`` tokens long."""
        self.hits = self.hits * DECAY + accepted
        self.trials = self.trials * DECAY + accepted + (accepted < drafted)
        self.last = position


def accept_sampled(probs: torch.Tensor, spans: list[tuple[int, list[int]]],
                   generators: list[torch.Generator | None]) -> list[tuple[int, int]]:
    """Rejection sampling of drafts for sampled requests, exact for any draft: a draft token is a point mass,
    so token j of a draft is accepted with probability ``p_j(draft[j])`` (``p_j``: the request's distribution at
    that position, ``probs`` row), and at the first rejection the token is drawn from ``p_j`` without the draft
    token (the residual ``max(0, p - q)`` renormalised); after a whole draft, from the next row. Each token out
    so has the distribution plain sampling gives it.

    ``probs`` [R, V]: for each span, ``1 + len(draft)`` rows from ``first``; ``generators``: each span's
    (None: the global generators). Returns each span's (draft tokens accepted, the token after them)."""
    rows = [first + j for first, draft in spans for j in range(len(draft))]
    tokens = [t for _, draft in spans for t in draft]
    dev = probs.device
    p = probs[torch.tensor(rows, dtype=torch.int64).to(dev, non_blocking=True),
              torch.tensor(tokens, dtype=torch.int64).to(dev, non_blocking=True)].tolist()
    accepted, final, rejected, i = [], [], [], 0
    for (first, draft), g in zip(spans, generators):
        u = torch.rand(len(draft), generator=g).tolist()
        j = 0
        while j < len(draft) and u[j] < p[i + j]:
            j += 1
        i += len(draft)
        accepted.append(j)
        final.append(first + j)
        rejected.append(draft[j] if j < len(draft) else -1)
    dist = probs[torch.tensor(final, dtype=torch.int64).to(dev, non_blocking=True)]  # (a copy)
    hit = [k for k, token in enumerate(rejected) if token >= 0]
    if hit:
        dist[torch.tensor(hit).to(dev, non_blocking=True),
             torch.tensor([rejected[k] for k in hit]).to(dev, non_blocking=True)] = 0.0
    # a rejection where the draft token held all the mass (rounding: u < 1 <= p cannot fail otherwise) keeps it
    out, empty = torch.stack((draw(dist, generators), (dist.sum(-1) <= 0).long())).tolist()
    return [(j, rejected[k] if empty[k] else out[k]) for k, j in enumerate(accepted)]
