"""All-gather + GEMM: ``y = all_gather(a) @ b`` (the column-parallel layer with sequence-parallel input).

    y = all_gather_matmul(a, b, comm, overlap="auto")   # a [m, K] this rank's rows, b [K, n] -> y [W * m, n]

``overlap``:

- ``"bulk"``: tritium's all-gather into a buffer, then tritium's GEMM (two launches, back to back).
- ``"producer_consumer"``: on a side stream, the copy engine (``SymmetricHeap.put``: no SMs) copies this
  rank's rows into every rank's gather buffer (heap), then a one-program kernel raises the row-block
  flags there (a previous wait on every rank's "done" flag keeps it from overwriting a buffer a peer
  still reads); the GEMM runs at the same time on every SM and waits, per output tile, only for the row
  blocks that tile needs. Tiles over this rank's own rows come first (its own copy is enqueued first),
  so the GEMM starts before any peer's data has arrived.
- ``"fused"``: one persistent launch whose first programs copy (as above) and whose other programs compute
  tiles, handing the row blocks over through the same flags.
- ``"auto"``: :func:`tritium.fused.overlap.select_overlap`.

The GEMM reads the gathered rows from this rank's own heap (TMA where the shapes allow), never from a
peer. Reference: :func:`tritium.fused.reference.all_gather_matmul`.
"""

from __future__ import annotations

import dataclasses

import torch
import triton
import triton.language as tl

from tritium.collectives import Communicator
from tritium.fused.matmul import launch_options, matmul, matmul_operands, matmul_tile, select_config, store_tile, \
    tile_coords
from tritium.fused.overlap import check_operands, compute_programs, output, select_overlap, split_programs
from tritium.fused.workspace import (announce, end_call, epoch_of, forked, halves, layout_tag, proxy_fence,
                                     raise_flag, source_agrees, tagged, wait_flag, workspace)
from tritium.runtime import interpreting
from tritium.shmem.device import remote

# elements a copy program moves per step
# NOTE: 2x H200 (fused run 1): 2048-element steps, one program per 128-row block (8 at M = 2048): the
# copy took ~500 us of a 1.2 ms call (4 KiB in flight per SM); now 8192 and SMs / 8 programs
COPY = 8192


@triton.jit
def _copy_rows(a_ptr, g_ptr, flags_ptr, count_ptr, epoch, m, K, rank, world_size, bases, rb_max, slices, pid,
               num_copy, BLOCK_M: tl.constexpr, COPY: tl.constexpr, HINT: tl.constexpr):
    """Copy programs: unit ``(j, s)`` moves slice s (of ``slices``) of row block j of this rank's ``a``
    (contiguous ``[m, K]``) into rows ``rank * m + j * BLOCK_M`` of every rank's gather buffer ``g_ptr``
    (this call's half), as flat runs of ``COPY`` elements, and counts itself in (``count_ptr[j]``, this
    rank's, zero between calls); the last slice of the block raises flag ``(rank, j)`` to ``epoch`` on
    every rank (its acquire of the count, then release: the other slices' stores are published too)."""
    offs = tl.arange(0, COPY)
    dst_base = g_ptr + rank * m * K
    for unit in range(pid, tl.cdiv(m, BLOCK_M) * slices, num_copy):
        j = unit // slices
        piece = unit % slices
        first = j * BLOCK_M * K
        size = tl.minimum((j + 1) * BLOCK_M, m) * K - first
        lo = first + tl.cdiv(tl.cdiv(size, slices), COPY) * COPY * piece
        hi = tl.minimum(first + tl.cdiv(tl.cdiv(size, slices), COPY) * COPY * (piece + 1), first + size)
        for start in range(lo, hi, COPY):
            idx = start + offs
            mask = idx < hi
            tile = tl.load(a_ptr + idx, mask=mask)
            for dst in range(0, world_size):
                tl.store(remote(dst_base + idx, rank, dst, bases, HINT), tile, mask=mask)
        tl.debug_barrier()
        done = tl.atomic_add(count_ptr + j, 1, sem="acq_rel", scope="sys")
        if done == slices - 1:
            tl.atomic_xchg(count_ptr + j, 0, sem="relaxed", scope="gpu")
            for dst in range(0, world_size):
                raise_flag(flags_ptr + rank * rb_max + j, epoch, rank, dst, bases)


