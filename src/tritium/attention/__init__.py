"""Paged attention in Triton: prefill, chunked prefill and decode over a paged KV cache.

    paged_attention(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, ...)
    write_kv_cache(k, v, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None)

References in ``tritium.attention.reference``; kernel configuration in ``tritium.attention.config``.
"""

from tritium.attention.config import AttentionConfig, select_attention_config
from tritium.attention.kv_cache import write_kv_cache
from tritium.attention.launcher import AttentionWorkspace, check_kv_cache, paged_attention

__all__ = ["paged_attention", "AttentionWorkspace", "write_kv_cache", "AttentionConfig", "select_attention_config",
           "check_kv_cache"]
