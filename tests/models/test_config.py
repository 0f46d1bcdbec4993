"""ModelConfig from Hugging Face config dicts: which sliding window the engine runs (Qwen2/Qwen3 windows follow
``layer_types`` or ``max_window_layers``, as transformers builds them; Mistral's covers every layer)."""

import re

import pytest
import torch

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


@pytest.mark.parametrize("fields,types", [
    (dict(use_sliding_window=True, sliding_window=32, max_window_layers=1),
     ("full_attention",) + ("sliding_attention",) * 3),
    (dict(use_sliding_window=True, sliding_window=32, layer_types=["full_attention", "sliding_attention"] * 2),
     ("full_attention", "sliding_attention") * 2),
], ids=["max_window_layers", "layer_types"])
def test_a_window_on_some_layers(fields, types):
    cfg = _config("qwen2", **fields)
    assert (cfg.sliding_window, cfg.layer_types) == (32, types)
    assert [cfg.layer_window(i) for i in range(4)] == [32 if t == "sliding_attention" else None for t in types]
    assert not cfg.uniform_layers and _config("qwen2").uniform_layers


def test_layer_types_are_checked():
    with pytest.raises(UnsupportedModelError, match="layer_types must name each of the 4 layers"):
        ModelConfig(model_type="qwen2", vocab_size=64, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=128,
                    sliding_window=8, layer_types=("full_attention", "local"))


GEMMA3_4B = {  # google/gemma-3-4b-it's config.json as the Hub has it (transformers 4.50): a few text fields only
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "boi_token_index": 255999,
    "eos_token_id": [1, 106], "mm_tokens_per_image": 256, "torch_dtype": "bfloat16",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"},
}


def test_gemma3_with_a_vision_tower_is_its_text_model():
    """transformers' defaults fill what the text_config leaves out; the sliding layers (five of every six) keep
    the default rope of base 10000, the full ones the 1e6 base scaled linearly by 8."""
    cfg = ModelConfig.from_hf_dict(GEMMA3_4B)
    assert (cfg.model_type, cfg.vocab_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
            cfg.max_position_embeddings, cfg.eos_token_ids, cfg.torch_dtype) == (
        "gemma3_text", 262208, 8, 4, 256, 131072, (1, 106), torch.bfloat16)
    assert cfg.layer_types[:6] == ("sliding_attention",) * 5 + ("full_attention",) and len(cfg.layer_types) == 34
    assert cfg.layer_window(0) == 1024 and cfg.layer_window(5) is None
    assert cfg.layer_rope(0) == (10000.0, None)
    assert cfg.layer_rope(5) == (1e6, {"factor": 8.0, "rope_type": "linear"})
    assert (cfg.qk_norm, cfg.sandwich_norms, cfg.norm_weight_offset, cfg.hidden_act, cfg.tie_word_embeddings,
            cfg.attn_logit_softcapping, cfg.final_logit_softcapping) == (True, True, 1.0, "gelu_tanh", True, None, None)
    assert cfg.attention_scale == 256 ** -0.5 and cfg.embedding_multiplier == 2560 ** 0.5
    # transformers 5 writes the rope a layer type
    five = dict(GEMMA3_4B["text_config"], rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}})
    del five["rope_scaling"]
    cfg5 = ModelConfig.from_hf_dict(five)
    assert cfg5.layer_rope(0) == (10000.0, None) and cfg5.layer_rope(5)[1]["factor"] == 8.0


def test_gemma2_fields():
    cfg = ModelConfig.from_hf_dict(dict(BASE, model_type="gemma2", architectures=["Gemma2ForCausalLM"],
                                        query_pre_attn_scalar=144, head_dim=32))
    assert cfg.layer_types == ("sliding_attention", "full_attention") * 2 and cfg.sliding_window == 4096
    assert (cfg.attn_logit_softcapping, cfg.final_logit_softcapping, cfg.rope_local_theta, cfg.qk_norm) == (
        50.0, 30.0, None, False)
    assert cfg.attention_scale == 144 ** -0.5


