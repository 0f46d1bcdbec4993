"""Skinny GEMM for decode: ``y = x @ W^T (+ b)`` with few rows in x (M <= ``MAX_M``), in Triton.

At batch 1 a decode step is a stream of weight reads: every projection reads its whole ``[N, K]`` weight
to produce one row. The kernel gives each program ``BLOCK_N`` weight rows and walks K in ``BLOCK_K``
chunks with wide unmasked loads (``EVEN_*``), the next chunk requested before the current one is used,
fp32 products and one reduction at the end, so the loop is nothing but loads and FMAs. Two kernels do
this: one keeps a 3-D ``[M, BLOCK_N, BLOCK_K]`` accumulator, which the compiler feeds by converting each
weight chunk's layout through shared memory; the ``flat`` one (``GemvConfig.flat``) keeps a 2-D
accumulator per row of x in the chunk's own layout (sm_90: no conversion in its loop, 48 instead of 64
registers at 4x512 and M = 1). The tuning times both kinds. On Hopper it is
launched as a programmatic dependent launch: the first weight chunk is on its way while the previous
kernel finishes. No tensor cores: at M <= 4 there is nothing for them to do.

Whether this beats cuBLAS depends on the GPU and the shape (small weights are launch- and tail-bound,
large ones bandwidth-bound), so :class:`tritium.models.linear.LinearDispatch` times both on the real
weights once, at engine start, and keeps the faster per (M, N, K). The reference is :func:`tritium.ops.reference.linear`.

Two fusions remove a decode layer's RMSNorm kernels (references :func:`~tritium.ops.reference.rms_norm_linear`
and :func:`~tritium.ops.reference.linear_residual`):

- ``eps`` (and ``norm_weight``): x is the residual stream h and the product is ``rms_norm(h) @ W^T``. Every
  program loads all of h anyway, so it sums h^2 on the way, multiplies each chunk by the norm weight and
  scales its dot products by ``rsqrt(mean(h^2) + eps)`` at the end (fp32 throughout: the normed row is
  never rounded). Without ``norm_weight`` the norm's weight is taken to be folded into W's columns
  already (``W[:, k] * norm_weight[k]``), which saves every program the norm weight's loads.
- ``residual``: ``residual += x @ W^T`` in place (the product rounded first, as the unfused add rounds it).

Two more remove the MLP's SiLU-and-mul kernel (reference :func:`~tritium.ops.reference.silu_and_mul`):
``gated`` does it on the down projection's input while loading it, ``swiglu`` in the gate/up projection's
epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tritium.ops.quant import QUANTIZED_DTYPES, check_row_scales
from tritium.runtime import pdl_launch, pdl_supported, pipeline_stages

MAX_M = 4


@dataclass(frozen=True)
class GemvConfig:
    """``flat``: the kernel that keeps one 2-D accumulator per row of x (:func:`_gemv_flat_kernel`) instead
    of one 3-D accumulator for all of them."""
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int = 1
    flat: bool = False

    def __str__(self) -> str:
        return f"n{self.block_n}-k{self.block_k}-w{self.num_warps}-st{self.num_stages}" + ("-flat" if self.flat else "")


# Candidates timed by LinearDispatch.tune (each one compile per dtype; shapes are runtime arguments).
CONFIGS = (
    GemvConfig(4, 1024, 4), GemvConfig(8, 512, 4), GemvConfig(8, 1024, 8), GemvConfig(16, 256, 4),
    GemvConfig(16, 512, 8), GemvConfig(32, 256, 8), GemvConfig(8, 512, 4, 3), GemvConfig(16, 256, 4, 3),
    # whole rows in one load (K <= 4096): every byte of a program in flight at once, tried for the small
    # latency-bound projections; on the H100 they tie the others there and still trail cuBLAS (NOTES.md)
    GemvConfig(2, 4096, 4), GemvConfig(4, 4096, 8), GemvConfig(4, 2048, 4),
    # the H200's best on Llama-3-8B's projections in a wider grid (bench/probe_gemv_configs.py): 4 rows of
    # 512 and 2 rows of 1024, 1-2 us a call ahead of the configurations above on gate_up, down and qkv
    GemvConfig(4, 512, 4), GemvConfig(4, 512, 4, 3), GemvConfig(2, 1024, 4, 3),
    # the flat kernel (one accumulator a row of x, no layout conversion in its loop): the best shapes above,
    # and smaller chunks for 2-4 rows (sm_90, 4 rows: 72 registers a thread at 2x512 and 4x256, against
    # 124-255 for the chunks above in either kernel)
    GemvConfig(4, 512, 4, flat=True), GemvConfig(4, 1024, 4, flat=True), GemvConfig(2, 1024, 4, 3, flat=True),
    GemvConfig(2, 512, 4, flat=True), GemvConfig(4, 256, 4, flat=True), GemvConfig(8, 256, 4, flat=True),
    # whole rows of 4096 in one flat load, 1-2 rows a program (32-64 weight elements a thread in flight): the
    # H100's best on o, gate_up and down in a wider flat grid (bench/probe_gemv_configs.py, M = 1), 0.5-1.0
    # us a call ahead of the shipped ones; the 2-row one also pairs rope / SiLU-and-mul rows
    GemvConfig(1, 4096, 4, flat=True), GemvConfig(2, 4096, 4, flat=True),
)
DEFAULT_CONFIG = GemvConfig(8, 512, 4)


def widest(configs):
    """Of GEMV configs (this module's or int4's), the one with the most weight rows a program, then the shortest
    chunk. Under the Triton interpreter a program costs its operations' Python overhead, whatever its width:
    the widest candidate makes a small model's projections 4x fewer programs, and a GPU may run it too, so the
    launches the tests record compile as they would there."""
    return min(configs, key=lambda c: (-c.block_n, c.block_k))


INTERPRETER_CONFIG = widest(CONFIGS)  # 32 x 256, 8 warps


@triton.jit
def _silu_mul(gate, up):
    """``silu(gate) * up`` in up's dtype, rounded where :func:`tritium.ops.reference.silu_and_mul` rounds."""
    g = gate.to(tl.float32)
    act = (g / (1.0 + tl.exp(-g))).to(up.dtype).to(tl.float32)
    return (act * up.to(tl.float32)).to(up.dtype)


