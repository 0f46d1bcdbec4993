"""GEMM + reduce-scatter: ``y = rows of this rank of sum_r a_r @ b_r`` (the row-parallel layer with a
sequence-parallel output).

    y = matmul_reduce_scatter(a, b, comm, overlap="auto")   # a [M, k], b [k, N] -> y [M / W, N]

``overlap``:

- ``"bulk"``: tritium's GEMM into a buffer, then tritium's reduce-scatter.
- ``"producer_consumer"``: the GEMM kernel pushes each finished tile (rounded to the output dtype) into
  its owner's receive buffer (heap) and raises a flag there; a reduce kernel on a side stream, on the
  other SMs, waits per tile for every rank's copy of it and sums them (fp32, rank order). Tiles owned by
  the next rank are computed first, this rank's own last.
- ``"fused"``: one persistent launch whose first programs compute and push, and whose other programs
  reduce, handing tiles over through the same flags.
- ``"auto"``: :func:`tritium.fused.overlap.select_overlap`.

The kernels here serve :mod:`tritium.fused.matmul_all_reduce` too (``SCATTER=False``: every tile goes to
every rank). Reference: :func:`tritium.fused.reference.matmul_reduce_scatter`.
"""

from __future__ import annotations

import dataclasses

import torch
import triton
import triton.language as tl

from tritium.collectives import Communicator
from tritium.fused.matmul import launch_options, matmul, matmul_operands, matmul_tile, select_config, tile_coords
from tritium.fused.overlap import check_operands, output, select_overlap, split_programs
from tritium.fused.workspace import (announce, end_call, epoch_of, forked, halves, layout_tag, raise_flag,
                                     source_agrees, wait_flag, workspace)
from tritium.shmem.device import translate


BULK = "bulk.product"  # the bulk modes' heap buffer for the product (both reductions)


@triton.jit
def _push_tiles(a, b, r_ptr, flags_ptr, epoch, M, N, K, rank, world_size, bases, stride_am, stride_ak, stride_bk,
                stride_bn,
                rows_per_dest, cid, num_compute,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                USE_TMA: tl.constexpr, B_KMAJOR: tl.constexpr, EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr,
                SCATTER: tl.constexpr, ROTATE: tl.constexpr):
    """Compute programs: each tile of ``a @ b`` goes, in the output dtype, to slot ``rank`` of its owner's
    receive buffer (SCATTER: rank ``row // rows_per_dest``; else every rank), then its flag is raised there."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    shift = 0
    if ROTATE:  # rows_per_dest is a multiple of BLOCK_M: the next rank's rows first, this rank's last
        shift = ((rank + 1) % world_size) * (rows_per_dest // BLOCK_M)
    for tile_id in range(cid, num_pid_m * num_pid_n, num_compute):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        pid_m = (pid_m + shift) % num_pid_m
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = matmul_tile(a, b, off_m, off_n, 0, K, M, N, stride_am, stride_ak, stride_bk, stride_bn,
                          BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, B_KMAJOR, EVEN_K, DOT_PRECISION)
        value = acc.to(r_ptr.dtype.element_ty)
        rows = off_m + tl.arange(0, BLOCK_M)
        cols = off_n + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        flag = flags_ptr + (rank * num_pid_m + pid_m) * num_pid_n + pid_n
        last = tl.minimum(off_m + BLOCK_M, M) - 1
        if SCATTER:
            first_owner = off_m // rows_per_dest
            last_owner = last // rows_per_dest
            if first_owner == last_owner:  # one owner (always, when rows_per_dest is a multiple of BLOCK_M)
                base = tl.multiple_of(translate(r_ptr, rank, first_owner, bases), 16)
                local = rows - first_owner * rows_per_dest
                tl.store(base + (rank * rows_per_dest + local).to(tl.int64)[:, None] * N + cols[None, :], value,
                         mask=mask)
            else:
                owner = rows // rows_per_dest
                local = rows - owner * rows_per_dest
                ptrs = r_ptr + (rank * rows_per_dest + local).to(tl.int64)[:, None] * N + cols[None, :]
                tl.store(translate(ptrs, rank, owner[:, None], bases), value, mask=mask)
            for dst in range(first_owner, last_owner + 1):
                raise_flag(flag, epoch, rank, dst, bases)
        else:
            offs = (rank * M + rows).to(tl.int64)[:, None] * N + cols[None, :]
            for dst in range(0, world_size):
                base = tl.multiple_of(translate(r_ptr, rank, dst, bases), 16)
                tl.store(base + offs, value, mask=mask)
            for dst in range(0, world_size):
                raise_flag(flag, epoch, rank, dst, bases)


@triton.jit
def _reduce_tiles(r_ptr, y_ptr, flags_ptr, hello_ptr, comm_state_ptr, epoch, parity, tag, M, N, rank, world_size,
                  rows_per_dest, max_spins, stride_ym, rid, num_reduce,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SCATTER: tl.constexpr):
    """Reduce programs: for each tile of the GEMM's grid that holds rows of this rank's output (SCATTER:
    rows ``[rank * rows_per_dest, +rows_per_dest)``; else all), wait for every rank's copy, then sum the
    copies in fp32 in rank order and store the rows. A rank that calls with another layout (its hello
    flag, :func:`source_agrees`) is not waited for, and the tiles are not stored."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    first_row = 0
    if SCATTER:
        first_row = rank * rows_per_dest
    first_m = first_row // BLOCK_M
    last_m = (first_row + rows_per_dest - 1) // BLOCK_M
    units = tl.where(rows_per_dest > 0, (last_m - first_m + 1) * num_pid_n, 0)
    checked = tl.zeros([], tl.int64)
    agreed = tl.zeros([], tl.int64)
    if units <= 0:  # nothing to reduce here (no rows or columns): the first program checks every source
        if rid == 0:
            for src in range(0, world_size):
                _agrees, checked, agreed = source_agrees(hello_ptr, src, epoch, parity, tag, world_size, checked,
                                                         agreed, max_spins, comm_state_ptr)
    for unit in range(rid, units, num_reduce):
        pid_m = first_m + unit // num_pid_n
        pid_n = unit % num_pid_n
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # GEMM rows
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        local = rows - first_row
        mask = (local[:, None] >= 0) & (local[:, None] < rows_per_dest) & (cols[None, :] < N)
        ok = tl.full([], 1, tl.int32)
        for src in range(0, world_size):
            good, checked, agreed = source_agrees(hello_ptr, src, epoch, parity, tag, world_size, checked, agreed,
                                                  max_spins, comm_state_ptr)
            ok = ok & good
            if good != 0:
                ok = ok & wait_flag(flags_ptr + (src * num_pid_m + pid_m) * num_pid_n + pid_n, epoch, max_spins,
                                    comm_state_ptr)
        if ok != 0:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for src in range(0, world_size):
                ptrs = r_ptr + (src * rows_per_dest + local).to(tl.int64)[:, None] * N + cols[None, :]
                acc += tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + local.to(tl.int64)[:, None] * stride_ym + cols[None, :],
                     acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["tag"])
