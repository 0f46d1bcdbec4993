"""tritium: LLM inference written in Python and Triton.

Subpackages load on first use, so ``import tritium`` stays cheap and has no side effects:

- ``tritium.attention``: paged attention (prefill, chunked prefill, decode) and KV-cache writes.
- ``tritium.shmem``: symmetric heap and in-kernel GPU-to-GPU communication.
- ``tritium.engine``: the inference engine (``tritium.LLM``, ``tritium.SamplingParams``).
"""

import importlib

__version__ = "0.1.0"

_LAZY = {
    "LLM": "tritium.engine",
    "SamplingParams": "tritium.engine",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritium' has no attribute {name!r}")
