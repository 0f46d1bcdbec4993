"""Per-rank checks shared by the shmem tests: kernels and workers run by ``tritium.shmem.launch``.

Each worker runs once per rank, asserts, and raises on the first mismatch (launch then names the
rank). Workers group many checks so that one spawned world amortises process start-up.
"""

import time

import pytest
import torch
import torch.distributed as dist
import triton
import triton.language as tl

import tritium.shmem as shmem
from tritium import runtime
from tritium.shmem import sync

BLOCK = 16
N = 13  # valid elements per row: a partial block, so masks matter
POISON = -1
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
# (sem, scope) pairs each atomic runs with
ORDERINGS = [("relaxed", "sys"), ("acquire", "sys"), ("release", "sys"), ("acq_rel", "sys"), ("acq_rel", "gpu")]
OPS = ["add", "sub", "xchg", "cas", "min", "max", "and", "or", "xor"]


def run_world(worker, world_size: int, *args, timeout: float = 180.0, share_gpus: bool = False) -> None:
    """Launch ``worker`` on ``world_size`` ranks: GPUs with NCCL + cuda-ipc when there are enough,
    CPU processes with gloo + cpu-shm under the interpreter otherwise. ``share_gpus``: with fewer GPUs
    than ranks, run anyway over gloo with ranks sharing GPUs round-robin (cuda-ipc within a GPU too)."""
    backend = None
    if not runtime.interpreting() and torch.cuda.device_count() < world_size:
        if not (share_gpus and torch.cuda.device_count() > 0):
            pytest.skip(f"needs {world_size} GPUs, {torch.cuda.device_count()} visible")
        backend = "gloo"
    shmem.launch(worker, world_size, *args, timeout=timeout, backend=backend)


def payload(rank: int, dtype: torch.dtype, device) -> torch.Tensor:
    """What rank ``rank`` publishes: ``rank * 16 + [0, BLOCK)``, exact in fp16/bf16 for rank < 8."""
    return (rank * 16 + torch.arange(BLOCK, device=device)).to(dtype)


def expect_rows(got: torch.Tensor, sources, dtype, what: str) -> None:
    """Row i of ``got`` holds ``payload(sources[i])`` in its first N elements and POISON after them."""
    want = torch.stack([payload(r, dtype, got.device) for r in sources])
    want[:, N:] = POISON
    bad = (got != want).nonzero().tolist()
    assert not bad, f"{what}: {len(bad)} wrong elements, first at {bad[:4]}: got {got[tuple(bad[0])].item()}, " \
                    f"want {want[tuple(bad[0])].item()}"


# ---- loads, stores, get, put, copy -------------------------------------------------------------------

@triton.jit
def _point_to_point_kernel(src, stored, loaded, got, put_dst, rank, bases, n, BLOCK: tl.constexpr):
    """Program ``peer``: store/put this rank's ``src`` into row ``rank`` of ``stored``/``put_dst`` on
    ``peer``; load/get ``peer``'s ``src`` into row ``peer`` of local ``loaded``/``got``."""
    peer = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    mine = rank * BLOCK + offs  # [BLOCK]
    theirs = peer * BLOCK + offs  # [BLOCK]
    shmem.store(stored + mine, tl.load(src + offs, mask=mask), rank, peer, bases, mask=mask, hint=BLOCK)
    value = shmem.load(src + offs, rank, peer, bases, mask=mask, hint=BLOCK)
    tl.store(loaded + theirs, value, mask=mask)
    shmem.get(src + offs, got + theirs, rank, peer, bases, mask=mask, hint=BLOCK)
    shmem.put(src + offs, put_dst + mine, rank, peer, bases, mask=mask, hint=BLOCK)


@triton.jit
def _copy_kernel(src, copied, rank, world_size, bases, n, BLOCK: tl.constexpr):
    """Program (a, b): copy ``src`` of rank a into row (rank, a) of ``copied`` on rank b."""
    a = tl.program_id(0)
    b = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    row = (rank * world_size + a) * BLOCK + offs  # [BLOCK]
    shmem.copy(src + offs, copied + row, rank, a, b, bases, mask=offs < n, hint=BLOCK)


