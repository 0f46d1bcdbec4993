"""JSON mode (OpenAI's ``response_format={"type": "json_object"}``): the answer is constrained, token by token,
to one JSON object (RFC 8259), and the request finishes as soon as that object closes.

Before each token of such a request the engine masks every token whose bytes cannot continue the JSON written
so far (:meth:`JsonConstraint.mask`), samples among the others, then advances the constraint by the sampled
token's bytes (:meth:`JsonConstraint.accept`). The check is a byte-level recognizer of JSON text whose state is
a small tuple (mode, the stack of open containers, the mode's detail), so that the allowed tokens of a state
can be cached and shared between requests:

- in a string, a token of plain string bytes (no quote, no backslash, no control character) changes at most
  the UTF-8 character left open: those are one precomputed mask per open character, and only the tokens
  holding a quote, a backslash or a control character are checked one by one (a few thousand of a 128k
  vocabulary);
- elsewhere, the vocabulary sorted by bytes is walked as a trie, each prefix's bytes fed to the recognizer
  once, a subtree dropped at its first byte that cannot follow.

The vocabulary must hold every printable ASCII character and the JSON whitespace as a token of its own (a
byte-level BPE holds every byte; a SentencePiece vocabulary its byte-fallback pieces): then some token can
follow every state but the closed object, so the sampler never faces an empty mask. Other vocabularies are
refused (:attr:`TokenIndex.missing`). Special tokens (the tokenizer's added special tokens: EOS, chat markers)
are never allowed: the answer ends
when the object closes (finish reason "stop"), or at ``max_tokens`` (finish reason "length", the JSON cut
short, as OpenAI's). Outside strings at most 8 whitespace-only tokens may follow each other
(:class:`JsonConstraint`), so that a model cannot pad with whitespace until ``max_tokens``, the failure
OpenAI warns of for its JSON mode.

Strings are well-formed UTF-8 (what Python's strict decoder takes: no overlong forms, no surrogates, nothing
past U+10FFFF): a lead byte is followed by exactly its continuation bytes, and a token may end inside a
character (a byte-fallback ``<0xE2>``, a byte-level BPE piece of a character) only where some token can
finish it. A character left open is part of the string's state (mode ``UTF8``: the bytes it still needs).
Escapes ``\\uXXXX`` are taken as written (Python's json reads a lone surrogate too).
"""

from __future__ import annotations

import bisect
import collections
import threading

import torch

# modes of the recognizer (a state is (mode, stack, aux); stack: a str of "o" (object) and "a" (array))
# (UTF8: inside a string, within a multi-byte character; aux (is_key, the character's open bytes: UTF8_LEADS))
TOP, OBJ_FIRST, OBJ_KEY, COLON, VALUE, ARR_FIRST, AFTER, STR, ESC, UHEX, NUM, LIT, DONE, UTF8 = range(14)
_WS = frozenset(b" \t\n\r")
_DIGITS = frozenset(b"0123456789")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = frozenset(b'"\\/bfnrt')
_LITERALS = {ord("t"): b"rue", ord("f"): b"alse", ord("n"): b"ull"}
# number sub-states: after '-', after a leading 0, in the integer, after '.', in the fraction, after 'e', after
# the exponent's sign, in the exponent
N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP = range(8)
_NUMBER_ENDS = frozenset((N_ZERO, N_INT, N_FRAC, N_EXP))
MAX_DEPTH = 64  # open containers at most
START = (TOP, "", None)
_PLAIN_STRING_DROP = bytes([*range(0x20), ord('"'), ord("\\")])
# a UTF-8 lead byte: (continuation bytes after it, range of the first of them); the others are 0x80-0xBF. No
# overlong forms (C0, C1, E0 80-9F, F0 80-8F), no surrogates (ED A0-BF), nothing past U+10FFFF (F4 90-, F5-FF)
UTF8_LEADS = {**{b: (1, 0x80, 0xBF) for b in range(0xC2, 0xE0)}, 0xE0: (2, 0xA0, 0xBF),
              **{b: (2, 0x80, 0xBF) for b in range(0xE1, 0xF0) if b != 0xED}, 0xED: (2, 0x80, 0x9F),
              0xF0: (3, 0x90, 0xBF), 0xF1: (3, 0x80, 0xBF), 0xF2: (3, 0x80, 0xBF), 0xF3: (3, 0x80, 0xBF),
              0xF4: (3, 0x80, 0x8F)}
# every open character: () none, else what UTF8_LEADS gives and what follows its first continuation byte
UTF8_OPEN = ((), *sorted(set(UTF8_LEADS.values()) | {(1, 0x80, 0xBF), (2, 0x80, 0xBF)}))


