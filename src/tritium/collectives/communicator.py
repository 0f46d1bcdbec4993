"""Host side of the collectives: :class:`Communicator`, one per symmetric heap (and process group).

The communicator owns the heap buffers and flags; each collective lives in a module of its own
(``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``, ``broadcast``,
``all_reduce_rms_norm``), whose function the method of the same name calls. Each call validates its
arguments on the host (shapes, dtypes, devices, sizes), then launches one kernel
(two-shot all-reduce: one kernel with two flag rounds) that stages the input into the heap, synchronises
with the peers through counters in the heap and computes the output. Nothing is allocated (given
``out=``), nothing is read back from the device, so a sequence of calls can be captured in a CUDA graph
and replayed; see :mod:`tritium.collectives.kernels` for the protocol.
"""

from __future__ import annotations

import functools
import zlib

import torch
import torch.distributed as dist
import triton

from tritium.collectives import kernels as K
from tritium.collectives.all_gather import all_gather
from tritium.collectives.all_reduce import all_reduce
from tritium.collectives.all_reduce_rms_norm import all_reduce_rms_norm
from tritium.collectives.all_to_all import all_to_all
from tritium.collectives.broadcast import broadcast
from tritium.collectives.common import (ALIGN, DTYPES, FLOAT_DTYPES, LAMPORT_MAX_BYTES, LAMPORT_PROGRAMS_PER_SM,
                                        ZERO_COPY_BYTES, CollectiveMismatch)
from tritium.collectives.lamport import HEADER_UNSET, LAMPORT_PARTIALS, LAMPORT_STATE_WORDS, SENTINEL16, SENTINEL32
from tritium.collectives.reduce_scatter import reduce_scatter
from tritium.runtime import interpreting, num_sms, pdl_launch
from tritium.shmem.heap import DeviceTimeout, SymmetricHeap

