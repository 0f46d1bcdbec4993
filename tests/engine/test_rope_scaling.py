"""RoPE scaling (linear, dynamic NTK, llama3, yarn) from config.json and GGUF metadata against transformers:
inverse frequencies and attention scaling against ``ROPE_INIT_FUNCTIONS``, the whole cos/sin table against
``LlamaRotaryEmbedding``'s forward (which applies dynamic NTK's updates), and greedy tokens of a tiny yarn model."""

import math
import os

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.bench.engine import hf_rope_kwargs
from tritium.engine import UnsupportedModelError
from tritium.models.config import ModelConfig
from tritium.models.rope import rope_attention_factor, rope_cos_sin, rope_inv_freq

from .conftest import hf_greedy, make_tiny_model
from .test_gguf_loading import write_gguf, write_word_tokenizer

gguf = pytest.importorskip("gguf")

MAX_POS = 256
CASES = {
    "linear": (10000.0, {"rope_type": "linear", "factor": 4.0}),
    "dynamic": (10000.0, {"rope_type": "dynamic", "factor": 2.0}),
    "llama3": (500000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 64}),
    "yarn": (10000.0, {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
    "yarn-beta-notrunc": (1000000.0, {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32,
                                      "beta_fast": 16.0, "beta_slow": 2.0, "truncate": False}),
    "yarn-mscale": (10000.0, {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 64,
                              "mscale": 1.0, "mscale_all_dim": 0.707}),
    "yarn-attention-factor": (10000.0, {"rope_type": "yarn", "factor": 2.0, "attention_factor": 1.25}),
}


def hf_config(theta, scaling, head_dim=64):
    import transformers

    return transformers.LlamaConfig(
        vocab_size=32, hidden_size=4 * head_dim, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=4, head_dim=head_dim, max_position_embeddings=MAX_POS, **hf_rope_kwargs(theta, scaling))


def legacy_layout(config_dict: dict, theta: float, scaling: dict) -> dict:
    """The same config.json as transformers 4.x writes it (``rope_theta`` + ``rope_scaling`` with ``type``)."""
    out = {k: v for k, v in config_dict.items() if k != "rope_parameters"}
    old = {("type" if k == "rope_type" else k): v for k, v in scaling.items()}
    return dict(out, rope_theta=theta, rope_scaling=old)


def engine_rope(cfg: ModelConfig) -> tuple[torch.Tensor, float]:
    return rope_inv_freq(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling), rope_attention_factor(cfg.rope_scaling)


@pytest.mark.parametrize("head_dim", [64, 128], ids=lambda d: f"D{d}")
@pytest.mark.parametrize("case", list(CASES))
def test_inv_freq_and_attention_scaling_match_transformers(case, head_dim):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    theta, scaling = CASES[case]
    config = hf_config(theta, scaling, head_dim)
    ref_inv, ref_scale = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config, torch.device("cpu"))
    for layout in (config.to_dict(), legacy_layout(config.to_dict(), theta, scaling)):
        cfg = ModelConfig.from_hf_dict(layout)
        assert cfg.rope_scaling["rope_type"] == scaling["rope_type"]
        inv, scale = engine_rope(cfg)
        assert torch.equal(inv, ref_inv.float())
        assert scale == pytest.approx(ref_scale, rel=1e-12)
    if scaling["rope_type"] == "yarn":
        assert scale != 1.0