def primitives_worker(rank: int, world_size: int, dtype_names) -> None:
    """store/load/get/put from every rank to every rank, copy between every pair, per dtype."""
    with shmem.SymmetricHeap(1 << 20) as heap:
        ws = world_size
        for name in dtype_names:
            dtype = DTYPES[name]
            src = heap.empty((BLOCK,), dtype)
            src.copy_(payload(rank, dtype, heap.device))
            stored, loaded, got, put_dst = (heap.full((ws, BLOCK), POISON, dtype) for _ in range(4))
            copied = heap.full((ws, ws, BLOCK), POISON, dtype)
            heap.barrier()
            _point_to_point_kernel[(ws,)](src, stored, loaded, got, put_dst, rank, heap.bases, N, BLOCK=BLOCK)
            _copy_kernel[(ws, ws)](src, copied, rank, ws, heap.bases, N, BLOCK=BLOCK)
            heap.barrier()
            peers = range(ws)
            expect_rows(stored, peers, dtype, f"{name} store into rank {rank}")
            expect_rows(loaded, peers, dtype, f"{name} load by rank {rank}")
            expect_rows(got, peers, dtype, f"{name} get by rank {rank}")
            expect_rows(put_dst, peers, dtype, f"{name} put into rank {rank}")
            for issuer in peers:
                expect_rows(copied[issuer], peers, dtype, f"{name} copy by rank {issuer} into rank {rank}")


# ---- atomics -----------------------------------------------------------------------------------------

@triton.jit
def _atomics_kernel(counters, olds, fsum, rank, bases, one, SEM: tl.constexpr, SCOPE: tl.constexpr):
    """Program ``peer``: every op of OPS once on ``counters[op]`` of ``peer``; old values into
    ``olds[peer, op]`` (local). ``one``: the unit (1, or 1 << 32 to exercise the high word)."""
    peer = tl.program_id(0)
    out = olds + peer * 9
    mine = (rank + 1) * one
    bit = one << rank
    tl.store(out + 0, shmem.atomic_add(counters + 0, one, rank, peer, bases, sem=SEM, scope=SCOPE))
    tl.store(out + 1, shmem.atomic_sub(counters + 1, one, rank, peer, bases, sem=SEM, scope=SCOPE))
    tl.store(out + 2, shmem.atomic_xchg(counters + 2, mine, rank, peer, bases, sem=SEM, scope=SCOPE))
    tl.store(out + 3, shmem.atomic_cas(counters + 3, 0 * one, mine, rank, peer, bases, sem=SEM, scope=SCOPE))
    tl.store(out + 4, shmem.atomic_min(counters + 4, mine + 4 * one, rank, peer, bases, sem=SEM, scope=SCOPE))
    tl.store(out + 5, shmem.atomic_max(counters + 5, mine + 4 * one, rank, peer, bases, sem=SEM, scope=SCOPE))
    tl.store(out + 6, shmem.atomic_and(counters + 6, ~bit, rank, peer, bases, sem=SEM, scope=SCOPE))
    tl.store(out + 7, shmem.atomic_or(counters + 7, bit, rank, peer, bases, sem=SEM, scope=SCOPE))
    tl.store(out + 8, shmem.atomic_xor(counters + 8, bit, rank, peer, bases, sem=SEM, scope=SCOPE))
    shmem.atomic_add(fsum, 1.0, rank, peer, bases, sem=SEM, scope=SCOPE)


def _atomic_start(one: int) -> list[int]:
    """Initial counter per op of OPS."""
    return [0, 0, 0, 0, 1000 * one, -1000 * one, -1, 0, 0]


