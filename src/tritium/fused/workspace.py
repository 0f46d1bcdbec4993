"""What the fused GEMM + communication ops keep between calls, and the device-side signalling they share.

**Host**: :func:`workspace` hands out a communicator's heap buffers by name (double-buffered gather and
receive buffers, flag arrays), allocated on first use and grown when a call needs more. Heap allocation
is collective: every rank makes the same calls with the same shapes in the same order (as it must for
any collective), so every rank allocates the same buffers at the same offsets. Allocation cannot happen
while a CUDA graph is being captured: run each shape once before capturing (as Triton's compilation
requires anyway).

**Device** (``@triton.jit``): a call counter per op (``state[0]``: calls, ``state[1]``: the launch's
ticket) gives each call an *epoch* (calls + 1) and a parity (which half of the double-buffered heap
buffers it uses). Flags only grow: a producer sets a flag to the epoch (release, system scope), a
consumer waits until it is ``>= epoch`` (acquire; bounded polls, a give-up is counted in the
communicator's state and raised by ``Communicator.check``). Nothing is reset between calls, so a
sequence of calls replays from a CUDA graph. Why a rank can reuse a buffer two calls later: a rank
finishes call c only after every peer has sent it call c's data, which each peer does after its own
call c - 1 ended; so no peer is still reading a buffer of parity c + 1 when this rank writes it.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from tritium.collectives import Communicator
from tritium.collectives.kernels import count_mismatch, count_timeout
from tritium.shmem.device import translate
from tritium.shmem.heap import AllocationMismatch, HeapExhausted, PeerTimeout

STATE_WORDS = 2  # calls, ticket


def workspace(comm: Communicator, name: str, numel: int, dtype: torch.dtype, fill: int | None = None) -> torch.Tensor:
    """The heap buffer ``name`` of ``comm`` with at least ``numel`` elements of ``dtype`` (a view of its
    first ``numel``), allocated (filled with ``fill``, if given) on first use and grown when needed."""
    cache = comm.__dict__.setdefault("_fused_workspaces", {})
    held = cache.get(name)
    if held is None or held.numel() < numel or held.dtype != dtype:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"fused ops: the workspace {name!r} must grow to {numel} {dtype} elements, which "
                               f"cannot happen during CUDA graph capture; call the op once with this shape first")
        heap = comm.heap
        nbytes = numel * torch.tensor([], dtype=dtype).element_size()
        try:
            held = heap.empty((max(numel, 1),), dtype)
        except HeapExhausted as e:
            raise ValueError(f"fused ops: the communicator's heap has no room for {nbytes} more bytes ({name}); "
                             f"make the SymmetricHeap larger (see tritium.fused.heap_bytes)") from e
        except (AllocationMismatch, PeerTimeout) as e:  # (heap allocation is collective)
            raise RuntimeError(f"fused ops: the ranks disagree on the workspace {name!r}: every rank must call the "
                               f"op with the same shapes and dtype, or none ({e})") from e
        if fill is not None:
            held.fill_(fill)
        cache[name] = held
        heap.barrier()  # every rank's buffer exists (and is filled) before any peer writes into it
    return held[:numel]


@contextlib.contextmanager
def forked(comm: Communicator, device: torch.device):
    """``with forked(comm, device) as side:`` work enqueued under ``with side:`` runs on ``comm``'s side
    stream (made once), after everything enqueued before on the current stream; the rest of the body
    runs on the current stream, concurrently; on exit the current stream waits for the side stream.
    Without CUDA (the interpreter runs each launch to its end) ``side`` does nothing: the body's order
    is the execution order, so the producer must come first there."""
    if device.type != "cuda":
        yield contextlib.nullcontext()
        return
    cache = comm.__dict__.setdefault("_fused_streams", {})
    if "side" not in cache:
        cache["side"] = (torch.cuda.Stream(device), torch.cuda.Event(), torch.cuda.Event())
    stream, fork, join = cache["side"]
    fork.record()
    stream.wait_event(fork)
    yield torch.cuda.stream(stream)
    join.record(stream)
    torch.cuda.current_stream(device).wait_event(join)


# -- device building blocks -------------------------------------------------------------------------------
@triton.jit
def epoch_of(state_ptr):
    """(epoch, parity) of this call: ``calls + 1`` and ``calls % 2`` (``state_ptr``: the op's int64 state)."""
    calls = tl.load(state_ptr, volatile=True)
    return calls + 1, calls % 2


@triton.jit
def raise_flag(flag_ptr, epoch, rank, dst, bases):
    """Set the flag ``flag_ptr`` (a heap int64, this rank's address) on rank ``dst`` to ``epoch``;
    release, system scope: this program's earlier writes are visible to whoever sees it."""
    tl.debug_barrier()
    tl.atomic_xchg(translate(flag_ptr, rank, dst, bases), epoch, sem="release", scope="sys")


@triton.jit
def wait_flag(flag_ptr, epoch, max_spins, comm_state_ptr):
    """Poll this rank's flag until it is ``>= epoch`` (acquire, system scope), at most ``max_spins`` polls;
    a give-up is counted in the communicator's state (``Communicator.check`` raises). Returns 1 if seen."""
    seen = tl.atomic_add(flag_ptr, 0, sem="acquire", scope="sys")
    spins = 0
    while (seen < epoch) & (spins < max_spins):
        seen = tl.atomic_add(flag_ptr, 0, sem="acquire", scope="sys")
        spins += 1
    ok = seen >= epoch
    if not ok:
        count_timeout(comm_state_ptr)
    return ok.to(tl.int32)


@triton.jit
def wait_flags(flag_ptrs, mask, epoch, max_spins, comm_state_ptr):
    """:func:`wait_flag` for a block of flags (``flag_ptrs`` where ``mask``), polled together: every round
    loads them all (acquire, system scope), so waiting for n flags costs about one poll latency, not n.
    At most ``max_spins`` rounds; a give-up is counted once. Ends with a barrier: every thread of the
    program may read what any of the flags guards. Returns 1 if all were seen."""
    seen, missing = _poll_flags(flag_ptrs, mask, epoch, max_spins)
    if missing > 0:
        count_timeout(comm_state_ptr)
    tl.debug_barrier()
    return (missing == 0).to(tl.int32)


@triton.jit
def _poll_flags(flag_ptrs, mask, lo, max_spins):
    """Load the flags (acquire, system scope) until every one where ``mask`` is ``>= lo``, at most
    ``max_spins`` rounds; returns (the last values seen, how many were still short)."""
    seen = tl.atomic_add(flag_ptrs, 0, mask=mask, sem="acquire", scope="sys")
    missing = tl.sum(tl.where(mask & (seen < lo), 1, 0), axis=0)
    spins = 0
    while (missing > 0) & (spins < max_spins):
        seen = tl.atomic_add(flag_ptrs, 0, mask=mask, sem="acquire", scope="sys")
        missing = tl.sum(tl.where(mask & (seen < lo), 1, 0), axis=0)
        spins += 1
    return seen, missing


FLAG_TAG_BITS = 24  # tagged flags: epoch << FLAG_TAG_BITS | tag (epochs to 2**39 calls)
_FLAG_TAG_BITS = tl.constexpr(FLAG_TAG_BITS)


@triton.jit
def tagged(epoch, tag):
    """A flag value carrying the producer's layout ``tag`` (in ``[0, 2**FLAG_TAG_BITS)``) with the epoch:
    still growing with the epoch, so :func:`wait_flags_tagged` can wait with ``>=`` and then compare."""
    return (epoch.to(tl.int64) << _FLAG_TAG_BITS) + tag


@triton.jit
def wait_flags_tagged(flag_ptrs, mask, epoch, tag, max_spins, comm_state_ptr):
    """:func:`wait_flags` for flags raised to ``tagged(epoch, producer's tag)``: waits until each is
    ``>= tagged(epoch, 0)``, then counts a flag of this epoch with another tag (a producer whose layout
    differs from this rank's: rows would land elsewhere) as a mismatch in the communicator's state
    (``Communicator.check`` raises ``CollectiveMismatch``). Returns 1 if all were seen with ``tag``."""
    lo = tagged(epoch, 0)
    seen, missing = _poll_flags(flag_ptrs, mask, lo, max_spins)
    wrong = tl.sum(tl.where(mask & (seen != lo + tag), 1, 0), axis=0)
    if missing > 0:
        count_timeout(comm_state_ptr)
    elif wrong > 0:
        count_mismatch(comm_state_ptr)
    tl.debug_barrier()
    return (wrong == 0).to(tl.int32)


@triton.jit
def proxy_fence(ENABLED: tl.constexpr):
    """Order this thread's earlier generic-proxy accesses (the flag it acquired) before its later TMA
    (async-proxy) loads of the data the flag guards: ``fence.proxy.async.global`` (NVIDIA, compiled)."""
    if ENABLED:
        tl.inline_asm_elementwise("fence.proxy.async.global; mov.u32 $0, 0;", "=r", [], dtype=tl.int32,
                                  is_pure=False, pack=1)


@triton.jit
def end_call(state_ptr, num_programs):
    """The launch's last program to get here advances the call counter (the ticket in ``state_ptr[1]``)."""
    tl.debug_barrier()
    done = tl.atomic_add(state_ptr + 1, 1, sem="acq_rel", scope="gpu")
    if done == num_programs - 1:
        tl.atomic_xchg(state_ptr + 1, 0, sem="relaxed", scope="gpu")
        tl.atomic_add(state_ptr, 1, sem="release", scope="gpu")


def heap_bytes(M: int, N: int, K: int, world_size: int, dtype: torch.dtype = torch.bfloat16) -> int:
    """Heap bytes the fused ops' workspaces take for global shapes up to ``[M, K] @ [K, N]`` (all three
    ops, every mode; add the communicator's ``Communicator.heap_bytes``)."""
    size = torch.tensor([], dtype=dtype).element_size()
    gather = 3 * M * K * size                      # double-buffered gather + the bulk path's buffer
    receive = 2 * M * N * size + 2 * world_size * M * N * size + M * N * size  # reduce-scatter, all-reduce, bulk
    flags = 3 * world_size * (M // 16 + 2) * (N // 16 + 2) * 8 + 4096
    return gather + receive + flags + 16 * 256
