"""Fused GEMM + communication against NCCL + cuBLAS and PyTorch's fused ops, same run, bf16.

    python -m tritium.bench fused [--out FILE] [--world-size N] [--iters 10] [--reps 5] [--tokens 2048,16384]

Llama-3-70B tensor-parallel shapes (hidden 8192, MLP 28672): **all_gather_matmul** is the MLP up
projection with sequence-parallel input (each rank holds M / W rows of the ``[M, 8192]`` activations and
28672 / W columns of the weight), **matmul_reduce_scatter** the down projection (``[M, 28672 / W] x
[28672 / W, 8192]``, each rank keeps M / W rows of the sum), at M = 2048 and 16384 tokens; and
**matmul_all_reduce** at decode M = 1, 8, 64 (o_proj ``[M, 8192 / W] x [8192 / W, 8192]`` and down_proj).
Rows: cuBLAS GEMM alone on the local shapes (the floor), NCCL + cuBLAS (bulk), PyTorch's fused ops
(``torch.ops.symm_mem.fused_all_gather_matmul`` / ``fused_matmul_reduce_scatter``, where present),
tritium's ``matmul`` alone, and every tritium ``overlap`` mode; decode also cuBLAS + tritium all_reduce and the fused mode on a K-major b (a weight's transpose, the engine's layout).
Each tritium mode is first checked against the cuBLAS/NCCL result. ``iters`` calls between two CUDA
events (decode: captured in a CUDA graph and replayed), median over ``reps``, max over ranks.
"""

from __future__ import annotations

import json
import os
import tempfile

import torch
import torch.distributed as dist

import tritium.collectives as coll
import tritium.fused as fused
import tritium.shmem as shmem
from tritium.bench.args import int_list, integer, positive, ranks
from tritium.bench.common import header, print_table, ranked_graph_us, ranked_us
from tritium.runtime import interpreting

HIDDEN, MLP = 8192, 28672
MODES = ("bulk", "producer_consumer", "fused")


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=integer(1), default=None, help="ranks (default: the visible GPUs, >= 2)")
    parser.add_argument("--iters", type=integer(1), default=10, help="calls per timing")
    parser.add_argument("--reps", type=integer(1), default=5, help="timings per case (median)")
    parser.add_argument("--tokens", type=int_list(1), default="2048,16384", help="prefill token counts M")
    parser.add_argument("--decode", type=int_list(1), default="1,8,64",
                        help="decode token counts for matmul_all_reduce")
    parser.add_argument("--timeout", type=positive, default=600.0, help="seconds before a lost rank is an error")


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).norm() / max(want.float().norm().item(), 1e-12)).item()


def _symm(group_name: str):
    """torch's symmetric-memory module with the group enabled, or None."""
    try:
        import torch.distributed._symmetric_memory as symm_mem

        symm_mem.enable_symm_mem_for_group(group_name)
        return symm_mem
    except Exception as e:
        print(f"torch symmetric memory unavailable: {type(e).__name__}: {str(e)[:200]}", flush=True)
        return None


