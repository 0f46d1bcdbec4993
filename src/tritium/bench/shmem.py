"""Symmetric-memory benchmark: ``python -m tritium.bench shmem [--world-size N] [--mib 256]``.

Measured in one run, on ``world_size`` GPUs (one process each, ``tritium.shmem.launch``):

- remote load / remote store per ordered pair (i, j): a Triton kernel on rank i pulls (``get``) from or
  pushes (``put``) to rank j through translated pointers, best of a small (BLOCK, warps) sweep; the
  baseline is the copy engine (``cudaMemcpyAsync`` over the IPC mapping, i.e. cudaMemcpyPeer);
- all-to-all store: every rank stores a chunk into every rank at once, vs NCCL all_to_all_single;
- all-gather from ``put`` + device barrier, bus bandwidth, vs NCCL all_gather_into_tensor (and NCCL
  all-reduce of the same size for scale);
- remote atomic latency: a chain of dependent acq_rel/sys ``atomic_add`` on a peer (and on this rank);
- device barrier latency, replayed from a CUDA graph and launched eagerly, vs a 1-element NCCL
  all-reduce.

Timing (several ranks): fixed iteration counts, a host barrier before, CUDA events, synchronize
after, and the maximum over ranks (triton.testing.do_bench picks its repeat count per process and
ranks would then hang in different collectives). Bandwidth in GB/s = bytes / ms / 1e6.
Without a GPU, ``TRITON_INTERPRET=1 python -m tritium.bench shmem`` runs the same code on tiny sizes
under the Triton interpreter (a smoke test; the figures mean nothing).
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import torch
import torch.distributed as dist
import triton
import triton.language as tl

import tritium.shmem as shmem
from tritium import runtime
from tritium.bench.args import UsageError, integer, positive
from tritium.bench.common import header, print_table

# (BLOCK elements of fp32, num_warps) tried for the remote load/store kernels; the best is reported.
SWEEP = [(2048, 4), (4096, 4), (8192, 4), (8192, 8), (16384, 8), (16384, 16), (32768, 16)]
TARGETS = {"remote load": ">= 340", "remote store": ">= 340", "all-gather (put)": ">= NCCL",
           "device barrier (graph)": "<= 5 us"}


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=integer(1), default=None,
                        help="ranks (default: all visible GPUs, 2 on CPU)")
    parser.add_argument("--mib", type=integer(1), default=256, help="buffer size in MiB for the bandwidth rows")
    parser.add_argument("--iters", type=integer(1), default=20, help="timed iterations per bandwidth measurement")
    parser.add_argument("--timeout", type=positive, default=480.0, help="seconds for the whole run")


# ---- kernels ---------------------------------------------------------------------------------------

@triton.jit
def _pair_kernel(src, dst, rank, peer, bases, n, BLOCK: tl.constexpr, PULL: tl.constexpr):
    """PULL: local ``dst`` <- ``src`` of ``peer`` (remote load); else ``dst`` of ``peer`` <- local ``src``."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
    mask = offs < n
    if PULL:
        shmem.get(src + offs, dst + offs, rank, peer, bases, mask=mask, hint=BLOCK)
    else:
        shmem.put(src + offs, dst + offs, rank, peer, bases, mask=mask, hint=BLOCK)


