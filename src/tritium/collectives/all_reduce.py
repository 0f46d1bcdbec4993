"""All-reduce: ``one_shot`` (the protocol's generic kernel, :mod:`tritium.collectives.kernels`),
``two_shot`` and ``lamport`` (their kernels here), and the selection between them (``auto``).
Reference: :func:`tritium.collectives.reference.all_reduce_ref`."""

import torch
import triton
import triton.language as tl

from tritium.collectives.common import FLOAT_DTYPES, LAMPORT_DTYPES, LAMPORT_MAX_BYTES, op_code
from tritium.collectives.kernels import ALL_REDUCE
from tritium.collectives.kernels import (begin, call_parity, count_mismatch, count_timeout, fail_fast, finish,
                                         pdl_prologue, reduce_tile, second_round)
from tritium.collectives.lamport import (lamport_absent, lamport_announce, lamport_begin, lamport_drain,
                                         lamport_extent, lamport_finish, lamport_header, lamport_key, lamport_push,
                                         lamport_reduce, lamport_reduce_rms_norm, lamport_reset, poll_group,
                                         row_chunk)
from tritium.shmem.device import remote
from tritium.runtime import pdl_launch

ALGORITHMS = ("auto", "one_shot", "two_shot", "lamport")


def select_all_reduce(nbytes: int, world_size: int, dtype: torch.dtype = torch.bfloat16,
                      lamport_bytes: int = LAMPORT_MAX_BYTES) -> str:
    """The all-reduce algorithm for a message of ``nbytes`` of ``dtype`` on ``world_size`` ranks.

    NOTE: 2x H200, bf16, inside CUDA graphs (bench/results/collectives-NVIDIA-H200-x2.json, first run):
    one-shot beat two-shot at every size from 8 KiB (8.3 vs 10.3 us) to 256 MiB (1.35 vs 1.58 ms), so two
    ranks never take two-shot; with more ranks one-shot reads (W-1) x the message and two-shot about
    2 (W-1)/W x, so two-shot is kept from 1 MiB there (not yet measured: no 4-GPU machine was lent).
    Lamport (16-bit floats) skips the flag round of the other two. Runs 9-12 (stop 26: no atomics in its
    state, slots polled at once, 1024-element tiles): 512 KiB 6.95 vs one-shot 8.48 us (run 11), 7.3 vs 9.4
    (run 12); 1 MiB 11.4 vs 10.3, 13.3 vs 12.1: up to 512 KiB."""
    if dtype in LAMPORT_DTYPES and nbytes <= min(lamport_bytes, 512 << 10):
        return "lamport"
    if world_size <= 2 or nbytes < (1 << 20):
        return "one_shot"
    return "two_shot"


def all_reduce(comm, x: torch.Tensor, op: str = "sum", out: torch.Tensor | None = None,
               algorithm: str = "auto") -> torch.Tensor:
    """:meth:`Communicator.all_reduce <tritium.collectives.Communicator.all_reduce>` on ``comm``."""
    comm._check_tensor("x", x)
    code, avg = op_code(op, x.dtype)
    out = comm._out(out, tuple(x.shape), x)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    nbytes = x.numel() * x.element_size()
    if algorithm == "auto":
        algorithm = select_all_reduce(nbytes, comm.world_size, x.dtype, comm.lamport_bytes)
    if algorithm == "one_shot" or comm.world_size == 1 or x.numel() == 0:  # (an empty x: see Communicator._launch)
        return comm._launch(ALL_REDUCE, x, out, x.numel(), op=code, avg=avg)
    if algorithm == "lamport":
        if x.dtype not in LAMPORT_DTYPES or nbytes > comm.lamport_bytes:
            raise ValueError(f"algorithm 'lamport' takes float16/bfloat16 messages of up to {comm.lamport_bytes} "
                             f"bytes, got {nbytes} bytes of {x.dtype}")
        block, warps = comm.lamport_tile(nbytes)
        _lamport_all_reduce_kernel[comm._lamport_grid(x.numel(), block)](
            x.view(torch.int16), out, comm._lamport, comm._lparts, comm._lstate, comm._lhdr, comm._state,
            comm.heap.bases, out, out,
            x.numel(), comm.rank, comm.world_size, comm.lamport_bytes // 2, comm.heap.max_spins, 1, 0.0,
            lamport_key(x.numel(), "all_reduce", code, avg, str(x.dtype)),
            OP=code, AVG=avg, BLOCK=block, GROUP=poll_group(comm.world_size, block), WORLD_POW2=comm._world_pow2,
            num_warps=warps,
            **pdl_launch(comm.device, comm.pdl))
        return out
    half = comm.max_bytes // x.element_size()
    block, warps = comm.tile(nbytes)
    x_off = comm._zero_copy_offset(x, out, out_may_be_x=True)
    _two_shot_all_reduce_kernel[comm._grid(triton.cdiv(x.numel(), comm.world_size), block)](
        x, out, comm._buf.view(x.dtype), comm._res.view(x.dtype), comm._flags, comm._state, comm.heap.bases,
        x.numel(), comm.rank, comm.world_size, half, comm.heap.max_spins, x_off,
        OP=code, IS_FLOAT=x.dtype in FLOAT_DTYPES, AVG=avg, BLOCK=block, WORLD_POW2=comm._world_pow2,
        STAGED=x_off < 0, num_warps=warps, **pdl_launch(comm.device, comm.pdl))
    return out