@triton.jit
def _pairs_side_by_side(first, span, BLOCK_N: tl.constexpr):
    """``[BLOCK_N]`` weight rows as BLOCK_N / 2 pairs (row first + j, row first + span + j) side by side, so
    that an epilogue splits a pair's products apart after one reshape to ``[BLOCK_N / 2, 2]``."""
    i = tl.arange(0, BLOCK_N)
    return first + i // 2 + (i % 2) * span


@triton.jit
def _rows(N, BLOCK_N: tl.constexpr, SWIGLU: tl.constexpr):
    """The weight rows of this program. SWIGLU (W = [gate; up], N = 2I): output columns j of the program's
    BLOCK_N / 2, each as the pair (gate row j, up row I + j) side by side. Past the end, the up rows are
    >= N (masked) and the gate rows read the up half (in bounds, their products never stored)."""
    if SWIGLU:
        rows = _pairs_side_by_side(tl.program_id(0) * (BLOCK_N // 2), N // 2, BLOCK_N)
    else:
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    return rows


@triton.jit
def _w_chunk(w_ptrs, rows, ks, k0, N, K, EVEN: tl.constexpr, FIRST: tl.constexpr):
    """The weight chunk at column ``k0`` (``w_ptrs`` point at it), streamed past L2 (``evict_first``):
    zeros past N and K, and all zeros where ``k0 >= K`` (the request after the last chunk)."""
    if EVEN and FIRST:
        w = tl.load(w_ptrs, eviction_policy="evict_first")
    elif EVEN:
        w = tl.load(w_ptrs, mask=k0 < K, other=0.0, eviction_policy="evict_first")
    else:
        w = tl.load(w_ptrs, mask=(k0 < K) & (rows[:, None] < N) & (k0 + ks[None, :] < K), other=0.0,
                    eviction_policy="evict_first")
    return w


@triton.jit
def _addend(add_ptr, stride_add_m, ms, rows, M, N):
    """``[BLOCK_M, BLOCK_N]`` of a per-row addend (rows ``ms`` of x, output columns ``rows``) in fp32, 0 outside
    ``[M, N]``."""
    return tl.load(add_ptr + ms.to(tl.int64)[:, None] * stride_add_m + rows[None, :],
                   mask=(ms[:, None] < M) & (rows[None, :] < N), other=0.0).to(tl.float32)


@triton.jit
def _gemv_kernel(
    # pointers
    x_ptr, w_ptr, bias_ptr, out_ptr, norm_w_ptr, scale_ptr, x_scale_ptr, add_ptr,
    # strides
    stride_x_m, stride_w_n, stride_out_m, stride_add_m,
    # sizes
    M, N, K, eps,
    # meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_N: tl.constexpr, EVEN_K: tl.constexpr, USE_PDL: tl.constexpr,
    GATED: tl.constexpr = False, NORM: tl.constexpr = False, RESIDUAL: tl.constexpr = False,
    NORM_WEIGHT: tl.constexpr = False, SWIGLU: tl.constexpr = False, SCALED: tl.constexpr = False,
    X_SCALED: tl.constexpr = False, ADDEND: tl.constexpr = False,
):
    """out = x @ W^T (+ bias). SCALED: W is stored quantized (fp8) with one fp32 scale per row, applied to
    the row's dot product (W = scale[:, None] * stored). X_SCALED: x is quantized too (fp8, one fp32 scale
    per row of x, applied with the weight's: W8A8). SWIGLU: W is [gate; up] (N = 2I rows) and out
    [M, I] = silu(gate) * up of the product (:func:`_rows` pairs each gate row with its up row inside a
    program). NORM: x is normalised on
    the fly (RMSNorm over the K columns; its weight norm_w with NORM_WEIGHT, else folded into W). RESIDUAL:
    out += the product (out holds the residual on entry; each program reads and writes only its own
    columns). ADDEND: a per-row term ``[M, N]`` (written by an earlier kernel: a LoRA update) added to the
    product with the bias, before the rounding and the epilogue."""
    rows = _rows(N, BLOCK_N, SWIGLU)                                               # [BLOCK_N]
    ms = tl.arange(0, BLOCK_M)                                                     # [BLOCK_M]
    ks = tl.arange(0, BLOCK_K)                                                     # [BLOCK_K]
    w_ptrs = w_ptr + rows.to(tl.int64)[:, None] * stride_w_n + ks[None, :]        # [BLOCK_N, BLOCK_K]
    x_ptrs = x_ptr + ms[:, None] * stride_x_m + ks[None, :]                       # [BLOCK_M, BLOCK_K]
    # The weights never depend on earlier kernels: the first chunk is requested before waiting for the
    # previous kernel (programmatic dependent launch), so its tail overlaps this kernel's first loads.
    w = _w_chunk(w_ptrs, rows, ks, 0, N, K, EVEN_N and EVEN_K, True)
    if SCALED:  # never written by earlier kernels: loaded before the wait
        w_scale = tl.load(scale_ptr + rows, mask=rows < N, other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x (and out) belong to the previous kernels from here on
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may launch and wait for this one
    out_ptrs = out_ptr + ms[:, None] * stride_out_m + rows[None, :]
    out_mask = (ms[:, None] < M) & (rows[None, :] < N)
    if RESIDUAL:  # requested now, used in the epilogue: its latency hides behind the weight stream
        res = tl.load(out_ptrs, mask=out_mask, other=0.0)
    # NOTE: products in fp32 (the interpreter's bf16 elementwise products are wrong; on the GPU the
    # conversion is free next to the load). One [BLOCK_N, BLOCK_K] accumulator per row of x, reduced once.
    acc = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_K), dtype=tl.float32)
    if NORM:
        sumsq = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x_mask = (ms[:, None] < M) & (k0 + ks[None, :] < K)
        x = tl.load(x_ptrs, mask=x_mask, other=0.0)
        if GATED:  # x is [gate | up] (2K wide): SiLU-and-mul on the fly, rounded where the reference rounds
            x = _silu_mul(x, tl.load(x_ptrs + K, mask=x_mask, other=0.0))
        if NORM:  # the row's sum of squares on the way; the norm weight now, 1 / rms at the end
            xf = x.to(tl.float32)
            sumsq += xf * xf
            if NORM_WEIGHT:
                if EVEN_K:
                    nw = tl.load(norm_w_ptr + k0 + ks)
                else:
                    nw = tl.load(norm_w_ptr + k0 + ks, mask=k0 + ks < K, other=0.0)
                x = xf * nw.to(tl.float32)[None, :]
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
        # next chunk requested before this one is used: two chunks in flight per program
        w_next = _w_chunk(w_ptrs, rows, ks, k0 + BLOCK_K, N, K, EVEN_N and EVEN_K, False)
        acc += w.to(tl.float32)[None, :, :] * x.to(tl.float32)[:, None, :]
        w = w_next
    y = tl.sum(acc, axis=2)                                                        # [BLOCK_M, BLOCK_N]
    if SCALED:
        y = y * w_scale[None, :]
    if X_SCALED:
        y = y * tl.load(x_scale_ptr + ms, mask=ms < M, other=0.0)[:, None]
    if NORM:
        rstd = 1.0 / tl.sqrt(tl.sum(sumsq, axis=1) / K + eps)                     # [BLOCK_M]
        y = y * rstd[:, None]
    if HAS_BIAS:
        y += tl.load(bias_ptr + rows, mask=rows < N, other=0.0).to(tl.float32)[None, :]
    if ADDEND:
        y += _addend(add_ptr, stride_add_m, ms, rows, M, N)
    y = y.to(out_ptr.dtype.element_ty)
    if RESIDUAL:  # rounded product + residual, rounded: what a separate add of the two tensors gives
        y = (y.to(tl.float32) + res.to(tl.float32)).to(out_ptr.dtype.element_ty)
    if SWIGLU:  # rows (gate j, up j) side by side: split, SiLU-and-mul, one output column each
        gate, up = tl.split(tl.reshape(y, (BLOCK_M, BLOCK_N // 2, 2)))
        cols = tl.program_id(0) * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
        tl.store(out_ptr + ms[:, None] * stride_out_m + cols[None, :], _silu_mul(gate, up),
                 mask=(ms[:, None] < M) & (cols[None, :] < N // 2))
    else:
        tl.store(out_ptrs, y, mask=out_mask)


@triton.jit
def _x_row(x_row_ptr, ks, kmask, K, GATED: tl.constexpr):
    """One row's chunk of x in fp32 (``silu(gate) * up`` when GATED, rounded where the reference rounds),
    repeated over the weight chunk's rows (``ks`` ``[BLOCK_N, BLOCK_K]``, every row the same columns): it
    loads in the weight chunk's layout, each thread the columns it multiplies (L1 hits after the first),
    where a ``[1, BLOCK_K]`` load gets a layout of its own and a shared-memory round trip to convert it."""
    x = tl.load(x_row_ptr + ks, mask=kmask, other=0.0)
    if GATED:
        x = _silu_mul(x, tl.load(x_row_ptr + K + ks, mask=kmask, other=0.0))
    return x.to(tl.float32)


@triton.jit
def _row_out(acc, sumsq, res, m, M, rows, N, K, eps, bias, w_scale, x_scale_ptr, out_ptr, stride_out_m,
             add_ptr, stride_add_m,
             NORM: tl.constexpr, HAS_BIAS: tl.constexpr, RESIDUAL: tl.constexpr, SWIGLU: tl.constexpr,
             SCALED: tl.constexpr, X_SCALED: tl.constexpr, ADDEND: tl.constexpr):
    """Row m of the output: the accumulator summed over K, scaled (a quantized weight's row scales; x's row
    scale where x is quantized too), normed, biased, rounded, added to the residual (SWIGLU: SiLU-and-mul of
    its (gate, up) pairs instead)."""
    y = tl.sum(acc, axis=1)                                                        # [BLOCK_N]
    if SCALED:
        y = y * w_scale
    if X_SCALED:
        y = y * tl.load(x_scale_ptr + m, mask=m < M, other=0.0)
    if NORM:
        y = y * (1.0 / tl.sqrt(tl.sum(sumsq, axis=1) / K + eps))  # the same for every row of the program
    if HAS_BIAS:
        y += bias
    if ADDEND:
        y += tl.load(add_ptr + m * stride_add_m + rows, mask=(rows < N) & (m < M), other=0.0).to(tl.float32)
    y = y.to(out_ptr.dtype.element_ty)
    if RESIDUAL:
        y = (y.to(tl.float32) + res.to(tl.float32)).to(out_ptr.dtype.element_ty)
    if SWIGLU:
        BLOCK_N: tl.constexpr = y.shape[0]
        gate, up = tl.split(tl.reshape(y, (BLOCK_N // 2, 2)))
        cols = tl.program_id(0) * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
        tl.store(out_ptr + m * stride_out_m + cols, _silu_mul(gate, up), mask=(cols < N // 2) & (m < M))
    else:
        tl.store(out_ptr + m * stride_out_m + rows, y, mask=(rows < N) & (m < M))


@triton.jit
def _flat_products(x_ptr, w_ptrs, w, rows, ks, norm_w_ptr, stride_x_m, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN: tl.constexpr,
                   GATED: tl.constexpr, NORM: tl.constexpr, NORM_WEIGHT: tl.constexpr):
    """The flat kernels' loop over K: ``w`` is the first weight chunk (requested before the PDL wait),
    ``w_ptrs`` point at it. Returns one ``[BLOCK_N, BLOCK_K]`` fp32 accumulator per row of x (up to 4; the
    ones past BLOCK_M stay zero) and, with NORM, each row's sums of squares in the same layout."""
    acc0 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    sq0 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)  # each row of a program's the same sums
    sq1 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    sq2 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    sq3 = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    kr = (rows * 0)[:, None] + ks[None, :]                                         # [BLOCK_N, BLOCK_K]
    for k0 in range(0, K, BLOCK_K):
        kmask = k0 + kr < K
        x0 = _x_row(x_ptr + k0, kr, kmask, K, GATED)
        if BLOCK_M > 1:
            x1 = _x_row(x_ptr + stride_x_m + k0, kr, kmask & (1 < M), K, GATED)
        if BLOCK_M > 2:
            x2 = _x_row(x_ptr + 2 * stride_x_m + k0, kr, kmask & (2 < M), K, GATED)
            x3 = _x_row(x_ptr + 3 * stride_x_m + k0, kr, kmask & (3 < M), K, GATED)
        if NORM:  # each row's sum of squares on the way; the norm weight now, 1 / rms at the end
            sq0 += x0 * x0
            if BLOCK_M > 1:
                sq1 += x1 * x1
            if BLOCK_M > 2:
                sq2 += x2 * x2
                sq3 += x3 * x3
            if NORM_WEIGHT:
                nw = tl.load(norm_w_ptr + k0 + kr, mask=kmask, other=0.0).to(tl.float32)
                x0 = x0 * nw
                if BLOCK_M > 1:
                    x1 = x1 * nw
                if BLOCK_M > 2:
                    x2 = x2 * nw
                    x3 = x3 * nw
        w_ptrs += BLOCK_K
        # the next chunk requested before this one is used
        w_next = _w_chunk(w_ptrs, rows, ks, k0 + BLOCK_K, N, K, EVEN, False)
        wf = w.to(tl.float32)
        acc0 += wf * x0
        if BLOCK_M > 1:
            acc1 += wf * x1
        if BLOCK_M > 2:
            acc2 += wf * x2
            acc3 += wf * x3
        w = w_next
    return acc0, acc1, acc2, acc3, sq0, sq1, sq2, sq3


@triton.jit
def _gemv_flat_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr, norm_w_ptr, scale_ptr, x_scale_ptr, add_ptr,
    stride_x_m, stride_w_n, stride_out_m, stride_add_m,
    M, N, K, eps,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_N: tl.constexpr, EVEN_K: tl.constexpr, USE_PDL: tl.constexpr,
    GATED: tl.constexpr = False, NORM: tl.constexpr = False, RESIDUAL: tl.constexpr = False,
    NORM_WEIGHT: tl.constexpr = False, SWIGLU: tl.constexpr = False, SCALED: tl.constexpr = False,
    X_SCALED: tl.constexpr = False, ADDEND: tl.constexpr = False,
):
    """What :func:`_gemv_kernel` computes, with one ``[BLOCK_N, BLOCK_K]`` accumulator per row of x (up to
    4) in the layout the weight chunk is loaded in. The 3-D accumulator of that kernel needs the chunk in
    another layout, which the compiler makes by a round trip through shared memory every chunk (sm_90
    code: ``convert_layout`` of w and x inside the loop), and at M = 4 spreads the rows' products over
    scalar lanes; here the weight goes from its vector loads to the FMAs in registers."""
    rows = _rows(N, BLOCK_N, SWIGLU)                                               # [BLOCK_N]
    ks = tl.arange(0, BLOCK_K)                                                     # [BLOCK_K]
    w_ptrs = w_ptr + rows.to(tl.int64)[:, None] * stride_w_n + ks[None, :]        # [BLOCK_N, BLOCK_K]
    w = _w_chunk(w_ptrs, rows, ks, 0, N, K, EVEN_N and EVEN_K, True)
    if HAS_BIAS:  # never written by earlier kernels: loaded before the wait
        bias = tl.load(bias_ptr + rows, mask=rows < N, other=0.0).to(tl.float32)
    else:
        bias = 0.0
    if SCALED:
        w_scale = tl.load(scale_ptr + rows, mask=rows < N, other=0.0)
    else:
        w_scale = 1.0
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x (and out) belong to the previous kernels from here on
        tl.extra.cuda.gdc_launch_dependents()
    res0 = 0.0
    res1 = 0.0
    res2 = 0.0
    res3 = 0.0
    if RESIDUAL:  # requested now, used in the epilogue
        res0 = tl.load(out_ptr + rows, mask=rows < N, other=0.0)
        if BLOCK_M > 1:
            res1 = tl.load(out_ptr + stride_out_m + rows, mask=(rows < N) & (1 < M), other=0.0)
        if BLOCK_M > 2:
            res2 = tl.load(out_ptr + 2 * stride_out_m + rows, mask=(rows < N) & (2 < M), other=0.0)
            res3 = tl.load(out_ptr + 3 * stride_out_m + rows, mask=(rows < N) & (3 < M), other=0.0)
    acc0, acc1, acc2, acc3, sq0, sq1, sq2, sq3 = _flat_products(
        x_ptr, w_ptrs, w, rows, ks, norm_w_ptr, stride_x_m, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_N and EVEN_K,
        GATED, NORM, NORM_WEIGHT)
    _row_out(acc0, sq0, res0, 0, M, rows, N, K, eps, bias, w_scale, x_scale_ptr, out_ptr, stride_out_m, add_ptr,
                 stride_add_m, NORM, HAS_BIAS, RESIDUAL, SWIGLU, SCALED, X_SCALED, ADDEND)
    if BLOCK_M > 1:
        _row_out(acc1, sq1, res1, 1, M, rows, N, K, eps, bias, w_scale, x_scale_ptr, out_ptr, stride_out_m, add_ptr,
                 stride_add_m, NORM, HAS_BIAS, RESIDUAL, SWIGLU, SCALED, X_SCALED, ADDEND)
    if BLOCK_M > 2:
        _row_out(acc2, sq2, res2, 2, M, rows, N, K, eps, bias, w_scale, x_scale_ptr, out_ptr, stride_out_m, add_ptr,
                 stride_add_m, NORM, HAS_BIAS, RESIDUAL, SWIGLU, SCALED, X_SCALED, ADDEND)
        _row_out(acc3, sq3, res3, 3, M, rows, N, K, eps, bias, w_scale, x_scale_ptr, out_ptr, stride_out_m, add_ptr,
                 stride_add_m, NORM, HAS_BIAS, RESIDUAL, SWIGLU, SCALED, X_SCALED, ADDEND)


def check_scale(weight: torch.Tensor, scale: torch.Tensor, device: torch.device) -> None:
    """A quantized weight ``[N, K]`` (a dtype of :data:`QUANTIZED_DTYPES`) and its row scales: fp32 ``[N]``,
    contiguous, both on ``device``; ValueError naming what does not fit."""
    if weight.dtype not in QUANTIZED_DTYPES:
        raise ValueError(f"scale is for a quantized weight ({', '.join(map(str, QUANTIZED_DTYPES))}), got a "
                         f"{weight.dtype} weight")
    if weight.device != device:
        raise ValueError(f"weight and scale must be on {device}, got the weight on {weight.device}")
    check_row_scales("scale", scale, weight.shape[0], device, "one per weight row")


def check_addend(addend: torch.Tensor | None, M: int, N: int, device: torch.device) -> None:
    """A per-row addend of an ``[M, N]`` product (before its epilogue): None, or ``[M, N]`` fp16/bf16/fp32 with a
    contiguous last dimension on ``device``; ValueError naming what does not fit."""
    if addend is None:
        return
    if addend.shape != (M, N) or addend.dtype not in (torch.float16, torch.bfloat16, torch.float32) \
            or addend.stride(-1) != 1 or addend.device != device:
        raise ValueError(f"addend must be a [{M}, {N}] float16/bfloat16/float32 tensor with a contiguous last "
                         f"dimension on {device}, got {tuple(addend.shape)} {addend.dtype} strides {addend.stride()} "
                         f"on {addend.device}")


def check_operands(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, *,
                   gated: bool = False, scale: torch.Tensor | None = None,
                   out_dtype: torch.dtype | None = None) -> tuple[int, int, int]:
    """(M, N, K) of a GEMV's ``x [M, K]`` (``[M, 2K]`` when ``gated``), ``weight [N, K]`` and ``bias [N]``
    (``scale``: a quantized weight's fp32 row scales ``[N]``, :func:`check_scale`; ``out_dtype``: the
    output's dtype where it is not x's, a quantized x); ValueError naming the operand that does not fit."""
    if x.dim() != 2 or weight.dim() != 2:
        raise ValueError(f"x must be [M, K] and weight [N, K], got x {tuple(x.shape)} and weight {tuple(weight.shape)}")
    M, K = x.shape
    if gated:
        if K % 2:
            raise ValueError(f"gated: x must be [M, 2K] (gate then up), got an odd width {K}")
        K //= 2
    N = weight.shape[0]
    if not 1 <= M <= MAX_M:
        raise ValueError(f"x must have 1 to {MAX_M} rows for the GEMV, got {M}")
    if weight.shape[1] != K:
        raise ValueError(f"weight must be [N, {K}] to match x [{M}, {K}], got {tuple(weight.shape)}")
    if x.stride(1) != 1 or weight.stride(1) != 1:
        raise ValueError(f"x and weight need a contiguous last dimension, got strides {x.stride()} and {weight.stride()}")
    if scale is not None:
        check_scale(weight, scale, x.device)
    elif x.dtype in QUANTIZED_DTYPES:
        raise ValueError(f"an fp8 x multiplies an fp8 weight with its scale (W8A8), got a {weight.dtype} weight "
                         "without scale")
    elif weight.dtype != x.dtype or weight.device != x.device:
        raise ValueError(f"weight must match x in dtype and device, got {weight.dtype}/{weight.device} "
                         f"and {x.dtype}/{x.device}" + (" (a quantized weight needs its scale)"
                                                        if weight.dtype in QUANTIZED_DTYPES else ""))
    dtype = out_dtype or x.dtype
    if bias is not None and (bias.shape != (N,) or bias.dtype != dtype or bias.stride(0) != 1):
        raise ValueError(f"bias must be a contiguous [{N}] {dtype} tensor, got {tuple(bias.shape)} {bias.dtype}")
    return M, N, K


def gemv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
         config: GemvConfig | None = None, pdl: bool | None = None, gated: bool = False,
         norm_weight: torch.Tensor | None = None, eps: float | None = None,
         residual: torch.Tensor | None = None, swiglu: bool = False,
         scale: torch.Tensor | None = None, x_scale: torch.Tensor | None = None,
         out_dtype: torch.dtype | None = None, addend: torch.Tensor | None = None) -> torch.Tensor:
    """``x [M, K] @ weight[N, K]^T (+ bias [N])`` -> ``[M, N]`` in x's dtype, for 1 <= M <= ``MAX_M``.

    ``scale``: weight is stored quantized (float8_e4m3fn) and ``scale`` ``[N]`` (fp32) holds its row scales,
    the weight being ``scale[:, None] * weight`` (each row's dot product scaled once, in fp32).
    ``x_scale``: x is quantized too (float8_e4m3fn, per row:
    :func:`tritium.ops.act_quant.quantize_activations_fp8`) with these fp32 row scales ``[M]`` (W8A8,
    ``quantization="fp8-dynamic"``): the fp8 products summed in fp32,
    each output scaled by both scales once; the output (and bias, residual) in ``out_dtype`` (fp16, bf16 or
    fp32; required then). Not with ``gated`` or a norm (``eps``): they act on x before it is quantized.

    x and weight need a contiguous last dimension; fp32 accumulation. Same result as ``F.linear`` up to
    summation order. ``pdl``: launch as a programmatic dependent launch (default: where supported).
    ``gated``: x is ``[M, 2K]`` = [gate | up] and the product uses ``silu_and_mul(x)`` (computed while
    loading, as :func:`tritium.ops.reference.silu_and_mul` rounds it), saving that kernel.
    ``eps``: the product uses RMSNorm(x) with weight ``norm_weight`` ``[K]`` (None: folded into ``weight``
    already), never rounded (:func:`tritium.ops.reference.rms_norm_linear`), saving the norm's kernel;
    not with ``gated``.
    ``residual`` ``[M, N]``: the product (bias included) is added to it in place and it is returned
    (:func:`tritium.ops.reference.linear_residual`).
    ``swiglu``: weight is ``[gate; up]`` (``[2I, K]``) and the result ``[M, I]`` is
    ``silu_and_mul(x @ weight^T)`` (:func:`tritium.ops.reference.silu_and_mul` of the rounded product), the
    SiLU-and-mul in the epilogue: the MLP's activation without a kernel of its own or a gated down
    projection; the config's ``block_n`` must be even (each program pairs ``block_n / 2`` gate rows with
    their up rows). Not with ``gated`` or ``residual``.
    ``addend`` ``[M, N]`` (fp16, bf16 or fp32, contiguous last dimension): a term of each row added to the
    product in fp32 with the bias, before the rounding, the SiLU-and-mul or the residual add (a LoRA update
    written by the kernel before: :func:`tritium.ops.lora.lora_delta`).
    """
    if x_scale is not None:
        if x.dtype not in QUANTIZED_DTYPES or scale is None:
            raise ValueError(f"x_scale is for an fp8 x times an fp8 weight with its scale (W8A8), got x {x.dtype}"
                             + ("" if scale is not None else " and no scale"))
        check_row_scales("x_scale", x_scale, x.shape[0], x.device, "one per row of x")
        if out_dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise ValueError(f"an fp8 x needs out_dtype (torch.float16, torch.bfloat16 or torch.float32), got "
                             f"{out_dtype}")
        if gated or eps is not None:
            raise ValueError("x_scale (a quantized x) does not combine with gated=True or a norm (eps): both act on x "
                             "before it is quantized")
    elif x.dtype in QUANTIZED_DTYPES:
        raise ValueError(f"an fp8 x needs its row scales (x_scale), got x {x.dtype}")
    elif out_dtype is not None and out_dtype != x.dtype:
        raise ValueError(f"out_dtype {out_dtype} differs from x's {x.dtype}: only a quantized x (x_scale) chooses it")
    dtype = out_dtype or x.dtype
    M, N, K = check_operands(x, weight, bias, gated=gated, scale=scale, out_dtype=dtype)
    cfg = config or DEFAULT_CONFIG
    if swiglu:
        if gated or residual is not None:
            raise ValueError("swiglu=True does not combine with gated=True or residual (its output is [M, N/2])")
        if N % 2:
            raise ValueError(f"swiglu: weight must be [gate; up] with an even row count, got {N} rows")
        if cfg.block_n % 2:
            raise ValueError(f"swiglu: config.block_n must be even (gate and up rows in pairs), got {cfg}")
    if eps is not None:
        if gated:
            raise ValueError("a norm (eps) and gated=True do not combine (the norm is over x's K columns)")
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0:
            raise ValueError(f"eps must be a number > 0, got {eps!r}")
        if norm_weight is not None and (norm_weight.shape != (K,) or norm_weight.dtype != x.dtype
                                        or norm_weight.stride(0) != 1):
            raise ValueError(f"norm_weight must be a contiguous [{K}] {x.dtype} tensor, got "
                             f"{tuple(norm_weight.shape)} {norm_weight.dtype}")
    elif norm_weight is not None:
        raise ValueError("norm_weight needs eps (the norm's epsilon)")
    if residual is not None and (residual.shape != (M, N) or residual.dtype != dtype or residual.stride(1) != 1
                                 or residual.device != x.device):
        raise ValueError(f"residual must be a [{M}, {N}] {dtype} tensor with a contiguous last dimension on "
                         f"{x.device}, got {tuple(residual.shape)} {residual.dtype} strides {residual.stride()}")
    if residual is not None and residual.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
        raise ValueError("residual must not share memory with x (every program reads all of x while others "
                         "write their columns of residual)")
    check_addend(addend, M, N, x.device)
    out = residual if residual is not None else torch.empty((M, N // 2 if swiglu else N), dtype=dtype,
                                                             device=x.device)
    if pdl and not pdl_supported(x.device):
        raise ValueError(f"pdl=True needs a compiled kernel on an NVIDIA sm_90+ GPU, not {x.device}")
    kernel = _gemv_flat_kernel if cfg.flat else _gemv_kernel
    kernel[(triton.cdiv(N, cfg.block_n),)](
        x, weight, bias if bias is not None else weight, out, norm_weight if norm_weight is not None else weight,
        scale if scale is not None else weight, x_scale if x_scale is not None else weight,
        addend if addend is not None else weight,
        x.stride(0), weight.stride(0), out.stride(0), addend.stride(0) if addend is not None else 0,
        M, N, K, float(eps) if eps is not None else 0.0,
        BLOCK_M=triton.next_power_of_2(M), BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        HAS_BIAS=bias is not None, EVEN_N=N % cfg.block_n == 0, EVEN_K=K % cfg.block_k == 0, GATED=gated,
        NORM=eps is not None, NORM_WEIGHT=norm_weight is not None, RESIDUAL=residual is not None,
        SWIGLU=swiglu, SCALED=scale is not None, X_SCALED=x_scale is not None, ADDEND=addend is not None,
        num_warps=cfg.num_warps,
        num_stages=pipeline_stages(cfg.num_stages),
        **pdl_launch(x.device, pdl is not False),
    )
    return out
