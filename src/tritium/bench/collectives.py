"""Collectives benchmark: tritium's Communicator against NCCL and PyTorch symmetric memory, same run.

    python -m tritium.bench collectives [--out FILE] [--world-size N] [--sizes 8K,16K,...] [--iters 20]

One process per GPU (``tritium.shmem.launch``, NCCL). For each bf16 message size: all-reduce with
tritium (auto, one-shot, two-shot), NCCL (``torch.distributed``) and torch symmetric memory
(``torch.ops.symm_mem.one_shot_all_reduce`` / ``two_shot_all_reduce_``, where present), each eager and
captured in a CUDA graph; all-gather and reduce-scatter (tritium vs NCCL); and the fused all-reduce +
residual + RMSNorm (hidden 8192) against tritium's all-reduce alone. Latency: ``--iters`` calls back to
back (a graph of them, for the graph rows) timed by CUDA events, median over ``--reps``, max over ranks
(a fixed count on every rank, a barrier before: ``do_bench`` picks its count per process and hangs
multi-rank code). Bus bandwidth as nccl-tests defines it. Without GPUs it runs tiny sizes on CPU ranks
under the interpreter (gloo), as a smoke test.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile

import torch
import torch.distributed as dist

import tritium.collectives as coll
import tritium.shmem as shmem
from tritium.bench.args import integer, positive, ranks
from tritium.bench.common import header, print_table, ranked_graph_us, ranked_us
from tritium.runtime import interpreting

DEFAULT_SIZES = "8K,16K,64K,256K,1M,4M,16M,64M,256M"
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=integer(1), default=None, help="ranks (default: every visible GPU)")
    parser.add_argument("--sizes", type=size_list, default=None,
                        help=f"message sizes per rank (default {DEFAULT_SIZES}; 1K,4K on CPU)")
    parser.add_argument("--iters", type=integer(1), default=20, help="calls per timing")
    parser.add_argument("--reps", type=integer(1), default=5, help="timings per case (median)")
    parser.add_argument("--timeout", type=positive, default=500.0, help="seconds before the ranks are stopped")
    parser.add_argument("--tiles", type=_tiles, default="",
                        help="extra (elements per tile)x(warps)[x(Lamport programs)] of the one-shot and Lamport "
                             "kernels to time from 256K, e.g. 4096x8,1024x4x528 (rows 'tritium lamport t4096w8', "
                             "'tritium lamport t1024w4p528', ...)")


def parse_size(text: str) -> int:
    text = text.strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in _UNITS:
        return int(float(text[:-1]) * _UNITS[text[-1]])
    return int(text)


def size_list(text: str) -> list[int]:
    """Option type: comma-separated sizes >= 1 with K, M or G for 2^10, 2^20, 2^30 ("8K,1M" -> [8192, 1048576])."""
    try:
        sizes = [parse_size(s) for s in text.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated sizes >= 1 such as 8K,1M, got {text!r}")
    return sizes


def _tiles(text: str) -> tuple[tuple[int, ...], ...]:
    """Option type of --tiles: "4096x8,1024x4x528" -> ((4096, 8), (1024, 4, 528)); "" -> ()."""
    try:
        tiles = tuple(tuple(int(v) for v in t.lower().split("x")) for t in text.split(",") if t.strip())
    except ValueError:
        tiles = ((),)
    if any(len(t) not in (2, 3) or min(t) < 1 for t in tiles):
        raise argparse.ArgumentTypeError(f"expected (elements per tile)x(warps)[x(Lamport programs)], comma-separated, "
                                         f"such as 4096x8,1024x4x528, got {text!r}")
    return tiles


def _label(nbytes: int) -> str:
    for unit, size in (("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size}{unit}"
    return str(nbytes)


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _symm_mem(x: torch.Tensor):
    """(one_shot, two_shot) callables of torch symmetric memory on a copy of ``x``, or None."""
    try:
        import torch.distributed._symmetric_memory as symm_mem

        group = dist.group.WORLD.group_name
        t = symm_mem.empty(x.shape, dtype=x.dtype, device=x.device)
        t.copy_(x)
        symm_mem.rendezvous(t, group)
        one = lambda: torch.ops.symm_mem.one_shot_all_reduce(t, "sum", group)  # noqa: E731
        two = lambda: torch.ops.symm_mem.two_shot_all_reduce_(t, "sum", group)  # noqa: E731
        one(), two()
        return one, two
    except Exception as e:  # not built with symmetric memory, or not on this GPU
        print(f"torch symmetric memory unavailable: {type(e).__name__}: {str(e)[:200]}", flush=True)
        return None


def _no_pdl(comm, fn):
    """``fn()`` with the communicator's programmatic dependent launch off."""
    comm.pdl = False
    try:
        return fn()
    finally:
        comm.pdl = True


def _with_tile(comm, tile: tuple[int, ...], fn):
    """``fn()`` with the communicator's tiles (elements, warps) forced to ``tile[:2]`` and, if given, its
    Lamport programs to ``tile[2]``."""
    programs = comm.lamport_programs
    comm.tile = comm.lamport_tile = lambda nbytes: tile[:2]
    comm.lamport_programs = tile[2] if len(tile) > 2 else programs
    try:
        return fn()
    finally:
        del comm.tile, comm.lamport_tile
        comm.lamport_programs = programs