def _matmul_reduce_kernel(
    # pointers: a, b, the output (this rank's rows, or all), the heap's receive buffer (both halves), flags,
    # hello flags and op state, the communicator's state (timeouts, mismatches), the heap bases
    a_ptr, b_ptr, y_ptr, r_ptr, flags_ptr, hello_ptr, state_ptr, comm_state_ptr, bases,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_ym,
    # sizes (half: the receive buffer's second half, in elements; tag: this call's layout_tag)
    M, N, K, rank, world_size, rows_per_dest, max_spins, num_compute, num_reduce, half, tag,
    # meta-parameters
    ROLE: tl.constexpr,  # 0: fused (compute programs first, then reduce), 1: compute only, 2: reduce only
    SCATTER: tl.constexpr, ROTATE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SPLIT: tl.constexpr, USE_TMA: tl.constexpr, B_KMAJOR: tl.constexpr, EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    epoch, parity = epoch_of(state_ptr)
    r = r_ptr + parity * half
    compute = pid < num_compute
    if ROLE == 1:
        compute = pid >= 0
    elif ROLE == 2:
        compute = pid < 0
    if compute:
        if pid == 0:  # before any tile: peers learn this call's layout as early as possible
            announce(hello_ptr, epoch, parity, tag, rank, world_size, bases)
        a, b, c = matmul_operands(a_ptr, b_ptr, r, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, N, 1,
                                  BLOCK_M, BLOCK_N, BLOCK_K, EPILOGUE_SPLIT, USE_TMA, B_KMAJOR)
        _push_tiles(a, b, r, flags_ptr, epoch, M, N, K, rank, world_size, bases, stride_am, stride_ak, stride_bk,
                    stride_bn, rows_per_dest, pid, num_compute, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, USE_TMA,
                    B_KMAJOR, EVEN_K, DOT_PRECISION, SCATTER, ROTATE)
    else:
        rid = pid
        if ROLE == 0:
            rid = pid - num_compute
        _reduce_tiles(r, y_ptr, flags_ptr, hello_ptr, comm_state_ptr, epoch, parity, tag, M, N, rank, world_size,
                      rows_per_dest, max_spins, stride_ym, rid, num_reduce, BLOCK_M, BLOCK_N, SCATTER)
    end_call(state_ptr, num_compute + num_reduce)


def launch_matmul_reduce(name: str, a: torch.Tensor, b: torch.Tensor, y: torch.Tensor, comm: Communicator,
                         mode: str, scatter: bool) -> None:
    """Launch the compute-and-push / reduce kernels of ``y = (reduce-scatter | all-reduce)(a @ b)`` in
    ``mode`` ("producer_consumer" or "fused"); ``name`` keys the heap workspaces."""
    M, K = a.shape
    N = b.shape[1]
    W = comm.world_size
    rows_per_dest = M // W if scatter else M
    cfg = select_config(max(M, 1), max(N, 1), K, a.dtype, a.device)  # (the tile of an empty product: any)
    if cfg.split_k > 1:  # the fused kernels compute whole tiles
        cfg = dataclasses.replace(cfg, split_k=1)
    num_pid_m, num_pid_n = triton.cdiv(M, cfg.block_m), triton.cdiv(N, cfg.block_n)
    recv, half = halves(comm, f"{name}.recv", W * rows_per_dest * N, a.dtype)
    flags = workspace(comm, f"{name}.flags", W * num_pid_m * num_pid_n, torch.int64, fill=0)
    hello = workspace(comm, f"{name}.hello", 2 * W, torch.int64, fill=0)
    state = workspace(comm, f"{name}.state", 2, torch.int64, fill=0)
    # what every rank's tiles and flags are laid out by (not K: each rank's slice of it is its own)
    tag = layout_tag(name, M, N, str(a.dtype), cfg.block_m, cfg.block_n, scatter)
    opts = launch_options(a, b, recv[: M * N].view(M, N), cfg)  # (the C descriptor is never stored through)
    if M == 0 or N == 0:  # no tiles: nothing to describe
        opts.update(USE_TMA=False, B_KMAJOR=False)
    num_reduce, num_compute = split_programs(comm, (rows_per_dest // cfg.block_m + 2) * num_pid_n,
                                             num_pid_m * num_pid_n)
    args = (a, b, y, recv, flags, hello, state, comm._state, comm.heap.bases,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), y.stride(0),
            M, N, K, comm.rank, W, rows_per_dest, comm.heap.max_spins, num_compute, num_reduce, half, tag)
    meta = dict(SCATTER=scatter, ROTATE=scatter and rows_per_dest % cfg.block_m == 0, **opts)
    if mode == "producer_consumer":
        with forked(comm, a.device) as side:
            _matmul_reduce_kernel[(num_compute,)](*args, ROLE=1, **meta)  # the producer first (interpreter)
            with side:
                _matmul_reduce_kernel[(num_reduce,)](*args, ROLE=2, **meta)
    else:
        _matmul_reduce_kernel[(num_compute + num_reduce,)](*args, ROLE=0, **meta)


def matmul_reduce_scatter(a: torch.Tensor, b: torch.Tensor, comm: Communicator, overlap: str = "auto",
                          out: torch.Tensor | None = None) -> torch.Tensor:
    """This rank's rows of ``sum over ranks of a @ b``: ``a [M, k]`` (k: this rank's slice of K), ``b [k,
    N]`` -> ``[M / world_size, N]`` (rank r gets rows ``r * M / W`` on) in a's dtype; each rank's product is
    rounded to that dtype before the fp32 sum, as the bulk path does. ``out``: written in place (rows that do
    not overlap; a row stride past the width is taken in every mode). Ranks that disagree on M, N or the
    dtype (M = 0 on some ranks included) or on the overlap mode get ``CollectiveMismatch`` from
    ``Communicator.check`` and an unspecified result (modes: see :func:`tritium.fused.all_gather_matmul`)."""
    check_operands("matmul_reduce_scatter", a, b, comm)
    M, K = a.shape
    N = b.shape[1]
    W = comm.world_size
    if M % W:
        raise ValueError(f"matmul_reduce_scatter: a's rows M = {M} must divide by world_size {W}")
    out = output(out, (M // W, N), a)
    mode = select_overlap("matmul_reduce_scatter", M, N, K, W, overlap)
    if (M == 0 or N == 0) and W == 1:  # (with peers, a rank without rows still takes part: theirs may have some)
        return out
    if mode == "bulk" or W == 1:
        full = workspace(comm, BULK, M * N, a.dtype).view(M, N) if W > 1 else out
        matmul(a, b, out=full)
        if W > 1 and out.is_contiguous():
            comm.reduce_scatter(full, out=out)
        elif W > 1:  # padded rows (the collective writes contiguous ones): in place over the product's first rows
            # (an out that overlaps x makes the collective stage x before anything is written), then copied
            out.copy_(comm.reduce_scatter(full, out=full[: M // W]))
        return out
    launch_matmul_reduce("rs", a, b, out, comm, mode, scatter=True)
    return out