@pytest.mark.parametrize("cfg,match", [
    (dict(GEMMA3_4B["text_config"], hidden_activation="gelu"), "hidden_activation 'gelu' is not supported"),
    (dict(GEMMA3_4B["text_config"], use_bidirectional_attention=True), "use_bidirectional_attention"),
    (dict(GEMMA3_4B["text_config"], rope_parameters={"sliding_attention": {"rope_type": "linear", "factor": 2.0}}),
     "rope scaling 'linear' on the sliding layers"),
    (dict(BASE, model_type="llama", hidden_act="gelu"), "hidden_act 'gelu' is not supported; expected silu"),
], ids=["gelu-exact", "bidirectional", "local-scaling", "llama-gelu"])
def test_gemma_refusals(cfg, match):
    with pytest.raises(UnsupportedModelError, match=match):
        ModelConfig.from_hf_dict(cfg)


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


def _gguf_gemma(arch, layers, **extra):
    meta = {"general.architecture": arch, f"{arch}.block_count": layers, f"{arch}.embedding_length": 5376,
            f"{arch}.feed_forward_length": 21504, f"{arch}.attention.head_count": 32,
            f"{arch}.attention.head_count_kv": 16, f"{arch}.attention.key_length": 128,
            f"{arch}.attention.sliding_window": 1024, f"{arch}.vocab_size": 262208,
            "tokenizer.ggml.eos_token_id": 1, "tokenizer.ggml.eot_token_id": 106, **extra}
    return ModelConfig.from_gguf_metadata(meta, has_output_weight=False, has_qkv_bias=False, has_qk_norm=True)


def test_gguf_gemma_as_llama_cpp_runs_it():
    """Scores scaled by head_dim except on the 27B models (by their layer count, as llama.cpp decides: Gemma 3 27B
    has 62 layers, query_pre_attn_scalar = hidden / heads = 168); the sliding layers' rope base 10000; the norm
    weights taken as stored (the converter added the 1); generation stops at <end_of_turn> too."""
    big = _gguf_gemma("gemma3", 62)
    assert big.attention_scale == 168 ** -0.5 and big.model_type == "gemma3_text" and big.norm_weight_offset == 0
    assert _gguf_gemma("gemma3", 48).attention_scale == 128 ** -0.5
    assert big.layer_types[4:7] == ("sliding_attention", "full_attention", "sliding_attention")
    assert big.layer_rope(0) == (10000.0, None) and big.eos_token_ids == (1, 106)
    g2 = _gguf_gemma("gemma2", 46, **{"gemma2.attn_logit_softcapping": 50.0, "gemma2.final_logit_softcapping": 30.0})
    assert (g2.layer_types[:2], g2.attn_logit_softcapping, g2.final_logit_softcapping, g2.rope_local_theta) == (
        ("sliding_attention", "full_attention"), 50.0, 30.0, None)
    assert g2.attention_scale == 168 ** -0.5
    assert _gguf_gemma("gemma3", 26, **{"gemma3.attention.sliding_window": 0}).layer_types is None


def test_phi3_fields_and_refusals():
    """Phi-4's config (Phi3ForCausalLM, no window) runs; Phi-3-mini-4k's window is read; rope on part of each head
    (Phi-4-mini) and LongRoPE (the 128k Phi-3 models) are refused by name."""
    phi4 = dict(BASE, model_type="phi3", architectures=["Phi3ForCausalLM"], sliding_window=None)
    assert ModelConfig.from_hf_dict(phi4).sliding_window is None
    assert ModelConfig.from_hf_dict(dict(phi4, sliding_window=2047)).sliding_window == 2047
    with pytest.raises(UnsupportedModelError, match="partial_rotary_factor 0.75"):
        ModelConfig.from_hf_dict(dict(phi4, partial_rotary_factor=0.75))
    with pytest.raises(UnsupportedModelError, match="rope scaling 'longrope' is not supported"):
        ModelConfig.from_hf_dict(dict(phi4, rope_scaling={"type": "longrope", "short_factor": [1.0] * 16,
                                                          "long_factor": [2.0] * 16}))