class Communicator:
    """Collectives over the ranks of ``heap`` (all of the heap's process group). ``group``, if given,
    must be the heap's group (its members): a tensor-parallel group is made by giving it to the heap.

    ``max_bytes``: the largest message of one call (per rank input; all_gather's output is
    ``world_size`` times that). The communicator takes ``4 * max_bytes`` (two double-buffered staging
    areas) and a few flag words from the heap, once: see :meth:`heap_bytes`.
    ``max_programs``: programs of one launch at most (default: the GPU's SM count, 1 under the
    interpreter, whose programs run one after another and so cannot wait for each other). The Lamport
    kernels, whose programs wait for no other program of their launch (the fused RMSNorm's only for values
    that every program shares before it waits), take up to ``lamport_programs`` (mutable; default
    ``LAMPORT_PROGRAMS_PER_SM`` times that; the fused RMSNorm at most that many times ``max_programs``).

    **Zero copy**: an input that is itself a tensor of ``heap`` (allocated by every rank in the same
    order, so it sits at the same offset on every rank) and has at least ``zero_copy_bytes`` bytes is
    read by the peers where it is, without the copy into the staging buffers; in place on a heap tensor,
    the two-shot all-reduce also writes its result straight into every rank's x. Every rank must then
    pass a heap tensor at the same offset (else :class:`CollectiveMismatch` on ``check``).

    ``pdl``: launch with programmatic dependent launch where the GPU has it (Hopper and newer): each
    call lets the next kernel launch at once, and waits for the previous one to finish before it reads
    anything, so the launch latency of a call hides behind the one before (inside CUDA graphs too).
    Mutable: ``comm.pdl = False`` turns it off for later calls.
    """

    def __init__(self, heap: SymmetricHeap, max_bytes: int = 64 << 20, *, max_programs: int | None = None,
                 zero_copy_bytes: int = ZERO_COPY_BYTES, group=None, pdl: bool = True):
        if not isinstance(heap, SymmetricHeap):
            raise TypeError(f"heap must be a tritium.shmem.SymmetricHeap, got {type(heap).__name__}")
        if group is not None and (not isinstance(group, dist.ProcessGroup)
                                  or dist.get_process_group_ranks(group) != heap.global_ranks):
            ranks = dist.get_process_group_ranks(group) if isinstance(group, dist.ProcessGroup) else group
            raise ValueError(f"group is {ranks!r}, but the heap's ranks are {heap.global_ranks}: make the heap "
                             f"with SymmetricHeap(..., group=group)")
        if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes <= 0:
            raise ValueError(f"max_bytes must be a positive int, got {max_bytes!r}")
        self.heap = heap
        self.rank, self.world_size, self.device = heap.rank, heap.world_size, heap.device
        self.group = heap.group
        self.max_bytes = -(-max_bytes // ALIGN) * ALIGN
        self._buf = heap.empty((2 * self.max_bytes,), torch.uint8)
        self._res = heap.empty((2 * self.max_bytes,), torch.uint8)
        self._flags = heap.zeros((2, self.world_size), torch.int64)
        self._state = heap.zeros((K.S_SIZES + K.STATE_ROWS * self.world_size,), torch.int64)
        self.lamport_bytes = min(self.max_bytes, LAMPORT_MAX_BYTES)
        self._lamport = heap.full((3 * self.world_size * self.lamport_bytes // 2,), SENTINEL16, torch.int16)
        self._lparts = heap.full((3 * LAMPORT_PARTIALS,), SENTINEL32, torch.int32)
        self._lhdr = heap.full((3 * self.world_size,), HEADER_UNSET, torch.int64)  # the Lamport calls' headers
        self._lstate = heap.zeros((LAMPORT_STATE_WORDS,), torch.int64)
        # the communicator's own heap bytes (no zero-copy input may overlap them)
        self._own = (heap.offset(self._buf), heap.offset(self._lstate) + self._lstate.numel() * 8)
        # what a wait that gives up reads to tell why (kernels.count_timeout): once, never per call
        self._state[K.S_RANK:K.S_LHDR + 1] = torch.tensor(
            [self.rank, self.world_size, heap.bases.data_ptr(), self._flags.data_ptr(), self._lstate.data_ptr(),
             self._lhdr.data_ptr()], dtype=torch.int64)
        heap.barrier()
        self._gave_up, self._out_of_step = False, ""  # a wait of this rank gave up; why check() raises for good
        default = 1 if interpreting() else num_sms(self.device)
        self.max_programs = default if max_programs is None else int(max_programs)
        if self.max_programs < 1 or (interpreting() and self.max_programs != 1):
            raise ValueError(f"max_programs must be >= 1 (1 under the Triton interpreter), got {max_programs!r}")
        self.lamport_programs = self.max_programs * (1 if interpreting() else LAMPORT_PROGRAMS_PER_SM)
        self._world_pow2 = triton.next_power_of_2(self.world_size)
        if not isinstance(zero_copy_bytes, int) or isinstance(zero_copy_bytes, bool) or zero_copy_bytes < 0:
            raise ValueError(f"zero_copy_bytes must be an int >= 0, got {zero_copy_bytes!r}")
        self.zero_copy_bytes = zero_copy_bytes
        self.pdl = bool(pdl)

    @staticmethod
    def heap_bytes(max_bytes: int, world_size: int) -> int:
        """Heap bytes a communicator of ``max_bytes`` takes (allocate the heap at least this large)."""
        aligned = -(-max_bytes // ALIGN) * ALIGN
        lstate = (-(-LAMPORT_STATE_WORDS * 8 // ALIGN) * ALIGN + -(-3 * LAMPORT_PARTIALS * 4 // ALIGN) * ALIGN
                  + -(-3 * world_size * 8 // ALIGN) * ALIGN)
        return 4 * aligned + 3 * world_size * min(aligned, LAMPORT_MAX_BYTES) + lstate + ALIGN * (4 + world_size)

    # -- checks --------------------------------------------------------------------------------------------
    def _check_tensor(self, name: str, t, numel: int | None = None) -> None:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device != self.device:
            raise ValueError(f"{name} is on {t.device}; this communicator's ranks work on {self.device}")
        if t.dtype not in DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; expected one of "
                            f"{', '.join(str(d).replace('torch.', '') for d in DTYPES)}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous, got strides {t.stride()} for shape {tuple(t.shape)}")
        nbytes = t.numel() * t.element_size()
        if nbytes > self.max_bytes:
            raise ValueError(f"{name} has {nbytes} bytes; this communicator takes messages of up to {self.max_bytes} "
                             f"bytes: make it with max_bytes >= {nbytes}")

    def _out(self, out, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
        if out is None:
            return torch.empty(shape, dtype=like.dtype, device=like.device)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
        if tuple(out.shape) != tuple(shape) or out.dtype != like.dtype or out.device != like.device:
            raise ValueError(f"out must be {tuple(shape)} {like.dtype} on {like.device}, got {tuple(out.shape)} "
                             f"{out.dtype} on {out.device}")
        if not out.is_contiguous():
            raise ValueError(f"out must be contiguous, got strides {out.stride()}")
        return out

    def _chunked(self, name: str, x: torch.Tensor) -> int:
        if x.dim() == 0 or x.shape[0] % self.world_size:
            raise ValueError(f"{name}: x's first dimension must divide by world_size {self.world_size}, got shape "
                             f"{tuple(x.shape)}")
        return x.shape[0] // self.world_size

    def check(self) -> None:
        """Host check (syncs): raise :class:`CollectiveMismatch` if peers made a call that differs from this
        rank's (sizes, dtype, layout, kind; a fused op's overlap mode), or :class:`DeviceTimeout` if a wait of
        this rank gave up, since the last check (a mismatch first: waits cut short by one are not timeouts,
        and a peer in another call can leave this rank waiting too). Once ranks were found in calls of different
        protocols, or a peer gave up waiting for this rank (it skipped a call, or made another), the ranks'
        call counters are out of step for good: every later check raises (make a new communicator)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        words = [int(v) for v in self._state[K.S_TIMEOUTS:K.S_GAVE_UP_ON + 1].tolist()]
        timeouts, mismatches, cross, gave_up_on = words
        if timeouts or mismatches:
            self._state[K.S_TIMEOUTS:K.S_MISMATCH + 1] = 0
        self._gave_up = self._gave_up or timeouts > 0
        if self._gave_up or cross or gave_up_on:
            why = ["this rank gave up waiting"] if self._gave_up else []
            if cross:
                why.append(f"{cross} wait(s) met a peer in a call of another protocol")
            if gave_up_on:
                why.append(f"peers gave up waiting for this rank {gave_up_on} time(s) (it skipped a call they "
                           f"made, or made it late)")
            self._out_of_step = (f"the ranks' call counters are out of step ({'; '.join(why)}): make a new "
                                 f"Communicator (and fused-op workspaces) on every rank")
        step = f"; {self._out_of_step}" if self._out_of_step else ""
        if mismatches:
            also = f"; {timeouts} wait(s) gave up as well" if timeouts else ""
            raise CollectiveMismatch(f"rank {self.rank}: peers called a collective with a different number of "
                                     f"elements (or another collective, op, dtype, source rank, trailing shape, "
                                     f"layout tag or overlap mode), or zero-copy heap inputs at different "
                                     f"offsets or on some ranks only ({mismatches} time(s){also}); every rank must "
                                     f"pass the same sizes, and heap tensors allocated in the same order on every "
                                     f"rank or none{step}")
        if timeouts:
            raise DeviceTimeout(f"rank {self.rank}: {timeouts} collective wait(s) gave up after "
                                f"{self.heap.max_spins} polls (a peer did not call, or called another collective)"
                                f"{step}")
        if self._out_of_step:
            error = CollectiveMismatch if cross else DeviceTimeout
            raise error(f"rank {self.rank}: {self._out_of_step}")

    # what error_counts holds, in order
    ERROR_COUNTS = ("timeouts", "mismatches", "cross_protocol", "gave_up_on")

    @property
    def error_counts(self) -> torch.Tensor:
        """The device counters :meth:`check` reads, ``[timeouts, mismatches, cross_protocol, gave_up_on]``
        int64 (a view; :data:`ERROR_COUNTS`): copy them to pinned host memory behind a step to learn, without
        a sync, whether its collectives went wrong (then call :meth:`check` for the error). The last two never
        go back to 0: waits that met a peer in a call of another protocol, and peers' waits that gave up on
        this rank (it skipped a call they made, or came late)."""
        return self._state[K.S_TIMEOUTS:K.S_GAVE_UP_ON + 1]

    # -- launches ------------------------------------------------------------------------------------------
    @staticmethod
    def tile(nbytes: int) -> tuple[int, int]:
        """(elements a program moves per step, warps) for a message of ``nbytes``.

        NOTE: 2x H200, bf16, in graphs: 2048-element tiles, 4 warps gave 8 KiB in 5.7 us but 256 MiB in
        1.32 ms (203 GB/s from the peer, NCCL 301): one 4 KiB tile in flight per program cannot cover
        NVLink's latency, so messages from 4 MiB take 8192-element tiles and 8 warps (four times the
        bytes in flight per SM)."""
        if interpreting():
            return 256, 4
        return (8192, 8) if nbytes >= (4 << 20) else (2048, 4)

    @staticmethod
    def lamport_tile(nbytes: int) -> tuple[int, int]:
        """(elements a program pushes and polls per step, warps) of the Lamport kernels.

        NOTE: 2x H200, bf16, graphs (bench/NOTES.md "Collectives", run 9): 1024-element tiles took 256 KiB
        in 4.43 us and 512 KiB in 6.73, against 5.53 and 7.35 with 2048 (at most one program an SM then);
        with up to 4 programs an SM, 1024 beat 2048 and 512 at 256-512 KiB in runs 10-11. At 1 MiB fewer,
        larger tiles were faster (2048 at one program an SM: 10.7 vs 11.4 us), but 1 MiB takes one-shot."""
        return (256, 4) if interpreting() else (1024, 4)

    def _lamport_grid(self, n: int, block: int) -> tuple[int]:
        return (max(1, min(self.lamport_programs, triton.cdiv(n, block))),)

    def _zero_copy_offset(self, x: torch.Tensor, out: torch.Tensor | None, out_may_be_x: bool = False) -> int:
        """x's byte offset in the heap when the peers can read it in place this call, else -1 (stage it):
        x is a heap tensor of at least ``zero_copy_bytes`` bytes, 16-byte aligned, outside the
        communicator's own buffers, and ``out`` does not overlap it (or is x itself, ``out_may_be_x``)."""
        nbytes = x.numel() * x.element_size()
        if nbytes < max(self.zero_copy_bytes, 1):
            return -1
        off = self.heap.offset(x)
        if off is None or off % 16 or (off < self._own[1] and self._own[0] < off + nbytes):
            return -1
        if out is not None:
            lo, hi = out.data_ptr(), out.data_ptr() + out.numel() * out.element_size()
            overlaps = lo < x.data_ptr() + nbytes and x.data_ptr() < hi
            if overlaps and not (out_may_be_x and lo == x.data_ptr() and out.numel() == x.numel()):
                return -1
        return off

    def _grid(self, work: int, block: int) -> tuple[int]:
        return (max(1, min(self.max_programs, triton.cdiv(work, block))),)

    @staticmethod
    @functools.lru_cache(maxsize=1024)
    def _agreement(kind: int, op: int, avg: bool, dtype: torch.dtype, src: int, rows: tuple, tag: int) -> int:
        """The layout word peers compare with the element count: a 23-bit digest of what every rank must call
        alike (the collective, its op, dtype, source rank and the shape past the first dimension) and the
        caller's ``tag``. Ranks that differ in any get :class:`CollectiveMismatch` (but for a digest collision,
        one in 2**23), not each other's bytes read as theirs."""
        return zlib.crc32(repr((kind, op, avg, str(dtype), src, rows, tag)).encode()) & ((1 << K.TAG_BITS) - 1)

    def _launch(self, kind: int, x: torch.Tensor, out: torch.Tensor, n_out: int, *, op: int = K.OP_SUM,
                avg: bool = False, src: int = 0, tag: int = 0) -> torch.Tensor:
        """One launch of the one-round collective ``kind``. ``tag``: an int in ``[0, 2**TAG_BITS)`` every rank
        must pass equal (a caller's layout, e.g. the rows of each rank's message), checked on the device with
        the element count, the collective, its op, dtype, source and trailing shape (``_agreement``): peers that
        disagree get :class:`CollectiveMismatch` from :meth:`check`. An empty ``x`` launches too: a rank that
        passes one where its peers do not takes part in the check, instead of leaving them waiting."""
        if not 0 <= tag < 1 << K.TAG_BITS:
            raise ValueError(f"tag must be in [0, 2**{K.TAG_BITS}), got {tag}")
        tag = self._agreement(kind, op, avg, x.dtype, src, tuple(x.shape[1:]), tag)
        half = self.max_bytes // x.element_size()
        block, warps = self.tile(x.numel() * x.element_size())
        x_off = self._zero_copy_offset(x, out, out_may_be_x=kind == K.BROADCAST)
        K._collective_kernel[self._grid(max(n_out, 1), block)](
            x, out, self._buf.view(x.dtype), self._flags, self._state, self.heap.bases,
            x.numel(), n_out, self.rank, self.world_size, src, half, self.heap.max_spins, x_off, tag << K.TAG_SHIFT,
            KIND=kind, OP=op, IS_FLOAT=x.dtype in FLOAT_DTYPES, AVG=avg, BLOCK=block,
            WORLD_POW2=self._world_pow2, HINT=block if n_out * x.element_size() % 16 == 0 else None,
            STAGED=x_off < 0, num_warps=warps, **pdl_launch(self.device, self.pdl))
        return out

    # -- collectives (one module each) ---------------------------------------------------------------------
    def all_reduce(self, x: torch.Tensor, op: str = "sum", out: torch.Tensor | None = None,
                   algorithm: str = "auto") -> torch.Tensor:
        """Elementwise ``op`` ("sum", "max", "min", "avg") of ``x`` over all ranks, any shape; returns
        ``out`` (``x`` itself when ``out is x``). Floats accumulate in fp32; ints are exact. ``algorithm``:
        "one_shot", "two_shot", "lamport" (16-bit floats, small) or "auto"
        (:func:`tritium.collectives.all_reduce.select_all_reduce`)."""
        return all_reduce(self, x, op, out, algorithm)

    def all_gather(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """``x [n, ...]`` of every rank -> ``[world_size * n, ...]`` in rank order."""
        return all_gather(self, x, out)

    def reduce_scatter(self, x: torch.Tensor, op: str = "sum", out: torch.Tensor | None = None) -> torch.Tensor:
        """``x [world_size * n, ...]`` -> ``[n, ...]``: rank r gets the r-th chunk reduced over ranks."""
        return reduce_scatter(self, x, op, out)

    def all_to_all(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """``x [world_size * n, ...]``: chunk j goes to rank j; chunk i of the output came from rank i."""
        return all_to_all(self, x, out)

    def broadcast(self, x: torch.Tensor, src: int) -> torch.Tensor:
        """``x`` of rank ``src`` into ``x`` of every rank (in place); returns ``x``."""
        return broadcast(self, x, src)

    def all_reduce_rms_norm(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                            out: torch.Tensor | None = None) -> torch.Tensor:
        """``h = all_reduce(x) + residual; residual <- h; out = rms_norm(h) * weight`` in one kernel
        (the row-parallel layer's all-reduce fused with the next residual add and RMSNorm). x, residual:
        ``[tokens, hidden]`` floats of one dtype; weight ``[hidden]``."""
        return all_reduce_rms_norm(self, x, residual, weight, eps, out)
