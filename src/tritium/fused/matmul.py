"""tritium's GEMM: ``c = a @ b`` in Triton, persistent over output tiles, TMA on Hopper.

    c = matmul(a, b)                # a [M, K] @ b [K, N] -> c [M, N], a's dtype, fp32 accumulation
    matmul(a, b, out=c)             # no allocation, no host sync: capturable in a CUDA graph

One launch of ``min(tiles, SMs)`` programs; program ``p`` computes output tiles ``p, p + P, p + 2P, ...``
in *grouped* order (``GROUP_M`` row blocks walk the N tiles together, so the B columns they share are
read from L2 rather than HBM). On NVIDIA sm_90+ (and under the interpreter, which emulates it) the
operands are read through TMA descriptors built on the device with ``tl.make_tensor_descriptor``: out of
bounds elements come back as zeros, so edge tiles and a ragged K need no masks, and the loads feed the
``wgmma`` pipeline straight from shared memory. Shapes TMA cannot take (a base or row stride not a
multiple of 16 bytes, a last dimension that is not contiguous) use the same loop on masked pointer loads.

The device-side descriptors live in a small global scratch buffer that Triton asks for at every launch
(128 bytes per descriptor per program). :class:`_StreamBuffers` is installed once as Triton's
allocator (only where none was set) and hands out one buffer per (device, stream), grown once, so a
steady-state call allocates nothing.

Decode shapes (M <= 64) have fewer output tiles than SMs: there each tile's K range is split into pieces
that different programs compute (``split_k``); the last piece to finish sums them (fp32 atomics into a
per-stream workspace that every call leaves zeroed) and stores the tile.

Building blocks for the fused kernels (:mod:`tritium.fused`): a persistent kernel that waits on flags
between tiles calls the same ``@triton.jit`` functions as :func:`_matmul_kernel` does::

    a, b, c = matmul_operands(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                              stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, EPILOGUE_SPLIT, USE_TMA, B_KMAJOR)
    for tile_id in tl.range(tl.program_id(0), num_tiles, num_programs):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        ... wait for the rows of A in block pid_m to arrive ...
        acc = matmul_tile(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, K, M, N, stride_am, stride_ak, stride_bk,
                          stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, B_KMAJOR, EVEN_K, DOT_PRECISION)
        store_tile(c, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N, stride_cm, stride_cn,
                   BLOCK_M, BLOCK_N, EPILOGUE_SPLIT, USE_TMA)   # or reduce / send acc instead

``matmul_tile`` takes a K range (``k_start``, ``k_end``), so a kernel can also compute a tile piece by
piece as its K slices arrive. The launcher's arguments for them (TMA or not, EVEN_K, DOT_PRECISION, the
configuration) come from :func:`select_config` and :func:`launch_options`.

Reference: :func:`tritium.fused.reference.matmul`.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.runtime import _allocation

from tritium.ops.quant import QUANTIZED_DTYPES, check_row_scales
from tritium.runtime import default_device, interpreting, num_sms, pipeline_stages

DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class MatmulConfig:
    """One compiled variant: output tile ``block_m x block_n``, K step ``block_k``, ``group_m`` row blocks
    per L2 group, warps, pipeline depth, the TMA store split in ``epilogue_split`` column slices (less
    shared memory for the epilogue, more for the pipeline), whether the tile loop and the K loop are
    flattened into one pipelined loop (the next tile's loads overlap this tile's epilogue), whether TMA
    may be used (it is used only where the operands allow it), and ``split_k``: each tile's K range cut in
    that many pieces computed by different programs and summed in fp32 by the last to finish (decode:
    more programs streaming B than there are output tiles)."""
    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    epilogue_split: int = 1
    flatten: bool = True
    tma: bool = True
    split_k: int = 1

    def __str__(self) -> str:
        return (f"m{self.block_m}-n{self.block_n}-k{self.block_k}-g{self.group_m}-w{self.num_warps}"
                f"-s{self.num_stages}-e{self.epilogue_split}{'-flat' if self.flatten and self.split_k == 1 else ''}"
                f"{'' if self.tma else '-notma'}{f'-split{self.split_k}' if self.split_k > 1 else ''}")


# Candidates timed by `python -m tritium.bench gemm --sweep` (bench/NOTES.md, "GEMM"); select_config
# picks among them.
LARGE_CONFIGS = (
    MatmulConfig(128, 256, 64, num_warps=8, num_stages=3, epilogue_split=2),
    MatmulConfig(128, 256, 64, num_warps=8, num_stages=4, epilogue_split=2),
    MatmulConfig(128, 256, 64, num_warps=8, num_stages=3, epilogue_split=1),
    MatmulConfig(128, 256, 64, num_warps=8, num_stages=3, epilogue_split=2, flatten=False),
    MatmulConfig(128, 256, 64, num_warps=8, num_stages=4, epilogue_split=2, flatten=False),
    MatmulConfig(128, 256, 64, num_warps=8, num_stages=3, epilogue_split=2, group_m=16),
    MatmulConfig(256, 128, 64, num_warps=8, num_stages=3, epilogue_split=2),
    MatmulConfig(128, 128, 64, num_warps=8, num_stages=4),
    MatmulConfig(128, 128, 64, num_warps=4, num_stages=4),
    MatmulConfig(128, 128, 128, num_warps=8, num_stages=3),
)
# decode (M <= 64): one 64-row warpgroup tile (16 rows: mma.sync, less shared memory per stage); B streams
# through a deep pipeline; split_k is set per shape by decode_split_k
DECODE_CONFIGS = (
    MatmulConfig(64, 128, 128, num_warps=4, num_stages=4),
    MatmulConfig(64, 64, 128, num_warps=4, num_stages=6),
    MatmulConfig(64, 64, 256, num_warps=4, num_stages=3),
    MatmulConfig(16, 128, 128, num_warps=4, num_stages=6),
    MatmulConfig(16, 64, 256, num_warps=4, num_stages=5),
)
CONFIGS = LARGE_CONFIGS + DECODE_CONFIGS

# NOTE: H100 sweep, run 1 (bench/NOTES.md "GEMM"): 128x256x64, 8 warps, 3 stages, store in two halves,
# flattened loop: 795-807 TFLOP/s at M = 2048 and 689-708 at M = 16384 / 8192^3 (0.99-1.07x cuBLAS) where
# the tiles fill whole waves; other 128x256 variants within run-to-run noise (+-5%), 256x128 and 128x128x128
# 5-20% slower. 128x128 (4 warps, 4 stages) wins only where 128x256 leaves the last wave mostly empty:
# up-tp4-m2048 (448 tiles = 3.4 waves of 132) 694 vs 636-659 TFLOP/s.
_WIDE = MatmulConfig(128, 256, 64, num_warps=8, num_stages=3, epilogue_split=2)
_NARROW = MatmulConfig(128, 128, 64, num_warps=4, num_stages=4)
_NARROW_RATE = 0.9  # 128x128 throughput per SM relative to 128x256 (run 1: 708-716 vs 795-805 TFLOP/s)
# NOTE: run 1, no split: B read at 1.4-2.1 TB/s with 56-224 programs against cuBLAS's 2.6-3.0 (graph
# replays): too few bytes in flight. 64x128x128, 4 stages, split by decode_split_k: 2.6-2.8 TB/s (run 3).
_DECODE = MatmulConfig(64, 128, 128, num_warps=4, num_stages=4)


# W8A8 (fp8 a and b): H200, Llama-3-8B projections, graph replays over 8 weight copies (bench/probe_fp8_linear.py,
# stop 62; us a call, bf16 cuBLAS in brackets): 16-row tiles with 256-wide K steps to 16 rows (qkv 13.7-14.2
# [15.2-15.6], gate_up 36.1-51.1 [54.8-56.0]); 64-row ones to 64 (gate_up 36.2 [60.6], o 11.0 [12.1]); above,
# 128 x 256 x 128 (qkv 84.1 at 2048 rows [153.0], gate_up 57.6-59.4 at 256 [100.7]; the 64-wide K step of the
# 16-bit tiles: 85.9-112.3) or 128 x 128 x 128 where the wide tiles leave a wave mostly empty (qkv and o at 256
# rows: 18.3-19.1 vs 30+ wide [17.3-23.4]).
_FP8_SMALL = MatmulConfig(16, 128, 256, num_warps=4, num_stages=5)
_FP8_DECODE = MatmulConfig(64, 128, 256, num_warps=4, num_stages=4)
_FP8_WIDE = MatmulConfig(128, 256, 128, num_warps=8, num_stages=3, epilogue_split=2)
_FP8_NARROW = MatmulConfig(128, 128, 128, num_warps=8, num_stages=4)


# Batch invariance (``invariant_config``). Measured on the H200 (bench/probe_invariance.py, stop 54; bf16 K=4096 and
# fp16 K=14336, M from 1 to 2048): without split-K every tile shape gives each row the same bits at every M
# (16- and 64-row tiles, mma.sync and wgmma, TMA or pointer loads, 64- and 128-wide K steps, 16- to 256-wide
# N tiles); split-K changes them (the pieces' sums meet in another order). Graph-replayed, on the Llama-3-8B
# projections at M = 1, these two stream within 0-15% of cuBLAS (qkv 16.8-17.4 vs 15.1 us, o 13.5 vs 10.7,
# gate_up 65.2 vs 60.9, down 35.1 vs 32.1, lm_head 246.9 vs 242.4); the 64-row tiles lose 1.5-2x there.
INVARIANT_SMALL = MatmulConfig(16, 64, 256, num_warps=4, num_stages=5)   # M <= 16
INVARIANT_MEDIUM = MatmulConfig(64, 64, 128, num_warps=4, num_stages=6)  # M <= 64
_INVARIANT_PORTABLE = MatmulConfig(64, 64, 32, num_warps=4, num_stages=3)
_FP8_INVARIANT = MatmulConfig(64, 64, 128, num_warps=4, num_stages=4)  # W8A8 on NVIDIA GPUs, every M


def _cdiv(a: int, b: int) -> int:
    # NOTE: not triton.cdiv, a jit-wrapped function: 6 us a call on the host, 100 us a matmul call in all
    return -(-a // b)


def _wave_efficiency(units: int, sms: int) -> float:
    """Busy fraction of the persistent programs when ``units`` equal pieces of work are dealt to ``sms``."""
    return units / (_cdiv(units, sms) * sms)


def decode_split_k(M: int, N: int, K: int, cfg: MatmulConfig, sms: int) -> int:
    """The fewest K pieces per tile that keep >= 90% of the SMs busy (tiles x pieces close to a multiple of
    the SM count), each piece at least 4 K steps long and the fp32 partial sums (M x N x 4 bytes a piece)
    at most 1/64 of the bytes of B; the best-filled count when none reaches 90%.

    NOTE: H100 run 3 (graph replays, bench/NOTES.md "GEMM"): at M = 1 and 8 splitting gives 84-91 us for
    the 235 MB up/down weights of 2 GPUs (cuBLAS 79-80; 114-139 unsplit in run 1); at M = 64 the partial
    sums cost more than the idle SMs: 176-181 TFLOP/s unsplit vs 152-173 split in two, so M = 64 never
    splits (the 1/64 cap)."""
    tiles = _cdiv(M, cfg.block_m) * _cdiv(N, cfg.block_n)
    k_steps = _cdiv(K, cfg.block_k)
    best, best_eff = 1, _wave_efficiency(tiles, sms)
    for split in range(1, 17):
        if k_steps // split < 4 or (split > 1 and 128 * M * split > K):
            break
        eff = _wave_efficiency(tiles * split, sms)
        if eff >= 0.9:
            return split
        if eff > best_eff + 1e-9:
            best, best_eff = split, eff
    return best


@functools.lru_cache(maxsize=1024)
def select_config(M: int, N: int, K: int, dtype: torch.dtype, device: torch.device) -> MatmulConfig:
    """The configuration for an ``[M, K] @ [K, N]`` product, from the shape and the GPU's SM count (``dtype``: A's;
    float8_e4m3fn for a W8A8 product)."""
    sms = num_sms(device)
    if dtype == torch.float32:
        # fp32 runs the exact (ieee) dot: CPU tests and correctness, not speed.
        return MatmulConfig(64, 64, 32, num_warps=4, num_stages=3)
    fp8 = dtype in QUANTIZED_DTYPES  # W8A8: fp8 activations too
    if M <= 64:
        cfg = (_FP8_SMALL if M <= 16 else _FP8_DECODE) if fp8 else _DECODE
        return dataclasses.replace(cfg, split_k=decode_split_k(M, N, K, cfg, sms))
    # time ~ waves x tile area / rate: the narrow tile only where the wide one wastes most of a wave
    wide = _cdiv(_cdiv(M, 128) * _cdiv(N, 256), sms) * 2
    narrow = _cdiv(_cdiv(M, 128) * _cdiv(N, 128), sms) / _NARROW_RATE
    if fp8:
        return _FP8_WIDE if wide <= narrow else _FP8_NARROW
    return _WIDE if wide <= narrow else _NARROW


def invariant_config(M: int, N: int, K: int, dtype: torch.dtype, device: torch.device) -> MatmulConfig:
    """A configuration for ``[M, K] @ [K, N]`` under which each row of the product has the same bits at
    every M (batch invariance: a token's projection does not depend on the other tokens of its batch).

    Never split-K. On NVIDIA GPUs the tile is chosen by M for speed (every tile shape gives the same bits
    there; see the note above): 16-row tiles to 16 rows, 64-row tiles to 64, then :func:`select_config`'s;
    a W8A8 product (``dtype`` float8_e4m3fn) one 64 x 64 x 128 tile at every M.
    Elsewhere (fp32, the interpreter, AMD: its matrix cores' order is not measured) one tile for every M.
    Under the interpreter the rows are independent only with ``tritium.testing.row_dot``: numpy's BLAS sums
    a row's products in an order that depends on the row's place in the block."""
    if dtype == torch.float32 or device.type != "cuda" or interpreting() or torch.version.hip is not None:
        return _INVARIANT_PORTABLE
    if dtype in QUANTIZED_DTYPES:
        # W8A8: one tile for every M. The fp8 MMA sums each K step in a short accumulator before fp32 (see
        # _dot): a K step of another width, or mma.sync (16-row tiles) instead of wgmma, may round otherwise;
        # measured for 16-bit tiles only (the note above), so the fp8 ones are not mixed
        return _FP8_INVARIANT
    if M <= 16:
        return INVARIANT_SMALL
    if M <= 64:
        return INVARIANT_MEDIUM
    return dataclasses.replace(select_config(M, N, K, dtype, device), split_k=1)


# ----------------------------------------------------------------------------------------------------
# Device building blocks (also called by the fused GEMM + communication kernels)


@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Output tile ``(pid_m, pid_n)`` of the ``tile_id``-th tile in grouped order: ``GROUP_M`` consecutive
    row blocks sweep the N tiles together (column-major inside the group), so a B column block loaded for
    one row block is still in L2 for the next ``GROUP_M - 1``. A bijection onto the tile grid."""
    tiles_per_group = GROUP_M * num_pid_n
    first_m = (tile_id // tiles_per_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)  # the last group may be short
    in_group = tile_id % tiles_per_group
    return first_m + in_group % rows, in_group // rows


@triton.jit
def matmul_operands(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr,
    USE_TMA: tl.constexpr, B_KMAJOR: tl.constexpr,
):
    """What :func:`matmul_tile` and :func:`store_tile` read and write: TMA descriptors of A ``[M, K]``,
    B (``[K, N]``, or ``[N, K]`` rows when ``B_KMAJOR``: b is the transpose of a row-major weight) and C
    ``[M, N]`` when ``USE_TMA`` (last dimensions contiguous, bases and row strides 16-byte aligned: the
    launcher checks), else the pointers themselves. Build them once per program, before the tile loop."""
    if USE_TMA:
        a = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
        if B_KMAJOR:
            b = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                          block_shape=[BLOCK_N, BLOCK_K])
        else:
            b = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                          block_shape=[BLOCK_K, BLOCK_N])
        c = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                      block_shape=[BLOCK_M, BLOCK_N // EPILOGUE_SPLIT])
    else:
        a = a_ptr
        b = b_ptr
        c = c_ptr
    return a, b, c


@triton.jit
def _dot(a_tile, b_tile, acc, BLOCK_K: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """``acc + a_tile @ b_tile`` in fp32. fp8 operands (W8A8): each K step's products are summed apart and then
    added to ``acc`` in full fp32 (``max_num_imprecise_acc=BLOCK_K``). NOTE: Hopper's fp8 MMA adds into its
    accumulator with fewer bits than fp32; Triton's sm_90 default keeps every K step in it, which gave a
    relative error of 1.2e-4 at K = 112 on the H200 (fp32 output; exact products would give 1e-7) and grows
    with K. Promoting once per K step of 64-256 is what cuBLAS does for fp8 unless asked for fast accumulation."""
    if a_tile.dtype.is_fp8():
        return tl.dot(a_tile, b_tile, acc, max_num_imprecise_acc=BLOCK_K)
    return tl.dot(a_tile, b_tile, acc, input_precision=DOT_PRECISION)


@triton.jit
def matmul_tile(
    a, b,
    off_m, off_n, k_start, k_end,
    M, N,
    stride_am, stride_ak, stride_bk, stride_bn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    USE_TMA: tl.constexpr, B_KMAJOR: tl.constexpr, EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """``A[off_m : off_m + BLOCK_M, k_start:k_end] @ B[k_start:k_end, off_n : off_n + BLOCK_N]`` as an fp32
    ``[BLOCK_M, BLOCK_N]`` accumulator (the whole product: ``k_start = 0, k_end = K``); a B of another dtype
    than A (a quantized fp8 weight) is converted to A's tile by tile. ``a``, ``b`` come
    from :func:`matmul_operands`; ``k_start`` is a multiple of BLOCK_K and ``k_end`` one too or K. Rows past
    M, columns past N and K past ``k_end`` read as zeros (TMA fills what lies outside the tensor; the
    pointer path masks), so the caller masks only what it stores. ``EVEN_K``: K is a multiple of BLOCK_K
    (the pointer path then skips the K mask)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)                           # [BLOCK_M, BLOCK_N]
    steps = tl.cdiv(k_end - k_start, BLOCK_K)
    if USE_TMA:
        for i in range(0, steps):
            k = k_start + i * BLOCK_K
            a_tile = a.load([off_m, k])                                            # [BLOCK_M, BLOCK_K]
            if B_KMAJOR:
                b_tile = b.load([off_n, k]).T                                      # [BLOCK_K, BLOCK_N]
            else:
                b_tile = b.load([k, off_n])                                        # [BLOCK_K, BLOCK_N]
            if b_tile.dtype != a_tile.dtype:  # a quantized (fp8) weight: converted in registers
                b_tile = b_tile.to(a_tile.dtype)
            acc = _dot(a_tile, b_tile, acc, BLOCK_K, DOT_PRECISION)
    else:
        rows = off_m + tl.arange(0, BLOCK_M)                                       # [BLOCK_M]
        cols = off_n + tl.arange(0, BLOCK_N)                                       # [BLOCK_N]
        ks = k_start + tl.arange(0, BLOCK_K)                                       # [BLOCK_K]
        a_ptrs = a + rows.to(tl.int64)[:, None] * stride_am + ks[None, :] * stride_ak   # [BLOCK_M, BLOCK_K]
        b_ptrs = b + ks.to(tl.int64)[:, None] * stride_bk + cols[None, :] * stride_bn   # [BLOCK_K, BLOCK_N]
        a_mask = rows[:, None] < M
        b_mask = cols[None, :] < N
        for i in range(0, steps):
            if EVEN_K:
                a_tile = tl.load(a_ptrs, mask=a_mask, other=0.0)
                b_tile = tl.load(b_ptrs, mask=b_mask, other=0.0)
            else:
                k_left = k_end - i * BLOCK_K
                a_tile = tl.load(a_ptrs, mask=a_mask & (ks[None, :] < k_left), other=0.0)
                b_tile = tl.load(b_ptrs, mask=b_mask & (ks[:, None] < k_left), other=0.0)
            if b_tile.dtype != a_tile.dtype:
                b_tile = b_tile.to(a_tile.dtype)
            acc = _dot(a_tile, b_tile, acc, BLOCK_K, DOT_PRECISION)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def store_tile(
    c, acc,
    off_m, off_n,
    M, N,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr, USE_TMA: tl.constexpr,
):
    """Write the fp32 tile ``acc`` [BLOCK_M, BLOCK_N] to ``C[off_m:, off_n:]`` in C's dtype, clipped to
    [M, N]. ``c`` from :func:`matmul_operands`; with TMA the store goes out in ``EPILOGUE_SPLIT`` (1 or 2)
    column slices, which is what the descriptor's block shape was built for."""
    if USE_TMA:
        if EPILOGUE_SPLIT == 2:
            halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)                                         # [BLOCK_M, BLOCK_N // 2]
            c.store([off_m, off_n], left.to(c.dtype))
            c.store([off_m, off_n + BLOCK_N // 2], right.to(c.dtype))
        else:
            c.store([off_m, off_n], acc.to(c.dtype))
    else:
        rows = off_m + tl.arange(0, BLOCK_M)
        cols = off_n + tl.arange(0, BLOCK_N)
        c_ptrs = c + rows.to(tl.int64)[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(c.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def reduce_split_tile(
    c, acc, partial_ptr, count_ptr,
    off_m, off_n,
    M, N,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr,
    USE_TMA: tl.constexpr,
):
    """Split-K epilogue: add this piece's fp32 ``acc`` into the tile's partial sums (``partial_ptr``: fp32
    ``[M, N]``, contiguous, zero between calls) and count it in (``count_ptr``: this tile's int32 counter,
    zero between calls). The program whose piece arrives last stores the sum with :func:`store_tile` and
    puts partials and counter back to zero, so the next call (or graph replay) needs no reset kernel."""
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    ptrs = partial_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :]           # [BLOCK_M, BLOCK_N]
    tl.atomic_add(ptrs, acc, mask=mask, sem="relaxed", scope="gpu")
    tl.debug_barrier()  # every thread's partial sums before the one thread that counts them in (release)
    arrived = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT_K - 1:
        # the other pieces' sums were released before their counts: read them from L2, not a stale L1
        total = tl.load(ptrs, mask=mask, other=0.0, cache_modifier=".cg")
        tl.store(ptrs, tl.zeros_like(total), mask=mask)
        tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")
        store_tile(c, total, off_m, off_n, M, N, stride_cm, stride_cn, BLOCK_M, BLOCK_N, EPILOGUE_SPLIT, USE_TMA)


@triton.jit
def _scale_columns(acc, scale_ptr, off_n, N, BLOCK_N: tl.constexpr):
    """``acc [BLOCK_M, BLOCK_N]`` times the column scales ``scale[off_n : off_n + BLOCK_N]`` (0 past N)."""
    cols = off_n + tl.arange(0, BLOCK_N)
    return acc * tl.load(scale_ptr + cols, mask=cols < N, other=0.0)[None, :]


@triton.jit
def _scale_rows(acc, scale_ptr, off_m, M, BLOCK_M: tl.constexpr):
    """``acc [BLOCK_M, BLOCK_N]`` times the row scales ``scale[off_m : off_m + BLOCK_M]`` (0 past M)."""
    rows = off_m + tl.arange(0, BLOCK_M)
    return acc * tl.load(scale_ptr + rows, mask=rows < M, other=0.0)[:, None]


@triton.jit
def _matmul_kernel(
    # pointers
    a_ptr, b_ptr, c_ptr,
    partial_ptr, count_ptr,  # split-K workspace (fp32 [M, N] and int32 [tiles], zeros); None without split
    scale_ptr,  # fp32 [N]: B's column scales (a quantized weight's row scales), with B_SCALED
    a_scale_ptr,  # fp32 [M]: A's row scales (fp8 activations quantized per token), with A_SCALED
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # sizes
    M, N, K, num_programs,
    # meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr, FLATTEN: tl.constexpr, USE_TMA: tl.constexpr,
    B_KMAJOR: tl.constexpr, EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr, B_SCALED: tl.constexpr = False,
    A_SCALED: tl.constexpr = False,
):
    a, b, c = matmul_operands(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                              stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, EPILOGUE_SPLIT, USE_TMA, B_KMAJOR)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    if SPLIT_K == 1:
        for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, num_programs, flatten=FLATTEN):
            pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
            acc = matmul_tile(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, K, M, N, stride_am, stride_ak, stride_bk,
                              stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, B_KMAJOR, EVEN_K, DOT_PRECISION)
            if B_SCALED:
                acc = _scale_columns(acc, scale_ptr, pid_n * BLOCK_N, N, BLOCK_N)
            if A_SCALED:
                acc = _scale_rows(acc, a_scale_ptr, pid_m * BLOCK_M, M, BLOCK_M)
            store_tile(c, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N, stride_cm, stride_cn,
                       BLOCK_M, BLOCK_N, EPILOGUE_SPLIT, USE_TMA)
    else:
        # work unit = (tile, piece of K); a tile's pieces are consecutive units, so they run side by side
        k_blocks = tl.cdiv(K, BLOCK_K)
        for unit in tl.range(tl.program_id(0), num_pid_m * num_pid_n * SPLIT_K, num_programs):
            tile_id = unit // SPLIT_K
            piece = unit % SPLIT_K
            pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
            k_start = (piece * k_blocks // SPLIT_K) * BLOCK_K  # K blocks dealt out evenly
            k_end = tl.minimum(((piece + 1) * k_blocks // SPLIT_K) * BLOCK_K, K)
            acc = matmul_tile(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, k_start, k_end, M, N, stride_am, stride_ak,
                              stride_bk, stride_bn, BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, B_KMAJOR, EVEN_K,
                              DOT_PRECISION)
            if B_SCALED:  # each piece scaled: the scale is per column, so the sum of the pieces is too
                acc = _scale_columns(acc, scale_ptr, pid_n * BLOCK_N, N, BLOCK_N)
            if A_SCALED:
                acc = _scale_rows(acc, a_scale_ptr, pid_m * BLOCK_M, M, BLOCK_M)
            reduce_split_tile(c, acc, partial_ptr, count_ptr + tile_id, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N,
                              stride_cm, stride_cn, BLOCK_M, BLOCK_N, SPLIT_K, EPILOGUE_SPLIT, USE_TMA)


# ----------------------------------------------------------------------------------------------------
# Host side


class _StreamBuffers:
    """Device buffers kept per (purpose, device, stream) and grown when a launch needs more, so steady-state
    calls allocate nothing and a CUDA graph replays with the buffers it captured. Per stream because
    launches on one stream run in order; two streams would race on a shared buffer. Two purposes:

    - the global scratch of TMA descriptors built on the device (Triton asks for 128 bytes per
      descriptor per program at every launch): the object is installed as Triton's allocator;
    - the split-K workspace (fp32 partial sums and per-tile counters), zeroed once; every call leaves
      it zeroed again (:func:`reduce_split_tile`).
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple, torch.Tensor] = {}

    def get(self, purpose: str, numel: int, dtype: torch.dtype, device: torch.device, stream: int) -> torch.Tensor:
        key = (purpose, device, stream)
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = torch.zeros(numel, dtype=dtype, device=device)
            self._buffers[key] = buf
        return buf[:numel]

    def __call__(self, size: int, alignment: int, stream: int | None) -> torch.Tensor:
        """Triton's allocator interface. torch's blocks are 512-byte aligned (Triton asks for 128); at
        least 64 KiB: 3 descriptors x 128 bytes x 132 programs fit, one allocation per stream."""
        device = torch.device("cuda", torch.cuda.current_device())
        return self.get("tma-scratch", max(size, 64 << 10), torch.uint8, device, stream or 0)


_BUFFERS = _StreamBuffers()


def _install_scratch_allocator() -> None:
    """Make :data:`_BUFFERS` Triton's allocator unless the application installed its own."""
    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(_BUFFERS)


def _tma_supported(device: torch.device) -> bool:
    """TMA descriptors: NVIDIA sm_90+ compiled, or the interpreter (which emulates them, checks included)."""
    if device.type == "cpu":
        return interpreting()
    if device.type != "cuda" or interpreting() or torch.version.hip is not None:
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


def _tma_view(t: torch.Tensor) -> bool:
    """A 2-D tensor a TMA descriptor can describe: contiguous rows, base and row stride 16-byte aligned."""
    size = t.element_size()
    return t.stride(1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * size) % 16 == 0


def _check(a, b, out, b_scale=None, a_scale=None, out_dtype=None) -> torch.dtype:
    """Checks the arguments of :func:`matmul`; returns the output's dtype."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    if a_scale is not None:  # W8A8: fp8 a with row scales, fp8 b with column scales, output in out_dtype
        if a.dtype not in QUANTIZED_DTYPES:
            raise TypeError(f"a_scale is for a quantized a ({', '.join(map(str, QUANTIZED_DTYPES))}), got a {a.dtype}")
        check_row_scales("a_scale", a_scale, a.shape[0], a.device, "one scale per row of a")
        if b.dtype != a.dtype or b_scale is None:
            raise TypeError(f"an fp8 a multiplies an fp8 b of its dtype ({a.dtype}) with b_scale, got b {b.dtype}"
                            f"{'' if b_scale is not None else ' without b_scale'}")
        dtype = out.dtype if isinstance(out, torch.Tensor) else out_dtype
        if dtype not in DTYPES or (out_dtype is not None and dtype != out_dtype):
            raise TypeError(f"an fp8 product needs its output dtype (out, or out_dtype: one of "
                            f"{', '.join(map(str, DTYPES))}), got out_dtype {out_dtype}"
                            + (f" and out {out.dtype}" if isinstance(out, torch.Tensor) else ""))
    else:
        if a.dtype not in DTYPES:
            raise TypeError(f"a has dtype {a.dtype}; expected one of {', '.join(map(str, DTYPES))}"
                            + (" (an fp8 a needs a_scale)" if a.dtype in QUANTIZED_DTYPES else ""))
        if out_dtype is not None and out_dtype != a.dtype:
            raise TypeError(f"out_dtype {out_dtype} differs from a's {a.dtype}: only an fp8 product (a_scale) "
                            "chooses its output dtype")
        dtype = a.dtype
    if b_scale is not None:
        if b.dtype not in QUANTIZED_DTYPES:
            raise TypeError(f"b_scale is for a quantized b ({', '.join(map(str, QUANTIZED_DTYPES))}), got b {b.dtype}")
        check_row_scales("b_scale", b_scale, b.shape[1], a.device, "one scale per column of b")
    elif b.dtype != a.dtype:
        raise TypeError(f"b has dtype {b.dtype}, a has {a.dtype}: they must match"
                        + (" (a quantized b needs b_scale)" if b.dtype in QUANTIZED_DTYPES else ""))
    if b.device != a.device:
        raise ValueError(f"b is on {b.device}, a is on {a.device}: they must be on one device")
    if a.device.type != default_device().type:
        raise ValueError(f"a is on {a.device}, but tritium kernels run "
                         f"{'under the Triton interpreter (CPU tensors)' if interpreting() else 'on the GPU (cuda)'}")
    if b.shape[0] != a.shape[1]:
        raise ValueError(f"b must be [K, N] with K = {a.shape[1]} (a is {list(a.shape)}), got b {list(b.shape)}")
    if out is not None:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor, got {type(out).__name__}")
        shape = (a.shape[0], b.shape[1])
        if tuple(out.shape) != shape:
            raise ValueError(f"out must be {list(shape)}, got {list(out.shape)}")
        if out.dtype != dtype:
            raise TypeError(f"out has dtype {out.dtype}, a has {a.dtype}: they must match")
        if out.device != a.device:
            raise ValueError(f"out is on {out.device}, a is on {a.device}: they must be on one device")
    return dtype


def launch_options(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: MatmulConfig) -> dict:
    """Meta-parameters of a kernel built on the tile building blocks for ``out = a @ b`` (checked tensors,
    any strides) under ``config``: block sizes, ``GROUP_M``, ``EPILOGUE_SPLIT``, ``USE_TMA`` (where the
    configuration allows it, the device has TMA and all three tensors suit a descriptor; installs the
    descriptor scratch allocator), ``B_KMAJOR`` (b is the transpose of a row-major weight), ``EVEN_K``,
    ``DOT_PRECISION``, ``num_warps`` and ``num_stages``."""
    K = a.shape[1]
    b_kmajor = b.stride(0) == 1 and b.stride(1) != 1  # b = w.T with w [N, K] row-major
    use_tma = (config.tma and _tma_supported(a.device) and _tma_view(a) and _tma_view(b.t() if b_kmajor else b)
               and _tma_view(out))
    if use_tma and a.device.type == "cuda":
        _install_scratch_allocator()
    # NOTE: DOT_PRECISION "ieee" for every dtype: exact fp32 products, and 16-bit operands compile to the
    # same code under any precision (identical sm_90 PTX and gfx942 code with "tf32", checked on the fused
    # kernels' recorded fp16/bf16 launches), while gfx950 (MI350X) rejects "tf32" at compile time.
    return dict(BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
                EPILOGUE_SPLIT=config.epilogue_split, USE_TMA=use_tma, B_KMAJOR=use_tma and b_kmajor,
                EVEN_K=K % config.block_k == 0, DOT_PRECISION="ieee",
                num_warps=config.num_warps, num_stages=pipeline_stages(config.num_stages))


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *,
           config: MatmulConfig | None = None, num_programs: int | None = None,
           b_scale: torch.Tensor | None = None, a_scale: torch.Tensor | None = None,
           out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """``c = a @ b``: ``a [M, K]``, ``b [K, N]`` -> ``c [M, N]`` in a's dtype (fp16, bf16, or fp32), fp32
    accumulation; fp32 inputs use exact (ieee) products, not tf32.

    Any strides (a ``b`` that is the transpose of a row-major ``[N, K]`` weight keeps TMA); ``out`` (``[M,
    N]``, a's dtype and device; must not overlap a or b) is written in place and returned, so a call with
    ``out`` neither allocates nor synchronises with the host. ``config``: a :class:`MatmulConfig` instead
    of :func:`select_config`'s. ``num_programs``: how many persistent programs (default the SM count; fewer
    leave SMs to other work). ``b_scale``: b is a quantized weight (float8_e4m3fn, e.g. ``w8.t()``) whose
    column n is ``b_scale[n] * b[:, n]``: each tile of b is converted to a's dtype in registers and each
    column of the fp32 product scaled once (weight-only FP8, :mod:`tritium.ops.quant`). ``a_scale``: a is
    float8_e4m3fn too (activations quantized per row, :func:`tritium.ops.act_quant.quantize_activations_fp8`)
    with these fp32 row scales ``[M]``: fp8 times fp8 on the tensor cores, fp32 accumulation, each output
    scaled by its row's and its column's scale once (W8A8); the output dtype is ``out``'s or ``out_dtype``.
    """
    dtype = _check(a, b, out, b_scale, a_scale, out_dtype)
    M, K = a.shape
    N = b.shape[1]
    if out is None:
        out = torch.empty((M, N), dtype=dtype, device=a.device)
    if M == 0 or N == 0:
        return out
    if K == 0:
        return out.zero_()
    cfg = config or select_config(M, N, K, a.dtype, a.device)
    if a_scale is not None and cfg.block_k < 32:
        raise ValueError(f"config {cfg}: an fp8 product needs block_k >= 32 (the fp8 MMA's K), got {cfg.block_k}")
    tiles = _cdiv(M, cfg.block_m) * _cdiv(N, cfg.block_n)
    programs = min(tiles * cfg.split_k, num_programs or num_sms(a.device))
    partials = counts = None
    if cfg.split_k > 1:
        stream = torch.cuda.current_stream(a.device).cuda_stream if a.device.type == "cuda" else 0
        partials = _BUFFERS.get("split-k-partials", M * N, torch.float32, a.device, stream)
        counts = _BUFFERS.get("split-k-counts", tiles, torch.int32, a.device, stream)
    _matmul_kernel[(programs,)](
        a, b, out, partials, counts, b_scale, a_scale,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        M, N, K, programs,
        SPLIT_K=cfg.split_k, FLATTEN=cfg.flatten and cfg.split_k == 1, B_SCALED=b_scale is not None,
        A_SCALED=a_scale is not None,
        **launch_options(a, b, out, cfg),
    )
    return out
