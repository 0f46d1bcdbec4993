"""tritium's GEMM against cuBLAS (``torch.matmul``), same run, bf16.

    python -m tritium.bench gemm [--out FILE] [--sweep] [--shapes up-tp2-m2048,...] [--count 10] [--rounds 6]

Shapes: the Llama-3-70B tensor-parallel local GEMMs for 2 and 4 GPUs (hidden 8192, MLP 28672: the up
projection ``[M, 8192] x [8192, 28672/world]``, the down projection ``[M, 28672/world] x [28672/world,
8192]``) at M = 2048 and 16384 tokens, the square 8192^3, and decode M = 1, 8, 64 of the same weights.
Each shape is first checked on the GPU (tritium and cuBLAS against the fp32 product of the same bf16
inputs), then timed: ``--count`` calls, each between two CUDA events, in ``--rounds`` rounds alternating
tritium and cuBLAS, median. Decode shapes are also timed as CUDA-graph replays (no host launch cost).
``--sweep`` also times every candidate configuration of the shape's regime (``LARGE_CONFIGS`` /
``DECODE_CONFIGS`` at several K splits): the measurements behind ``select_config``. Clocks move with
power under sustained load (one configuration measured 5-10% apart within one run on the H100), so each
shape first runs ~0.3 s of cuBLAS and the two contenders alternate in short rounds. Decode candidates
are swept in graph replays (eager, the host's launch time is measured instead).
"""

from __future__ import annotations

import dataclasses

import torch

from tritium.bench.args import integer, name_list
from tritium.bench.common import copy_bandwidth_tbs, header, print_table
from tritium.fused import reference
from tritium.fused.matmul import DECODE_CONFIGS, LARGE_CONFIGS, MatmulConfig, decode_split_k, matmul, select_config
from tritium.runtime import num_sms

HIDDEN, MLP = 8192, 28672


