"""Helpers shared by the benchmark suites: run header, ceilings, timing, tables."""

import datetime
import platform

import torch
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


def cold_us(fn, flush: torch.Tensor, repeats: int = 15, before=None) -> float:
    """Median microseconds of one ``fn()`` with L2 flushed first (``flush``: a buffer larger than L2,
    zeroed), timed by CUDA events around the call alone; ``before()`` runs between flush and call."""
    times = []
    for _ in range(repeats):
        flush.zero_()
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

