"""Greedy generations equal Hugging Face transformers token for token (fp32, tiny random models)."""

import dataclasses

import pytest
import torch

from tritium import LLM, SamplingParams

from .conftest import PROMPTS, continued_text, hf_greedy, make_tiny_model

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
        assert out.text == continued_text(llm.tokenizer, out.prompt_token_ids, expected)


@pytest.mark.parametrize("model_type,window", [
    ("mistral", dict(sliding_window=6)),
    ("qwen2", dict(use_sliding_window=True, sliding_window=6, max_window_layers=0)),  # every layer windowed
    ("qwen2", dict(use_sliding_window=True, sliding_window=6, max_window_layers=2)),  # none: the window is off
    ("qwen2", dict(use_sliding_window=True, sliding_window=6, max_window_layers=1)),  # the second layer only
], ids=["mistral", "qwen2-all-layers", "qwen2-no-layer", "qwen2-second-layer"])
def test_sliding_window_matches_transformers(tmp_path, model_type, window):
    """A window of 6 keys over prompts of 1-19 tokens and 8 new ones: the engine's window (on every layer, on
    none where max_window_layers covers them all, or on the layers past it) answers as transformers'
    per-layer masks do."""
    hf = make_tiny_model(str(tmp_path), model_type, **window)
    llm = LLM(str(tmp_path), dtype=torch.float32, attention_backend="triton", op_backend="triton",
              linear_backend="triton")
    expect_window = None if window.get("max_window_layers") == 2 else 6
    assert llm.engine.model_config.sliding_window == expect_window
    mixed = window.get("max_window_layers") == 1
    assert llm.engine.model_config.layer_types == (("full_attention", "sliding_attention") if mixed else None)
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS))
    for prompt, out in zip(PROMPTS, outs):
        assert out.token_ids == hf_greedy(hf, out.prompt_token_ids, MAX_TOKENS), f"{model_type} prompt {prompt!r}"


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_phi3_matches_transformers(tmp_path, backend):
    """Phi-3 / Phi-4: the fused qkv_proj and gate_up_proj tensors split into the engine's parts, its window of
    6 keys: transformers' tokens."""
    hf = make_tiny_model(str(tmp_path), "phi3")
    llm = LLM(str(tmp_path), dtype=torch.float32, attention_backend=backend, op_backend=backend,
              linear_backend=backend)
    assert llm.engine.model_config.sliding_window == 6
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS))
    for prompt, out in zip(PROMPTS, outs):
        assert out.token_ids == hf_greedy(hf, out.prompt_token_ids, MAX_TOKENS), f"phi3/{backend} {prompt!r}"


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("model_type", ["gemma2", "gemma3_text"])
def test_gemma_matches_transformers(tmp_path, model_type, backend):
    """Gemma 2 and 3 (sandwich norms applied as 1 + w, GeGLU, embeddings times sqrt(hidden), scores scaled by
    query_pre_attn_scalar; Gemma 2's score and logit softcaps, Gemma 3's head norms and the sliding layers'
    own rope base; windows on some layers only): greedy tokens as transformers, and every prompt token's
    log-probability, which the final softcap and the scale bend where the argmax may not move."""
    hf = make_tiny_model(str(tmp_path), model_type)
    llm = LLM(str(tmp_path), dtype=torch.float32, attention_backend=backend, op_backend=backend,
              linear_backend=backend)
    cfg = llm.engine.model_config
    assert cfg.sandwich_norms and cfg.hidden_act == "gelu_tanh" and cfg.layer_types == tuple(hf.config.layer_types)
    assert (cfg.rope_local_theta is not None) == (model_type == "gemma3_text") == cfg.qk_norm
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS, prompt_logprobs=1))
    for prompt, out in zip(PROMPTS, outs):
        ids = out.prompt_token_ids
        assert out.token_ids == hf_greedy(hf, ids, MAX_TOKENS), f"{model_type}/{backend} prompt {prompt!r}"
        with torch.no_grad():
            ref = hf(torch.tensor([ids])).logits[0, :-1].float().log_softmax(-1)
        got = [lp.logprob for lp in out.prompt_logprobs[1:]]
        assert got == pytest.approx([ref[t, ids[t + 1]].item() for t in range(len(ids) - 1)], abs=2e-4), prompt


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


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe"])
def test_moe_decode_chain_fusions_run(tmp_path, model_type):
    """The one-rank decode chain of a mixture of experts takes its fused launches (the norm + router + top-k
    before the block at up to 16 tokens, the experts with the add + norm after them), and still answers as
    transformers: a refactor that silently falls back to the unfused ops fails here. Without CUDA graphs (on a
    GPU a replayed step calls no Python op)."""
    hf = make_tiny_model(str(tmp_path), model_type)
    llm = LLM(str(tmp_path), dtype=torch.float32, attention_backend="triton", op_backend="triton",
              linear_backend="triton", cuda_graphs=False)
    model = llm.engine.model
    calls = {"moe_norm_route": 0, "fused_moe_add_norm": 0, "moe_route": 0}

    def counted(name):
        op = getattr(model.ops, name)

        def run(*args, **kwargs):
            calls[name] += 1
            return op(*args, **kwargs)
        return run

    model.ops = dataclasses.replace(model.ops, **{name: counted(name) for name in calls})
    layers, new = len(model.layers), 4
    out = llm.generate([PROMPTS[0]], SamplingParams(max_tokens=new))[0]
    assert out.token_ids == hf_greedy(hf, out.prompt_token_ids, new)
    # every step of a short prompt (prefill of <= 16 tokens, then decode) routes with the norm, in every layer
    assert len(out.prompt_token_ids) <= 16 and calls["moe_norm_route"] == layers * new
    assert calls["moe_route"] == 0
    # the add + norm after the block: fused unless the block has a shared expert (which goes around it)
    assert calls["fused_moe_add_norm"] == (0 if model_type == "qwen2_moe" else layers * new)