@pytest.mark.parametrize("fields,error,match", [
    (dict(num_key_value_heads=0), ValueError, "num_key_value_heads must be a positive integer, got 0"),  # was: 4
    (dict(num_attention_heads=3), ValueError,
     r"hidden_size \(128\) is not divisible by num_attention_heads \(3\), and no head_dim is given"),
    (dict(num_attention_heads=0), ValueError, "num_attention_heads must be a positive integer, got 0"),
    (dict(hidden_size=-128), ValueError, "hidden_size must be a positive integer, got -128"),
    (dict(hidden_size=128.0), TypeError, "hidden_size must be a positive integer, got 128.0"),
    (dict(vocab_size="64"), TypeError, "vocab_size must be a positive integer, got '64'"),
    (dict(num_hidden_layers=True), TypeError, "num_hidden_layers must be a positive integer, got True"),
    (dict(head_dim=0), ValueError, "head_dim must be a positive integer, got 0"),  # was: taken as hidden / heads
    (dict(head_dim=34), None, None),
    (dict(head_dim=33), ValueError, "head_dim must be even"),
    (dict(max_position_embeddings=0), ValueError, "max_position_embeddings must be a positive integer, got 0"),
    (dict(rope_theta=0), ValueError, "rope_theta must be a positive finite number, got 0.0"),
    (dict(rope_theta=-10000.0), ValueError, "rope_theta must be a positive finite number, got -10000.0"),
    (dict(rope_theta="1e6"), TypeError, "rope_theta must be a positive finite number, got '1e6'"),
    (dict(rope_parameters={"rope_type": "default", "rope_theta": float("inf")}), ValueError,
     "rope_theta .* got inf"),
    (dict(rms_norm_eps=0), ValueError, "rms_norm_eps must be a positive finite number, got 0"),
    (dict(rms_norm_eps=float("nan")), ValueError, "rms_norm_eps must be a positive finite number, got nan"),
    (dict(rms_norm_eps="1e-6"), TypeError, "rms_norm_eps must be a positive finite number, got '1e-6'"),
    (dict(torch_dtype="float13"), ValueError, "torch_dtype 'float13' is not a floating-point torch dtype"),
    (dict(dtype="int8"), ValueError, "torch_dtype 'int8' is not a floating-point torch dtype"),
    (dict(torch_dtype=16), TypeError, "torch_dtype 16 is not"),
    (dict(torch_dtype="float64"), None, None),
    (dict(tie_word_embeddings="false"), TypeError, "tie_word_embeddings must be true or false, got 'false'"),
    (dict(attention_bias=1), TypeError, "attention_bias must be true or false, got 1"),
    (dict(eos_token_id="2"), TypeError, "eos_token_id must be token ids .* got '2'"),
    (dict(eos_token_id=[2, -1]), ValueError, "eos_token_id must be token ids .* got -1"),
    (dict(bos_token_id=1.0), TypeError, "bos_token_id must be token ids .* got 1.0"),
    (dict(sliding_window=0), ValueError, "sliding_window must be a positive integer or null, got 0"),
], ids=lambda v: "-".join(f"{k}={v[k]!r}" for k in v) if isinstance(v, dict) else None)
def test_nonsense_values_are_named(fields, error, match):
    """A size that is not a positive integer, an epsilon or rope base that is not a positive finite number, a flag
    that is not a bool, an unknown dtype: TypeError (a value of the wrong JSON type) or ValueError naming the field
    (they failed later, far from the config, or ran: rope_theta 0 gave NaN logits, tie_word_embeddings "false" tied
    the head, an unknown dtype was bf16)."""
    if error is None:
        _config("mistral", **fields)
        return
    with pytest.raises(error, match=match):
        _config("mistral", **fields)


@pytest.mark.parametrize("quantization_config,match", [
    ("gptq", "quantization_config must be a JSON object naming its quant_method, got 'gptq'"),
    (["gptq"], r"quantization_config must be a JSON object naming its quant_method, got \['gptq'\]"),
    ({"quant_method": "gptq", "bits": 3, "group_size": 128}, "^quantization_config: GPTQ with bits=3 is not"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "quant_method 'bitsandbytes' is not supported"),
], ids=["string", "list", "gptq-3-bits", "bitsandbytes"])
def test_bad_quantization_configs_are_named(quantization_config, match):
    """A string or list (was: "quant_method None"), an int4 refusal said once (was: "quantization_config:
    quantization_config: ...")."""
    with pytest.raises(UnsupportedModelError, match=match):
        _config("qwen2", quantization_config=quantization_config)


