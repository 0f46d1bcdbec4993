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

**Agreement**: ranks that call an op with different shapes or dtypes would read each other's rows at the
wrong places, or wait for flags that never come. Each rank announces its call's layout (a digest,
:func:`layout_tag`) in a "hello" flag per peer (:func:`announce`, with the epoch, flags of each parity
apart); a consumer checks a source's hello once a program (:func:`source_agrees`) before it waits for that
source's data flags, and skips what a disagreeing source would have sent: every rank's
``Communicator.check`` then raises ``CollectiveMismatch`` (the call's output is unspecified), with no host
sync or extra launch on the hot path. The double-buffered halves sit at offsets fixed by the buffer's size
(:func:`halves`), so a disagreeing call's writes stay in its own parity's half. A rank without rows still
takes part (its first program checks every source). Ranks in different overlap modes use different flags
(bulk: the collective's; producer_consumer and fused of all_gather_matmul: hello flags of their own; the
reduce-scatter kernels serve both modes of the other two ops alike): their waits never meet, so there is no
cheap way to compare them on the hot path; instead the first wait that gives up looks for the peer in a call
of another protocol (``count_timeout``; the communicator's state keeps the addresses of each op's hello flags
and counter, :data:`_PROTOCOL_WORDS`) and counts ``CollectiveMismatch`` on both ranks, after ``max_spins``.
"""

from __future__ import annotations

import contextlib
import functools
import zlib

import torch
import triton
import triton.language as tl

from tritium.collectives import Communicator
from tritium.collectives.kernels import FUSED_SLOTS, S_FUSED, count_mismatch, count_timeout
from tritium.shmem.device import translate
from tritium.shmem.heap import AllocationMismatch, HeapExhausted, PeerTimeout

STATE_WORDS = 2  # calls, ticket
# each fused protocol's hello flags and op state (all_gather_matmul fused, producer_consumer; the reduce-scatter
# kernels of matmul_reduce_scatter and matmul_all_reduce; distributed_paged_decode's fused mode, whose workspace
# holds its own: register_protocol), whose addresses the communicator's state keeps: a wait of another protocol
# that gives up finds there a peer in one of these ops' calls (a mismatch, not a timeout)
_PROTOCOLS = ("ag", "agce", "rs", "ar", "dd")
_PROTOCOL_WORDS = {f"{op}.{what}": S_FUSED + 2 * slot + i for slot, op in enumerate(_PROTOCOLS)
                   for i, what in enumerate(("hello", "state"))}
assert len(_PROTOCOL_WORDS) == 2 * FUSED_SLOTS


def register_protocol(comm: Communicator, op: str, hello: torch.Tensor, state: torch.Tensor) -> None:
    """Keep in ``comm``'s state where the op ``op`` (one of ``_PROTOCOLS``) has its hello flags (int64 ``[2,
    world_size]`` heap flags raised by :func:`announce`) and its call counter (``state[0]``), for waits of
    other protocols that give up (``count_timeout``). Host writes of two words: once per buffer, not per call."""
    at = _PROTOCOL_WORDS[f"{op}.hello"]
    comm._state[at:at + 2] = torch.tensor([hello.data_ptr(), state.data_ptr()], dtype=torch.int64)


def workspace(comm: Communicator, name: str, numel: int, dtype: torch.dtype, fill: int | None = None,
              whole: bool = False) -> torch.Tensor:
    """The heap buffer ``name`` of ``comm`` with at least ``numel`` elements of ``dtype`` (a view of its
    first ``numel``; ``whole``: all of it, the same size on every rank), allocated (filled with ``fill``, if
    given) on first use and grown when needed. Kept as bytes: calls in another dtype view the same buffer
    (a heap allocation is never freed, so a new one per dtype switch would use the heap up)."""
    cache = comm.__dict__.setdefault("_fused_workspaces", {})
    held = cache.get(name)
    size = torch.tensor([], dtype=dtype).element_size()
    nbytes = -(-max(numel, 1) * size // 8) * 8  # (a whole number of elements of every dtype)
    if held is None or held.numel() < nbytes:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"fused ops: the workspace {name!r} must grow to {numel} {dtype} elements, which "
                               f"cannot happen during CUDA graph capture; call the op once with this shape first")
        heap = comm.heap
        try:
            held = heap.empty((nbytes,), torch.uint8)
        except HeapExhausted as e:
            raise ValueError(f"fused ops: the communicator's heap has no room for {nbytes} more bytes ({name}); "
                             f"make the SymmetricHeap larger (see tritium.fused.heap_bytes)") from e
        except (AllocationMismatch, PeerTimeout) as e:  # (heap allocation is collective)
            raise RuntimeError(f"fused ops: the ranks disagree on the workspace {name!r}: every rank must call the "
                               f"op with the same shapes and dtype, or none ({e})") from e
        if fill is not None:
            held.view(dtype).fill_(fill)
        cache[name] = held
        if name in _PROTOCOL_WORDS:  # where a wait that gives up looks for peers in this op's calls
            comm._state[_PROTOCOL_WORDS[name]] = held.data_ptr()
        heap.barrier()  # every rank's buffer exists (and is filled) before any peer writes into it
    view = held.view(dtype)
    return view if whole else view[:numel]


def halves(comm: Communicator, name: str, numel: int, dtype: torch.dtype) -> tuple[torch.Tensor, int]:
    """(the whole double-buffered heap buffer ``name``, the offset of its second half in elements): two
    halves of at least ``numel`` elements each, the second starting on a 16-byte boundary (TMA). The
    offset depends on the buffer's size only, which is the same on every rank, not on this call's shape:
    ranks that call with different shapes (a mismatch, raised by ``Communicator.check``) still write only
    into the half of the call's parity, so the next calls' data is never overwritten by a late write."""
    align = max(1, 16 // torch.tensor([], dtype=dtype).element_size())
    buf = workspace(comm, name, 2 * (numel + align), dtype, whole=True)
    return buf, buf.numel() // 2 // align * align


@functools.lru_cache(maxsize=1024)
def layout_tag(*fields) -> int:
    """A digest, in ``[0, 2**FLAG_TAG_BITS)``, of what every rank must call a fused op with alike (the op,
    the shapes that fix its data and flag layout, the dtype): raised with the call's epoch in the op's
    "hello" flags (:func:`announce`) and compared by every peer (:func:`source_agrees`)."""
    return zlib.crc32(repr(fields).encode()) & ((1 << FLAG_TAG_BITS) - 1)


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
def _bit_or(a, b):
    return a | b


@triton.jit
def wait_flags_tagged(flag_ptrs, mask, epoch, tag, max_spins, comm_state_ptr, senders, own):
    """:func:`wait_flags` for flags raised to ``tagged(epoch, producer's tag)``: waits until each is
    ``>= tagged(epoch, 0)``, then counts a flag of this epoch with another tag (a producer whose layout
    differs from this rank's: rows would land elsewhere) as a mismatch in the communicator's state
    (``Communicator.check`` raises ``CollectiveMismatch``). Returns 1 if all were seen with ``tag``.
    ``senders``: per flag, the bit of the rank that raises it (int64 ``1 << rank``; bit 63 for every rank
    from 63 on); ``own``: the address of the op's hello flags. A give-up looks for the ranks whose flags are
    still short in a call of another protocol (``count_timeout``: a mismatch on both ranks, slow path only)."""
    lo = tagged(epoch, 0)
    seen, missing = _poll_flags(flag_ptrs, mask, lo, max_spins)
    wrong = tl.sum(tl.where(mask & (seen != lo + tag), 1, 0), axis=0)
    if missing > 0:
        count_timeout(comm_state_ptr, 3, own, tl.reduce(tl.where(mask & (seen < lo), senders, 0), 0, _bit_or))
    elif wrong > 0:
        count_mismatch(comm_state_ptr)
    tl.debug_barrier()
    return (wrong == 0).to(tl.int32)


@triton.jit
def announce(hello_ptr, epoch, parity, tag, rank, world_size, bases):
    """Raise this rank's "hello" flag of this call on every rank: ``hello[parity, rank] = tagged(epoch,
    tag)`` (``hello_ptr``: the op's int64 ``[2, world_size]`` heap flags, zeros at first), ``tag`` this
    call's :func:`layout_tag`. Flags of each parity apart: a peer can be one call ahead, never two."""
    for dst in range(0, world_size):
        raise_flag(hello_ptr + parity * world_size + rank, tagged(epoch, tag), rank, dst, bases)


@triton.jit
def source_agrees(hello_ptr, src, epoch, parity, tag, world_size, checked, agreed, max_spins, comm_state_ptr):
    """Whether rank ``src`` makes this call with this rank's layout ``tag``: waits (bounded) for its hello
    flag of this call (:func:`announce`) and compares its tag; a different one is counted as a mismatch
    (``Communicator.check`` raises ``CollectiveMismatch``), a flag that never comes as a timeout. The
    verdicts are kept in the bit masks ``checked`` and ``agreed`` (int64, zeros at the start of a program;
    ranks from 62 on are checked every time), so a program polls each source's flag once a call. Returns
    (1 if it agrees else 0, checked, agreed): the caller then waits for the source's data flags only if
    it agrees (a source with another layout may never raise them)."""
    bit = tl.where(src < 62, tl.full([], 1, tl.int64) << tl.minimum(src, 61).to(tl.int64), 0)
    if (checked & bit) != 0:
        ok = ((agreed & bit) != 0).to(tl.int32)
    else:
        lo = tagged(epoch, 0)
        flag = hello_ptr + parity * world_size + src
        seen = tl.atomic_add(flag, 0, sem="acquire", scope="sys")
        spins = 0
        while (seen < lo) & (spins < max_spins):
            seen = tl.atomic_add(flag, 0, sem="acquire", scope="sys")
            spins += 1
        ok = (seen == lo + tag).to(tl.int32)
        if seen < lo:  # (and why: a peer in another call, e.g. another overlap mode, is a mismatch)
            count_timeout(comm_state_ptr, 3, hello_ptr.to(tl.int64), tl.where(src < 62, bit, -1))
        elif ok == 0:
            count_mismatch(comm_state_ptr)
        checked = checked | bit
        agreed = agreed | tl.where(ok != 0, bit, 0)
    return ok, checked, agreed


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
    gather = 4 * M * K * size  # double-buffered gather (fused), producer_consumer's, the bulk path's buffer
    receive = 2 * M * N * size + 2 * world_size * M * N * size + M * N * size  # reduce-scatter, all-reduce, bulk
    flags = 3 * world_size * (M // 16 + 2) * (N // 16 + 2) * 8 + 4 * 2 * world_size * 8 + 4096  # + hello flags
    return gather + receive + flags + 32 * 256 + 8 * 32  # heap alignment; halves' 16-byte alignment
