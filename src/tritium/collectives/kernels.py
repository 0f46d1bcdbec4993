"""Device side of the collectives: ``@triton.jit`` building blocks and the kernels built from them.

Protocol (every collective, one launch of ``P`` programs per rank; ``P`` is the same on every rank for
the same call, and every program of a launch is resident at once on a GPU, P <= SMs):

1. **stage**: program p copies its tiles of the input into this rank's staging buffer (heap).
2. **arrive**: program p publishes the call's element count to every peer (``sizes``), then adds 1 to
   this rank's arrival counter on every peer (release, sys scope).
3. **wait**: program p polls this rank's counters until every peer's reaches ``base + P`` (acquire, sys;
   bounded by ``max_spins``). After that every peer's whole staging buffer is readable.
4. **compute**: program p reads its output tiles from the peers' staging buffers (Iris-style pointer
   translation) and writes the output (a local tensor, anything).
5. **finish**: the last program of the launch (an atomic ticket) advances ``base`` by ``P`` and the call
   counter, for the next call.

Counters only grow, so nothing is reset between calls, and every call's kernel arguments are the same
tensors: the whole sequence can be captured in a CUDA graph and replayed. Staging buffers, result
buffers and sizes are double-buffered by the call counter's parity: a rank can be at most one call ahead
of a peer (its next arrival needs the peer's), so a buffer is never rewritten while a peer reads it.
A wait that gives up counts a timeout, a peer that staged a different element count counts a size
mismatch (both in this rank's ``state``); the call then writes no output, and the host's
``Communicator.check()`` raises. The first wait that gives up also tells why (:func:`count_timeout`, slow
path only): a peer found in a call of another protocol (Lamport, a fused op's) is a mismatch on both ranks.

``state`` words (int64): see the ``_S_*`` constants. ``flags``: int64 ``[2 rounds, world_size]`` arrival
counters (round 0 for staging, round 1 for the two-shot result push).
"""

import triton
import triton.language as tl

from tritium.shmem.device import remote, translate

# state words (host copies; kernels read the constexpr twins); the sizes rows take 4 * world_size words
# (2 rounds x 2 parities), the zero-copy offsets rows 2 * world_size after them.
# S_CROSS, S_GAVE_UP_ON: persistent (check() never resets them): waits that gave up because a peer was in a
# call of another protocol, and peers' waits that gave up (this rank's counters are out of step with theirs).
# S_RANK .. S_FUSED: what a wait that gives up reads to tell why (count_timeout): this rank, the world size,
# the heap bases, the flags, Lamport state and headers (as addresses), then FUSED_SLOTS (hello, op state)
# address pairs of the fused ops' protocols (written by the host when a fused op first makes them; the
# slots: tritium.fused.workspace._PROTOCOLS).
S_CALLS, S_TICKET, S_BASE0, S_BASE1, S_TIMEOUTS, S_MISMATCH = 0, 1, 2, 3, 4, 5
S_CROSS, S_GAVE_UP_ON, S_RANK, S_WORLD, S_BASES, S_FLAGS, S_LSTATE, S_LHDR, S_FUSED = 6, 7, 8, 9, 10, 11, 12, 13, 14
FUSED_SLOTS = 5
S_SIZES = S_FUSED + 2 * FUSED_SLOTS
TAG_SHIFT, TAG_BITS = 40, 23  # a caller's layout tag rides above the element count (< 2**40) in the size word
STATE_ROWS = 6  # rows of world_size words after S_SIZES
_S_CALLS = tl.constexpr(S_CALLS)
_S_TICKET = tl.constexpr(S_TICKET)
_S_BASE0 = tl.constexpr(S_BASE0)
_S_TIMEOUTS = tl.constexpr(S_TIMEOUTS)
_S_MISMATCH = tl.constexpr(S_MISMATCH)
_S_SIZES = tl.constexpr(S_SIZES)
_S_CROSS = tl.constexpr(S_CROSS)
_S_GAVE_UP_ON = tl.constexpr(S_GAVE_UP_ON)
_S_RANK = tl.constexpr(S_RANK)
_S_WORLD = tl.constexpr(S_WORLD)
_S_BASES = tl.constexpr(S_BASES)
_S_FLAGS = tl.constexpr(S_FLAGS)
_S_LSTATE = tl.constexpr(S_LSTATE)
_S_LHDR = tl.constexpr(S_LHDR)
_S_FUSED = tl.constexpr(S_FUSED)
_FUSED_SLOTS = tl.constexpr(FUSED_SLOTS)
# the protocol a wait belongs to (count_timeout's WHERE): the flag protocol here, Lamport, a fused op's
IN_COMM, IN_LAMPORT, IN_FUSED = 1, 2, 3