@triton.jit
def _two_shot_all_reduce_kernel(
    # pointers
    x_ptr, out_ptr, buf_ptr, res_ptr, flags_ptr, state_ptr, bases,
    # sizes
    n, rank, world_size, half, max_spins, x_off,
    # meta-parameters
    OP: tl.constexpr, IS_FLOAT: tl.constexpr, AVG: tl.constexpr, BLOCK: tl.constexpr, WORLD_POW2: tl.constexpr,
    STAGED: tl.constexpr = True, USE_PDL: tl.constexpr = False,
):
    """Two-shot all-reduce: after staging, tile k is reduced by rank ``k % world_size`` alone, which
    pushes the result into every rank's result buffer (round 1 of the flags); then every rank copies the
    whole result out. Each rank reads (W-1)/W of the data from peers and writes (W-1)/W to them.
    Zero copy (``STAGED`` false): the peers read x in place (round 1 also tells a rank that no peer
    reads its x any more).

    NOTE: pushing the results straight into every rank's x when out is x (no result buffer, no copy
    out; only a tile's owner reads it) was correct but twice as slow on 2x H200 from 4 MiB (256 MiB:
    2.03 vs 1.13 ms staged), so it was taken out."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    pdl_prologue(USE_PDL)
    buf, ok = begin(x_ptr, buf_ptr, flags_ptr, state_ptr, n, x_off, rank, world_size, bases, half, max_spins,
                     BLOCK, WORLD_POW2, STAGED)
    parity = call_parity(state_ptr)
    res = res_ptr + parity * half
    offs = tl.arange(0, BLOCK)
    num_tiles = tl.cdiv(n, BLOCK)
    if ok != 0:
        # this rank's tiles: k = rank + world_size * j, j = pid, pid + P, ...
        for k in range(rank + world_size * pid, num_tiles, world_size * num_programs):
            idx = k * BLOCK + offs
            mask = idx < n
            acc = reduce_tile(buf, idx, mask, rank, world_size, bases, OP, IS_FLOAT, BLOCK)
            if AVG:
                acc = acc / world_size
            value = acc.to(out_ptr.dtype.element_ty)
            for dst in range(0, world_size):
                tl.store(remote(res + idx, rank, dst, bases, BLOCK), value, mask=mask)
    # round 1: every program of every rank has pushed its results
    ok1 = second_round(flags_ptr, state_ptr, rank, world_size, bases, max_spins, WORLD_POW2)
    if (ok != 0) & (ok1 != 0):
        for start in range(pid * BLOCK, n, num_programs * BLOCK):
            idx = start + offs
            mask = idx < n
            tl.store(out_ptr + idx, tl.load(res + idx, mask=mask), mask=mask)
    finish(state_ptr, num_programs, 1)


# -- Lamport one-shot all-reduce (16-bit floats, small messages; the protocol: tritium.collectives.lamport) --
@triton.jit(do_not_specialize=["key"])
def _lamport_all_reduce_kernel(
    # pointers: the caller's input (an int16 view) and output, the heap's Lamport buffers (int16 view of
    # [3, world_size, capacity] 16-bit slots, every slot -0.0 when unused), their shared values, state row
    # and headers, the communicator's state (timeouts, mismatches), the heap bases, residual and weight
    # (FUSE_RMS)
    x_bits_ptr, out_ptr, lam_ptr, parts_ptr, lstate_ptr, hdr_ptr, state_ptr, bases, residual_ptr, weight_ptr,
    # sizes (key: the call's header key, lamport_key)
    n, rank, world_size, capacity, max_spins, hidden, eps, key,
    # meta-parameters
    OP: tl.constexpr, AVG: tl.constexpr, BLOCK: tl.constexpr, GROUP: tl.constexpr, WORLD_POW2: tl.constexpr,
    FUSE_RMS: tl.constexpr = False, CHUNKS: tl.constexpr = 1, USE_PDL: tl.constexpr = False,
):
    """One-shot all-reduce without a flag round (:mod:`tritium.collectives.lamport`): this rank's tiles
    go straight into slot ``rank`` of this call's buffer on every rank, the old buffer is reset while they
    travel, then the own buffer is polled (``GROUP`` slots at once) until every slot has arrived and reduced.
    Program 0 posts the call's header (``key``); each program's first poll checks the peers' (a peer whose
    call differs: a mismatch, nothing written).

    ``FUSE_RMS`` (all_reduce_rms_norm; x, residual, out ``[n / hidden, hidden]``): the tiles are chunks of
    rows (``BLOCK`` columns; a row has ``cdiv(hidden, BLOCK) <= CHUNKS``), pushed as above and reduced by
    :func:`lamport_reduce_rms_norm` (the chunks of a row share their sums of squares)."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    pdl_prologue(USE_PDL)
    max_spins = fail_fast(state_ptr, max_spins)
    phase, buf, old_buf, old_n, call = lamport_begin(lam_ptr, lstate_ptr, pid, world_size, capacity)
    if pid == 0:
        lamport_announce(hdr_ptr, phase, call, key, rank, world_size, bases)
    expect = lamport_header(call, key)
    hdr_row = hdr_ptr + phase * world_size
    old_n = lamport_extent(hdr_ptr, phase, call, old_n, world_size, capacity, WORLD_POW2)
    offs = tl.arange(0, BLOCK)
    timeouts = tl.zeros([], tl.int32)
    wrong = tl.zeros([], tl.int32)
    if FUSE_RMS:
        chunks = tl.cdiv(hidden, BLOCK)
        num_tiles = (n // hidden) * chunks
        for t in range(pid, num_tiles, num_programs):
            row, cols, mask = row_chunk(t, chunks, hidden, BLOCK)
            idx = row * hidden + cols
            lamport_push(buf, idx, tl.load(x_bits_ptr + idx, mask=mask), mask, rank, world_size, capacity, bases)
        lamport_reset(old_buf, old_n, world_size, capacity, parts_ptr, phase, pid, num_programs, BLOCK)
        timed_out, wrong = lamport_reduce_rms_norm(buf, residual_ptr, weight_ptr, out_ptr, parts_ptr, phase,
                                                   n // hidden, hidden, hidden, eps, world_size, capacity, 1, 0,
                                                   max_spins, pid, num_programs, BLOCK, GROUP, CHUNKS, hdr_row,
                                                   expect)
        timeouts += timed_out
    else:
        for start in range(pid * BLOCK, n, num_programs * BLOCK):
            idx = start + offs
            mask = idx < n
            lamport_push(buf, idx, tl.load(x_bits_ptr + idx, mask=mask), mask, rank, world_size, capacity, bases)
        lamport_reset(old_buf, old_n, world_size, capacity, parts_ptr, phase, pid, num_programs, BLOCK)
        for start in range(pid * BLOCK, n, num_programs * BLOCK):
            idx = start + offs
            mask = idx < n
            acc, timed_out, differs = lamport_reduce(buf, idx, mask, world_size, capacity, 1, 0,
                                                     tl.where(wrong > 0, 0, max_spins), out_ptr.dtype.element_ty,
                                                     OP, GROUP, hdr_row, expect, (start == pid * BLOCK).to(tl.int32))
            timeouts += timed_out
            wrong += differs
            if AVG:
                acc = acc / world_size
            # a tile is written only while every poll of this program arrived and every peer's header agreed (a
            # peer's call that differs, or none: the host's check() raises, and out is left as it was)
            tl.store(out_ptr + idx, acc.to(out_ptr.dtype.element_ty), mask=mask & (timeouts == 0) & (wrong == 0))
    if wrong > 0:  # (polls cut short by the mismatch are not counted as timeouts)
        count_mismatch(state_ptr)
        if pid == 0:  # the peers' pushes of this call, all in before the next call resets the buffer
            if lamport_drain(buf, hdr_row, call, world_size, capacity, max_spins, BLOCK) > 0:
                count_timeout(state_ptr)
    elif timeouts > 0:
        count_timeout(state_ptr, 2, 0, lamport_absent(hdr_row, call, world_size, WORLD_POW2))
    lamport_finish(lstate_ptr, phase, n, pid, num_programs, call)
