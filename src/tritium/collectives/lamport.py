"""The Lamport protocol's device-side building blocks: a one-shot reduction of 16-bit floats without flags.

Each communicator holds three heap buffers of ``[world_size, capacity]`` 16-bit slots (``Communicator._lamport``,
every slot -0.0 when unused), ``LAMPORT_PARTIALS`` fp32 values per buffer that the programs of a launch can
share (``Communicator._lparts``) and a state row (``Communicator._lstate``, int64: one word per program
index, ``LAMPORT_MAX_PROGRAMS`` of them). Call ``c`` of any kernel that follows the protocol, in program
``p`` of a launch of ``P``:

1. :func:`lamport_begin`: reads word ``p``, which holds ``c % 3`` (this call's buffer), the element count
   call ``c - 1`` used per slot and ``c`` itself. One load, no atomics: every program of a launch reads its
   own word.
2. :func:`lamport_push`: pushes this rank's values into slot ``rank`` of that buffer on every rank, a -0.0
   sent as +0.0 (the data is its own flag: -0.0 means "not arrived"). Program 0 also posts the call's
   *header* (:func:`lamport_announce`): one int64 per rank and buffer (``Communicator._lhdr``, ``[3,
   world_size]``), ``c`` and a key (the elements pushed per slot and a digest of the call's kind, op, dtype
   and layout: :func:`lamport_key`) in slot ``rank`` of row ``c % 3`` on every rank.
3. :func:`lamport_reset`: each program resets its share of buffer ``(c + 2) % 3`` (call c - 1's data, and
   the values its programs shared), while the pushes are on their way: the elements call c - 1 used per
   slot on this rank, or more where a peer's header of call c - 1 says it pushed more
   (:func:`lamport_extent`: a peer whose call differed). No peer writes that buffer before call c + 2,
   which needs this rank's pushes of call c + 1, so it is always clean when it is written next.
4. :func:`lamport_reduce`: polls this rank's copy of every slot at once until no element is -0.0 (bounded),
   and reduces across the slots. A program's first tile also polls the peers' headers of the call, in the
   same loads' round trip (no extra latency), and stops as soon as one of call c carries another key: a
   peer that pushes fewer elements, another dtype or layout is a mismatch (``Communicator.check`` raises
   ``CollectiveMismatch``), not a wait that gives up or a wrong sum. A program that found one then waits
   for the rest of every peer's pushes of the call (:func:`lamport_drain`), so that none lands in the buffer
   after the next call reset it.
   Programs of one launch on one rank can share fp32 values through the buffer's ``LAMPORT_PARTIALS``
   (:func:`lamport_share`, :func:`lamport_gather`; :func:`lamport_reduce_rms_norm`, the epilogue of the
   fused RMSNorm, shares the sums of squares of a row's chunks).
5. :func:`lamport_finish`: program ``p`` writes call ``c + 1``'s word to words ``p, p + P, p + 2P, ...``:
   the next launch's program ``q`` finds it in word ``q`` whatever its size, and within this launch no
   program writes a word another one reads (word ``q < P`` is written by program ``q`` alone). The kernel
   boundary (or programmatic dependent launch's wait) makes the words visible to the next call.

Kernels that follow it (one launch per call, pushes before polls, at most ``LAMPORT_MAX_PROGRAMS``
programs; a program waits for no other program of its launch, except for shared values, which every
program shares before it waits for any) can be mixed freely on one communicator:
:mod:`tritium.collectives.all_reduce`'s ``lamport``, :mod:`tritium.collectives.all_reduce_rms_norm`, and
:mod:`tritium.fused.matmul_all_reduce`'s decode kernel, which pushes each tile of a GEMM as it is computed.

NOTE: 2x H200 (run 8 and earlier): the call counter and the element counts were single words that the
launch's last program advanced behind an acq_rel ticket (five atomics in the tail of every call, and a
dependent second load at its start); polls waited on one slot after another, a memory round trip each.
"""

import functools
import zlib

import triton
import triton.language as tl

from tritium.collectives.kernels import combine
from tritium.shmem.device import translate