@triton.jit
def _scatter_kernel(src, dst, rank, world_size, bases, chunk, src_stride, BLOCK: tl.constexpr):
    """Program p: block ``p // world_size`` of the chunk for peer ``q = (rank + p) % world_size``:
    ``dst[rank * chunk + i]`` on q <- ``src[q * src_stride + i]``. Peers vary fastest, so every link
    is busy at once. ``src_stride`` 0 sends the same chunk to everyone (all-gather), ``chunk`` sends
    each peer its own chunk (all-to-all)."""
    pid = tl.program_id(0)
    peer = (rank + pid) % world_size
    offs = (pid // world_size) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
    shmem.put(src + peer * src_stride + offs, dst + rank * chunk + offs, rank, peer, bases,
              mask=offs < chunk, hint=BLOCK)


@triton.jit
def _atomic_chain_kernel(counter, out, rank, peer, bases, iters):
    """``iters`` dependent acq_rel/sys atomic adds on ``counter`` of ``peer``: each waits for the last."""
    old = tl.load(out) * 0
    for _ in range(iters):
        old = shmem.atomic_add(counter, (old & 0) + 1, rank, peer, bases, sem="acq_rel", scope="sys")
    tl.store(out, old)


# ---- timing ----------------------------------------------------------------------------------------

def _time_ms(heap, fn, iters: int, warmup: int = 2) -> float:
    """Milliseconds per call of ``fn`` on this rank, between host barriers."""
    for _ in range(warmup):
        fn()
    heap.barrier()
    if heap.device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end)
    else:
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        ms = (time.perf_counter() - t0) * 1e3
    heap.barrier()
    return ms / iters


def _max(value: float) -> float:
    """The maximum of ``value`` over ranks."""
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return max(out)


def _all_ms(heap, fn, iters: int) -> float:
    """Every rank runs ``fn``: the slowest rank's milliseconds per call."""
    return _max(_time_ms(heap, fn, iters))


def _initiator_ms(heap, fn, iters: int, active: bool) -> float:
    """Only the ``active`` rank runs ``fn``; the others take part in the barriers."""
    ms = _time_ms(heap, fn if active else (lambda: None), iters)
    return _max(ms if active else 0.0)


def _gbs(nbytes: float, ms: float | None) -> float | None:
    return nbytes / ms / 1e6 if ms else None


def _copy_engine(dst_addr: int, src_addr: int, nbytes: int):
    """A call of cudaMemcpyAsync on the current stream between two mapped addresses (copy engine)."""
    from cuda.bindings import runtime as cudart

    kind = cudart.cudaMemcpyKind.cudaMemcpyDefault

    def copy():
        err, = cudart.cudaMemcpyAsync(dst_addr, src_addr, nbytes, kind, torch.cuda.current_stream().cuda_stream)
        if int(err) != 0:
            raise RuntimeError(f"cudaMemcpyAsync failed: {err!r}")
    return copy


# ---- measurements ----------------------------------------------------------------------------------

def _pairs(heap, src, dst, iters: int, sweep) -> list[dict]:
    """Remote load and store for each ordered pair, the initiator alone on the wire."""
    rank, ws, n = heap.rank, heap.world_size, src.numel()
    nbytes = n * src.element_size()
    rows = []
    for initiator in range(ws):
        for target in range(ws):
            if target == initiator:
                continue
            for pull, what in ((True, "remote load"), (False, "remote store")):
                timed = []  # (ms, block, warps)
                for block, warps in sweep:
                    def kernel(block=block, warps=warps, pull=pull, target=target):
                        _pair_kernel[(triton.cdiv(n, block),)](src, dst, rank, target, heap.bases, n, BLOCK=block,
                                                               PULL=pull, num_warps=warps)
                    timed.append((_initiator_ms(heap, kernel, iters, rank == initiator), block, warps))
                ms, block, warps = min(timed)
                copy_ms = None
                if heap.device.type == "cuda":
                    remote = heap.remote_address(src if pull else dst, target)
                    ce = (_copy_engine(dst.data_ptr(), remote, nbytes) if pull
                          else _copy_engine(remote, src.data_ptr(), nbytes))
                    copy_ms = _initiator_ms(heap, ce, iters, rank == initiator)
                arrow = "<-" if pull else "->"
                rows.append(dict(what=what, pair=f"{initiator}{arrow}{target}", triton=_gbs(nbytes, ms),
                                 baseline="copy engine", base=_gbs(nbytes, copy_ms), block=block, warps=warps))
    return rows