@pytest.mark.parametrize("case", list(CASES))
def test_rope_table_matches_rotary_embedding(case):
    """cos/sin over all positions of the table, transformers' forward included (dynamic NTK rescales there
    only past max_position_embeddings, so the table is the default one)."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    theta, scaling = CASES[case]
    config = hf_config(theta, scaling)
    rotary = LlamaRotaryEmbedding(config)
    x = torch.zeros(1, MAX_POS, 64)
    cos, sin = rotary(x, torch.arange(MAX_POS)[None])
    inv, scale = engine_rope(ModelConfig.from_hf_dict(config.to_dict()))
    table = rope_cos_sin(inv, MAX_POS, scale)
    # NOTE: angles reach 255 rad, whose fp32 spacing is 1.5e-5: transformers' matmul and the table's
    # product may round differently by that much.
    torch.testing.assert_close(table[:, :32], cos[0, :, :32], rtol=0, atol=4e-5)
    torch.testing.assert_close(table[:, 32:], sin[0, :, :32], rtol=0, atol=4e-5)
    if scaling["rope_type"] == "dynamic":
        assert torch.equal(inv, rope_inv_freq(64, theta))


def gguf_meta(**rope) -> dict:
    meta = {"general.architecture": "llama", "llama.block_count": 1, "llama.embedding_length": 256,
            "llama.feed_forward_length": 64, "llama.attention.head_count": 4, "llama.context_length": MAX_POS,
            "llama.rope.freq_base": 10000.0, "llama.vocab_size": 32}
    meta.update({f"llama.rope.scaling.{k}": v for k, v in rope.items()})
    return meta


def from_gguf(meta: dict) -> ModelConfig:
    return ModelConfig.from_gguf_metadata(meta, has_output_weight=True, has_qkv_bias=False)


@pytest.mark.parametrize("gguf_keys, hf_scaling", [
    ({"type": "linear", "factor": 4.0}, {"rope_type": "linear", "factor": 4.0}),
    ({"type": "yarn", "factor": 4.0, "original_context_length": 64},
     {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
    ({"type": "yarn", "factor": 4.0, "original_context_length": 64, "yarn_attn_factor": 1.0,
      "yarn_beta_fast": 16.0, "yarn_beta_slow": 2.0, "yarn_ext_factor": 1.0},
     {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64, "beta_fast": 16.0,
      "beta_slow": 2.0}),
    ({"type": "yarn", "original_context_length": 64},  # no factor: context length / original, as transformers
     {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
    ({"type": "none"}, None),
], ids=["linear", "yarn", "yarn-llama.cpp-keys", "yarn-no-factor", "none"])
def test_gguf_rope_scaling_matches_transformers(gguf_keys, hf_scaling):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg = from_gguf(gguf_meta(**gguf_keys))
    inv, scale = engine_rope(cfg)
    config = hf_config(10000.0, hf_scaling)
    init = LlamaRotaryEmbedding.compute_default_rope_parameters if hf_scaling is None else \
        ROPE_INIT_FUNCTIONS[hf_scaling["rope_type"]]
    ref_inv, ref_scale = init(config, device=torch.device("cpu"))
    assert torch.equal(inv, ref_inv.float())
    assert scale == pytest.approx(ref_scale, rel=1e-12)


def test_gguf_yarn_attn_factor_multiplies_mscale():
    """llama.cpp scales yarn's cos/sin by attn_factor * (1 + 0.1 ln factor)."""
    cfg = from_gguf(gguf_meta(type="yarn", factor=4.0, original_context_length=64, yarn_attn_factor=0.5))
    assert rope_attention_factor(cfg.rope_scaling) == pytest.approx(0.5 * (1 + 0.1 * math.log(4.0)))


@pytest.mark.parametrize("make, message", [
    (lambda: ModelConfig.from_hf_dict(dict(hf_config(1e4, None).to_dict(), rope_parameters=None,
                                           rope_scaling={"rope_type": "longrope", "factor": 2.0})),
     "rope scaling 'longrope' is not supported; expected one of default, linear, dynamic, llama3, yarn"),
    (lambda: ModelConfig.from_hf_dict(dict(hf_config(1e4, None).to_dict(), rope_parameters=None,
                                           rope_scaling={"type": "linear"})),
     "rope scaling 'linear' needs a positive 'factor', got None"),
    (lambda: from_gguf(gguf_meta(type="longrope", factor=2.0)),
     "GGUF rope scaling 'longrope' is not supported; expected none, linear or yarn"),
    (lambda: from_gguf(gguf_meta(type="yarn", factor=2.0, yarn_ext_factor=0.5)),
     "GGUF yarn_ext_factor 0.5 is not supported; expected 1.0"),
], ids=["hf-longrope", "hf-no-factor", "gguf-longrope", "gguf-ext-factor"])
def test_unsupported_rope_scaling_is_one_line(make, message):
    with pytest.raises(UnsupportedModelError) as err:
        make()
    assert str(err.value) == message


def test_yarn_model_greedy_matches_transformers(tmp_path):
    """A tiny random Llama with yarn scaling (attention factor 1.14) past its original 64 positions, from its
    directory (against transformers) and from a GGUF file with llama.cpp's yarn keys (against the directory)."""
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    hf_dir = str(tmp_path / "hf")
    os.mkdir(hf_dir)
    hf = make_tiny_model(hf_dir, "llama", rope=(10000.0, scaling))
    llm = LLM(hf_dir, dtype=torch.float32)
    assert llm.engine.model_config.rope_scaling == scaling
    prompts = [[1, 5, 6, 7], [1] + [3 + (7 * i) % 250 for i in range(90)]]
    params = SamplingParams(max_tokens=8, ignore_eos=True)
    outs = [o.token_ids for o in llm.generate(prompts, params)]
    assert outs == [hf_greedy(hf, prompt, 8) for prompt in prompts]

    def write_metadata(w, vocab_size):
        write_word_tokenizer(w, vocab_size)
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(64)

    gguf_path = str(tmp_path / "yarn.gguf")
    write_gguf(hf_dir, hf, gguf_path, write_metadata=write_metadata)
    from_gguf_file = LLM(gguf_path, dtype=torch.float32)
    assert from_gguf_file.engine.model_config.rope_scaling == scaling
    assert [o.token_ids for o in from_gguf_file.generate(prompts, params)] == outs
