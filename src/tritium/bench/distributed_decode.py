"""Distributed flash decode (issue 18) against single-GPU paged attention and an NCCL all-gather, same run.

    python -m tritium.bench distributed_decode [--out FILE] [--world-size N] [--batches 1,4,16]
        [--contexts 128K,512K,1M] [--iters 20] [--reps 5] [--no-check] [--smoke]

GQA 32/8, head_dim 128, bf16, pages of 16 tokens in shuffled order; batch B of sequences whose total
context T is split evenly over the ranks (rank r holds tokens [r T / W, (r + 1) T / W) of each). One
process per GPU (``tritium.shmem.launch``, NCCL). Systems, per (B, T):

- **single**: ``tritium.attention.paged_attention`` on rank 0 over the whole cache (B T tokens), where
  it fits in rank 0's free memory (rank 0's part of the distributed cache is a view of it); skipped
  cases say why in ``single_skipped``;
- **fused**, **bulk**: :func:`tritium.fused.distributed_paged_decode` in those modes;
- **nccl**: the same partial and merge kernels with the partials all-gathered by
  ``torch.distributed`` (NCCL): ``mode="torch"``.

Timing: ``--iters`` calls captured in one CUDA graph, replayed, timed by CUDA events, median over
``--reps``, max over ranks, with a barrier before (``common.ranked_graph_us``: every rank replays the
same number; ``triton.testing.do_bench`` picks its count per process and hangs multi-rank code). The
single-GPU case is timed the same way on rank 0 alone while the others wait. Reported: microseconds,
aggregate KV read bandwidth (B T 8 128 2 2 bytes / time) against the sum of the GPUs' copy ceilings
(each rank times a 1 GiB device copy, bytes read + written, in the same run), and speedups of fused
over single, nccl and bulk (the issue's targets). Before timing (unless ``--no-check``), every mode is
checked against ``paged_attention`` on the concatenated cache (unequal and empty parts; plain and with
window, softcap, ALiBi and sinks), and each timed case's outputs against the single-GPU one.

Without GPUs (``--smoke``, or the Triton interpreter) it runs tiny shapes in fp16 on CPU ranks (gloo),
timed by the wall clock: a test that the suite runs, not a measurement.
"""

from __future__ import annotations

import json
import math
import os
import tempfile

import torch
import torch.distributed as dist

import tritium.collectives as coll
import tritium.fused as fused
import tritium.shmem as shmem
from tritium.attention import AttentionWorkspace, paged_attention
from tritium.bench.args import UsageError, int_list, integer, positive, ranks
from tritium.bench.collectives import size_list
from tritium.bench.common import copy_bandwidth_tbs, header, print_table, ranked_graph_us, ranked_us
from tritium.bench.jsonio import save_json
from tritium.fused.distributed_decode import MAX_SPLITS, DecodeConfig, select_decode_config
from tritium.runtime import interpreting, num_sms

GPU_SHAPE = dict(num_q_heads=32, num_kv_heads=8, head_dim=128, block=16)
SMOKE_SHAPE = dict(num_q_heads=4, num_kv_heads=2, head_dim=64, block=16)
SYSTEMS = ("single", "fused", "bulk", "nccl")
MODE_OF = {"fused": "fused", "bulk": "bulk", "nccl": "torch"}
TOL = {torch.bfloat16: 2e-2, torch.float16: 3e-3}
MEMORY_MARGIN = 4 << 30  # bytes rank 0 keeps free beside the whole cache (workspaces, graphs, NCCL)
# NOTE: targets of issue 18 (2x H200): fused B=1 T=512k >= 1.8x the single-GPU speed with >= 80% of the
# summed copy ceilings; fused >= 1.15x NCCL bulk on every case; fused faster than tritium bulk on every case.
TARGET_SPEEDUP_VS_SINGLE, TARGET_CEILING_FRACTION, TARGET_SPEEDUP_VS_NCCL = 1.8, 0.8, 1.15


