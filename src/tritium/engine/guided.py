"""Guided answers (vLLM's ``guided_choice`` / ``guided_regex``, its ``structured_outputs`` ``choice`` and
``regex``): the answer is one of a list of strings, or a full match of a regular expression, held token by token
with JSON mode's machinery (:class:`~tritium.engine.json_mode.TokenIndex` masks, cached per state) over a DFA of
the answer's bytes.

A state that ends an answer and has nothing after it ends the request at once (finish reason "stop"). A state
that ends one but may go on (the choice "1" beside "10", the regex ``\\d+``) also allows the model's EOS tokens:
drawn, the answer ends there, as an EOS ends free text (not with ``ignore_eos``, which leaves them out: such an
answer then runs on to a state with nothing after it, or to ``max_tokens``). Special tokens are never part of an
answer. A grammar is refused where the vocabulary lacks a one-byte token for a byte it may need
(:func:`missing_bytes`): then every state keeps a token that can follow it.

Regular expressions are :mod:`tritium.engine.regex`'s with ``text=True``: over printable ASCII, tab, newline and
carriage return, plus non-ASCII characters written out in the pattern; matched in full.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from tritium.engine.json_mode import JsonConstraint, TokenIndex
from tritium.engine.regex import Dfa, compile_pattern

GUIDED_FORMATS = ("choice", "regex")
MAX_CHOICES = 1024
MAX_CHOICE_BYTES = 65536  # all choices together, in UTF-8
TRIE_MAX_BYTES = 16  # DfaGrammar.token_mask: a state with more next bytes steps every token at once


@dataclasses.dataclass(frozen=True, eq=False)
class DfaGrammar:
    """A :class:`~tritium.engine.json_mode.Grammar` over a DFA whose states all still reach an end (``key`` names
    it in the mask cache). Whitespace is content throughout (no whitespace cap, as in a JSON string).
    ``stepped``: wide states' masks step every token at once (:meth:`token_mask`; a regex's DFA, at most
    ``regex.MAX_STATES`` states); a choice's trie is walked, which its own few branches keep short."""

    key: str
    dfa: Dfa
    stepped: bool = False
    start: int = 0

    def advance(self, state: int, b: int) -> int | None:
        return self.dfa.step(state, b)

    def accepting(self, state: int) -> bool:
        """An answer may end here."""
        return self.dfa.accepting(state)

    def complete(self, state: int) -> bool:
        """The answer has ended: it may end here and nothing can follow."""
        return self.dfa.accepting(state) and not self.dfa.table[state]

    @staticmethod
    def in_string(state) -> bool:
        return True

    @staticmethod
    def plain_string(state) -> None:
        """Never a free string (every byte steps the DFA); the DFA writes only the UTF-8 of the choices and of
        the pattern's characters, so its answers are well-formed UTF-8 already."""
        return None

    @functools.cached_property
    def bytes_used(self) -> frozenset:
        """Every byte some state may write."""
        return frozenset(b for row in self.dfa.table for b in row)

    @functools.cached_property
    def dense(self) -> torch.Tensor:
        """``[states + 1, 256]`` int16: the next state of each (state, byte), or the last row (a dead state);
        at most 1 MiB (``regex.MAX_STATES``)."""
        dead = len(self.dfa.table)
        table = torch.full((dead + 1, 256), dead, dtype=torch.int16)
        for state, row in enumerate(self.dfa.table):
            if row:
                table[state, list(row)] = torch.tensor(list(row.values()), dtype=torch.int16)
        return table

    def token_mask(self, index: TokenIndex, state: int) -> torch.Tensor | None:
        """Bool ``[vocab_size]``: the tokens whose bytes ``state`` can follow, every token stepped through the
        DFA at once, a byte position at a time, where more than ``TRIE_MAX_BYTES`` bytes may come next; None
        (walk the vocabulary's trie) where fewer may. SmolLM2's 49k tokens, ms a state: a choice's 1-3 bytes
        0.3 by the trie, 1.1-1.6 stepped; ``[A-Za-z ,.]{1,200}`` 91 by the trie (most of the vocabulary is
        visited), 3.3-3.7 stepped; ``(.|\\n)*`` 11 and 0.44."""
        if not self.stepped or len(self.dfa.table[state]) <= TRIE_MAX_BYTES:
            return None
        ids, columns = index.bytes_by_length()
        dense, dead = self.dense, len(self.dfa.table)
        current = torch.full((len(ids),), state, dtype=torch.int64)
        for column in columns:
            n = len(column)
            current[:n] = dense[current[:n], column]
            if bool((current[:n] == dead).all()):  # every longer token is out already
                break
        mask = torch.zeros(index.vocab_size, dtype=torch.bool)
        mask[ids[current != dead]] = True
        return mask


