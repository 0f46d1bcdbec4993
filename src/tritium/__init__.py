"""tritium: LLM inference written in Python and Triton.

- ``tritium.attention``: paged attention (prefill, chunked prefill, decode) and KV-cache writes.
- ``tritium.ops``: small decoder kernels (RMSNorm, rope, SiLU-and-mul, greedy sampling step, GEMV).
- ``tritium.shmem``: symmetric heap and in-kernel GPU-to-GPU communication.
- ``tritium.models``: model configuration, layers with tensor-parallel sharding, the Llama-family decoder.
- ``tritium.engine``: the inference engine (``LLMEngine``, ``LLM``, ``SamplingParams``).

Importing ``tritium`` chooses where Triton kernels run, once (:func:`tritium.runtime.select_backend`):
the GPU when there is one, else the Triton interpreter on the CPU. This is the one place that happens,
before any kernel module is imported.
"""

from tritium import runtime

runtime.select_backend()

from tritium.engine import LLM, LLMEngine, LoRARequest, RequestOutput, SamplingParams  # noqa: E402

__version__ = "0.1.0"
__all__ = ["LLM", "LLMEngine", "LoRARequest", "RequestOutput", "SamplingParams", "runtime"]