def add_arguments(parser) -> None:
    parser.add_argument("--world-size", type=integer(1), default=None, help="ranks (default: the visible GPUs, >= 2)")
    parser.add_argument("--batches", type=int_list(1), default=None,
                        help="sequences per batch (default 1,4,16; smoke: 1,2)")
    parser.add_argument("--contexts", type=size_list, default=None, help="total tokens of each sequence, K = 1024 "
                        "(default 128K,512K,1M; smoke: 64 and 160 per rank)")
    parser.add_argument("--iters", type=integer(1), default=20, help="calls per CUDA graph")
    parser.add_argument("--reps", type=integer(1), default=5, help="timings per case (median)")
    parser.add_argument("--no-check", action="store_true", help="skip the correctness pass before timing")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny shapes, fp16 (what runs without GPUs, under the Triton interpreter)")
    parser.add_argument("--timeout", type=positive, default=600.0, help="seconds before a lost rank is an error")
    parser.add_argument("--sweep", action="store_true",
                        help="also time fused and bulk over partial-kernel configs (tile x stages x splits per SM) "
                             "in every case: rows' 'sweep' lists (tuning select_decode_config)")


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    err = ((got.float() - want.float()).norm() / max(want.float().norm().item(), 1e-12)).item()
    return float("nan") if math.isnan(err) or torch.isnan(got).any() else err