@functools.lru_cache(maxsize=64)
def _choice_grammar(choices: tuple[str, ...]) -> DfaGrammar:
    table: list[dict] = [{}]
    accept = set()
    for text in choices:
        state = 0
        for b in text.encode():
            nxt = table[state].get(b)
            if nxt is None:
                nxt = table[state][b] = len(table)
                table.append({})
            state = nxt
        accept.add(state)
    return DfaGrammar(f"choice:{choices!r}", Dfa(tuple(table), frozenset(accept)))


def compile_choice(choices) -> DfaGrammar:
    """The grammar of an answer that is one of ``choices`` (non-empty strings; cached, the 64 most recent);
    ValueError naming what is wrong."""
    if not isinstance(choices, (list, tuple)) or not choices:
        raise ValueError(f"choices must be a non-empty list of strings, got {_show(choices)}")
    if len(choices) > MAX_CHOICES:
        raise ValueError(f"choices: at most {MAX_CHOICES} strings, got {len(choices)}")
    for i, text in enumerate(choices):
        if not isinstance(text, str) or not text:
            raise ValueError(f"choices[{i}] must be a non-empty string, got {_show(text)}")
    if sum(len(text.encode()) for text in choices) > MAX_CHOICE_BYTES:
        raise ValueError(f"choices: more than {MAX_CHOICE_BYTES} bytes of text together")
    return _choice_grammar(tuple(choices))


@functools.lru_cache(maxsize=64)
def _regex_grammar(pattern: str) -> DfaGrammar | str:
    try:
        return DfaGrammar(f"regex:{pattern}", compile_pattern(pattern, text=True), stepped=True)
    except ValueError as e:  # refusals are cached too: one past MAX_STATES took 0.6 s to find out
        return str(e)


def compile_regex(pattern) -> DfaGrammar:
    """The grammar of an answer that matches ``pattern`` in full (cached, the 64 most recent, refusals
    included); ValueError naming what is not supported."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"regex must be a non-empty string, got {_show(pattern)}")
    grammar = _regex_grammar(pattern)
    if isinstance(grammar, str):
        raise ValueError(grammar)
    return grammar


def compile_guided(kind: str, spec) -> DfaGrammar:
    """``kind`` "choice" (``spec``: the strings) or "regex" (``spec``: the pattern)."""
    if kind == "choice":
        return compile_choice(spec)
    if kind == "regex":
        return compile_regex(spec)
    raise ValueError(f"a guided answer is one of {', '.join(map(repr, GUIDED_FORMATS))}, got {kind!r}")


def missing_bytes(grammar: DfaGrammar, index: TokenIndex) -> list[int]:
    """The bytes ``grammar`` may write that no one-byte token of ``index`` holds (empty: it can be followed)."""
    return sorted(grammar.bytes_used - index.single_bytes)


class GuidedConstraint(JsonConstraint):
    """One request's guided answer: :meth:`mask` before a token, :meth:`accept` after it, as
    :class:`~tritium.engine.json_mode.JsonConstraint`; ``stop_ids`` (the model's EOS tokens, or none) are
    allowed where the answer may end but could go on, and :meth:`accept` of one returns False (not the
    answer's: the request stops on it as on any EOS)."""

    def __init__(self, index: TokenIndex, grammar: DfaGrammar, stop_ids=()):
        super().__init__(index, grammar)
        self.stop_ids = sorted(set(stop_ids))

    def mask(self, device: torch.device) -> torch.Tensor:
        mask = self.index.mask(self.state, device, self.grammar)
        if self.stop_ids and self.grammar.accepting(self.state):
            mask = mask.clone()
            mask[self.stop_ids] = True
        return mask

    def accept(self, token_id: int) -> bool:
        if token_id in self.stop_ids and self.grammar.accepting(self.state):
            return False
        return super().accept(token_id)


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
