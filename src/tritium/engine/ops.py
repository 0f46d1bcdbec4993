"""Fused small Triton kernels of the decoder: RMSNorm (+ residual add), rope, SiLU-and-mul.

Each launcher matches the function of the same name in :mod:`tritium.engine.reference`. They pay in
decode, where every op is memory bound and torch would run several kernels per op (RMSNorm is 6 torch
kernels, rope ~10, SiLU-and-mul 2 plus the slices).

On Hopper every kernel of the decode chain is a programmatic dependent launch: it releases the next
kernel at once (``gdc_launch_dependents``) and waits (``gdc_wait``) before reading what the kernel before
it wrote, so launches overlap and a Triton GEMV after RMSNorm starts reading its weights while it runs.
``advance_decode`` turns a decode step's tokens into the next step's inputs on the device.
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
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the next GEMV may start fetching its weights now
        tl.extra.cuda.gdc_wait()  # x and residual come from the kernels before
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
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
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0)
    y = (xf * rstd).to(dtype).to(tl.float32) * w.to(tl.float32)
    tl.store(out_ptr + row * stride_out_t + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None, *, pdl: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Triton twin of :func:`tritium.engine.reference.rms_norm`. x, residual: [T, H]; weight: [H].

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


@triton.jit
def _rope_kernel(
    # pointers
    q_ptr, k_ptr, positions_ptr, cos_sin_ptr,
    # strides
    stride_q_t, stride_q_h, stride_k_t, stride_k_h, stride_cs_p,
    # sizes
    num_q_heads, num_kv_heads,
    # meta-parameters
    HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, USE_PDL: tl.constexpr,
):
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # q and k come from the projection before
    t = tl.program_id(0).to(tl.int64)
    pos = tl.load(positions_ptr + t).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    dmask = d < HALF
    cos = tl.load(cos_sin_ptr + pos * stride_cs_p + d, mask=dmask, other=0.0)[None, :]          # [1, BLOCK_D]
    sin = tl.load(cos_sin_ptr + pos * stride_cs_p + HALF + d, mask=dmask, other=0.0)[None, :]   # [1, BLOCK_D]
    h = tl.arange(0, BLOCK_H)
    # q heads
    qmask = (h[:, None] < num_q_heads) & dmask[None, :]
    q1_ptrs = q_ptr + t * stride_q_t + h[:, None] * stride_q_h + d[None, :]                   # [BLOCK_H, BLOCK_D]
    # fp32 arithmetic (see _rms_norm_kernel), cos/sin rounded to q's dtype as torch does
    q1 = tl.load(q1_ptrs, mask=qmask, other=0.0)
    dtype = q1.dtype
    q1 = q1.to(tl.float32)
    q2 = tl.load(q1_ptrs + HALF, mask=qmask, other=0.0).to(tl.float32)
    cq = cos.to(dtype).to(tl.float32)
    sq = sin.to(dtype).to(tl.float32)
    tl.store(q1_ptrs, (q1 * cq - q2 * sq).to(dtype), mask=qmask)
    tl.store(q1_ptrs + HALF, (q2 * cq + q1 * sq).to(dtype), mask=qmask)
    # k heads
    kmask = (h[:, None] < num_kv_heads) & dmask[None, :]
    k1_ptrs = k_ptr + t * stride_k_t + h[:, None] * stride_k_h + d[None, :]
    k1 = tl.load(k1_ptrs, mask=kmask, other=0.0).to(tl.float32)
    k2 = tl.load(k1_ptrs + HALF, mask=kmask, other=0.0).to(tl.float32)
    tl.store(k1_ptrs, (k1 * cq - k2 * sq).to(dtype), mask=kmask)
    tl.store(k1_ptrs + HALF, (k2 * cq + k1 * sq).to(dtype), mask=kmask)


def rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor) -> None:
    """Triton twin of :func:`tritium.engine.reference.rope` (in place).

    q: [T, Hq, D], k: [T, Hkv, D] (last dim contiguous; may be views of one QKV buffer), positions: [T],
    cos_sin: [P, D] fp32 (cos in the first half, sin in the second).
    """
    T, Hq, D = q.shape
    if T == 0:
        return
    _rope_kernel[(T,)](
        q, k, positions, cos_sin,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos_sin.stride(0),
        Hq, k.shape[1],
        HALF=D // 2, BLOCK_H=triton.next_power_of_2(Hq), BLOCK_D=triton.next_power_of_2(D // 2), num_warps=4,
        **pdl_launch(q.device),
    )


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


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """Triton twin of :func:`tritium.engine.reference.silu_and_mul`; x: [T, 2I] -> [T, I]."""
    T, two_i = x.shape
    inter = two_i // 2
    out = torch.empty((T, inter), dtype=x.dtype, device=x.device)
    if T == 0:
        return out
    # 1024 columns a program (not tuned): 14 programs a token for Llama-3-8B (I=14336).
    block = min(1024, triton.next_power_of_2(inter))
    _silu_and_mul_kernel[(T, triton.cdiv(inter, block))](
        x, out, x.stride(0), out.stride(0), inter, BLOCK=block, num_warps=4, **pdl_launch(x.device))
    return out


@triton.jit
def _advance_decode_kernel(
    # pointers
    tok_ptr, hist_ptr, ids_ptr, pos_ptr, seq_lens_ptr, slots_ptr, block_table_ptr,
    # strides and sizes
    stride_bt, block_size,
):
    i = tl.program_id(0)
    tok = tl.load(tok_ptr + i)
    tl.store(hist_ptr + i, tok)
    tl.store(ids_ptr + i, tok)
    pos = tl.load(pos_ptr + i) + 1
    tl.store(pos_ptr + i, pos)
    tl.store(seq_lens_ptr + i, tl.load(seq_lens_ptr + i) + 1)
    page = tl.load(block_table_ptr + i * stride_bt + pos // block_size).to(tl.int64)
    tl.store(slots_ptr + i, page * block_size + pos % block_size)


def advance_decode(tok: torch.Tensor, hist: torch.Tensor, ids: torch.Tensor, pos: torch.Tensor,
                   seq_lens: torch.Tensor, slots: torch.Tensor, block_table: torch.Tensor, block_size: int) -> None:
    """Triton twin of :func:`tritium.engine.reference.advance_decode`: one launch, one program per row.

    tok, hist, ids, pos, slots: int64 [>= n]; seq_lens: int32; block_table: int32 [rows, max_blocks] with a
    contiguous last dimension. The caller guarantees every new position has its page in ``block_table``.
    """
    n = tok.shape[0]
    if n == 0:
        return
    _advance_decode_kernel[(n,)](tok, hist, ids, pos, seq_lens, slots, block_table, block_table.stride(0), block_size,
                                 num_warps=1)
