"""Per-rank checks of the fused GEMM + communication ops, run by ``tritium.shmem.launch`` (one process per
rank). Every rank can build every rank's operands (functions of the rank and a seed), so each check
compares against the fp32 reference over all ranks' operands."""

import os

import pytest
import torch
import torch.distributed as dist

import tritium.collectives as coll
import tritium.fused as fused
import tritium.shmem as shmem
from tritium import runtime
from tritium.fused import reference as ref

MODES = ("bulk", "producer_consumer", "fused", "auto")
# polls before a wait gives up in the tests of calls that differ on another protocol (on GPUs the waits must
# outlast a peer's compilation of a new variant, and a turn where ranks share a GPU: 2**20 polls did not)
GIVE_UP_SPINS = 2048 if runtime.interpreting() else 1 << 23
TOL = {torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def run_world(worker, world_size: int, *args, timeout: float = 300.0) -> None:
    backend = None
    if not runtime.interpreting() and torch.cuda.device_count() < world_size:
        # TRITIUM_SHARE_GPUS=1: a correctness run on fewer GPUs, ranks sharing them (gloo; slow waits)
        if not (os.environ.get("TRITIUM_SHARE_GPUS") == "1" and torch.cuda.device_count() > 0):
            pytest.skip(f"needs {world_size} GPUs, {torch.cuda.device_count()} visible")
        backend = "gloo"
    shmem.launch(worker, world_size, *args, backend=backend, timeout=timeout)


def _setup(world_size: int, M: int, N: int, K: int, dtype):
    max_bytes = 1 << 20
    heap = shmem.SymmetricHeap(coll.Communicator.heap_bytes(max_bytes, world_size)
                               + fused.heap_bytes(M, N, K, world_size, dtype) + (1 << 20))
    return heap, coll.Communicator(heap, max_bytes=max_bytes)


def _operands(world_size, rows, k, n, dtype, seed, device):
    """Every rank's (a, b): a [rows, k], b [k, n], small random values."""
    out = []
    for r in range(world_size):
        g = torch.Generator().manual_seed(seed * 131 + r)
        a = (torch.randn(rows, k, generator=g) / 4).to(dtype).to(device)
        b = (torch.randn(k, n, generator=g) / 4).to(dtype).to(device)
        out.append((a, b))
    return out


def _close(out, want, what):
    assert out.shape == want.shape, f"{what}: shape {tuple(out.shape)} vs {tuple(want.shape)}"
    assert not torch.isnan(out).any(), f"{what}: NaN"
    o, w = out.double(), want.double()
    err = ((o - w).norm() / max(w.norm(), 1e-12)).item()
    assert err <= TOL[out.dtype], f"{what}: relative error {err:.2e} > {TOL[out.dtype]:.0e}"


def ops_worker(rank: int, world_size: int, dtypes: tuple, rows_list: tuple, K: int, N: int) -> None:
    """Every op and overlap mode at each per-rank row count, against the references; out given and not."""
    dev = runtime.default_device() if runtime.interpreting() else torch.device("cuda", rank)
    heap, comm = _setup(world_size, world_size * max(rows_list), N, K, max(dtypes, key=lambda d: d.itemsize))
    seed = 0
    try:
        for dtype in dtypes:
            for m in rows_list:
                seed += 1
                ops = _operands(world_size, m, K, N, dtype, seed, heap.device)
                a, b = ops[rank]
                for mode in MODES:
                    want = ref.all_gather_matmul([o[0] for o in ops], b)
                    out = torch.full((world_size * m, N), 7.0, dtype=dtype, device=heap.device)
                    got = fused.all_gather_matmul(a, b, comm, overlap=mode, out=out)
                    assert got is out
                    _close(got, want, f"all_gather_matmul {mode} {dtype} m={m}")
                    y, gathered = fused.all_gather_matmul(a, b, comm, overlap=mode, return_gathered=True)
                    assert torch.equal(gathered, torch.cat([o[0] for o in ops])), f"gathered {mode}"
                    _close(y, want, f"all_gather_matmul {mode} {dtype} m={m} (new out)")
                # row-parallel: a [M, k], b [k, N] per rank, M = W * m
                rp = _operands(world_size, world_size * m, K, N, dtype, seed + 500, heap.device)
                a2, b2 = rp[rank]
                for mode in MODES:
                    out = torch.full((m, N), 7.0, dtype=dtype, device=heap.device)
                    got = fused.matmul_reduce_scatter(a2, b2, comm, overlap=mode, out=out)
                    assert got is out
                    _close(got, ref.matmul_reduce_scatter([o[0] for o in rp], [o[1] for o in rp], rank, dtype),
                           f"matmul_reduce_scatter {mode} {dtype} m={m}")
                    out = torch.full((world_size * m, N), 7.0, dtype=dtype, device=heap.device)
                    got = fused.matmul_all_reduce(a2, b2, comm, overlap=mode, out=out)
                    want = ref.matmul_all_reduce([o[0] for o in rp], [o[1] for o in rp], dtype)
                    _close(got, want, f"matmul_all_reduce {mode} {dtype} m={m}")
                    # every rank holds the same bits
                    copies = [torch.empty_like(got) for _ in range(world_size)]
                    dist.all_gather(copies, got.contiguous())
                    assert all(torch.equal(copies[0], c) for c in copies), f"matmul_all_reduce {mode}: ranks differ"
        comm.check()
    finally:
        heap.close()


def repeat_worker(rank: int, world_size: int, calls: int) -> None:
    """``calls`` calls in a row, new data each time and the modes and ops interleaved: a stale flag or a
    buffer reused too early would give a wrong result."""
    m, K, N = 17, 48, 80
    dtype = torch.float32
    heap, comm = _setup(world_size, world_size * m, N, K, dtype)
    outs, wants = [], []
    try:
        for i in range(calls):
            ops = _operands(world_size, m if i % 3 == 0 else world_size * m, K, N, dtype, 900 + i, heap.device)
            a, b = ops[rank]
            mode = ("producer_consumer", "fused")[i % 2]
            if i % 3 == 0:
                outs.append(fused.all_gather_matmul(a, b, comm, overlap=mode))
                wants.append(ref.all_gather_matmul([o[0] for o in ops], b))
            elif i % 3 == 1:
                outs.append(fused.matmul_reduce_scatter(a, b, comm, overlap=mode))
                wants.append(ref.matmul_reduce_scatter([o[0] for o in ops], [o[1] for o in ops], rank))
            else:
                outs.append(fused.matmul_all_reduce(a, b, comm, overlap=mode))
                wants.append(ref.matmul_all_reduce([o[0] for o in ops], [o[1] for o in ops]))
        for i, (out, want) in enumerate(zip(outs, wants)):
            _close(out, want, f"call {i}")
        comm.check()
    finally:
        heap.close()


def decode_worker(rank: int, world_size: int, shapes: tuple, calls: int) -> None:
    """matmul_all_reduce's one-launch decode kernel (16-bit, M <= 64): N-major b and K-major b (a weight's
    transpose), GEMV and tensor-core rows, K cut in pieces; each call interleaved with the communicator's
    other Lamport users (all_reduce "lamport", all_reduce_rms_norm), new data every call, outputs poisoned
    with NaN first, every rank the same bits; on GPUs the calls replayed from a CUDA graph as well."""
    from tritium.fused.matmul_all_reduce import DecodeMatmulConfig, decode_eligible, launch_decode

    dtype = torch.float16
    heap, comm = _setup(world_size, 64, 96, 1024, dtype)
    dev = heap.device
    try:
        for i in range(calls):
            M, K, N, kmajor, split = shapes[i % len(shapes)]
            ops = _operands(world_size, M, K, N, dtype, 700 + i, dev)
            if kmajor:  # b = w.T for a row-major weight w [N, K]
                ops = [(a, b.t().contiguous().t()) for a, b in ops]
            a, b = ops[rank]
            assert decode_eligible(a, N, comm)
            want = ref.matmul_all_reduce([o[0] for o in ops], [o[1] for o in ops], dtype)
            out = torch.full((M, N), float("nan"), dtype=dtype, device=dev)
            if split:
                block_n, block_k = (16, 16) if M <= 4 else (32, 16)
                launch_decode(a, b, out, comm, DecodeMatmulConfig(block_n, block_k, 4, 2, split=split))
            else:
                assert fused.matmul_all_reduce(a, b, comm, overlap="fused", out=out) is out
            _close(out, want, f"call {i}: M={M} K={K} N={N} kmajor={kmajor} split={split}")
            copies = [torch.empty_like(out) for _ in range(world_size)]
            dist.all_gather(copies, out)
            assert all(torch.equal(copies[0], c) for c in copies), f"call {i}: ranks differ"
            # with the residual + RMSNorm epilogue (gated: a is [gate | up], GEMV rows only)
            gated = M <= 4 and i % 3 != 0
            xs = [torch.cat([o[0], o[0].flip(1)], dim=1) if gated else o[0] for o in ops]
            residual = (torch.randn(M, N, generator=torch.Generator().manual_seed(i)) / 2).to(dtype).to(dev)
            norm = (1 + torch.randn(N, generator=torch.Generator().manual_seed(i + 1)) / 4).to(dtype).to(dev)
            want_out, want_h = ref.matmul_all_reduce_rms_norm(xs, [o[1] for o in ops], residual, norm, 1e-5, gated)
            out.fill_(float("nan"))
            got = fused.matmul_all_reduce_rms_norm(xs[rank], b, comm, residual, norm, 1e-5, out, gated=gated)
            assert got is out
            _close(residual, want_h, f"call {i}: residual, gated={gated}")
            _close(out, want_out, f"call {i}: rms_norm out, gated={gated}")
            # the communicator's other Lamport users in between (same buffers, same call counter)
            x = torch.full((3 + i, 40), float(rank + 1), dtype=dtype, device=dev)
            assert torch.equal(comm.all_reduce(x, algorithm="lamport"), torch.full_like(x, sum(range(1, world_size + 1))))
            if i % 3 == 0:
                res = torch.zeros(2, 64, dtype=dtype, device=dev)
                comm.all_reduce_rms_norm(torch.ones(2, 64, dtype=dtype, device=dev), res, torch.ones(64, dtype=dtype,
                                         device=dev), 1e-5)
                assert torch.equal(res, torch.full_like(res, world_size))
        if dev.type == "cuda":  # captured once, replayed on new data copied into the captured inputs
            M, K, N = 8, 256, 128
            a = torch.empty(M, K, dtype=dtype, device=dev)
            w = torch.empty(N, K, dtype=dtype, device=dev)
            out = torch.empty(M, N, dtype=dtype, device=dev)
            fused.matmul_all_reduce(a, w.t(), comm, overlap="fused", out=out)  # compile outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fused.matmul_all_reduce(a, w.t(), comm, overlap="fused", out=out)
            for replay in range(5):
                ops = _operands(world_size, M, K, N, dtype, 800 + replay, dev)
                a.copy_(ops[rank][0])
                w.copy_(ops[rank][1].t())
                out.fill_(float("nan"))
                graph.replay()
                _close(out, ref.matmul_all_reduce([o[0] for o in ops], [o[1] for o in ops], dtype), f"replay {replay}")
        comm.check()
    finally:
        heap.close()


def bad_input_worker(rank: int, world_size: int) -> None:
    heap, comm = _setup(world_size, 64, 64, 64, torch.float32)
    dev = heap.device
    a = torch.ones(4, 16, device=dev)
    b = torch.ones(16, 32, device=dev)
    cases = [
        (lambda: fused.all_gather_matmul(a, torch.ones(8, 32, device=dev), comm), ValueError, "shapes do not chain"),
        (lambda: fused.all_gather_matmul(a, b.half(), comm), TypeError, "b has dtype torch.float16"),
        (lambda: fused.all_gather_matmul(a[0], b, comm), ValueError, "a must be 2-D"),
        (lambda: fused.all_gather_matmul(a, b, comm, overlap="ring"), ValueError, "overlap must be one of"),
        (lambda: fused.all_gather_matmul(a, b, "comm"), TypeError, "comm must be a tritium.collectives.Communicator"),
        (lambda: fused.all_gather_matmul(a.long(), b.long(), comm), TypeError, "a has dtype torch.int64"),
        (lambda: fused.all_gather_matmul(a, b, comm, out=torch.empty(3, 32, device=dev)), ValueError, "out must be"),
        (lambda: fused.matmul_all_reduce(a, b, comm, out=torch.empty(4, 31, device=dev)), ValueError, "out must be"),
        # out rows that overlap (a broadcast row, a row stride under the width): refused in every op and mode
        (lambda: fused.all_gather_matmul(a, b, comm, out=torch.empty(1, 32, device=dev).expand(2 * 4, 32)),
         ValueError, r"out's rows overlap: row stride 0 < width 32"),
        (lambda: fused.all_gather_matmul(a, b, comm, overlap="fused", out=torch.empty(64, device=dev).as_strided(
            (8, 32), (4, 1))), ValueError, r"out's rows overlap: row stride 4 < width 32"),
        (lambda: fused.matmul_all_reduce(a, b, comm, overlap="producer_consumer", out=torch.empty(
            64, device=dev).as_strided((4, 32), (8, 1))), ValueError, r"out's rows overlap.*row stride of at least 32"),
        (lambda: fused.matmul_reduce_scatter(a, b, comm, out=torch.empty(64, device=dev).as_strided((2, 32), (16, 1))),
         ValueError, r"out's rows overlap: row stride 16 < width 32"),
        (lambda: fused.matmul_all_reduce_rms_norm(a.half(), b.half(), comm, torch.zeros(4, 32, device=dev).half(),
                                                  torch.ones(32, device=dev).half(), 1e-5,
                                                  out=torch.empty(1, 32, device=dev).half().expand(4, 32)),
         ValueError, r"out's rows overlap"),
        # gated: the error shows a as the caller passed it ([gate | up]), not its half
        (lambda: fused.matmul_all_reduce_rms_norm(torch.ones(4, 32, device=dev).half(), torch.ones(8, 32, device=dev)
                                                  .half(), comm, torch.zeros(4, 32, device=dev).half(),
                                                  torch.ones(32, device=dev).half(), 1e-5, gated=True),
         ValueError, r"a is \[4, 32\] \(gated: \[gate \| up\], k = 16\), b is \[8, 32\] \(b must be \[16, N\]\)"),
        (lambda: fused.matmul_all_reduce_rms_norm(torch.ones(4, 33, device=dev).half(), b.half(), comm,
                                                  torch.zeros(4, 32, device=dev).half(), torch.ones(32, device=dev)
                                                  .half(), 1e-5, gated=True),
         ValueError, r"gated: a must be \[M, 2k\] \(gate then up\), got \[4, 33\]"),
    ]
    if world_size > 1:
        cases.append((lambda: fused.matmul_reduce_scatter(torch.ones(world_size * 2 + 1, 16, device=dev), b, comm),
                      ValueError, "must divide by world_size"))
    if dev.type == "cuda":
        cases.append((lambda: fused.matmul_all_reduce(a.cpu(), b.cpu(), comm), ValueError, "a is on cpu"))
    try:
        for fn, error, message in cases:
            with pytest.raises(error, match=message):
                fn()
        comm.check()
        if world_size > 1:  # ranks whose first call asks for workspaces of different sizes: named as such
            with pytest.raises(RuntimeError, match="the ranks disagree on the workspace"):
                fused.all_gather_matmul(torch.ones(2 + rank, 16, device=dev), b, comm, overlap="fused")
    finally:
        heap.close()


def _padded(rows: int, cols: int, dtype, dev):
    """(wide, out): out ``[rows, cols]`` is a column slice of ``wide`` (row stride cols + 3), all 7.0."""
    wide = torch.full((rows, cols + 3), 7.0, dtype=dtype, device=dev)
    return wide, wide[:, :cols]


def out_layout_worker(rank: int, world_size: int) -> None:
    """Every op in every mode: an out with padded rows (a column slice of a wider tensor) is written right and
    its padding left alone; b with no columns (n = 0) still gathers, return_gathered gives the rows, and a
    rank with n = 0 among ranks with columns takes part in the gather."""
    m, K, N = 5, 32, 24
    dtype = torch.float32
    heap, comm = _setup(world_size, world_size * m, N, K, dtype)
    dev = heap.device
    try:
        ops = _operands(world_size, m, K, N, dtype, 41, dev)
        a, b = ops[rank]
        rp = _operands(world_size, world_size * m, K, N, dtype, 42, dev)
        a2, b2 = rp[rank]
        rows_all = torch.cat([o[0] for o in ops])
        for mode in MODES:
            wide, out = _padded(world_size * m, N, dtype, dev)
            assert fused.all_gather_matmul(a, b, comm, overlap=mode, out=out) is out
            _close(out, ref.all_gather_matmul([o[0] for o in ops], b), f"all_gather_matmul {mode}: padded out")
            assert torch.all(wide[:, N:] == 7.0), f"all_gather_matmul {mode}: the padding was written"
            wide, out = _padded(m, N, dtype, dev)
            assert fused.matmul_reduce_scatter(a2, b2, comm, overlap=mode, out=out) is out
            _close(out, ref.matmul_reduce_scatter([o[0] for o in rp], [o[1] for o in rp], rank, dtype),
                   f"matmul_reduce_scatter {mode}: padded out")
            assert torch.all(wide[:, N:] == 7.0), f"matmul_reduce_scatter {mode}: the padding was written"
            wide, out = _padded(world_size * m, N, dtype, dev)
            assert fused.matmul_all_reduce(a2, b2, comm, overlap=mode, out=out) is out
            _close(out, ref.matmul_all_reduce([o[0] for o in rp], [o[1] for o in rp], dtype),
                   f"matmul_all_reduce {mode}: padded out")
            assert torch.all(wide[:, N:] == 7.0), f"matmul_all_reduce {mode}: the padding was written"
            # b with no columns: nothing to compute, the rows are still gathered (and returned)
            none = b[:, :0]
            y, gathered = fused.all_gather_matmul(a, none, comm, overlap=mode, return_gathered=True)
            assert y.shape == (world_size * m, 0)
            assert torch.equal(gathered, rows_all), f"all_gather_matmul {mode}, n = 0: gathered rows"
            # n = 0 on rank 0 only (each rank multiplies by its own columns): every rank right, none waits
            mine = none if rank == 0 else b
            y, gathered = fused.all_gather_matmul(a, mine, comm, overlap=mode, return_gathered=True)
            _close(y, ref.all_gather_matmul([o[0] for o in ops], mine), f"all_gather_matmul {mode}, n = 0 on rank 0")
            assert torch.equal(gathered, rows_all), f"all_gather_matmul {mode}, n = 0 on rank 0: gathered rows"
        # the residual + RMSNorm epilogue: the one-launch decode kernel and the GEMM + collective path
        for rows, gated in ((2, False), (8, True)):
            xs = [(torch.randn(rows, 2 * K if gated else K, generator=torch.Generator().manual_seed(60 + r)) / 4)
                  .half().to(dev) for r in range(world_size)]
            bs = [o[1].half() for o in _operands(world_size, 1, K, N, torch.float16, 61, dev)]
            residual = (torch.randn(rows, N, generator=torch.Generator().manual_seed(62)) / 2).half().to(dev)
            norm = (1 + torch.randn(N, generator=torch.Generator().manual_seed(63)) / 4).half().to(dev)
            want_out, want_h = ref.matmul_all_reduce_rms_norm(xs, bs, residual, norm, 1e-5, gated)
            wide, out = _padded(rows, N, torch.float16, dev)
            got = fused.matmul_all_reduce_rms_norm(xs[rank], bs[rank], comm, residual, norm, 1e-5, out, gated=gated)
            assert got is out
            _close(residual, want_h, f"rms_norm epilogue, {rows} rows: residual")
            _close(out, want_out, f"rms_norm epilogue, {rows} rows: padded out")
            assert torch.all(wide[:, N:] == 7.0), f"rms_norm epilogue, {rows} rows: the padding was written"
        comm.check()
    finally:
        heap.close()


def mismatch_worker(rank: int, world_size: int) -> None:
    """Ranks that call the fused and producer_consumer modes with different shapes or dtypes: every rank's
    check raises CollectiveMismatch (no timeout, no hang), and the next agreeing call is right."""
    m, K, N = 6, 32, 40
    dtype = torch.float32
    big_m, big_n = m + world_size, N + world_size
    heap, comm = _setup(world_size, world_size * big_m, big_n, K, dtype)
    dev = heap.device
    modes = ("fused", "producer_consumer")
    try:
        # every workspace at its largest first: growing one is collective (a rank alone gets a RuntimeError)
        for mode in modes:
            a, b = _operands(world_size, big_m, K, big_n, dtype, 1, dev)[rank]
            fused.all_gather_matmul(a, b, comm, overlap=mode)
            a, b = _operands(world_size, world_size * big_m, K, big_n, dtype, 2, dev)[rank]
            fused.matmul_reduce_scatter(a, b, comm, overlap=mode)
            fused.matmul_all_reduce(a, b, comm, overlap=mode)
        comm.check()
        last = rank == world_size - 1
        seed = 10
        for mode in modes:
            cases = {  # (the disagreeing call, the agreeing call after it: (result, reference))
                "all_gather_matmul, m": lambda ops: fused.all_gather_matmul(ops[rank][0][: m - rank % 2], ops[rank][1],
                                                                            comm, overlap=mode),
                "all_gather_matmul, dtype": lambda ops: fused.all_gather_matmul(
                    ops[rank][0].half() if last else ops[rank][0], ops[rank][1].half() if last else ops[rank][1],
                    comm, overlap=mode),
                "matmul_reduce_scatter, M": lambda ops: fused.matmul_reduce_scatter(
                    ops[rank][0][: world_size * (m - rank % 2)], ops[rank][1], comm, overlap=mode),
                "matmul_all_reduce, N": lambda ops: fused.matmul_all_reduce(
                    ops[rank][0], ops[rank][1][:, : N - rank % 2], comm, overlap=mode),
            }
            for what, call in cases.items():
                seed += 1
                rows = m if what.startswith("all_gather") else world_size * m
                ops = _operands(world_size, rows, K, N, dtype, seed, dev)
                call(ops)
                if world_size > 1:
                    with pytest.raises(coll.CollectiveMismatch, match="different number of elements"):
                        comm.check()
                a, b = ops[rank]
                if what.startswith("all_gather"):
                    got, want = (fused.all_gather_matmul(a, b, comm, overlap=mode),
                                 ref.all_gather_matmul([o[0] for o in ops], b))
                elif what.startswith("matmul_reduce_scatter"):
                    got, want = (fused.matmul_reduce_scatter(a, b, comm, overlap=mode),
                                 ref.matmul_reduce_scatter([o[0] for o in ops], [o[1] for o in ops], rank))
                else:
                    got, want = (fused.matmul_all_reduce(a, b, comm, overlap=mode),
                                 ref.matmul_all_reduce([o[0] for o in ops], [o[1] for o in ops]))
                _close(got, want, f"{mode}: the call after a mismatch ({what})")
                comm.check()
    finally:
        heap.close()


def _call(op: str, mode: str, a, b, comm):
    return getattr(fused, op)(a, b, comm, overlap=mode)


def _reference(op: str, ops, rank: int, dtype):
    if op == "all_gather_matmul":
        return ref.all_gather_matmul([o[0] for o in ops], ops[rank][1])
    if op == "matmul_reduce_scatter":
        return ref.matmul_reduce_scatter([o[0] for o in ops], [o[1] for o in ops], rank, dtype)
    return ref.matmul_all_reduce([o[0] for o in ops], [o[1] for o in ops], dtype)


def zero_rows_worker(rank: int, world_size: int, dtype) -> None:
    """The last rank calls each op with no rows (M = 0) in one overlap mode, the others with rows: every rank's
    check raises CollectiveMismatch (the rank without rows takes part instead of returning), and the next
    agreeing call is right; in fp16, matmul_all_reduce's bulk and fused modes meet the peers' Lamport calls on
    another protocol (the counters are then out of step: a new communicator)."""
    m, K, N = 4, 32, 24
    last = rank == world_size - 1
    for op in ("all_gather_matmul", "matmul_reduce_scatter", "matmul_all_reduce"):
        heap, comm = _setup(world_size, world_size * m, N, K, dtype)
        heap.max_spins = GIVE_UP_SPINS  # (a cross-protocol mismatch is found by a wait that gives up)
        try:
            rows = m if op == "all_gather_matmul" else world_size * m
            for i, mode in enumerate(("bulk", "producer_consumer", "fused")):
                ops = _operands(world_size, rows, K, N, dtype, 90 + i, dev := heap.device)
                a, b = ops[rank]
                _call(op, mode, a, b, comm)  # (every workspace at its size first)
                _close(_call(op, mode, a, b, comm), _reference(op, ops, rank, dtype), f"{op} {mode}")
                comm.check()
                _call(op, mode, a[:0] if last else a, b, comm)
                # fp16 matmul_all_reduce: the peers' Lamport calls (bulk: the all-reduce; fused: the decode kernel)
                # meet a rank without rows on another protocol (an empty all-reduce, the reduce-scatter kernels)
                cross = dtype == torch.float16 and op == "matmul_all_reduce" and mode != "producer_consumer"
                with pytest.raises(coll.CollectiveMismatch, match="different number of elements") as raised:
                    comm.check()
                assert ("out of step" in str(raised.value)) == cross, f"{op} {mode}: {raised.value}"
                if cross:  # (the counters are out of step: a new communicator)
                    heap.close()
                    heap, comm = _setup(world_size, world_size * m, N, K, dtype)
                    heap.max_spins = GIVE_UP_SPINS
                    continue
                _close(_call(op, mode, a, b, comm), _reference(op, ops, rank, dtype), f"{op} {mode}: the call after")
                comm.check()
        finally:
            heap.close()


def mode_mismatch_worker(rank: int, world_size: int, op: str, modes: tuple, dtype, m: int) -> None:
    """Rank r calls ``op`` in overlap mode ``modes[r % len(modes)]``: every rank's check raises
    CollectiveMismatch, and keeps raising when the modes' protocols differ (bounded: a wait that gives up
    finds the peer in the other mode's call; the counters are out of step: make a new communicator); where
    both are Lamport calls (their headers differ), the next agreeing call is right."""
    K, N = 32, 24
    heap, comm = _setup(world_size, world_size * m, N, K, dtype)
    heap.max_spins = GIVE_UP_SPINS
    try:
        rows = m if op == "all_gather_matmul" else world_size * m
        a, b = _operands(world_size, rows, K, N, dtype, 7, heap.device)[rank]
        mine = modes[rank % len(modes)]
        for mode in sorted(set(modes)):  # every workspace made (collective) before the calls that differ
            _call(op, mode, a, b, comm)
        comm.check()
        _call(op, mine, a, b, comm)
        with pytest.raises(coll.CollectiveMismatch, match="different number of elements") as raised:
            comm.check()
        if "out of step" in str(raised.value):  # modes of different protocols: every later check raises too
            with pytest.raises(coll.CollectiveMismatch, match="out of step"):
                comm.check()
        else:  # one protocol (the decode kernel and the Lamport all-reduce): the next agreeing call is right
            ops = _operands(world_size, rows, K, N, dtype, 8, heap.device)
            _close(_call(op, modes[0], *ops[rank], comm), _reference(op, ops, rank, dtype), "the call after")
            comm.check()
    finally:
        heap.close()


def decode_size_mismatch_worker(rank: int, world_size: int) -> None:
    """matmul_all_reduce's decode kernel (one Lamport launch) called with other sizes on the last rank (N,
    M, K pieces): every rank's check raises CollectiveMismatch from the Lamport headers (no timeout), nothing
    is written, and the next agreeing calls are right in each of the three Lamport buffers."""
    from tritium.fused.matmul_all_reduce import DecodeMatmulConfig, launch_decode

    dtype, M, K, N = torch.float16, 3, 48, 40
    heap, comm = _setup(world_size, 64, 96, 1024, dtype)
    if runtime.interpreting():  # a mismatch must not wait this long on any rank (GPUs shared by ranks take turns)
        heap.max_spins = 1 << 14
    dev = heap.device
    last = rank == world_size - 1
    try:
        ops = _operands(world_size, M, K, N, dtype, 5, dev)
        a, b = ops[rank]
        cases = {"N": lambda out: fused.matmul_all_reduce(a, b[:, : N - 8] if last else b, comm, overlap="fused",
                                                          out=out[:, : N - 8] if last else out),
                 "M": lambda out: fused.matmul_all_reduce(a[:1] if last else a, b, comm, overlap="fused",
                                                          out=out[:1] if last else out),
                 "K pieces": lambda out: launch_decode(a, b, out, comm, DecodeMatmulConfig(16, 16, 4, 2,
                                                                                           split=3 if last else 1))}
        for what, call in cases.items():
            out = torch.full((M, N), 7.0, dtype=dtype, device=dev)
            call(out)
            with pytest.raises(coll.CollectiveMismatch, match="different number of elements") as raised:
                comm.check()
            assert "out of step" not in str(raised.value), f"{what}: a wait gave up ({raised.value})"
            assert torch.all(out == 7.0), f"{what}: rank {rank} wrote out"
            for i in range(3):
                agree = _operands(world_size, M, K, N, dtype, 20 + i, dev)
                got = fused.matmul_all_reduce(agree[rank][0], agree[rank][1], comm, overlap="fused")
                _close(got, _reference("matmul_all_reduce", agree, rank, dtype), f"{what}: call {i} after")
            comm.check()
    finally:
        heap.close()