# reduction ops (constexpr codes)
OP_SUM, OP_MAX, OP_MIN = 0, 1, 2
# collective kinds
ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, BROADCAST = 0, 1, 2, 3, 4


# -- building blocks ---------------------------------------------------------------------------------------
@triton.jit
def stage_tiles(x_ptr, buf_ptr, n, pid, num_programs, BLOCK: tl.constexpr):
    """Copy elements ``[0, n)`` of ``x_ptr`` to ``buf_ptr``, the tiles of program ``pid`` of
    ``num_programs`` (grid-stride by ``BLOCK``)."""
    offs = tl.arange(0, BLOCK)
    for start in range(pid * BLOCK, n, num_programs * BLOCK):
        idx = start + offs
        mask = idx < n
        tl.store(buf_ptr + idx, tl.load(x_ptr + idx, mask=mask), mask=mask)


@triton.jit
def arrive(flags_ptr, sizes_ptr, n, rank, world_size, bases, WORLD_POW2: tl.constexpr):
    """Publish ``n`` in slot ``rank`` of ``sizes_ptr`` and add 1 to slot ``rank`` of ``flags_ptr`` on
    every rank (this one included); release/sys: this program's earlier writes (its staged tiles) are
    visible to whoever sees the count. ``flags_ptr``, ``sizes_ptr``: int64 ``[world_size]`` heap rows."""
    publish(sizes_ptr, n, rank, world_size, bases, WORLD_POW2)
    tl.debug_barrier()
    peers = tl.arange(0, WORLD_POW2)
    live = peers < world_size
    peers = tl.where(live, peers, rank)
    tl.atomic_add(translate(flags_ptr + rank, rank, peers, bases), 1, mask=live, sem="release", scope="sys")


@triton.jit
def wait_all(flags_ptr, target, world_size, max_spins, WORLD_POW2: tl.constexpr):
    """Poll this rank's arrival counters ``flags_ptr[0:world_size]`` until all are ``>= target``, at most
    ``max_spins`` polls; 1 when they are (acquire/sys: the peers' staged data is then visible), else 0."""
    peers = tl.arange(0, WORLD_POW2)
    live = peers < world_size
    seen = tl.min(tl.where(live, tl.atomic_add(flags_ptr + peers, 0, mask=live, sem="acquire", scope="sys"),
                           target))
    spins = 0
    while (seen < target) & (spins < max_spins):
        seen = tl.min(tl.where(live, tl.atomic_add(flags_ptr + peers, 0, mask=live, sem="acquire", scope="sys"),
                               target))
        spins += 1
    tl.debug_barrier()
    return (seen >= target).to(tl.int32)


@triton.jit
def short_of(flags_ptr, target, world_size, WORLD_POW2: tl.constexpr):
    """A bit mask of the ranks whose arrival counter ``flags_ptr[r]`` is still under ``target`` (from rank 62
    on: bit 63, every one of them)."""
    peers = tl.arange(0, WORLD_POW2)
    live = peers < world_size
    seen = tl.atomic_add(flags_ptr + peers, 0, mask=live, sem="acquire", scope="sys")
    bits = tl.full([WORLD_POW2], 1, tl.int64) << tl.minimum(peers, 63).to(tl.int64)
    return tl.sum(tl.where(live & (seen < target), bits, 0), axis=0)


