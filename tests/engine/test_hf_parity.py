"""Greedy generations equal Hugging Face transformers token for token (fp32, tiny random models)."""

import pytest
import torch

from tritium import LLM, SamplingParams

from .conftest import PROMPTS, hf_greedy

MAX_TOKENS = 8


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3"])
def test_greedy_matches_transformers(tiny_models, model_type, backend):
    path, hf = tiny_models[model_type]
    llm = LLM(path, dtype=torch.float32, attention_backend=backend, op_backend=backend, linear_backend=backend)
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS))
    for prompt, out in zip(PROMPTS, outs):
        expected = hf_greedy(hf, out.prompt_token_ids, MAX_TOKENS)
        assert out.token_ids == expected, f"{model_type}/{backend} prompt {prompt!r}"
        assert out.finish_reason == "length"
        assert out.text == llm.tokenizer.decode(expected)