SENTINEL16 = -32768  # 0x8000: -0.0 in fp16 and bf16; a pushed -0.0 is sent as +0.0
_SENTINEL16 = tl.constexpr(SENTINEL16)
LAMPORT_MAX_PROGRAMS = 4096  # programs a launch of a Lamport kernel may have (one state word each)
_MAX_PROGRAMS = tl.constexpr(LAMPORT_MAX_PROGRAMS)
LAMPORT_STATE_WORDS = LAMPORT_MAX_PROGRAMS  # a word per program index
LAMPORT_PARTIALS = 1024  # fp32 values a launch's programs can share per buffer (lamport_share / lamport_gather)
# a state word: phase (2 bits), elements of the call before (bits 2-22), call number (from bit 23)
_CALL_SHIFT = tl.constexpr(23)
_N_MASK = tl.constexpr((1 << 21) - 1)
# a header (Communicator._lhdr, int64, -1 when never written): call number mod 2**23 (from bit 40), then the
# key (lamport_key: a 20-bit digest from bit 20, the elements per slot in the low 20 bits)
HEADER_UNSET = -1
KEY_BITS, _KEY_BITS = 40, tl.constexpr(40)
_CALL_MASK = tl.constexpr((1 << 23) - 1)
_ELEMENTS_MASK = tl.constexpr((1 << 20) - 1)
_PARTIALS = tl.constexpr(LAMPORT_PARTIALS)
SENTINEL32 = -(1 << 31)  # 0x80000000: -0.0 in fp32, a shared value not yet written
_SENTINEL32 = tl.constexpr(SENTINEL32)
_FINISH_BLOCK = tl.constexpr(256)


@functools.lru_cache(maxsize=1024)
def lamport_key(n: int, *fields) -> int:
    """The header key of a call that pushes ``n`` elements per slot (``n < 2**20``), ``fields`` what else
    every rank must call alike (kind, op, dtype, layout): ranks whose keys differ get ``CollectiveMismatch``
    (but for a digest collision, one in 2**20)."""
    return ((zlib.crc32(repr(fields).encode()) & ((1 << 20) - 1)) << 20) | n


@triton.jit
def lamport_begin(lam_ptr, lstate_ptr, pid, world_size, capacity):
    """Program ``pid``'s view of this call: (its buffer index ``c % 3``, the buffer, the buffer to reset,
    the element count per slot to reset there, the call number ``c``)."""
    word = tl.load(lstate_ptr + pid)
    phase = (word & 3).to(tl.int32)
    old_n = ((word >> 2) & _N_MASK).to(tl.int32)
    call = word >> _CALL_SHIFT
    buf = lam_ptr + phase * world_size * capacity
    old_buf = lam_ptr + ((phase + 2) % 3) * world_size * capacity
    return phase, buf, old_buf, old_n, call


@triton.jit
def lamport_header(call, key):
    """The header value of call number ``call`` with ``key`` (:func:`lamport_key`)."""
    return ((call & _CALL_MASK) << _KEY_BITS) | key


@triton.jit
def lamport_announce(hdr_ptr, phase, call, key, rank, world_size, bases):
    """Post this call's header (:func:`lamport_header`) in slot ``rank`` of row ``phase`` of every rank's
    headers (``hdr_ptr``: int64 ``[3, world_size]`` heap words). One program of the launch calls it."""
    value = lamport_header(call, key + tl.zeros([], tl.int64))
    for dst in range(0, world_size):
        tl.store(translate(hdr_ptr + phase * world_size + rank, rank, dst, bases), value)


@triton.jit
def lamport_absent(hdr_row, call, world_size, WORLD_POW2: tl.constexpr):
    """A bit mask of the ranks whose header of call ``call`` is not in ``hdr_row`` (this call's row of the
    headers) yet: those a wait that gave up waited for (``count_timeout``; from rank 63 on, bit 63)."""
    ranks = tl.arange(0, WORLD_POW2)
    live = ranks < world_size
    h = tl.load(hdr_row + ranks, mask=live, other=0, volatile=True)
    bits = tl.full([WORLD_POW2], 1, tl.int64) << tl.minimum(ranks, 63).to(tl.int64)
    return tl.sum(tl.where(live & ((h >> _KEY_BITS) != (call & _CALL_MASK)), bits, 0), axis=0)


