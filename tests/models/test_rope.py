"""Rope tables against transformers' own initialisation."""

import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from tritium.models.rope import rope_inv_freq


def test_llama3_inv_freq_matches_transformers():
    scaling = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    cfg = LlamaConfig(hidden_size=4096, num_attention_heads=32, rope_parameters=scaling)
    expected, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
    assert torch.equal(rope_inv_freq(128, 500000.0, scaling), expected)
