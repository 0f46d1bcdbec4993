"""Incremental detokenisation of one request's generated tokens, for streaming (``text_delta``) and stop strings.

The text is always ``tokenizer.decode(output_ids)`` (the generated ids only, special tokens skipped), or, given
the prompt's last token as ``context`` (where decode() keeps it), what decoding it with the output adds to it;
built up piece by piece: each step decodes a short window of the latest tokens, vLLM-style. ``prefix`` is the
window's first tokens, already turned into text; the window's decoded text minus the prefix's decoded text
is the text of the newer tokens. Decoding both with the same first token keeps a decoder that treats the
first token differently (SentencePiece's Metaspace / ``Strip`` drops its leading space) exact.

Text stays back (not returned by :meth:`IncrementalDetokenizer.delta` yet) while it may still change:

- an incomplete UTF-8 character at the end (decoded as U+FFFD until its last byte comes);
- an open run of byte-fallback pieces ``<0xNN>`` (SentencePiece vocabularies): the ``ByteFallback``
  decoder turns a whole run into U+FFFD, one per byte, as soon as any of its bytes is invalid, so a valid
  character decoded from a run may still become U+FFFD until a piece that is not a byte ends the run;
- with stop strings, the last ``len(longest stop) - 1`` characters (they may be the start of a stop string).

Special tokens (and ids the vocabulary lacks), which ``decode`` drops, never enter the window, so a run of
EOS tokens (``ignore_eos``) costs nothing. Stop strings are searched, after each token, in the text
``decode(output_ids)`` would give at that point (the tentative end included), only where the new token can
have completed one, so a request stops at the same token, with the same text, as when the whole output is
decoded and searched after each token.
"""

from __future__ import annotations

import weakref

from tritium.engine.tokenizer import BYTE_PIECE, Tokenizer

_REPLACEMENT = "\ufffd"
# The window's prefix moves up to the latest committed piece once the window is longer than this many tokens.
_WINDOW = 4


class _Vocabulary:
    """What the detokenizer needs to know of a tokenizer's ids, computed once per tokenizer.

    ``keep[id]``: 1 if ``decode`` keeps the id (not special, known); None when the tokenizer cannot be
    inspected (then every id is kept: still exact, only runs of special tokens widen the window). ``known``:
    the same with special tokens kept (``decode(..., skip_special_tokens=False)``).
    ``byte_piece[id]``: 1 for the ``<0xNN>`` pieces of a decoder with ``ByteFallback``; None if it has none.
    """

    def __init__(self, tokenizer: Tokenizer):
        self.keep: bytearray | None = None
        self.known: bytearray | None = None
        self.byte_piece: bytearray | None = None
        backend = getattr(tokenizer, "backend", None)
        try:
            vocab = backend.get_vocab(with_added_tokens=True)
            added = backend.get_added_tokens_decoder()
            decoder = backend.decoder
            decoder_state = decoder.__getstate__() if decoder is not None else b""
        except Exception:  # not a `tokenizers` backend
            return
        size = max(vocab.values(), default=-1) + 1
        keep = bytearray(size)
        for i in vocab.values():
            keep[i] = 1
        self.known = bytearray(keep)
        # decode() drops a token whose string is a special token's (whatever the id).
        for i, token in added.items():
            if token.special:
                for j in (i, backend.token_to_id(token.content)):
                    if j is not None and j < size:
                        keep[j] = 0
        self.keep = keep
        if b'"ByteFallback"' in decoder_state:
            byte_piece = bytearray(size)
            for piece, i in vocab.items():
                if BYTE_PIECE.fullmatch(piece) and backend.id_to_token(i) == piece:
                    byte_piece[i] = 1
            self.byte_piece = byte_piece if any(byte_piece) else None


_VOCABULARIES: "weakref.WeakKeyDictionary[Tokenizer, _Vocabulary]" = weakref.WeakKeyDictionary()


def _vocabulary(tokenizer: Tokenizer) -> _Vocabulary:
    try:
        vocabulary = _VOCABULARIES.get(tokenizer)
    except TypeError:  # not weakly referenceable
        return _Vocabulary(tokenizer)
    if vocabulary is None:
        vocabulary = _VOCABULARIES[tokenizer] = _Vocabulary(tokenizer)
    return vocabulary