@triton.jit
def lamport_extent(hdr_ptr, phase, call, old_n, world_size, capacity, WORLD_POW2: tl.constexpr):
    """Elements per slot to reset in buffer ``(phase + 2) % 3`` (call ``call - 1``'s): ``old_n``, this
    rank's own count, or more where a peer's header of that call says it pushed more (a call that differed
    between ranks: a mismatch), at most ``capacity``. One load of the row (no peer writes it during this call:
    its next header there is of call ``call + 2``)."""
    ranks = tl.arange(0, WORLD_POW2)
    h = tl.load(hdr_ptr + ((phase + 2) % 3) * world_size + ranks, mask=ranks < world_size, other=-1)
    pushed = tl.where((h >> _KEY_BITS) == ((call - 1) & _CALL_MASK), (h & _ELEMENTS_MASK).to(tl.int32), 0)
    return tl.minimum(tl.maximum(old_n, tl.max(pushed, axis=0)), capacity)


@triton.jit
def lamport_push(buf, idx, bits, mask, rank, world_size, capacity, bases):
    """Store the int16 ``bits`` (16-bit float bit patterns, any block shape) at elements ``idx`` of slot
    ``rank`` of ``buf`` on every rank; a -0.0 goes as +0.0. Each peer's slot base is translated once (a
    16-byte aligned scalar: the communicator sizes its buffers in multiples of 256 bytes), so runs of
    contiguous ``idx`` keep their vector stores."""
    bits = tl.where(bits == _SENTINEL16, 0, bits)
    for dst in range(0, world_size):
        base = tl.multiple_of(translate(buf + rank * capacity, rank, dst, bases), 16)
        tl.store(base + idx, bits, mask=mask)


@triton.jit
def lamport_reset(old_buf, old_n, world_size, capacity, parts_ptr, phase, pid, num_programs, BLOCK: tl.constexpr):
    """Program ``pid`` of ``num_programs``: its grid-stride share of the first ``old_n`` elements of every
    slot of ``old_buf``, and of the shared values of that buffer (``parts_ptr``: int32 ``[3,
    LAMPORT_PARTIALS]``), back to -0.0."""
    offs = tl.arange(0, BLOCK)
    for src in range(0, world_size):
        for first in range(pid * BLOCK, old_n, num_programs * BLOCK):
            idx = first + offs
            tl.store(old_buf + src * capacity + idx, tl.full([BLOCK], _SENTINEL16, tl.int16), mask=idx < old_n)
    old_parts = parts_ptr + ((phase + 2) % 3) * _PARTIALS
    for first in range(pid * BLOCK, _PARTIALS, num_programs * BLOCK):
        idx = first + offs
        tl.store(old_parts + idx, tl.full([BLOCK], _SENTINEL32, tl.int32), mask=idx < _PARTIALS)


@triton.jit
def lamport_share(parts_ptr, phase, i, value):
    """Publish the fp32 ``value`` (a scalar, never -0.0: e.g. a sum of squares) as shared value ``i`` of this
    call, for the launch's other programs on this rank (:func:`lamport_gather`)."""
    tl.store(parts_ptr + phase * _PARTIALS + i, tl.where(value == 0, 0.0, value).to(tl.int32, bitcast=True))


@triton.jit
def lamport_gather(parts_ptr, phase, first, count, max_spins, BLOCK: tl.constexpr):
    """The sum of shared values ``first .. first + count - 1`` of this call once all are published (fp32;
    ``count <= BLOCK``), and 1 if the wait gave up after ``max_spins`` polls. The programs that publish them
    must be resident beside this one, or have published before."""
    offs = tl.arange(0, BLOCK)
    bits, timed_out = _spin(parts_ptr + phase * _PARTIALS + first + offs, offs < count, max_spins, _SENTINEL32)
    return tl.sum(bits.to(tl.float32, bitcast=True), axis=0), timed_out


