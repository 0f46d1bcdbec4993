"""Probe: which way of asking L2 for a weight ahead of its GEMV actually lands it there in time?

`engine-ablate --prefetch-sweep` on the H200 (stop 57) read an o_proj GEMV at 27.9 us cold but 68.1 us
after `prefetch_l2` (bulk `cp.async.bulk.prefetch.L2`, 4 KiB a request) and 20 us of sleep: the bulk
requests were still queued when the GEMV's loads came. This times one o_proj-sized GEMV (33.5 MB, M=1)
after L2 is flushed, a fill of the weight, and a delay, for each fill:
  none; bulk (the shipped op); per-line `prefetch.global.L2` (plain and evict_last); a kernel that loads
  the weight and keeps only one float a program (plain and evict_last).
The fill's own time (events around its launch) is reported too; a hot GEMV (weight read just before) is
the floor.

    PYTHONPATH=src python bench/probe_l2_fill.py OUT.json
"""

import json
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from tritium.bench.common import header
from tritium.ops import gemv, prefetch_l2

MB = 1 << 20


@triton.jit
def _prefetch_lines_kernel(base_ptr, nbytes, BLOCK: tl.constexpr, EVICT_LAST: tl.constexpr):
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64) * 128
    offs = tl.where(offs < nbytes, offs, 0)
    if EVICT_LAST:
        tl.inline_asm_elementwise("prefetch.global.L2::evict_last [$1];\n\tmov.u32 $0, 0;", "=r,l",
                                  [base_ptr + offs], dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l",
                                  [base_ptr + offs], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _touch_kernel(ptr, out_ptr, n, BLOCK: tl.constexpr, EVICT_LAST: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVICT_LAST:
        x = tl.load(ptr + offs, mask=offs < n, other=0, eviction_policy="evict_last")
    else:
        x = tl.load(ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x, axis=0))


def main(path):
    dev = torch.device("cuda")
    w = torch.randn(4096, 4096, dtype=torch.bfloat16, device=dev)
    x = torch.randn(1, 4096, dtype=torch.bfloat16, device=dev)
    flush = torch.empty(512 * MB, dtype=torch.uint8, device=dev)
    nbytes = w.numel() * 2
    wi = w.view(torch.int32).view(-1)
    sink = torch.empty(4096, dtype=torch.int32, device=dev)

    def lines(evict_last):
        block = 1024
        _prefetch_lines_kernel[(triton.cdiv(nbytes // 128, block),)](w.view(torch.uint8), nbytes, BLOCK=block,
                                                                     EVICT_LAST=evict_last, num_warps=4)

    def touch(evict_last, block=8192, warps=8):
        _touch_kernel[(triton.cdiv(wi.numel(), block),)](wi, sink, wi.numel(), BLOCK=block, EVICT_LAST=evict_last,
                                                         num_warps=warps)

    fills = {"none": lambda: None, "bulk": lambda: prefetch_l2(w), "bulk evict_last": lambda: prefetch_l2(w, evict_last=True),
             "lines": lambda: lines(False), "lines evict_last": lambda: lines(True),
             "touch": lambda: touch(False), "touch evict_last": lambda: touch(True),
             "touch 2048x4": lambda: touch(False, 2048, 4)}
    gemvs = {"gemv": lambda: gemv(x, w), "cublas": lambda: F.linear(x, w)}
    for f in list(fills.values()) + list(gemvs.values()):
        f()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    rows = []
    for gname, g in gemvs.items():
        hot = []
        for _ in range(10):
            g()
            ev[0].record(); g(); ev[1].record(); torch.cuda.synchronize()
            hot.append(ev[0].elapsed_time(ev[1]) * 1e3)
        rows.append(dict(gemv=gname, fill="hot", delay_us=0, gemv_us=sorted(hot)[5]))
        for fname, fill in fills.items():
            for delay in (0, 5, 10, 20, 40):
                fill_us, g_us = [], []
                for _ in range(11):
                    flush.zero_()
                    ev[2].record(); fill(); ev[3].record()
                    if delay:
                        torch.cuda._sleep(int(delay * 1980))
                    ev[0].record(); g(); ev[1].record()
                    torch.cuda.synchronize()
                    fill_us.append(ev[2].elapsed_time(ev[3]) * 1e3)
                    g_us.append(ev[0].elapsed_time(ev[1]) * 1e3)
                row = dict(gemv=gname, fill=fname, delay_us=delay, fill_us=sorted(fill_us)[5], gemv_us=sorted(g_us)[5])
                rows.append(row)
                print(json.dumps(row), flush=True)
                if fname == "none":
                    break
    with open(path, "w") as f:
        json.dump(dict(header(dev), probe="l2_fill", weight_mb=nbytes / 1e6, rows=rows), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
