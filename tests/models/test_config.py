"""ModelConfig from Hugging Face config dicts: which sliding window the engine runs (Qwen2/Qwen3 windows follow
``layer_types`` or ``max_window_layers``, as transformers builds them; Mistral's covers every layer)."""

import pytest

from tritium.models.config import ModelConfig, UnsupportedModelError

BASE = dict(vocab_size=64, hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=128)


def _config(model_type, **fields):
    arch = {"qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM", "mistral": "MistralForCausalLM"}[model_type]
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
