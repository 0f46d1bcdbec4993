"""Greedy generations equal Hugging Face transformers token for token (fp32, tiny random models)."""

import pytest
import torch

from tritium import LLM, SamplingParams

from .conftest import PROMPTS, hf_greedy, make_tiny_model

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


@pytest.mark.parametrize("model_type,window", [
    ("mistral", dict(sliding_window=6)),
    ("qwen2", dict(use_sliding_window=True, sliding_window=6, max_window_layers=0)),  # every layer windowed
    ("qwen2", dict(use_sliding_window=True, sliding_window=6, max_window_layers=2)),  # none: the window is off
], ids=["mistral", "qwen2-all-layers", "qwen2-no-layer"])
def test_sliding_window_matches_transformers(tmp_path, model_type, window):
    """A window of 6 keys over prompts of 1-19 tokens and 8 new ones: the engine's window (on every layer, or
    on none where max_window_layers covers them all) answers as transformers' per-layer masks do."""
    hf = make_tiny_model(str(tmp_path), model_type, **window)
    llm = LLM(str(tmp_path), dtype=torch.float32, attention_backend="triton", op_backend="triton",
              linear_backend="triton")
    expect_window = None if window.get("max_window_layers") == 2 else 6
    assert llm.engine.model_config.sliding_window == expect_window
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS))
    for prompt, out in zip(PROMPTS, outs):
        assert out.token_ids == hf_greedy(hf, out.prompt_token_ids, MAX_TOKENS), f"{model_type} prompt {prompt!r}"


@pytest.mark.parametrize("model_type,overrides,backend", [
    ("mixtral", {}, "torch"), ("mixtral", {}, "triton"), ("qwen3_moe", {}, "torch"), ("qwen3_moe", {}, "triton"),
    # the top-k router weights as they are, not summing to 1 (the kernels' tests cover it under the interpreter)
    ("qwen3_moe", dict(norm_topk_prob=False), "torch"),
    # Qwen2-MoE: QKV bias, the top-k weights unnormalized, a shared expert gated by a sigmoid
    ("qwen2_moe", {}, "torch"), ("qwen2_moe", {}, "triton"),
], ids=["mixtral-torch", "mixtral-triton", "qwen3_moe-torch", "qwen3_moe-triton", "qwen3_moe-unnormed-torch",
        "qwen2_moe-torch", "qwen2_moe-triton"])
def test_moe_greedy_matches_transformers(tmp_path, model_type, overrides, backend):
    """Mixtures of experts: prompts of 1-19 tokens (the experts' sorted prefill path and their per-token decode
    path) and 8 new tokens each, token for token as transformers."""
    hf = make_tiny_model(str(tmp_path), model_type, **overrides)
    llm = LLM(str(tmp_path), dtype=torch.float32, attention_backend=backend, op_backend=backend,
              linear_backend=backend)
    cfg = llm.engine.model_config
    experts = getattr(hf.config, "num_local_experts", None) or hf.config.num_experts
    assert (cfg.num_experts, cfg.norm_topk_prob) == (experts, model_type == "mixtral" or
                                                     overrides.get("norm_topk_prob", model_type != "qwen2_moe"))
    assert cfg.shared_expert_intermediate_size == (96 if model_type == "qwen2_moe" else 0)
    assert cfg.attention_bias == (model_type == "qwen2_moe")
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS))
    for prompt, out in zip(PROMPTS, outs):
        assert out.token_ids == hf_greedy(hf, out.prompt_token_ids, MAX_TOKENS), f"{model_type} prompt {prompt!r}"
