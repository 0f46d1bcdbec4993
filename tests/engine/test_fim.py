"""Fill in the middle (OpenAI's ``suffix``): the prompt of each known format from the text around a gap, the
format's end tokens as stops, ``LLM.generate(..., suffix=...)`` equal to generating from that prompt, and clear
errors for a model without the tokens."""

import json
import os

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine.fim import FORMATS, encode_fim, fim_format
from tritium.engine.tokenizer import Tokenizer

from .conftest import add_fim_tokens, make_tiny_model

VOCAB = 253  # conftest's word-level tokenizer: <unk> <s> </s> w0 .. w249


@pytest.fixture(scope="module")
def fim_model(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("fim-llama"))
    make_tiny_model(path, "llama", vocab_size=VOCAB + 8)
    add_fim_tokens(path, FORMATS[0])
    return path


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.prefix)
@pytest.mark.parametrize("bos", [False, True])
def test_prompt_of_each_format(tmp_path, fmt, bos):
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers

    words = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": 3 + i for i in range(20)}}
    hf = HFTokenizer(models.WordLevel(words, unk_token="<unk>"))
    hf.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    tok = Tokenizer.from_hf_dir(str(tmp_path))
    assert fim_format(tok) is None
    with pytest.raises(ValueError, match="no fill-in-the-middle tokens .*<\\|fim_prefix\\|>"):
        encode_fim(tok, "w1", "w2")
    added = add_fim_tokens(str(tmp_path), fmt, bos)
    tok = Tokenizer.from_hf_dir(str(tmp_path))
    assert fim_format(tok) == fmt
    pre, suf, mid, *ends = (tok.backend.token_to_id(t) for t in added)
    ids, stops = encode_fim(tok, "w1 w2", "w3")
    assert ids == [1] * bos + [pre, 4, 5, suf, 6, mid]
    assert set(stops) == {pre, suf, mid, *ends}
    ids, _ = encode_fim(tok, "", "")  # an empty side is allowed: the markers alone
    assert ids == [1] * bos + [pre, suf, mid]
    with pytest.raises(ValueError, match="suffix must be text"):
        encode_fim(tok, "w1", [5])


def test_generate_with_a_suffix(fim_model, tiny_models):
    """LLM.generate(prompt, suffix=...) answers as generate(the format's prompt) with its end tokens as stops, the
    caller's stops kept; a middle ends at an end token (forced here with a logit bias); a model without the
    tokens, a token-id prompt or a count mismatch is refused naming the prompt."""
    llm = LLM(fim_model, dtype=torch.float32, max_model_len=64)
    ids, stops = encode_fim(llm.tokenizer, "w1 w2 w3", "w9 w10")
    params = SamplingParams(max_tokens=8, stop_token_ids=[7])
    want = llm.generate([ids], SamplingParams(max_tokens=8, stop_token_ids=[7] + stops))[0]
    got = llm.generate("w1 w2 w3", params, suffix="w9 w10")[0]
    assert got.prompt_token_ids == ids and got.token_ids == want.token_ids and got.prompt == "w1 w2 w3"
    two = llm.generate(["w1 w2 w3", "w4"], params, suffix=["w9 w10", "w5"])
    assert two[0].token_ids == want.token_ids and two[1].prompt_token_ids == encode_fim(llm.tokenizer, "w4", "w5")[0]
    pad = llm.tokenizer.backend.token_to_id(FORMATS[0].stops[0])  # <|fim_pad|>
    ended = llm.generate("w1", SamplingParams(max_tokens=8, logit_bias={pad: 100}), suffix="w2")[0]
    assert ended.token_ids == [pad] and ended.finish_reason == "stop" and ended.stop_reason == pad
    assert ended.text == ""  # a special token: not in the text
    with pytest.raises(ValueError, match="suffix has 1 entries, prompts has 2"):
        llm.generate(["w1", "w2"], params, suffix=["w3"])
    with pytest.raises(ValueError, match="prompts\\[0\\] with a suffix: prompt must be text"):
        llm.generate([[4, 5]], params, suffix="w3")
    plain = LLM(tiny_models["llama"][0], dtype=torch.float32, max_model_len=64)
    with pytest.raises(ValueError, match="prompts\\[0\\] with a suffix: this model's vocabulary has no fill-in"):
        plain.generate("w1", params, suffix="w2")


def test_empty_suffix_is_none_and_bad_suffixes_are_named(fim_model, tiny_models):
    """An empty suffix is a plain completion, as the server's (it was a fill-in-the-middle prompt around nothing,
    and an error on a model without the tokens); a suffix that is not text, or a list holding one that is not, is
    refused naming ``suffix`` (an int was a TypeError, bytes were taken as a list of ints)."""
    params = SamplingParams(max_tokens=4)
    for path in (fim_model, tiny_models["llama"][0]):
        llm = LLM(path, dtype=torch.float32, max_model_len=64)
        plain = llm.generate(["w1 w2", "w3"], params)
        got = llm.generate(["w1 w2", "w3"], params, suffix="")
        assert [o.prompt_token_ids for o in got] == [o.prompt_token_ids for o in plain]
        assert [o.token_ids for o in got] == [o.token_ids for o in plain]
        assert llm.generate([[4, 5]], params, suffix="")[0].token_ids == llm.generate([[4, 5]], params)[0].token_ids
    llm = LLM(fim_model, dtype=torch.float32, max_model_len=64)
    mixed = llm.generate(["w1 w2", "w3"], params, suffix=["w9", ""])
    assert mixed[0].prompt_token_ids == encode_fim(llm.tokenizer, "w1 w2", "w9")[0]
    assert mixed[1].prompt_token_ids == llm.tokenizer.encode("w3")
    for bad in (5, b"w9", ["w9", 3], {"w9"}):
        with pytest.raises(ValueError, match="^suffix must be a string or a list of strings \\(one per prompt\\), "
                                             f"got {type(bad).__name__} "):
            llm.generate(["w1", "w2"], params, suffix=bad)
