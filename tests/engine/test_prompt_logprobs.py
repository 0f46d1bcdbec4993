"""Prompt log-probabilities (``SamplingParams.prompt_logprobs``) against transformers' logits over the whole
prompt (fp32, tiny random models): with the prompt split over steps (chunked prefill) and the LM head over
chunks of rows, after a prefix-cache hit would have skipped the prompt, beside requests that ask for none,
and after a preemption."""

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.engine import runner as runner_module

from .conftest import PROMPTS

LONG = " ".join(f"w{i}" for i in range(100, 141))  # 41 tokens


def _hf_logprobs(hf, ids: list[int]) -> torch.Tensor:
    """[len(ids) - 1, V] log-softmax of transformers' logits: row t - 1 is token t's distribution."""
    with torch.no_grad():
        logits = hf(torch.tensor([ids])).logits[0].float()
    return logits[:-1].log_softmax(-1)


def _check(out, hf, k: int) -> None:
    ids = out.prompt_token_ids
    ref = _hf_logprobs(hf, ids)
    got = out.prompt_logprobs
    assert got is not None and len(got) == len(ids) and got[0] is None
    for t in range(1, len(ids)):
        lp = got[t]
        assert lp.token_id == ids[t]
        assert lp.logprob == pytest.approx(ref[t - 1, ids[t]].item(), abs=2e-4), f"token {t}"
        above = (ref[t - 1] > ref[t - 1, ids[t]] + 2e-4).sum().item()  # strictly more likely, beyond the noise
        near = (ref[t - 1] > ref[t - 1, ids[t]] - 2e-4).sum().item()
        assert 1 + above <= lp.rank <= max(near, 1), f"token {t} rank"
        assert len(lp.top) == k
        want_v, want_i = ref[t - 1].topk(k)
        assert [v for _, v in lp.top] == pytest.approx(want_v.tolist(), abs=2e-4)
        # ids may swap only where two values tie within the tolerance
        for (tid, v), wi in zip(lp.top, want_i.tolist()):
            assert tid == wi or abs(ref[t - 1, tid].item() - ref[t - 1, wi].item()) < 2e-4


@pytest.mark.parametrize("model_type,op_backend", [("llama", "triton"), ("qwen3", "triton"), ("llama", "torch")])
def test_prompt_logprobs_match_transformers(tiny_models, model_type, op_backend, monkeypatch):
    """Prompts of 1-41 tokens, the longest over three steps of at most 16 tokens and LM-head chunks of 5 rows;
    the generated tokens and their logprobs are those of a request without prompt logprobs. The Triton
    op backend scores with ``token_logprobs``, the torch one with its reference."""
    monkeypatch.setattr(runner_module, "PROMPT_LOGITS_CHUNK", 5)
    path, hf = tiny_models[model_type]
    llm = LLM(path, dtype=torch.float32, max_num_batched_tokens=16, max_model_len=64, op_backend=op_backend)
    prompts = PROMPTS + [LONG]
    outs = llm.generate(prompts, SamplingParams(max_tokens=4, prompt_logprobs=3, logprobs=1))
    plain = llm.generate(prompts, SamplingParams(max_tokens=4, logprobs=1))
    for out, base in zip(outs, plain):
        _check(out, hf, 3)
        assert out.token_ids == base.token_ids
        assert [lp.logprob for lp in out.logprobs] == pytest.approx([lp.logprob for lp in base.logprobs], abs=1e-5)
        assert base.prompt_logprobs is None
    assert len(outs[2].prompt_token_ids) == 1 and outs[2].prompt_logprobs == [None]


def test_prompt_logprobs_after_prefix_cache_and_beside_others(tiny_models):
    """The same prompt twice (its pages cached after the first): both score every token; a request without
    prompt logprobs in the same batch uses the cache and is unchanged; k = 0 reports no alternatives."""
    path, hf = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, block_size=16, max_model_len=64)
    first = llm.generate([LONG], SamplingParams(max_tokens=2, prompt_logprobs=0))[0]
    hits = llm.engine.block_manager.hits
    again, other = llm.generate([LONG, LONG], [SamplingParams(max_tokens=2, prompt_logprobs=2),
                                               SamplingParams(max_tokens=2)])
    assert llm.engine.block_manager.hits > hits  # the request without prompt logprobs hit the cache
    _check(first, hf, 0)
    _check(again, hf, 2)
    assert [lp.logprob for lp in again.prompt_logprobs[1:]] == pytest.approx(
        [lp.logprob for lp in first.prompt_logprobs[1:]], abs=1e-5)
    assert other.token_ids == first.token_ids == again.token_ids and other.prompt_logprobs is None


def test_prompt_logprobs_survive_preemption(tiny_models):
    """A KV cache of few pages: requests are preempted and computed again; every prompt is still scored
    once per token, as with room to spare."""
    path, hf = tiny_models["llama"]
    roomy = LLM(path, dtype=torch.float32, block_size=16, max_model_len=64)
    tight = LLM(path, dtype=torch.float32, block_size=16, max_model_len=64, num_blocks=6, max_num_batched_tokens=16)
    params = SamplingParams(max_tokens=20, prompt_logprobs=1, ignore_eos=True)
    prompts = [LONG, PROMPTS[1], PROMPTS[3]]
    want = roomy.generate(prompts, params)
    got = tight.generate(prompts, params)
    assert tight.engine.scheduler.num_preemptions > 0
    for g, w in zip(got, want):
        _check(g, hf, 1)
        assert g.token_ids == w.token_ids


def test_prompt_logprobs_validated():
    with pytest.raises(ValueError, match=r"prompt_logprobs must be None or an int in \[0, 20\], got 21"):
        SamplingParams(prompt_logprobs=21)
    with pytest.raises(ValueError, match=r"prompt_logprobs must be None or an int in \[0, 20\], got True"):
        SamplingParams(prompt_logprobs=True)


def test_prompt_alone_fills_the_context(tiny_models):
    """max_tokens 0: the prompt is scored and nothing generated, so it may fill the context (41 tokens of a
    41-token context, over three steps), beside a request that generates; a longer one, or one that would
    generate at that length, is refused naming the context."""
    path, hf = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, block_size=16, max_model_len=41, max_num_batched_tokens=16)
    scored, other = llm.generate([LONG, PROMPTS[1]], [SamplingParams(max_tokens=0, prompt_logprobs=1),
                                                      SamplingParams(max_tokens=3, ignore_eos=True)])
    assert len(scored.prompt_token_ids) == 41
    _check(scored, hf, 1)
    assert scored.token_ids == [] and scored.text == "" and scored.finish_reason == "length"
    assert len(other.token_ids) == 3
    assert other.token_ids == llm.generate([PROMPTS[1]], SamplingParams(max_tokens=3, ignore_eos=True))[0].token_ids
    with pytest.raises(ValueError, match=r"has 41 tokens; the context holds 41 \(max_model_len\), leaving no room"):
        llm.generate([LONG], SamplingParams(max_tokens=1))
    with pytest.raises(ValueError, match=r"has 42 tokens; the context holds 41"):
        llm.generate([LONG + " w1"], SamplingParams(max_tokens=0))
    with pytest.raises(ValueError, match=r"max_tokens must be an int >= 0, got -1"):
        SamplingParams(max_tokens=-1)
