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
``Communicator.check()`` raises.

``state`` words (int64): see the ``_S_*`` constants. ``flags``: int64 ``[2 rounds, world_size]`` arrival
counters (round 0 for staging, round 1 for the two-shot result push).
"""

import triton
import triton.language as tl

from tritium.shmem.device import remote, translate

# state words (host copies; kernels read the constexpr twins); the sizes rows take 4 * world_size words
# (2 rounds x 2 parities), the zero-copy offsets rows 2 * world_size after them
S_CALLS, S_TICKET, S_BASE0, S_BASE1, S_TIMEOUTS, S_MISMATCH, S_SIZES = 0, 1, 2, 3, 4, 5, 6
STATE_ROWS = 6  # rows of world_size words after S_SIZES
_S_CALLS = tl.constexpr(S_CALLS)
_S_TICKET = tl.constexpr(S_TICKET)
_S_BASE0 = tl.constexpr(S_BASE0)
_S_TIMEOUTS = tl.constexpr(S_TIMEOUTS)
_S_MISMATCH = tl.constexpr(S_MISMATCH)
_S_SIZES = tl.constexpr(S_SIZES)

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
    peers = tl.arange(0, WORLD_POW2)
    live = peers < world_size
    peers = tl.where(live, peers, rank)
    tl.store(translate(sizes_ptr + rank, rank, peers, bases), tl.full([WORLD_POW2], 0, tl.int64) + n, mask=live)
    tl.debug_barrier()
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
def _begin(x_ptr, buf_ptr, flags_ptr, state_ptr, n_in, x_off, rank, world_size, bases, half, max_spins,
           BLOCK: tl.constexpr, WORLD_POW2: tl.constexpr, STAGED: tl.constexpr = True):
    """Steps 1-3 of the protocol; returns (the buffer the peers read this call, ok).

    ``STAGED``: x is copied into this call's staging buffer. Otherwise (zero copy) x is itself a heap
    tensor at byte offset ``x_off`` of every rank's heap, and the peers read it where it is: the ranks
    then publish ``-1 - n_in`` instead of ``n_in`` (a staged rank and a zero-copy rank never agree) and
    their offsets, which must agree too."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    parity = tl.load(state_ptr + _S_CALLS) % 2
    base = tl.load(state_ptr + _S_BASE0)
    sizes = state_ptr + _S_SIZES + parity * world_size
    key = n_in + tl.zeros([], tl.int64)
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
        tl.atomic_add(state_ptr + _S_TIMEOUTS, 1, sem="relaxed", scope="gpu")
    else:
        ok = sizes_agree(sizes, key, world_size, WORLD_POW2)
        if not STAGED:
            ok = ok & sizes_agree(state_ptr + _S_SIZES + (4 + parity) * world_size, x_off, world_size, WORLD_POW2)
        if ok == 0:
            tl.atomic_add(state_ptr + _S_MISMATCH, 1, sem="relaxed", scope="gpu")
    return buf, ok


@triton.jit
def _round1(flags_ptr, state_ptr, rank, world_size, bases, max_spins, WORLD_POW2: tl.constexpr):
    """Flag round 1 (every program of every rank arrives, then waits for all): after it, every peer is
    done with what it read or wrote in this rank's heap during the call."""
    num_programs = tl.num_programs(0)
    parity = tl.load(state_ptr + _S_CALLS) % 2
    base1 = tl.load(state_ptr + _S_BASE0 + 1)
    arrive(flags_ptr + world_size, state_ptr + _S_SIZES + 2 * world_size + parity * world_size, 0, rank,
           world_size, bases, WORLD_POW2)
    ok1 = wait_all(flags_ptr + world_size, base1 + num_programs, world_size, max_spins, WORLD_POW2)
    if ok1 == 0:
        tl.atomic_add(state_ptr + _S_TIMEOUTS, 1, sem="relaxed", scope="gpu")
    return ok1