def test_gguf_metadata_missing_or_zero_is_named():
    """A missing size key was int(None)'s TypeError; a head count of 0 a ZeroDivisionError; a context of 0 ran."""
    meta = {"general.architecture": "llama", "llama.block_count": 2, "llama.embedding_length": 64,
            "llama.feed_forward_length": 128, "llama.attention.head_count": 4, "llama.vocab_size": 32}

    def config(**kv):
        return ModelConfig.from_gguf_metadata({**meta, **kv}, has_output_weight=True, has_qkv_bias=False)

    assert config().head_dim == 16
    for key in ("llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
                "llama.attention.head_count"):
        with pytest.raises(ValueError, match=f"GGUF metadata has no {key}, which a llama model needs"):
            ModelConfig.from_gguf_metadata({k: v for k, v in meta.items() if k != key}, has_output_weight=True,
                                           has_qkv_bias=False)
    with pytest.raises(ValueError, match="GGUF metadata llama.attention.head_count must be a positive integer, got 0"):
        config(**{"llama.attention.head_count": 0})
    with pytest.raises(ValueError, match="GGUF metadata llama.context_length must be a positive integer, got 0"):
        config(**{"llama.context_length": 0})
    with pytest.raises(ValueError, match="GGUF metadata llama.attention.layer_norm_rms_epsilon must be a positive "
                                         "finite number, got 0.0"):
        config(**{"llama.attention.layer_norm_rms_epsilon": 0.0})


GGUF_META = {"general.architecture": "llama", "llama.block_count": 2, "llama.embedding_length": 64,
             "llama.feed_forward_length": 128, "llama.attention.head_count": 4, "llama.vocab_size": 32,
             "tokenizer.ggml.eos_token_id": 2}


