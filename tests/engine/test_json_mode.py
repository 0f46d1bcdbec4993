"""JSON mode (``response_format="json_object"``): the recognizer against Python's json module, the allowed-token
masks against a token-by-token check of the whole vocabulary (a byte-level BPE tokenizer trained here, and
SmolLM2's where installed), and the engine: every answer is one JSON object, or a prefix of one cut at
max_tokens."""

import codecs
import json
import random

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine.json_mode import (JSON_OBJECT, START, JsonConstraint, ReasoningThenJson, TokenIndex, advance_bytes,
                                      is_complete)
from tritium.engine.tokenizer import Tokenizer

from .conftest import assert_masks_exact, default_model_or_skip, random_byte_strings, save_byte_bpe_tokenizer

VALID = ['{}', '{"a":1}', ' {"a": [1, -2.5e+3, 0, 0.1, true, false, null, {"b": "x\\n\\u00e9"}], "c": {}}',
         '{"k":[]}', '{"k":[[],[{}]]}', '{"\\"":"\\\\"}', '{\n  "x": -0.0E-7\n}', '{"é": "日本"}']
INVALID = ['[]', '"a"', '1', '{"a"}', '{"a":01}', '{"a":-}', '{"a":1.}', '{"a":tru}', '{a:1}', '{"a":1,}',
           '{"a":"\n"}', '{"a":1} x', '{"a":"\\x"}', '{"a":1e}', '{"a":[1,]}', '{,}', '{"a":1 "b":2}',
           '{"a":NaN}', '{"a":"\\u12"}', '{"a":[}', '{"a":+1}']


def _python_object(text: str) -> bool:
    """Whether Python's strict json module reads ``text`` as one object (no NaN/Infinity)."""
    def refuse(name):
        raise ValueError(name)
    try:
        return isinstance(json.loads(text, parse_constant=refuse), dict)
    except (ValueError, RecursionError):
        return False


def test_recognizer_on_fixed_cases():
    for text in VALID:
        assert is_complete(advance_bytes(START, text.encode())), text
        for k in range(len(text.encode())):  # every prefix of a JSON object can go on
            assert advance_bytes(START, text.encode()[:k]) is not None, (text, k)
    for text in INVALID:
        assert not is_complete(advance_bytes(START, text.encode())), text


def _random_value(rng, depth=0):
    kind = rng.randrange(7 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([True, False, None])
    if kind == 1:
        return rng.randint(-10**6, 10**6)
    if kind == 2:
        return rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-20, 20)
    if kind in (3, 4):
        return "".join(rng.choice('ab "\\\n\té日/') for _ in range(rng.randrange(6)))
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {str(rng.randrange(100)): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def test_recognizer_agrees_with_python_json():
    """Random objects written with random spacing are complete (every prefix alive); single-byte edits of
    them are complete exactly where Python's strict parser reads an object (trailing whitespace aside: the
    answer ends at its closing brace)."""
    rng = random.Random(0)
    alphabet = b'{}[]":,\\ \n0123456789-+.eEtrufalsn\x01a'
    agreed = 0
    for _ in range(300):
        obj = {str(i): _random_value(rng) for i in range(rng.randrange(4))}
        text = json.dumps(obj, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 0, 2]),
                          separators=rng.choice([None, (",", ":"), (" , ", " : ")])).encode()
        assert is_complete(advance_bytes(START, text)), text
        assert all(advance_bytes(START, text[:k]) is not None for k in range(0, len(text), 3))
        for _ in range(10):
            k = rng.randrange(len(text))
            edit = rng.choice(["replace", "insert", "delete"])
            b = bytes([rng.choice(alphabet)])
            mutated = (text[:k] + b + text[k + 1:] if edit == "replace" else text[:k] + b + text[k:]
                       if edit == "insert" else text[:k] + text[k + 1:])
            if not mutated or mutated[-1:].isspace():
                continue
            try:
                decoded = mutated.decode()
            except UnicodeDecodeError:
                continue
            assert is_complete(advance_bytes(START, mutated)) == _python_object(decoded), mutated
            agreed += 1
    assert agreed > 2000