def _flag_protocol(comm, fn):
    """``fn()`` with the communicator's Lamport path off (its messages take the flag-protocol kernels)."""
    lamport_bytes = comm.lamport_bytes
    comm.lamport_bytes = 0
    try:
        return fn()
    finally:
        comm.lamport_bytes = lamport_bytes


def _worker(rank: int, world_size: int, sizes: list[int], iters: int, reps: int, path: str,
            tiles: tuple = ()) -> None:
    device = torch.device("cuda", rank) if not interpreting() else torch.device("cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    hidden = 8192 if device.type == "cuda" else 256
    max_bytes = max(max(sizes), 64 * hidden * torch.tensor([], dtype=dtype).element_size())
    heap = shmem.SymmetricHeap(coll.Communicator.heap_bytes(max_bytes, world_size) + 2 * max(sizes) + (16 << 20))
    comm = coll.Communicator(heap, max_bytes=max_bytes)
    # inputs that live in the heap (zero copy from comm.zero_copy_bytes on; symm-mem's inputs live in its
    # own symmetric memory too)
    heap_x = heap.empty((max(sizes),), torch.uint8)
    heap_y = heap.empty((max(sizes),), torch.uint8)
    rows = []
    try:
        for nbytes in sizes:
            n = nbytes // torch.tensor([], dtype=dtype).element_size()
            x = torch.randn(n, device=device).to(dtype)
            out = torch.empty_like(x)
            want = x.clone()
            dist.all_reduce(want)
            row = {"bytes": nbytes, "size": _label(nbytes)}
            algorithms = ("auto", "one_shot", "two_shot")
            if dtype in (torch.float16, torch.bfloat16) and nbytes <= comm.lamport_bytes:
                algorithms += ("lamport",)
            cases = {f"tritium {a}": (lambda a=a: comm.all_reduce(x, out=out, algorithm=a)) for a in algorithms}
            hx = heap_x[:nbytes].view(dtype).copy_(x)
            hy = heap_y[:nbytes].view(dtype).copy_(x)
            cases["tritium no-pdl"] = lambda: _no_pdl(comm, lambda: comm.all_reduce(x, out=out))
            cases["tritium one_shot heap"] = lambda: comm.all_reduce(hx, out=out, algorithm="one_shot")
            cases["tritium two_shot heap"] = lambda: comm.all_reduce(hy, out=out, algorithm="two_shot")
            for tile in tiles if nbytes >= (256 << 10) else ():
                for a in ("one_shot",) + (("lamport",) if "tritium lamport" in cases else ()):
                    cases[f"tritium {a} t{'w'.join(map(str, tile[:2]))}{'p%d' % tile[2] if len(tile) > 2 else ''}"] = (
                        lambda a=a, tile=tile: _with_tile(comm, tile, lambda: comm.all_reduce(x, out=out, algorithm=a)))
            cases["nccl"] = lambda: dist.all_reduce(out)
            sm = _symm_mem(x) if device.type == "cuda" else None
            if sm is not None:
                cases["symm one_shot"], cases["symm two_shot"] = sm
            errs = []
            for fn in (lambda: comm.all_reduce(x, out=out), lambda: comm.all_reduce(hx, out=out, algorithm="one_shot"),
                       lambda: comm.all_reduce(hy.copy_(x), out=hy, algorithm="two_shot")):
                fn()
                _sync(device)
                got = hy if len(errs) == 2 else out
                errs.append(((got.float() - want.float()).norm() / want.float().norm()).item())
            comm.check()
            row["tritium_rel_err"] = max(errs)
            for name, fn in cases.items():
                fn()
                row[f"{name} us"] = ranked_us(fn, device, iters, reps)
                row[f"{name} graph us"] = ranked_graph_us(fn, device, iters, reps)
            comm.check()
            row["algorithm_auto"] = coll.select_all_reduce(nbytes, world_size, dtype, comm.lamport_bytes)
            t_nccl = row["nccl graph us"] or row["nccl us"]
            for name in ("tritium auto", "nccl"):
                t = row[f"{name} graph us"] or row[f"{name} us"]
                row[f"{name} busbw GB/s"] = 2 * (world_size - 1) / world_size * nbytes / t / 1e3
            row["tritium/nccl (graph)"] = (row["tritium auto graph us"] or row["tritium auto us"]) / t_nccl
            # all-gather and reduce-scatter: per-rank input of nbytes / world_size (gathered: nbytes)
            chunk = x[: n // world_size * world_size]
            part = chunk[: n // world_size]
            gathered = torch.empty_like(chunk)
            scattered = torch.empty_like(part)
            hpart = heap_x[:part.numel() * part.element_size()].view(dtype).copy_(part)
            hchunk = heap_y[:chunk.numel() * chunk.element_size()].view(dtype).copy_(chunk)
            gather_cases = {"tritium all_gather": lambda: comm.all_gather(part, out=gathered),
                            "tritium all_gather heap": lambda: comm.all_gather(hpart, out=gathered),
                            "tritium reduce_scatter heap": lambda: comm.reduce_scatter(hchunk, out=scattered),
                            "nccl all_gather": lambda: dist.all_gather_into_tensor(gathered, part),
                            "tritium reduce_scatter": lambda: comm.reduce_scatter(chunk, out=scattered),
                            "nccl reduce_scatter": lambda: dist.reduce_scatter_tensor(scattered, chunk)}
            if device.type != "cuda":  # gloo has neither
                gather_cases = {k: v for k, v in gather_cases.items() if k.startswith("tritium")}
            for name, fn in gather_cases.items():
                fn()
                t = ranked_graph_us(fn, device, iters, reps) or ranked_us(fn, device, iters, reps)
                row[f"{name} us"] = t
                row[f"{name} busbw GB/s"] = (world_size - 1) / world_size * chunk.numel() * chunk.element_size() / t / 1e3
            comm.check()
            rows.append(row)
            if rank == 0:
                print(f"  {row['size']:>5}: tritium {row['tritium auto graph us'] or row['tritium auto us']:.1f} us "
                      f"(one {row['tritium one_shot graph us'] or row['tritium one_shot us']:.1f}, two "
                      f"{row['tritium two_shot graph us'] or row['tritium two_shot us']:.1f}), nccl "
                      f"{row['nccl graph us'] or row['nccl us']:.1f} us", flush=True)
        fused = []
        for tokens in (1, 8, 64):
            x = torch.randn(tokens, hidden, device=device).to(dtype)
            residual = torch.randn_like(x)
            weight = torch.ones(hidden, device=device, dtype=dtype)
            out = torch.empty_like(x)
            fns = {"all_reduce": lambda: comm.all_reduce(x, out=out),
                   "all_reduce_rms_norm": lambda: comm.all_reduce_rms_norm(x, residual, weight, 1e-5, out=out),
                   "all_reduce_rms_norm no-pdl": lambda: _no_pdl(
                       comm, lambda: comm.all_reduce_rms_norm(x, residual, weight, 1e-5, out=out)),
                   "all_reduce_rms_norm flags": lambda: _flag_protocol(
                       comm, lambda: comm.all_reduce_rms_norm(x, residual, weight, 1e-5, out=out))}
            entry = {"tokens": tokens, "hidden": hidden}
            for name, fn in fns.items():
                fn()
                entry[f"{name} us"] = ranked_graph_us(fn, device, iters, reps) or ranked_us(fn, device, iters, reps)
            entry["extra us"] = entry["all_reduce_rms_norm us"] - entry["all_reduce us"]
            fused.append(entry)
        comm.check()
        if rank == 0:
            import json

            with open(path, "w") as f:
                json.dump({"all_reduce": rows, "all_reduce_rms_norm": fused}, f)
    finally:
        heap.close()


def run(args) -> dict:
    gpus, world_size = ranks(args.world_size)
    sizes = args.sizes or size_list(DEFAULT_SIZES if gpus else "1K,4K")
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        shmem.launch(_worker, world_size, sizes, args.iters, args.reps, path, args.tiles, timeout=args.timeout)
        import json

        with open(path) as f:
            data = json.load(f)
    finally:
        os.unlink(path)
    result = {"header": header(), "suite": "collectives", "world_size": world_size, "dtype": "bf16" if gpus else "fp32",
              "iters": args.iters, "reps": args.reps, **data}
    cols = ["size", "tritium auto graph us", "tritium lamport graph us", "tritium one_shot graph us",
            "tritium two_shot graph us", "tritium one_shot heap graph us", "tritium two_shot heap graph us",
            "tritium no-pdl graph us",
            "nccl graph us",
            "symm one_shot graph us", "symm two_shot graph us", "tritium/nccl (graph)", "tritium auto busbw GB/s",
            "nccl busbw GB/s", "tritium all_gather busbw GB/s", "tritium all_gather heap busbw GB/s",
            "nccl all_gather busbw GB/s", "tritium reduce_scatter busbw GB/s", "tritium reduce_scatter heap busbw GB/s",
            "nccl reduce_scatter busbw GB/s"]
    if not gpus:
        cols = ["size", "tritium auto us", "tritium one_shot us", "tritium two_shot us", "nccl us"]
    h = result["header"]
    print_table(data["all_reduce"], cols, title=f"collectives: {world_size} ranks | {h.get('gpu') or 'cpu'}, "
                f"torch {h['torch']}, triton {h['triton']}, {h['date']}")
    extra = sorted({k for r in data["all_reduce"] for k in r if re.search(r" t\d+w\d+(p\d+)? graph us$", k)})
    if extra and gpus:
        print_table(data["all_reduce"], ["size"] + extra, title="tile variants (us, graphs)")
    print_table(data["all_reduce_rms_norm"], ["tokens", "hidden", "all_reduce us", "all_reduce_rms_norm us", "extra us",
                                                "all_reduce_rms_norm no-pdl us",
                                                "all_reduce_rms_norm flags us"],
                title="all_reduce + residual + RMSNorm (fused) vs all_reduce alone")
    return result
