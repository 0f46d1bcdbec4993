"""Per-rank checks of the collectives, run by ``tritium.shmem.launch`` (one process per rank).

Every rank can build every rank's input (a function of the rank and a seed), so each check compares
against the PyTorch reference over all inputs, and, for the dtypes gloo reduces, against
``torch.distributed`` on the same input as well.
"""

import os
import time

import pytest
import torch
import torch.distributed as dist

import tritium.collectives as coll
import tritium.shmem as shmem
from tritium import runtime
from tritium.collectives import reference as ref

MAX_BYTES = 64 << 10
FLOATS = (torch.float32, torch.float16, torch.bfloat16)
INTS = (torch.int32, torch.int64)
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}  # as the ops tests


def run_world(worker, world_size: int, *args, timeout: float = 300.0) -> None:
    """``worker`` on ``world_size`` ranks: GPUs over NCCL when there are enough, else CPU processes under
    the interpreter (gloo, cpu-shm)."""
    backend = None
    if not runtime.interpreting() and torch.cuda.device_count() < world_size:
        # TRITIUM_SHARE_GPUS=1: a correctness run on fewer GPUs, ranks sharing them (gloo; slow waits)
        if not (os.environ.get("TRITIUM_SHARE_GPUS") == "1" and torch.cuda.device_count() > 0):
            pytest.skip(f"needs {world_size} GPUs, {torch.cuda.device_count()} visible")
        backend = "gloo"
    shmem.launch(worker, world_size, *args, backend=backend, timeout=timeout)


def inputs(world_size: int, shape, dtype, seed: int, device, integers: bool) -> list[torch.Tensor]:
    """Every rank's input: integer-valued (``rank + 1 + arange`` folded into small values, exact in every
    dtype) or random normal floats from a per-(seed, rank) generator."""
    xs = []
    numel = 1
    for d in shape:
        numel *= d
    for r in range(world_size):
        if integers:
            x = ((torch.arange(numel) * 7 + r * 3 + seed) % 23 + r + 1 - 12).to(dtype)
        else:
            g = torch.Generator().manual_seed(seed * 101 + r)
            x = torch.randn(numel, generator=g).to(dtype)
        xs.append(x.reshape(shape).to(device))
    return xs


