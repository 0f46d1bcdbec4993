"""All-reduce fused with the next residual add and RMSNorm (the row-parallel layer's epilogue):
``h = all_reduce(x) + residual; residual <- h; out = rms_norm(h) * weight``. Messages the plain all-reduce
sends by the Lamport protocol take the Lamport all-reduce's kernel with ``FUSE_RMS`` (rows in chunks whose
programs share their sums of squares); the others a flag-protocol kernel here.
Reference: :func:`tritium.collectives.reference.all_reduce_rms_norm_ref`."""

import torch
import triton
import triton.language as tl

from tritium.collectives.all_reduce import _lamport_all_reduce_kernel, select_all_reduce
from tritium.collectives.common import FLOAT_DTYPES, LAMPORT_PROGRAMS_PER_SM
from tritium.collectives.kernels import OP_SUM, begin, finish, pdl_prologue, reduce_tile
from tritium.collectives.lamport import LAMPORT_PARTIALS, lamport_key, poll_group
from tritium.runtime import pdl_launch


def all_reduce_rms_norm(comm, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                        out: torch.Tensor | None = None) -> torch.Tensor:
    """``h = all_reduce(x) + residual; residual <- h; out = rms_norm(h) * weight`` in one kernel
    (the row-parallel layer's all-reduce fused with the next residual add and RMSNorm). x, residual:
    ``[tokens, hidden]`` floats of one dtype; weight ``[hidden]``. Ranks that disagree on the shape or dtype
    (no rows on some ranks included: such a rank takes part) get ``CollectiveMismatch`` from
    ``Communicator.check``, and nothing is written."""
    comm._check_tensor("x", x)
    if x.dtype not in FLOAT_DTYPES or x.dim() != 2:
        raise ValueError(f"x must be a [tokens, hidden] float tensor, got {tuple(x.shape)} {x.dtype}")
    comm._check_tensor("residual", residual)
    if residual.shape != x.shape or residual.dtype != x.dtype:
        raise ValueError(f"residual must be {tuple(x.shape)} {x.dtype}, got {tuple(residual.shape)} {residual.dtype}")
    comm._check_tensor("weight", weight)
    if tuple(weight.shape) != (x.shape[1],):
        raise ValueError(f"weight must be [{x.shape[1]}], got {tuple(weight.shape)}")
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0:
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    out = comm._out(out, tuple(x.shape), x)
    if x.numel() == 0 and comm.world_size == 1:  # (with peers, a rank without rows still takes part: see below)
        return out
    rows, hidden = x.shape
    nbytes = x.numel() * x.element_size()
    block, warps = comm.lamport_tile(nbytes)
    chunks = triton.cdiv(hidden, block)
    # an empty x takes the flag-protocol kernel, as the plain all-reduce's does (Communicator._launch): its
    # element count meets the peers' there (CollectiveMismatch at once); peers in the Lamport kernel are found
    # by the first wait that gives up (count_timeout), a CollectiveMismatch on every rank too
    if (x.numel() > 0 and select_all_reduce(nbytes, comm.world_size, x.dtype, comm.lamport_bytes) == "lamport"
            and rows * chunks <= LAMPORT_PARTIALS):
        # the Lamport all-reduce over row chunks; the chunks of a row share their sums of squares
        grid = min(rows * chunks, comm.lamport_programs, comm.max_programs * LAMPORT_PROGRAMS_PER_SM)
        _lamport_all_reduce_kernel[(grid,)](
            x.view(torch.int16), out, comm._lamport, comm._lparts, comm._lstate, comm._lhdr, comm._state,
            comm.heap.bases, residual, weight, x.numel(), comm.rank, comm.world_size, comm.lamport_bytes // 2,
            comm.heap.max_spins, hidden, float(eps),
            lamport_key(x.numel(), "all_reduce_rms_norm", hidden, str(x.dtype)), OP=OP_SUM, AVG=False, BLOCK=block,
            FUSE_RMS=True, GROUP=poll_group(comm.world_size, block), WORLD_POW2=comm._world_pow2,
            CHUNKS=triton.next_power_of_2(chunks), num_warps=warps,
            **pdl_launch(comm.device, comm.pdl))
        return out
    half = comm.max_bytes // x.element_size()
    _all_reduce_rms_norm_kernel[(max(1, min(comm.max_programs, rows)),)](
        x, residual, weight, out, comm._buf.view(x.dtype), comm._flags, comm._state, comm.heap.bases,
        rows, hidden, float(eps), comm.rank, comm.world_size, half, comm.heap.max_spins,
        BLOCK=triton.next_power_of_2(max(hidden, 1)), WORLD_POW2=comm._world_pow2,
        HINT=hidden if 0 < hidden == triton.next_power_of_2(hidden) and hidden * x.element_size() % 16 == 0 else None,
        num_warps=8 if hidden > 4096 else 4, **pdl_launch(comm.device, comm.pdl))
    return out


@triton.jit
def _all_reduce_rms_norm_kernel(
    # pointers
    x_ptr, residual_ptr, weight_ptr, out_ptr, buf_ptr, flags_ptr, state_ptr, bases,
    # sizes
    rows, hidden, eps, rank, world_size, half, max_spins,
    # meta-parameters
    BLOCK: tl.constexpr, WORLD_POW2: tl.constexpr, HINT: tl.constexpr = None, USE_PDL: tl.constexpr = False,
):
    """``h = all_reduce(x) + residual; residual <- h; out = rms_norm(h) * weight`` for x, residual, out
    ``[rows, hidden]`` contiguous: one-shot all-reduce of each row (fp32), then the RMSNorm of
    :func:`tritium.ops.reference.rms_norm` (h rounded to x's dtype, the normalised row rounded before the
    weight), row by row (one row a tile, ``BLOCK >= hidden``)."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    # the norm's weight is never written by a kernel: requested before the PDL wait and the peers' handshake,
    # so that its latency (a DRAM miss in decode) is not added after them
    cols = tl.arange(0, BLOCK)
    cmask = cols < hidden
    w = tl.load(weight_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    pdl_prologue(USE_PDL)
    n = rows * hidden
    buf, ok = begin(x_ptr, buf_ptr, flags_ptr, state_ptr, n, -1, rank, world_size, bases, half, max_spins,
                     BLOCK, WORLD_POW2)
    if ok != 0:
        for row in range(pid, rows, num_programs):
            idx = row * hidden + cols
            acc = reduce_tile(buf, idx, cmask, rank, world_size, bases, 0, True, HINT)
            r = tl.load(residual_ptr + idx, mask=cmask, other=0.0)
            dtype = r.dtype
            h = (acc.to(dtype).to(tl.float32) + r.to(tl.float32)).to(dtype)
            tl.store(residual_ptr + idx, h, mask=cmask)
            hf = h.to(tl.float32)
            rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / hidden + eps)
            y = (hf * rstd).to(dtype).to(tl.float32) * w
            tl.store(out_ptr + idx, y.to(out_ptr.dtype.element_ty), mask=cmask)
    finish(state_ptr, num_programs, 0)
