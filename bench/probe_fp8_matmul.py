"""Weight-only FP8 products at decode batch sizes: tritium's matmul as ``C^T = W A^T`` (the converted fp8 weight
the MMA's first operand, ``weight_a``) against the same matmul with the weight as the second operand, the fp8
GEMV's best candidate (M <= 4) and bf16 cuBLAS, on Llama-3-8B's projections; graph replays over 8 weight
copies, three interleaved rounds. Usage: PYTHONPATH=src python bench/probe_fp8_matmul.py [--out FILE]
"""

import argparse
import json

import torch
import torch.nn.functional as F

from tritium.bench.common import header, interleaved_ms
from tritium.fused.matmul import matmul, select_config
from tritium.ops.gemv import GemvConfig, gemv
from tritium.ops.quant import dequantize, quantize_rows

SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
# the fp8 GEMV's start-up picks on the H200 (engine-fp8-NVIDIA-H200.json) at 1 / 2 / 4 rows
GEMV = {1: GemvConfig(8, 256, 4, flat=True), 2: GemvConfig(4, 512, 4, flat=True), 4: GemvConfig(16, 256, 4)}
COPIES = 8


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)
    p.add_argument("--ms", default="1,2,4,8,16,64")
    args = p.parse_args()
    dev = torch.device("cuda")
    result = {"header": header(dev), "copies": COPIES, "rows": []}
    for name, (n, k) in SHAPES.items():
        ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) / k ** 0.5 for _ in range(COPIES)]
        qs = [quantize_rows(w) for w in ws]
        for m in map(int, args.ms.split(",")):
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            ref = F.linear(x, dequantize(*qs[0], torch.bfloat16)).float()
            old = select_config(m, n, k, torch.bfloat16, dev)
            fns = {"cublas_bf16": lambda: [F.linear(x, w) for w in ws],
                   "matmul_fp8_weight_a": lambda: [matmul(x, w8.t(), b_scale=s) for w8, s in qs],
                   "matmul_fp8_weight_b": lambda: [matmul(x, w8.t(), b_scale=s, config=old) for w8, s in qs]}
            if m in GEMV:
                fns["gemv_fp8"] = lambda: [gemv(x, w8, config=GEMV[m], scale=s) for w8, s in qs]
            errs = {}
            for key, fn in fns.items():
                if key != "cublas_bf16":
                    y = fn()[0]
                    errs[key] = ((y.float() - ref).norm() / ref.norm()).item()
            times, failed = interleaved_ms(fns, graph=True, rounds=3, rep_ms=40)
            row = {"shape": name, "n": n, "k": k, "m": m,
                   "us": {kk: round(v / COPIES * 1e3, 2) for kk, v in times.items()}, "rel_err": errs,
                   "failed": failed}
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                with open(args.out, "w") as f:
                    json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
