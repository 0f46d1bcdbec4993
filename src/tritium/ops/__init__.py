"""Small Triton kernels of the decoder, each with its launcher beside it and its fp32 PyTorch reference in
:mod:`tritium.ops.reference`:

- ``rms_norm`` (+ residual add), ``rope`` and ``rope_write_kv`` (rope fused with the KV-cache write),
  ``silu_and_mul`` / ``gelu_tanh_and_mul``: the memory-bound steps of a decode layer, chained by
  programmatic dependent launch on Hopper (``pdl=False`` turns it off).
- ``greedy_advance``: a decode step's argmax turned into the next step's inputs on the device.
- ``token_logprobs``: given tokens' log-probabilities and each row's most likely one in one pass over the
  logits (prompt scoring).
- ``gemv``: skinny GEMM for decode projections (1-4 rows); ``qkv_rope_write_kv``: the QKV one with rope
  and the KV-cache write in its epilogue; ``skinny``: the same on tensor cores for 1-32 rows (plain, with
  a bias, a residual add or the SiLU-and-mul), where cuBLAS would run.
- ``prefetch_l2`` / ``WeightPrefetcher``: Hopper bulk L2 prefetch of weights.
- ``dequantize_fp8``: an fp8 weight times its row scales in one pass (weight-only FP8's prefill path;
  :mod:`tritium.ops.quant` holds the quantization and its reference).
- ``moe_route`` / ``fused_moe``: a mixture of experts' router (softmax top-k) and its routed SwiGLU experts,
  weighted and summed (per-slot GEMVs at decode, expert-sorted grouped GEMMs at prefill; 16-bit experts, or
  weight-only fp8 ones with a scale per row);
  ``fused_moe_add_norm`` with the residual add and RMSNorm after it (the slots' sum inside the norm's launch);
  ``moe_norm_route``: the residual add and RMSNorm before the experts, the router's logits and top-k in one.

:func:`op_set` bundles one backend's ops ("triton", or "torch": the references) for a model.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

from tritium.ops import reference
from tritium.ops.activation import gelu_tanh_and_mul, silu_and_mul
from tritium.ops.dequant import dequantize_fp8
from tritium.ops.gemv import gemv
from tritium.ops.logprobs import token_logprobs
from tritium.ops.moe import fused_moe, fused_moe_add_norm, moe_norm_route, moe_route
from tritium.ops.prefetch import WeightPrefetcher, prefetch_l2
from tritium.ops.qkv_rope import qkv_rope_write_kv
from tritium.ops.rms_norm import rms_norm
from tritium.ops.rope import rope, rope_write_kv
from tritium.ops.sampling import greedy_advance, greedy_scratch
from tritium.ops.skinny import skinny

__all__ = ["rms_norm", "rope", "rope_write_kv", "silu_and_mul", "gelu_tanh_and_mul", "greedy_advance", "greedy_scratch",
           "gemv", "skinny", "qkv_rope_write_kv", "token_logprobs", "dequantize_fp8", "moe_route", "fused_moe",
           "fused_moe_add_norm", "moe_norm_route", "prefetch_l2", "WeightPrefetcher", "reference", "OpSet", "op_set",
           "OP_BACKENDS"]

OP_BACKENDS = ("triton", "torch")


@dataclasses.dataclass(frozen=True)
class OpSet:
    """One backend's layer ops, with the signatures of :mod:`tritium.ops.reference` (the sampling step,
    ``greedy_advance``, is the runner's, not the model's)."""

    backend: str
    rms_norm: Callable
    rope: Callable
    rope_write_kv: Callable
    silu_and_mul: Callable
    moe_route: Callable
    fused_moe: Callable
    fused_moe_add_norm: Callable
    moe_norm_route: Callable
    gelu_tanh_and_mul: Callable


def op_set(backend: str, *, pdl: bool = True) -> OpSet:
    """The ``"triton"`` kernels (launched with programmatic dependent launch where supported, unless
    ``pdl=False``) or the ``"torch"`` references."""
    if backend == "triton":
        return OpSet("triton", functools.partial(rms_norm, pdl=pdl), functools.partial(rope, pdl=pdl),
                     functools.partial(rope_write_kv, pdl=pdl), functools.partial(silu_and_mul, pdl=pdl),
                     functools.partial(moe_route, pdl=pdl), functools.partial(fused_moe, pdl=pdl),
                     functools.partial(fused_moe_add_norm, pdl=pdl), functools.partial(moe_norm_route, pdl=pdl),
                     functools.partial(gelu_tanh_and_mul, pdl=pdl))
    if backend == "torch":
        return OpSet("torch", reference.rms_norm, reference.rope, reference.rope_write_kv, reference.silu_and_mul,
                     reference.moe_route, reference.fused_moe, reference.fused_moe_add_norm,
                     reference.moe_norm_route, reference.gelu_tanh_and_mul)
    raise ValueError(f"op_backend must be one of {', '.join(OP_BACKENDS)}, got {backend!r}")