@triton.jit
def _pdl_prologue(USE_PDL: tl.constexpr):
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
    n_in, n_out, rank, world_size, src, half, max_spins, x_off,
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
    _pdl_prologue(USE_PDL)
    buf, ok = _begin(x_ptr, buf_ptr, flags_ptr, state_ptr, n_in, x_off, rank, world_size, bases, half, max_spins,
                     BLOCK, WORLD_POW2, STAGED)
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
            _round1(flags_ptr, state_ptr, rank, world_size, bases, max_spins, WORLD_POW2)
            round1 = 1
    finish(state_ptr, num_programs, round1)


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
    _pdl_prologue(USE_PDL)
    buf, ok = _begin(x_ptr, buf_ptr, flags_ptr, state_ptr, n, x_off, rank, world_size, bases, half, max_spins,
                     BLOCK, WORLD_POW2, STAGED)
    parity = tl.load(state_ptr + _S_CALLS) % 2
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
    ok1 = _round1(flags_ptr, state_ptr, rank, world_size, bases, max_spins, WORLD_POW2)
    if (ok != 0) & (ok1 != 0):
        for start in range(pid * BLOCK, n, num_programs * BLOCK):
            idx = start + offs
            mask = idx < n
            tl.store(out_ptr + idx, tl.load(res + idx, mask=mask), mask=mask)
    finish(state_ptr, num_programs, 1)


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
    _pdl_prologue(USE_PDL)
    n = rows * hidden
    buf, ok = _begin(x_ptr, buf_ptr, flags_ptr, state_ptr, n, -1, rank, world_size, bases, half, max_spins,
                     BLOCK, WORLD_POW2)
    if ok != 0:
        cols = tl.arange(0, BLOCK)
        cmask = cols < hidden
        w = tl.load(weight_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
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


# -- Lamport one-shot all-reduce (16-bit floats, small messages) ------------------------------------------
SENTINEL16 = -32768  # 0x8000: -0.0 in fp16 and bf16; a pushed -0.0 is sent as +0.0
_SENTINEL16 = tl.constexpr(SENTINEL16)
_L_CALLS, _L_TICKET, _L_COUNTS, _L_ARRIVED = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2), tl.constexpr(5)
LAMPORT_STATE_WORDS = 6  # calls, ticket, element counts of the 3 buffers, programs past the reduction