def _scatter(heap, src, dst, chunk: int, src_stride: int, block: int, warps: int):
    """The put kernel of the all-gather / all-to-all rows, then a device barrier (a complete collective)."""
    ws = heap.world_size
    grid = (ws * triton.cdiv(chunk, block),)

    def collective():
        _scatter_kernel[grid](src, dst, heap.rank, ws, heap.bases, chunk, src_stride, BLOCK=block, num_warps=warps)
        heap.device_barrier()
    return collective


def _all_to_all(heap, size_elems: int, iters: int, block: int, warps: int) -> list[dict]:
    """Every rank stores chunk q of its buffer into rank q, all at once, vs NCCL all_to_all_single."""
    ws, rank = heap.world_size, heap.rank
    chunk = size_elems // ws
    src = heap.full((ws * chunk,), float(rank))
    dst = heap.zeros((ws * chunk,))
    ms = _all_ms(heap, _scatter(heap, src, dst, chunk, chunk, block, warps), iters)
    ok = bool((dst.view(ws, chunk)[:, 0] == torch.arange(ws, device=heap.device, dtype=dst.dtype)).all())
    out = torch.empty_like(src)
    try:
        base = _all_ms(heap, lambda: dist.all_to_all_single(out, src), iters)
    except RuntimeError:  # gloo has no all_to_all
        base = None
    bus = (ws - 1) / ws * ws * chunk * 4
    return [dict(what="all-to-all store", pair=f"all {ws}", triton=_gbs(bus, ms), baseline="NCCL all_to_all",
                 base=_gbs(bus, base), block=block, warps=warps, correct=ok)]


def _all_gather(heap, size_elems: int, iters: int, block: int, warps: int) -> list[dict]:
    """All-gather of ``size_elems`` fp32 in total (each rank owns 1/ws) from ``put`` + device barrier,
    vs NCCL all_gather_into_tensor and all_reduce of the same size. Bus bandwidth (NCCL's definition)."""
    ws, rank = heap.world_size, heap.rank
    chunk = size_elems // ws
    mine = heap.full((chunk,), float(rank + 1))
    gathered = heap.zeros((ws * chunk,))
    ms = _all_ms(heap, _scatter(heap, mine, gathered, chunk, 0, block, warps), iters)
    expect = torch.arange(1, ws + 1, device=heap.device, dtype=torch.float32).repeat_interleave(chunk)
    ok = bool(torch.equal(gathered, expect))
    out = torch.empty_like(gathered)
    nccl = _all_ms(heap, lambda: dist.all_gather_into_tensor(out, mine), iters)
    reduce_ms = _all_ms(heap, lambda: dist.all_reduce(out), iters)
    total = ws * chunk * 4
    bus = (ws - 1) / ws * total
    return [dict(what="all-gather (put)", pair=f"all {ws}", triton=_gbs(bus, ms), baseline="NCCL all_gather",
                 base=_gbs(bus, nccl), block=block, warps=warps, correct=ok),
            dict(what="all-reduce", pair=f"all {ws}", baseline="NCCL all_reduce", base=_gbs(2 * bus, reduce_ms))]


def _latencies(heap, chain: int, barriers: int) -> list[dict]:
    """Remote atomic latency (dependent chain) and device barrier latency, in microseconds."""
    rank, ws = heap.rank, heap.world_size
    counter = heap.zeros((1,), torch.int64)
    out = heap.zeros((1,), torch.int64)
    rows = []
    for target, label in (((rank + 1) % ws, "remote atomic_add"), (rank, "local atomic_add")):
        def chained(target=target):
            _atomic_chain_kernel[(1,)](counter, out, rank, target, heap.bases, chain)
        rows.append(dict(what=label, pair=f"{rank}->{target}", us=_all_ms(heap, chained, 3) * 1e3 / chain))
    one = torch.zeros(1, dtype=torch.int32, device=heap.device)
    nccl_us = _all_ms(heap, lambda: dist.all_reduce(one), barriers) * 1e3
    rows.append(dict(what="device barrier (eager)", pair=f"all {ws}", us=_all_ms(heap, heap.device_barrier, barriers) * 1e3,
                     baseline="NCCL all_reduce 4 B", base_us=nccl_us))
    if heap.device.type == "cuda":
        graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        with torch.cuda.stream(stream):
            heap.device_barrier()
        stream.synchronize()
        heap.barrier()
        with torch.cuda.graph(graph):
            for _ in range(barriers):
                heap.device_barrier()
        rows.append(dict(what="device barrier (graph)", pair=f"all {ws}",
                         us=_all_ms(heap, graph.replay, 5) * 1e3 / barriers,
                         baseline="NCCL all_reduce 4 B", base_us=nccl_us))
    return rows


