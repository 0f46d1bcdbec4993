"""Chunked prefill, prefix caching and preemption change nothing in greedy outputs."""

import pytest
import torch

from tritium import LLM, SamplingParams

from .conftest import PROMPTS

PARAMS = SamplingParams(max_tokens=20)


@pytest.fixture(scope="module")
def baseline(tiny_models):
    """Greedy outputs with every prompt prefilled whole, no prefix cache, a roomy cache."""
    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, enable_prefix_caching=False, enable_chunked_prefill=False)
    return [o.token_ids for o in llm.generate(PROMPTS, PARAMS)]


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_chunked_prefill(tiny_models, baseline, backend):
    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, attention_backend=backend, max_num_batched_tokens=5,
              enable_prefix_caching=False)
    assert [o.token_ids for o in llm.generate(PROMPTS, PARAMS)] == baseline


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_prefix_caching(tiny_models, baseline, backend):
    path, _ = tiny_models["llama"]
    llm = LLM(path, dtype=torch.float32, attention_backend=backend)
    long_prompt = PROMPTS[1]  # 19 tokens: one full page of 16 is shareable
    first = llm.generate([long_prompt], PARAMS)[0]
    assert llm.stats["prefix_cache_hit_tokens"] == 0 and first.num_cached_tokens == 0
    again = llm.generate([long_prompt, long_prompt], PARAMS)
    assert llm.stats["prefix_cache_hit_tokens"] == 32
    assert [o.num_cached_tokens for o in again] == [16, 16]  # each request's own share of the hits
    assert first.token_ids == baseline[1]
    assert [o.token_ids for o in again] == [baseline[1]] * 2
    # a later batch mixing cached and uncached prompts
    assert [o.token_ids for o in llm.generate(PROMPTS, PARAMS)] == baseline


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_preemption_under_tiny_kv_budget(tiny_models, baseline, backend):
    path, _ = tiny_models["llama"]
    # 4 pages of 16 tokens: the prompts and their 20 new tokens need 9 pages together.
    llm = LLM(path, dtype=torch.float32, attention_backend=backend, num_blocks=4, max_num_batched_tokens=64)
    outs = llm.generate(PROMPTS, PARAMS)
    assert llm.stats["preemptions"] > 0
    assert [o.token_ids for o in outs] == baseline
    # a preempted request's own pages found again on its return are no cached prompt tokens
    assert all(o.num_cached_tokens == 0 for o in outs)
    assert all(o.finish_reason == "length" for o in outs)
