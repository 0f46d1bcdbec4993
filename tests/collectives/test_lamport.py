"""The Lamport protocol's building blocks in one process: the per-program call words across launches of
different sizes, and the grouped poll-and-reduce against a PyTorch reduction (tritium.collectives.lamport)."""

import pytest
import torch
import triton
import triton.language as tl

from tritium.collectives.lamport import (HEADER_UNSET, KEY_BITS, LAMPORT_MAX_PROGRAMS, LAMPORT_PARTIALS,
                                         LAMPORT_STATE_WORDS, SENTINEL16, SENTINEL32, lamport_begin, lamport_finish,
                                         lamport_gather, lamport_reduce, lamport_reset, lamport_share, poll_group)
from tritium.runtime import interpreting

DEVICE = "cpu" if interpreting() else "cuda"


@triton.jit
def _phases_kernel(lstate_ptr, seen_ptr, n):
    """Each program records the (phase, old element count) it begins with, then finishes the call."""
    pid = tl.program_id(0)
    phase, _buf, _old_buf, old_n, call = lamport_begin(lstate_ptr, lstate_ptr, pid, 1, 1)
    tl.store(seen_ptr + 3 * pid, phase.to(tl.int64))
    tl.store(seen_ptr + 3 * pid + 1, old_n.to(tl.int64))
    tl.store(seen_ptr + 3 * pid + 2, call)
    lamport_finish(lstate_ptr, phase, n, pid, tl.num_programs(0), call)


def test_every_program_of_a_launch_sees_the_same_call_whatever_the_sizes():
    # programs run one after another under the interpreter: a program that wrote a word another one of
    # the same launch still has to read would show here as a launch whose programs disagree
    lstate = torch.zeros(LAMPORT_STATE_WORDS, dtype=torch.int64, device=DEVICE)
    prev_n = 0
    for call, (programs, n) in enumerate([(3, 10), (5, 7), (1, 1), (2, 40), (7, 3), (4, 9), (1, 5), (6, 2)]):
        seen = torch.full((programs, 3), -1, dtype=torch.int64, device=DEVICE)
        _phases_kernel[(programs,)](lstate, seen, n)
        assert seen[:, 0].tolist() == [call % 3] * programs, f"call {call}: phases {seen[:, 0].tolist()}"
        assert seen[:, 1].tolist() == [prev_n] * programs, f"call {call}: old counts {seen[:, 1].tolist()}"
        assert seen[:, 2].tolist() == [call] * programs, f"call {call}: call numbers {seen[:, 2].tolist()}"
        prev_n = n
    words = lstate[:LAMPORT_MAX_PROGRAMS]
    assert torch.equal(words, torch.full_like(words, (8 << 23) | (prev_n << 2) | (8 % 3))), "a program word was missed"


@triton.jit
def _reduce_kernel(buf_ptr, out_ptr, timeouts_ptr, hdr_ptr, n, world_size, capacity, pieces, piece_stride, max_spins,
                   OP: tl.constexpr, GROUP: tl.constexpr, BLOCK: tl.constexpr):
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    acc, timeouts, _wrong = lamport_reduce(buf_ptr, idx, mask, world_size, capacity, pieces, piece_stride, max_spins,
                                           tl.bfloat16, OP, GROUP, hdr_ptr, 0, 0)  # (headers not checked)
    tl.store(out_ptr + idx, acc, mask=mask)
    tl.atomic_add(timeouts_ptr, timeouts)


def _no_headers():
    return torch.full((8,), -1, dtype=torch.int64, device=DEVICE)


@pytest.mark.parametrize("world_size,pieces,group", [(1, 1, 1), (3, 1, 4), (3, 1, 1), (4, 1, 2), (2, 3, 4),
                                                     (3, 2, 2)])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_grouped_poll_reduces_every_part(world_size, pieces, group, op):
    n, capacity, block = 100, 512, 64
    stride = 128  # the pieces of a slot, 128 elements apart
    buf = torch.full((world_size, capacity), SENTINEL16, dtype=torch.int16, device=DEVICE)
    parts = torch.randn(world_size, pieces, n, device=DEVICE).to(torch.bfloat16)
    for r in range(world_size):
        for p in range(pieces):
            buf[r, p * stride:p * stride + n] = parts[r, p].view(torch.int16)
    out = torch.full((n,), float("nan"), device=DEVICE)
    timeouts = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    code = {"sum": 0, "max": 1, "min": 2}[op]
    _reduce_kernel[(triton.cdiv(n, block),)](buf, out, timeouts, _no_headers(), n, world_size, capacity, pieces, stride,
                                             1000, OP=code, GROUP=group, BLOCK=block)
    flat = parts.float().reshape(world_size * pieces, n)
    want = {"sum": flat.sum(0), "max": flat.amax(0), "min": flat.amin(0)}[op]
    assert not out.isnan().any()
    torch.testing.assert_close(out, want, rtol=1e-6, atol=1e-6)
    assert timeouts.item() == 0


def test_a_part_that_never_arrives_gives_up_and_counts():
    buf = torch.zeros((2, 256), dtype=torch.int16, device=DEVICE)
    buf[1, 5] = SENTINEL16
    out = torch.empty(64, device=DEVICE)
    timeouts = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    _reduce_kernel[(1,)](buf, out, timeouts, _no_headers(), 64, 2, 256, 1, 0, 3, OP=0, GROUP=2, BLOCK=64)
    assert timeouts.item() == 1