def _worker(rank: int, world_size: int, tokens: list[int], decode: list[int], iters: int, reps: int,
            path: str) -> None:
    gpu = not interpreting()
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    dtype = torch.bfloat16 if gpu else torch.float32
    hidden, mlp = (HIDDEN, MLP) if gpu else (256, 512)
    W = world_size
    M_max = max(tokens)
    size = torch.tensor([], dtype=dtype).element_size()
    max_bytes = M_max * max(hidden, mlp // W) * size
    heap = shmem.SymmetricHeap(coll.Communicator.heap_bytes(max_bytes, W)
                               + fused.heap_bytes(M_max, hidden, max(hidden, mlp // W), W, dtype) + (64 << 20))
    comm = coll.Communicator(heap, max_bytes=max_bytes)
    group = dist.group.WORLD.group_name
    symm = _symm(group) if gpu else None
    g = torch.Generator(device=device).manual_seed(1234 + rank)
    rows = []
    try:
        for M in tokens:
            # -- all-gather + GEMM: up projection
            m, K, n = M // W, hidden, mlp // W
            a = (torch.randn(m, K, device=device, generator=g) / 8).to(dtype)
            b = (torch.randn(K, n, device=device, generator=g) / 8).to(dtype)
            gathered = torch.empty(M, K, device=device, dtype=dtype)
            y = torch.empty(M, n, device=device, dtype=dtype)
            dist.all_gather_into_tensor(gathered, a)
            want = gathered.float() @ b.float()
            row = {"op": "all_gather_matmul", "M": M, "local": f"[{M},{K}]x[{K},{n}]"}
            cases = {"cublas alone": lambda: torch.matmul(gathered, b, out=y),
                     "tritium matmul alone": lambda: fused.matmul(gathered, b, out=y),
                     "nccl+cublas": lambda: (dist.all_gather_into_tensor(gathered, a), torch.matmul(gathered, b, out=y))}
            if symm is not None:
                cases["torch fused"] = lambda: torch.ops.symm_mem.fused_all_gather_matmul(a, [b], 0, group)
            _add_modes(row, cases, lambda mode, a=a, b=b, y=y: fused.all_gather_matmul(a, b, comm, overlap=mode, out=y), want)
            _time_cases(row, cases, device, iters, reps)
            comm.check()
            rows.append(row)
            _report(rank, row)
            # -- GEMM + reduce-scatter: down projection
            k, N = mlp // W, hidden
            a = (torch.randn(M, k, device=device, generator=g) / 8).to(dtype)
            b = (torch.randn(k, N, device=device, generator=g) / 8).to(dtype)
            full = torch.empty(M, N, device=device, dtype=dtype)
            y = torch.empty(M // W, N, device=device, dtype=dtype)
            torch.matmul(a, b, out=full)
            want = torch.empty_like(y)
            dist.reduce_scatter_tensor(want, full)
            row = {"op": "matmul_reduce_scatter", "M": M, "local": f"[{M},{k}]x[{k},{N}]"}
            cases = {"cublas alone": lambda: torch.matmul(a, b, out=full),
                     "tritium matmul alone": lambda: fused.matmul(a, b, out=full),
                     "nccl+cublas": lambda: (torch.matmul(a, b, out=full), dist.reduce_scatter_tensor(y, full))}
            if symm is not None:
                cases["torch fused"] = lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, group)
            _add_modes(row, cases, lambda mode, a=a, b=b, y=y: fused.matmul_reduce_scatter(a, b, comm, overlap=mode, out=y), want)
            _time_cases(row, cases, device, iters, reps)
            comm.check()
            rows.append(row)
            _report(rank, row)
        for M in decode:
            for name, k in (("o_proj", hidden // W), ("down_proj", mlp // W)):
                N = hidden
                a = (torch.randn(M, k, device=device, generator=g) / 8).to(dtype)
                b = (torch.randn(k, N, device=device, generator=g) / 8).to(dtype)
                y = torch.empty(M, N, device=device, dtype=dtype)
                want = torch.matmul(a, b)
                dist.all_reduce(want)
                row = {"op": f"matmul_all_reduce {name}", "M": M, "local": f"[{M},{k}]x[{k},{N}]"}
                cases = {"cublas alone": lambda: torch.matmul(a, b, out=y),
                         "tritium matmul alone": lambda: fused.matmul(a, b, out=y),
                         "cublas+nccl": lambda: (torch.matmul(a, b, out=y), dist.all_reduce(y)),
                         "cublas+tritium all_reduce": lambda: (torch.matmul(a, b, out=y), comm.all_reduce(y, out=y))}
                _add_modes(row, cases, lambda mode, a=a, b=b, y=y: fused.matmul_all_reduce(a, b, comm, overlap=mode, out=y), want)
                # the engine's layout: b is the transpose of a row-major weight [N, k]
                bt = b.t().contiguous().t()
                row["fused b-kmajor rel_err"] = _rel_err(fused.matmul_all_reduce(a, bt, comm, overlap="fused", out=y), want)
                cases["tritium fused b-kmajor"] = lambda a=a, bt=bt, y=y: fused.matmul_all_reduce(a, bt, comm, overlap="fused", out=y)
                for case, fn in cases.items():
                    row[f"{case} us"] = ranked_graph_us(fn, device, iters, reps) or ranked_us(fn, device, iters, reps)
                comm.check()
                rows.append(row)
                _report(rank, row)
        if rank == 0:
            with open(path, "w") as f:
                json.dump(rows, f)
    finally:
        heap.close()


def _add_modes(row: dict, cases: dict, call, want: torch.Tensor) -> None:
    """Every tritium overlap mode of ``call(mode)``: its error against ``want`` in ``row``, its timing
    case in ``cases``."""
    for mode in MODES:
        row[f"{mode} rel_err"] = _rel_err(call(mode), want)
        cases[f"tritium {mode}"] = lambda mode=mode: call(mode)


def _time_cases(row: dict, cases: dict, device, iters: int, reps: int) -> None:
    for case, fn in cases.items():
        try:
            fn()  # compile and warm up outside the timing
            row[f"{case} us"] = ranked_us(fn, device, iters, reps)
        except Exception as e:  # torch's fused ops on an unsupported setup
            print(f"  {case}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            row[f"{case} us"] = None


def _report(rank: int, row: dict) -> None:
    if rank == 0:
        times = {k[:-3]: round(v, 1) for k, v in row.items() if k.endswith(" us") and v is not None}
        print(f"  {row['op']} M={row['M']}: {times}", flush=True)


def run(args) -> dict:
    gpus, world_size = ranks(args.world_size)
    tokens = args.tokens if gpus else [8 * world_size]
    decode = args.decode if gpus else [1]
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        shmem.launch(_worker, world_size, tokens, decode, args.iters if gpus else 1, args.reps if gpus else 1,
                     path, timeout=args.timeout)
        with open(path) as f:
            rows = json.load(f)
    finally:
        os.unlink(path)
    for row in rows:
        floor = row.get("cublas alone us")
        bulk = row.get("nccl+cublas us") or row.get("cublas+nccl us")
        best = min((row[f"tritium {m} us"], m) for m in MODES if row.get(f"tritium {m} us") is not None)
        row["best mode"] = best[1]
        row["best / cublas alone"] = best[0] / floor if floor else None
        row["nccl+cublas / best"] = bulk / best[0] if bulk else None
        if row.get("torch fused us"):
            row["torch fused / best"] = row["torch fused us"] / best[0]
        if row.get("cublas+tritium all_reduce us"):
            row["best / (cublas+tritium all_reduce)"] = best[0] / row["cublas+tritium all_reduce us"]
    result = {"header": header(), "suite": "fused", "world_size": world_size, "dtype": "bf16" if gpus else "fp32",
              "iters": args.iters, "reps": args.reps, "rows": rows}
    h = result["header"]
    cols = ["op", "M", "cublas alone us", "tritium matmul alone us", "nccl+cublas us", "cublas+nccl us",
            "cublas+tritium all_reduce us", "torch fused us", "tritium bulk us", "tritium producer_consumer us",
            "tritium fused us", "best mode", "best / cublas alone", "nccl+cublas / best", "torch fused / best"]
    print_table(rows, cols, title=f"fused GEMM + communication: {world_size} ranks | {h.get('gpu') or 'cpu'}, "
                f"torch {h['torch']}, triton {h['triton']}, {h['date']}")
    return result
