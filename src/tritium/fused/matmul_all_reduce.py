"""GEMM + all-reduce: ``y = sum_r a_r @ b_r`` on every rank (the row-parallel layer: o_proj, down_proj;
decode M = 1..64 as well as prefill).

    y = matmul_all_reduce(a, b, comm, overlap="auto")   # a [M, k], b [k, N] -> y [M, N]

``overlap``:

- ``"bulk"``: tritium's GEMM, then tritium's all-reduce, in place.
- ``"producer_consumer"``: the kernels of :mod:`tritium.fused.matmul_reduce_scatter` with every tile pushed to
  every rank and a reduce kernel on a side stream reducing every tile.
- ``"fused"``: at decode sizes (16-bit floats, M <= ``LAMPORT_MAX_M`` and the product within the
  communicator's Lamport buffers) one launch: each compute program computes one tile of ``a @ b``
  (tensor-core tiles, K in pieces where the column tiles do not fill the SMs; a CUDA-core GEMV for gated
  products), pushes it into every rank's Lamport buffer (:mod:`tritium.collectives.lamport`: the data is
  its own flag) and exits; reduce programs, last in the grid, sum their share of the output from their
  own buffer as it arrives: no flag round, no second kernel, and the all-reduce of the first tiles runs
  under the GEMM of the last. Larger products: the reduce-scatter kernels' fused form (specialised
  compute and reduce programs).
- ``"auto"``: :func:`tritium.fused.overlap.select_overlap`.

Each rank's product is rounded to the output dtype before the fp32 sum (as bulk does), in rank order, so every
rank gets the same bits; the decode kernel may cut K in ``split`` pieces, each rounded, summed in the same
order on every rank. Reference: :func:`tritium.fused.reference.matmul_all_reduce`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tritium.collectives import Communicator
from tritium.collectives.common import LAMPORT_DTYPES
from tritium.collectives.kernels import count_mismatch, count_timeout, fail_fast, pdl_prologue
from tritium.collectives.lamport import (LAMPORT_MAX_PROGRAMS, LAMPORT_PARTIALS, lamport_absent, lamport_announce,
                                         lamport_begin, lamport_drain, lamport_extent, lamport_finish, lamport_header,
                                         lamport_key, lamport_push, lamport_reduce, lamport_reduce_rms_norm,
                                         lamport_reset, poll_group)
from tritium.fused.matmul import MatmulConfig, launch_options, matmul, matmul_operands, matmul_tile
from tritium.fused.matmul_reduce_scatter import BULK, launch_matmul_reduce
from tritium.fused.overlap import check_operands, output, select_overlap
from tritium.fused.workspace import workspace
from tritium.runtime import interpreting, num_sms, pdl_launch

GEMV_MAX_M = 4     # rows a gated product takes (computed on CUDA cores, SiLU-and-mul on the fly)
LAMPORT_MAX_M = 64  # rows the one-launch decode kernel takes (one tensor-core row tile)
REDUCE_BLOCK = 1024  # elements a reduce program sums per step (32 under the interpreter: rows of several chunks)


def _reduce_block() -> int:
    return 32 if interpreting() else REDUCE_BLOCK


def _epilogue_fits(M: int, N: int) -> bool:
    """Whether the RMSNorm epilogue's row chunks (``lamport_reduce_rms_norm``) fit the shared values."""
    return M * -(-N // _reduce_block()) <= LAMPORT_PARTIALS


@dataclass(frozen=True)
class DecodeMatmulConfig:
    """The decode kernel's tile: ``block_n`` output columns a tile, K in ``block_k`` steps, ``num_warps``,
    ``num_stages`` (tensor-core tiles only) and ``split``: K cut in that many pieces (more programs
    streaming b than there are column tiles; 0: chosen from the shape)."""
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int = 1
    split: int = 0

    def __str__(self) -> str:
        return f"n{self.block_n}-k{self.block_k}-w{self.num_warps}-s{self.num_stages}-split{self.split}"


def select_decode_config(M: int, N: int, K: int, b_kmajor: bool, sms: int, capacity: int,
                         gemv: bool = False) -> DecodeMatmulConfig:
    """The decode kernel's configuration for ``[M, K] @ [K, N]``.

    GEMV (``gemv``: gated products, which take SiLU-and-mul on the fly; M <= ``GEMV_MAX_M``): tiles shaped
    along b's contiguous dimension (K-major weights: 8
    columns, 512-long K steps, as :mod:`tritium.ops.gemv`; N-major: 64 columns, 64-long K steps), and K cut
    in the fewest pieces that give >= 4 programs per SM (a weight stream needs many programs in flight).
    Tensor-core rows: 128 columns (64 at M > 16, where a slot holds no second piece), and the fewest K
    pieces that keep >= 90% of the SMs busy. Pieces are >= 4 K steps long and fit a Lamport slot together
    (``capacity`` elements).

    NOTE: 2x H200, bf16, graphs (bench/results/fused-NVIDIA-H200-x2.json, decode run 1): one persistent
    GEMV program per SM streamed o_proj at 1.65 TB/s (M = 1 40.6 us vs cuBLAS 19.6); tensor-core rows at M
    = 8 with two pieces beat cuBLAS + NCCL (o_proj 29.4 vs 33.5 us, down_proj 65.3 vs 71.1), while M = 64 at
    128 columns left half the SMs idle (40.4 vs 20.4 for cuBLAS alone). Run 2, non-persistent programs:
    GEMV rows still trail the tensor-core rows (o_proj M = 1 / 2 / 4: 29.9 / 41.7 / 56.9 us, M = 8 25.6), so
    only gated products take the GEMV."""
    if gemv:
        cfg = DecodeMatmulConfig(8, 512, 4) if b_kmajor else DecodeMatmulConfig(64, 64, 4)
        want = 4 * sms
    else:
        cfg = DecodeMatmulConfig(128 if M <= 16 else 64, 128, 4, num_stages=6 if M <= 16 else 4)
        want = 0.9 * sms
    tiles = -(-N // cfg.block_n)
    best, best_eff = 1, 0.0
    for split in range(1, 33):
        if split > 1 and (K // split < 4 * cfg.block_k or split * M * N > capacity):
            break
        units = tiles * split
        if gemv:
            if units >= want:
                best = split
                break
            best = split
            continue
        eff = units / (-(-units // sms) * sms)
        if eff >= 0.9:
            best = split
            break
        if eff > best_eff + 1e-9:
            best, best_eff = split, eff
    return DecodeMatmulConfig(cfg.block_n, cfg.block_k, cfg.num_warps, cfg.num_stages, best)


@triton.jit
def gemv_tile(a_ptr, b_ptr, off_n, k_start, k_end, M, N, stride_am, stride_ak, stride_bk, stride_bn,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN: tl.constexpr,
              USE_PDL: tl.constexpr, GATED: tl.constexpr = False, K_GATE=0):
    """``a[:M, k_start:k_end] @ b[k_start:k_end, off_n : off_n + BLOCK_N]`` on CUDA cores as an fp32
    ``[BLOCK_M, BLOCK_N]`` tile (rows past M, columns past N are zeros). b's tile is read as ``[BLOCK_N,
    BLOCK_K]`` with any strides (a K-major weight or an N-major b: the contiguous one is vectorised), the
    next K step requested before this one is used, products summed once at the end. ``EVEN``: no column
    or K masks (N a multiple of BLOCK_N, the K range of BLOCK_K steps). ``USE_PDL``: b's first step is
    requested before waiting for the previous kernel (b never depends on it), then the wait. ``GATED``: a
    is ``[M, 2 K_GATE]`` = [gate | up] and the product uses ``silu(gate) * up``, rounded where
    :func:`tritium.ops.reference.silu_and_mul` rounds (the MLP's down projection)."""
    ms = tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    w_ptrs = b_ptr + cols.to(tl.int64)[:, None] * stride_bn + (k_start + ks).to(tl.int64)[None, :] * stride_bk
    x_ptrs = a_ptr + ms[:, None] * stride_am + (k_start + ks)[None, :] * stride_ak
    n_mask = cols[:, None] < N
    if EVEN:
        w = tl.load(w_ptrs, eviction_policy="evict_first")
    else:
        w = tl.load(w_ptrs, mask=n_mask & (k_start + ks[None, :] < k_end), other=0.0, eviction_policy="evict_first")
    pdl_prologue(USE_PDL)
    acc = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in range(k_start, k_end, BLOCK_K):
        if EVEN:
            x = tl.load(x_ptrs, mask=ms[:, None] < M, other=0.0)
        else:
            x = tl.load(x_ptrs, mask=(ms[:, None] < M) & (k0 + ks[None, :] < k_end), other=0.0)
        if GATED:
            if EVEN:
                up = tl.load(x_ptrs + K_GATE * stride_ak, mask=ms[:, None] < M, other=0.0)
            else:
                up = tl.load(x_ptrs + K_GATE * stride_ak, mask=(ms[:, None] < M) & (k0 + ks[None, :] < k_end), other=0.0)
            g = x.to(tl.float32)
            act = (g / (1.0 + tl.exp(-g))).to(up.dtype).to(tl.float32)
            x = (act * up.to(tl.float32)).to(up.dtype)
        w_ptrs += BLOCK_K * stride_bk
        x_ptrs += BLOCK_K * stride_ak
        more = k0 + BLOCK_K < k_end
        if EVEN:
            w_next = tl.load(w_ptrs, mask=more, other=0.0, eviction_policy="evict_first")
        else:
            w_next = tl.load(w_ptrs, mask=more & n_mask & (k0 + BLOCK_K + ks[None, :] < k_end), other=0.0,
                             eviction_policy="evict_first")
        # NOTE: fp32 products (the interpreter's bf16 elementwise products are wrong)
        acc += w.to(tl.float32)[None, :, :] * x.to(tl.float32)[:, None, :]
        w = w_next
    return tl.sum(acc, axis=2)


@triton.jit(do_not_specialize=["key"])
def _matmul_all_reduce_lamport_kernel(
    # pointers: a, b, the output, the communicator's Lamport buffers (int16), shared values, state and
    # headers, its state (timeouts, mismatches), the heap bases
    a_ptr, b_ptr, out_ptr, lam_ptr, parts_ptr, lstate_ptr, hdr_ptr, state_ptr, bases, residual_ptr, norm_ptr,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_om,
    # sizes (key: the call's Lamport header key, lamport_key)
    M, N, K, k_split, num_tiles, rank, world_size, capacity, max_spins, eps, key,
    # meta-parameters
    SPLIT: tl.constexpr, USE_DOT: tl.constexpr, EVEN: tl.constexpr, GATED: tl.constexpr, FUSE_RMS: tl.constexpr,
    CHUNKS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SPLIT: tl.constexpr, USE_TMA: tl.constexpr, B_KMAJOR: tl.constexpr, EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr, REDUCE: tl.constexpr, GROUP: tl.constexpr, WORLD_POW2: tl.constexpr,
    USE_PDL: tl.constexpr = False,
):
    """``out = sum_r a_r @ b_r`` in one launch (module docstring, "fused") of ``num_tiles`` compute programs
    and then reduce programs. Compute program t takes columns ``(t % tiles_n) * BLOCK_N`` over K piece
    ``t // tiles_n`` and pushes its ``[M, BLOCK_N]`` values (in out's dtype) to elements ``piece * M * N +
    row * N + col`` of slot ``rank`` on every rank; it never waits, so the compute programs fill the GPU as
    a plain GEMV launch would. Reduce program r resets its share of the old buffer, then sums its
    ``REDUCE``-element blocks of the flat ``[M, N]`` output over every rank's slot and piece (fp32, ``GROUP``
    parts polled at once, :func:`lamport_reduce`) as they arrive. Reduce programs come last in the grid,
    and there are fewer than the SMs: programs are started in order, so they wait while the compute
    programs still run beside them.

    ``GATED``: a is [gate | up] (:func:`gemv_tile`; GEMV rows only). ``FUSE_RMS`` (residual ``[M, N]``
    contiguous, norm ``[N]``): the reduce programs take rows in ``REDUCE``-column chunks
    (:func:`lamport_reduce_rms_norm`: residual updated in place, ``out = rms_norm(residual) * norm``; a row
    has ``cdiv(N, REDUCE) <= CHUNKS`` chunks).

    The first reduce program posts the call's Lamport header (``key``: the elements per slot, M, N, the
    pieces, dtype and epilogue); each reduce program's first poll checks the peers' with the data, so ranks
    whose calls differ (sizes, a peer in the Lamport all-reduce of another overlap mode) count a mismatch and
    write nothing, rather than wait or sum each other's bits."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    mn = M * N
    if pid < num_tiles:
        tiles_n = tl.cdiv(N, BLOCK_N)
        off_n = (pid % tiles_n) * BLOCK_N
        piece = pid // tiles_n
        k_start = piece * k_split
        k_end = tl.minimum(K, k_start + k_split)
        if USE_DOT:
            pdl_prologue(USE_PDL)
            a, b, _c = matmul_operands(a_ptr, b_ptr, out_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                                       stride_om, 1, BLOCK_M, BLOCK_N, BLOCK_K, EPILOGUE_SPLIT, USE_TMA, B_KMAJOR)
            acc = matmul_tile(a, b, 0, off_n, k_start, k_end, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                              BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, B_KMAJOR, EVEN_K, DOT_PRECISION)
        else:
            acc = gemv_tile(a_ptr, b_ptr, off_n, k_start, k_end, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                            BLOCK_M, BLOCK_N, BLOCK_K, EVEN, USE_PDL, GATED, K)
        phase, buf, old_buf, old_n, call = lamport_begin(lam_ptr, lstate_ptr, pid, world_size, capacity)
        ms = tl.arange(0, BLOCK_M)
        cols = off_n + tl.arange(0, BLOCK_N)
        bits = acc.to(out_ptr.dtype.element_ty).to(tl.int16, bitcast=True)
        lamport_push(buf, piece * mn + ms[:, None] * N + cols[None, :], bits, (ms[:, None] < M) & (cols[None, :] < N),
                     rank, world_size, capacity, bases)
    else:
        pdl_prologue(USE_PDL)
        max_spins = fail_fast(state_ptr, max_spins)
        phase, buf, old_buf, old_n, call = lamport_begin(lam_ptr, lstate_ptr, pid, world_size, capacity)
        rid = pid - num_tiles
        num_reduce = num_programs - num_tiles
        if rid == 0:  # (a reduce program starts at once; compute program 0 only after its tile)
            lamport_announce(hdr_ptr, phase, call, key, rank, world_size, bases)
        expect = lamport_header(call, key)
        hdr_row = hdr_ptr + phase * world_size
        old_n = lamport_extent(hdr_ptr, phase, call, old_n, world_size, capacity, WORLD_POW2)
        lamport_reset(old_buf, old_n, world_size, capacity, parts_ptr, phase, rid, num_reduce, REDUCE)
        timeouts = tl.zeros([], tl.int32)
        wrong = tl.zeros([], tl.int32)
        if FUSE_RMS:
            timed_out, wrong = lamport_reduce_rms_norm(buf, residual_ptr, norm_ptr, out_ptr, parts_ptr, phase, M, N,
                                                       stride_om, eps, world_size, capacity, SPLIT, mn, max_spins,
                                                       rid, num_reduce, REDUCE, GROUP, CHUNKS, hdr_row, expect)
            timeouts += timed_out
        else:
            offs = tl.arange(0, REDUCE)
            for start in range(rid * REDUCE, mn, num_reduce * REDUCE):
                idx = start + offs
                mask = idx < mn
                acc, timed_out, differs = lamport_reduce(buf, idx, mask, world_size, capacity, SPLIT, mn,
                                                         tl.where(wrong > 0, 0, max_spins), out_ptr.dtype.element_ty,
                                                         0, GROUP, hdr_row, expect,
                                                         (start == rid * REDUCE).to(tl.int32))
                timeouts += timed_out
                wrong += differs
                row = idx // N
                tl.store(out_ptr + row * stride_om + (idx - row * N), acc.to(out_ptr.dtype.element_ty),
                         mask=mask & (timeouts == 0) & (wrong == 0))  # nothing written once a poll failed
        if wrong > 0:  # (polls cut short by the mismatch are not counted as timeouts)
            count_mismatch(state_ptr)
            if rid == 0:  # the peers' pushes of this call, all in before the next call resets the buffer
                if lamport_drain(buf, hdr_row, call, world_size, capacity, max_spins, REDUCE) > 0:
                    count_timeout(state_ptr)
        elif timeouts > 0:
            count_timeout(state_ptr, 2, 0, lamport_absent(hdr_row, call, world_size, WORLD_POW2))
    lamport_finish(lstate_ptr, phase, SPLIT * mn, pid, num_programs, call)


def decode_eligible(a: torch.Tensor, N: int, comm: Communicator) -> bool:
    """Whether ``matmul_all_reduce``'s one-launch decode kernel takes ``a @ b`` (``[M, K] @ [K, N]``): 16-bit
    floats, 1 <= M <= LAMPORT_MAX_M, the product within a Lamport slot, more than one rank."""
    M = a.shape[0]
    return (comm.world_size > 1 and a.dtype in LAMPORT_DTYPES and 1 <= M <= LAMPORT_MAX_M and N > 0
            and M * N <= comm.lamport_bytes // 2)


def launch_decode(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, comm: Communicator,
                  config: DecodeMatmulConfig | None = None, *, gated: bool = False,
                  residual: torch.Tensor | None = None, norm: torch.Tensor | None = None, eps: float = 0.0) -> None:
    """Launch the one-launch GEMM + Lamport all-reduce (``decode_eligible`` inputs; K = b's rows). ``gated``:
    a is ``[M, 2K]`` = [gate | up] (GEMV rows only). ``residual`` and ``norm`` given: the RMSNorm epilogue
    (residual updated in place, out = its norm)."""
    M = a.shape[0]
    K, N = b.shape
    capacity = comm.lamport_bytes // 2
    b_kmajor = b.stride(0) == 1 and b.stride(1) != 1
    sms = 1 if interpreting() else num_sms(a.device)
    use_dot = not gated
    cfg = config or select_decode_config(M, N, K, b_kmajor, sms, capacity, gemv=not use_dot)
    split = cfg.split or 1
    k_split = -(-(-(-K // split)) // cfg.block_k) * cfg.block_k  # K per piece, whole steps
    split = max(1, -(-K // k_split))
    if split * M * N > capacity:
        raise ValueError(f"matmul_all_reduce: {split} K pieces of [{M}, {N}] exceed the communicator's Lamport "
                         f"slot ({capacity} elements)")
    if gated and M > GEMV_MAX_M:
        raise ValueError(f"gated products take at most {GEMV_MAX_M} rows, got {M}")
    if use_dot:
        block_m = max(16, triton.next_power_of_2(M))
        opts = launch_options(a, b, out, MatmulConfig(block_m, cfg.block_n, cfg.block_k, num_warps=cfg.num_warps,
                                                      num_stages=cfg.num_stages))
    else:
        opts = dict(BLOCK_M=triton.next_power_of_2(M), BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=1,
                    EPILOGUE_SPLIT=1, USE_TMA=False, B_KMAJOR=False, EVEN_K=K % cfg.block_k == 0,
                    DOT_PRECISION="ieee", num_warps=cfg.num_warps, num_stages=1)
    tiles = -(-N // cfg.block_n) * split
    fuse_rms = residual is not None
    reduce_block = _reduce_block()
    chunks = -(-N // reduce_block)  # the epilogue's chunks of a row (lamport_reduce_rms_norm)
    if fuse_rms and not _epilogue_fits(M, N):
        raise ValueError(f"matmul_all_reduce_rms_norm: {M} rows of {chunks} chunks exceed the Lamport protocol's "
                         f"{LAMPORT_PARTIALS} shared values")
    reducers = max(1, min(M * chunks if fuse_rms else -(-(M * N) // reduce_block),
                          1 if interpreting() else num_sms(a.device) // 2))
    if tiles + reducers > LAMPORT_MAX_PROGRAMS:
        raise ValueError(f"matmul_all_reduce: the decode kernel would take {tiles + reducers} programs, more than "
                         f"the Lamport protocol's {LAMPORT_MAX_PROGRAMS}: pass a config with a larger block_n "
                         f"or a smaller split")
    _matmul_all_reduce_lamport_kernel[(tiles + reducers,)](
        a, b, out, comm._lamport, comm._lparts, comm._lstate, comm._lhdr, comm._state, comm.heap.bases,
        residual if fuse_rms else out, norm if fuse_rms else out,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0),
        M, N, K, k_split, tiles, comm.rank, comm.world_size, capacity, comm.heap.max_spins, float(eps),
        lamport_key(split * M * N, "matmul_all_reduce", M, N, split, str(a.dtype), fuse_rms),
        SPLIT=split, USE_DOT=use_dot, EVEN=N % cfg.block_n == 0 and K % cfg.block_k == 0, GATED=gated,
        FUSE_RMS=fuse_rms, CHUNKS=triton.next_power_of_2(chunks) if fuse_rms else 1, REDUCE=reduce_block,
        GROUP=poll_group(comm.world_size * split, reduce_block), WORLD_POW2=comm._world_pow2,
        **opts, **pdl_launch(comm.device, comm.pdl))


def matmul_all_reduce_rms_norm(a: torch.Tensor, b: torch.Tensor, comm: Communicator, residual: torch.Tensor,
                               weight: torch.Tensor, eps: float, out: torch.Tensor | None = None, *,
                               gated: bool = False) -> torch.Tensor:
    """The row-parallel layer with the next residual add and RMSNorm: ``h = sum over ranks of a @ b + residual;
    residual <- h; out = rms_norm(h) * weight``. ``a [M, k]`` (``gated``: ``[M, 2k]`` = [gate | up], the
    product taken with ``silu(gate) * up``, the MLP's down projection), ``b [k, N]`` (e.g. the transpose of a
    row-major weight ``[N, k]``), residual ``[M, N]`` contiguous, weight ``[N]``; 16-bit floats.

    Decode sizes (:func:`decode_eligible`, gated: at most ``GEMV_MAX_M`` rows, rows x ``cdiv(N, 1024)`` within
    ``LAMPORT_PARTIALS``) run as one launch: the decode kernel with the epilogue in its reduce programs.
    Other sizes: tritium's GEMM, then :meth:`Communicator.all_reduce_rms_norm`. Reference: :func:`tritium.fused.reference.matmul_all_reduce_rms_norm`."""
    name = "matmul_all_reduce_rms_norm"
    if not isinstance(a, torch.Tensor) or a.dim() != 2:
        raise ValueError(f"{name}: a must be a 2-D tensor, got {getattr(a, 'shape', type(a).__name__)}")
    check_operands(name, a, b, comm, gated=gated)  # (the shapes the caller passed, in any error)
    M, N = a.shape[0], b.shape[1]
    if a.dtype not in LAMPORT_DTYPES:
        raise TypeError(f"{name}: a has dtype {a.dtype}; expected float16 or bfloat16")
    for arg, t, shape in (("residual", residual, (M, N)), ("weight", weight, (N,))):
        if (not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != a.dtype or t.device != a.device
                or not t.is_contiguous()):
            got = f"{list(t.shape)} {t.dtype} on {t.device}" if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name}: {arg} must be a contiguous {list(shape)} {a.dtype} tensor on {a.device}, got {got}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0:
        raise ValueError(f"{name}: eps must be a positive number, got {eps!r}")
    out = output(out, (M, N), a)
    if M == 0 or N == 0:
        return out
    if (b.shape[0] > 0 and decode_eligible(a, N, comm) and (not gated or M <= GEMV_MAX_M)
            and _epilogue_fits(M, N)):
        launch_decode(a, b, out, comm, gated=gated, residual=residual, norm=weight, eps=eps)
        return out
    x = a
    if gated:
        g, up = a.float().chunk(2, dim=1)
        x = (torch.nn.functional.silu(g).to(a.dtype).float() * up).to(a.dtype)
    h = matmul(x, b)
    if out.is_contiguous():
        return comm.all_reduce_rms_norm(h, residual, weight, eps, out=out)
    return out.copy_(comm.all_reduce_rms_norm(h, residual, weight, eps, out=h))  # (padded rows: in place, copied)


def matmul_all_reduce(a: torch.Tensor, b: torch.Tensor, comm: Communicator, overlap: str = "auto",
                      out: torch.Tensor | None = None) -> torch.Tensor:
    """``sum over ranks of a @ b``: ``a [M, k]``, ``b [k, N]`` -> ``[M, N]`` in a's dtype on every rank.
    ``out``: written in place (rows that do not overlap; a row stride past the width is taken in every mode).
    b may be the transpose of a row-major ``[N, k]`` weight. Ranks that disagree on M, N or the dtype (M = 0
    on some ranks included; the decode kernel's calls too: their Lamport headers) or on the overlap mode get
    ``CollectiveMismatch`` from ``Communicator.check`` and an unspecified result (modes: see
    :func:`tritium.fused.all_gather_matmul`)."""
    check_operands("matmul_all_reduce", a, b, comm)
    M, K = a.shape
    N = b.shape[1]
    W = comm.world_size
    out = output(out, (M, N), a)
    mode = select_overlap("matmul_all_reduce", M, N, K, W, overlap, decode=decode_eligible(a, N, comm))
    if (M == 0 or N == 0) and W == 1:  # (with peers, a rank without rows still takes part: theirs may have some)
        return out
    if mode == "bulk" or W == 1:
        # the collective takes contiguous tensors: a padded out gets the product's sum in a heap buffer first
        h = out if W == 1 or out.is_contiguous() else workspace(comm, BULK, M * N, a.dtype).view(M, N)
        matmul(a, b, out=h)
        if W > 1:
            comm.all_reduce(h, out=h)
        if h is not out:
            out.copy_(h)
        return out
    if mode == "fused" and K > 0 and decode_eligible(a, N, comm):
        launch_decode(a, b, out, comm)
        return out
    launch_matmul_reduce("ar", a, b, out, comm, mode, scatter=False)
    return out