@triton.jit
def _wait_rows(flags_ptr, hello_ptr, target, parity, tag, checked, agreed, off_m, m, M, world_size, rb_max, max_spins,
               comm_state_ptr, BLOCK_M: tl.constexpr):
    """Wait until every row block of every source that output rows ``[off_m, off_m + BLOCK_M)`` need has
    arrived in this rank's gather buffer (its flag reached ``target``), each source first checked to call
    with this rank's layout (:func:`source_agrees`: a source that does not is not waited for). Returns (1
    if all did, checked, agreed)."""
    ok = tl.full([], 1, tl.int32)
    last = tl.minimum(off_m + BLOCK_M, M) - 1
    for s in range(off_m // m, last // m + 1):
        good, checked, agreed = source_agrees(hello_ptr, s, target, parity, tag, world_size, checked, agreed,
                                              max_spins, comm_state_ptr)
        ok = ok & good
        if good != 0:
            lo = tl.maximum(off_m - s * m, 0)
            hi = tl.minimum(last - s * m, m - 1)
            for j in range(lo // BLOCK_M, hi // BLOCK_M + 1):
                ok = ok & wait_flag(flags_ptr + s * rb_max + j, target, max_spins, comm_state_ptr)
    return ok, checked, agreed


@triton.jit(do_not_specialize=["tag"])
def _all_gather_matmul_kernel(
    # pointers: this rank's rows, B, the output, the heap's gather buffer (both halves), flags, hello flags
    # and op state, the communicator's state (timeouts, mismatches), the heap bases
    a_ptr, b_ptr, c_ptr, g_ptr, flags_ptr, count_ptr, hello_ptr, state_ptr, comm_state_ptr, bases,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # sizes (half: the gather buffer's second half, in elements; tag: this call's layout_tag)
    m, N, K, rank, world_size, rb_max, slices, max_spins, num_copy, num_compute, half, tag,
    # meta-parameters
    ROLE: tl.constexpr,  # 0: fused (copy programs first, then compute), 1: copy only, 2: compute only
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EPILOGUE_SPLIT: tl.constexpr, USE_TMA: tl.constexpr, B_KMAJOR: tl.constexpr, EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr, COPY: tl.constexpr, HINT: tl.constexpr, FENCE: tl.constexpr,
    ROTATE: tl.constexpr, CE: tl.constexpr = False, DEFER_DONE: tl.constexpr = False,
):
    # every program of both launches (producer_consumer) or of the one launch (fused) reads the call
    # counter first and counts itself out at the end; the last one advances the counter
    pid = tl.program_id(0)
    epoch, parity = epoch_of(state_ptr)
    g = g_ptr + parity * half
    if CE:  # copy-engine producer: one buffer, guarded by the done flags (count_ptr: done_ptr here)
        g = g_ptr
    copy = pid < num_copy
    if ROLE == 1:
        copy = pid >= 0
    elif ROLE == 2:
        copy = pid < 0
    if copy:
        if pid == 0:  # before any row: peers learn this call's layout as early as possible
            announce(hello_ptr, epoch, parity, tag, rank, world_size, bases)
        _copy_rows(a_ptr, g, flags_ptr, count_ptr, epoch, m, K, rank, world_size, bases,
                   rb_max, slices, pid, num_copy, BLOCK_M, COPY, HINT)
    else:
        cid = pid
        if ROLE == 0:
            cid = pid - num_copy
        _compute_tiles(g, b_ptr, c_ptr, flags_ptr, hello_ptr, comm_state_ptr, epoch, parity, tag, m, N, K, rank,
                       world_size, rb_max, max_spins, stride_bk, stride_bn, stride_cm, stride_cn, cid, num_compute,
                       BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, EPILOGUE_SPLIT, USE_TMA, B_KMAJOR, EVEN_K, DOT_PRECISION,
                       FENCE, ROTATE)
    if CE:
        _end_call_done(state_ptr, count_ptr, epoch, rank, world_size, bases, num_compute, DEFER_DONE)
    else:
        end_call(state_ptr, num_copy + num_compute)


@triton.jit
def _end_call_done(state_ptr, done_ptr, epoch, rank, world_size, bases, num_programs, DEFER_DONE: tl.constexpr):
    """:func:`end_call` that also tells every rank this rank is done reading its gather buffer for this
    call (``done_ptr[rank] = epoch`` on every rank), before the call counter moves on. ``DEFER_DONE``:
    not yet (the host still copies the buffer out: :func:`_ce_done_kernel` tells them after)."""
    tl.debug_barrier()
    done = tl.atomic_add(state_ptr + 1, 1, sem="acq_rel", scope="gpu")
    if done == num_programs - 1:
        tl.atomic_xchg(state_ptr + 1, 0, sem="relaxed", scope="gpu")
        if not DEFER_DONE:
            for dst in range(0, world_size):
                raise_flag(done_ptr + rank, epoch, rank, dst, bases)
        tl.atomic_add(state_ptr, 1, sem="release", scope="gpu")


@triton.jit
def _ce_done_kernel(done_ptr, state_ptr, rank, world_size, bases):
    """After the call (its counter advanced) and the copy of its gather buffer: this rank is done reading
    it (``done_ptr[rank]`` = the call's epoch on every rank)."""
    calls = tl.load(state_ptr, volatile=True)
    for dst in range(0, world_size):
        raise_flag(done_ptr + rank, calls, rank, dst, bases)


@triton.jit
def _side_epoch(state_ptr, SNAPSHOT: tl.constexpr):
    """(epoch, parity) of the call for the side stream's kernels: the first (``SNAPSHOT``) reads the call
    counter and keeps it in ``state_ptr[2]``; the later ones read that copy, since the GEMM on the main
    stream may already have finished the call and advanced the counter."""
    if SNAPSHOT:
        calls = tl.load(state_ptr, volatile=True)
        tl.store(state_ptr + 2, calls)
    else:
        calls = tl.load(state_ptr + 2, volatile=True)
    return calls + 1, calls % 2


@triton.jit
def _ce_wait_kernel(done_ptr, state_ptr, comm_state_ptr, world_size, max_spins):
    """Side stream, before the copies of call c: every rank is done reading its gather buffer for call
    c - 1 (its done flag reached c - 1's epoch)."""
    epoch, parity = _side_epoch(state_ptr, False)
    for p in range(0, world_size):
        wait_flag(done_ptr + p, epoch - 1, max_spins, comm_state_ptr)


@triton.jit(do_not_specialize=["tag"])
def _ce_flags_kernel(flags_ptr, hello_ptr, state_ptr, rank, dst, bases, rb, rb_max, world_size, tag,
                     SNAPSHOT: tl.constexpr):
    """Side stream, after the copy of call c into rank ``dst``: raise this rank's hello flag (its layout,
    :func:`announce`) and row-block flags there."""
    epoch, parity = _side_epoch(state_ptr, SNAPSHOT)
    raise_flag(hello_ptr + parity * world_size + rank, tagged(epoch, tag), rank, dst, bases)
    for j in range(0, rb):
        raise_flag(flags_ptr + rank * rb_max + j, epoch, rank, dst, bases)


@triton.jit
def _compute_tiles(g, b_ptr, c_ptr, flags_ptr, hello_ptr, comm_state_ptr, target, parity, tag, m, N, K, rank,
                   world_size, rb_max, max_spins, stride_bk, stride_bn, stride_cm, stride_cn, cid, num_compute,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                   EPILOGUE_SPLIT: tl.constexpr, USE_TMA: tl.constexpr, B_KMAJOR: tl.constexpr,
                   EVEN_K: tl.constexpr, DOT_PRECISION: tl.constexpr, FENCE: tl.constexpr, ROTATE: tl.constexpr):
    """Compute programs: the output tiles of ``g @ b`` (g: this call's gather buffer, ``[W * m, K]``),
    each after the row blocks it needs have arrived (their flags reached ``target``) from sources that
    call with this rank's layout; without tiles (N = 0) the programs wait for the rows all the same (the
    call returns the gathered rows)."""
    M = world_size * m
    a, b, c = matmul_operands(g, b_ptr, c_ptr, M, N, K, K, 1, stride_bk, stride_bn, stride_cm, stride_cn,
                              BLOCK_M, BLOCK_N, BLOCK_K, EPILOGUE_SPLIT, USE_TMA, B_KMAJOR)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    shift = 0
    if ROTATE:  # m is a multiple of BLOCK_M: start with this rank's own row blocks, then the next rank's
        shift = rank * (m // BLOCK_M)
    checked = tl.zeros([], tl.int64)
    agreed = tl.zeros([], tl.int64)
    if num_pid_m == 0:  # no rows (m = 0): no tile checks a source, so the first program checks them all
        if cid == 0:
            for s in range(0, world_size):
                _agrees, checked, agreed = source_agrees(hello_ptr, s, target, parity, tag, world_size, checked,
                                                         agreed, max_spins, comm_state_ptr)
    if num_pid_n == 0:
        for pid_m in range(cid, num_pid_m, num_compute):
            _ready, checked, agreed = _wait_rows(flags_ptr, hello_ptr, target, parity, tag, checked, agreed,
                                                 pid_m * BLOCK_M, m, M, world_size, rb_max, max_spins,
                                                 comm_state_ptr, BLOCK_M)
    for tile_id in range(cid, num_pid_m * num_pid_n, num_compute):
        pid_m, pid_n = tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        pid_m = (pid_m + shift) % num_pid_m
        ok, checked, agreed = _wait_rows(flags_ptr, hello_ptr, target, parity, tag, checked, agreed, pid_m * BLOCK_M,
                                         m, M, world_size, rb_max, max_spins, comm_state_ptr, BLOCK_M)
        proxy_fence(FENCE)
        if ok != 0:
            acc = matmul_tile(a, b, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, K, M, N, K, 1, stride_bk, stride_bn,
                              BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, B_KMAJOR, EVEN_K, DOT_PRECISION)
            store_tile(c, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N, stride_cm, stride_cn,
                       BLOCK_M, BLOCK_N, EPILOGUE_SPLIT, USE_TMA)


def _copy_engine_producer(a, b, out, g, comm: Communicator, meta: dict, m: int, n: int, K: int, rb_max: int,
                          num_compute: int, tag: int, return_gathered: bool) -> torch.Tensor | None:
    """producer_consumer: on a side stream, copy this rank's rows into its own gather buffer ``g`` with the
    copy engine (no SMs) and raise their flags; wait until every peer is done with its buffer (the
    previous call); copy into each peer's buffer and raise the flags there. Meanwhile the GEMM runs on
    every SM of the main stream, waiting per tile. ``return_gathered``: returns a copy of the gathered
    rows, taken before the peers are told this rank is done with the buffer (they may overwrite it then).

    NOTE: 2x H200, fused run 3 raised all flags after all copies: the GEMM's first tiles (its own rows)
    waited for the peers' copies too (809 us at M = 2048, 6107 at 16384, vs 647 / 5518 alone)."""
    W, rank, heap = comm.world_size, comm.rank, comm.heap
    flags = workspace(comm, "agce.flags", W * rb_max, torch.int64, fill=0)
    done = workspace(comm, "agce.done", W, torch.int64, fill=0)
    hello = workspace(comm, "agce.hello", 2 * W, torch.int64, fill=0)
    state = workspace(comm, "agce.state", 3, torch.int64, fill=0)  # calls, ticket, the side stream's calls
    mine = g[rank * m * K:(rank + 1) * m * K]
    with forked(comm, a.device) as side:
        with side:
            # this rank's own rows first, flagged at once: the GEMM's first tiles need nothing else (the
            # previous call's GEMM, which read this buffer, is before the fork in stream order)
            if mine.numel():  # (no rows: nothing to copy, the flags still go)
                heap.put(a.reshape(-1), mine, rank)
            _ce_flags_kernel[(1,)](flags, hello, state, rank, rank, heap.bases, rb_max, rb_max, W, tag, SNAPSHOT=True)
            if W > 1:
                _ce_wait_kernel[(1,)](done, state, comm._state, W, heap.max_spins)
            for i in range(1, W):
                dst = (rank + i) % W
                if mine.numel():
                    heap.put(a.reshape(-1), mine, dst)
                _ce_flags_kernel[(1,)](flags, hello, state, rank, dst, heap.bases, rb_max, rb_max, W, tag,
                                       SNAPSHOT=False)
        _all_gather_matmul_kernel[(num_compute,)](
            a, b, out, g, flags, done, hello, state, comm._state, heap.bases,
            a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
            m, n, K, rank, W, rb_max, 1, heap.max_spins, 0, num_compute, 0, tag, ROLE=2, CE=True,
            DEFER_DONE=return_gathered, **meta)
    if not return_gathered:
        return None
    gathered = g[: W * m * K].view(W * m, K).clone()
    _ce_done_kernel[(1,)](done, state, rank, W, heap.bases)
    return gathered


def all_gather_matmul(a: torch.Tensor, b: torch.Tensor, comm: Communicator, overlap: str = "auto",
                      return_gathered: bool = False, out: torch.Tensor | None = None):
    """``all_gather(a) @ b``: ``a [m, K]`` (this rank's rows; every rank the same m, K and dtype), ``b [K, n]``
    (this rank's columns; n may differ between ranks, 0 included: the rank still takes part in the gather)
    -> ``[world_size * m, n]`` in a's dtype, rows in rank order; with ``return_gathered`` also the gathered
    ``[world_size * m, K]`` (a new tensor). ``out``: the result, written in place (rows that do not overlap).
    Ranks that disagree on m, K or the dtype get ``CollectiveMismatch`` from ``Communicator.check`` (bulk:
    the all-gather's check; fused, producer_consumer: the layout tags) and an unspecified result; so do ranks
    without rows (m = 0) among ranks with some, and ranks in different overlap modes (a wait that gives up
    finds the peer in the other mode's call; the communicator is then to be rebuilt: see ``check``)."""
    check_operands("all_gather_matmul", a, b, comm)
    a = a.contiguous()  # the copy moves flat runs of rows
    m, K = a.shape
    n = b.shape[1]
    W = comm.world_size
    M = W * m
    out = output(out, (M, n), a)
    mode = select_overlap("all_gather_matmul", M, n, K, W, overlap)
    if M == 0 and W == 1:  # (with peers, a rank without rows still takes part: theirs may have some)
        return (out, torch.empty((M, K), dtype=a.dtype, device=a.device)) if return_gathered else out
    if mode == "bulk" or W == 1 or K == 0:
        gathered = workspace(comm, "ag.bulk", M * K, a.dtype).view(M, K) if W > 1 else a
        if W > 1:
            comm.all_gather(a, out=gathered)
        matmul(gathered, b, out=out)
        return (out, gathered.clone()) if return_gathered else out
    cfg = select_config(max(M, 1), max(n, 1), K, a.dtype, a.device)  # (the tile of an empty product: any)
    if cfg.split_k > 1:  # the fused kernels compute whole tiles
        cfg = dataclasses.replace(cfg, split_k=1)
    rb_max = triton.cdiv(m, cfg.block_m)
    tiles = triton.cdiv(M, cfg.block_m) * triton.cdiv(n, cfg.block_n)
    # what every rank's rows and flags are laid out by (not n: each rank multiplies by its own columns)
    tag = layout_tag("all_gather_matmul", m, K, str(a.dtype), cfg.block_m)
    if mode == "producer_consumer":
        g, half = workspace(comm, "agce.gather", M * K, a.dtype), 0
    else:
        g, half = halves(comm, "ag.gather", M * K, a.dtype)
    opts = launch_options(g[: M * K].view(M, K), b, out, cfg)
    if n == 0 or M == 0:  # no tiles: nothing to describe (a TMA descriptor of zero columns or rows)
        opts.update(USE_TMA=False, B_KMAJOR=False)
    meta = dict(COPY=COPY, HINT=COPY if (K * a.element_size()) % 16 == 0 else None,
                FENCE=opts["USE_TMA"] and not interpreting(), ROTATE=m % cfg.block_m == 0, **opts)
    if mode == "producer_consumer":
        gathered = _copy_engine_producer(a, b, out, g, comm, meta, m, n, K, rb_max, compute_programs(comm, tiles), tag,
                                         return_gathered)
        return (out, gathered) if return_gathered else out
    flags = workspace(comm, "ag.flags", W * rb_max, torch.int64, fill=0)
    counts = workspace(comm, "ag.counts", rb_max, torch.int64, fill=0)  # every call leaves them zero
    hello = workspace(comm, "ag.hello", 2 * W, torch.int64, fill=0)
    state = workspace(comm, "ag.state", 2, torch.int64, fill=0)
    num_copy, num_compute = split_programs(comm, None, tiles)
    slices = max(1, -(-num_copy // max(rb_max, 1)))  # enough copy units for every copy program
    _all_gather_matmul_kernel[(num_copy + num_compute,)](
        a, b, out, g, flags, counts, hello, state, comm._state, comm.heap.bases,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        m, n, K, comm.rank, W, rb_max, slices, comm.heap.max_spins, num_copy, num_compute, half, tag, ROLE=0, **meta)
    if return_gathered:  # this call's half of the gather buffer (its parity is on the device: no host read)
        parity = (state[:1] - 1) % 2
        return out, g[: 2 * half].view(2, half)[:, : M * K].index_select(0, parity).view(M, K)
    return out