@triton.jit
def sizes_agree(sizes_ptr, n, world_size, WORLD_POW2: tl.constexpr):
    """1 if every rank published ``n`` in ``sizes_ptr[0:world_size]`` (this rank's copy), else 0."""
    peers = tl.arange(0, WORLD_POW2)
    live = peers < world_size
    sizes = tl.load(sizes_ptr + peers, mask=live, other=n)
    return (tl.max(tl.abs(sizes - n)) == 0).to(tl.int32)


@triton.jit
def combine(acc, value, OP: tl.constexpr):
    if OP == 0:
        acc = acc + value
    elif OP == 1:
        acc = tl.maximum(acc, value)
    else:
        acc = tl.minimum(acc, value)
    return acc


@triton.jit
def _load_acc(ptr, mask, IS_FLOAT: tl.constexpr):
    value = tl.load(ptr, mask=mask, other=0)
    if IS_FLOAT:
        value = value.to(tl.float32)
    return value


@triton.jit
def reduce_tile(buf_ptr, idx, mask, rank, world_size, bases, OP: tl.constexpr, IS_FLOAT: tl.constexpr,
                HINT: tl.constexpr = None):
    """Elementwise reduction over every rank of the staged tile ``buf_ptr + idx`` (idx: a block of
    offsets), in fp32 for floats (``IS_FLOAT``) and in the integer type itself for ints; ranks in the
    same order on every rank, so every rank gets bit-identical results. ``HINT``: the tile is runs of
    ``HINT`` contiguous elements starting on 16-byte boundaries (keeps vector loads from peers)."""
    acc = _load_acc(remote(buf_ptr + idx, rank, 0, bases, HINT), mask, IS_FLOAT)
    for src in range(1, world_size):
        acc = combine(acc, _load_acc(remote(buf_ptr + idx, rank, src, bases, HINT), mask, IS_FLOAT), OP)
    return acc


@triton.jit
def finish(state_ptr, num_programs, round1):
    """The last program of the launch to get here advances the base of flag round 0 (and of round 1
    when ``round1`` is not 0: every program of the launch took part in it) by ``num_programs``, and the
    call counter, for the next call (launched after this one)."""
    tl.debug_barrier()
    done = tl.atomic_add(state_ptr + _S_TICKET, 1, sem="acq_rel", scope="gpu")
    if done == num_programs - 1:
        tl.atomic_xchg(state_ptr + _S_TICKET, 0, sem="relaxed", scope="gpu")
        tl.atomic_add(state_ptr + _S_BASE0, num_programs, sem="relaxed", scope="gpu")
        if round1 != 0:
            tl.atomic_add(state_ptr + _S_BASE0 + 1, num_programs, sem="relaxed", scope="gpu")
        tl.atomic_add(state_ptr + _S_CALLS, 1, sem="release", scope="gpu")


@triton.jit
def publish(row_ptr, value, rank, world_size, bases, WORLD_POW2: tl.constexpr):
    """Store ``value`` in slot ``rank`` of the heap row ``row_ptr`` (int64 ``[world_size]``) on every rank
    (plain stores: a later release, e.g. :func:`arrive`, publishes them)."""
    peers = tl.arange(0, WORLD_POW2)
    live = peers < world_size
    peers = tl.where(live, peers, rank)
    tl.store(translate(row_ptr + rank, rank, peers, bases), tl.full([WORLD_POW2], 0, tl.int64) + value, mask=live)


