"""Helpers shared by the benchmark suites: run header, ceilings, timing, tables."""

import datetime
import platform
import time

import torch
import torch.distributed as dist
import triton
import triton.testing


def header(device: torch.device | None = None) -> dict:
    """What every result file starts with: GPU, software versions, date."""
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        device = device or torch.device("cuda")
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, sms=props.multi_processor_count,
                    gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    gpu_count=torch.cuda.device_count())
    else:
        info.update(gpu=None)
    return info


def time_ms(fn, *, graph: bool = False, rep_ms: int = 200) -> float:
    """Median milliseconds of ``fn()`` on the GPU. With ``graph=True`` the call is captured in a CUDA
    graph and replays are timed, which removes host launch overhead (how decode runs in serving)."""
    if graph:
        return triton.testing.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median")
    return triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median")


def interleaved_ms(fns: dict, *, graph: bool = False, rounds: int = 3, rep_ms: int = 70) -> tuple[dict, dict]:
    """Median milliseconds of each of ``fns`` (name -> callable) over ``rounds`` rounds, each timing every
    callable once with ``time_ms`` (order reversed every other round): a slow spell of the GPU lands in one
    round of every system instead of the whole measurement of one. Returns (ms by name, error by name): a
    callable that raises on its first call is left out and its error kept."""
    errors, ok = {}, {}
    for name, fn in fns.items():
        try:
            fn()
            ok[name] = fn
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {str(e)[:100]}"
    times = {name: [] for name in ok}
    names = list(ok)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(time_ms(ok[name], graph=graph, rep_ms=rep_ms))
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}, errors


def ranked_us(fn, device: torch.device, iters: int, reps: int) -> float:
    """Multi-rank suites (every rank calls it together): the median over ``reps`` of (``iters`` calls of
    ``fn``) / iters in microseconds (CUDA events on a GPU, wall clock on the CPU), max over ranks."""
    times = []
    for _ in range(reps):
        dist.barrier()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3 / iters)
        else:
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            times.append((time.perf_counter() - t0) * 1e6 / iters)
    times.sort()
    t = torch.tensor([times[len(times) // 2]], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def ranked_graph_us(fn, device: torch.device, iters: int, reps: int) -> float | None:
    """:func:`ranked_us` of ``iters`` calls captured in one CUDA graph and replayed, per call; None on
    the CPU or when ``fn`` cannot be captured (every rank must fail alike)."""
    if device.type != "cuda":
        return None
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up (compilation) outside the capture
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(iters):
                fn()
    except Exception as e:
        print(f"  (not capturable: {type(e).__name__}: {str(e)[:120]})", flush=True)
        torch.cuda.synchronize(device)
        return None
    graph.replay()
    return ranked_us(graph.replay, device, 1, reps) / iters


def graph_kernel_us(fn, replays: int = 20) -> dict[str, float]:
    """Microseconds each GPU kernel of ``fn()`` takes per call, from CUPTI (torch.profiler) over
    ``replays`` replays of ``fn`` captured in a CUDA graph: {kernel name: mean us per replay}, plus
    ``"replay"``: the whole replay (first kernel start to last kernel end), averaged. Kernel times
    include waits inside a kernel (a PDL wait for the kernel before), so they can sum to more than the
    replay."""
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    out: dict[str, float] = {}
    for e in events:
        name = e.name[:60]
        out[name] = out.get(name, 0.0) + e.time_range.elapsed_us() / replays
    if events:
        span = max(e.time_range.end for e in events) - min(e.time_range.start for e in events)
        out["replay"] = span / replays  # includes the gaps between replays
    return {k: round(v, 2) for k, v in out.items()}


# GPU cycles (~0.5 ms) that cold_us keeps the GPU waiting before what it times: the host queues the call meanwhile.
HOST_LEAD_CYCLES = 1_000_000


def cold_us(fn, flush: torch.Tensor, repeats: int = 15, before=None) -> float:
    """Median microseconds of one ``fn()`` with L2 flushed first (``flush``: a buffer larger than L2,
    zeroed), timed by CUDA events around the call alone; ``before()`` runs between flush and call.
    The GPU sleeps after the flush until the host has queued ``before()``, the events and the call, so the
    figure is the GPU's time, not the host's launch (a Python Triton launch, ~20-40 us, took longer than a
    cold 33 MB read: bench/NOTES.md, "GEMV vs cuBLAS")."""
    times = []
    for _ in range(repeats):
        flush.zero_()
        torch.cuda._sleep(HOST_LEAD_CYCLES)
        if before is not None:
            before()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth_tbs(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy, bytes read plus written per second, in TB/s."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src))
    del src, dst
    return 2 * nbytes / ms / 1e9


def matmul_tflops(n: int = 8192) -> float:
    """bf16 n x n x n matrix product through torch (cuBLAS), random data, TFLOP/s."""
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    ms = time_ms(lambda: a @ b)
    return 2 * n**3 / ms / 1e9


def print_table(rows: list[dict], columns: list[str], title: str | None = None) -> None:
    """Plain fixed-width table; floats with 3 significant digits."""
    def fmt(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.3g}"
        return str(v)

    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    if title:
        print(title)
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)))

