"""The LM head at the row counts of a prompt-scoring chunk (GPU): ``F.linear`` (cuBLAS) of M rows by a
[vocab, hidden] weight, as `runner._score_prompt` calls it, against the weight's read and the matmul's flops.

    PYTHONPATH=src python bench/probe_lm_head.py [--vocab 128256] [--hidden 4096] [--rows 64,...] [--out FILE]

Stop 60's profile had cuBLAS at 2.62 ms for a 256-row chunk of Llama-3-8B's head where 32k rows took 45 ms in one
call (0.35 ms a 256 rows): is the kernel choice at M = 256 slow, and which chunk size is not?
"""

import argparse
import json

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from tritium.bench.common import header


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--rows", default="1,64,128,192,256,320,384,512,768,1024,2048,4096,8192")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dev = torch.device("cuda")
    w = torch.randn(args.vocab, args.hidden, device=dev, dtype=torch.bfloat16) / args.hidden ** 0.5
    rows = [int(r) for r in args.rows.split(",")]
    xs = {m: torch.randn(m, args.hidden, device=dev, dtype=torch.bfloat16) for m in rows}
    outs = {m: torch.empty(m, args.vocab, device=dev, dtype=torch.bfloat16) for m in rows}
    # correctness of the call timed: against an fp32 product on a few rows
    ref = xs[rows[-1]][:8].float() @ w.float().t()
    got = F.linear(xs[rows[-1]][:8], w).float()
    err = (got - ref).abs().max().item()
    assert err < 0.05, f"F.linear off by {err}"
    result = {"header": header(dev), "vocab": args.vocab, "hidden": args.hidden, "rows": {}}
    read_ms = None
    for rnd in range(3):
        for m in rows:
            ms = do_bench(lambda: torch.matmul(xs[m], w.t(), out=outs[m]), warmup=10, rep=60)
            result["rows"].setdefault(str(m), []).append(ms)
        read_ms = do_bench(lambda: w.sum(dtype=torch.float32), warmup=5, rep=40)
    for m in rows:
        ms = sorted(result["rows"][str(m)])[1]
        tflops = 2 * m * args.vocab * args.hidden / ms / 1e9
        print(f"M={m:5d} {ms:8.3f} ms  {ms / m * 256:7.3f} ms per 256 rows  {tflops:6.1f} TFLOP/s  "
              f"{ms / read_ms:5.2f}x the weight's read")
    result["weight_read_ms"] = read_ms
    print(f"weight read (sum) {read_ms:.3f} ms")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
