"""Paged attention in Triton: prefill, chunked prefill and decode over a paged KV cache.

    paged_attention(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, ...)
    write_kv_cache(k, v, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None)

References in ``tritium.attention.reference``; kernel configuration in ``tritium.attention.config``.
Names load on first use, so that entry points can pick the Triton interpreter
(``tritium.runtime.select_backend``) after importing this package but before its kernels.
"""

import importlib

_EXPORTS = {
    "paged_attention": "tritium.attention.launcher",
    "AttentionWorkspace": "tritium.attention.launcher",
    "write_kv_cache": "tritium.attention.kv_cache",
    "AttentionConfig": "tritium.attention.config",
    "select_attention_config": "tritium.attention.config",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'tritium.attention' has no attribute {name!r}")


def __dir__():
    return __all__