def utf8_step(open_: tuple, b: int):
    """The open character after string byte ``b`` (() when none is left open), or None where ``b`` breaks
    UTF-8: a continuation byte out of its range or where none is due, a lead byte where one is due, or a
    byte that is no lead (0x80-0xC1, 0xF5-0xFF)."""
    if open_:
        left, first, last = open_
        if not first <= b <= last:
            return None
        return (left - 1, 0x80, 0xBF) if left > 1 else ()
    return () if b < 0x80 else UTF8_LEADS.get(b)


def utf8_end(data: bytes, open_: tuple = ()):
    """The open character after string bytes ``data`` (no quote, backslash or control byte) from ``open_``, or
    None where they break UTF-8."""
    if not open_ and data.isascii():
        return ()
    for b in data:
        open_ = utf8_step(open_, b)
        if open_ is None:
            return None
    return open_


def _value_done(stack: str):
    return (AFTER, stack, None) if stack else (DONE, "", None)


def _value_start(stack: str, b: int):
    """The state after byte ``b`` opens a value, or None."""
    if b == 0x7B:  # {
        return (OBJ_FIRST, stack + "o", None) if len(stack) < MAX_DEPTH else None
    if b == 0x5B:  # [
        return (ARR_FIRST, stack + "a", None) if len(stack) < MAX_DEPTH else None
    if b == 0x22:  # "
        return (STR, stack, False)
    if b == 0x2D:  # -
        return (NUM, stack, N_MINUS)
    if b == 0x30:
        return (NUM, stack, N_ZERO)
    if b in _DIGITS:
        return (NUM, stack, N_INT)
    rest = _LITERALS.get(b)
    return None if rest is None else (LIT, stack, rest)


def _close(stack: str, b: int):
    """The state after ``b`` closes the innermost container (``}`` an object, ``]`` an array), or None."""
    if stack and ((b == 0x7D and stack[-1] == "o") or (b == 0x5D and stack[-1] == "a")):
        return _value_done(stack[:-1])
    return None


def advance(state, b: int):
    """The recognizer's state after byte ``b``, or None where ``b`` cannot follow ``state``."""
    mode, stack, aux = state
    if mode == STR:
        if b == 0x22:
            return (COLON, stack, None) if aux else _value_done(stack)
        if b == 0x5C:
            return (ESC, stack, aux)
        if b < 0x80:
            return None if b < 0x20 else state
        lead = UTF8_LEADS.get(b)
        return None if lead is None else (UTF8, stack, (aux, lead))
    if mode == UTF8:
        is_key, open_ = aux
        open_ = utf8_step(open_, b)
        if open_ is None:
            return None
        return (UTF8, stack, (is_key, open_)) if open_ else (STR, stack, is_key)
    if mode == NUM:
        if b in _DIGITS:
            if aux in (N_MINUS, N_INT):
                return state if aux == N_INT else (NUM, stack, N_ZERO if b == 0x30 else N_INT)
            if aux in (N_DOT, N_FRAC):
                return (NUM, stack, N_FRAC)
            if aux in (N_E, N_ESIGN, N_EXP):
                return (NUM, stack, N_EXP)
            return None  # after a leading 0
        if b == 0x2E:
            return (NUM, stack, N_DOT) if aux in (N_ZERO, N_INT) else None
        if b in (0x65, 0x45):
            return (NUM, stack, N_E) if aux in (N_ZERO, N_INT, N_FRAC) else None
        if b in (0x2B, 0x2D):
            return (NUM, stack, N_ESIGN) if aux == N_E else None
        if aux not in _NUMBER_ENDS:
            return None
        return advance((AFTER, stack, None), b)  # the byte after the number, in the container
    if b in _WS:
        return state if mode in (TOP, OBJ_FIRST, OBJ_KEY, COLON, VALUE, ARR_FIRST, AFTER) else None
    if mode == ESC:
        if b == 0x75:  # u
            return (UHEX, stack, (aux, 4))
        return (STR, stack, aux) if b in _ESCAPES else None
    if mode == UHEX:
        if b not in _HEX:
            return None
        is_key, left = aux
        return (STR, stack, is_key) if left == 1 else (UHEX, stack, (is_key, left - 1))
    if mode == LIT:
        if b != aux[0]:
            return None
        return (LIT, stack, aux[1:]) if len(aux) > 1 else _value_done(stack)
    if mode == TOP:
        return (OBJ_FIRST, "o", None) if b == 0x7B else None
    if mode == OBJ_FIRST:
        if b == 0x22:
            return (STR, stack, True)
        return _close(stack, b)
    if mode == OBJ_KEY:
        return (STR, stack, True) if b == 0x22 else None
    if mode == COLON:
        return (VALUE, stack, None) if b == 0x3A else None
    if mode == VALUE:
        return _value_start(stack, b)
    if mode == ARR_FIRST:
        return _close(stack, b) or _value_start(stack, b)
    if mode == AFTER:
        if b == 0x2C:  # ,
            return (OBJ_KEY, stack, None) if stack[-1] == "o" else (VALUE, stack, None)
        return _close(stack, b)
    return None  # DONE: nothing follows


