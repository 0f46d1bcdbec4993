"""Weight-only int4 (W4A16) linear layers in Triton: ``y = x @ W^T (+ b)`` with ``W`` an
:class:`~tritium.ops.int4.Int4Weight` (4-bit codes packed two to a byte, a scale and zero point per row and
group of ``group_size`` columns, an optional input permutation), and its one-pass dequantization.

Three kernels, chosen by the row count M of x (:func:`int4_linear`):

- M <= ``MAX_M`` (decode): :func:`int4_gemv`, the word GEMV (``_gemv_words_kernel``) where K is a multiple of 8
  and the groups are whole words that tile its chunk (every usual layout), else the byte GEMV. The word GEMV
  reads the codes as 32-bit words, 8 a word: codes 0-4 stay in place and are OR-ed under the exponent of 2^23
  (``magic | (w & 15 << 4I)`` is the fp32 ``2^23 + q * 16^I``), codes 5-7 likewise after one shift of the
  word, and an FADD of an immediate leaves the exact ``(q - 8) * 16^E`` (symmetric) or ``q * 16^E``; each
  meets x's column times 16^-E (exact) in an FMA into a per-word sum, which one more FMA scales by the
  word's group scale (and, with zero points, one more takes ``scale * zero`` times the word's sum of x).
  About 5 SASS instructions a code at M = 1 (the byte GEMV: ~8). x's chunk is loaded 16 bytes a word and
  split into the 8 code columns, which already sit in the weight's register layout: the weight's loads are
  left unvectorized (its row stride is never specialized) so that each thread holds whole words. The byte
  GEMV: each program takes ``BLOCK_N`` weight rows and walks K in chunks of ``BLOCK_K`` columns: one
  contiguous ``[BLOCK_N, BLOCK_K / 2]`` load of packed bytes (streamed past L2, ``evict_first``; the next chunk
  requested before the current one is used), the low and high nibbles multiplied with x's even and odd
  columns (two ``[BLOCK_K / 2]`` vectors a row of x, loaded with stride 2: no interleave), one fp32 accumulator
  a row of x in the chunk's own layout, reduced once at the end; a code becomes a float by the same OR under
  2^23 and subtraction, then one multiply by the scale. No tensor cores in either.
- M <= ``MATMUL_MAX_M`` (short prefill, decode batches): :func:`int4_matmul`, ``tl.dot`` on the tensor cores
  with the weight tile dequantized in registers to x's dtype (low and high nibbles interleaved back into
  column order), fp32 accumulator.
- larger M: :func:`dequantize_int4` to x's dtype (one pass, the product rounded once, bit for bit the
  reference's) and ``F.linear`` (cuBLAS), where the weight's traffic no longer matters (a temporary ``[N, K]``
  weight a call).

Groups: the word GEMV takes one scale (and zero) per row and piece of ``PIECE`` words (a group of whole
words, or the whole chunk where it lies in one group: :func:`_word_piece`); the other kernels split their K
chunk of ``BLOCK_K`` columns into pieces of ``SUB`` columns that each lie in one group, and load one scale
(and zero) per row and piece: ``SUB = BLOCK_K`` where every chunk lies in one group (``group_size`` a multiple
of ``BLOCK_K``, or one group a row: per-channel scales), else the largest power of two dividing
``group_size`` (``BLOCK_K / group_size`` whole groups a chunk for the usual 32/64/128). Any block size is
thus correct with any even ``group_size``; a ``group_size`` with a small power-of-two factor (e.g. 2 * odd)
makes many small pieces and is slow, but right.

Permutation (GPTQ ``desc_act``): stored column j multiplies input feature ``perm[j]``, so the kernels load x
gathered, ``x[:, perm[k]]`` for the chunk's stored columns k (the weight stays contiguous); the dequantized
weight is scattered back to input-feature order.

Rows past N and x's rows past M are clamped to the last valid one for the loads (no masks; their results
are never stored); K's tail is masked. References: :func:`tritium.ops.int4.linear_int4_reference` and
:func:`tritium.ops.int4.dequantize_int4_reference` (fp32, rounded once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from tritium.ops.int4 import SYMMETRIC_ZERO, Int4Weight
from tritium.runtime import pipeline_stages

MAX_M = 4  # rows of x the GEMV takes (one accumulator a row; next_power_of_2(M) of them)
# Rows of x int4_linear runs the in-register-dequantizing matmul for; above: dequantize + cuBLAS.
# NOTE: H200 sweeps (bf16 x, Llama-3-8B projections, group 128): the matmul's best tile beat dequantize + cuBLAS
# by 1.1-2x at M = 8..32, tied at M = 64-96 (faster on gate_up, slower on down), lost by 1.3-3x at M = 128 and
# 256. It trails cuBLAS on the bf16 weight from M = 16 on: a faster matmul would move this up.
MATMUL_MAX_M = 64
ACT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAGIC = tl.constexpr(0x4B000000)  # the bits of 2.0 ** 23: MAGIC | q (q < 2^23) is the fp32 2^23 + q
SYMMETRIC_ZERO_BIASED = tl.constexpr(8388608.0 + SYMMETRIC_ZERO)  # 2^23 + the zero point of zeros=None
ZERO_NONE = tl.constexpr(SYMMETRIC_ZERO)  # the zero point of zeros=None, for the kernels


def _check_pow2(owner, name: str, value, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least or value & (value - 1):
        raise ValueError(f"{owner.__name__}: {name} must be a power of two >= {least}, got {value!r}")


@dataclass(frozen=True)
class Int4GemvConfig:
    """A GEMV program: ``block_n`` weight rows, K walked ``block_k`` columns (``block_k / 2`` packed bytes a row)
    at a time; powers of two. ``words``: the word GEMV (32-bit words, ``block_k`` >= 8), else the byte GEMV."""
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int = 1
    words: bool = False

    def __post_init__(self):
        _check_pow2(type(self), "block_n", self.block_n, 1)
        _check_pow2(type(self), "block_k", self.block_k, 4)
        _check_pow2(type(self), "num_warps", self.num_warps, 1)
        if not isinstance(self.num_stages, int) or self.num_stages < 1:
            raise ValueError(f"Int4GemvConfig: num_stages must be an int >= 1, got {self.num_stages!r}")
        if not isinstance(self.words, bool) or (self.words and self.block_k < 8):
            raise ValueError(f"Int4GemvConfig: words must be a bool, and block_k >= 8 with it, got {self.words!r}, "
                             f"block_k {self.block_k}")

    def __str__(self) -> str:
        kind = "words-" if self.words else ""
        return f"{kind}n{self.block_n}-k{self.block_k}-w{self.num_warps}-st{self.num_stages}"


# Candidates for H100/H200 (block_k in columns: 128 to 512 bytes of a row a chunk).
# NOTE: two sweeps on the H200 (bf16 x, Llama-3-8B projections, group 128, with and without perm; timings noisy
# by up to 2x between repeats): each of these was the best somewhere; 8 x 1024 was best or within ~10% at M = 1
# on every projection (17 us qkv, 31 us down, 54 us gate_up: 1.3x faster than cuBLAS on the bf16 weight, ~1.1
# TB/s of int4 weight) and at M = 4 on down; M = 2-4 tie or trail cuBLAS's bf16 GEMV. Not the bytes but the
# instructions limit it, by the sm_90 SASS: ~10 a weight at M = 1 (unpacking, 2^23 offset, scale, FMAs, x's
# layout conversions). Never best: 2 x 2048, 4 x 2048, 8 x 2048.
GEMV_CONFIGS = (
    Int4GemvConfig(8, 1024, 4), Int4GemvConfig(4, 1024, 4), Int4GemvConfig(16, 512, 4), Int4GemvConfig(8, 512, 4),
    Int4GemvConfig(16, 1024, 8), Int4GemvConfig(32, 256, 8), Int4GemvConfig(32, 512, 8), Int4GemvConfig(8, 1024, 4, 3),
)
DEFAULT_GEMV_CONFIG = Int4GemvConfig(8, 1024, 4)
# The word GEMV's default by BLOCK_M (rows of x rounded up to 1, 2, 4): 32, 16 and 8 words a thread.
# NOTE: three H200 screens (bf16 x, Llama-3-8B projections, groups of 128, zero points; int4-linear-NVIDIA-H200.json):
# M = 1: 8 x 2048 best on gate_up / down / o, 9% behind 16 x 1024 on qkv (down 17.9 against 23.2 us); M = 2:
# 16 x 1024 best on qkv and gate_up (first screen, before the prefetch); M = 4: 8 x 1024 best on qkv and gate_up,
# 16 x 1024 on o and down. Per-shape configs timed at engine start would take the rest.
WORD_GEMV_DEFAULTS = {1: Int4GemvConfig(8, 2048, 4, words=True), 2: Int4GemvConfig(16, 1024, 4, words=True),
                      4: Int4GemvConfig(8, 1024, 4, words=True)}
WORD_GEMV_CONFIGS = tuple(Int4GemvConfig(n, k, w, words=True) for n, k, w in (
    (16, 1024, 4), (8, 1024, 4), (4, 1024, 4), (8, 2048, 4), (16, 2048, 4), (4, 2048, 4), (16, 512, 4),
    (32, 512, 4), (32, 1024, 8)))
MAGIC_BITS = 0x4B000000  # MAGIC as a kernel argument (a register): see _code_bits


@dataclass(frozen=True)
class Int4MatmulConfig:
    """A matmul program: a ``[block_m, block_n]`` output tile, K walked ``block_k`` columns at a time (powers of
    two; block_m, block_n and block_k >= 16, tl.dot's least)."""
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int

    def __post_init__(self):
        for name in ("block_m", "block_n", "block_k"):
            _check_pow2(type(self), name, getattr(self, name), 16)
        _check_pow2(type(self), "num_warps", self.num_warps, 1)
        if not isinstance(self.num_stages, int) or self.num_stages < 1:
            raise ValueError(f"Int4MatmulConfig: num_stages must be an int >= 1, got {self.num_stages!r}")

    def __str__(self) -> str:
        return f"m{self.block_m}-n{self.block_n}-k{self.block_k}-w{self.num_warps}-st{self.num_stages}"


# Tiles by preference (block_m, block_n, num_warps, num_stages), K steps of 128: select_int4_matmul_config takes
# the first of at most max(16, next_power_of_2(M)) rows that makes at least MIN_PROGRAMS programs, else the last.
# NOTE: from two sweeps on the H200 (bf16 x, Llama-3-8B projections, group 128, M = 8..256; timings noisy by up
# to 2x between repeats): 16 x 32 tiles best or near it at M <= 32 everywhere and on down_proj (N = 4096,
# K = 14336) to M = 48; 32 x 64 on qkv / o / down at M = 64; 64 x 128 (8 warps) on gate_up (N = 28672) at
# M = 48-64. Tiles of 128 rows were 1.3-3x slower than these at M = 128 and 256.
MATMUL_TILES = ((64, 128, 8, 3), (32, 64, 4, 3), (16, 32, 4, 4))
MIN_PROGRAMS = 128  # about one wave on an H100 / H200 (132 SMs)
MATMUL_CONFIGS = tuple(Int4MatmulConfig(bm, bn, 128, w, st) for bm, bn, w, st in MATMUL_TILES) + (
    Int4MatmulConfig(16, 64, 128, 4, 4), Int4MatmulConfig(16, 32, 256, 4, 3))
DEFAULT_MATMUL_CONFIG = Int4MatmulConfig(16, 32, 128, 4, 4)  # the selection's last resort (small M and N)


def select_int4_matmul_config(M: int, N: int, K: int, group_size: int, *,
                              x_dtype: torch.dtype = torch.bfloat16) -> Int4MatmulConfig:
    """Hand rules after two sweeps (``MATMUL_TILES``): the largest tile of at most
    ``max(16, next_power_of_2(M))`` rows that still makes ``MIN_PROGRAMS`` programs (small N and M take small
    tiles to fill the GPU), else the smallest; K steps of 128 columns (64 for fp32 x: the same shared memory,
    which the 64 x 128 tile's fp32 operands would overrun on an MI300X, 64 KiB), halved while a step would
    straddle a group (down to 32: the usual group sizes then take one scale a step)."""
    fits = [t for t in MATMUL_TILES if t[0] <= max(16, triton.next_power_of_2(M))]
    tile = next((t for t in fits if triton.cdiv(M, t[0]) * triton.cdiv(N, t[1]) >= MIN_PROGRAMS), fits[-1])
    block_k = 64 if x_dtype == torch.float32 else 128
    if group_size < K:  # several groups a row: a K step within one group where the group allows
        while block_k > 32 and group_size % block_k:
            block_k //= 2
    block_m, block_n, warps, stages = tile
    return Int4MatmulConfig(block_m, block_n, block_k, warps, stages)


def _sub(block_k: int, K: int, group_size: int) -> int:
    """Columns of a piece (one scale a row and piece): see the module docstring."""
    if group_size % block_k == 0 or group_size >= K:
        return block_k
    return min(block_k, group_size & -group_size)


# -- kernels -------------------------------------------------------------------------------------------------

@triton.jit
def _group_params(scale_ptr, zero_ptr, rows, k0, G, num_groups,
                  BLOCK_K: tl.constexpr, SUB: tl.constexpr, HAS_ZEROS: tl.constexpr):
    """Scales (fp32) and ``2^23 + zero`` of the weight chunk at column ``k0``: ``[BLOCK_N, BLOCK_K / SUB]``, one
    per row and piece of SUB columns (group index clamped to the last group for pieces past K)."""
    P: tl.constexpr = BLOCK_K // SUB
    g = tl.minimum((k0 + tl.arange(0, P) * SUB) // G, num_groups - 1)               # [P]
    offs = rows.to(tl.int64)[:, None] * num_groups + g[None, :]                       # [BLOCK_N, P]
    s = tl.load(scale_ptr + offs).to(tl.float32)
    if HAS_ZEROS:
        zf = tl.load(zero_ptr + offs).to(tl.float32) + 8388608.0
    else:
        zf = tl.full(s.shape, SYMMETRIC_ZERO_BIASED, tl.float32)
    return s, zf


@triton.jit
def _dequant_nibbles(packed, s, zf, SUB: tl.constexpr):
    """Packed bytes ``[BLOCK_N, BLOCK_K / 2]`` (uint8) -> (low, high) ``[BLOCK_N, BLOCK_K / 2]`` fp32: the weight's
    even and odd columns ``(q - zero) * scale``; ``q - zero`` exact, the product rounded once (the
    reference's arithmetic)."""
    BLOCK_N: tl.constexpr = packed.shape[0]
    BLOCK_KB: tl.constexpr = packed.shape[1]
    P: tl.constexpr = s.shape[1]
    HSUB: tl.constexpr = SUB // 2
    b = tl.reshape(packed, (BLOCK_N, P, HSUB)).to(tl.int32)
    lo = ((b & 15) | MAGIC).to(tl.float32, bitcast=True) - zf[:, :, None]          # [BLOCK_N, P, HSUB]
    hi = ((b >> 4) | MAGIC).to(tl.float32, bitcast=True) - zf[:, :, None]
    lo = tl.reshape(lo * s[:, :, None], (BLOCK_N, BLOCK_KB))
    hi = tl.reshape(hi * s[:, :, None], (BLOCK_N, BLOCK_KB))
    return lo, hi


@triton.jit
def _dequantize_kernel(
    # pointers
    packed_ptr, scale_ptr, zero_ptr, perm_ptr, out_ptr,
    # strides
    stride_out_n,
    # sizes
    N, K, G, num_groups,
    # meta-parameters
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SUB: tl.constexpr,
    HAS_ZEROS: tl.constexpr, SCATTER: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out = (q - zero) * scale, one ``[BLOCK_N, BLOCK_K]`` tile a program, rounded once to out's dtype; SCATTER:
    stored column j written to column perm[j]."""
    BLOCK_KB: tl.constexpr = BLOCK_K // 2
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)                       # [BLOCK_N]
    rows_ld = tl.minimum(rows, N - 1)
    k0 = tl.program_id(1) * BLOCK_K
    kb = tl.arange(0, BLOCK_KB)                                                      # [BLOCK_KB]
    p_ptrs = packed_ptr + rows_ld.to(tl.int64)[:, None] * (K // 2) + (k0 // 2 + kb)[None, :]
    if EVEN_K:
        packed = tl.load(p_ptrs, eviction_policy="evict_first")                      # [BLOCK_N, BLOCK_KB]
    else:
        packed = tl.load(p_ptrs, mask=(k0 // 2 + kb < K // 2)[None, :], other=0, eviction_policy="evict_first")
    s, zf = _group_params(scale_ptr, zero_ptr, rows_ld, k0, G, num_groups, BLOCK_K, SUB, HAS_ZEROS)
    lo, hi = _dequant_nibbles(packed, s, zf, SUB)
    out_rows = out_ptr + rows.to(tl.int64)[:, None] * stride_out_n                   # [BLOCK_N, 1]
    if SCATTER:
        kmask = k0 + 2 * kb < K
        dst_lo = tl.load(perm_ptr + k0 + 2 * kb, mask=kmask, other=0)
        dst_hi = tl.load(perm_ptr + k0 + 2 * kb + 1, mask=kmask, other=0)
        mask = (rows < N)[:, None] & kmask[None, :]
        tl.store(out_rows + dst_lo[None, :], lo.to(out_ptr.dtype.element_ty), mask=mask)
        tl.store(out_rows + dst_hi[None, :], hi.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        cols = k0 + tl.arange(0, BLOCK_K)                                            # [BLOCK_K]
        w = tl.interleave(lo, hi).to(out_ptr.dtype.element_ty)                        # [BLOCK_N, BLOCK_K]
        tl.store(out_rows + cols[None, :], w, mask=(rows < N)[:, None] & (cols < K)[None, :])


@triton.jit
def _packed_chunk(p_ptrs, kb, k0, K, EVEN_K: tl.constexpr, FIRST: tl.constexpr):
    """The packed bytes ``[BLOCK_N, BLOCK_K / 2]`` of the chunk at column ``k0`` (``p_ptrs`` point at it), streamed
    past L2: zeros past K, all zeros where ``k0 >= K`` (the request after the last chunk)."""
    if EVEN_K and FIRST:
        packed = tl.load(p_ptrs, eviction_policy="evict_first")
    elif EVEN_K:
        packed = tl.load(p_ptrs, mask=k0 < K, other=0, eviction_policy="evict_first")
    else:
        packed = tl.load(p_ptrs, mask=(k0 + 2 * kb < K)[None, :], other=0, eviction_policy="evict_first")
    return packed


@triton.jit
def _x_cols(x_row_ptr, cols, kmask, EVEN_K: tl.constexpr):
    """One row of x at columns ``cols`` ``[BLOCK_K / 2]`` in fp32 (zeros where not ``kmask``)."""
    if EVEN_K:
        x = tl.load(x_row_ptr + cols)
    else:
        x = tl.load(x_row_ptr + cols, mask=kmask, other=0.0)
    return x.to(tl.float32)


@triton.jit
def _gemv_store(acc, m, M, rows, N, bias, out_ptr, stride_out_m, HAS_BIAS: tl.constexpr):
    """Row m of the output: the accumulator summed over the chunk's columns, biased, rounded once."""
    y = tl.sum(acc, axis=1)                                                          # [BLOCK_N]
    if HAS_BIAS:
        y += bias
    tl.store(out_ptr + m * stride_out_m + rows, y.to(out_ptr.dtype.element_ty), mask=(rows < N) & (m < M))


@triton.jit
def _gemv_epilogue(acc0, acc1, acc2, acc3, M, rows, rows_ld, N, bias_ptr, out_ptr, stride_out_m,
                   BLOCK_M: tl.constexpr, HAS_BIAS: tl.constexpr):
    """The BLOCK_M rows of the output from their accumulators (the bias loaded once)."""
    bias = tl.load(bias_ptr + rows_ld).to(tl.float32) if HAS_BIAS else 0.0
    _gemv_store(acc0, 0, M, rows, N, bias, out_ptr, stride_out_m, HAS_BIAS)
    if BLOCK_M > 1:
        _gemv_store(acc1, 1, M, rows, N, bias, out_ptr, stride_out_m, HAS_BIAS)
    if BLOCK_M > 2:
        _gemv_store(acc2, 2, M, rows, N, bias, out_ptr, stride_out_m, HAS_BIAS)
        _gemv_store(acc3, 3, M, rows, N, bias, out_ptr, stride_out_m, HAS_BIAS)


@triton.jit
def _gemv_kernel(
    # pointers
    x_ptr, packed_ptr, scale_ptr, zero_ptr, perm_ptr, bias_ptr, out_ptr,
    # strides
    stride_x_m, stride_out_m,
    # sizes
    M, N, K, G, num_groups,
    # meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SUB: tl.constexpr,
    HAS_ZEROS: tl.constexpr, HAS_PERM: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out = x @ W^T (+ bias) for the program's BLOCK_N rows and the M <= 4 rows of x (BLOCK_M = 1, 2 or 4):
    one ``[BLOCK_N, BLOCK_K / 2]`` fp32 accumulator a row of x in the dequantized chunk's layout (x's even /
    odd stored columns, a ``[BLOCK_K / 2]`` vector each, broadcast over the rows), reduced once at the end;
    the next chunk's bytes requested before the current one is used. HAS_PERM: x gathered at perm[k]."""
    BLOCK_KB: tl.constexpr = BLOCK_K // 2
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)                       # [BLOCK_N]
    rows_ld = tl.minimum(rows, N - 1)
    kb = tl.arange(0, BLOCK_KB)                                                      # [BLOCK_KB]
    p_ptrs = packed_ptr + rows_ld.to(tl.int64)[:, None] * (K // 2) + kb[None, :]    # [BLOCK_N, BLOCK_KB]
    # rows of x past M read row M - 1 (never stored)
    x1_ptr = x_ptr + tl.minimum(1, M - 1) * stride_x_m
    x2_ptr = x_ptr + tl.minimum(2, M - 1) * stride_x_m
    x3_ptr = x_ptr + tl.minimum(3, M - 1) * stride_x_m
    packed = _packed_chunk(p_ptrs, kb, 0, K, EVEN_K, True)
    acc0 = tl.zeros((BLOCK_N, BLOCK_KB), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_N, BLOCK_KB), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_N, BLOCK_KB), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_N, BLOCK_KB), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        even = k0 + 2 * kb                                                           # [BLOCK_KB] stored columns
        kmask = even < K
        if HAS_PERM:
            if EVEN_K:
                f_even = tl.load(perm_ptr + even)
                f_odd = tl.load(perm_ptr + even + 1)
            else:
                f_even = tl.load(perm_ptr + even, mask=kmask, other=0)
                f_odd = tl.load(perm_ptr + even + 1, mask=kmask, other=0)
        else:
            f_even = even
            f_odd = even + 1
        s, zf = _group_params(scale_ptr, zero_ptr, rows_ld, k0, G, num_groups, BLOCK_K, SUB, HAS_ZEROS)
        p_ptrs += BLOCK_KB
        # the next chunk requested before this one is used: two chunks in flight a program
        packed_next = _packed_chunk(p_ptrs, kb, k0 + BLOCK_K, K, EVEN_K, False)
        lo, hi = _dequant_nibbles(packed, s, zf, SUB)
        # two FMAs a byte and row of x (a sum of the two products first would take an FMUL, FFMA and FADD)
        acc0 += lo * _x_cols(x_ptr, f_even, kmask, EVEN_K)[None, :]
        acc0 += hi * _x_cols(x_ptr, f_odd, kmask, EVEN_K)[None, :]
        if BLOCK_M > 1:
            acc1 += lo * _x_cols(x1_ptr, f_even, kmask, EVEN_K)[None, :]
            acc1 += hi * _x_cols(x1_ptr, f_odd, kmask, EVEN_K)[None, :]
        if BLOCK_M > 2:
            acc2 += lo * _x_cols(x2_ptr, f_even, kmask, EVEN_K)[None, :]
            acc2 += hi * _x_cols(x2_ptr, f_odd, kmask, EVEN_K)[None, :]
            acc3 += lo * _x_cols(x3_ptr, f_even, kmask, EVEN_K)[None, :]
            acc3 += hi * _x_cols(x3_ptr, f_odd, kmask, EVEN_K)[None, :]
        packed = packed_next
    _gemv_epilogue(acc0, acc1, acc2, acc3, M, rows, rows_ld, N, bias_ptr, out_ptr, stride_out_m, BLOCK_M, HAS_BIAS)


@triton.jit
def _code_bits(w, v, magic, I: tl.constexpr):
    """The fp32 ``2^23 + q * 16^E`` of code I (0-7, column ``8 * word + I``) of each 32-bit word: codes 0-4 left
    in place in ``w`` (bits 4I to 4I + 3, all below the exponent of 2^23), 5-7 taken from ``v = w >> 12``
    (bits 4I - 12 on); E = I, or I - 3 for 5-7. One LOP3 each: ``magic`` (0x4B000000) is a run-time value, so
    it sits in a register (as an immediate beside the mask, the OR would be a second instruction)."""
    if I < 5:
        return ((w & (15 << (4 * I))) | magic).to(tl.float32, bitcast=True)
    else:
        return ((v & (15 << (4 * I - 12))) | magic).to(tl.float32, bitcast=True)


@triton.jit
def _code_scale(I: tl.constexpr):
    """16^E of code I (see :func:`_code_bits`)."""
    E: tl.constexpr = I if I < 5 else I - 3
    return 1 << (4 * E)


@triton.jit
def _per_word(t, BLOCK_W: tl.constexpr):
    """``[BLOCK_N, P]`` (one value a row and piece of ``BLOCK_W / P`` words) -> ``[BLOCK_N, BLOCK_W]``."""
    BLOCK_N: tl.constexpr = t.shape[0]
    P: tl.constexpr = t.shape[1]
    return tl.reshape(tl.broadcast_to(t[:, :, None], (BLOCK_N, P, BLOCK_W // P)), (BLOCK_N, BLOCK_W))


@triton.jit
def _x_codes(x_row_ptr, feats, kmask, EVEN_K: tl.constexpr):
    """One row of x at the chunk's ``[BLOCK_W, 8]`` columns ``feats`` (word, code), in fp32: the 8 code
    columns, ``[BLOCK_W]`` each, code I's times 16^-E (exact: a power of two) to match :func:`_code_bits`, and
    the sum of each word's 8 (unscaled; for the zero points)."""
    BLOCK_W: tl.constexpr = feats.shape[0]
    if EVEN_K:
        x = tl.load(x_row_ptr + feats).to(tl.float32)
    else:
        x = tl.load(x_row_ptr + feats, mask=kmask, other=0.0).to(tl.float32)
    a, b = tl.split(tl.reshape(x, (BLOCK_W, 4, 2)))                                   # codes 0 2 4 6 / 1 3 5 7
    a0, a1 = tl.split(tl.reshape(a, (BLOCK_W, 2, 2)))                                 # 0 4 / 2 6
    b0, b1 = tl.split(tl.reshape(b, (BLOCK_W, 2, 2)))                                 # 1 5 / 3 7
    x0, x4 = tl.split(a0)
    x2, x6 = tl.split(a1)
    x1, x5 = tl.split(b0)
    x3, x7 = tl.split(b1)
    return (x0, x1 * (1.0 / _code_scale(1)), x2 * (1.0 / _code_scale(2)), x3 * (1.0 / _code_scale(3)),
            x4 * (1.0 / _code_scale(4)), x5 * (1.0 / _code_scale(5)), x6 * (1.0 / _code_scale(6)),
            x7 * (1.0 / _code_scale(7)), ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)))


@triton.jit
def _words_row(acc, s, sz, d0, d1, d2, d3, d4, d5, d6, d7, xs, HAS_ZEROS: tl.constexpr):
    """acc + s * sum_I d_I * x_I over the 8 codes of each word (x's columns broadcast over the rows), less
    ``sz = scale * zero`` times the word's sum of x where there are zero points (d_I then holds q, not
    q - zero)."""
    p = d0 * xs[0][None, :]
    p += d1 * xs[1][None, :]
    p += d2 * xs[2][None, :]
    p += d3 * xs[3][None, :]
    p += d4 * xs[4][None, :]
    p += d5 * xs[5][None, :]
    p += d6 * xs[6][None, :]
    p += d7 * xs[7][None, :]
    acc += s * p
    if HAS_ZEROS:
        acc -= sz * xs[8][None, :]
    return acc


@triton.jit
def _code_minus_zero(w, v, magic, I: tl.constexpr, HAS_ZEROS: tl.constexpr):
    """Code I as the exact fp32 ``q * 16^E`` (zero points: applied per word by :func:`_words_row`) or, for
    zeros=None, ``(q - 8) * 16^E``: the code's ``2^23 + q * 16^E`` less an immediate."""
    if HAS_ZEROS:
        return _code_bits(w, v, magic, I) - 8388608.0
    else:
        return _code_bits(w, v, magic, I) - (8388608.0 + ZERO_NONE * _code_scale(I))


@triton.jit
def _word_chunk(w_ptrs, wc, k0w, KW, EVEN_K: tl.constexpr, FIRST: tl.constexpr):
    """The words ``[BLOCK_N, BLOCK_W]`` of the chunk at word ``k0w`` (``w_ptrs`` point at it), streamed past L2:
    zeros past K, all zeros where ``k0w >= KW`` (the request after the last chunk)."""
    if EVEN_K and FIRST:
        w = tl.load(w_ptrs, eviction_policy="evict_first")
    elif EVEN_K:
        w = tl.load(w_ptrs, mask=k0w < KW, other=0, eviction_policy="evict_first")
    else:
        w = tl.load(w_ptrs, mask=(k0w + wc < KW)[None, :], other=0, eviction_policy="evict_first")
    return w


@triton.jit(do_not_specialize=["KW"])
def _gemv_words_kernel(
    # pointers
    x_ptr, words_ptr, scale_ptr, zero_ptr, perm_ptr, bias_ptr, out_ptr,
    # strides
    stride_x_m, stride_out_m,
    # sizes
    M, N, KW, G, num_groups, magic,
    # meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_W: tl.constexpr, PIECE: tl.constexpr,
    HAS_ZEROS: tl.constexpr, HAS_PERM: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out = x @ W^T (+ bias) for the program's BLOCK_N rows and the M <= 4 rows of x (BLOCK_M = 1, 2 or 4), the
    weight read as 32-bit words (8 codes; ``KW = K / 8`` a row). Each chunk of BLOCK_W words a row: code I of
    every word made an exact fp32 (:func:`_code_minus_zero`: one LOP3 and one FADD a code, a shift a word), an
    FMA a code and row of x with x's column times 16^-E into a per-word sum, then one FMA with the scale of the
    word's group (``PIECE`` words a scale) and, with zero points, one more with ``scale * zero`` and the word's
    sum of x. One ``[BLOCK_N, BLOCK_W]`` accumulator a row of x, reduced once at the end; the next chunk's
    words requested before this one is used. x's chunk is loaded ``[BLOCK_W, 8]`` (16 contiguous bytes a word
    at 16 bits) and split into its 8 code columns, which land in the weight's layout with no conversion
    because the weight's loads are not vectorized (KW is never specialized: each thread holds whole words,
    one a row and 32-word span). HAS_PERM: x gathered at perm[k]."""
    P: tl.constexpr = BLOCK_W // PIECE
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)                       # [BLOCK_N]
    rows_ld = tl.minimum(rows, N - 1).to(tl.int64)
    wc = tl.arange(0, BLOCK_W)                                                       # [BLOCK_W]
    w_ptrs = words_ptr + rows_ld[:, None] * KW + wc[None, :]                         # [BLOCK_N, BLOCK_W]
    c8 = wc[:, None] * 8 + tl.arange(0, 8)[None, :]                                  # [BLOCK_W, 8] columns
    pieces = tl.arange(0, P) * PIECE                                                 # [P] first word of each
    K = KW * 8
    x1_ptr = x_ptr + tl.minimum(1, M - 1) * stride_x_m
    x2_ptr = x_ptr + tl.minimum(2, M - 1) * stride_x_m
    x3_ptr = x_ptr + tl.minimum(3, M - 1) * stride_x_m
    acc0 = tl.zeros((BLOCK_N, BLOCK_W), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_N, BLOCK_W), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_N, BLOCK_W), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_N, BLOCK_W), dtype=tl.float32)
    w = _word_chunk(w_ptrs, wc, 0, KW, EVEN_K, True)
    for k0w in range(0, KW, BLOCK_W):
        cols = k0w * 8 + c8
        kmask = cols < K
        w_ptrs += BLOCK_W
        # the next chunk requested before this one is used: two chunks in flight a program
        w_next = _word_chunk(w_ptrs, wc, k0w + BLOCK_W, KW, EVEN_K, False)
        if HAS_PERM:
            if EVEN_K:
                feats = tl.load(perm_ptr + cols)
            else:
                feats = tl.load(perm_ptr + cols, mask=kmask, other=0)
        else:
            feats = cols
        g = tl.minimum((k0w + pieces) * 8 // G, num_groups - 1)                       # [P]
        offs = rows_ld[:, None] * num_groups + g[None, :]                             # [BLOCK_N, P]
        s = tl.load(scale_ptr + offs).to(tl.float32)
        sz = _per_word(s * tl.load(zero_ptr + offs).to(tl.float32), BLOCK_W) if HAS_ZEROS else 0.0
        s = _per_word(s, BLOCK_W)
        v = w >> 12
        d0 = _code_minus_zero(w, v, magic, 0, HAS_ZEROS)
        d1 = _code_minus_zero(w, v, magic, 1, HAS_ZEROS)
        d2 = _code_minus_zero(w, v, magic, 2, HAS_ZEROS)
        d3 = _code_minus_zero(w, v, magic, 3, HAS_ZEROS)
        d4 = _code_minus_zero(w, v, magic, 4, HAS_ZEROS)
        d5 = _code_minus_zero(w, v, magic, 5, HAS_ZEROS)
        d6 = _code_minus_zero(w, v, magic, 6, HAS_ZEROS)
        d7 = _code_minus_zero(w, v, magic, 7, HAS_ZEROS)
        acc0 = _words_row(acc0, s, sz, d0, d1, d2, d3, d4, d5, d6, d7,
                          _x_codes(x_ptr, feats, kmask, EVEN_K), HAS_ZEROS)
        if BLOCK_M > 1:
            acc1 = _words_row(acc1, s, sz, d0, d1, d2, d3, d4, d5, d6, d7,
                              _x_codes(x1_ptr, feats, kmask, EVEN_K), HAS_ZEROS)
        if BLOCK_M > 2:
            acc2 = _words_row(acc2, s, sz, d0, d1, d2, d3, d4, d5, d6, d7,
                              _x_codes(x2_ptr, feats, kmask, EVEN_K), HAS_ZEROS)
            acc3 = _words_row(acc3, s, sz, d0, d1, d2, d3, d4, d5, d6, d7,
                              _x_codes(x3_ptr, feats, kmask, EVEN_K), HAS_ZEROS)
        w = w_next
    _gemv_epilogue(acc0, acc1, acc2, acc3, M, rows, rows_ld, N, bias_ptr, out_ptr, stride_out_m, BLOCK_M, HAS_BIAS)


@triton.jit
def _matmul_kernel(
    # pointers
    x_ptr, packed_ptr, scale_ptr, zero_ptr, perm_ptr, bias_ptr, out_ptr,
    # strides
    stride_x_m, stride_out_m,
    # sizes
    M, N, K, G, num_groups,
    # meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SUB: tl.constexpr,
    HAS_ZEROS: tl.constexpr, HAS_PERM: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    """out = x @ W^T (+ bias), one ``[BLOCK_M, BLOCK_N]`` tile a program: each K step's weight tile dequantized
    to x's dtype in registers, tl.dot into an fp32 accumulator. HAS_PERM: x's columns gathered at perm[k]."""
    BLOCK_KB: tl.constexpr = BLOCK_K // 2
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)                       # [BLOCK_N] weight rows
    rows_ld = tl.minimum(rows, N - 1)
    ms = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)                         # [BLOCK_M] rows of x
    x_rows = x_ptr + tl.minimum(ms, M - 1).to(tl.int64)[:, None] * stride_x_m       # [BLOCK_M, 1]
    kk = tl.arange(0, BLOCK_K)                                                       # [BLOCK_K]
    kb = tl.arange(0, BLOCK_KB)                                                      # [BLOCK_KB]
    p_ptrs = packed_ptr + rows_ld.to(tl.int64)[:, None] * (K // 2) + kb[None, :]    # [BLOCK_N, BLOCK_KB]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + kk                                                               # [BLOCK_K] stored columns
        if EVEN_K:
            feats = tl.load(perm_ptr + cols) if HAS_PERM else cols
            a = tl.load(x_rows + feats[None, :])                                     # [BLOCK_M, BLOCK_K]
            packed = tl.load(p_ptrs)                                                 # [BLOCK_N, BLOCK_KB]
        else:
            kmask = cols < K
            feats = tl.load(perm_ptr + cols, mask=kmask, other=0) if HAS_PERM else cols
            a = tl.load(x_rows + feats[None, :], mask=kmask[None, :], other=0.0)
            packed = tl.load(p_ptrs, mask=(k0 // 2 + kb < K // 2)[None, :], other=0)
        s, zf = _group_params(scale_ptr, zero_ptr, rows_ld, k0, G, num_groups, BLOCK_K, SUB, HAS_ZEROS)
        lo, hi = _dequant_nibbles(packed, s, zf, SUB)
        w = tl.interleave(lo, hi).to(a.dtype)                                        # [BLOCK_N, BLOCK_K]
        acc = tl.dot(a, tl.trans(w), acc, input_precision=DOT_PRECISION)
        p_ptrs += BLOCK_KB
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rows_ld).to(tl.float32)[None, :]
    tl.store(out_ptr + ms.to(tl.int64)[:, None] * stride_out_m + rows[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=(ms < M)[:, None] & (rows < N)[None, :])


# -- launchers -----------------------------------------------------------------------------------------------

def _check_weight(fn: str, w) -> None:
    if not isinstance(w, Int4Weight):
        raise TypeError(f"{fn}: w must be an Int4Weight, got {type(w).__name__}")


def _check_operands(fn: str, x, w, bias) -> tuple[int, int, int]:
    """(M, N, K) of ``x [M, K]``, ``w`` ``[N, K]`` and ``bias [N]``; TypeError / ValueError naming what does
    not fit. The weight itself is trusted (:meth:`Int4Weight.validate` ran when it was made)."""
    _check_weight(fn, w)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: x must be a torch.Tensor, got {type(x).__name__}")
    N, K = w.shape
    if x.dim() != 2 or x.shape[1] != K:
        raise ValueError(f"{fn}: x must be [M, {K}] (K of the weight [{N}, {K}]), got {tuple(x.shape)}")
    if x.dtype not in ACT_DTYPES:
        raise ValueError(f"{fn}: x must be float16, bfloat16 or float32, got {x.dtype}")
    if x.device != w.device:
        raise ValueError(f"{fn}: x is on {x.device}, the weight on {w.device}")
    if x.shape[1] > 1 and x.stride(1) != 1:
        raise ValueError(f"{fn}: x needs a contiguous last dimension, got strides {x.stride()}")
    if bias is not None and (not isinstance(bias, torch.Tensor) or bias.shape != (N,) or bias.dtype != x.dtype
                             or bias.device != x.device or (N > 1 and bias.stride(0) != 1)):
        raise ValueError(f"{fn}: bias must be a contiguous [{N}] {x.dtype} tensor on {x.device}, got "
                         + (f"{tuple(bias.shape)} {bias.dtype} on {bias.device}" if isinstance(bias, torch.Tensor)
                            else type(bias).__name__))
    return x.shape[0], N, K


def _weight_args(w: Int4Weight) -> tuple:
    """The kernels' weight pointers (stand-ins for the absent ones: never read)."""
    return (w.packed, w.scales, w.zeros if w.zeros is not None else w.packed,
            w.perm if w.perm is not None else w.packed)


def dequantize_int4(w: Int4Weight, dtype: torch.dtype, out: torch.Tensor | None = None, *,
                    unpermute: bool = True) -> torch.Tensor:
    """The weight ``[N, K]`` as ``dtype`` (float16, bfloat16 or float32): ``(q - zero) * scale`` in fp32 rounded
    once, bit for bit :func:`~tritium.ops.int4.dequantize_int4_reference` ``(w, dtype, unpermute=unpermute)``.
    ``unpermute`` (with a perm): stored column j written to column ``perm[j]`` (input-feature order, what
    ``F.linear(x, ...)`` needs); False: stored order. ``out``: an ``[N, K]`` tensor of ``dtype`` on the
    weight's device with a contiguous last dimension, written instead of a new one (every element of it is
    written when perm is a permutation)."""
    _check_weight("dequantize_int4", w)
    if dtype not in ACT_DTYPES:
        raise ValueError(f"dequantize_int4: dtype must be torch.float16, torch.bfloat16 or torch.float32, got {dtype}")
    N, K = w.shape
    if out is None:
        out = torch.empty((N, K), dtype=dtype, device=w.device)
    elif (not isinstance(out, torch.Tensor) or out.shape != (N, K) or out.dtype != dtype or out.device != w.device
          or (K > 1 and out.stride(1) != 1)):
        raise ValueError(f"dequantize_int4: out must be a [{N}, {K}] {dtype} tensor on {w.device} with a contiguous "
                         f"last dimension, got " + (f"{tuple(out.shape)} {out.dtype} strides {out.stride()} on "
                                                    f"{out.device}" if isinstance(out, torch.Tensor)
                                                    else type(out).__name__))
    if N and K:
        block_n, block_k = 16, 512
        _dequantize_kernel[(triton.cdiv(N, block_n), triton.cdiv(K, block_k))](
            *_weight_args(w), out,
            out.stride(0),
            N, K, w.group_size, w.num_groups,
            BLOCK_N=block_n, BLOCK_K=block_k, SUB=_sub(block_k, K, w.group_size),
            HAS_ZEROS=w.zeros is not None, SCATTER=unpermute and w.perm is not None, EVEN_K=K % block_k == 0,
            num_warps=4)
    return out


def int4_gemv(x: torch.Tensor, w: Int4Weight, bias: torch.Tensor | None = None, *,
              config: Int4GemvConfig | None = None) -> torch.Tensor:
    """``x [M, K] @ W^T (+ bias [N])`` -> ``[M, N]`` in x's dtype, for 0 <= M <= ``MAX_M`` (decode). x float16,
    bfloat16 or float32 with a contiguous last dimension, on the weight's device; bias of x's dtype. fp32
    products and sums, the bias added in fp32, the result rounded once. ``config``: the program's shape
    (default ``DEFAULT_GEMV_CONFIG``)."""
    M, N, K = _check_operands("int4_gemv", x, w, bias)
    if M > MAX_M:
        raise ValueError(f"int4_gemv: x must have at most {MAX_M} rows, got {M} (int4_matmul takes more)")
    if config is not None and not isinstance(config, Int4GemvConfig):
        raise TypeError(f"int4_gemv: config must be an Int4GemvConfig, got {type(config).__name__}")
    return _gemv(x, w, bias, config)


def _word_piece(K: int, G: int, block_w: int) -> int | None:
    """Words a scale (``PIECE``) of the word GEMV with chunks of ``block_w`` words, or None where it cannot
    run: K a multiple of 8 (whole words), and groups of whole words that tile the chunk or that it tiles (one
    group a row: any)."""
    if K % 8:
        return None
    if G >= K:
        return block_w
    if G % 8:
        return None
    gw = G // 8
    if block_w % gw == 0:
        return gw
    return block_w if gw % block_w == 0 else None


def _words(w: Int4Weight) -> torch.Tensor | None:
    """The packed codes as 32-bit words ``[N, K / 8]`` (a view), or None where they are not aligned so."""
    p = w.packed
    if p.shape[1] % 4 or not p.is_contiguous() or p.data_ptr() % 4:
        return None
    return p.view(torch.int32)


def gemv_candidates(w: Int4Weight) -> tuple[Int4GemvConfig, ...]:
    """The GEMV configs worth timing on ``w``: the word GEMV's that its layout allows (:func:`_word_piece`,
    :func:`_words`), or the byte GEMV's where it allows none."""
    _check_weight("gemv_candidates", w)
    if _words(w) is not None:
        words = tuple(c for c in WORD_GEMV_CONFIGS if _word_piece(w.shape[1], w.group_size, c.block_k // 8))
        if words:
            return words
    return GEMV_CONFIGS


def _gemv(x: torch.Tensor, w: Int4Weight, bias: torch.Tensor | None, cfg: Int4GemvConfig | None) -> torch.Tensor:
    """The word GEMV where the weight allows it (:func:`_word_piece`, :func:`_words`), else the byte GEMV;
    ``cfg`` None: the default of the kernel that runs."""
    (M, K), N = x.shape, w.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if not (M and N):
        return out
    block_m = triton.next_power_of_2(M)
    word_cfg = cfg if cfg is not None else WORD_GEMV_DEFAULTS[block_m]
    piece = _word_piece(K, w.group_size, word_cfg.block_k // 8) if word_cfg.words else None
    words = _words(w) if piece is not None else None
    if cfg is not None and cfg.words and words is None:
        raise ValueError(f"int4_gemv: config {cfg} needs K a multiple of 8 ({K}), packed codes aligned to 4 bytes "
                         f"and groups ({w.group_size}) of whole words that tile block_k or that it tiles")
    if words is not None:
        _gemv_words_kernel[(triton.cdiv(N, word_cfg.block_n),)](
            x, words, w.scales, w.zeros if w.zeros is not None else w.packed,
            w.perm if w.perm is not None else w.packed, bias if bias is not None else out, out,
            x.stride(0), out.stride(0),
            M, N, K // 8, w.group_size, w.num_groups, MAGIC_BITS,
            BLOCK_M=block_m, BLOCK_N=word_cfg.block_n, BLOCK_W=word_cfg.block_k // 8, PIECE=piece,
            HAS_ZEROS=w.zeros is not None, HAS_PERM=w.perm is not None, HAS_BIAS=bias is not None,
            EVEN_K=K % word_cfg.block_k == 0,
            num_warps=word_cfg.num_warps, num_stages=pipeline_stages(word_cfg.num_stages))
        return out
    cfg = cfg if cfg is not None else DEFAULT_GEMV_CONFIG
    _gemv_kernel[(triton.cdiv(N, cfg.block_n),)](
        x, *_weight_args(w), bias if bias is not None else out, out,
        x.stride(0), out.stride(0),
        M, N, K, w.group_size, w.num_groups,
        BLOCK_M=block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        SUB=_sub(cfg.block_k, K, w.group_size), HAS_ZEROS=w.zeros is not None, HAS_PERM=w.perm is not None,
        HAS_BIAS=bias is not None, EVEN_K=K % cfg.block_k == 0,
        num_warps=cfg.num_warps, num_stages=pipeline_stages(cfg.num_stages))
    return out


def int4_matmul(x: torch.Tensor, w: Int4Weight, bias: torch.Tensor | None = None, *,
                config: Int4MatmulConfig | None = None) -> torch.Tensor:
    """``x [M, K] @ W^T (+ bias [N])`` -> ``[M, N]`` in x's dtype on the tensor cores, any M (meant for
    ``MAX_M < M <= MATMUL_MAX_M``). Operands as :func:`int4_gemv`'s; the weight is dequantized to x's dtype
    (one rounding of the fp32 ``(q - zero) * scale``) and multiplied in it (fp32 x: full fp32 products, not
    TF32), fp32 sums, the bias added in fp32, the result rounded once. ``config``: default
    :func:`select_int4_matmul_config`'s. A ``block_k`` that neither divides ``group_size`` nor fits a row of
    one group is still right (pieces of the step, module docstring), just slower."""
    M, N, K = _check_operands("int4_matmul", x, w, bias)
    if config is not None and not isinstance(config, Int4MatmulConfig):
        raise TypeError(f"int4_matmul: config must be an Int4MatmulConfig, got {type(config).__name__}")
    return _matmul(x, w, bias, config or select_int4_matmul_config(M, N, K, w.group_size, x_dtype=x.dtype))


def _matmul(x: torch.Tensor, w: Int4Weight, bias: torch.Tensor | None, cfg: Int4MatmulConfig) -> torch.Tensor:
    (M, K), N = x.shape, w.shape[0]
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M and N:
        _matmul_kernel[(triton.cdiv(N, cfg.block_n), triton.cdiv(M, cfg.block_m))](
            x, *_weight_args(w), bias if bias is not None else out, out,
            x.stride(0), out.stride(0),
            M, N, K, w.group_size, w.num_groups,
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, SUB=_sub(cfg.block_k, K, w.group_size),
            HAS_ZEROS=w.zeros is not None, HAS_PERM=w.perm is not None, HAS_BIAS=bias is not None,
            EVEN_K=K % cfg.block_k == 0, DOT_PRECISION="ieee" if x.dtype == torch.float32 else None,
            num_warps=cfg.num_warps, num_stages=pipeline_stages(cfg.num_stages))
    return out


def int4_linear(x: torch.Tensor, w: Int4Weight, bias: torch.Tensor | None = None, *,
                gemv_config: Int4GemvConfig | None = None) -> torch.Tensor:
    """``x [..., K] @ W^T (+ bias [N])`` -> ``[..., N]`` in x's dtype (float16, bfloat16 or float32), by the
    row count M of x flattened to ``[M, K]``: :func:`int4_gemv` for M <= ``MAX_M``, :func:`int4_matmul` for
    M <= ``MATMUL_MAX_M``, else :func:`dequantize_int4` to x's dtype and ``F.linear`` (a temporary ``[N, K]``
    weight). M = 0: an empty result. x is copied only where its last dimension is strided or its leading
    dimensions cannot be flattened without a copy. ``gemv_config``: the GEMV's config where it runs (a tuned
    choice, e.g. ``LinearDispatch.tune``'s; default: the word GEMV's default for the row count, or the byte
    GEMV's where the weight does not allow words)."""
    _check_weight("int4_linear", w)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"int4_linear: x must be a torch.Tensor, got {type(x).__name__}")
    if gemv_config is not None and not isinstance(gemv_config, Int4GemvConfig):
        raise TypeError(f"int4_linear: gemv_config must be an Int4GemvConfig, got {type(gemv_config).__name__}")
    if x.dim() < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"int4_linear: x must be [..., {w.shape[1]}] (K of the weight [{w.shape[0]}, "
                         f"{w.shape[1]}]), got {tuple(x.shape)}")
    lead = x.shape[:-1]
    x2 = x.reshape(math.prod(lead), x.shape[-1])
    if x2.shape[1] > 1 and x2.stride(1) != 1:
        x2 = x2.contiguous()
    M, N, K = _check_operands("int4_linear", x2, w, bias)
    if M <= MAX_M:
        y = _gemv(x2, w, bias, gemv_config)
    elif M <= MATMUL_MAX_M:
        y = _matmul(x2, w, bias, select_int4_matmul_config(M, N, K, w.group_size, x_dtype=x2.dtype))
    else:
        y = F.linear(x2, dequantize_int4(w, x2.dtype), bias)
    return y.reshape(*lead, w.shape[0])


def int4_warm_rows(N: int, K: int, group_size: int, max_rows: int, device: torch.device | None = None) -> list[int]:
    """Row counts (1..``max_rows``) whose :func:`int4_linear` calls on an ``[N, K]`` weight of ``group_size``
    between them compile every kernel variant that calls of up to ``max_rows`` rows can launch: the GEMV's
    1, 2 and 4 rows (its accumulator's rows, next_power_of_2(M)), one row count per distinct matmul
    configuration, and one past ``MATMUL_MAX_M`` (the dequantization). ``device``: unused (the selection is
    the same on every GPU for now)."""
    rows = [m for m in (1, 2, 4) if m <= max_rows]
    seen = set()
    for m in range(MAX_M + 1, min(max_rows, MATMUL_MAX_M) + 1):
        cfg = select_int4_matmul_config(m, N, K, group_size)
        if cfg not in seen:
            seen.add(cfg)
            rows.append(m)
    if max_rows > MATMUL_MAX_M:
        rows.append(MATMUL_MAX_M + 1)
    return rows
