"""ModelConfig from Hugging Face config dicts: which sliding window the engine runs (Qwen2/Qwen3 windows follow
``layer_types`` or ``max_window_layers``, as transformers builds them; Mistral's covers every layer)."""

import pytest

from tritium.models.config import ModelConfig, UnsupportedModelError

BASE = dict(vocab_size=64, hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128)


def _config(model_type, **fields):
    arch = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM",
            "mixtral": "MixtralForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
            "qwen2_moe": "Qwen2MoeForCausalLM"}[model_type]
    return ModelConfig.from_hf_dict(dict(BASE, model_type=model_type, architectures=[arch], **fields))


@pytest.mark.parametrize("model_type,fields,window", [
    ("mistral", dict(sliding_window=32), 32),
    ("mistral", dict(sliding_window=None), None),
    ("qwen2", dict(use_sliding_window=False, sliding_window=32, max_window_layers=0), None),
    ("qwen2", dict(use_sliding_window=True, sliding_window=32, max_window_layers=0), 32),
    ("qwen3", dict(use_sliding_window=True, sliding_window=32, max_window_layers=4), None),  # no layer past 4
    ("qwen3", dict(use_sliding_window=True, sliding_window=32), 32),  # no max_window_layers: every layer
    ("qwen2", dict(use_sliding_window=True, sliding_window=32, max_window_layers=0,
                   layer_types=["full_attention"] * 4), None),  # layer_types wins
], ids=["mistral", "mistral-none", "qwen2-off", "qwen2-all", "qwen3-none-past", "qwen3-no-mwl", "layer-types"])
def test_sliding_window(model_type, fields, window):
    assert _config(model_type, **fields).sliding_window == window


@pytest.mark.parametrize("fields", [
    dict(use_sliding_window=True, sliding_window=32, max_window_layers=1),
    dict(use_sliding_window=True, sliding_window=32, layer_types=["full_attention", "sliding_attention"] * 2),
], ids=["max_window_layers", "layer_types"])
def test_a_window_on_some_layers_is_refused(fields):
    with pytest.raises(UnsupportedModelError, match=r"a sliding window \(32\) on layers \d\.\.3 only"):
        _config("qwen2", **fields)


def test_qwen3_norms_its_query_and_key_heads():
    cfg = _config("qwen3", head_dim=64)
    assert cfg.qk_norm and cfg.head_dim == 64 and not cfg.attention_bias
    assert not _config("qwen2").qk_norm


def test_mixture_of_experts_fields():
    """Mixtral: experts of intermediate_size, their weights always renormalized; Qwen3-MoE (hub configs say
    num_experts, transformers 5 writes num_local_experts): moe_intermediate_size, norm_topk_prob, head norms."""
    mixtral = _config("mixtral", num_local_experts=8, num_experts_per_tok=2, sliding_window=None)
    assert (mixtral.num_experts, mixtral.num_experts_per_tok, mixtral.moe_intermediate_size,
            mixtral.norm_topk_prob, mixtral.qk_norm) == (8, 2, 256, True, False)
    for key in ("num_experts", "num_local_experts"):
        qwen = _config("qwen3_moe", **{key: 128}, num_experts_per_tok=8, moe_intermediate_size=64, norm_topk_prob=True)
        assert (qwen.num_experts, qwen.num_experts_per_tok, qwen.moe_intermediate_size, qwen.norm_topk_prob,
                qwen.qk_norm) == (128, 8, 64, True, True)
    assert not _config("qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64).norm_topk_prob
    assert _config("qwen3", num_experts=4).num_experts == 0  # a dense model's stray field is not read
    # Qwen2-MoE: a shared expert (5632 where absent, as transformers), QKV bias unless qkv_bias says not
    qwen2 = _config("qwen2_moe", num_experts=60, moe_intermediate_size=1408, shared_expert_intermediate_size=5632)
    assert (qwen2.num_experts, qwen2.num_experts_per_tok, qwen2.moe_intermediate_size, qwen2.norm_topk_prob,
            qwen2.shared_expert_intermediate_size, qwen2.attention_bias, qwen2.qk_norm) == (
        60, 4, 1408, False, 5632, True, False)
    assert _config("qwen2_moe", num_experts=4, moe_intermediate_size=64).shared_expert_intermediate_size == 5632
    assert not _config("qwen2_moe", num_experts=4, moe_intermediate_size=64, qkv_bias=False).attention_bias
    assert _config("qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                   shared_expert_intermediate_size=64).shared_expert_intermediate_size == 0  # not Qwen3's field
    with pytest.raises(UnsupportedModelError, match="shared_expert_intermediate_size must be >= 0"):
        _config("qwen2_moe", num_experts=4, moe_intermediate_size=64, shared_expert_intermediate_size=-1)
    with pytest.raises(UnsupportedModelError, match=r"dense MLPs on layers \[0, 2\]"):
        _config("qwen2_moe", num_experts=4, moe_intermediate_size=64, decoder_sparse_step=2)


@pytest.mark.parametrize("fields,match", [
    (dict(num_experts=4, num_experts_per_tok=5, moe_intermediate_size=64), r"num_experts_per_tok must be in \[1, "),
    (dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, mlp_only_layers=[0]),
     r"dense MLPs on layers \[0\]"),
    (dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, decoder_sparse_step=2),
     r"dense MLPs on layers \[0, 2\]"),
], ids=["top-k", "mlp-only-layers", "sparse-step"])
def test_mixture_of_experts_refusals(fields, match):
    with pytest.raises(UnsupportedModelError, match=match):
        _config("qwen3_moe", **fields)


