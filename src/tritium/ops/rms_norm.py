"""RMSNorm (+ residual add) in one kernel: ``y = weight * h / sqrt(mean(h^2) + eps)``, ``h = x + residual``;
with ``pre_weight``, ``x`` itself RMS-normed first (Gemma's sandwich: a sublayer's output norm, the residual
add and the next input norm in one launch, bit for bit the two launches).

Reference: :func:`tritium.ops.reference.rms_norm`. With ``quantize=True`` (W8A8, ``quantization="fp8-dynamic"``)
the normed row, rounded to x's dtype as the plain kernel stores it, is quantized per row to fp8 in the same
program (:mod:`tritium.ops.act_quant`'s arithmetic, bit for bit) instead of by a launch of its own. It pays in decode, where the op is memory bound and
torch runs six kernels for it. On Hopper it is a programmatic dependent launch: it releases the next
kernel at once (``gdc_launch_dependents``) and waits (``gdc_wait``) before reading what the kernel before
it wrote, so a GEMV after it starts reading its weights while it runs; its own weight is requested
before the wait.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.ops.act_quant import quantize_values, row_scale
from tritium.ops.quant import FP8_DTYPE, FP8_MAX, Fp8Rows
from tritium.runtime import pdl_launch

@triton.jit
def _rms_normed(xf, w, hidden, eps, dtype: tl.constexpr):
    """RMSNorm of one fp32 row ``xf`` (0 past ``hidden``) with weight ``w``, rounded where torch rounds it (the
    normed value to ``dtype``, then its product with the weight), in fp32: the caller rounds it where it stores."""
    rstd = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / hidden + eps)
    return (xf * rstd).to(dtype).to(tl.float32) * w.to(tl.float32)


@triton.jit
def _rounded(v, zero):
    """fp32 ``v`` as it is, through an integer xor with ``zero`` (a run-time 0 the compiler cannot see through).
    NOTE: with fp fusion on (Triton's default), LLVM narrows ``round(a * w) + r`` to 16-bit arithmetic and then
    contracts the product into the add: one ``fma.rn.f16`` (``fma.rn.f32`` in fp32) that skips the product's
    rounding, so the pre-norm's rows differed by an ulp from a launch of their own (sm_90 PTX; found by the GPU
    run of tests/ops/test_ops.py, stop 83). Past the xor the product cannot be fused with the add."""
    return (v.to(tl.int32, bitcast=True) ^ zero).to(tl.float32, bitcast=True)


@triton.jit(do_not_specialize=["zero"])
def _rms_norm_kernel(
    # pointers
    x_ptr, residual_ptr, weight_ptr, out_ptr, scale_ptr, pre_weight_ptr,
    # strides
    stride_x_t, stride_residual_t, stride_out_t,
    # sizes
    hidden, eps, zero,
    # meta-parameters
    HAS_RESIDUAL: tl.constexpr, QUANT: tl.constexpr, FP8_MAX: tl.constexpr, BLOCK: tl.constexpr,
    USE_PDL: tl.constexpr, SUM_ROWS: tl.constexpr = 0, PRE_NORM: tl.constexpr = False,
):
    """Grid (T,): row t normed. SUM_ROWS > 0: x is fp32 ``[T * SUM_ROWS, H]`` and row t's x is the sum of its rows
    ``t * SUM_ROWS + j`` in order of j, rounded to the residual's dtype (a mixture of experts' slots). PRE_NORM:
    x is RMS-normed with ``pre_weight`` first and rounded to its dtype, as a launch of its own would store it
    (``zero``: 0, see ``_rounded``)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    # The norm's weight is never written by a kernel: requested before the wait, its latency (a DRAM miss
    # in decode, where the weight stream evicts it from L2) overlaps the kernel before instead of following
    # this row's reduction.
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the next GEMV may start fetching its weights now
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0)
    if PRE_NORM:
        w_pre = tl.load(pre_weight_ptr + cols, mask=mask, other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x and residual come from the kernels before
    # NOTE: all arithmetic in fp32 with explicit roundings to the input dtype where torch rounds: the
    # interpreter computes bf16 elementwise products wrongly (values ~1e33); fp32 is exact in both.
    if SUM_ROWS:
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for j in tl.static_range(SUM_ROWS):
            acc += tl.load(x_ptr + (row * SUM_ROWS + j) * stride_x_t + cols, mask=mask, other=0.0)
        x = acc.to(residual_ptr.dtype.element_ty)                                      # [BLOCK]
    else:
        x = tl.load(x_ptr + row * stride_x_t + cols, mask=mask, other=0.0)             # [BLOCK]
    dtype = x.dtype
    xf = x.to(tl.float32)
    if PRE_NORM:
        xf = _rounded(_rms_normed(xf, w_pre, hidden, eps, dtype).to(dtype).to(tl.float32), zero)
    if HAS_RESIDUAL:
        r = tl.load(residual_ptr + row * stride_residual_t + cols, mask=mask, other=0.0)
        x = (xf + r.to(tl.float32)).to(dtype)
        tl.store(residual_ptr + row * stride_residual_t + cols, x, mask=mask)
        xf = x.to(tl.float32)
    y = _rms_normed(xf, w, hidden, eps, dtype)
    if QUANT:  # the row as the plain kernel stores it (x's dtype), quantized per row: out is fp8
        y = y.to(dtype).to(tl.float32)
        amax = tl.max(tl.abs(y), axis=0)  # masked columns are 0
        scale, inv = row_scale(amax, tl.max((y != y).to(tl.int32), axis=0) > 0, FP8_MAX)
        tl.store(scale_ptr + row, scale)
        y = quantize_values(y, inv, FP8_MAX)
    tl.store(out_ptr + row * stride_out_t + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None, *,
             pdl: bool = True, quantize: bool = False, pre_weight: torch.Tensor | None = None
             ) -> tuple[torch.Tensor | Fp8Rows, torch.Tensor | None]:
    """Triton twin of :func:`tritium.ops.reference.rms_norm`. x, residual: [T, H]; weight: [H].

    With ``residual``, ``h = x + residual`` is written into ``residual`` (in place) and returned. With
    ``pre_weight`` [H], x is replaced by ``rms_norm(x, pre_weight, eps)`` first (Gemma's output norms).
    ``pdl=False``: launch without programmatic dependent launch (after a cross-stream join).
    ``quantize``: the normed rows come back quantized per row to fp8, as :class:`~tritium.ops.quant.Fp8Rows`.
    """
    T, H = x.shape
    out = torch.empty((T, H), dtype=FP8_DTYPE, device=x.device) if quantize else torch.empty_like(x)
    scale = torch.empty(T, dtype=torch.float32, device=x.device) if quantize else out
    if T:
        _rms_norm_kernel[(T,)](
            x, residual if residual is not None else x, weight, out, scale,
            pre_weight if pre_weight is not None else weight,
            x.stride(0), residual.stride(0) if residual is not None else 0, out.stride(0),
            H, eps, 0,
            HAS_RESIDUAL=residual is not None, QUANT=quantize, FP8_MAX=FP8_MAX, BLOCK=triton.next_power_of_2(H),
            num_warps=4 if H <= 4096 else 8, PRE_NORM=pre_weight is not None, **pdl_launch(x.device, pdl),
        )
    return (Fp8Rows(out, scale, x.dtype) if quantize else out), residual


def sum_rms_norm(parts: torch.Tensor, k: int, weight: torch.Tensor, eps: float, residual: torch.Tensor, *,
                 pdl: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`rms_norm` of ``x + residual`` where row t of x is the sum of the k fp32 rows ``parts[t * k + j]`` (in
    order of j, rounded once to residual's dtype): a mixture of experts' slots summed, added and normed in one
    launch. parts ``[T * k, H]`` fp32; residual ``[T, H]`` (updated in place, returned); weight ``[H]``."""
    T, H = residual.shape
    if parts.dtype != torch.float32 or tuple(parts.shape) != (T * k, H) or parts.stride(1) != 1:
        raise ValueError(f"parts must be a [{T * k}, {H}] float32 tensor (k = {k} rows a row of residual) with a "
                         f"contiguous last dimension, got {list(parts.shape)} {parts.dtype}")
    out = torch.empty_like(residual)
    if T:
        _rms_norm_kernel[(T,)](
            parts, residual, weight, out, out, weight, parts.stride(0), residual.stride(0), out.stride(0), H, eps, 0,
            HAS_RESIDUAL=True, QUANT=False, FP8_MAX=FP8_MAX, BLOCK=triton.next_power_of_2(H),
            num_warps=4 if H <= 4096 else 8, SUM_ROWS=k, **pdl_launch(residual.device, pdl))
    return out, residual
