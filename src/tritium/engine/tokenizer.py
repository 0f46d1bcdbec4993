"""Tokenizers: a Hugging Face ``tokenizer.json`` or one rebuilt from GGUF metadata, plus the chat template.

Built on the ``tokenizers`` package directly (no transformers at run time), the way transformers' GGUF
integration builds them, so token ids agree with transformers:

- a byte-level BPE vocabulary (``tokenizer.ggml.model == "gpt2"``) becomes a ``tokenizers.models.BPE``
  with a byte-level pre-tokenizer (split by ``tokenizer.ggml.pre``);
- a SentencePiece vocabulary (``"llama"``) becomes a BPE with byte fallback (``<0xNN>`` pieces) whose
  merges are recovered from the piece scores, a "▁" Metaspace pre-tokenizer and the matching decoder.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re

from tritium.models.weights import read_json

# Pre-tokenizer splits by GGUF `tokenizer.ggml.pre` (the regexes of the corresponding HF tokenizers).
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_GGUF_SPLITS = {
    "llama3": _LLAMA3_SPLIT, "llama-v3": _LLAMA3_SPLIT, "llama-bpe": _LLAMA3_SPLIT, "smaug-bpe": _LLAMA3_SPLIT,
    "qwen2": _QWEN2_SPLIT, "deepseek-r1-qwen": _QWEN2_SPLIT,
}
BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")  # a SentencePiece byte-fallback piece
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _BYTE = 1, 2, 3, 4, 6  # llama.cpp token types


@functools.lru_cache(maxsize=1)
def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class Tokenizer:
    """Text <-> token ids, EOS ids and the chat template of one model.

    ``encode(text)`` adds what the tokenizer's post-processor adds (BOS for Llama tokenizer.json files), or
    BOS / EOS as ``add_bos`` / ``add_eos`` say when the backend has no post-processor (GGUF files);
    ``apply_chat_template(messages)`` renders the Jinja template and encodes it without extra specials.
    """

    def __init__(self, backend, *, chat_template: str | None = None, bos_token: str | None = None,
                 eos_token: str | None = None, eos_token_ids: tuple[int, ...] = (), add_bos: bool = False,
                 add_eos: bool = False, chat_template_source: str | None = None):
        self.backend = backend
        self.chat_template = chat_template
        # where chat_template was read (a file; named in its errors while the template is that one)
        self.chat_template_source = chat_template_source if chat_template is not None else None
        self._source_template = chat_template
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.eos_token_ids = tuple(eos_token_ids)
        self.add_bos = add_bos
        self.add_eos = add_eos
        self._byte_level: bool | None = None  # the decoder is byte-level (settled at the first token_bytes)
        self._compiled = None  # (template text, its compiled Jinja template): compiled once, not per request

    # -- construction --------------------------------------------------------------------------------------
    @classmethod
    def from_hf_dir(cls, path: str, eos_token_ids: tuple[int, ...] = ()) -> "Tokenizer | None":
        """From ``tokenizer.json`` (+ ``tokenizer_config.json`` for the chat template); None if absent."""
        from tokenizers import Tokenizer as HFTokenizer

        tok_path = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(tok_path):
            return None
        try:
            backend = HFTokenizer.from_file(tok_path)
        except Exception as e:  # the tokenizers library's plain Exception for a corrupt file
            raise ValueError(f"{tok_path!r} is not a readable tokenizer ({e})") from None
        cfg = {}
        cfg_path = os.path.join(path, "tokenizer_config.json")
        if os.path.isfile(cfg_path):
            cfg = read_json(cfg_path)
            if not isinstance(cfg, dict):
                raise ValueError(f"{cfg_path!r} must hold a JSON object, got {type(cfg).__name__}")
        template, template_file = _config_chat_template(cfg.get("chat_template"), cfg_path), cfg_path
        jinja_path = os.path.join(path, "chat_template.jinja")
        if template is None and os.path.isfile(jinja_path):
            with open(jinja_path) as f:
                template, template_file = f.read(), jinja_path

        def token_str(value):
            return value.get("content") if isinstance(value, dict) else value

        bos_token, eos_token = token_str(cfg.get("bos_token")), token_str(cfg.get("eos_token"))
        # BOS and EOS as transformers loads them: special tokens (decode with skip_special_tokens drops them)
        # even where tokenizer.json has them as plain vocabulary entries and only tokenizer_config.json names them
        _mark_special(backend, [t for t in (bos_token, eos_token) if isinstance(t, str)])
        eos_id = backend.token_to_id(eos_token) if isinstance(eos_token, str) else None
        if eos_id is not None and eos_id not in eos_token_ids:
            # generation ends at the tokenizer's EOS as well as at config.json's / generation_config.json's (vLLM)
            eos_token_ids = (*eos_token_ids, eos_id)
        return cls(backend, chat_template=template, bos_token=bos_token, eos_token=eos_token,
                   eos_token_ids=eos_token_ids, chat_template_source=template_file,
                   add_bos=bool(cfg.get("add_bos_token", False)) and _post_processor_adds_nothing(backend))

    @classmethod
    def from_gguf_metadata(cls, meta: dict, source: str | None = None,
                           eos_token_ids: tuple[int, ...] | None = None) -> "Tokenizer":
        """From GGUF tokenizer metadata: byte-level BPE (``tokenizer.ggml.model == "gpt2"``: Llama 3, Qwen2,
        SmolLM2) or SentencePiece BPE (``"llama"``: Llama 2, Mistral). ``source``: the file (named in errors of
        its chat template). ``eos_token_ids``: the ids generation stops at (the model config's: EOS, end of turn,
        end of message, checked against the vocabulary); None: ``tokenizer.ggml.eos_token_id``. A BOS or EOS id
        that names no token of the list (ModelConfig.from_gguf_metadata warns of it) is no token here."""
        from tokenizers import AddedToken

        kind = meta.get("tokenizer.ggml.model")
        builders = {"gpt2": _gguf_byte_level_bpe, "llama": _gguf_sentencepiece_bpe}
        if kind not in builders:
            raise ValueError(f"GGUF tokenizer {kind!r} is not supported; expected 'gpt2' (byte-level BPE) "
                             f"or 'llama' (SentencePiece BPE)")
        tokens = meta["tokenizer.ggml.tokens"]
        types = meta.get("tokenizer.ggml.token_type") or [_NORMAL] * len(tokens)
        backend, spelled = builders[kind](meta, tokens, types)
        # Control tokens (<|im_start|>, <s> ...) stay whole. In a byte-level vocabulary a control token
        # spelled outside the byte alphabet is a converter mislabel and is left alone (as transformers does).
        special = [t for t, ty in zip(tokens, types) if ty in (_CONTROL, _UNKNOWN) and spelled(t)]
        backend.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in special])
        vocab = backend.get_vocab(with_added_tokens=False)
        backend.add_tokens([AddedToken(t, normalized=False, special=False)
                            for t, ty in zip(tokens, types) if ty == _USER_DEFINED and t in vocab])

        def token_id(key):  # the id where it names a token of the list (llama.cpp ignores one past it)
            tid = meta.get(f"tokenizer.ggml.{key}")
            return tid if isinstance(tid, int) and not isinstance(tid, bool) and 0 <= tid < len(tokens) else None

        def token(key):
            tid = token_id(key)
            return tokens[tid] if tid is not None else None

        if eos_token_ids is None:
            eos = token_id("eos_token_id")
            eos_token_ids = () if eos is None else (eos,)
        # llama.cpp adds BOS to a SentencePiece vocabulary whose file does not say otherwise.
        add_bos = meta.get("tokenizer.ggml.add_bos_token", kind == "llama")
        return cls(backend, chat_template=meta.get("tokenizer.chat_template"), bos_token=token("bos_token_id"),
                   eos_token=token("eos_token_id"), eos_token_ids=eos_token_ids,
                   add_bos=bool(add_bos), add_eos=bool(meta.get("tokenizer.ggml.add_eos_token", False)),
                   chat_template_source=source)

    # -- use -----------------------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        try:
            ids = self.backend.encode(text, add_special_tokens=add_special_tokens).ids
        except TypeError:
            if not isinstance(text, str):
                raise TypeError(f"text must be a str, got {type(text).__name__}") from None
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:  # the Rust tokenizer takes valid Unicode only
                raise ValueError(f"text holds a lone UTF-16 surrogate (U+{ord(text[e.start]):04X}) at character "
                                 f"{e.start}: not valid Unicode") from None
            raise
        if add_special_tokens and self.add_bos and self.bos_token is not None:
            bos = self.backend.token_to_id(self.bos_token)
            if bos is not None and (not ids or ids[0] != bos):
                ids = [bos] + ids
        if add_special_tokens and self.add_eos and self.eos_token_ids:
            if not ids or ids[-1] != self.eos_token_ids[0]:
                ids = ids + [self.eos_token_ids[0]]
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one token stands for (part of a multi-byte character, maybe); special tokens give their
        text, ids the vocabulary lacks b"". For log-probability reports (OpenAI's ``bytes``)."""
        piece = self.backend.id_to_token(token_id)
        if piece is None:
            return b""
        if BYTE_PIECE.fullmatch(piece):  # SentencePiece byte fallback
            return bytes([int(piece[3:5], 16)])
        if self._byte_level is None:
            state = self.backend.decoder.__getstate__() if self.backend.decoder is not None else b""
            self._byte_level = b'"ByteLevel"' in state
        if self._byte_level:
            inverse = _unicode_to_bytes()
            if all(c in inverse for c in piece):
                return bytes(inverse[c] for c in piece)
        return self.decode([token_id], skip_special_tokens=False).encode("utf-8")

    def compiled_chat_template(self):
        """The chat template compiled (:func:`compile_chat_template`), once per template text: compiling is
        most of a render's cost (2.0 of 2.1 ms for SmolLM2's 368 characters, more for larger templates)."""
        if not self.chat_template:
            raise ValueError("this model has no chat template; pass raw=True (CLI: --raw) to send the prompt as is")
        compiled = self._compiled
        if compiled is None or compiled[0] != self.chat_template:  # a template replaced since is compiled anew
            try:
                compiled = (self.chat_template, compile_chat_template(self.chat_template))
            except ValueError as e:
                if self.chat_template_source is None or self.chat_template != self._source_template:
                    raise
                raise ValueError(f"{self.chat_template_source!r}: {e}") from None
            self._compiled = compiled
        return compiled[1]

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True,
                            template_kwargs: dict | None = None, continue_final_message: bool = False) -> list[int]:
        """Render ``messages`` ([{"role": ..., "content": ...}]) with the model's Jinja chat template and
        encode the result; ValueError if the model has no template. ``template_kwargs``: more variables for
        the template (Qwen3's ``enable_thinking``, ...); the ones the template is always given (``messages``,
        ``add_generation_prompt``, ``bos_token``, ``eos_token``, ``raise_exception``) cannot be set.
        ``continue_final_message``: the last message (the assistant's) is left open, the prompt cut right after
        its text, so that the answer continues it (no generation prompt then)."""
        template_kwargs = check_template_kwargs(template_kwargs)
        template = self.compiled_chat_template()
        if continue_final_message:
            if add_generation_prompt:
                raise ValueError("continue_final_message and add_generation_prompt cannot both be true: a continued "
                                 "message gets no generation prompt after it")
            if not messages or messages[-1].get("role") != "assistant":
                raise ValueError("continue_final_message needs the last message to be the assistant's")
            # the template renders the final text with a marker after it; the prompt ends where the marker begins
            last = dict(messages[-1], content=(messages[-1].get("content") or "") + _CONTINUE_MARK)
            messages = [*messages[:-1], last]
        import jinja2

        try:
            text = template.render(**template_kwargs, messages=messages, add_generation_prompt=add_generation_prompt,
                                   bos_token=self.bos_token or "", eos_token=self.eos_token or "")
        except jinja2.TemplateError as e:  # a template that fails on this conversation or these variables
            raise ValueError(f"chat template: {type(e).__name__}: {e}") from None
        if continue_final_message:
            cut = text.rfind(_CONTINUE_MARK)
            if cut < 0:
                raise ValueError("continue_final_message: this model's chat template does not write the last "
                                 "assistant message's text, so there is nothing to continue")
            text = text[:cut]
        return self.encode(text, add_special_tokens=False)