class IncrementalDetokenizer:
    """The text of one request's generated tokens, built token by token (see the module docstring).

    ``add(token)`` after each sampled token (True: a stop string now occurs; the text is cut before its
    earliest occurrence and the request must finish), ``delta(finished)`` once per step for the text not
    returned before. The deltas of a request concatenate to its final text, ``decode(output_ids)`` (cut
    before a stop string), and every delta's text is final: what was returned is never taken back.
    With no tokenizer the text is always "" (stop strings are not looked for). ``skip_special_tokens=False``:
    the text is ``decode(output_ids, skip_special_tokens=False)`` instead (special tokens written out).
    ``context``: the prompt's ids; its last token, where it is whole text, is decoded before the output (the text
    is then what it adds: SentencePiece's first "▁" is a space, as in vLLM), else the text starts afresh.
    ``include_stop``: the text ends with the stop string that occurred instead of before it (vLLM's
    ``include_stop_str_in_output``); ``stop_string`` names it. ``min_tokens``: as vLLM, a stop string counts only
    once more than this many tokens are out, and only if it ends in the text the token that completes it adds
    (one the first ``min_tokens`` made whole is not looked for later).
    """

    def __init__(self, tokenizer: Tokenizer | None, stop: list[str] | None = None, skip_special_tokens: bool = True,
                 include_stop: bool = False, min_tokens: int = 0, context: list[int] | None = None):
        self.min_tokens = min_tokens
        self.tokenizer = tokenizer
        self.stop = [s for s in (stop or ()) if s] if tokenizer is not None else []
        self._hold = max(map(len, self.stop), default=1) - 1  # characters kept back for stop strings
        self.include_stop = include_stop
        self.token_ids: list[int] = []  # every id added
        self.stopped = False  # a stop string occurred
        self.stop_string: str | None = None  # which one
        self._finished = False  # stopped, or delta(finished=True) was called
        self._text = ""  # returned by delta()
        if tokenizer is None:
            return
        vocabulary = _vocabulary(tokenizer)
        if skip_special_tokens:
            self._decode = tokenizer.decode
            self._keep = vocabulary.keep
        else:
            self._decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)
            self._keep = vocabulary.known
        self._byte_piece = vocabulary.byte_piece
        self._ids: list[int] = []  # the ids decode() keeps
        self._prefix = 0  # window start in _ids
        self._read = 0  # _ids[:_read] are text (committed); _ids[_prefix:_read] is the window's prefix
        self._prefix_len = 0  # len(decode(_ids[_prefix:_read]))
        self._decoded = 0  # len(_ids) when _pending was computed
        self._unreturned = ""  # committed text not returned by delta() yet
        self._pending = ""  # text of _ids[_read:], tentative (may still change)
        if context:
            self._continue(context[-1])

    def _continue(self, last: int) -> None:
        """Decode the generated tokens after the prompt's ``last`` token, when decode() keeps it as whole text:
        the window starts with it, as a prefix that is never returned, so a decoder that treats the first token
        differently (SentencePiece's Metaspace drops its "▁") sees the first generated token as a continuation
        (" Paris" after "The capital of France is", as decoding the prompt and the answer together gives)."""
        keep = self._keep
        if keep is not None and not (0 <= last < len(keep) and keep[last]):
            return  # a special token (a chat template's end, say): the answer starts afresh
        text = self._decode([last])
        if not text or _REPLACEMENT in text:
            return  # a byte of a split character (or nothing): afresh too
        # (a whole byte piece, "<0x3A>" for ":", may fuse into U+FFFD with the answer's open byte run: such text
        # stays pending until the run ends, when the prefix decodes as itself again)
        self._ids = [last]
        self._read = self._decoded = 1
        self._prefix_len = len(text)

    # -- adding tokens -------------------------------------------------------------------------------------
    def add(self, token_id: int) -> bool:
        """Append one generated token; True if a stop string now occurs (then the text is cut before the
        earliest occurrence and no more tokens may be added)."""
        if self._finished:
            raise RuntimeError("no tokens may be added to a finished request's detokenizer")
        self.token_ids.append(token_id)
        if self.tokenizer is None:
            return False
        keep = self._keep
        if keep is not None and not (0 <= token_id < len(keep) and keep[token_id]):
            return False  # decode() drops it: the text does not change
        self._ids.append(token_id)
        if not self.stop:
            return False  # decoded at the next delta(), with any other new tokens
        start = max(len(self._unreturned) - self._hold, 0)  # an earlier start was searched before
        committed = len(self._unreturned)  # text that no later token changes
        self._update()
        if len(self.token_ids) <= self.min_tokens:
            return False
        tail = self._unreturned + self._pending
        cut, matched = -1, None
        for s in self.stop:
            # with min_tokens, a stop string must end past the text committed before this token (else it was
            # whole while stop strings did not count yet)
            lo = max(start, committed - len(s) + 1) if self.min_tokens else start
            i = tail.find(s, lo, cut + len(s) - 1 if cut >= 0 else len(tail))
            if i >= 0:
                cut, matched = i, s
        if cut < 0:
            return False
        self._unreturned, self._pending = tail[:cut + len(matched) if self.include_stop else cut], ""
        self.stopped = self._finished = True
        self.stop_string = matched
        return True

    def add_many(self, token_ids: list[int]) -> int:
        """Append several tokens (one decode for all of them at the next ``delta()`` when there are no stop
        strings); the number added: all, or up to and including the one that completed a stop string."""
        if self.stop:
            for n, token_id in enumerate(token_ids, 1):
                if self.add(token_id):
                    return n
            return len(token_ids)
        if self._finished:
            raise RuntimeError("no tokens may be added to a finished request's detokenizer")
        self.token_ids.extend(token_ids)
        if self.tokenizer is not None:
            keep = self._keep
            n = len(keep) if keep is not None else 0
            self._ids.extend(t for t in token_ids if keep is None or (0 <= t < n and keep[t]))
        return len(token_ids)

    def _update(self) -> None:
        """Decode the window with the tokens added since the last call; commit its text when it ends cleanly."""
        ids = self._ids
        n = len(ids)
        if n == self._decoded:
            return
        self._decoded = n
        full = self._decode(ids[self._prefix:])
        new = full[self._prefix_len:]
        if new.endswith(_REPLACEMENT) or (self._byte_piece is not None and self._byte_piece[ids[-1]]):
            self._pending = new  # an incomplete character or an open byte run: may still change
            return
        self._unreturned += new
        self._pending = ""
        read, self._read = self._read, n
        if n - self._prefix > _WINDOW:  # the last committed piece becomes the prefix
            self._prefix = read
            self._prefix_len = len(self._decode(ids[read:n]))
        else:
            self._prefix_len = len(full)

    # -- reading text --------------------------------------------------------------------------------------
    def delta(self, finished: bool = False) -> str:
        """Text not returned by earlier calls. Unfinished: holds back an incomplete UTF-8 character at the
        end (and an open run of byte-fallback pieces) and, when stop strings are set, the last
        ``len(longest stop) - 1`` characters. ``finished=True`` (or once stopped): everything that remains;
        then no more tokens may be added."""
        if self.tokenizer is None:
            self._finished = self._finished or finished
            return ""
        if not self._finished:
            self._update()
            if finished:
                self._unreturned += self._pending
                self._pending = ""
                self._finished = True
            else:
                keep = len(self._unreturned) - self._hold
                if keep <= 0:
                    return ""
                out = self._unreturned[:keep]
                self._unreturned = self._unreturned[keep:]
                self._text += out
                return out
        out, self._unreturned = self._unreturned, ""
        self._text += out
        return out

    @property
    def text(self) -> str:
        """All text returned by ``delta()`` so far."""
        return self._text

    @property
    def finished(self) -> bool:
        """True once a stop string occurred or ``delta(finished=True)`` was called."""
        return self._finished

    @property
    def output_text(self) -> str | None:
        """The final text (``decode(output_ids)``, cut before a stop string) once finished, else None."""
        if not self._finished:
            return None
        return self._text + (self._unreturned if self.tokenizer is not None else "")