@triton.jit
def begin(x_ptr, buf_ptr, flags_ptr, state_ptr, n_in, x_off, rank, world_size, bases, half, max_spins,
           BLOCK: tl.constexpr, WORLD_POW2: tl.constexpr, STAGED: tl.constexpr = True, tag=0):
    """Steps 1-3 of the protocol; returns (the buffer the peers read this call, ok).

    ``STAGED``: x is copied into this call's staging buffer. Otherwise (zero copy) x is itself a heap
    tensor at byte offset ``x_off`` of every rank's heap, and the peers read it where it is: the ranks
    then publish ``-1 - n_in`` instead of ``n_in`` (a staged rank and a zero-copy rank never agree) and
    their offsets, which must agree too. ``tag`` (int64, a multiple of ``2**TAG_SHIFT``) is added to the
    published size: a caller's layout that every rank must share (see ``Communicator._launch``)."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    max_spins = fail_fast(state_ptr, max_spins)
    parity = tl.load(state_ptr + _S_CALLS) % 2
    base = tl.load(state_ptr + _S_BASE0)
    sizes = state_ptr + _S_SIZES + parity * world_size
    key = n_in + tag + tl.zeros([], tl.int64)
    if STAGED:
        buf = buf_ptr + parity * half
        stage_tiles(x_ptr, buf, n_in, pid, num_programs, BLOCK)
    else:
        buf = x_ptr
        key = -1 - key
        publish(state_ptr + _S_SIZES + (4 + parity) * world_size, x_off, rank, world_size, bases, WORLD_POW2)
    arrive(flags_ptr, sizes, key, rank, world_size, bases, WORLD_POW2)
    ok = wait_all(flags_ptr, base + num_programs, world_size, max_spins, WORLD_POW2)
    if ok == 0:
        count_timeout(state_ptr, 1, 0, short_of(flags_ptr, base + num_programs, world_size, WORLD_POW2))
    else:
        ok = sizes_agree(sizes, key, world_size, WORLD_POW2)
        if not STAGED:
            ok = ok & sizes_agree(state_ptr + _S_SIZES + (4 + parity) * world_size, x_off, world_size, WORLD_POW2)
        if ok == 0:
            count_mismatch(state_ptr)
    return buf, ok


@triton.jit
def second_round(flags_ptr, state_ptr, rank, world_size, bases, max_spins, WORLD_POW2: tl.constexpr):
    """Flag round 1 (every program of every rank arrives, then waits for all): after it, every peer is
    done with what it read or wrote in this rank's heap during the call."""
    num_programs = tl.num_programs(0)
    max_spins = fail_fast(state_ptr, max_spins)
    parity = tl.load(state_ptr + _S_CALLS) % 2
    base1 = tl.load(state_ptr + _S_BASE0 + 1)
    arrive(flags_ptr + world_size, state_ptr + _S_SIZES + 2 * world_size + parity * world_size, 0, rank,
           world_size, bases, WORLD_POW2)
    ok1 = wait_all(flags_ptr + world_size, base1 + num_programs, world_size, max_spins, WORLD_POW2)
    if ok1 == 0:
        count_timeout(state_ptr)
    return ok1


@triton.jit
def call_parity(state_ptr):
    """This call's parity (0 or 1): which half of the double-buffered staging and result buffers."""
    return tl.load(state_ptr + _S_CALLS) % 2


@triton.jit
def fail_fast(state_ptr, max_spins):
    """The poll budget of this call's waits: none once a wait of this rank gave up since the last host
    check (``Communicator.check`` resets it). A lost peer then costs one timeout, not one per collective
    queued behind it (a decode graph holds ~160: hours at 2^24 polls each)."""
    return tl.where(tl.load(state_ptr + _S_TIMEOUTS) > 0, 0, max_spins)


@triton.jit
def count_timeout(state_ptr, WHERE: tl.constexpr = 0, own=0, waiting=-1):
    """Record on the device that a wait of this rank gave up (``Communicator.check`` raises). ``WHERE``
    (``IN_COMM``, ``IN_LAMPORT``, ``IN_FUSED``; 0: none) tells why, on this slow path only and for the first
    give-up since the last check (:func:`_why_gave_up`; later waits do not wait: ``fail_fast``); ``own``:
    the address of the fused op's hello flags (``IN_FUSED``), else 0; ``waiting``: a bit mask of the ranks
    that had not come to this call (-1: any)."""
    before = tl.atomic_add(state_ptr + _S_TIMEOUTS, 1, sem="relaxed", scope="gpu")
    if WHERE != 0:
        if before == 0:
            _why_gave_up(state_ptr, WHERE, own, waiting)


