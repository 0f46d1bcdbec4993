"""The offline API as vLLM users write it: ``SamplingParams.n`` samples of each prompt (``out.outputs``, seeds
``seed + i`` as the server's choices, later samples taking the prompt's pages from the prefix cache) and
``dtype`` given by name."""

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine.config import EngineConfig

from .conftest import PROMPTS

# 21 tokens: one full page of 16 that a later sample can take from the prefix cache (the last token is computed)
LONG = " ".join(f"w{i}" for i in range(100, 121))


@pytest.fixture(scope="module")
def llm(tiny_models):
    path, _ = tiny_models["llama"]
    return LLM(path, dtype=torch.float32, max_model_len=64)


def _all_pages_free(llm) -> bool:
    blocks = llm.engine.block_manager
    return blocks.num_free_blocks == blocks.num_blocks and not llm.engine.has_unfinished()


def test_n_samples_differ_and_reproduce(llm):
    params = SamplingParams(max_tokens=6, temperature=1.0, seed=5, n=3, ignore_eos=True)
    outs = llm.generate(PROMPTS, params)
    assert len(outs) == len(PROMPTS)  # one output per prompt, whatever n
    for out, prompt in zip(outs, PROMPTS):
        samples = out.outputs
        assert len(samples) == 3 and samples[0] is out
        assert [s.index for s in samples] == [0, 1, 2]
        assert all(s.finished and s.finish_reason == "length" and len(s.token_ids) == 6 for s in samples)
        assert all(s.prompt == prompt and s.prompt_token_ids == out.prompt_token_ids for s in samples)
        assert len({tuple(s.token_ids) for s in samples}) == 3, [s.token_ids for s in samples]
        assert len({s.request_id for s in samples}) == 3
    assert llm.stats["generated_tokens"] == len(PROMPTS) * 3 * 6
    assert llm.stats["prompt_tokens"] == sum(len(o.prompt_token_ids) for o in outs)  # each prompt once
    again = llm.generate(PROMPTS, params)
    assert [[s.token_ids for s in o.outputs] for o in again] == [[s.token_ids for s in o.outputs] for o in outs]
    # sample i is the one-sample request seeded seed + i (what the server's choice i draws)
    for i in range(3):
        alone = llm.generate(PROMPTS, SamplingParams(max_tokens=6, temperature=1.0, seed=5 + i, ignore_eos=True))
        assert [o.token_ids for o in alone] == [o.outputs[i].token_ids for o in outs]
        assert all(o.outputs == [o] and o.index == 0 for o in alone)
    assert _all_pages_free(llm)


def test_n_samples_unseeded_differ(llm):
    out = llm.generate("w1 w2 w3", SamplingParams(max_tokens=8, temperature=1.0, n=4, ignore_eos=True))[0]
    assert len({tuple(s.token_ids) for s in out.outputs}) > 1


@pytest.mark.parametrize("decode_steps", [1, 8])
def test_greedy_samples_are_alike(tiny_models, decode_steps):
    """Greedy with n > 1 is allowed, as vLLM: n equal answers (later samples join while a greedy window of the first
    may be in flight)."""
    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, max_model_len=64, decode_steps=decode_steps)
    want = llm.generate([LONG, "w1 w2"], SamplingParams(max_tokens=7))
    outs = llm.generate([LONG, "w1 w2"], SamplingParams(max_tokens=7, n=3))
    for out, ref in zip(outs, want):
        assert [s.token_ids for s in out.outputs] == [ref.token_ids] * 3
        assert [s.text for s in out.outputs] == [ref.text] * 3
    assert _all_pages_free(llm)


def test_later_samples_take_the_prompt_pages_from_the_cache(tiny_models):
    path, _ = tiny_models["qwen2"]
    llm = LLM(path, dtype=torch.float32, max_model_len=64)
    out = llm.generate(LONG, SamplingParams(max_tokens=3, temperature=1.0, seed=1, n=3))[0]
    assert [s.num_cached_tokens for s in out.outputs] == [0, 16, 16]
    assert llm.stats["prefix_cache_hit_tokens"] == 32
    # prompt_logprobs: sample 0 scores the prompt (computed in full), the others share its scores and still hit
    params = SamplingParams(max_tokens=2, temperature=1.0, seed=1, n=2, prompt_logprobs=1)
    out = llm.generate(LONG.replace("w100", "w99"), params)[0]
    first, second = out.outputs
    assert first.num_cached_tokens == 0 and second.num_cached_tokens == 16
    assert first.prompt_logprobs is not None and len(first.prompt_logprobs) == len(first.prompt_token_ids)
    assert second.prompt_logprobs == first.prompt_logprobs
    # without prefix caching every sample computes its prompt
    off = LLM(path, dtype=torch.float32, max_model_len=64, enable_prefix_caching=False)
    out = off.generate(LONG, SamplingParams(max_tokens=3, temperature=1.0, seed=1, n=3))[0]
    assert [s.num_cached_tokens for s in out.outputs] == [0, 0, 0] and len(out.outputs) == 3