def advance_bytes(state, data: bytes, step=advance):
    """The state after ``data`` (``step``: a grammar's byte transition), or None where some byte of it cannot
    follow."""
    for b in data:
        state = step(state, b)
        if state is None:
            return None
    return state


def is_complete(state) -> bool:
    return state is not None and state[0] == DONE


class Grammar:
    """What the mask machinery needs of a grammar over bytes: ``start``, ``advance(state, byte)`` (None where
    the byte cannot follow), ``complete(state)``, ``in_string(state)`` (inside a string's content: whitespace
    there is content), ``plain_string(state)`` (in a free string: the character left open, one of
    ``UTF8_OPEN``; None elsewhere) and ``key`` (names the grammar in the mask cache). This
    one: any JSON object (``response_format`` json_object); :mod:`tritium.engine.json_schema` compiles
    schemas into others."""

    key = "json_object"
    start = START

    @staticmethod
    def advance(state, b: int):
        return advance(state, b)

    @staticmethod
    def complete(state) -> bool:
        return is_complete(state)

    @staticmethod
    def in_string(state) -> bool:
        return state[0] in (STR, UTF8)

    @staticmethod
    def plain_string(state) -> tuple | None:
        """In a free string, where plain string bytes change nothing but the open character (their tokens
        then go as one precomputed mask): that character (() none), one of ``UTF8_OPEN``; else None (a
        string that counts its characters is in a string but not plain)."""
        mode = state[0]
        return () if mode == STR else state[2][1] if mode == UTF8 else None


JSON_OBJECT = Grammar()


