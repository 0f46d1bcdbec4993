"""The Lamport protocol's device-side building blocks: a one-shot reduction of 16-bit floats without flags.

Each communicator holds three heap buffers of ``[world_size, capacity]`` 16-bit slots (``Communicator._lamport``,
every slot -0.0 when unused) and a state row (``Communicator._lstate``, int64 words below). Call ``c`` of any
kernel that follows the protocol:

1. :func:`lamport_begin`: reads the call counter; this call's buffer is ``c % 3``.
2. :func:`lamport_push`: pushes this rank's values into slot ``rank`` of that buffer on every rank, a -0.0
   sent as +0.0 (the data is its own flag: -0.0 means "not arrived").
3. :func:`lamport_reset`: each program resets its share of buffer ``(c + 2) % 3`` (call c - 1's data), while
   the pushes are on their way. No peer writes that buffer before call c + 2, which needs this rank's pushes
   of call c + 1, so it is always clean when it is written next.
4. :func:`lamport_reduce`: polls this rank's copy until no element of any slot is -0.0 (bounded), reduces.
5. :func:`lamport_finish`: the last program of the launch stores the element count the call used per slot
   (what step 3 of call c + 1 resets) and advances the call counter.

Kernels that follow it (one launch per call, every program of a launch resident at once, pushes before
polls) can be mixed freely on one communicator: :mod:`tritium.collectives.all_reduce`'s ``lamport``,
:mod:`tritium.collectives.all_reduce_rms_norm`, and :mod:`tritium.fused.matmul_all_reduce`'s decode kernel,
which pushes each tile of a GEMM as it is computed.
"""

import triton
import triton.language as tl

from tritium.shmem.device import translate

SENTINEL16 = -32768  # 0x8000: -0.0 in fp16 and bf16; a pushed -0.0 is sent as +0.0
_SENTINEL16 = tl.constexpr(SENTINEL16)
# state words: calls, the launch's ticket, element counts of the 3 buffers, programs that arrived (meet)
_L_CALLS, _L_TICKET, _L_COUNTS, _L_ARRIVED = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2), tl.constexpr(5)
LAMPORT_STATE_WORDS = 6


@triton.jit
def lamport_begin(lam_ptr, lstate_ptr, world_size, capacity):
    """(call counter, this call's buffer, the buffer to reset, its element count per slot)."""
    calls = tl.load(lstate_ptr + _L_CALLS)
    buf = lam_ptr + (calls % 3) * world_size * capacity
    old = (calls + 2) % 3
    old_buf = lam_ptr + old * world_size * capacity
    old_n = tl.load(lstate_ptr + _L_COUNTS + old).to(tl.int32)
    return calls, buf, old_buf, old_n


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
def lamport_reset(old_buf, old_n, world_size, capacity, pid, num_programs, BLOCK: tl.constexpr):
    """Program ``pid`` of ``num_programs``: its grid-stride share of the first ``old_n`` elements of every
    slot of ``old_buf`` back to -0.0."""
    offs = tl.arange(0, BLOCK)
    for src in range(0, world_size):
        for first in range(pid * BLOCK, old_n, num_programs * BLOCK):
            idx = first + offs
            tl.store(old_buf + src * capacity + idx, tl.full([BLOCK], _SENTINEL16, tl.int16), mask=idx < old_n)


@triton.jit
def lamport_poll(ptrs, mask, max_spins, DTYPE: tl.constexpr):
    """The values at ``ptrs`` (this rank's buffer) once none is -0.0 any more, as fp32, and 1 if the wait
    gave up after ``max_spins`` polls (else 0)."""
    bits = tl.load(ptrs, mask=mask, other=0, volatile=True)
    spins = 0
    while (tl.max((bits == _SENTINEL16).to(tl.int32)) > 0) & (spins < max_spins):
        bits = tl.load(ptrs, mask=mask, other=0, volatile=True)
        spins += 1
    return bits.to(DTYPE, bitcast=True).to(tl.float32), (spins >= max_spins).to(tl.int32)


@triton.jit
def lamport_meet(lstate_ptr, num_programs, max_spins):
    """Every program of the launch waits here for all the others (a counter in the state row; every
    program is resident on a GPU, there is one under the interpreter)."""
    tl.debug_barrier()
    tl.atomic_add(lstate_ptr + _L_ARRIVED, 1, sem="acq_rel", scope="gpu")
    arrived = tl.atomic_add(lstate_ptr + _L_ARRIVED, 0, sem="acquire", scope="gpu")
    spins = 0
    while (arrived < num_programs) & (spins < max_spins):
        arrived = tl.atomic_add(lstate_ptr + _L_ARRIVED, 0, sem="acquire", scope="gpu")
        spins += 1
    tl.debug_barrier()


@triton.jit
def lamport_finish(lstate_ptr, calls, n, num_programs):
    """The launch's last program records ``n`` (elements used per slot this call) and advances the call
    counter (and clears the meet counter) for the next call."""
    tl.debug_barrier()
    done = tl.atomic_add(lstate_ptr + _L_TICKET, 1, sem="acq_rel", scope="gpu")
    if done == num_programs - 1:
        tl.atomic_xchg(lstate_ptr + _L_TICKET, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(lstate_ptr + _L_ARRIVED, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(lstate_ptr + _L_COUNTS + calls % 3, n, sem="relaxed", scope="gpu")
        tl.atomic_add(lstate_ptr + _L_CALLS, 1, sem="release", scope="gpu")