@triton.jit
def _lamport_all_reduce_kernel(
    # pointers: the caller's input (an int16 view) and output, the heap's Lamport buffers (int16 view of
    # [3, world_size, capacity] 16-bit slots, every slot -0.0 when unused) and their state row (int64)
    x_bits_ptr, out_ptr, lam_ptr, lstate_ptr, state_ptr, bases, residual_ptr, weight_ptr,
    # sizes
    n, rank, world_size, capacity, max_spins, hidden, eps,
    # meta-parameters
    OP: tl.constexpr, AVG: tl.constexpr, BLOCK: tl.constexpr, FUSE_RMS: tl.constexpr = False,
    ROW_BLOCK: tl.constexpr = 16, USE_PDL: tl.constexpr = False,
):
    """One-shot all-reduce without a flag round: call c pushes this rank's tiles straight into slot
    ``rank`` (``capacity`` elements a slot, so every slot starts aligned) of buffer ``c % 3`` on every
    rank (a -0.0 goes as +0.0), resets buffer ``(c + 2) % 3``, which held call c - 1's data, then polls its own buffer until no element of any slot is still -0.0 (the
    data is its own flag) and reduces it. A peer is at most one call ahead (it cannot finish call
    c + 1 before this rank pushes it), so the buffer it may write next is always a clean one.

    ``FUSE_RMS`` (all_reduce_rms_norm; x, residual, out ``[n / hidden, hidden]``): each reduced tile h is
    added to ``residual`` in place; then the programs of the launch wait for each other (a counter in the
    Lamport state; all are resident on a GPU, one under the interpreter) and each normalises whole rows:
    ``out = rms_norm(residual) * weight`` (``ROW_BLOCK >= hidden``)."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    _pdl_prologue(USE_PDL)
    calls = tl.load(lstate_ptr + _L_CALLS)
    buf = lam_ptr + (calls % 3) * world_size * capacity
    old = (calls + 2) % 3
    old_n = tl.load(lstate_ptr + _L_COUNTS + old).to(tl.int32)
    offs = tl.arange(0, BLOCK)
    timeouts = tl.zeros([], tl.int32)
    for start in range(pid * BLOCK, n, num_programs * BLOCK):
        idx = start + offs
        mask = idx < n
        bits = tl.load(x_bits_ptr + idx, mask=mask)
        bits = tl.where(bits == _SENTINEL16, 0, bits)
        for dst in range(0, world_size):
            tl.store(remote(buf + rank * capacity + idx, rank, dst, bases, BLOCK), bits, mask=mask)
    # reset what call c - 1 wrote (the first old_n elements of every slot of the old buffer), this
    # program's share, while the peers' pushes are on their way: no peer writes that buffer before call
    # c + 2, which needs this rank's pushes of call c + 1
    old_buf = lam_ptr + old * world_size * capacity
    for src in range(0, world_size):
        for first in range(pid * BLOCK, old_n, num_programs * BLOCK):
            idx = first + offs
            tl.store(old_buf + src * capacity + idx, tl.full([BLOCK], _SENTINEL16, tl.int16), mask=idx < old_n)
    for start in range(pid * BLOCK, n, num_programs * BLOCK):
        idx = start + offs
        mask = idx < n
        acc = tl.zeros([BLOCK], tl.float32)
        for src in range(0, world_size):
            ptrs = buf + src * capacity + idx
            bits = tl.load(ptrs, mask=mask, other=0, volatile=True)
            spins = 0
            while (tl.max((bits == _SENTINEL16).to(tl.int32)) > 0) & (spins < max_spins):
                bits = tl.load(ptrs, mask=mask, other=0, volatile=True)
                spins += 1
            timeouts += (spins >= max_spins).to(tl.int32)
            value = bits.to(out_ptr.dtype.element_ty, bitcast=True).to(tl.float32)
            if src == 0:
                acc = value
            else:
                acc = combine(acc, value, OP)
        if AVG:
            acc = acc / world_size
        if FUSE_RMS:
            r = tl.load(residual_ptr + idx, mask=mask, other=0.0)
            h = (acc.to(r.dtype).to(tl.float32) + r.to(tl.float32)).to(r.dtype)
            tl.store(residual_ptr + idx, h, mask=mask)
        else:
            tl.store(out_ptr + idx, acc.to(out_ptr.dtype.element_ty), mask=mask)
    if timeouts > 0:
        tl.atomic_add(state_ptr + _S_TIMEOUTS, 1, sem="relaxed", scope="gpu")
    if FUSE_RMS:
        tl.debug_barrier()
        tl.atomic_add(lstate_ptr + _L_ARRIVED, 1, sem="acq_rel", scope="gpu")
        arrived = tl.atomic_add(lstate_ptr + _L_ARRIVED, 0, sem="acquire", scope="gpu")
        spins = 0
        while (arrived < num_programs) & (spins < max_spins):
            arrived = tl.atomic_add(lstate_ptr + _L_ARRIVED, 0, sem="acquire", scope="gpu")
            spins += 1
        tl.debug_barrier()
        cols = tl.arange(0, ROW_BLOCK)
        cmask = cols < hidden
        w = tl.load(weight_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        for row in range(pid, n // hidden, num_programs):
            h = tl.load(residual_ptr + row * hidden + cols, mask=cmask, other=0.0)
            hf = h.to(tl.float32)
            rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / hidden + eps)
            y = (hf * rstd).to(h.dtype).to(tl.float32) * w
            tl.store(out_ptr + row * hidden + cols, y.to(out_ptr.dtype.element_ty), mask=cmask)
    tl.debug_barrier()
    done = tl.atomic_add(lstate_ptr + _L_TICKET, 1, sem="acq_rel", scope="gpu")
    if done == num_programs - 1:
        tl.atomic_xchg(lstate_ptr + _L_TICKET, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(lstate_ptr + _L_ARRIVED, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(lstate_ptr + _L_COUNTS + calls % 3, n, sem="relaxed", scope="gpu")
        tl.atomic_add(lstate_ptr + _L_CALLS, 1, sem="release", scope="gpu")