def _check_atomics(counters, olds_by_rank, fsum, rank, ws, one, what) -> None:
    """Exact final values on this rank, and the old values all ranks saw on this rank."""
    every = ((1 << ws) - 1) * one
    want = [ws * one, -ws * one, None, None, 5 * one, (ws + 4) * one, ~every, every, every]
    final = counters.tolist()
    for op, w, f in zip(OPS, want, final):
        assert w is None or f == w, f"{what} atomic_{op}: final {f}, want {w}"
    seen = [olds[rank] for olds in olds_by_rank]  # [ws ranks][9 ops] old values on this rank
    assert sorted(s[0] for s in seen) == [k * one for k in range(ws)], f"{what} atomic_add olds {seen}"
    assert sorted(s[1] for s in seen) == sorted(-k * one for k in range(ws)), f"{what} atomic_sub olds {seen}"
    mines = [(r + 1) * one for r in range(ws)]
    assert sorted([s[2] for s in seen] + [final[2]]) == [0] + mines, f"{what} atomic_xchg olds {seen}"
    winners = [s[3] for s in seen].count(0)
    assert winners == 1 and final[3] in mines, f"{what} atomic_cas: {winners} winners, final {final[3]}"
    assert all(s[3] in (0, final[3]) for s in seen), f"{what} atomic_cas olds {seen}"
    assert fsum.item() == ws, f"{what} fp32 atomic_add: {fsum.item()}, want {ws}"


def atomics_worker(rank: int, world_size: int, orderings) -> None:
    """Every op from every rank into every rank, int32 and int64 (high word), each (sem, scope)."""
    ws = world_size
    with shmem.SymmetricHeap(1 << 20) as heap:
        for dtype, one in ((torch.int32, 1), (torch.int64, 1 << 32)):
            counters = heap.empty((len(orderings), 9), dtype)
            counters.copy_(torch.tensor(_atomic_start(one), dtype=dtype))
            olds = heap.full((len(orderings), ws, 9), 77, dtype)
            fsum = heap.zeros((len(orderings),), torch.float32)
            heap.barrier()
            for i, (sem, scope) in enumerate(orderings):
                _atomics_kernel[(ws,)](counters[i], olds[i], fsum[i], rank, heap.bases, one, SEM=sem, SCOPE=scope)
            heap.barrier()
            everyone = [None] * ws
            dist.all_gather_object(everyone, olds.tolist())
            for i, ordering in enumerate(orderings):
                _check_atomics(counters[i], [e[i] for e in everyone], fsum[i], rank, ws, one,
                               f"rank {rank} {dtype} {ordering}")


# ---- signal / wait -----------------------------------------------------------------------------------

@triton.jit
def _send_kernel(data, flags, rank, bases, value, BLOCK: tl.constexpr, OP: tl.constexpr):
    """Program ``peer``: put a message into row ``rank`` of ``data`` on ``peer``, then signal it."""
    peer = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    shmem.store(data + rank * BLOCK + offs, value * 100 + rank * 16 + offs, rank, peer, bases)
    shmem.signal(flags + rank, value, rank, peer, bases, op=OP)


@triton.jit
def _recv_kernel(data, flags, out, ok, rank, bases, value, max_spins, BLOCK: tl.constexpr, CMP: tl.constexpr):
    """Program ``peer``: wait for ``peer``'s flag on this rank, then copy its message to ``out``."""
    peer = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(ok + peer, shmem.wait(flags + peer, value, rank, rank, bases, max_spins, cmp=CMP))
    tl.store(out + peer * BLOCK + offs, tl.load(data + peer * BLOCK + offs))