def test_masks_equal_a_check_of_every_token(json_model):
    tok = Tokenizer.from_hf_dir(json_model)
    index = TokenIndex(tok, 448)
    assert all(data is None for data in index.bytes[tok.vocab_size:])  # ids past the tokenizer: never
    assert all(index.bytes[i] is None for i in range(3))  # the special tokens: never
    assert_masks_exact(index, JSON_OBJECT, VALID)
    assert index.mask(START, torch.device("cpu")) is index.mask(START, torch.device("cpu"))  # cached


def test_masks_on_a_real_vocabulary():
    """SmolLM2's 49,152 byte-level BPE tokens (the default model's tokenizer, where installed), multi-byte
    characters too (its tokens may end inside one)."""
    from tritium.engine.llm_engine import load_checkpoint
    tok = load_checkpoint(default_model_or_skip())[3]
    assert_masks_exact(TokenIndex(tok, tok.vocab_size), JSON_OBJECT,
                       ['{"name": "Ada", "born": 1815, "tags": ["math", null, true, -1.5e3], "x": {}}',
                        '{"\\u00e9\\n": [[]]}', '{"café": "日本語 — 😀 ½"}'])


def _valid_answer(out) -> bool:
    """One JSON object and finish reason stop, or a prefix of one cut at max_tokens."""
    if out.finish_reason == "stop":
        return _python_object(out.text)
    return out.finish_reason == "length" and advance_bytes(START, out.text.encode()) is not None


def test_engine_answers_json(json_model):
    """Sampled at temperature 1 (the closing tokens favoured by logit_bias so that answers end within the
    budget) and greedy: every answer is a JSON object, or a prefix of one cut at max_tokens; the logits past
    the tokenizer's vocabulary and the special tokens (EOS) are never drawn."""
    tok = Tokenizer.from_hf_dir(json_model)
    closers = {i: 6.0 for i in range(tok.vocab_size) if tok.token_bytes(i) in (b'"', b"}", b'"}', b"]")}
    assert closers
    with LLM(json_model, max_model_len=256, kv_cache_memory=16 << 20, max_num_seqs=4) as llm:
        assert llm.engine.constraint_error(SamplingParams(response_format="json_object")) is None
        sampled = llm.generate(["w1", "w2 w3", "w4"], [
            SamplingParams(max_tokens=120, temperature=1.0, seed=s, response_format="json_object", logit_bias=closers)
            for s in range(3)])
        greedy = llm.generate(["w5"], SamplingParams(max_tokens=40, response_format="json_object"))
        free = llm.generate(["w5"], SamplingParams(max_tokens=40, temperature=1.0, seed=0))
    outs = sampled + greedy
    assert all(_valid_answer(o) for o in outs), [(o.text, o.finish_reason) for o in outs]
    assert any(o.finish_reason == "stop" for o in sampled), [o.text for o in sampled]
    assert all(t < tok.vocab_size and t > 2 for o in outs for t in o.token_ids)
    assert not _valid_answer(free[0])  # unconstrained, the random model writes no JSON


def test_json_mode_arguments(json_model):
    with pytest.raises(ValueError, match="response_format must be one of"):
        SamplingParams(response_format="yaml")
    with pytest.raises(ValueError, match="json_schema goes with"):
        SamplingParams(response_format="json_schema")
    with pytest.raises(ValueError, match="json_schema goes with"):
        SamplingParams(json_schema={"type": "object"})
    with pytest.raises(ValueError, match="format 'ipv6' is not supported"):
        SamplingParams(response_format="json_schema",
                       json_schema={"type": "object", "properties": {"a": {"type": "string", "format": "ipv6"}}})
    assert not SamplingParams(response_format="json_object").device_greedy
    constraint = JsonConstraint(TokenIndex(Tokenizer.from_hf_dir(json_model), 448))
    with pytest.raises(ValueError, match="cannot follow"):
        constraint.accept(2)  # </s>: a special token