def _shapes() -> dict[str, tuple[int, int, int]]:
    """name -> (M, N, K)."""
    shapes = {}
    for m in (2048, 16384):
        for world in (2, 4):
            shapes[f"up-tp{world}-m{m}"] = (m, MLP // world, HIDDEN)
            shapes[f"down-tp{world}-m{m}"] = (m, HIDDEN, MLP // world)
    shapes["square-8192"] = (8192, 8192, 8192)
    for m in (1, 8, 64):
        for world in (2, 4):
            shapes[f"up-tp{world}-m{m}"] = (m, MLP // world, HIDDEN)
            shapes[f"down-tp{world}-m{m}"] = (m, HIDDEN, MLP // world)
    return shapes


SHAPES = _shapes()
NEEDS_GPU = "it times tritium's GEMM against cuBLAS"


def add_arguments(parser) -> None:
    parser.add_argument("--shapes", type=name_list(SHAPES), default=",".join(SHAPES),
                        help=f"comma-separated subset of: {','.join(SHAPES)}")
    parser.add_argument("--sweep", action="store_true", help="also time every candidate configuration")
    parser.add_argument("--count", type=integer(1), default=10, help="timed calls per round and case")
    parser.add_argument("--rounds", type=integer(1), default=6, help="rounds alternating tritium and cuBLAS")


def _per_call_ms(fn, count: int) -> list[float]:
    """``count`` calls of ``fn``, each between two CUDA events (the GPU stays busy: the host runs ahead)."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(count)]
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(stop) for start, stop in events]


def _graph_ms(fn, count: int, reps: int = 5) -> float:
    """Median over ``reps`` replays of a CUDA graph of ``count`` calls, per call."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(count):
            fn()
    times = []
    for _ in range(reps + 1):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / count)
    return sorted(times[1:])[reps // 2]


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    if not torch.isfinite(out).all():
        return float("inf")
    return ((out.float() - ref).norm() / ref.norm()).item()


def _sweep_configs(M: int, N: int, K: int, selected: MatmulConfig, device: torch.device) -> list[MatmulConfig]:
    """The candidates of the shape's regime; decode ones with decode_split_k's split, and the selected
    decode configuration also at other splits."""
    if M > 64:
        return list(LARGE_CONFIGS)
    sms = num_sms(device)
    configs = [dataclasses.replace(c, split_k=decode_split_k(M, N, K, c, sms)) for c in DECODE_CONFIGS]
    configs += [dataclasses.replace(selected, split_k=s) for s in (1, 2, 4, 8)]
    return list(dict.fromkeys(configs))  # unique, in order


def _bench_shape(name: str, M: int, N: int, K: int, args) -> dict:
    dev = torch.device("cuda")
    flops = 2.0 * M * N * K
    a = torch.randn(M, K, dtype=torch.bfloat16, device=dev)
    b = torch.randn(K, N, dtype=torch.bfloat16, device=dev) / K ** 0.5
    out = torch.empty(M, N, dtype=torch.bfloat16, device=dev)
    ref = reference.matmul(a, b)
    cfg = select_config(M, N, K, a.dtype, dev)
    row = {"shape": name, "m": M, "n": N, "k": K, "config": str(cfg)}
    # correctness first: poisoned output, then the error of both against the fp32 product
    out.fill_(float("nan"))
    matmul(a, b, out=out)
    row["rel_err"] = _rel_err(out, ref)
    row["cublas_rel_err"] = _rel_err(torch.matmul(a, b), ref)
    row["correct"] = row["rel_err"] < 1e-2
    del ref
    tri, cub = (lambda: matmul(a, b, out=out)), (lambda: torch.matmul(a, b, out=out))
    for fn in (tri, cub):  # warm-up (compiles, cuBLAS heuristics)
        fn(), fn()
    # then ~0.3 s of work, so that both are timed at the clocks the GPU settles at under load
    _per_call_ms(cub, max(4, int(300 / max(_median(_per_call_ms(cub, 3)), 1e-3))))
    t_tri, t_cub = [], []
    for _ in range(args.rounds):
        t_tri += _per_call_ms(tri, args.count)
        t_cub += _per_call_ms(cub, args.count)
    row.update(tritium_us=_median(t_tri) * 1e3, cublas_us=_median(t_cub) * 1e3)
    row["tritium_tflops"] = flops / (row["tritium_us"] * 1e-6) / 1e12
    row["cublas_tflops"] = flops / (row["cublas_us"] * 1e-6) / 1e12
    row["ratio"] = row["tritium_tflops"] / row["cublas_tflops"]
    if M <= 64:  # decode: also without host launch cost, and the weight read rate
        row["tritium_graph_us"] = _graph_ms(tri, args.count) * 1e3
        row["cublas_graph_us"] = _graph_ms(cub, args.count) * 1e3
        row["graph_ratio"] = row["cublas_graph_us"] / row["tritium_graph_us"]
        row["tritium_graph_tbs"] = K * N * 2 / (row["tritium_graph_us"] * 1e-6) / 1e12
    if args.sweep:
        row["sweep_tflops"] = {}
        ref = reference.matmul(a, b)
        for c in _sweep_configs(M, N, K, cfg, dev):
            try:
                out.fill_(float("nan"))
                matmul(a, b, out=out, config=c)
                err = _rel_err(out, ref)
                if err > 1e-2:
                    row["sweep_tflops"][str(c)] = f"wrong: rel err {err:.3g}"
                    continue
                fn = (lambda c=c: matmul(a, b, out=out, config=c))
                fn()
                # decode candidates in graph replays: eager calls of ~50-100 us measure the host's launch
                ms = _graph_ms(fn, args.count) if M <= 64 else _median(_per_call_ms(fn, 3 * args.count))
                row["sweep_tflops"][str(c)] = round(flops / (ms * 1e-3) / 1e12, 1)
            except Exception as e:  # a configuration that does not fit this GPU
                row["sweep_tflops"][str(c)] = f"{type(e).__name__}: {str(e)[:160]}"
        del ref
        timed = {k: v for k, v in row["sweep_tflops"].items() if isinstance(v, float)}
        if timed:
            best = max(timed, key=timed.get)
            row["sweep_best"] = best
            print(f"  sweep {name}: best {best} {timed[best]:.1f} TFLOP/s; "
                  + ", ".join(f"{k} {v}" for k, v in row["sweep_tflops"].items()), flush=True)
    del a, b, out
    torch.cuda.empty_cache()
    return row


def run(args) -> dict:
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference stays fp32
    names = args.shapes
    result = {"header": header(), "suite": "gemm", "copy_bandwidth_tbs": copy_bandwidth_tbs(), "shapes": []}
    for name in names:
        row = _bench_shape(name, *SHAPES[name], args)
        result["shapes"].append(row)
        print(f"{name}: {row['config']} tritium {row['tritium_tflops']:.1f} TFLOP/s ({row['tritium_us']:.1f} us), "
              f"cuBLAS {row['cublas_tflops']:.1f}, ratio {row['ratio']:.3f}, rel err {row['rel_err']:.2e} "
              f"(cuBLAS {row['cublas_rel_err']:.2e})", flush=True)
    big = [r for r in result["shapes"] if r["m"] >= 2048 and r["shape"] != "square-8192"]
    if big:
        result["min_ratio_70b"] = min(r["ratio"] for r in big)
    result["all_correct"] = all(r["correct"] for r in result["shapes"])
    hdr = result["header"]
    print_table(result["shapes"], ["shape", "m", "n", "k", "config", "tritium_tflops", "cublas_tflops", "ratio",
                                   "tritium_graph_us", "cublas_graph_us", "rel_err"],
                title=f"gemm | {hdr.get('gpu')} | torch {hdr['torch']} triton {hdr['triton']} | {hdr['date']} | "
                      f"copy {result['copy_bandwidth_tbs']:.2f} TB/s")
    if big:
        print(f"min ratio over the 70B shapes (M = 2048, 16384): {result['min_ratio_70b']:.3f}; "
              f"all correct: {result['all_correct']}")
    return result
