"""Flags and the device-side barrier: ``signal``, ``wait``, ``barrier`` (``@triton.jit``).

Same argument order as ``device``: ``op(pointers..., values..., rank, remote_rank, bases, options)``.

Waits are bounded: ``wait`` and ``barrier`` poll at most ``max_spins`` times and return 0 instead of
hanging when a peer never arrives (a lost rank becomes an error on the host, not a hang).

The barrier keeps its state in the heap (``SymmetricHeap`` reserves ``SYNC_SLOTS + world_size``
int64 words at its start), so the barrier kernel's arguments never change and it can be captured in
a CUDA graph and replayed: word ``EPOCH`` counts this rank's barriers, word ``TIMEOUTS`` counts
barriers that gave up, and word ``ARRIVALS + r`` counts how many barriers rank ``r`` has reached on
this rank. Barrier ``k`` adds 1 to its own word on every rank (release, sys), then waits until every
word of its own row is ``>= k`` (acquire, sys). Counters only grow (int64), so no reset is needed
between barriers and a rank may run ahead into barrier ``k + 1``.
"""

import triton
import triton.language as tl

from tritium.shmem.device import translate

# Word indices for the host; kernels read the constexpr copies (Triton kernels may only read
# constexpr globals).
EPOCH, TIMEOUTS, ARRIVALS = 0, 1, 2
SYNC_SLOTS = ARRIVALS  # int64 words before the per-rank arrival counters
_EPOCH = tl.constexpr(EPOCH)
_TIMEOUTS = tl.constexpr(TIMEOUTS)
_ARRIVALS = tl.constexpr(ARRIVALS)


@triton.jit
def signal(flag_ptr, value, rank, remote_rank, bases,
           sem: tl.constexpr = tl.constexpr("release"), scope: tl.constexpr = tl.constexpr("sys"),
           op: tl.constexpr = tl.constexpr("set")):
    """Publish ``value`` to the flag at ``flag_ptr``'s offset on ``remote_rank``: ``op="set"`` stores it
    (atomic exchange), ``op="add"`` adds it. Returns the old flag value.

    With the default release/sys, every write this program made before the signal (including
    ``put``/``store`` to ``remote_rank``) is visible to a rank that observes the flag with ``wait``.
    Call from all threads of the program (it syncs the program first); ``flag_ptr`` is a scalar
    int32/int64 pointer.
    """
    tl.debug_barrier()  # order every thread's earlier writes before the one thread doing the atomic
    ptr = translate(flag_ptr, rank, remote_rank, bases)
    if op == "add":
        old = tl.atomic_add(ptr, value, sem=sem, scope=scope)
    else:
        tl.static_assert(op == "set", "signal: op must be 'set' or 'add'")
        old = tl.atomic_xchg(ptr, value, sem=sem, scope=scope)
    return old


@triton.jit
def _reached(seen, value, cmp: tl.constexpr):
    if cmp == "eq":
        done = seen == value
    else:
        tl.static_assert(cmp == "ge", "wait: cmp must be 'ge' or 'eq'")
        done = seen >= value
    return done


@triton.jit
def wait(flag_ptr, value, rank, remote_rank, bases, max_spins,
         cmp: tl.constexpr = tl.constexpr("ge"), sem: tl.constexpr = tl.constexpr("acquire"),
         scope: tl.constexpr = tl.constexpr("sys")):
    """Poll the flag at ``flag_ptr``'s offset on ``remote_rank`` (usually ``rank`` itself) until it is
    ``>= value`` (``cmp="ge"``) or ``== value`` (``cmp="eq"``), at most ``max_spins`` polls.

    Returns 1 when the condition held (with acquire, the signaller's earlier writes are then
    visible to the whole program), 0 on timeout. Never hangs.
    """
    ptr = translate(flag_ptr, rank, remote_rank, bases)
    done = _reached(tl.atomic_add(ptr, 0, sem=sem, scope=scope), value, cmp)
    spins = 0
    while (done == 0) & (spins < max_spins):
        done = _reached(tl.atomic_add(ptr, 0, sem=sem, scope=scope), value, cmp)
        spins += 1
    tl.debug_barrier()  # the other threads read after the acquiring one
    return done.to(tl.int32)


@triton.jit
def barrier(sync_ptr, rank, world_size, bases, max_spins, WORLD_POW2: tl.constexpr):
    """All ranks' earlier work (this program's writes, and earlier kernels on the stream) is visible
    to all ranks once every rank returns. Returns 1, or 0 after ``max_spins`` polls without all peers
    (then the heap's ``TIMEOUTS`` word is incremented, for the host to report).

    ``sync_ptr``: the heap's int64 sync words (``SymmetricHeap.sync``). Call from ONE program per
    rank (a kernel of grid (1,), as ``SymmetricHeap.device_barrier`` does): the epoch is a plain
    read-modify-write. ``WORLD_POW2``: ``world_size`` rounded up to a power of two.
    """
    tl.debug_barrier()
    epoch = tl.load(sync_ptr + _EPOCH) + 1
    tl.store(sync_ptr + _EPOCH, epoch)
    peers = tl.arange(0, WORLD_POW2)
    live = peers < world_size
    peers = tl.where(live, peers, rank)  # keep translate's bases load in bounds
    mine = translate(sync_ptr + _ARRIVALS + rank, rank, peers, bases)  # [WORLD_POW2]
    tl.atomic_add(mine, 1, mask=live, sem="release", scope="sys")
    row = sync_ptr + _ARRIVALS + peers  # [WORLD_POW2]
    seen = tl.min(tl.where(live, tl.atomic_add(row, 0, mask=live, sem="acquire", scope="sys"), epoch))
    spins = 0
    while (seen < epoch) & (spins < max_spins):
        seen = tl.min(tl.where(live, tl.atomic_add(row, 0, mask=live, sem="acquire", scope="sys"), epoch))
        spins += 1
    done = seen >= epoch
    if done == 0:
        tl.atomic_add(sync_ptr + _TIMEOUTS, 1, sem="relaxed", scope="gpu")
    tl.debug_barrier()
    return done.to(tl.int32)


@triton.jit
def _barrier_kernel(sync_ptr, bases, rank, world_size, max_spins, WORLD_POW2: tl.constexpr):
    barrier(sync_ptr, rank, world_size, bases, max_spins, WORLD_POW2)


def device_barrier(sync, bases, rank: int, world_size: int, max_spins: int) -> None:
    """Launch the one-program barrier kernel on the current stream (graph-capturable: no host state)."""
    _barrier_kernel[(1,)](sync, bases, rank, world_size, max_spins,
                          WORLD_POW2=triton.next_power_of_2(world_size))