def test_the_default_model_answers_json():
    """SmolLM2-135M-Instruct (where installed), greedy: asked for a JSON object, it writes one in a Markdown
    fence unconstrained; in JSON mode the answer is the object alone, finished when it closes."""
    path = default_model_or_skip()
    question = [{"role": "user", "content": "Give me a JSON object describing a cat with its name and age."}]
    with LLM(path, max_model_len=256) as llm:
        free = llm.chat(question, SamplingParams(max_tokens=6))
        constrained = llm.chat(question, SamplingParams(max_tokens=48, response_format="json_object"))
    free, constrained = (o[0] if isinstance(o, list) else o for o in (free, constrained))
    assert free.text.startswith("```"), free.text
    assert constrained.finish_reason == "stop", constrained.text
    answer = json.loads(constrained.text)
    assert isinstance(answer, dict) and answer, constrained.text


def test_whitespace_runs_are_capped(json_model):
    """Outside strings, after 8 whitespace-only tokens in a row the mask drops them (the structure must go on);
    inside a string whitespace is content and stays allowed."""
    tok = Tokenizer.from_hf_dir(json_model)
    index = TokenIndex(tok, 448)
    ids = {data: i for i, data in enumerate(index.bytes) if data is not None}
    blank = index.whitespace.nonzero().flatten().tolist()
    assert ids[b" "] in blank and ids[b"{"] not in blank
    cpu = torch.device("cpu")
    constraint = JsonConstraint(index)
    constraint.accept(ids[b"{"])
    for _ in range(8):
        assert constraint.mask(cpu)[blank].all()
        constraint.accept(ids[b" "])
    mask = constraint.mask(cpu)
    assert not mask[blank].any() and mask[ids[b'"']] and mask[ids[b"}"]]
    constraint.accept(ids[b'"'])  # a key: whitespace is its content
    assert constraint.mask(cpu)[ids[b" "]]
    for _ in range(10):
        constraint.accept(ids[b" "])
    assert constraint.mask(cpu)[ids[b" "]]
    constraint.accept(ids[b'"'])
    assert constraint.mask(cpu)[ids[b" "]]  # the run starts again after a token that is not whitespace


def test_a_model_that_loves_whitespace_still_writes_json(json_model):
    """Greedy with every whitespace-only token pushed up by 100: without the cap the answer would be whitespace
    to max_tokens; with it, no more than 8 whitespace-only tokens follow each other outside strings."""
    index = TokenIndex(Tokenizer.from_hf_dir(json_model), 448)
    bias = {i: 100.0 for i in index.whitespace.nonzero().flatten().tolist()}
    with LLM(json_model, max_model_len=256, kv_cache_memory=16 << 20) as llm:
        out = llm.generate(["w1"], SamplingParams(max_tokens=60, response_format="json_object", logit_bias=bias))[0]
    state, run, longest = START, 0, 0
    for t in out.token_ids:
        data = index.bytes[t]
        blank = not data.strip(b" \t\n\r") and not JSON_OBJECT.in_string(state)
        run = run + 1 if blank else 0
        longest = max(longest, run)
        state = advance_bytes(state, data)
    assert 8 == longest and state is not None, (longest, out.text)