def _paged(dense_k: list, dense_v: list, device, generator) -> tuple:
    """(k_cache, v_cache, block_table, seq_lens) holding each sequence's dense ``[n, kv_heads, head_dim]``
    K/V in pages of ``block`` tokens in shuffled order (each row as wide as the longest sequence needs)."""
    block = GPU_SHAPE["block"]
    pages = [-(-k.shape[0] // block) for k in dense_k]
    width, num_blocks = max(max(pages), 1), max(sum(pages), 1)
    shape = (num_blocks, block, *dense_k[0].shape[1:])
    k_cache = torch.zeros(shape, dtype=dense_k[0].dtype, device=device)
    v_cache = torch.zeros_like(k_cache)
    perm = torch.randperm(num_blocks, generator=generator, device=device).int()
    table = torch.zeros(len(dense_k), width, dtype=torch.int32, device=device)
    used = 0
    for s, (k, v, n) in enumerate(zip(dense_k, dense_v, pages)):
        ids = perm[used:used + n]
        table[s, :n] = ids
        used += n
        for cache, x in ((k_cache, k), (v_cache, v)):
            padded = torch.zeros(n * block, *x.shape[1:], dtype=x.dtype, device=device)
            padded[:x.shape[0]] = x
            cache[ids.long()] = padded.view(n, block, *x.shape[1:])
    lens = torch.tensor([k.shape[0] for k in dense_k], dtype=torch.int32, device=device)
    return k_cache, v_cache, table, lens


def _check(rank: int, world: int, comm, ws, shape: dict, totals: list, dtype, device) -> dict:
    """Every mode against ``paged_attention`` on the concatenated cache, plain and with every feature:
    unequal parts, rank 0's part of sequence 1 empty. Returns {case: {mode: relative error}}."""
    hq, hkv, d = shape["num_q_heads"], shape["num_kv_heads"], shape["head_dim"]
    g = torch.Generator(device=device).manual_seed(11)  # same values on every rank
    dense_k = [torch.randn(n, hkv, d, generator=g, device=device).to(dtype) for n in totals]
    dense_v = [torch.randn(n, hkv, d, generator=g, device=device).to(dtype) for n in totals]
    q = torch.randn(len(totals), hq, d, generator=g, device=device).to(dtype)
    cuts = []  # per sequence: world + 1 cut points, increasing weights per rank
    for s, n in enumerate(totals):
        w = torch.rand(world, generator=g, device=device).cpu() + torch.arange(world) * 0.5
        if s == 1 and world > 1:
            w[0] = 0.0
        c = [0] + [int(n * x) for x in (w.cumsum(0) / w.sum())[:-1].tolist()] + [n]
        cuts.append(c)
    features = {"plain": {}, "window+softcap+alibi+sinks": {
        "sliding_window": max(totals) // 3, "softcap": 30.0,
        "alibi_slopes": torch.rand(hq, generator=g, device=device) / 64,
        "sinks": torch.randn(hq, generator=g, device=device)}}
    full = _paged(dense_k, dense_v, device, g)
    # last: the pages of a rank's part are shuffled with as many draws as it has pages
    part = _paged([k[c[rank]:c[rank + 1]] for k, c in zip(dense_k, cuts)],
                  [v[c[rank]:c[rank + 1]] for v, c in zip(dense_v, cuts)], device, g)
    cu = torch.arange(len(totals) + 1, dtype=torch.int32, device=device)
    result = {}
    for case, kw in features.items():
        want = paged_attention(q, *full, cu, max_seqlen_q=1, max_seqlen_k=max(totals), **kw)
        result[case] = {}
        for system, mode in MODE_OF.items():
            got = fused.distributed_paged_decode(q, *part, comm, mode=mode, workspace=ws, **kw)
            err = _rel_err(got, want)
            err = torch.tensor([math.inf if math.isnan(err) else err], dtype=torch.float64, device=device)
            dist.all_reduce(err, op=dist.ReduceOp.MAX)
            result[case][system] = float(err.item())
    comm.check()
    return result


def _local_us(fn, device, iters: int, reps: int) -> float:
    """Rank-local timing (no collectives): ``iters`` calls in a CUDA graph, replays timed by CUDA events,
    median of ``reps``, per call; the wall clock on the CPU."""
    if device.type != "cuda":
        import time

        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            times.append((time.perf_counter() - t0) * 1e6 / iters)
        return sorted(times)[len(times) // 2]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iters):
            fn()
    graph.replay()
    times = []
    for _ in range(reps):
        torch.cuda.synchronize(device)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / iters)
    del graph
    return sorted(times)[len(times) // 2]


def _copy_tbs(device, nbytes: int = 2 << 30) -> float | None:
    """This GPU's device-to-device copy of ``nbytes``, bytes read plus written per second, in TB/s."""
    if device.type != "cuda":
        return None
    # NOTE: eager, as every suite measures it (bench.common): the same copy captured in a CUDA graph read
    # 2.71 TB/s on an H200 (a graph memcpy node) against 4.25 eager
    with torch.cuda.device(device):
        return copy_bandwidth_tbs(nbytes)


def _sweep_configs(batch: int, hkv: int, device) -> list:
    """Partial-kernel configs of ``--sweep``: 64/128-key tiles x 2-4 stages x 1-4 programs per SM."""
    sms = num_sms(device) if device.type == "cuda" else 4
    splits = sorted({max(1, min(MAX_SPLITS, per_sm * sms // (batch * hkv))) for per_sm in (1, 2, 3, 4)})
    return [DecodeConfig(tile_n=t, num_splits=n, num_warps=4, num_stages=st)
            for t in (64, 128) for st in (2, 3, 4) for n in splits]


def _case(rank: int, world: int, comm, ws, shape: dict, batch: int, total: int, dtype, device, iters: int,
          reps: int, sweep: bool = False) -> dict:
    """One (batch, context) case: caches built, every system timed. Rank 0's part of the cache is a view of
    the whole cache when the single-GPU case fits, so the case needs no more memory than the whole cache."""
    hq, hkv, d, block = shape["num_q_heads"], shape["num_kv_heads"], shape["head_dim"], shape["block"]
    esize = torch.tensor([], dtype=dtype).element_size()
    token_bytes = 2 * hkv * d * esize  # K and V of one token
    local = total // world
    row = {"batch": batch, "context": total, "tokens_per_rank": local, "kv_bytes": batch * total * token_bytes}
    # every rank must hold its part; rank 0 may hold the whole cache for the single-GPU case
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the previous case's cache
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else 1 << 62
    part_fits = torch.tensor([int(batch * local * token_bytes + MEMORY_MARGIN <= free)], device=device)
    whole_fits = torch.tensor([int(batch * total * token_bytes + MEMORY_MARGIN <= free)], device=device)
    dist.all_reduce(part_fits, op=dist.ReduceOp.MIN)
    dist.broadcast(whole_fits, 0)  # rank 0's answer
    if not part_fits.item():
        row["skipped"] = f"a rank's part ({batch * local * token_bytes / 2**30:.1f} GiB) does not fit"
        return row
    single = bool(whole_fits.item())
    if not single:
        row["single_skipped"] = (f"the whole cache ({batch * total * token_bytes / 2**30:.1f} GiB) does not fit in "
                                 f"rank 0's free memory ({free / 2**30:.1f} GiB) with {MEMORY_MARGIN >> 30} GiB spare")
    g = torch.Generator(device=device).manual_seed(1234 + batch + total)
    q = torch.randn(batch, hq, d, generator=g, device=device).to(dtype)  # same q on every rank
    # rank r's part: pages_local pages per sequence, filled from generators seeded by r; rank 0's whole cache
    # (single-GPU case) holds every rank's part, filled the same way, so it is the concatenation exactly
    pages_local = local // block
    parts = range(world) if rank == 0 and single else [rank]
    k_cache = torch.empty(len(parts) * batch * pages_local, block, hkv, d, device=device, dtype=dtype)
    v_cache = torch.empty_like(k_cache)
    tables = []
    for i, r in enumerate(parts):
        chunk = slice(i * batch * pages_local, (i + 1) * batch * pages_local)
        gr = torch.Generator(device=device).manual_seed(99 + r)
        k_cache[chunk].normal_(generator=gr)
        v_cache[chunk].normal_(generator=gr)
        perm = torch.randperm(batch * pages_local, generator=gr, device=device).int()
        tables.append(perm.view(batch, pages_local) + chunk.start)
    part_table = tables[0].contiguous()  # this rank's part (on rank 0, the first chunk of the whole cache)
    lens = torch.full((batch,), local, dtype=torch.int32, device=device)
    outs = {s: torch.empty_like(q) for s in SYSTEMS}
    calls = {s: (lambda m=m, o=outs[s]: fused.distributed_paged_decode(q, k_cache, v_cache, part_table, lens, comm,
                                                                       out=o, workspace=ws, mode=m))
             for s, m in MODE_OF.items()}
    if single:  # rank 0 alone; the others wait
        if rank == 0:
            table = torch.cat(tables, dim=1).contiguous()  # [batch, world * pages_local]
            cu = torch.arange(batch + 1, dtype=torch.int32, device=device)
            full_lens = torch.full((batch,), world * local, dtype=torch.int32, device=device)
            aws = AttentionWorkspace(batch, hq, d, device=device)

            def one():
                paged_attention(q, k_cache, v_cache, table, full_lens, cu, max_seqlen_q=1,
                                max_seqlen_k=world * local, out=outs["single"], workspace=aws)

            one()
            row["single us"] = _local_us(one, device, iters, reps)
        dist.barrier()
    for s, fn in calls.items():
        fn()  # compile and warm up outside the timing
        row[f"{s} us"] = ranked_graph_us(fn, device, iters, reps) or ranked_us(fn, device, iters, reps)
    comm.check()
    if sweep:
        row["default_config"] = vars(select_decode_config(batch, hkv, d, dtype, device))
        row["sweep"] = []
        for cfg in _sweep_configs(batch, hkv, device):
            entry = dict(vars(cfg))
            for s in ("fused", "bulk"):
                def fn(m=MODE_OF[s], o=outs[s]):
                    fused.distributed_paged_decode(q, k_cache, v_cache, part_table, lens, comm, out=o, workspace=ws,
                                                   mode=m, config=cfg)
                fn()
                entry[f"{s} us"] = ranked_graph_us(fn, device, iters, reps) or ranked_us(fn, device, iters, reps)
            comm.check()
            row["sweep"].append(entry)
    if single:  # the last replay's outputs against the single-GPU one (rank 0; every rank gets the same)
        errs = torch.tensor([_rel_err(outs[s], outs["single"]) for s in MODE_OF], dtype=torch.float64, device=device)
        dist.broadcast(errs, 0)
        row["rel_err_vs_single"] = dict(zip(MODE_OF, errs.tolist()))
    return row


def _worker(rank: int, world: int, cfg: dict, path: str) -> None:
    gpu = not interpreting()
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    dtype = torch.bfloat16 if gpu and not cfg["smoke"] else torch.float16
    shape = SMOKE_SHAPE if cfg["smoke"] else GPU_SHAPE
    hq, hkv, d = shape["num_q_heads"], shape["num_kv_heads"], shape["head_dim"]
    max_batch = max(cfg["batches"] + [len(cfg["check_totals"])])
    max_splits = MAX_SPLITS if cfg["sweep"] else select_decode_config(1, hkv, d, dtype, device).num_splits
    # room for the default splits of every batch size (the most at batch 1), or any of the sweep's
    max_bytes = fused.DistributedDecodeWorkspace.message_bytes(max_batch, hq, d, max_splits)
    heap = shmem.SymmetricHeap(coll.Communicator.heap_bytes(max_bytes, world) + (16 << 20)
                               + fused.DistributedDecodeWorkspace.heap_bytes(max_batch, hq, d, world, max_splits))
    comm = coll.Communicator(heap, max_bytes=max_bytes)
    ws = fused.DistributedDecodeWorkspace(comm, max_batch, hq, d, max_splits=max_splits)
    result = {"rows": []}
    try:
        copy = [None] * world
        dist.all_gather_object(copy, _copy_tbs(device))
        result["copy_tbs_per_rank"] = copy
        if cfg["check"]:
            result["check"] = _check(rank, world, comm, ws, shape, cfg["check_totals"], dtype, device)
            if rank == 0:
                print(f"  check (relative error vs paged_attention, max over ranks): {result['check']}", flush=True)
        for batch in cfg["batches"]:
            for total in cfg["contexts"]:
                row = _case(rank, world, comm, ws, shape, batch, total, dtype, device, cfg["iters"], cfg["reps"],
                            cfg["sweep"])
                result["rows"].append(row)
                if rank == 0:
                    print(f"  B={batch} T={total}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()
                                                                  if k.endswith(" us") and v is not None), flush=True)
                    for key in ("fused us", "bulk us") if row.get("sweep") else ():
                        best = min(row["sweep"], key=lambda e: e[key])
                        print(f"    sweep best {key[:-3]}: {best[key]:.1f} us with tile {best['tile_n']}, stages "
                              f"{best['num_stages']}, splits {best['num_splits']} (default "
                              f"{row['default_config']})", flush=True)
                    save_json(result, path)  # a run cut short keeps the cases it measured
        result["complete"] = True
        if rank == 0:
            save_json(result, path)
    finally:
        heap.close()


def _ratio(a, b):
    return a / b if a is not None and b else None


def _derive(result: dict) -> None:
    """Bandwidths, ceiling fractions, speedups of fused, and the issue's targets (None: not measured)."""
    copies = result.get("copy_tbs_per_rank") or []
    ceiling = sum(copies) if copies and None not in copies else None
    result["copy_ceiling_sum_tbs"] = ceiling
    for row in result["rows"]:
        for s in SYSTEMS:
            us = row.get(f"{s} us")
            row[f"{s} TB/s"] = row["kv_bytes"] / (us * 1e-6) / 1e12 if us else None
        row["fused fraction of summed ceilings"] = _ratio(row["fused TB/s"], ceiling)
        row["single fraction of its ceiling"] = _ratio(row["single TB/s"], copies[0] if copies else None)
        for s in ("single", "nccl", "bulk"):
            row[f"fused speedup vs {s}"] = _ratio(row.get(f"{s} us"), row.get("fused us"))
    rows = [r for r in result["rows"] if r.get("fused us")]
    on_gpu = result["header"].get("gpu") is not None and not result["smoke"]
    b1 = next((r for r in rows if r["batch"] == 1 and r["context"] == 512 * 1024), None)

    def all_at_least(key, limit):
        values = [r.get(key) for r in rows]
        return None if not values or None in values else all(v >= limit for v in values)

    targets = {
        f"fused B=1 512k speedup vs single >= {TARGET_SPEEDUP_VS_SINGLE}":
            None if b1 is None or b1.get("fused speedup vs single") is None
            else b1["fused speedup vs single"] >= TARGET_SPEEDUP_VS_SINGLE,
        f"fused B=1 512k >= {TARGET_CEILING_FRACTION:.0%} of the summed copy ceilings":
            None if b1 is None or b1.get("fused fraction of summed ceilings") is None
            else b1["fused fraction of summed ceilings"] >= TARGET_CEILING_FRACTION,
        f"fused speedup vs nccl >= {TARGET_SPEEDUP_VS_NCCL} on every case":
            all_at_least("fused speedup vs nccl", TARGET_SPEEDUP_VS_NCCL),
        "fused faster than tritium bulk on every case": all_at_least("fused speedup vs bulk", 1.0 + 1e-9),
    }
    result["targets"] = targets if on_gpu else dict.fromkeys(targets)


def run(args) -> dict:
    gpus, world = ranks(args.world_size)
    smoke = args.smoke or not gpus
    if smoke and gpus == 0 and not interpreting():
        raise UsageError("no GPU: run with TRITON_INTERPRET=1 (CPU ranks under the Triton interpreter)")
    shape = SMOKE_SHAPE if smoke else GPU_SHAPE
    step = shape["block"] * world  # every rank's part a whole number of pages
    contexts = args.contexts or ([64 * world, 160 * world] if smoke else size_list("128K,512K,1M"))
    contexts = [-(-c // step) * step for c in contexts]  # rounded up
    batches = args.batches or ([1, 2] if smoke else [1, 4, 16])
    cfg = {"smoke": smoke, "check": not args.no_check, "batches": batches, "contexts": contexts,
           "check_totals": [70, 33, 5] if smoke else [20011, 4099, 333],
           "iters": 1 if smoke else args.iters, "reps": 1 if smoke else args.reps, "sweep": args.sweep}
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    error = None
    try:
        shmem.launch(_worker, world, cfg, path, timeout=args.timeout)
    except Exception as e:  # keep what was measured before the failure (the JSON says complete: false)
        error = f"{type(e).__name__}: {e}"
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError):
        result = {}
    finally:
        os.unlink(path)
    if error is not None and not result.get("rows"):
        raise RuntimeError(f"distributed_decode bench failed before any case was measured: {error}")
    result.setdefault("complete", False)
    if error is not None:
        result["error"] = error
    result = {"header": header(), "suite": "distributed_decode", "world_size": world, "smoke": smoke,
              "dtype": "fp16" if smoke or not gpus else "bf16", "shape": shape, "iters": cfg["iters"],
              "reps": cfg["reps"], **result}
    _derive(result)
    tol = TOL[torch.float16 if result["dtype"] == "fp16" else torch.bfloat16]
    errors = [e for case in (result.get("check") or {}).values() for e in case.values()]
    errors += [e for row in result["rows"] for e in (row.get("rel_err_vs_single") or {}).values()]
    result["check_tolerance"] = tol
    result["check_passed"] = all(e <= tol for e in errors) if errors else None  # NaN fails
    h = result["header"]
    cols = ["batch", "context", "single us", "fused us", "bulk us", "nccl us", "single TB/s", "fused TB/s",
            "fused fraction of summed ceilings", "fused speedup vs single", "fused speedup vs nccl",
            "fused speedup vs bulk"]
    ceiling = result["copy_ceiling_sum_tbs"]
    print_table(result["rows"], cols, title=(
        f"distributed decode: {world} ranks, {result['dtype']}, GQA {shape['num_q_heads']}/{shape['num_kv_heads']}, "
        f"head_dim {shape['head_dim']} | {h.get('gpu') or 'cpu'}, torch {h['torch']}, triton {h['triton']}, "
        f"{h['date']}" + (f"\nsummed copy ceilings {ceiling:.2f} TB/s" if ceiling else "")))
    for row in result["rows"]:
        for key in ("skipped", "single_skipped"):
            if key in row:
                print(f"B={row['batch']} T={row['context']}: {key.replace('_', ' ')}: {row[key]}")
    for k, v in result["targets"].items():
        print(f"target {k}: {'not measured' if v is None else 'met' if v else 'NOT met'}")
    if error is not None:
        print(f"INCOMPLETE: {error}")
    if result["check_passed"] is False:
        print(f"CHECK FAILED: a relative error above {tol} (check, rel_err_vs_single): the timings are not of a "
              f"correct kernel")
    return result