@triton.jit
def _spin(ptrs, mask, max_spins, SENTINEL: tl.constexpr):
    """The bits at ``ptrs`` once none is ``SENTINEL`` (masked ones read as 0), and 1 if the wait gave up
    after ``max_spins`` polls (else 0)."""
    bits = tl.load(ptrs, mask=mask, other=0, volatile=True)
    spins = 0
    while (tl.max((bits == SENTINEL).to(tl.int32)) > 0) & (spins < max_spins):
        bits = tl.load(ptrs, mask=mask, other=0, volatile=True)
        spins += 1
    return bits, (spins >= max_spins).to(tl.int32)


@triton.jit
def _poll_checked(ptrs, mask, hdr_ptrs, hdr_mask, expect, max_spins, DTYPE: tl.constexpr):
    """The values at ``ptrs`` (this rank's buffer; any block shape; masked ones read as +0.0) once none is
    -0.0 any more, as fp32, with the headers at ``hdr_ptrs`` (where ``hdr_mask``; masked ones are not loaded
    and count as agreeing) polled in the same loads' round trip: until every header of this call
    (``expect``'s call number) has come and every element is there, or a header of this call differs from
    ``expect`` (at most ``max_spins`` polls). Returns (the values, 1 if it gave up waiting, 1 if a header
    differed)."""
    expect = expect + tl.zeros([], tl.int64)
    this_call = expect >> _KEY_BITS
    bits = tl.load(ptrs, mask=mask, other=0, volatile=True)
    hdr = tl.load(hdr_ptrs, mask=hdr_mask, other=expect, volatile=True)
    pending = (tl.max((bits == _SENTINEL16).to(tl.int32)) + tl.max(((hdr >> _KEY_BITS) != this_call).to(tl.int32)))
    wrong = tl.max((((hdr >> _KEY_BITS) == this_call) & (hdr != expect)).to(tl.int32))
    spins = 0
    while (pending > 0) & (wrong == 0) & (spins < max_spins):
        bits = tl.load(ptrs, mask=mask, other=0, volatile=True)
        hdr = tl.load(hdr_ptrs, mask=hdr_mask, other=expect, volatile=True)
        pending = (tl.max((bits == _SENTINEL16).to(tl.int32))
                   + tl.max(((hdr >> _KEY_BITS) != this_call).to(tl.int32)))
        wrong = tl.max((((hdr >> _KEY_BITS) == this_call) & (hdr != expect)).to(tl.int32))
        spins += 1
    timed_out = ((pending > 0) & (wrong == 0)).to(tl.int32)
    return bits.to(DTYPE, bitcast=True).to(tl.float32), timed_out, wrong


@triton.jit
def lamport_drain(buf, hdr_row, call, world_size, capacity, max_spins, BLOCK: tl.constexpr):
    """After a mismatch, in one program of the launch: wait until every peer's pushes of this call have come,
    as many elements per slot as its header of the call says (at most ``max_spins`` polls a wait); returns
    how many waits gave up. A rank that finds a mismatch stops polling at once, while a peer may still be
    pushing (its header goes out before its data, and other programs push later): a push that landed after
    the next call's reset of this buffer would pass for data three calls later (a wrong sum, not an error).
    On the mismatch path only.

    NOTE: the element wait is ``_spin`` without its bits: calling ``_spin`` here and dropping them crashed
    Triton 3.6's TritonGPURemoveLayoutConversions for sm_90 (compile check, stop 95)."""
    offs = tl.arange(0, BLOCK)
    this_call = call & _CALL_MASK
    gave_up = tl.zeros([], tl.int32)
    for src in range(0, world_size):
        h = tl.load(hdr_row + src, volatile=True)
        spins = 0
        while ((h >> _KEY_BITS) != this_call) & (spins < max_spins):
            h = tl.load(hdr_row + src, volatile=True)
            spins += 1
        came = (h >> _KEY_BITS) == this_call
        gave_up += (~came).to(tl.int32)
        pushed = tl.minimum(tl.where(came, (h & _ELEMENTS_MASK).to(tl.int32), 0), capacity)
        for first in range(0, pushed, BLOCK):
            ptrs = buf + src * capacity + first + offs
            live = first + offs < pushed
            left = tl.sum((tl.load(ptrs, mask=live, other=0, volatile=True) == _SENTINEL16).to(tl.int32), axis=0)
            spins = 0
            while (left > 0) & (spins < max_spins):
                left = tl.sum((tl.load(ptrs, mask=live, other=0, volatile=True) == _SENTINEL16).to(tl.int32), axis=0)
                spins += 1
            gave_up += (left > 0).to(tl.int32)
    return gave_up