def test_reasoning_then_json(tmp_path):
    """ReasoningThenJson: first the JSON's tokens or <think>; after <think> anything (no mask) until
    </think>, whose tokens are the reasoning's (accept False); then JSON mode (accept True) to the end. A prompt
    that opened the block starts inside it; a tokenizer without a <think> token starts in the JSON."""
    tok = Tokenizer.from_hf_dir(save_byte_bpe_tokenizer(str(tmp_path), added=("<think>", "</think>")))
    index = TokenIndex(tok, 448)
    think, close = tok.encode("<think>", add_special_tokens=False), tok.encode("</think>", add_special_tokens=False)
    assert think == [420] and close == [421]
    c = ReasoningThenJson(JsonConstraint(index), tok, opened=False)
    mask = c.mask(torch.device("cpu"))
    assert mask[420] and not mask[421] and mask.sum() == JsonConstraint(index).mask(torch.device("cpu")).sum() + 1
    assert c.accept(420) is False and c.mask(torch.device("cpu")) is None
    for t in tok.encode("{hm}", add_special_tokens=False) + close:  # anything goes in the block, even JSON
        assert c.accept(t) is False
    assert not c.complete and not c.mask(torch.device("cpu"))[420]
    for t in tok.encode('{"a": 1}', add_special_tokens=False):
        assert c.mask(torch.device("cpu"))[t] and c.accept(t) is True
    assert c.complete
    opened = ReasoningThenJson(JsonConstraint(index), tok, opened=True)
    assert opened.mask(torch.device("cpu")) is None and opened.accept(close[0]) is False
    assert opened.accept(tok.encode("{", add_special_tokens=False)[0]) is True
    split = ReasoningThenJson(JsonConstraint(index), tok, opened=True)  # the close tag over many tokens
    pieces = tok.encode("so </thi", add_special_tokens=False) + tok.encode("nk>", add_special_tokens=False)
    assert len(pieces) > 3 and not any(split.accept(t) for t in pieces) and split.phase == "json"
    assert all(split.accept(t) for t in tok.encode("\n{", add_special_tokens=False))
    direct = ReasoningThenJson(JsonConstraint(index), tok, opened=False, open_tag="<reason>")  # no such token
    assert direct.accept(tok.encode("{", add_special_tokens=False)[0]) is True
    with pytest.raises(ValueError, match="reasoning_after and reasoning_open go with a response_format"):
        SamplingParams(reasoning_after=True)
    with pytest.raises(ValueError, match="reasoning_open .* needs reasoning_after"):
        SamplingParams(response_format="json_object", reasoning_open=True)


def _in_string(content: bytes) -> bytes:
    return b'{"k": "' + content + b'", "' + content + b'": 1}'


def test_strings_are_well_formed_utf8():
    """A string (value or key) takes exactly the bytes Python's strict UTF-8 decoder reads: a lead byte and
    its continuation bytes, no overlong form, no surrogate, nothing past U+10FFFF; every prefix of a valid
    string can go on."""
    for text in ["é", "日本", "€", "😀", "\u07ff\u0800\uffff\U00010000\U0010ffff", "a\u00a0b"]:
        data = _in_string(text.encode())
        assert is_complete(advance_bytes(START, data)), text
        assert all(advance_bytes(START, data[:k]) is not None for k in range(len(data))), text
    for bad in [b"\xe2x", b"\xe2\x82", b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x9f\xbf", b"\xed\xa0\x80",
                b"\xf0\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff", b"\xc3\xa9\xa9", b"\xe2\x82\""]:
        assert advance_bytes(START, b'{"k": "' + bad) is None or not is_complete(advance_bytes(START, _in_string(bad)))
        assert advance_bytes(START, b'{"k": "' + bad + b'"}') is None, bad
    for content, valid in random_byte_strings(1, [0x61, 0x20, *range(0x80, 0x100)], 5000):
        assert is_complete(advance_bytes(START, _in_string(content))) == valid, content


class _ByteFallbackTokenizer:
    """A SentencePiece-like vocabulary: <unk>, <s>, </s>, the 256 byte-fallback pieces <0x00>..<0xFF>, then
    ``pieces`` (bytes: whole characters, or part of one as a byte-level BPE may hold)."""

    class backend:  # no added tokens: the first three are dropped as a byte-less <unk> would be
        pass

    def __init__(self, pieces=(), bytes_=range(256)):
        self.table = [b"", b"", b""] + [bytes([b]) for b in bytes_] + list(pieces)
        self.vocab_size = len(self.table)

    def token_bytes(self, i: int) -> bytes:
        return self.table[i]