@triton.jit
def _address(state_ptr, i):
    """The int64 pointer kept as an integer in state word ``i``."""
    return tl.load(state_ptr + i).to(tl.pointer_type(tl.int64))


@triton.jit
def _why_gave_up(state_ptr, WHERE: tl.constexpr, own, waiting):
    """A wait of protocol ``WHERE`` gave up: for each peer it waited for (``waiting``: a bit mask; from rank
    63 on, every one) whether it is in a call of another protocol that
    this rank has not made (it arrived beyond this rank's count in the flag protocol; it posted a Lamport header
    for this rank's next Lamport call; it raised a fused op's hello flag past this rank's calls of that op,
    ``own`` excepted). Ranks in different calls (another collective, algorithm or overlap mode, a rank with
    no rows that took another path) then get ``CollectiveMismatch`` on both sides (this rank counts it, and
    tells the peer), not only timeouts; peers in no other call are told that this rank gave up on them
    (a rank that skipped a call learns it on its next check). Either way the ranks' call counters are now
    out of step (``S_CROSS``, ``S_GAVE_UP_ON``: check() raises until the communicator is rebuilt). Reads a
    few words per peer, on this path only."""
    rank = tl.load(state_ptr + _S_RANK)
    world_size = tl.load(state_ptr + _S_WORLD)
    bases = _address(state_ptr, _S_BASES)
    flags = _address(state_ptr, _S_FLAGS)
    base0 = tl.load(state_ptr + _S_BASE0, volatile=True)
    after = tl.load(_address(state_ptr, _S_LSTATE), volatile=True) >> 23  # this rank's next Lamport call
    headers = _address(state_ptr, _S_LHDR) + (after % 3) * world_size
    found = tl.zeros([], tl.int32)
    for s in range(0, world_size):
        elsewhere = tl.zeros([], tl.int32)
        if WHERE != 1:
            elsewhere += (tl.atomic_add(flags + s, 0, sem="acquire", scope="sys") > base0).to(tl.int32)
        if WHERE != 2:
            h = tl.load(headers + s, volatile=True)
            elsewhere += ((h >> 40) == (after & ((1 << 23) - 1))).to(tl.int32)
        for j in range(0, _FUSED_SLOTS):
            hello_at = tl.load(state_ptr + _S_FUSED + 2 * j)
            if (hello_at != 0) & (hello_at != own):
                hello = hello_at.to(tl.pointer_type(tl.int64))
                calls = tl.load(_address(state_ptr, _S_FUSED + 2 * j + 1), volatile=True)
                seen = tl.maximum(tl.atomic_add(hello + s, 0, sem="acquire", scope="sys"),
                                  tl.atomic_add(hello + world_size + s, 0, sem="acquire", scope="sys"))
                elsewhere += ((seen >> 24) > calls).to(tl.int32)
        if (s != rank) & (((waiting >> tl.minimum(s, 63).to(tl.int64)) & 1) != 0):
            if elsewhere > 0:
                tl.atomic_add(translate(state_ptr + _S_MISMATCH, rank, s, bases), 1, sem="relaxed", scope="sys")
                tl.atomic_add(translate(state_ptr + _S_CROSS, rank, s, bases), 1, sem="relaxed", scope="sys")
                found += 1
            else:
                tl.atomic_add(translate(state_ptr + _S_GAVE_UP_ON, rank, s, bases), 1, sem="relaxed", scope="sys")
    if found > 0:
        count_mismatch(state_ptr)
        tl.atomic_add(state_ptr + _S_CROSS, 1, sem="relaxed", scope="gpu")


@triton.jit
def count_mismatch(state_ptr):
    """Record on the device that peers disagreed on a call's sizes or layout (``Communicator.check`` raises
    :class:`CollectiveMismatch`)."""
    tl.atomic_add(state_ptr + _S_MISMATCH, 1, sem="relaxed", scope="gpu")