@pytest.mark.parametrize("kv,error,match", [
    ({"general.architecture": None}, UnsupportedModelError, r"GGUF metadata has no general\.architecture"),
    ({"general.architecture": "gpt2"}, UnsupportedModelError,
     r"GGUF metadata general\.architecture: architecture 'gpt2' is not supported"),
    ({"llama.embedding_length": 64.0}, ValueError,
     r"GGUF metadata llama\.embedding_length must be a positive integer, got 64\.0"),
    ({"llama.block_count": "2"}, ValueError, r"GGUF metadata llama\.block_count must be a positive integer, got '2'"),
    ({"llama.attention.head_count_kv": [2, 2]}, ValueError,
     r"GGUF metadata llama\.attention\.head_count_kv must be a positive integer, got \[2, 2\]"),
    ({"llama.attention.head_count_kv": 3}, UnsupportedModelError,
     r"GGUF metadata llama\.attention\.head_count, llama\.attention\.head_count_kv: num_attention_heads \(4\) is "
     r"not a multiple of num_key_value_heads \(3\)"),
    ({"llama.attention.key_length": 15}, ValueError,
     r"GGUF metadata llama\.attention\.key_length: head_dim must be even"),
    ({"llama.embedding_length": 66}, ValueError,
     r"GGUF metadata llama\.embedding_length \(66\) is not divisible by llama\.attention\.head_count \(4\), and no "
     r"llama\.attention\.key_length is given"),
    ({"llama.rope.freq_base": -1.0}, ValueError,
     r"GGUF metadata llama\.rope\.freq_base must be a positive finite number, got -1\.0"),
    ({"llama.rope.freq_base": float("nan")}, ValueError,
     r"GGUF metadata llama\.rope\.freq_base must be a positive finite number, got nan"),
    ({"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 0.0}, ValueError,
     r"GGUF metadata llama\.rope\.scaling\.factor must be a positive finite number, got 0\.0"),
    ({"llama.rope.scaling.type": "linear"}, UnsupportedModelError,
     r"GGUF metadata llama\.rope\.scaling\.factor: rope scaling 'linear' needs a positive 'factor', got None"),
    ({"llama.attention.sliding_window": -4}, ValueError,
     r"GGUF metadata llama\.attention\.sliding_window must be an integer >= 0, got -4"),
    ({"llama.vocab_size": None}, ValueError,
     r"GGUF metadata has neither llama\.vocab_size nor a tokenizer\.ggml\.tokens list"),
    ({"tokenizer.ggml.eos_token_id": "2"}, ValueError,
     r"GGUF metadata tokenizer\.ggml\.eos_token_id must be a token id \(an integer in \[0, 32\), the vocabulary's "
     r"size\), got '2'"),
    ({"tokenizer.ggml.eot_token_id": 7.0}, ValueError,
     r"GGUF metadata tokenizer\.ggml\.eot_token_id must be a token id .* got 7\.0"),
    ({"tokenizer.ggml.eom_token_id": [3, 4]}, ValueError,
     r"GGUF metadata tokenizer\.ggml\.eom_token_id must be a token id .* got \[3, 4\]"),
    ({"tokenizer.ggml.bos_token_id": True}, ValueError,
     r"GGUF metadata tokenizer\.ggml\.bos_token_id must be a token id .* got True"),
    ({"llama.expert_count": 4, "llama.expert_used_count": 2.0}, ValueError,
     r"GGUF metadata llama\.expert_used_count must be a positive integer, got 2\.0"),
], ids=["no-arch", "gpt2", "float-size", "string-size", "per-layer-kv-heads", "kv-heads-not-dividing", "odd-key-length",
        "hidden-not-divisible", "negative-rope-base", "nan-rope-base", "zero-rope-factor", "no-rope-factor",
        "negative-window", "no-vocab", "string-eos", "float-eot", "array-eom", "bool-bos", "float-experts-used"])
def test_gguf_metadata_values_are_named_by_key(kv, error, match):
    """Every GGUF key read is checked as it is read and named: a float, string or per-layer array where an integer
    belongs (int() took some, a list became the config's), a token id that is not an integer, a rope base that is
    not a positive finite number; ModelConfig's own checks name the keys its fields came from."""
    meta = {k: v for k, v in {**GGUF_META, **kv}.items() if v is not None}
    with pytest.raises(error, match=match):
        ModelConfig.from_gguf_metadata(meta, has_output_weight=True, has_qkv_bias=False)


@pytest.mark.parametrize("kv,bos,eos,ignored", [
    ({"tokenizer.ggml.eos_token_id": 32}, None, (), {"eos": 32}),
    ({"tokenizer.ggml.eot_token_id": 1000}, None, (2,), {"eot": 1000}),
    ({"tokenizer.ggml.eot_token_id": -1, "tokenizer.ggml.eom_token_id": 5}, None, (2, 5), {"eot": -1}),
    ({"tokenizer.ggml.bos_token_id": 40, "tokenizer.ggml.eot_token_id": 33}, None, (2,), {"eot": 33, "bos": 40}),
    ({"tokenizer.ggml.bos_token_id": 31, "tokenizer.ggml.eos_token_id": 0}, 31, (0,), {}),
], ids=["eos-at-vocab", "eot-past-vocab", "negative-eot", "bos-and-eot-past-vocab", "bounds"])
def test_gguf_special_token_ids_outside_the_vocabulary_are_ignored(caplog, kv, bos, eos, ignored):
    """An integer special token id outside [0, vocab) (was: refused) is what llama.cpp loads with a warning ("bad
    special token") and ignores: a warning naming the key, the value and the vocabulary's size, and the id left
    out (no BOS; not in the stop set). With no end-of-generation id left, a warning says so."""
    with caplog.at_level("WARNING", logger="tritium.models.config"):
        cfg = ModelConfig.from_gguf_metadata({**GGUF_META, **kv}, has_output_weight=True, has_qkv_bias=False,
                                             source="m.gguf")
    assert (cfg.bos_token_id, cfg.eos_token_ids) == (bos, eos)
    messages = [r.getMessage() for r in caplog.records]
    for key, value in ignored.items():
        assert any(m.startswith(f"'m.gguf': GGUF metadata tokenizer.ggml.{key}_token_id = {value} is not a token "
                                f"id of the vocabulary (32 tokens): ignored") for m in messages), messages
    none_left = [m for m in messages if "names no end-of-generation token" in m]
    assert len(none_left) == (not eos) and len(messages) == len(ignored) + (not eos)
    if not eos:
        assert "(tokenizer.ggml.eos_token_id ignored): generation stops only at max_tokens" in none_left[0]


@pytest.mark.parametrize("fields,bos,eos,ignored", [
    (dict(bos_token_id=1, eos_token_id=[2, 64, 7]), 1, (2, 7), ["eos_token_id = 64"]),
    (dict(bos_token_id=64, eos_token_id=100), None, (), ["bos_token_id = 64", "eos_token_id = 100"]),
    (dict(bos_token_id=63, eos_token_id=0), 63, (0,), []),
], ids=["eos-at-vocab", "both-past-vocab", "bounds"])
def test_config_json_special_token_ids_past_the_vocabulary_are_ignored(caplog, fields, bos, eos, ignored):
    """config.json's bos/eos ids at or past vocab_size (was: kept; a BOS there indexed past the embeddings, an EOS
    there was a stop id never sampled) are left out with a warning naming the field, the id and vocab_size, as
    generation_config.json's and GGUF's are; negative or non-integer ids stay errors (test above)."""
    with caplog.at_level("WARNING", logger="tritium.models.config"):
        cfg = _config("mistral", **fields)
    assert (cfg.bos_token_id, cfg.eos_token_ids) == (bos, eos)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == len(ignored)
    for what, m in zip(ignored, messages):
        assert m.startswith(f"config.json {what} is not a token id of the model (vocab_size = 64): ignored"), m


def _write_gguf(path, kv: dict) -> str:
    """A GGUF file of metadata only (no tensors): ``GGUF_META`` updated with ``kv`` (None: left out), ints written
    as uint32, floats as float32, strings as strings, lists as uint32 arrays."""
    gguf = pytest.importorskip("gguf")
    meta = {k: v for k, v in {**GGUF_META, **kv}.items() if v is not None}
    w = gguf.GGUFWriter(str(path), meta.pop("general.architecture"))
    for key, value in meta.items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_array(key, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


@pytest.mark.parametrize("kv,error,match", [
    ({"llama.block_count": None}, ValueError, "GGUF metadata has no llama.block_count, which a llama model needs"),
    ({"llama.attention.head_count": 0}, ValueError,
     r"GGUF metadata llama\.attention\.head_count must be a positive integer, got 0"),
    ({"llama.attention.head_count_kv": [2, 2]}, ValueError,
     r"GGUF metadata llama\.attention\.head_count_kv must be a positive integer, got \[2, 2\]"),
    ({"llama.rope.freq_base": 0.0}, ValueError, r"GGUF metadata llama\.rope\.freq_base must be a positive finite"),
    ({"tokenizer.ggml.eos_token_id": "2"}, ValueError,
     r"GGUF metadata tokenizer\.ggml\.eos_token_id must be a token id"),
    ({"llama.attention.head_count_kv": 3}, UnsupportedModelError,
     r"GGUF metadata llama\.attention\.head_count, llama\.attention\.head_count_kv: num_attention_heads"),
    # a message kept as it was (from_gguf_metadata's callers compare it whole): the file's names the key
    ({"llama.rope.scaling.type": "longrope", "llama.rope.scaling.factor": 2.0}, UnsupportedModelError,
     r"GGUF metadata llama\.rope\.scaling\.type: GGUF rope scaling 'longrope' is not supported"),
    ({"general.architecture": "gpt2"}, UnsupportedModelError, r"GGUF metadata general\.architecture: architecture"),
], ids=["missing", "zero-heads", "array", "zero-rope-base", "string-eos", "kv-heads", "longrope", "gpt2"])
def test_gguf_file_metadata_errors_name_the_file_and_key(tmp_path, kv, error, match):
    """load_gguf_config's errors name the GGUF file as well as the key (was: the key alone, or neither: int(None)'s
    TypeError, a ZeroDivisionError, a list of head counts taken as the count)."""
    from tritium.models.weights import load_gguf_config, read_gguf

    path = _write_gguf(tmp_path / "bad.gguf", kv)
    reader, meta = read_gguf(path)
    with pytest.raises(error, match=rf"^'{re.escape(path)}': {match}") as e:
        load_gguf_config(reader, meta)
    assert type(e.value) is error
    good = load_gguf_config(*read_gguf(_write_gguf(tmp_path / "good.gguf", {})))
    assert (good.num_attention_heads, good.head_dim, good.eos_token_ids) == (4, 16, (2,))


def test_gguf_file_special_token_past_the_vocabulary_warns_naming_the_file(tmp_path, caplog):
    """The warning for an id outside the vocabulary names the file, as the errors do; the file loads."""
    from tritium.models.weights import load_gguf_config, read_gguf

    path = _write_gguf(tmp_path / "m.gguf", {"tokenizer.ggml.eos_token_id": 40, "tokenizer.ggml.eot_token_id": 3})
    with caplog.at_level("WARNING", logger="tritium.models.config"):
        cfg = load_gguf_config(*read_gguf(path))
    assert cfg.eos_token_ids == (3,)
    assert [r.getMessage() for r in caplog.records] == [
        f"{path!r}: GGUF metadata tokenizer.ggml.eos_token_id = 40 is not a token id of the vocabulary (32 tokens): "
        f"ignored, as llama.cpp ignores it"]
