"""Per-rank checks of ``distributed_paged_decode``, run by ``tritium.shmem.launch`` (one process per rank).
Every rank builds every rank's part of the cache (functions of a seed), so each check compares against the
single-device reference on the concatenated cache."""

import os

import pytest
import torch

import tritium.collectives as coll
import tritium.fused as fused
import tritium.shmem as shmem
from tritium import runtime
from tritium.fused import reference as ref

TOL = {torch.float32: 1e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
FP8_TOL = 2e-2  # the reference reads the same fp8 values; left: fp16 rounding of q and out
HQ, HKV, D, BLOCK = 4, 2, 64, 16
MAX_SEQS = 4
MAX_SPLITS = 3


def run_world(worker, world_size: int, *args, timeout: float = 240.0) -> None:
    backend = None
    if not runtime.interpreting() and torch.cuda.device_count() < world_size:
        # TRITIUM_SHARE_GPUS=1: a correctness run on fewer GPUs, ranks sharing them (gloo; slow waits)
        if not (os.environ.get("TRITIUM_SHARE_GPUS") == "1" and torch.cuda.device_count() > 0):
            pytest.skip(f"needs {world_size} GPUs, {torch.cuda.device_count()} visible")
        backend = "gloo"
    shmem.launch(worker, world_size, *args, backend=backend, timeout=timeout)


def _setup(world_size: int):
    """Heap and communicator for up to MAX_SEQS sequences at any split count (the default splits on a GPU:
    ``autosplits``), with room for a few default workspaces."""
    max_bytes = fused.DistributedDecodeWorkspace.message_bytes(MAX_SEQS, HQ, D, fused.distributed_decode.MAX_SPLITS)
    heap = shmem.SymmetricHeap(coll.Communicator.heap_bytes(max_bytes, world_size) + (4 << 20))
    return heap, coll.Communicator(heap, max_bytes=max_bytes)


def split_lengths(world_size: int, totals, seed: int):
    """``lens[r][s]``: unequal parts of each total, rank 0's part of sequence 1 and the last rank's part of
    sequence 0 empty (where there is more than one rank)."""
    g = torch.Generator().manual_seed(seed)
    lens = [[0] * len(totals) for _ in range(world_size)]
    for s, total in enumerate(totals):
        ranks = list(range(world_size))
        if world_size > 1 and s == 0:
            ranks.remove(world_size - 1)
        if world_size > 1 and s == 1:
            ranks.remove(0)
        cuts = sorted(torch.randint(0, total + 1, (len(ranks) - 1,), generator=g).tolist())
        for r, lo, hi in zip(ranks, [0] + cuts, cuts + [total]):
            lens[r][s] = hi - lo
    return lens


def make_parts(lens, kv_dtype, seed: int, device, scale: float = 1.0, kv_heads: int = HKV):
    """Every rank's (k_cache, v_cache, block_table, seq_lens) for part lengths ``lens[r][s]``: pages in
    shuffled order, one spare page, random keys and values (scaled down by ``scale`` for fp8 caches)."""
    g = torch.Generator().manual_seed(seed)
    parts = []
    for rank_lens in lens:
        pages = [-(-n // BLOCK) for n in rank_lens]
        num_blocks = sum(pages) + 1
        width = max(max(pages), 1)
        k = (torch.randn(num_blocks, BLOCK, kv_heads, D, generator=g) / scale).to(kv_dtype)
        v = (torch.randn(num_blocks, BLOCK, kv_heads, D, generator=g) / scale).to(kv_dtype)
        perm = torch.randperm(num_blocks, generator=g).to(torch.int32)
        table = torch.full((len(rank_lens), width), num_blocks + 5, dtype=torch.int32)  # unused ids out of range
        used = 0
        for s, n in enumerate(pages):
            table[s, :n] = perm[used:used + n]
            used += n
        parts.append((k.to(device), v.to(device), table.to(device),
                      torch.tensor(rank_lens, dtype=torch.int32, device=device)))
    return parts


def _close(out, want, tol, what):
    assert out.shape == want.shape, f"{what}: shape {tuple(out.shape)} vs {tuple(want.shape)}"
    nan = torch.isnan(out)
    assert not nan.any(), f"{what}: NaN at {nan.nonzero()[:4].tolist()}"
    o, w = out.double(), want.double()
    err = ((o - w).norm() / max(w.norm(), 1e-12)).item()
    worst = (o - w).abs().flatten().argmax().item()
    assert err <= tol, f"{what}: relative error {err:.2e} > {tol:.0e} (worst flat index {worst})"


def _check_call(rank, comm, lens, q_dtype, kv_dtype, seed, feats, mode, workspace=None, what=""):
    """One call against the reference. ``feats``: window, softcap, alibi, sinks, scale_tensor (fp8),
    splitsN (N chunks per rank; default 1), autosplits (the launcher's choice), mha / mqa (HQ or 1 KV
    heads instead of HKV); ``mode`` None: the default."""
    dev = comm.device
    scale = 4.0 if kv_dtype == torch.float8_e4m3fn else 1.0
    kv_heads = HQ if "mha" in feats else 1 if "mqa" in feats else HKV
    parts = make_parts(lens, kv_dtype, seed, dev, scale, kv_heads)
    g = torch.Generator().manual_seed(seed + 1)
    num_seqs = len(lens[0])
    q = torch.randn(num_seqs, HQ, D, generator=g).to(q_dtype).to(dev)
    kw = {"num_splits": 1}
    for f in feats:
        if f.startswith("splits"):
            kw["num_splits"] = int(f[len("splits"):])
    if "autosplits" in feats:
        kw["num_splits"] = None
    if "window" in feats:
        kw["sliding_window"] = 23
    if "softcap" in feats:
        kw["softcap"] = 2.0
    if "alibi" in feats:
        kw["alibi_slopes"] = (torch.rand(HQ, generator=g) / 4).to(dev)
    if "sinks" in feats:
        kw["sinks"] = torch.randn(HQ, generator=g).to(dev)
    scales = {}
    if kv_dtype == torch.float8_e4m3fn:
        scales = {"k_scale": scale, "v_scale": scale}
        if "scale_tensor" in feats:
            scales = {n: torch.tensor([scale], device=dev) for n in ("k_scale", "v_scale")}
    out = torch.full_like(q, float("nan"))
    k, v, bt, n = parts[rank]
    if mode is not None:
        kw["mode"] = mode
    got = fused.distributed_paged_decode(q, k, v, bt, n, comm, out=out, workspace=workspace, **kw, **scales)
    assert got is out
    kw.pop("num_splits")
    kw.pop("mode", None)
    want = ref.distributed_paged_decode(q, *zip(*parts), k_scale=scale if scales else None,
                                        v_scale=scale if scales else None, **kw)
    tol = FP8_TOL if scales else TOL[q_dtype]
    _close(got, want, tol, f"rank {rank} {what} {mode} {q_dtype} kv {kv_dtype} {sorted(feats)} lens {lens}")


def features_worker(rank: int, world_size: int, cases: tuple) -> None:
    """``cases``: (q dtype, kv dtype, features, totals) each, against the reference, in the fused and
    bulk modes (the first case also in the torch mode)."""
    heap, comm = _setup(world_size)
    try:
        for i, (q_dtype, kv_dtype, feats, totals) in enumerate(cases):
            lens = split_lengths(world_size, totals, 100 + i)
            for mode in fused.distributed_decode.MODES[:3 if i == 0 else 2]:
                _check_call(rank, comm, lens, q_dtype, kv_dtype, 200 + i, set(feats), mode, what=f"case {i}")
        comm.check()
    finally:
        heap.close()


def repeat_worker(rank: int, world_size: int, calls: int) -> None:
    """``calls`` calls, new lengths, batch sizes and data each time, the modes (and the default mode)
    interleaved, with one workspace and (every third call) without: a stale flag or a buffer reused too
    early gives a wrong result. Call 4 takes the workspace's rows as 2 sequences x 2 * MAX_SPLITS splits."""
    heap, comm = _setup(world_size)
    ws = fused.DistributedDecodeWorkspace(comm, MAX_SEQS, HQ, D, max_splits=MAX_SPLITS)
    try:
        for i in range(calls):
            totals = [17 + 13 * i, 40, 5, 33][: 1 + i % MAX_SEQS]
            totals = totals + [9] * max(0, 2 - len(totals))  # split_lengths empties sequences 0 and 1
            splits = 1 + i % MAX_SPLITS
            if i == 4:
                totals, splits = [61, 40], 2 * MAX_SPLITS  # 2 sequences x 6 splits: all 12 rows of ws
            lens = split_lengths(world_size, totals, 300 + i)
            feats = ({"sinks", "window"} if i % 2 else set()) | {f"splits{splits}"}
            _check_call(rank, comm, lens, torch.float32, torch.float32, 400 + i, feats,
                        (None, "bulk", "fused", "torch")[i % 4], workspace=None if i % 3 == 2 else ws,
                        what=f"call {i}")
        comm.check()
    finally:
        heap.close()


def mismatch_worker(rank: int, world_size: int) -> None:
    """Ranks disagreeing on num_seqs (bulk mode): every rank's check raises CollectiveMismatch, and the
    next agreeing call is exact; then inconsistent metadata on one sequence (both modes)."""
    heap, comm = _setup(world_size)
    ws = fused.DistributedDecodeWorkspace(comm, 2, HQ, D)
    try:
        k, v, bt, n = make_parts([[20, 3][: 2 - rank % 2]], torch.float16, 1, comm.device)[0]
        q = torch.randn(2 - rank % 2, HQ, D).half().to(comm.device)
        fused.distributed_paged_decode(q, k, v, bt, n, comm, workspace=ws, mode="bulk")
        with pytest.raises(coll.CollectiveMismatch, match="different number of elements"):
            comm.check()
        # equal message sizes under different layouts (2 sequences x 1 split against 1 x 2): as the default
        # splits on a GPU can give; both modes must still tell (a wrong answer otherwise)
        for mode in ("bulk", "fused"):
            out = torch.full_like(q, 5.0)
            fused.distributed_paged_decode(q, k, v, bt, n, comm, workspace=ws, mode=mode, num_splits=1 + rank % 2,
                                           out=out)
            with pytest.raises(coll.CollectiveMismatch, match="different number of elements"):
                comm.check()
            if mode == "fused":
                assert torch.isnan(out).all(), "fused: rows of another layout should give NaN"
        _check_call(rank, comm, split_lengths(world_size, [30, 9], 7), torch.float32, torch.float32, 8, set(),
                    "bulk", workspace=ws, what="after a mismatch")
        comm.check()
        # inconsistent metadata (a length past the block-table row, page ids outside the cache) stays inside
        # the tensors and leaves the other sequence exact
        k, v, bt, n = make_parts(split_lengths(world_size, [30, 9], 9), torch.float32, 9, comm.device)[rank]
        q = torch.randn(2, HQ, D, device=comm.device)
        for mode in fused.distributed_decode.MODES:
            good = fused.distributed_paged_decode(q, k, v, bt, n, comm, workspace=ws, mode=mode)
            bad_bt, bad_n = bt.clone(), n.clone()
            bad_bt[0], bad_n[0] = -7, 1 << 20
            bad = fused.distributed_paged_decode(q, k, v, bad_bt, bad_n, comm, workspace=ws, mode=mode)
            assert torch.equal(bad[1], good[1]), f"{mode}: sequence 1 changed by sequence 0's bad metadata"
            assert torch.isnan(bad[0]).all(), f"{mode}: sequence 0's bad metadata should give NaN"
            # page ids far outside the cache under a valid length: no tile reads them (a read would fault)
            bad_bt = bt.clone()
            bad_bt[0] = 1 << 28
            bad = fused.distributed_paged_decode(q, k, v, bad_bt, n, comm, workspace=ws, mode=mode)
            assert torch.equal(bad[1], good[1]), f"{mode}: sequence 1 changed by sequence 0's bad page ids"
            assert torch.isnan(bad[0]).all(), f"{mode}: sequence 0's bad page ids should give NaN"
        comm.check()
    finally:
        heap.close()


def missing_rank_worker(rank: int, world_size: int) -> None:
    """The last rank never calls (fused mode): the others' waits give up, and their check raises
    DeviceTimeout."""
    heap, comm = _setup(world_size)
    heap.max_spins = 512  # give up sooner than the default (a test of the error, not of patience)
    ws = fused.DistributedDecodeWorkspace(comm, 1, HQ, D)  # collective: every rank makes it
    try:
        if rank != world_size - 1:
            k, v, bt, n = make_parts([[20]], torch.float32, 1, comm.device)[0]
            q = torch.randn(1, HQ, D, device=comm.device)
            fused.distributed_paged_decode(q, k, v, bt, n, comm, workspace=ws, mode="fused")
            with pytest.raises(shmem.DeviceTimeout, match="gave up"):
                comm.check()
    finally:
        heap.close()


def mode_mismatch_worker(rank: int, world_size: int, feats: tuple) -> None:
    """Rank r calls in mode "fused" if r is even, else "bulk" (``feats``: see _check_call): every rank's check
    raises CollectiveMismatch, not a timeout (the merge's waits and the bulk all-gather's give up and find the
    peer in the other mode's call), and keeps raising (the counters are out of step: a new communicator)."""
    heap, comm = _setup(world_size)
    heap.max_spins = 2048 if runtime.interpreting() else 1 << 23  # (a cross-protocol mismatch: a wait gives up)
    ws = fused.DistributedDecodeWorkspace(comm, 2, HQ, D)
    try:
        lens = split_lengths(world_size, [30, 9], 5)
        for mode in ("fused", "bulk"):  # agreeing calls first (kernels compiled, the workspace used in each mode)
            _check_call(rank, comm, lens, torch.float32, torch.float32, 6, set(feats), mode, workspace=ws)
        comm.check()
        k, v, bt, n = make_parts(lens, torch.float32, 7, comm.device)[rank]
        q = torch.randn(2, HQ, D, device=comm.device)
        kw = {"sliding_window": 23} if "window" in feats else {}
        fused.distributed_paged_decode(q, k, v, bt, n, comm, workspace=ws, mode=("fused", "bulk")[rank % 2],
                                       num_splits=1, **kw)
        with pytest.raises(coll.CollectiveMismatch, match="different number of elements") as raised:
            comm.check()
        assert "out of step" in str(raised.value), f"rank {rank}: {raised.value}"
        with pytest.raises(coll.CollectiveMismatch, match="out of step"):
            comm.check()
    finally:
        heap.close()


def bad_input_worker(rank: int, world_size: int) -> None:
    heap, comm = _setup(world_size)
    dev = comm.device
    k, v, bt, n = make_parts([[20, 3]], torch.float16, 1, dev)[0]
    q = torch.randn(2, HQ, D).half().to(dev)
    ws = fused.DistributedDecodeWorkspace(comm, 1, HQ, D)
    call = fused.distributed_paged_decode
    cases = [
        (lambda: call(q, k, v, bt, n, comm, mode="ring"), ValueError, "mode must be one of"),
        (lambda: call(q, k, v, bt, n, "comm"), TypeError, "comm must be a tritium.collectives.Communicator"),
        (lambda: call(q.float(), k, v, bt, n, comm), TypeError, "k_cache dtype torch.float16 must match q"),
        (lambda: call(q, k, v, bt, n.long(), comm), TypeError, "seq_lens must have dtype int32"),
        (lambda: call(q[0], k, v, bt, n, comm), ValueError, "q must have 3 dimensions"),
        (lambda: call(q[:, :3], k, v, bt, n, comm), ValueError, r"num_q_heads \(3"),
        (lambda: call(q[:1], k, v, bt, n, comm), ValueError, "q has 1 sequences, seq_lens 2"),
        (lambda: call(q, k, v[..., :32], bt, n, comm), ValueError, "v_cache shape"),
        (lambda: call(q, k, v, bt, n, comm, sliding_window=0), ValueError, "sliding_window must be"),
        (lambda: call(q, k, v, bt, n, comm, softmax_scale=-1.0), ValueError, "softmax_scale must be"),
        (lambda: call(q, k, v, bt, n, comm, sinks=torch.zeros(3, device=dev)), ValueError, "sinks must have"),
        (lambda: call(q, k, v, bt, n, comm, k_scale=2.0, v_scale=2.0), ValueError, "float8 caches only"),
        (lambda: call(q, k, v, bt, n, comm, out=torch.empty(2, HQ, D, device=dev)), TypeError, "out must have"),
        (lambda: call(q, k, v, bt, n, comm, workspace=ws), ValueError, "workspace is for 1 sequences"),
        (lambda: call(q, k, v, bt, n, comm, num_splits=0), ValueError, "num_splits must be"),
    ]
    if dev.type == "cuda":
        cases.append((lambda: call(q.cpu(), k, v, bt, n, comm), ValueError, "q is on cpu"))
    try:
        for fn, error, message in cases:
            with pytest.raises(error, match=message):
                fn()
        comm.check()
    finally:
        heap.close()