@triton.jit
def pdl_prologue(USE_PDL: tl.constexpr):
    """Programmatic dependent launch (``USE_PDL``, launched with ``launch_pdl``): let the next kernel
    launch now (its launch latency hides behind this call) and wait for the kernel before to finish
    before anything is read (x, the flags and state it left)."""
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()


# -- kernels -----------------------------------------------------------------------------------------------
@triton.jit
def _collective_kernel(
    # pointers: the caller's input and output (local tensors), the heap's staging buffer, flags, state
    x_ptr, out_ptr, buf_ptr, flags_ptr, state_ptr, bases,
    # sizes
    n_in, n_out, rank, world_size, src, half, max_spins, x_off, tag,
    # meta-parameters
    KIND: tl.constexpr, OP: tl.constexpr, IS_FLOAT: tl.constexpr, AVG: tl.constexpr, BLOCK: tl.constexpr,
    WORLD_POW2: tl.constexpr, HINT: tl.constexpr = None, STAGED: tl.constexpr = True, USE_PDL: tl.constexpr = False,
):
    """One-round collectives (``KIND``): one-shot all-reduce, reduce-scatter, all-gather, all-to-all,
    broadcast from ``src``. ``n_in``: elements this rank stages; ``n_out``: elements of the output chunk
    a rank computes per source (all-reduce: n_in; reduce-scatter, all-to-all: n_in / world; all-gather:
    n_in, written once per source; broadcast: n_in). Zero copy (``STAGED`` false, see :func:`_begin`):
    the peers read x in place, so a second flag round keeps every rank in the kernel until no peer
    reads its x any more (the caller may overwrite x once the call is over); output that overlaps x
    would be read while written, so the host stages those calls (broadcast excepted: only ``src``'s x
    is read, and every rank writes only its own)."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    pdl_prologue(USE_PDL)
    buf, ok = begin(x_ptr, buf_ptr, flags_ptr, state_ptr, n_in, x_off, rank, world_size, bases, half, max_spins,
                     BLOCK, WORLD_POW2, STAGED, tag)
    if ok != 0:
        offs = tl.arange(0, BLOCK)
        for start in range(pid * BLOCK, n_out, num_programs * BLOCK):
            idx = start + offs
            mask = idx < n_out
            if KIND == 0:  # ALL_REDUCE
                acc = reduce_tile(buf, idx, mask, rank, world_size, bases, OP, IS_FLOAT, BLOCK)
                if AVG:
                    acc = acc / world_size
                tl.store(out_ptr + idx, acc.to(out_ptr.dtype.element_ty), mask=mask)
            elif KIND == 1:  # REDUCE_SCATTER: this rank's chunk (aligned when the chunk is: HINT)
                acc = reduce_tile(buf, rank * n_out + idx, mask, rank, world_size, bases, OP, IS_FLOAT, HINT)
                if AVG:
                    acc = acc / world_size
                tl.store(out_ptr + idx, acc.to(out_ptr.dtype.element_ty), mask=mask)
            elif KIND == 2:  # ALL_GATHER: source s's elements to out[s * n_out:]
                for s in range(0, world_size):
                    value = tl.load(remote(buf + idx, rank, s, bases, BLOCK), mask=mask)
                    tl.store(out_ptr + s * n_out + idx, value, mask=mask)
            elif KIND == 3:  # ALL_TO_ALL: source s's chunk for this rank to out[s * n_out:]
                for s in range(0, world_size):
                    value = tl.load(remote(buf + rank * n_out + idx, rank, s, bases, HINT), mask=mask)
                    tl.store(out_ptr + s * n_out + idx, value, mask=mask)
            else:  # BROADCAST
                value = tl.load(remote(buf + idx, rank, src, bases, BLOCK), mask=mask)
                tl.store(out_ptr + idx, value, mask=mask)
    round1 = 0
    if not STAGED:
        if ok != 0:  # every rank agreed (a rank that timed out or disagreed read nothing: no second round)
            second_round(flags_ptr, state_ptr, rank, world_size, bases, max_spins, WORLD_POW2)
            round1 = 1
    finish(state_ptr, num_programs, round1)