def _best_config(rows: list[dict], sweep) -> tuple[int, int]:
    """The (BLOCK, warps) that won remote store most often: the collective kernels store too."""
    wins = [(r["block"], r["warps"]) for r in rows if r["what"] == "remote store"]
    return max(set(wins), key=wins.count) if wins else sweep[len(sweep) // 2]


def _worker(rank: int, world_size: int, cfg: dict) -> None:
    gpu = not runtime.interpreting()
    size_elems = cfg["mib"] * (1 << 20) // 4 if gpu else 4096
    sweep = SWEEP if gpu else [(1024, 4)]
    heap_bytes = 6 * size_elems * 4 + (64 << 20)  # a bump allocator: every buffer below stays allocated
    with shmem.SymmetricHeap(heap_bytes) as heap:
        src = heap.full((size_elems,), 1.0)
        dst = heap.zeros((size_elems,))
        rows = _pairs(heap, src, dst, cfg["iters"], sweep) if world_size > 1 else []
        block, warps = _best_config(rows, sweep)
        rows += _all_gather(heap, size_elems, cfg["iters"], block, warps)
        rows += _all_to_all(heap, size_elems, cfg["iters"], block, warps)
        rows += _latencies(heap, chain=1000 if gpu else 20, barriers=100 if gpu else 5)
    if rank == 0:
        with open(cfg["out"], "w") as f:
            json.dump(rows, f)


def run(args) -> dict:
    gpu = torch.cuda.is_available() and not runtime.interpreting()
    if not gpu and not runtime.interpreting():
        raise UsageError("no GPU: run with TRITON_INTERPRET=1 for a smoke test under the Triton interpreter")
    world_size = args.world_size or (torch.cuda.device_count() if gpu else 2)
    if gpu and world_size > torch.cuda.device_count():  # ranks past the GPUs failed in launch, rank by rank
        raise UsageError(f"--world-size {world_size}: only {torch.cuda.device_count()} GPUs visible")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = dict(mib=args.mib, iters=args.iters if gpu else 2, out=os.path.join(tmp, "rows.json"))
        shmem.launch(_worker, world_size, cfg, timeout=args.timeout)
        with open(cfg["out"]) as f:
            rows = json.load(f)
    for row in rows:
        if row.get("triton") and row.get("base"):
            row["ratio"] = row["triton"] / row["base"]
        if row.get("us") and row.get("base_us"):
            row["ratio"] = row["base_us"] / row["us"]
        row["target"] = TARGETS.get(row["what"])
    title = f"shmem on {world_size} x {header().get('gpu') or 'CPU (interpreter: figures meaningless)'}"
    print_table([r for r in rows if "us" not in r],
                ["what", "pair", "triton", "baseline", "base", "ratio", "target", "block", "warps", "correct"],
                title=f"{title}: bandwidth GB/s, {args.mib} MiB (ratio = triton / baseline)")
    print_table([r for r in rows if "us" in r], ["what", "pair", "us", "baseline", "base_us", "ratio", "target"],
                title="latency, us (ratio = baseline / ours)")
    return dict(header=header(), suite="shmem", world_size=world_size, mib=args.mib, iters=args.iters, rows=rows)