@triton.jit
def _checked_reduce_kernel(buf_ptr, out_ptr, seen_ptr, hdr_ptr, n, world_size, capacity, max_spins, expect,
                           BLOCK: tl.constexpr):
    idx = tl.arange(0, BLOCK)
    acc, timeouts, wrong = lamport_reduce(buf_ptr, idx, idx < n, world_size, capacity, 1, 0, max_spins, tl.bfloat16,
                                          0, 2, hdr_ptr, expect, 1)
    tl.store(out_ptr + idx, acc, mask=idx < n)
    tl.store(seen_ptr, timeouts)
    tl.store(seen_ptr + 1, wrong)


@pytest.mark.parametrize("peer", ["agrees", "other key", "other call", "unset"])
def test_headers_are_polled_with_the_data(peer):
    # every element of both slots is there; the peer's header decides: the same key (a sum), another key of this
    # call (a mismatch at the first poll, whatever the budget), or none of this call yet (the wait gives up)
    call, key = 5, (77 << 20) | 64
    buf = torch.ones((2, 128), dtype=torch.bfloat16, device=DEVICE).view(torch.int16)
    mine = (call << KEY_BITS) | key
    theirs = {"agrees": mine, "other key": mine + 1, "other call": ((call - 3) << KEY_BITS) | key,
              "unset": HEADER_UNSET}[peer]
    headers = torch.tensor([mine, theirs], dtype=torch.int64, device=DEVICE)
    out = torch.full((64,), float("nan"), device=DEVICE)
    seen = torch.full((2,), -1, dtype=torch.int32, device=DEVICE)
    _checked_reduce_kernel[(1,)](buf, out, seen, headers, 64, 2, 128, 5, mine, BLOCK=64)
    timeouts, wrong = seen.tolist()
    assert (timeouts, wrong) == {"agrees": (0, 0), "other key": (0, 1)}.get(peer, (1, 0)), f"{peer}: {seen.tolist()}"
    if peer == "agrees":
        assert torch.equal(out, torch.full_like(out, 2.0))


def test_poll_group_stays_within_the_register_budget():
    assert poll_group(2, 2048) == 2
    assert poll_group(3, 2048) == 4
    assert poll_group(8, 2048) == 4
    assert poll_group(16, 1024) == 8
    assert poll_group(5, 8192, 16384) == 2
    assert poll_group(1, 1 << 16) == 1


@triton.jit
def _share_kernel(lam_ptr, parts_ptr, lstate_ptr, out_ptr, timeouts_ptr, max_spins):
    """Program p shares p + 1, then sums the shares of programs 0..p (those before it have run under the
    interpreter, and are resident beside it on a GPU)."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    phase, buf, old_buf, old_n, call = lamport_begin(lam_ptr, lstate_ptr, pid, 1, 256)
    lamport_reset(old_buf, old_n, 1, 256, parts_ptr, phase, pid, num_programs, 128)
    lamport_share(parts_ptr, phase, pid, (pid + 1).to(tl.float32))
    total, timed_out = lamport_gather(parts_ptr, phase, 0, pid + 1, max_spins, 8)
    tl.store(out_ptr + pid, total)
    tl.atomic_add(timeouts_ptr, timed_out)
    lamport_finish(lstate_ptr, phase, 0, pid, num_programs, call)


def test_shared_values_are_summed_and_reset_two_calls_later():
    lam = torch.full((3 * 256,), SENTINEL16, dtype=torch.int16, device=DEVICE)
    parts = torch.full((3, LAMPORT_PARTIALS), SENTINEL32, dtype=torch.int32, device=DEVICE)
    lstate = torch.zeros(LAMPORT_STATE_WORDS, dtype=torch.int64, device=DEVICE)
    timeouts = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    for call in range(5):
        programs = 4 + call % 2
        out = torch.full((programs,), float("nan"), device=DEVICE)
        _share_kernel[(programs,)](lam, parts, lstate, out, timeouts, 1000)
        want = torch.tensor([(p + 1) * (p + 2) / 2 for p in range(programs)], device=DEVICE)
        assert torch.equal(out, want), f"call {call}: {out.tolist()}"
        shared = parts[call % 3, :programs].view(torch.float32)
        assert shared.tolist() == [float(p + 1) for p in range(programs)]
        # this call reset the buffer of the call before (two calls ahead of its next use)
        assert torch.equal(parts[(call + 2) % 3], torch.full_like(parts[0], SENTINEL32)), f"call {call}"
    assert timeouts.item() == 0
    # a share that is never published: the gather gives up and says so
    parts.fill_(SENTINEL32)
    lstate.zero_()
    out = torch.empty(1, device=DEVICE)

    _gather_missing[(1,)](parts, out, timeouts, 3)
    assert timeouts.item() == 1


@triton.jit
def _gather_missing(parts_ptr, out_ptr, timeouts_ptr, max_spins):
    total, timed_out = lamport_gather(parts_ptr, 0, 0, 2, max_spins, 2)
    tl.store(out_ptr, total)
    tl.atomic_add(timeouts_ptr, timed_out)