def test_n_per_prompt_and_chat(llm):
    outs = llm.generate(["w1 w2", "w3 w4"], [SamplingParams(max_tokens=3), SamplingParams(max_tokens=3, n=2)])
    assert [len(o.outputs) for o in outs] == [1, 2]
    assert outs[0].outputs == [outs[0]] and outs[1].outputs[1].index == 1
    conv = [{"role": "user", "content": "w5 w6"}]
    chat = llm.chat(conv, SamplingParams(max_tokens=5, temperature=1.0, seed=3, n=3, ignore_eos=True))
    assert len(chat) == 1 and len(chat[0].outputs) == 3
    assert len({s.text for s in chat[0].outputs}) == 3
    alone = llm.chat(conv, SamplingParams(max_tokens=5, temperature=1.0, seed=4, ignore_eos=True))[0]
    assert chat[0].outputs[1].text == alone.text
    assert _all_pages_free(llm)


@pytest.mark.parametrize("n", [0, -1, 1.5, True, "2", None])
def test_n_must_be_a_positive_int(n):
    with pytest.raises(ValueError, match=r"n must be an int >= 1 \(samples of the prompt\), got " + repr(n)[:3]):
        SamplingParams(n=n)


def test_n_refusals(llm):
    with pytest.raises(ValueError, match=r"pooling \(an embedding request\) takes no n > 1"):
        SamplingParams(pooling="last", n=2)
    with pytest.raises(ValueError, match=r"seed must be < 2\*\*64 - 2 with n=3"):
        SamplingParams(seed=2**64 - 2, n=3)
    SamplingParams(seed=2**64 - 3, n=3)  # the last sample's seed, 2**64 - 1, is one
    engine = llm.engine
    # the engine core runs one sample a request (the server expands n itself)
    with pytest.raises(ValueError, match=r"n of request 'x' must be 1 here \(one sample a request\), got 2"):
        engine.add_request("x", "w1", SamplingParams(n=2))
    with pytest.raises(ValueError, match=r"generate_stream streams one sample: sampling_params.n must be 1, got 2"):
        list(llm.generate_stream("w1", SamplingParams(n=2)))
    assert _all_pages_free(llm)


def test_a_bad_prompt_or_an_interrupt_leaves_nothing_queued(llm, monkeypatch):
    params = SamplingParams(max_tokens=4, temperature=1.0, n=3)
    with pytest.raises(ValueError, match=r"prompts\[1\] has 80 tokens"):
        llm.generate([LONG, " ".join(["w1"] * 80)], params)
    assert _all_pages_free(llm)
    engine = llm.engine
    calls = []

    def step():  # interrupted at the first step: LONG's later samples are not queued yet, the short prompt's are
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "step", step)
    with pytest.raises(KeyboardInterrupt):
        llm.generate([LONG, "w1 w2 w3"], params)
    monkeypatch.undo()
    assert engine.num_unfinished == 0
    while engine.has_unfinished():  # the aborts are reported, nothing else
        assert all(o.finish_reason == "abort" for o in engine.step())
    assert _all_pages_free(llm)
    assert len(llm.generate(LONG, params)[0].outputs) == 3


@pytest.mark.parametrize("name, dtype", [
    ("float32", torch.float32), ("float", torch.float32), ("fp32", torch.float32), ("float16", torch.float16),
    ("half", torch.float16), ("fp16", torch.float16), ("bfloat16", torch.bfloat16), ("bf16", torch.bfloat16),
    ("BFloat16", torch.bfloat16), ("torch.float16", torch.float16), ("auto", None)])
def test_dtype_names(name, dtype):
    cfg = EngineConfig(dtype=name)
    cfg.validate()
    assert cfg.dtype == dtype


@pytest.mark.parametrize("name, dtype", [("bf16", torch.bfloat16), ("half", torch.float16), ("auto", None)])
def test_llm_takes_a_dtype_name(tiny_models, name, dtype):
    """vLLM's LLM(model, dtype="half"); "auto" is float32 on the CPU, bfloat16 on a GPU for this float32
    checkpoint."""
    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=name, max_model_len=32)
    if dtype is None:
        dtype = torch.bfloat16 if llm.engine.device.type == "cuda" else torch.float32
    assert llm.engine.config.dtype == dtype
    assert llm.engine.model.dtype == dtype and llm.engine.model.embed.weight.dtype == dtype
    out = llm.generate("w1 w2 w3", SamplingParams(max_tokens=4, ignore_eos=True))[0]
    assert len(out.token_ids) == 4


@pytest.mark.parametrize("value, error", [("float64", ValueError), ("int8", ValueError), ("", ValueError),
                                          (torch.float64, TypeError), (16, TypeError)])
def test_dtype_refused_names_what_is_accepted(tiny_models, value, error):
    with pytest.raises(error, match=r"dtype must be None or one of torch.float32, torch.float16, torch.bfloat16 or "
                                    r"their names \('auto', 'float32', 'float', 'fp32', 'float16', 'half', 'fp16', "
                                    r"'bfloat16', 'bf16'\), got "):
        LLM(tiny_models["llama"][0], dtype=value)
