"""Decode projections at batch 1: where does the time of a small weight read go?

    python -m tritium.bench gemv [--out FILE] [--shapes o,qkv,down,gate_up]

For each Llama-3-8B projection shape it times, per call: cuBLAS (``F.linear``), every Triton GEMV config
with and without programmatic dependent launch, a plain streaming read of the same bytes (a Triton
kernel that only loads and sums: the ceiling for one kernel reading this much) and a torch copy of it.
Two modes: ``cold`` (L2 flushed before each timed call: one projection on its own) and ``stream`` (32
different weights of the shape back to back from one CUDA graph, as a decode step runs its layers; per-call
average). Both time the GPU alone, not the host's launches.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from tritium.bench.args import integer, name_list
from tritium.bench.common import cold_us, copy_bandwidth_tbs, header, print_table
from tritium.ops.gemv import CONFIGS, gemv
from tritium.runtime import pdl_supported

SHAPES = {"o": (4096, 4096), "qkv": (6144, 4096), "down": (4096, 14336), "gate_up": (28672, 4096)}
NEEDS_GPU = "it times cold GEMVs against cuBLAS"
LAYERS = 32


@triton.jit
def _read_kernel(x_ptr, out_ptr, PER_PROG: tl.constexpr, BLOCK: tl.constexpr):
    """Each program sums PER_PROG contiguous elements, BLOCK at a time (every load issued up front when
    PER_PROG == BLOCK)."""
    base = x_ptr + tl.program_id(0).to(tl.int64) * PER_PROG
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.static_range(0, PER_PROG, BLOCK):
        acc += tl.load(base + i + tl.arange(0, BLOCK), eviction_policy="evict_first").to(tl.float32)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))


def add_arguments(parser) -> None:
    parser.add_argument("--shapes", type=name_list(SHAPES), default=",".join(SHAPES),
                        help=f"comma-separated subset of {','.join(SHAPES)}")
    parser.add_argument("--repeats", type=integer(1), default=15)


def _stream_us(fn, repeats: int) -> float:
    """Per-call microseconds of the LAYERS weights read back to back, replayed from one CUDA graph as a
    decode step runs them (timed eagerly, the Triton calls measured the host's launch rate: 46 us a call
    for an o_proj GEMV whose cold read takes 19)."""
    for i in range(LAYERS):
        fn(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(LAYERS):
            fn(i)
    graph.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(max(3, repeats // 3)):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) * 1e3 / LAYERS)
    return best


def run(args) -> dict:
    dev = torch.device("cuda")
    result = {"header": header(dev), "suite": "gemv", "copy_bandwidth_tbs": copy_bandwidth_tbs(), "shapes": {}}
    flush = torch.empty(512 << 20, dtype=torch.uint8, device=dev)
    pdl_modes = (False, True) if pdl_supported(dev) else (False,)
    rows = []
    for name in args.shapes:
        N, K = SHAPES[name]
        ws = [torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(LAYERS)]
        flat = [w.view(-1) for w in ws]
        x = torch.randn(1, K, device=dev, dtype=torch.bfloat16)
        nbytes = N * K * 2
        dst = torch.empty_like(ws[0])
        sums = torch.empty(N * K // 1024, device=dev, dtype=torch.float32)
        fns = {"cublas": lambda i: F.linear(x, ws[i]), "torch copy": lambda i: dst.copy_(ws[i])}
        for per, block in ((4096, 4096), (16384, 4096), (65536, 8192)):
            fns[f"read {per * 2 // 1024}KB/prog"] = (lambda i, p=per, b=block: _read_kernel[(N * K // p,)](
                flat[i], sums, PER_PROG=p, BLOCK=b, num_warps=4))
        for cfg in CONFIGS:
            for pdl in pdl_modes:
                fns[f"gemv {cfg}{' pdl' if pdl else ''}"] = lambda i, c=cfg, p=pdl: gemv(x, ws[i], config=c, pdl=p)
        res = {}
        for label, fn in fns.items():
            try:
                res[label] = {"cold_us": cold_us(lambda: fn(0), flush, args.repeats), "stream_us": _stream_us(fn, args.repeats)}
            except Exception as e:  # a config that does not compile for this shape
                res[label] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
                continue
            rows.append({"shape": name, "what": label, "cold us": res[label]["cold_us"],
                         "stream us": res[label]["stream_us"],
                         "stream TB/s": nbytes / (res[label]["stream_us"] * 1e-6) / 1e12})
        floor_us = nbytes / (result["copy_bandwidth_tbs"] * 1e12) * 1e6
        result["shapes"][name] = {"n": N, "k": K, "bytes": nbytes, "floor_us": floor_us, "times": res}
        print(f"{name}: {N}x{K}, {nbytes / 1e6:.1f} MB, floor at copy bandwidth {floor_us:.1f} us", flush=True)
        del ws, flat, dst
        torch.cuda.empty_cache()
    print_table(rows, list(rows[0]) if rows else [], title=f"gemv | {result['header'].get('gpu')}, "
                f"copy {result['copy_bandwidth_tbs']:.2f} TB/s")
    return result