# put after the final message's text by apply_chat_template(continue_final_message=True), then cut: no template
# changes it (not whitespace, no markup), and no conversation is expected to hold it
_CONTINUE_MARK = "\u2063tritium-continue\u2063"


def compile_chat_template(text: str):
    """A chat template's Jinja text compiled as transformers renders templates (sandboxed; loop controls;
    ``tojson`` without HTML escaping or sorted keys, so that tool schemas reach the model as written;
    ``raise_exception``; ``strftime_now`` for Llama 3's date line); ValueError for a template that does not
    parse."""
    import jinja2
    import jinja2.sandbox

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=["jinja2.ext.loopcontrols"])

    def raise_exception(message):
        raise ValueError(f"chat template: {message}")

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    try:
        return env.from_string(text)
    except jinja2.TemplateSyntaxError as e:
        raise ValueError(f"chat template: TemplateSyntaxError: {e} (line {e.lineno})") from None


# variables every chat template is given: not settable through template_kwargs
RESERVED_TEMPLATE_VARIABLES = ("messages", "add_generation_prompt", "bos_token", "eos_token", "raise_exception",
                               "strftime_now")


def check_template_kwargs(template_kwargs, what: str = "chat_template_kwargs") -> dict:
    """``template_kwargs`` as a dict of extra chat-template variables ({} for None); ValueError naming ``what``
    for anything but an object of identifier keys that are not reserved."""
    if template_kwargs is None:
        return {}
    if not isinstance(template_kwargs, dict):
        raise ValueError(f"{what} must be an object of template variables, got {type(template_kwargs).__name__}")
    for key in template_kwargs:
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"{what}: {key!r} is not a template variable name")
        if key in RESERVED_TEMPLATE_VARIABLES:
            raise ValueError(f"{what}: {key!r} is set by the server and cannot be given")
    return dict(template_kwargs)