PIECES = ["é".encode(), "日本".encode(), "€".encode()[:2], "€".encode()[2:] + b"x", b'"\xe6', b"\xa5\"",
          b" \xf0\x9f", "😀".encode()[2:], b"ab", b'": "', b'\\n\xc3', b"\xa9\xc3"]


def test_masks_with_byte_fallback_tokens():
    """Byte-fallback tokens (<0xE2> ...) and tokens that end or begin inside a character: the masks of every
    state along texts with multi-byte characters equal a check of each token, so a lead byte is only followed
    by its continuation bytes."""
    index = TokenIndex(_ByteFallbackTokenizer(PIECES), 300)
    assert index.missing is None and len(index.live_open) == 8
    assert_masks_exact(index, JSON_OBJECT, ['{"é": "日本 €😀", "b": "\\né\\u00e9"}', '{"€x": ["日", "a"]}'])
    cpu = torch.device("cpu")
    continuations = {bytes([b]) for b in range(0x80, 0xC0)}
    for text, want in ((b'{"k": "\xe2', continuations | {"😀".encode()[2:]}),
                       (b'{"k": "\xe2\x82', continuations | {"€".encode()[2:] + b"x", b"\xa5\"", b"\xa9\xc3"})):
        mask = index.mask(advance_bytes(START, text), cpu)
        assert {index.bytes[i] for i in mask.nonzero().flatten().tolist()} == want, text


def test_a_character_no_token_finishes_is_never_begun():
    """A vocabulary without the continuation bytes as tokens of their own: a token that ends inside a
    character which no token can finish is masked in strings (the sampler would face an empty mask next);
    whole characters go through."""
    pieces = ["€".encode()[:2], "€".encode(), "é".encode(), "é".encode()[:1], b'"\xc3']
    index = TokenIndex(_ByteFallbackTokenizer(pieces, bytes_=range(0x80)), 300)
    ids = {data: i for i, data in enumerate(index.bytes) if data is not None}
    cpu = torch.device("cpu")
    string, value = advance_bytes(START, b'{"k": "'), advance_bytes(START, b'{"k": ')
    mask = index.mask(string, cpu)
    assert mask[ids["€".encode()]] and mask[ids["é".encode()]]
    assert not mask[ids[b"\xe2\x82"]] and not mask[ids[b"\xc3"]] and not index.mask(value, cpu)[ids[b'"\xc3']]
    assert index.live_open == frozenset([()])


def test_engine_writes_whole_characters(json_model):
    """The byte token 0xE2 pushed up by 100 and the quote by 50 (greedy): a string opens, 0xE2 is drawn in it,
    then only continuation bytes may follow, so the text holds three-byte characters and no replacement
    character (U+FFFD), in JSON mode and in a schema's string."""
    tok = Tokenizer.from_hf_dir(json_model)
    ids = {tok.token_bytes(i): i for i in range(tok.vocab_size)}
    bias = {ids[b"\xe2"]: 100.0, ids[b'"']: 50.0}
    schema = {"type": "object", "properties": {"s": {"type": "string"}}}
    with LLM(json_model, max_model_len=256, kv_cache_memory=16 << 20) as llm:
        outs = llm.generate(["w1", "w2"], [
            SamplingParams(max_tokens=40, response_format="json_object", logit_bias=bias),
            SamplingParams(max_tokens=40, response_format="json_schema", json_schema=schema, logit_bias=bias)])
    for out in outs:
        data = b"".join(tok.token_bytes(t) for t in out.token_ids)
        whole = codecs.getincrementaldecoder("utf-8")().decode(data)  # raises on bytes that break UTF-8
        assert data.count(b"\xe2") >= 3 and out.finish_reason == "length", data
        # cut by max_tokens, a character may be left open: only there a replacement character
        assert out.text == whole + ("\ufffd" if len(whole.encode()) < len(data) else ""), (out.text, data)