class TokenIndex:
    """A tokenizer's vocabulary as JSON mode needs it: each token's bytes (special and unknown tokens
    excluded), the tokens sorted by bytes (the trie walked outside strings), the masks of plain string tokens
    (one per open UTF-8 character: :meth:`_plain_string_masks`) and the tokens holding a quote, a backslash
    or a control character; and a cache of allowed-token masks
    per (state, device), shared by every request of the tokenizer (least recently used dropped past
    ``cache_size``)."""

    def __init__(self, tokenizer, vocab_size: int, cache_size: int = 256):
        special = set()
        added = getattr(tokenizer.backend, "get_added_tokens_decoder", None)
        if added is not None:
            special = {i for i, tok in added().items() if getattr(tok, "special", True)}
        self.vocab_size = vocab_size
        self.bytes: list[bytes | None] = [None] * vocab_size
        for i in range(min(vocab_size, tokenizer.vocab_size)):
            if i not in special:
                data = tokenizer.token_bytes(i)
                if data:
                    self.bytes[i] = data
        pairs = sorted((data, i) for i, data in enumerate(self.bytes) if data is not None)
        self.sorted_bytes = [data for data, _ in pairs]
        self.sorted_ids = [i for _, i in pairs]
        plain_ids = [i for i, data in enumerate(self.bytes)
                     if data is not None and len(data.translate(None, _PLAIN_STRING_DROP)) == len(data)]
        self.live_open, self.plain_string = self._plain_string_masks(plain_ids)
        plain = set(plain_ids)
        self.string_special = [(i, data) for i, data in enumerate(self.bytes)
                               if data is not None and i not in plain]
        singles = {data for data in self.bytes if data is not None and len(data) == 1}
        self.single_bytes = frozenset(data[0] for data in singles)  # the bytes with a token of their own
        # the one-byte tokens JSON mode needs (None: all there)
        needed = [bytes([b]) for b in [*range(0x20, 0x7F), *b"\t\n\r"] if bytes([b]) not in singles]
        self.missing = needed or None
        self.whitespace = torch.tensor([data is not None and not data.strip(b" \t\n\r") for data in self.bytes])
        self._whitespace_on: dict[str, torch.Tensor] = {}
        self._masks: collections.OrderedDict = collections.OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._by_length = None

    def _plain_string_masks(self, plain_ids: list[int]) -> tuple[frozenset, dict]:
        """(the open characters some plain string token can go on from, to the end of a character at last;
        {open character: bool ``[vocab_size]``, the plain string tokens that can follow it and end where a
        character is whole or can still be finished}) for ``UTF8_OPEN``. A token that breaks UTF-8, or ends
        in a character no token finishes (a vocabulary without some continuation byte of its own), is in no
        mask: the sampler never faces an empty mask in a string."""
        ends: dict[tuple, list] = {open_: [] for open_ in UTF8_OPEN}  # open character -> [(token, open after)]
        for i in plain_ids:
            data = self.bytes[i]
            if data.isascii():
                ends[()].append((i, ()))
                continue
            # only a continuation byte goes on an open character, and it never begins one
            for open_ in (UTF8_OPEN[1:] if 0x80 <= data[0] <= 0xBF else ((),)):
                end = utf8_end(data, open_)
                if end is not None:
                    ends[open_].append((i, end))
        live = {()}
        while True:
            grown = {open_ for open_, pairs in ends.items() if any(end in live for _, end in pairs)} | live
            if grown == live:
                break
            live = grown
        masks = {}
        for open_, pairs in ends.items():
            mask = torch.zeros(self.vocab_size, dtype=torch.bool)
            mask[[i for i, end in pairs if end in live]] = True
            masks[open_] = mask
        return frozenset(live), masks

    def bytes_by_length(self) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(ids, columns) of the tokens with bytes, longest first: ``columns[j]`` holds byte j of each token
        longer than j bytes (the first ``len(columns[j])`` of ``ids``): what a grammar over a DFA steps every
        token through at once, a byte position at a time (built on first use)."""
        if self._by_length is None:
            tokens = sorted(((data, i) for i, data in enumerate(self.bytes) if data is not None),
                            key=lambda pair: -len(pair[0]))
            columns, n = [], len(tokens)
            for j in range(len(tokens[0][0]) if tokens else 0):
                while len(tokens[n - 1][0]) <= j:  # the longer tokens are a prefix of the list
                    n -= 1
                columns.append(torch.tensor([data[j] for data, _ in tokens[:n]], dtype=torch.int64))
            self._by_length = (torch.tensor([i for _, i in tokens], dtype=torch.int64), columns)
        return self._by_length

    def allowed_ids(self, state, grammar: Grammar = JSON_OBJECT) -> list[int]:
        """The token ids that can follow ``state`` of ``grammar`` (string states: without the plain string
        tokens, which :meth:`mask` adds as one mask)."""
        step = grammar.advance
        if grammar.plain_string(state) is not None:
            return [i for i, data in self.string_special if self._can_end(advance_bytes(state, data, step), grammar)]
        out: list[int] = []
        toks, ids = self.sorted_bytes, self.sorted_ids
        work = [(0, len(toks), 0, state)]
        while work:
            lo, hi, depth, st = work.pop()
            if lo < hi and len(toks[lo]) == depth:  # tokens that end here: their bytes all followed
                ending = self._can_end(st, grammar)
                while lo < hi and len(toks[lo]) == depth:
                    if ending:
                        out.append(ids[lo])
                    lo += 1
            while lo < hi:
                b = toks[lo][depth]
                end = hi if b == 255 else bisect.bisect_left(toks, toks[lo][:depth] + bytes([b + 1]), lo, hi)
                nxt = step(st, b)
                if nxt is not None:
                    work.append((lo, end, depth + 1, nxt))
                lo = end
        return out

    def _can_end(self, state, grammar: Grammar) -> bool:
        """Whether a token may leave ``grammar`` in ``state``: some state (not None), and not inside a character
        of a free string that no token can finish."""
        if state is None:
            return False
        open_ = grammar.plain_string(state)
        return open_ is None or open_ in self.live_open

    def whitespace_mask(self, device: torch.device) -> torch.Tensor:
        """Bool ``[vocab_size]`` on ``device``: the tokens of whitespace alone."""
        key = str(device)
        mask = self._whitespace_on.get(key)
        if mask is None:
            mask = self._whitespace_on[key] = self.whitespace.to(device)
        return mask

    def mask(self, state, device: torch.device, grammar: Grammar = JSON_OBJECT) -> torch.Tensor:
        """Bool ``[vocab_size]`` on ``device``: the tokens that can follow ``state`` of ``grammar`` (cached)."""
        key = (grammar.key, state, str(device))
        with self._lock:
            cached = self._masks.get(key)
            if cached is not None:
                self._masks.move_to_end(key)
                return cached
        token_mask = getattr(grammar, "token_mask", None)
        mask = None if token_mask is None else token_mask(self, state)  # every token at once (a DFA's), or None
        if mask is None:
            open_ = grammar.plain_string(state)
            mask = (self.plain_string[open_].clone() if open_ is not None
                    else torch.zeros(self.vocab_size, dtype=torch.bool))
            ids = self.allowed_ids(state, grammar)
            if ids:
                mask[ids] = True
        mask = mask.to(device)
        with self._lock:
            self._masks[key] = mask
            while len(self._masks) > self._cache_size:
                self._masks.popitem(last=False)
        return mask


class JsonConstraint:
    """One request's JSON-mode state: :meth:`mask` before a token, :meth:`accept` after it (``grammar``: any
    JSON object, or a compiled schema's).

    Outside strings, at most ``max_whitespace_tokens`` tokens of whitespace alone follow each other: past that
    the mask drops them until another token comes (pretty-printed JSON needs one or two between values), so
    that a model cannot pad with whitespace until ``max_tokens``, the failure OpenAI warns of for its JSON
    mode. Whitespace inside strings is content and is not limited."""

    def __init__(self, index: TokenIndex, grammar: Grammar = JSON_OBJECT, max_whitespace_tokens: int = 8):
        self.index = index
        self.grammar = grammar
        self.state = grammar.start
        self.max_whitespace_tokens = max_whitespace_tokens
        self.whitespace_run = 0  # whitespace-only tokens just accepted outside strings

    @property
    def complete(self) -> bool:
        """The JSON object is closed: the request ends here."""
        return self.grammar.complete(self.state)

    def mask(self, device: torch.device) -> torch.Tensor:
        mask = self.index.mask(self.state, device, self.grammar)
        if self.whitespace_run >= self.max_whitespace_tokens and not self.grammar.in_string(self.state):
            mask = mask & ~self.index.whitespace_mask(device)
        return mask

    def accept(self, token_id: int) -> bool:
        """Advance by the token's bytes; True (the token is the JSON's). A token the mask excluded raises
        ValueError (the sampler ignored the mask: a bug, not bad input)."""
        data = self.index.bytes[token_id] if 0 <= token_id < len(self.index.bytes) else None
        nxt = None if data is None else advance_bytes(self.state, data, self.grammar.advance)
        if nxt is None:
            raise ValueError(f"JSON mode: token {token_id} ({data!r}) cannot follow the JSON written so far")
        blank = not data.strip(b" \t\n\r") and not self.grammar.in_string(self.state)
        self.whitespace_run = self.whitespace_run + 1 if blank else 0
        self.state = nxt
        return True


class ReasoningThenJson:
    """JSON mode after a reasoning block (``SamplingParams.reasoning_after``), with the interface of
    :class:`JsonConstraint`: the answer may begin with the open tag's token (one token of the vocabulary, or
    the prompt opened the block: ``opened``), is then free until the close tag's text, and what follows
    is held to ``constraint`` (blank space after the tag taken as the JSON's). ``accept`` tells whether a
    token was the JSON's (its stop rules apply) or the reasoning's (free text's)."""

    def __init__(self, constraint: JsonConstraint, tokenizer, opened: bool, open_tag: str = "<think>",
                 close_tag: str = "</think>"):
        self.json = constraint
        self.tokenizer = tokenizer
        ids = tokenizer.encode(open_tag, add_special_tokens=False)
        self.open_id = ids[0] if len(ids) == 1 else None
        self.close = close_tag.encode()
        self.phase = "think" if opened else ("start" if self.open_id is not None else "json")
        self.reasoning = b""  # the block's bytes so far (the close tag is looked for in them)

    @property
    def complete(self) -> bool:
        return self.phase == "json" and self.json.complete

    def mask(self, device: torch.device) -> torch.Tensor | None:
        """None while reasoning (free); the JSON's mask, and the open tag's token first."""
        if self.phase == "think":
            return None
        mask = self.json.mask(device)
        if self.phase == "start":
            mask = mask.clone()
            mask[self.open_id] = True
        return mask

    def accept(self, token_id: int) -> bool:
        if self.phase == "json":
            return self.json.accept(token_id)
        if self.phase == "start":
            if token_id == self.open_id:
                self.phase = "think"
                return False
            self.phase = "json"
            return self.json.accept(token_id)
        before = len(self.reasoning)
        self.reasoning += self.tokenizer.token_bytes(token_id)
        at = self.reasoning.find(self.close, max(0, before - len(self.close) + 1))  # only where it can end now
        if at >= 0:
            self.phase = "json"
            after = self.reasoning[at + len(self.close):]  # in the same token: blank space, as a rule
            state = advance_bytes(self.json.state, after, self.json.grammar.advance)
            if state is not None:  # (else it stays in the text before the JSON: drawn, it cannot be undone)
                self.json.state = state
        return False