def test_gguf_experts():
    """Mixtral as llama.cpp writes it (llama with experts) and qwen3moe read as mixtures of experts; shared
    experts, sigmoid gating, a missing expert size or experts in another architecture refused by name."""
    base = {"block_count": 2, "embedding_length": 64, "feed_forward_length": 128, "attention.head_count": 4,
            "vocab_size": 32}

    def meta(arch, **kv):
        return {"general.architecture": arch, **{f"{arch}.{k}": v for k, v in {**base, **kv}.items()}}

    cfg = ModelConfig.from_gguf_metadata(meta("llama", expert_count=8, expert_used_count=2), has_output_weight=True,
                                         has_qkv_bias=False)
    assert (cfg.model_type, cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size,
            cfg.norm_topk_prob) == ("mixtral", 8, 2, 128, True)
    cfg = ModelConfig.from_gguf_metadata(meta("qwen3moe", expert_count=128, expert_used_count=8,
                                              expert_feed_forward_length=48), has_output_weight=True,
                                         has_qkv_bias=False, has_qk_norm=True)
    assert (cfg.model_type, cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size, cfg.norm_topk_prob,
            cfg.qk_norm) == ("qwen3_moe", 128, 8, 48, True, True)
    cfg = ModelConfig.from_gguf_metadata(meta("qwen3moe", expert_count=4, expert_used_count=2,
                                              expert_feed_forward_length=48, expert_weights_norm=False),
                                         has_output_weight=True, has_qkv_bias=False)
    assert not cfg.norm_topk_prob
    assert ModelConfig.from_gguf_metadata(meta("llama"), has_output_weight=True, has_qkv_bias=False).num_experts == 0
    cfg = ModelConfig.from_gguf_metadata(meta("qwen2moe", expert_count=60, expert_used_count=4,
                                              expert_feed_forward_length=1408, expert_shared_feed_forward_length=5632),
                                         has_output_weight=True, has_qkv_bias=True)
    assert (cfg.model_type, cfg.num_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size, cfg.norm_topk_prob,
            cfg.shared_expert_intermediate_size, cfg.attention_bias) == ("qwen2_moe", 60, 4, 1408, False, 5632, True)
    for m, match in [
            (meta("qwen3moe"), "without qwen3moe.expert_count"),
            (meta("qwen2", expert_count=8, expert_used_count=2), "qwen2 files with experts"),
            (meta("llama", expert_count=8, expert_used_count=2, expert_shared_count=1), "shared experts"),
            (meta("llama", expert_count=8, expert_used_count=2, expert_gating_func=2), "gating function 2"),
            (meta("llama", expert_count=8), "expert_used_count"),
            (meta("qwen3moe", expert_count=8, expert_used_count=2), "expert_feed_forward_length is missing"),
            (meta("qwen2moe", expert_count=8, expert_used_count=2, expert_feed_forward_length=8),
             "expert_shared_feed_forward_length is missing"),
            (meta("qwen3moe", expert_count=8, expert_used_count=2, expert_feed_forward_length=8,
                  expert_shared_feed_forward_length=8), "qwen3moe: shared experts"),
            (meta("llama", expert_count=8, expert_used_count=9), "num_experts_per_tok must be in \\[1, num_experts")]:
        with pytest.raises(UnsupportedModelError, match=match):
            ModelConfig.from_gguf_metadata(m, has_output_weight=True, has_qkv_bias=False)