def assert_equal_or_close(out: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert out.shape == want.shape and out.dtype == want.dtype, f"{what}: {out.shape} {out.dtype} vs {want.shape}"
    if out.dtype in INTS:
        assert torch.equal(out, want), f"{what}: first difference at {(out != want).nonzero()[:4].tolist()}"
        return
    assert not torch.isnan(out).any(), f"{what}: NaN at {torch.isnan(out).nonzero()[:4].tolist()}"
    o, w = out.double(), want.double()
    err = ((o - w).norm() / max(w.norm(), 1e-12)).item()
    assert err <= TOL[out.dtype], f"{what}: relative error {err:.2e} > {TOL[out.dtype]:.0e}, worst at " \
        f"{(o - w).abs().flatten().argmax().item()}"


def _comm(max_bytes: int = MAX_BYTES, **kwargs):
    heap = shmem.SymmetricHeap(coll.Communicator.heap_bytes(max_bytes, dist.get_world_size()) + (1 << 20))
    return heap, coll.Communicator(heap, max_bytes=max_bytes, **kwargs)


def collectives_worker(rank: int, world_size: int, sizes: tuple[int, ...], dtypes: tuple, full: bool) -> None:
    """Every collective, algorithm, op and dtype at each size, with integer-valued and random inputs,
    ``out`` given and not, in place; then the device-side status must be clean."""
    heap, comm = _comm()
    dev = heap.device
    seed = 0
    try:
        for dtype in dtypes:
            for n in sizes:
                seed += 1
                integers = dtype in INTS or seed % 2 == 0
                xs = inputs(world_size, (n,), dtype, seed, dev, integers)
                x = xs[rank]
                ops = ("sum", "max", "min") + (("avg",) if dtype in FLOATS else ())
                algorithms = ("one_shot", "two_shot") + (("lamport",) if dtype in (torch.float16, torch.bfloat16) else ())
                for op in ops if full else ("sum",):
                    for algorithm in algorithms:
                        poisoned = torch.full_like(x, 77)
                        out = comm.all_reduce(x, op=op, out=poisoned, algorithm=algorithm)
                        assert out is poisoned
                        assert_equal_or_close(out, ref.all_reduce_ref(xs, op),
                                              f"all_reduce {algorithm} {op} {dtype} n={n}")
                if dtype in (torch.float32, torch.int64):  # what gloo reduces on the CPU
                    want = x.clone()
                    dist.all_reduce(want)
                    assert_equal_or_close(comm.all_reduce(x), want, f"all_reduce vs gloo {dtype} n={n}")
                inplace = x.clone()
                assert comm.all_reduce(inplace, out=inplace) is inplace
                assert_equal_or_close(inplace, ref.all_reduce_ref(xs), f"all_reduce in place {dtype} n={n}")
                assert_equal_or_close(comm.all_gather(x), ref.all_gather_ref(xs), f"all_gather {dtype} n={n}")
                b = x.clone()
                src = n % world_size
                assert comm.broadcast(b, src) is b
                assert_equal_or_close(b, xs[src], f"broadcast from {src} {dtype} n={n}")
                chunked = inputs(world_size, (world_size * n,), dtype, seed + 1000, dev, integers)
                for op in ("sum", "max") if full else ("sum",):
                    assert_equal_or_close(comm.reduce_scatter(chunked[rank], op=op),
                                          ref.reduce_scatter_ref(chunked, rank, op), f"reduce_scatter {op} {dtype} n={n}")
                assert_equal_or_close(comm.all_to_all(chunked[rank]), ref.all_to_all_ref(chunked, rank),
                                      f"all_to_all {dtype} n={n}")
        # multi-dimensional tensors keep their shape
        xs = inputs(world_size, (world_size * 3, 5), torch.float32, 7, dev, True)
        assert_equal_or_close(comm.all_reduce(xs[rank]), ref.all_reduce_ref(xs), "all_reduce 2-D")
        assert_equal_or_close(comm.all_gather(xs[rank]), ref.all_gather_ref(xs), "all_gather 2-D")
        assert_equal_or_close(comm.reduce_scatter(xs[rank]), ref.reduce_scatter_ref(xs, rank), "reduce_scatter 2-D")
        comm.check()
    finally:
        heap.close()


def back_to_back_worker(rank: int, world_size: int, calls: int) -> None:
    """``calls`` calls in a row with changing data and sizes, alternating algorithms and collectives,
    nothing in between: a stale flag or a reused buffer would show up as a wrong result."""
    heap, comm = _comm()
    dev = heap.device
    outs, wants = [], []
    try:
        for i in range(calls):
            n = 1 + (i * 37) % 300
            dtype = torch.bfloat16 if i % 4 == 3 else torch.float32
            xs = inputs(world_size, (n,), dtype, 500 + i, dev, True)
            if i % 4 == 0:
                outs.append(comm.all_reduce(xs[rank], algorithm="one_shot"))
                wants.append(ref.all_reduce_ref(xs))
            elif i % 4 == 1:
                outs.append(comm.all_reduce(xs[rank], algorithm="two_shot"))
                wants.append(ref.all_reduce_ref(xs))
            elif i % 4 == 2:
                outs.append(comm.all_gather(xs[rank]))
                wants.append(ref.all_gather_ref(xs))
            else:  # Lamport: its buffers rotate by threes, with the sizes changing
                for x in xs:  # every rank sends a -0.0, which goes as +0.0 (-0.0 marks an empty slot)
                    x[0] = -0.0
                outs.append(comm.all_reduce(xs[rank], algorithm="lamport"))
                wants.append(ref.all_reduce_ref(xs))
        for i, (out, want) in enumerate(zip(outs, wants)):
            assert_equal_or_close(out, want, f"call {i}")
        comm.check()
    finally:
        heap.close()


def zero_copy_worker(rank: int, world_size: int) -> None:
    """Inputs that are heap tensors are read in place by the peers (``zero_copy_bytes=0``: every size):
    every collective against the reference, the two-shot all-reduce in place (results pushed straight
    into every rank's x), outputs overlapping x (staged instead), inputs rewritten right after each
    call (the second flag round keeps a rank in the call while peers read its x), and a rank whose
    input is not a heap tensor (every rank's check raises, then the communicator works again)."""
    heap, comm = _comm(zero_copy_bytes=0)
    dev = heap.device
    n = 40 * world_size + 8
    raw_x = heap.empty((8 * world_size * n,), torch.uint8)  # room for int64
    raw_y = heap.empty((8 * world_size * n,), torch.uint8)
    hx, hy = raw_x[: 4 * world_size * n].view(torch.float32), raw_y[: 4 * world_size * n].view(torch.float32)
    try:
        for i, dtype in enumerate((torch.float32, torch.int64, torch.float16)):
            xs = inputs(world_size, (world_size * n,), dtype, 40 + i, dev, dtype != torch.float16)
            x = raw_x[: xs[rank].numel() * xs[rank].element_size()].view(dtype)
            assert heap.offset(x) is not None and comm._zero_copy_offset(x, None) >= 0  # read in place
            for algorithm in ("one_shot", "two_shot"):
                x.copy_(xs[rank])
                out = torch.full_like(x, 77)
                comm.all_reduce(x, out=out, algorithm=algorithm)
                assert_equal_or_close(out, ref.all_reduce_ref(xs), f"zero-copy all_reduce {algorithm} {dtype}")
                assert torch.equal(x, xs[rank]), "a zero-copy all_reduce changed its input"
                x.copy_(xs[rank])
                assert comm.all_reduce(x, out=x, algorithm=algorithm) is x
                assert_equal_or_close(x, ref.all_reduce_ref(xs), f"zero-copy all_reduce {algorithm} in place {dtype}")
            x.copy_(xs[rank])
            assert_equal_or_close(comm.reduce_scatter(x), ref.reduce_scatter_ref(xs, rank), f"zero-copy reduce_scatter {dtype}")
            assert_equal_or_close(comm.all_to_all(x), ref.all_to_all_ref(xs, rank), f"zero-copy all_to_all {dtype}")
            part = x[:n]
            parts = [t[:n] for t in xs]
            assert_equal_or_close(comm.all_gather(part), ref.all_gather_ref(parts), f"zero-copy all_gather {dtype}")
            # all_gather into the heap buffer that holds this rank's input as its slot: staged
            y = raw_y[: xs[rank].numel() * xs[rank].element_size()].view(dtype)
            y[rank * n:(rank + 1) * n].copy_(parts[rank])
            assert comm._zero_copy_offset(y[rank * n:(rank + 1) * n], y) == -1  # out overlaps x: staged
            assert_equal_or_close(comm.all_gather(y[rank * n:(rank + 1) * n], out=y), ref.all_gather_ref(parts),
                                  f"all_gather in place {dtype}")
            src = (i + 1) % world_size
            assert comm.broadcast(x, src) is x
            assert_equal_or_close(x, xs[src], f"zero-copy broadcast from {src} {dtype}")
        # rewrite the input as soon as each call returns: a rank must not leave while peers read its x
        outs, wants = [], []
        for i in range(20):
            xs = inputs(world_size, (world_size * n,), torch.float32, 300 + i, dev, True)
            hx.copy_(xs[rank])
            outs.append(comm.all_reduce(hx, algorithm="one_shot" if i % 2 else "two_shot"))
            wants.append(ref.all_reduce_ref(xs))
            hx.fill_(-1e9)
            outs.append(comm.all_gather(hy[:n].copy_(xs[rank][:n])))
            wants.append(ref.all_gather_ref([t[:n] for t in xs]))
            hy.fill_(-1e9)
        for i, (out, want) in enumerate(zip(outs, wants)):
            assert_equal_or_close(out, want, f"zero-copy call {i}")
        comm.check()
        if world_size > 1:  # rank 0 passes a heap tensor, the others a plain one: nobody reads, all raise
            plain = torch.ones(world_size * n, device=dev)
            out = torch.full_like(plain, -5.0)
            comm.all_reduce(hx if rank == 0 else plain, out=out, algorithm="one_shot")
            with pytest.raises(coll.CollectiveMismatch, match="different"):
                comm.check()
            assert torch.all(out == -5.0)
        xs = inputs(world_size, (world_size * n,), torch.float32, 7, dev, True)
        hx.copy_(xs[rank])
        assert_equal_or_close(comm.all_reduce(hx), ref.all_reduce_ref(xs), "zero copy after a mismatch")
        comm.check()
    finally:
        heap.close()


def group_worker(rank: int, world_size: int) -> None:
    """Heaps and communicators over subgroups: the even ranks and the odd ranks each reduce among
    themselves (group ranks, not global ones, index the heap), both subgroups at once."""
    groups = [dist.new_group([r for r in range(world_size) if r % 2 == parity]) for parity in (0, 1)]
    mine = groups[rank % 2]
    members = [r for r in range(world_size) if r % 2 == rank % 2]
    heap = shmem.SymmetricHeap(coll.Communicator.heap_bytes(MAX_BYTES, len(members)) + (1 << 20), group=mine)
    try:
        assert (heap.rank, heap.world_size, heap.global_ranks) == (members.index(rank), len(members), members)
        comm = coll.Communicator(heap, max_bytes=MAX_BYTES, group=mine)
        with pytest.raises(ValueError, match="but the heap's ranks are"):
            coll.Communicator(heap, max_bytes=MAX_BYTES, group=groups[1 - rank % 2])
        dev = heap.device
        xs = inputs(world_size, (100,), torch.float32, 11, dev, True)  # global rank r's input: xs[r]
        mine_xs = [xs[r] for r in members]
        for algorithm in ("one_shot", "two_shot"):
            assert_equal_or_close(comm.all_reduce(xs[rank], algorithm=algorithm), ref.all_reduce_ref(mine_xs),
                                  f"group all_reduce {algorithm}")
        assert_equal_or_close(comm.all_gather(xs[rank]), ref.all_gather_ref(mine_xs), "group all_gather")
        comm.check()
        # the subgroup's ranks agree on the group's sum, and so does gloo over the same group
        want = xs[rank].clone()
        dist.all_reduce(want, group=mine)
        assert_equal_or_close(comm.all_reduce(xs[rank]), want, "group all_reduce vs gloo")
    finally:
        heap.close()
    if world_size > 1:
        with pytest.raises(ValueError, match="is not a member"):
            shmem.SymmetricHeap(1 << 20, group=groups[1 - rank % 2])


def rms_norm_worker(rank: int, world_size: int) -> None:
    heap, comm = _comm()
    dev = heap.device
    try:
        for dtype in FLOATS:
            for rows, hidden in ((1, 64), (5, 96), (3, 1000)):
                xs = inputs(world_size, (rows, hidden), dtype, rows + hidden, dev, False)
                g = torch.Generator().manual_seed(hidden)
                residual = torch.randn(rows, hidden, generator=g).to(dtype).to(dev)
                weight = (1 + 0.1 * torch.randn(hidden, generator=g)).to(dtype).to(dev)
                want_out, want_h = ref.all_reduce_rms_norm_ref(xs, residual, weight, 1e-5)
                res = residual.clone()
                out = comm.all_reduce_rms_norm(xs[rank], res, weight, 1e-5)
                assert_equal_or_close(res, want_h, f"rms residual {dtype} {rows}x{hidden}")
                assert_equal_or_close(out, want_out, f"rms out {dtype} {rows}x{hidden}")
        comm.check()
    finally:
        heap.close()


def rms_norm_zero_rows_worker(rank: int, world_size: int, dtype) -> None:
    """The last rank calls all_reduce_rms_norm without rows (M = 0), the others with rows: every rank's check
    raises CollectiveMismatch (the rank without rows takes part instead of returning), nothing is written, and
    the next agreeing call is right. In 16-bit dtypes the peers' small message takes the Lamport kernel and
    meets the rank without rows on the flag protocol (found after a wait gives up: the counters are then out
    of step, every later check raises)."""
    heap, comm = _comm()
    heap.max_spins = 2048 if runtime.interpreting() else 1 << 23  # (a cross-protocol mismatch: a wait gives up)
    dev = heap.device
    rows, hidden = 3, 96
    last = rank == world_size - 1
    try:
        g = torch.Generator().manual_seed(11)
        weight = (1 + 0.1 * torch.randn(hidden, generator=g)).to(dtype).to(dev)
        xs = inputs(world_size, (rows, hidden), dtype, 12, dev, False)
        residual = torch.randn(rows, hidden, generator=g).to(dtype).to(dev)
        x, res = (xs[rank][:0], residual[:0].clone()) if last else (xs[rank], residual.clone())
        out = torch.full_like(x, -5.0)
        comm.all_reduce_rms_norm(x, res, weight, 1e-5, out=out)
        with pytest.raises(coll.CollectiveMismatch, match="different number of elements") as raised:
            comm.check()
        cross = dtype != torch.float32
        assert ("out of step" in str(raised.value)) == cross, f"rank {rank}: {raised.value}"
        assert torch.all(out == -5.0) and torch.equal(res, residual[:res.shape[0]]), f"rank {rank} wrote"
        if cross:
            return
        xs = inputs(world_size, (rows, hidden), dtype, 13, dev, False)
        want_out, want_h = ref.all_reduce_rms_norm_ref(xs, residual, weight, 1e-5)
        res = residual.clone()
        assert_equal_or_close(comm.all_reduce_rms_norm(xs[rank], res, weight, 1e-5), want_out, "the call after")
        assert_equal_or_close(res, want_h, "the call after: residual")
        comm.check()
    finally:
        heap.close()


def bad_input_worker(rank: int, world_size: int) -> None:
    """Argument errors name the argument and raise before anything is launched (every rank alike)."""
    heap, comm = _comm()
    dev = heap.device
    x = torch.ones(8, device=dev)
    cases = [
        (lambda: comm.all_reduce(x.to(torch.float64)), TypeError, "x has dtype torch.float64"),
        (lambda: comm.all_reduce(torch.ones(8, 2, device=dev).t()), ValueError, "x must be contiguous"),
        (lambda: comm.all_reduce(x, op="prod"), ValueError, "op must be one of sum, max, min, avg"),
        (lambda: comm.all_reduce(x.long(), op="avg"), ValueError, "op 'avg' needs a floating-point tensor"),
        (lambda: comm.all_reduce(x, algorithm="ring"), ValueError, "algorithm must be one of"),
        (lambda: comm.all_reduce(x, algorithm="lamport"), ValueError, "'lamport' takes float16/bfloat16 messages"),
        (lambda: comm.all_reduce(torch.ones(MAX_BYTES, device=dev)), ValueError, "make it with max_bytes >= 262144"),
        (lambda: comm.all_reduce(x, out=torch.empty(9, device=dev)), ValueError, r"out must be \(8,\)"),
        (lambda: comm.all_reduce(x, out=torch.empty(8, device=dev, dtype=torch.float16)), ValueError, "out must be"),
        (lambda: comm.reduce_scatter(torch.ones(world_size * 2 + 1, device=dev)), ValueError,
         "first dimension must divide by world_size"),
        (lambda: comm.all_to_all(torch.ones(world_size * 2 + 1, device=dev)), ValueError,
         "first dimension must divide by world_size"),
        (lambda: comm.broadcast(x, world_size), ValueError, r"src must be a rank in \[0, "),
        (lambda: comm.all_gather(torch.tensor(1.0, device=dev)), ValueError, "at least one dimension"),
        (lambda: comm.all_reduce_rms_norm(x[None], x[None], torch.ones(3, device=dev), 1e-5), ValueError,
         r"weight must be \[8\]"),
        (lambda: comm.all_reduce_rms_norm(x[None], x[None], x, 0.0), ValueError, "eps must be a positive number"),
        (lambda: comm.all_reduce("x"), TypeError, "x must be a torch.Tensor"),
    ]
    if dev.type == "cuda":
        cases.append((lambda: comm.all_reduce(torch.ones(8)), ValueError, "x is on cpu"))
    try:
        for fn, error, message in cases:
            with pytest.raises(error, match=message):
                fn()
        comm.check()
    finally:
        heap.close()


def mismatch_worker(rank: int, world_size: int) -> None:
    """Ranks passing different sizes, or the same size to another dtype, op, collective, source or trailing
    shape: every rank's check raises, nothing is written, and the communicator works again afterwards."""
    heap, comm = _comm()
    dev = heap.device
    try:
        x = torch.ones(16 + rank, device=dev)
        out = torch.full_like(x, -5.0)
        comm.all_reduce(x, out=out, algorithm="one_shot")
        with pytest.raises(coll.CollectiveMismatch, match="different number of elements"):
            comm.check()
        assert torch.all(out == -5.0)
        xs = inputs(world_size, (33,), torch.float32, 3, dev, True)
        assert_equal_or_close(comm.all_reduce(xs[rank]), ref.all_reduce_ref(xs), "after a mismatch")
        comm.check()
        # the same element count, called otherwise: another dtype, op, collective, source or trailing shape
        y = torch.arange(24, device=dev, dtype=torch.float32) + rank
        odd = rank == world_size - 1
        calls = [lambda: comm.all_reduce(y.int() if odd else y, algorithm="one_shot"),
                 lambda: comm.all_reduce(y, op="max" if odd else "sum", algorithm="one_shot"),
                 lambda: comm.all_gather(y) if odd else comm.all_reduce(y, algorithm="one_shot"),
                 lambda: comm.broadcast(y.clone(), src=1 if odd else 0),
                 lambda: comm.all_gather(y.view(6, 4) if odd else y.view(4, 6))]
        for i, call in enumerate(calls):
            call()
            with pytest.raises(coll.CollectiveMismatch, match="different number of elements"):
                comm.check()
        # an empty x on one rank only (it launches too): every rank's check raises, and the next calls are right
        comm.all_reduce(y[:0] if odd else y, algorithm="one_shot")
        with pytest.raises(coll.CollectiveMismatch, match="different number of elements"):
            comm.check()
        assert_equal_or_close(comm.all_reduce(xs[rank]), ref.all_reduce_ref(xs), "after the mismatches")
        comm.check()
    finally:
        heap.close()


def lamport_mismatch_worker(rank: int, world_size: int) -> None:
    """Lamport calls that differ on the last rank (fewer or more elements, fp16 against bf16 of one size,
    another op, the fused RMSNorm with another row width): every rank's check raises CollectiveMismatch (its
    header, not a timeout), nothing is written, and agreeing calls afterwards are right in each of the three
    buffers, over the elements a larger peer pushed into them too."""
    heap, comm = _comm()
    # A mismatch must not wait this long on any rank (GPUs shared by ranks take turns); the agreeing calls after
    # it keep the default bound: a rank starved of CPU under the interpreter can take more than 2^14 polls to arrive.
    short = 1 << 14 if runtime.interpreting() else heap.max_spins
    default = heap.max_spins
    dev = heap.device
    odd = rank == world_size - 1

    def lamport(x, spins=default, **kw):
        out = torch.full_like(x, -5.0)
        heap.max_spins = spins
        try:
            comm.all_reduce(x, out=out, algorithm="lamport", **kw)
        finally:
            heap.max_spins = default
        return out

    try:
        y = torch.arange(300, device=dev, dtype=torch.float32) % 7 + rank
        cases = {"fewer elements": lambda: lamport(y[:100 if odd else 300].bfloat16(), short),
                 "more elements": lambda: lamport(y[:300 if odd else 100].bfloat16(), short),
                 "fp16 against bf16": lambda: lamport(y.half() if odd else y.bfloat16(), short),
                 "max against sum": lambda: lamport(y.bfloat16(), short, op="max" if odd else "sum")}
        for what, call in cases.items():
            out = call()
            with pytest.raises(coll.CollectiveMismatch, match="different number of elements") as raised:
                comm.check()
            assert "out of step" not in str(raised.value), f"{what}: a wait gave up ({raised.value})"
            assert torch.all(out == -5.0), f"{what}: rank {rank} wrote out"
            for call_after in range(3):  # every buffer, each with stale elements from the larger peer reset
                xs = inputs(world_size, (300,), torch.bfloat16, 40 + call_after, dev, True)
                assert_equal_or_close(lamport(xs[rank]), ref.all_reduce_ref(xs), f"{what}: call {call_after} after")
            comm.check()
        # the fused RMSNorm: 4 x 12 against 6 x 8 (the same element count, rows of another width)
        rows, hidden = (6, 8) if odd else (4, 12)
        x = torch.ones(rows, hidden, device=dev, dtype=torch.bfloat16)
        residual = torch.zeros_like(x)
        out = torch.full_like(x, -5.0)
        heap.max_spins = short
        try:
            comm.all_reduce_rms_norm(x, residual, torch.ones(hidden, device=dev, dtype=torch.bfloat16), 1e-5, out=out)
        finally:
            heap.max_spins = default
        with pytest.raises(coll.CollectiveMismatch, match="different number of elements"):
            comm.check()
        assert torch.all(out == -5.0) and torch.all(residual == 0), f"rank {rank}: the RMSNorm wrote"
        xs = inputs(world_size, (300,), torch.bfloat16, 50, dev, True)
        assert_equal_or_close(lamport(xs[rank]), ref.all_reduce_ref(xs), "after the RMSNorm mismatch")
        comm.check()
    finally:
        heap.close()


def lamport_late_push_worker(rank: int, world_size: int) -> None:
    """A Lamport call whose peer differs and pushes late (rank 1 plays it from the host: its header of the call
    first, the elements it announced 1.5 s later): rank 0's call does not return before they came, so none can
    land in the buffer after the next call's reset (and pass for data three calls later: stop 95's flaky wrong
    sum after a mismatch). Then a peer that announces elements it never pushes: the wait gives up and check()
    says so next to the mismatch."""
    from tritium.collectives import lamport

    heap, comm = _comm()
    dev = heap.device
    slots = comm._lamport.view(3, world_size, -1)
    try:
        for call, late_s in ((0, 1.5), (1, None)):
            if call == 1:
                heap.max_spins = 4096  # a test of the error, not of patience
            heap.barrier()
            if rank == 0:
                x = torch.ones(300, device=dev, dtype=torch.bfloat16)
                out = torch.full_like(x, -5.0)
                start = time.monotonic()
                comm.all_reduce(x, out=out, algorithm="lamport")
                with pytest.raises(coll.CollectiveMismatch, match="different number of elements") as raised:
                    comm.check()
                took = time.monotonic() - start
                assert torch.all(out == -5.0), "rank 0 wrote out"
                if late_s is not None:
                    assert took >= late_s - 0.2, f"the call returned {took:.2f} s in, before the peer's pushes"
                    assert "gave up" not in str(raised.value), raised.value
                else:
                    assert "1 wait(s) gave up as well" in str(raised.value), raised.value
            elif rank == 1:
                pushed = 500
                key = lamport.lamport_key(pushed, "another call")
                header = torch.tensor([(call << lamport.KEY_BITS) | key], dtype=torch.int64, device=dev)
                heap.put(header, comm._lhdr[call * world_size + 1:call * world_size + 2], 0)
                if late_s is not None:
                    time.sleep(late_s)
                    heap.put(torch.ones(pushed, device=dev, dtype=torch.bfloat16).view(torch.int16),
                             slots[call, 1, :pushed], 0)
            heap.barrier()
    finally:
        heap.close()


def algorithm_mismatch_worker(rank: int, world_size: int, picks: tuple[str, ...]) -> None:
    """Ranks that pick different all-reduce algorithms for one call (rank r takes ``picks[r % len(picks)]``):
    every rank's check raises CollectiveMismatch (the protocols never meet, but a wait that gives up finds the
    peer in the other protocol's call), and no rank writes out, the Lamport kernel included. A fresh communicator
    per pattern (the counters are left out of step: its later checks keep raising)."""
    heap = shmem.SymmetricHeap(2 * coll.Communicator.heap_bytes(MAX_BYTES, world_size) + (1 << 20))
    # give up sooner than the default (a test of the error, not of patience; ranks that share a GPU take turns)
    heap.max_spins = 4096 if runtime.interpreting() else 1 << 20
    try:
        for shift in range(2):  # each algorithm on rank 0 once
            comm = coll.Communicator(heap, max_bytes=MAX_BYTES)
            x = torch.full((96,), float(rank + 1), device=heap.device, dtype=torch.bfloat16)
            out = torch.full_like(x, -5.0)
            comm.all_reduce(x, out=out, algorithm=picks[(rank + shift) % len(picks)])
            with pytest.raises(coll.CollectiveMismatch, match="different number of elements"):
                comm.check()
            assert torch.all(out == -5.0), f"rank {rank} wrote out: {out.tolist()}"
    finally:
        heap.close()


def missing_rank_worker(rank: int, world_size: int) -> None:
    """The last rank never calls: the others' waits give up and their check raises DeviceTimeout; so does the
    last rank's (the peers told it they gave up on it), and every later check (the counters are out of step)."""
    heap, comm = _comm()
    heap.max_spins = 4096  # give up sooner than the default (a test of the error, not of patience)
    dev = heap.device
    try:
        if rank != world_size - 1:
            sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
            start = time.perf_counter()
            comm.all_reduce(torch.ones(8, device=dev))
            sync()
            first = time.perf_counter() - start
            # fail fast: once a wait gave up, later calls do not wait (until the host check)
            start = time.perf_counter()
            for x in (torch.ones(8, device=dev), torch.ones(8, device=dev, dtype=torch.bfloat16)):
                comm.all_reduce(x)
                comm.all_gather(x)
            sync()
            assert time.perf_counter() - start < first, "calls after a timeout waited again"
            with pytest.raises(shmem.DeviceTimeout, match="gave up"):
                comm.check()
        heap.barrier()  # (after the peers' checks: their give-ups have been posted)
        for _ in range(2):
            with pytest.raises(shmem.DeviceTimeout, match="out of step") as raised:
                comm.check()
            if rank == world_size - 1:
                assert "gave up waiting for this rank" in str(raised.value), str(raised.value)
    finally:
        heap.close()


def graph_worker(rank: int, world_size: int) -> None:
    """A CUDA graph of all-reduces (both algorithms, staged and zero-copy from the heap, in place too),
    all-gather and Lamport, replayed with new data copied into the captured inputs each time: every
    replay gives that data's result."""
    heap, comm = _comm(zero_copy_bytes=0)
    dev = heap.device
    try:
        x = torch.empty(1000, device=dev)
        hx = heap.empty((1000,), torch.float32)
        hin = heap.empty((1000,), torch.float32)
        outs = [torch.empty_like(x) for _ in range(3)]
        gathered = torch.empty(world_size * 1000, device=dev)
        xb = torch.empty(1000, device=dev, dtype=torch.bfloat16)
        outb = torch.empty_like(xb)

        def calls():
            for algorithm, out in zip(("one_shot", "two_shot"), outs):
                comm.all_reduce(x, out=out, algorithm=algorithm)
            comm.all_reduce(hx, out=outs[2], algorithm="one_shot")
            comm.all_reduce(hin, out=hin, algorithm="two_shot")
            comm.all_gather(x, out=gathered)
            comm.all_reduce(xb, out=outb, algorithm="lamport")

        calls()  # compile outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            calls()
        for replay in range(10):
            xs = inputs(world_size, (1000,), torch.float32, 900 + replay, dev, True)
            for t in (x, xb, hx, hin):
                t.copy_(xs[rank])
            graph.replay()
            for out in outs + [hin]:
                assert_equal_or_close(out, ref.all_reduce_ref(xs), f"graph replay {replay}")
            assert_equal_or_close(outb, ref.all_reduce_ref([t.bfloat16() for t in xs]), f"graph lamport {replay}")
            assert_equal_or_close(gathered, ref.all_gather_ref(xs), f"graph all_gather replay {replay}")
        comm.check()
    finally:
        heap.close()
