"""One-pass dequantization of an fp8 weight: ``out = (scale[:, None] * w8)`` in a 16/32-bit dtype, reading one
byte and writing one element per weight (reference: :func:`tritium.ops.quant.dequantize`).

Prefill runs a quantized projection as this then cuBLAS (:func:`tritium.models.linear.quantized_linear`):
the torch reference takes three passes through an fp32 copy (~13 bytes moved per weight instead of 3).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.ops.gemv import check_scale

BLOCK_N, BLOCK_K = 8, 512


@triton.jit
def _dequantize_kernel(w_ptr, scale_ptr, out_ptr, N, K, stride_w, stride_out,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)                    # [BLOCK_N]
    cols = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)                    # [BLOCK_K]
    mask = (rows[:, None] < N) & (cols[None, :] < K)
    w = tl.load(w_ptr + rows.to(tl.int64)[:, None] * stride_w + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first")
    s = tl.load(scale_ptr + rows, mask=rows < N, other=0.0)
    # fp32 product rounded once to the output dtype: what the reference's (w8.float() * scale).to(dtype) gives
    out = (w.to(tl.float32) * s[:, None]).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_out + cols[None, :], out, mask=mask)


def dequantize_fp8(w8: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """``scale[:, None] * w8`` as ``dtype`` (fp16, bf16 or fp32) ``[N, K]``, bit for bit the reference's; ``out``:
    an ``[N, K]`` tensor of that dtype with a contiguous last dimension to write instead of a new one."""
    if w8.dim() != 2 or w8.stride(1) != 1:
        raise ValueError(f"w8 must be [N, K] with a contiguous last dimension, got {tuple(w8.shape)} "
                         f"strides {w8.stride()}")
    check_scale(w8, scale, w8.device)
    if dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(f"dtype must be torch.float16, torch.bfloat16 or torch.float32, got {dtype}")
    N, K = w8.shape
    if out is None:
        out = torch.empty((N, K), dtype=dtype, device=w8.device)
    elif out.shape != (N, K) or out.dtype != dtype or out.stride(1) != 1 or out.device != w8.device:
        raise ValueError(f"out must be a [{N}, {K}] {dtype} tensor on {w8.device} with a contiguous last dimension, "
                         f"got {tuple(out.shape)} {out.dtype}")
    if N and K:
        _dequantize_kernel[(triton.cdiv(N, BLOCK_N), triton.cdiv(K, BLOCK_K))](
            w8, scale, out, N, K, w8.stride(0), out.stride(0), BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, num_warps=4)
    return out