@functools.lru_cache(maxsize=1)
def _unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in _bytes_to_unicode().items()}


def _gguf_byte_level_bpe(meta: dict, tokens: list[str], types: list[int]):
    """(backend, spelled) of a ``gpt2`` vocabulary; ``spelled(token)`` says whether a token is written
    in the byte alphabet (only those may become special tokens)."""
    from tokenizers import Regex, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    spell = _bytes_to_unicode()
    alphabet = set(spell.values())
    vocab = {}
    for i, tok in enumerate(tokens):
        key = tok if set(tok) <= alphabet else "".join(spell[b] for b in tok.encode("utf-8"))
        vocab.setdefault(key, i)
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
    backend = HFTokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, continuing_subword_prefix="",
                                     end_of_word_suffix="", fuse_unk=False))
    split = _GGUF_SPLITS.get(meta.get("tokenizer.ggml.pre"))
    if split is None:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    backend.decoder = decoders.ByteLevel()
    return backend, lambda tok: set(tok) <= alphabet


def _gguf_sentencepiece_bpe(meta: dict, tokens: list[str], types: list[int]):
    """(backend, spelled) of a SentencePiece (``llama``) vocabulary.

    SentencePiece BPE merges the adjacent pair whose concatenation is the piece of highest score (llama.cpp's
    ``llm_tokenizer_spm`` does the same), so the BPE merge list is every split ``(left, right)`` of a piece
    into two pieces, ordered by the joined piece's score, best first (ties: longer left, then longer right,
    then vocabulary order; transformers' ``generate_merges``). Characters with no piece fall back to their
    UTF-8 bytes ``<0xNN>``. Text becomes "▁"-joined words with one "▁" prepended at the start
    (``tokenizer.ggml.add_space_prefix``, default on); decoding undoes both.
    """
    from tokenizers import decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as HFTokenizer

    scores = meta.get("tokenizer.ggml.scores")
    if scores is None:  # no scores: earlier pieces win, as in a vocabulary sorted by score
        scores = [-float(i) for i in range(len(tokens))]
    vocab = {tok: i for i, tok in enumerate(tokens)}  # a repeated piece keeps its last id, as in llama.cpp
    score = dict(zip(tokens, scores))
    merges = []
    for piece, piece_score in score.items():
        splits = [(piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        splits.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        merges.extend((left, right, piece_score) for left, right in splits)
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)  # stable: ties keep vocabulary order
    unk_id = meta.get("tokenizer.ggml.unknown_token_id")
    backend = HFTokenizer(models.BPE(vocab=vocab, merges=[(m[0], m[1]) for m in merges], dropout=None,
                                     unk_token=tokens[unk_id] if unk_id is not None else None,
                                     fuse_unk=True, byte_fallback=True))
    prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", True))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="▁", prepend_scheme="first" if prefix else "never", split=False)
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    backend.decoder = decoders.Sequence(steps + ([decoders.Strip(content=" ", left=1, right=0)] if prefix else []))
    return backend, lambda tok: True


def _config_chat_template(value, cfg_path: str) -> str | None:
    """The chat template of a ``tokenizer_config.json``: its text, or of a list of named templates (transformers'
    ``[{"name": ..., "template": ...}]``) the one named "default" (None without one); ValueError naming the file
    for anything else."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(t, dict) and isinstance(t.get("template"), str) for t in value):
        return next((t["template"] for t in value if t.get("name") == "default"), None)
    raise ValueError(f"{cfg_path!r}: chat_template must be the Jinja text of a template or a list of "
                     f"{{'name': ..., 'template': ...}} objects, got {type(value).__name__}")


def _mark_special(backend, tokens: list[str]) -> None:
    """Make ``tokens`` special tokens of ``backend`` where they are in its vocabulary (same ids) but not special."""
    from tokenizers import AddedToken

    added = backend.get_added_tokens_decoder()
    todo = []
    for token in tokens:
        tid = backend.token_to_id(token)
        if tid is not None and not (tid in added and added[tid].special and added[tid].content == token):
            todo.append(AddedToken(token, normalized=False, special=True))
    if todo:
        backend.add_special_tokens(todo)


def _post_processor_adds_nothing(backend) -> bool:
    """True when encoding "a" with specials adds no tokens (then BOS must be added by hand)."""
    return len(backend.encode("a", add_special_tokens=True).ids) == len(backend.encode("a", add_special_tokens=False).ids)