def message_worker(rank: int, world_size: int) -> None:
    """Two rounds of message passing between all pairs (set/ge, then add/eq), then a wait that times out."""
    ws = world_size
    with shmem.SymmetricHeap(1 << 20) as heap:
        rounds = [(1, "set", "ge"), (2, "add", "eq")]  # flag value after the round, signal op, wait cmp
        data = heap.zeros((len(rounds), ws, BLOCK), torch.int32)
        flags = heap.zeros((ws,), torch.int32)
        out = heap.zeros((len(rounds), ws, BLOCK), torch.int32)
        ok = heap.zeros((len(rounds), ws), torch.int32)
        heap.barrier()
        for i, (value, op, cmp) in enumerate(rounds):
            increment = value if op == "set" else 1
            _send_kernel[(ws,)](data[i], flags, rank, heap.bases, increment, BLOCK=BLOCK, OP=op)
            _recv_kernel[(ws,)](data[i], flags, out[i], ok[i], rank, heap.bases, value, heap.max_spins,
                                BLOCK=BLOCK, CMP=cmp)
        heap.barrier()
        assert ok.tolist() == [[1] * ws] * len(rounds), f"rank {rank}: waits timed out: {ok.tolist()}"
        for i, (value, op, _) in enumerate(rounds):
            increment = value if op == "set" else 1
            want = torch.stack([increment * 100 + r * 16 + torch.arange(BLOCK, device=heap.device) for r in range(ws)])
            assert torch.equal(out[i], want.to(torch.int32)), f"rank {rank} round {i}: {out[i].tolist()}"
        # Nobody signals `never`: the wait must give up after max_spins polls and report 0.
        never = heap.zeros((1,), torch.int32)
        lost = heap.full((1,), 7, torch.int32)
        heap.barrier()
        _recv_kernel[(1,)](data[0], never, out[0], lost, rank, heap.bases, 1, 8, BLOCK=BLOCK, CMP="ge")
        assert lost.item() == 0, f"rank {rank}: wait on a flag nobody sets returned {lost.item()}"


# ---- barriers ----------------------------------------------------------------------------------------

@triton.jit
def _stamp_kernel(slots, value, rank, bases):
    """Program ``peer``: write ``value`` into ``slots[rank]`` on ``peer``."""
    shmem.store(slots + rank, value, rank, tl.program_id(0), bases)


def barrier_worker(rank: int, world_size: int, rounds: int = 3) -> None:
    """Device barrier: after it, every rank sees every rank's stamp of the round; counters agree.
    Host barrier: stamps written before it are visible after it."""
    ws = world_size
    with shmem.SymmetricHeap(1 << 20) as heap:
        slots = heap.zeros((ws,), torch.int64)
        heap.barrier()
        epoch0 = heap.sync[sync.EPOCH].item()
        snapshots = []
        for k in range(1, rounds + 1):
            _stamp_kernel[(ws,)](slots, k, rank, heap.bases)
            heap.device_barrier()
            snapshots.append(slots.clone())
            heap.device_barrier()  # nobody stamps round k + 1 before everyone has read round k
        heap.barrier()
        for k, snap in enumerate(snapshots, 1):
            assert snap.tolist() == [k] * ws, f"rank {rank} round {k}: saw {snap.tolist()} after device barrier"
        state = heap.sync.tolist()
        assert state[sync.EPOCH] == epoch0 + 2 * rounds, f"rank {rank}: epoch {state}"
        assert state[sync.ARRIVALS:] == [state[sync.EPOCH]] * ws, f"rank {rank}: arrivals {state}"
        assert state[sync.TIMEOUTS] == 0, f"rank {rank}: timeouts {state}"
        _stamp_kernel[(ws,)](slots, -5, rank, heap.bases)
        heap.barrier()
        assert slots.tolist() == [-5] * ws, f"rank {rank}: host barrier, saw {slots.tolist()}"


def barrier_timeout_worker(rank: int, world_size: int) -> None:
    """Rank 0 polls only a few times while the others arrive late: its device barrier gives up, the
    next host barrier raises DeviceTimeout on every rank, and later barriers work again."""
    with shmem.SymmetricHeap(1 << 20) as heap:
        patience = heap.max_spins
        if rank == 0:
            heap.max_spins = 4
        else:
            time.sleep(1.0)
        heap.device_barrier()
        with pytest.raises(shmem.DeviceTimeout, match=r"rank\(s\) \[0\]"):
            heap.barrier()
        heap.max_spins = patience
        heap.device_barrier()
        heap.barrier()
        state = heap.sync.tolist()
        assert state[sync.ARRIVALS:] == [2] * world_size, f"rank {rank}: arrivals {state}"


def world8_worker(rank: int, world_size: int) -> None:
    """The basic primitives and both barriers at one world size (8 on the CPU in CI)."""
    primitives_worker(rank, world_size, ["fp32"])
    atomics_worker(rank, world_size, [("acq_rel", "sys")])
    barrier_worker(rank, world_size, rounds=1)
