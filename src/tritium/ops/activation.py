"""SiLU-and-mul: ``silu(x[:, :I]) * x[:, I:]``. Reference: :func:`tritium.ops.reference.silu_and_mul`."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.runtime import pdl_launch

@triton.jit
def _silu_and_mul_kernel(
    # pointers
    x_ptr, out_ptr,
    # strides
    stride_x_t, stride_out_t,
    # sizes
    inter,
    # meta-parameters
    BLOCK: tl.constexpr, USE_PDL: tl.constexpr,
):
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the next GEMV may start fetching its weights now
        tl.extra.cuda.gdc_wait()  # x comes from the projection before
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    gate = tl.load(x_ptr + t * stride_x_t + cols, mask=mask, other=0.0).to(tl.float32)         # [BLOCK]
    up = tl.load(x_ptr + t * stride_x_t + inter + cols, mask=mask, other=0.0)
    dtype = up.dtype
    # fp32 arithmetic (see _rms_norm_kernel); silu rounded to the input dtype before the product, as torch
    act = (gate / (1.0 + tl.exp(-gate))).to(dtype).to(tl.float32)
    tl.store(out_ptr + t * stride_out_t + cols, (act * up.to(tl.float32)).to(dtype), mask=mask)


def silu_and_mul(x: torch.Tensor, *, pdl: bool = True) -> torch.Tensor:
    """Triton twin of :func:`tritium.ops.reference.silu_and_mul`; x: [T, 2I] -> [T, I]."""
    T, two_i = x.shape
    inter = two_i // 2
    out = torch.empty((T, inter), dtype=x.dtype, device=x.device)
    if T == 0:
        return out
    # 1024 columns a program (not tuned): 14 programs a token for Llama-3-8B (I=14336).
    block = min(1024, triton.next_power_of_2(inter))
    _silu_and_mul_kernel[(T, triton.cdiv(inter, block))](
        x, out, x.stride(0), out.stride(0), inter, BLOCK=block, num_warps=4, **pdl_launch(x.device, pdl))
    return out


