"""Per-token dynamic FP8 quantization of activations: ``x [M, K]`` -> ``x8`` float8_e4m3fn and one fp32 scale
per row, in one launch of one program per row (reference: :func:`tritium.ops.quant.quantize_activations`).

What ``quantization="fp8-dynamic"`` runs before each projection (:func:`tritium.models.linear.quantized_linear`):
the row's largest magnitude is found in a first pass over it, then the row is scaled and rounded in a second
(the row is a few KiB: the second pass reads it from L1/L2). Bit for bit the reference's: the two quotients
are IEEE divisions (``div_rn``), and each value is rounded to e4m3's grid in fp32 before the conversion
(:func:`_round_e4m3`), so the conversion itself is exact.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.ops.quant import FP8_DTYPE, FP8_MAX, check_row_scales
from tritium.runtime import pdl_launch

_MAX_BLOCK = 4096


@triton.jit
def _round_e4m3(v):
    """fp32 ``v`` (|v| <= 448) rounded to the nearest float8_e4m3fn value (ties to even), still in fp32.

    NOTE: Triton 3.6's interpreter converts fp32 to fp8 without the carry of a round-up into the exponent
    (1.996 -> 1.0 instead of 2.0: 37 of 2,000 random values wrong, checked against torch); rounding here
    first makes the conversion exact on every backend. Normal e4m3 values keep 3 of fp32's 23 mantissa
    bits (round the bit pattern, ties to even); below 2^-6 e4m3's step is a fixed 2^-9, which adding and
    subtracting 2^14 (whose fp32 step is 2^-9) rounds to."""
    bits = v.to(tl.int32, bitcast=True)
    lsb = (bits >> 20) & 1
    normal = ((bits + 0x7FFFF + lsb) & -0x100000).to(tl.float32, bitcast=True)
    mag = tl.abs(v)
    tiny = (mag + 16384.0) - 16384.0
    tiny = tl.where(bits < 0, -tiny, tiny)  # the sign from the bits: -0.0 stays -0.0
    return tl.where(mag < 0.015625, tiny, normal)


@triton.jit
def row_scale(amax, has_nan, FP8_MAX: tl.constexpr):
    """A row's (scale, 1 / scale) from its largest magnitude ``amax`` (fp32) and whether it holds a NaN, as
    :func:`tritium.ops.quant.quantize_activations`: ``amax / 448`` and ``448 / amax``, each an IEEE division
    (``div_rn``); 1 and 1 for an all-zero row; a NaN scale for a row with a NaN."""
    zero = amax == 0.0
    scale = tl.where(zero, 1.0, tl.math.div_rn(amax, FP8_MAX))
    inv = tl.where(zero, 1.0, tl.math.div_rn(FP8_MAX + tl.zeros_like(amax), tl.where(zero, 1.0, amax)))
    return tl.where(has_nan, float("nan"), scale), inv


@triton.jit
def quantize_values(x, inv, FP8_MAX: tl.constexpr):
    """fp32 ``x`` times its row's ``inv`` (:func:`row_scale`), clamped to +-448 and rounded to e4m3's grid
    (still fp32: convert with ``.to(float8e4nv)``, which is then exact); NaN stays NaN."""
    q = tl.minimum(tl.maximum(x * inv, -FP8_MAX), FP8_MAX)
    q = tl.where(x != x, x, q)  # min/max would drop a NaN
    return _round_e4m3(q)


@triton.jit
def _quantize_rows_kernel(x_ptr, out_ptr, scale_ptr, K, stride_x, stride_out,
                          FP8_MAX: tl.constexpr, BLOCK: tl.constexpr, USE_PDL: tl.constexpr):
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the projection after it may start fetching its weight
        tl.extra.cuda.gdc_wait()  # x comes from the kernel before
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    cols = tl.arange(0, BLOCK)
    amax = tl.zeros((BLOCK,), dtype=tl.float32)
    nan = tl.zeros((BLOCK,), dtype=tl.int32)
    for k in range(0, K, BLOCK):
        x = tl.load(x_row + k + cols, mask=k + cols < K, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
        nan |= (x != x).to(tl.int32)
    scale, inv = row_scale(tl.max(amax, axis=0), tl.max(nan, axis=0) > 0, FP8_MAX)
    tl.store(scale_ptr + row, scale)
    for k in range(0, K, BLOCK):
        mask = k + cols < K
        x = tl.load(x_row + k + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + k + cols, quantize_values(x, inv, FP8_MAX).to(out_ptr.dtype.element_ty), mask=mask)


def quantize_activations_fp8(x: torch.Tensor, out: torch.Tensor | None = None,
                             scale: torch.Tensor | None = None, *,
                             pdl: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [M, K]`` (fp16, bf16 or fp32; a contiguous last dimension) -> (``x8 [M, K]`` float8_e4m3fn, ``scale
    [M]`` fp32), each row scaled so that its largest magnitude is 448; bit for bit
    :func:`tritium.ops.quant.quantize_activations`. ``out`` / ``scale``: tensors to write instead of new ones
    (``[M, K]`` float8_e4m3fn with a contiguous last dimension; ``[M]`` contiguous fp32): no allocation then.
    ``pdl=False``: launch without programmatic dependent launch (on Hopper it releases the next kernel at once
    and waits for the one before it only before reading x)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.stride(-1) != 1:
        got = f"{tuple(x.shape)} strides {x.stride()}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a 2-D tensor [M, K] with a contiguous last dimension, got {got}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"x has dtype {x.dtype}; expected torch.float16, torch.bfloat16 or torch.float32")
    M, K = x.shape
    if out is None:
        out = torch.empty((M, K), dtype=FP8_DTYPE, device=x.device)
    elif (not isinstance(out, torch.Tensor) or out.shape != (M, K) or out.dtype != FP8_DTYPE
          or out.stride(-1) != 1 or out.device != x.device):
        raise ValueError(f"out must be a [{M}, {K}] {FP8_DTYPE} tensor on {x.device} with a contiguous last "
                         f"dimension, got {tuple(out.shape) if isinstance(out, torch.Tensor) else out}")
    if scale is None:
        scale = torch.empty(M, dtype=torch.float32, device=x.device)
    else:
        check_row_scales("scale", scale, M, x.device, "one per row of x")
    if M and K:
        block = min(triton.next_power_of_2(K), _MAX_BLOCK)
        _quantize_rows_kernel[(M,)](x, out, scale, K, x.stride(0), out.stride(0), FP8_MAX=FP8_MAX, BLOCK=block,
                                    num_warps=4 if block <= 1024 else 8, **pdl_launch(x.device, pdl))
    elif M:
        scale.fill_(1.0)
    return out, scale
