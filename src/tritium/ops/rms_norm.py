"""RMSNorm (+ residual add) in one kernel: ``y = weight * h / sqrt(mean(h^2) + eps)``, ``h = x + residual``.

Reference: :func:`tritium.ops.reference.rms_norm`. It pays in decode, where the op is memory bound and
torch runs six kernels for it. On Hopper it is a programmatic dependent launch: it releases the next
kernel at once (``gdc_launch_dependents``) and waits (``gdc_wait``) before reading what the kernel before
it wrote, so a GEMV after it starts reading its weights while it runs; its own weight is requested
before the wait.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.runtime import pdl_launch

@triton.jit
def _rms_norm_kernel(
    # pointers
    x_ptr, residual_ptr, weight_ptr, out_ptr,
    # strides
    stride_x_t, stride_residual_t, stride_out_t,
    # sizes
    hidden, eps,
    # meta-parameters
    HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr, USE_PDL: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    # The norm's weight is never written by a kernel: requested before the wait, its latency (a DRAM miss
    # in decode, where the weight stream evicts it from L2) overlaps the kernel before instead of following
    # this row's reduction.
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the next GEMV may start fetching its weights now
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x and residual come from the kernels before
    # NOTE: all arithmetic in fp32 with explicit roundings to the input dtype where torch rounds: the
    # interpreter computes bf16 elementwise products wrongly (values ~1e33); fp32 is exact in both.
    x = tl.load(x_ptr + row * stride_x_t + cols, mask=mask, other=0.0)                 # [BLOCK]
    dtype = x.dtype
    xf = x.to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(residual_ptr + row * stride_residual_t + cols, mask=mask, other=0.0)
        x = (xf + r.to(tl.float32)).to(dtype)
        tl.store(residual_ptr + row * stride_residual_t + cols, x, mask=mask)
        xf = x.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / hidden + eps)
    y = (xf * rstd).to(dtype).to(tl.float32) * w.to(tl.float32)
    tl.store(out_ptr + row * stride_out_t + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None, *, pdl: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Triton twin of :func:`tritium.ops.reference.rms_norm`. x, residual: [T, H]; weight: [H].

    With ``residual``, ``h = x + residual`` is written into ``residual`` (in place) and returned.
    ``pdl=False``: launch without programmatic dependent launch (after a cross-stream join).
    """
    T, H = x.shape
    out = torch.empty_like(x)
    if T == 0:
        return out, residual
    _rms_norm_kernel[(T,)](
        x, residual if residual is not None else x, weight, out,
        x.stride(0), residual.stride(0) if residual is not None else 0, out.stride(0),
        H, eps,
        HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(H), num_warps=4 if H <= 4096 else 8,
        **pdl_launch(x.device, pdl),
    )
    return out, residual