@triton.jit
def lamport_reduce(buf, idx, mask, world_size, capacity, pieces, piece_stride, max_spins, DTYPE: tl.constexpr,
                   OP: tl.constexpr, GROUP: tl.constexpr, hdr_row, expect, check):
    """``OP`` (0 sum, 1 max, 2 min) over every rank's slot of ``buf`` and, within a slot, over ``pieces``
    parts ``piece_stride`` elements apart (the decode kernel's K pieces; 1 and 0 elsewhere), at elements
    ``idx`` (a 1-D block), as fp32; how many polls gave up; and 1 if a peer's header differed from
    ``expect`` (:func:`lamport_header` of this call; polled with the data where ``check`` is not 0, e.g.
    a program's first tile, else not loaded at all; ``hdr_row``: this call's row of the headers, int64).
    ``GROUP`` (a power of two) of the ``world_size * pieces`` parts are polled at once: one memory round trip
    for all of them, not one each. Every rank sums in the same order (groups in turn, a fixed tree inside
    one), so every rank gets the same bits."""
    acc = tl.zeros(idx.shape, tl.float32)
    timeouts = tl.zeros([], tl.int32)
    wrong = tl.zeros([], tl.int32)
    num_parts = world_size * pieces
    for first in range(0, num_parts, GROUP):
        parts = first + tl.arange(0, GROUP)
        live = parts < num_parts
        offsets = (parts // pieces) * capacity + (parts % pieces) * piece_stride
        m = live[:, None] & mask[None, :]
        values, timed_out, differs = _poll_checked(buf + offsets[:, None] + idx[None, :], m, hdr_row + parts // pieces,
                                                   live & (check != 0), expect, tl.where(wrong > 0, 0, max_spins),
                                                   DTYPE)
        wrong += differs
        timeouts += timed_out
        if OP == 0:
            part = tl.sum(values, axis=0)
        elif OP == 1:
            part = tl.max(tl.where(m, values, float("-inf")), axis=0)
        else:
            part = tl.min(tl.where(m, values, float("inf")), axis=0)
        if first == 0:
            acc = part
        else:
            acc = combine(acc, part, OP)
    return acc, timeouts, wrong


def poll_group(parts: int, block: int, max_elements: int = 8192) -> int:
    """``lamport_reduce``'s GROUP: all ``parts`` at once where ``parts x block`` stays within
    ``max_elements`` (registers), else the largest power of two that does."""
    group = triton.next_power_of_2(max(1, parts))
    while group > 1 and group * block > max_elements:
        group //= 2
    return group


@triton.jit
def row_chunk(t, chunks, hidden, BLOCK: tl.constexpr):
    """Tile ``t`` of rows cut in ``chunks`` chunks of ``BLOCK`` columns: (its row, its columns, which of them
    are inside the row)."""
    cols = (t % chunks) * BLOCK + tl.arange(0, BLOCK)
    return t // chunks, cols, cols < hidden


@triton.jit
def lamport_reduce_rms_norm(buf, residual_ptr, weight_ptr, out_ptr, parts_ptr, phase, rows, hidden, stride_out, eps,
                            world_size, capacity, pieces, piece_stride, max_spins, pid, num_programs,
                            BLOCK: tl.constexpr, GROUP: tl.constexpr, CHUNKS: tl.constexpr, hdr_row, expect):
    """The all-reduce + residual + RMSNorm epilogue over this call's buffer (elements ``row * hidden + col``,
    reduced as :func:`lamport_reduce` does): ``h = round(sum) + residual; residual <- h; out = rms_norm(h) *
    weight`` for ``residual [rows, hidden]`` (contiguous) and ``out`` (rows ``stride_out`` apart), rounded
    as :func:`tritium.ops.reference.rms_norm` rounds. Rows go in chunks of ``BLOCK`` columns
    (``cdiv(hidden, BLOCK) <= CHUNKS``, ``rows * cdiv(hidden, BLOCK) <= LAMPORT_PARTIALS``), program ``pid``
    of ``num_programs`` taking chunks ``pid, pid + num_programs, ...``: it reduces each, updates the
    residual and shares the chunk's sum of squares; then, for each, it sums its row's shares and writes
    the chunk of ``out``. No program waits on another before it has shared all of its own, so the programs
    need only be resident beside each other, or done. A program writes nothing (residual or out) once one of
    its polls gave up, or a peer's header (``hdr_row``, polled with the first chunk) differed from ``expect``
    (:func:`lamport_reduce`). Returns (the number of polls that gave up, the number of headers that
    differed)."""
    chunks = tl.cdiv(hidden, BLOCK)
    num_tiles = rows * chunks
    timeouts = tl.zeros([], tl.int32)
    wrong = tl.zeros([], tl.int32)
    for t in range(pid, num_tiles, num_programs):
        row, cols, mask = row_chunk(t, chunks, hidden, BLOCK)
        idx = row * hidden + cols
        r = tl.load(residual_ptr + idx, mask=mask, other=0.0)
        acc, timed_out, differs = lamport_reduce(buf, idx, mask, world_size, capacity, pieces, piece_stride,
                                                 tl.where(wrong > 0, 0, max_spins), out_ptr.dtype.element_ty, 0,
                                                 GROUP, hdr_row, expect, (t == pid).to(tl.int32))
        timeouts += timed_out
        wrong += differs
        timeouts = tl.where(wrong > 0, 0, timeouts)  # (polls cut short by a mismatch: not timeouts)
        h = (acc.to(r.dtype).to(tl.float32) + r.to(tl.float32)).to(r.dtype)
        tl.store(residual_ptr + idx, h, mask=mask & (timeouts == 0) & (wrong == 0))  # nothing once a poll failed
        hf = h.to(tl.float32)
        lamport_share(parts_ptr, phase, t, tl.sum(hf * hf, axis=0))
    tl.debug_barrier()
    for t in range(pid, num_tiles, num_programs):
        row, cols, mask = row_chunk(t, chunks, hidden, BLOCK)
        w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)  # on its way while the shares come
        sumsq, timed_out = lamport_gather(parts_ptr, phase, row * chunks, chunks, max_spins, CHUNKS)
        timeouts += timed_out
        h = tl.load(residual_ptr + row * hidden + cols, mask=mask, other=0.0)
        rstd = 1.0 / tl.sqrt(sumsq / hidden + eps)
        y = (h.to(tl.float32) * rstd).to(h.dtype).to(tl.float32) * w
        tl.store(out_ptr + row * stride_out + cols, y.to(out_ptr.dtype.element_ty),
                 mask=mask & (timeouts == 0) & (wrong == 0))
    return timeouts, wrong


@triton.jit
def lamport_finish(lstate_ptr, phase, n, pid, num_programs, call):
    """Program ``pid`` hands the next call its word (buffer ``(phase + 1) % 3``, ``n`` elements used per slot
    this call, call number ``call + 1``) in words ``pid, pid + num_programs, ...`` (module docstring, step 5)."""
    word = (((call + 1) << _CALL_SHIFT) | ((n + tl.zeros([], tl.int64)) << 2)
            | ((phase + 1) % 3).to(tl.int64))
    ks = tl.arange(0, _FINISH_BLOCK)
    for first in range(pid, _MAX_PROGRAMS, num_programs * _FINISH_BLOCK):
        w = first + ks * num_programs
        tl.store(lstate_ptr + w, tl.full([_FINISH_BLOCK], 0, tl.int64) + word, mask=w < _MAX_PROGRAMS)
