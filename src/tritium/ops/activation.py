"""SiLU-and-mul: ``silu(x[:, :I]) * x[:, I:]`` (SwiGLU), and GELU-and-mul with tanh's GELU (GeGLU, Gemma's
``gelu_pytorch_tanh``): the same kernels, the activation a constexpr. References:
:func:`tritium.ops.reference.silu_and_mul`, :func:`tritium.ops.reference.gelu_tanh_and_mul`.

With ``quantize=True`` (W8A8, ``quantization="fp8-dynamic"``: the down projection's input) the result, rounded
to x's dtype as the plain kernel stores it, is quantized per row to fp8 by the same launch
(:mod:`tritium.ops.act_quant`'s arithmetic, bit for bit): one program a row then, which needs the whole row's
largest magnitude before it can scale any of it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.ops.act_quant import quantize_values, row_scale
from tritium.ops.quant import FP8_DTYPE, FP8_MAX, Fp8Rows
from tritium.runtime import pdl_launch

# the largest row (columns of the output) the fp8 kernel keeps in registers between its two passes
_ONE_PASS_MAX = 16384


_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)


@triton.jit
def _act_mul(x_row, cols, mask, inter, ACT: tl.constexpr = "silu"):
    """``act(gate) * up`` of one row's columns ``cols`` (x's dtype; 0 where masked); ``ACT`` "silu" or
    "gelu_tanh": ``0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))``, as ``g * sigmoid(2 u)`` (the same
    function: ``(1 + tanh(u)) / 2 = sigmoid(2u)``)."""
    gate = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_row + inter + cols, mask=mask, other=0.0)
    dtype = up.dtype
    # fp32 arithmetic (see _rms_norm_kernel); the activation rounded to the input dtype before the product,
    # as torch
    if ACT == "gelu_tanh":
        u = _SQRT_2_OVER_PI * (gate + 0.044715 * gate * gate * gate)
        # the exponent capped: past 80 the product is 0 in any dtype, and exp stays finite
        act = (gate / (1.0 + tl.exp(tl.minimum(-2.0 * u, 80.0)))).to(dtype).to(tl.float32)
    else:
        act = (gate / (1.0 + tl.exp(-gate))).to(dtype).to(tl.float32)
    return (act * up.to(tl.float32)).to(dtype)


@triton.jit
def _silu_and_mul_kernel(
    # pointers
    x_ptr, out_ptr,
    # strides
    stride_x_t, stride_out_t,
    # sizes
    inter,
    # meta-parameters
    BLOCK: tl.constexpr, USE_PDL: tl.constexpr, ACT: tl.constexpr = "silu",
):
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the next GEMV may start fetching its weights now
        tl.extra.cuda.gdc_wait()  # x comes from the projection before
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    y = _act_mul(x_ptr + t * stride_x_t, cols, mask, inter, ACT)
    tl.store(out_ptr + t * stride_out_t + cols, y, mask=mask)


@triton.jit
def _silu_and_mul_fp8_kernel(
    x_ptr, out_ptr, scale_ptr, stride_x_t, stride_out_t, inter,
    FP8_MAX: tl.constexpr, BLOCK: tl.constexpr, USE_PDL: tl.constexpr, ACT: tl.constexpr = "silu",
):
    """One program a row: the row's activation-and-mul and its largest magnitude in a first pass, then the row
    scaled and rounded to fp8 (from registers where one block holds the row, else computed again)."""
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the down projection may start fetching its weight now
        tl.extra.cuda.gdc_wait()  # x comes from the projection before
    t = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + t * stride_x_t
    out_row = out_ptr + t * stride_out_t
    cols = tl.arange(0, BLOCK)
    amax = tl.zeros((BLOCK,), dtype=tl.float32)
    nan = tl.zeros((BLOCK,), dtype=tl.int32)
    y = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(0, inter, BLOCK):
        y = _act_mul(x_row, k + cols, k + cols < inter, inter, ACT).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(y))
        nan |= (y != y).to(tl.int32)
    scale, inv = row_scale(tl.max(amax, axis=0), tl.max(nan, axis=0) > 0, FP8_MAX)
    tl.store(scale_ptr + t, scale)
    if BLOCK >= inter:
        tl.store(out_row + cols, quantize_values(y, inv, FP8_MAX).to(out_ptr.dtype.element_ty), mask=cols < inter)
    else:
        for k in range(0, inter, BLOCK):
            mask = k + cols < inter
            y = _act_mul(x_row, k + cols, mask, inter, ACT).to(tl.float32)
            tl.store(out_row + k + cols, quantize_values(y, inv, FP8_MAX).to(out_ptr.dtype.element_ty), mask=mask)


def silu_and_mul(x: torch.Tensor, *, pdl: bool = True, quantize: bool = False) -> torch.Tensor | Fp8Rows:
    """Triton twin of :func:`tritium.ops.reference.silu_and_mul`; x: [T, 2I] -> [T, I] (``quantize``: as
    :class:`~tritium.ops.quant.Fp8Rows`, each row quantized to fp8)."""
    return _act_and_mul(x, "silu", pdl, quantize)


def gelu_tanh_and_mul(x: torch.Tensor, *, pdl: bool = True, quantize: bool = False) -> torch.Tensor | Fp8Rows:
    """Triton twin of :func:`tritium.ops.reference.gelu_tanh_and_mul` (Gemma's GeGLU); as :func:`silu_and_mul`."""
    return _act_and_mul(x, "gelu_tanh", pdl, quantize)


def _act_and_mul(x: torch.Tensor, act: str, pdl: bool, quantize: bool) -> torch.Tensor | Fp8Rows:
    if x.dim() != 2 or x.shape[1] % 2:
        raise ValueError(f"x must be [T, 2I] (gate then up), got shape {tuple(x.shape)}")
    T, two_i = x.shape
    inter = two_i // 2
    if quantize:
        out = torch.empty((T, inter), dtype=FP8_DTYPE, device=x.device)
        scale = torch.empty(T, dtype=torch.float32, device=x.device)
        if T:
            p2 = triton.next_power_of_2(inter)
            block = p2 if p2 <= _ONE_PASS_MAX else 4096
            _silu_and_mul_fp8_kernel[(T,)](x, out, scale, x.stride(0), out.stride(0), inter, FP8_MAX=FP8_MAX,
                                           BLOCK=block, num_warps=min(16, max(4, block // 1024)), ACT=act,
                                           **pdl_launch(x.device, pdl))
        return Fp8Rows(out, scale, x.dtype)
    out = torch.empty((T, inter), dtype=x.dtype, device=x.device)
    if T == 0:
        return out
    # 1024 columns a program (not tuned): 14 programs a token for Llama-3-8B (I=14336).
    block = min(1024, triton.next_power_of_2(inter))
    _silu_and_mul_kernel[(T, triton.cdiv(inter, block))](
        x, out, x.stride(0), out.stride(0), inter, BLOCK=block, num_warps=4, ACT=act, **pdl_launch(x.device, pdl))
    return out
