"""Weight-only FP8 projections on one GPU: which product serves each row count.

For Llama-3-8B's four layer projections, at M rows: bf16 cuBLAS (the anchor), the fp8 GEMV's best config
(M <= 4), tritium's matmul converting the fp8 weight tile by tile, and the weight dequantized to bf16 then
cuBLAS; graph replays over 8 weight copies (no weight from L2), five interleaved rounds. Prints and writes
JSON (--out). Usage: PYTHONPATH=src python bench/probe_fp8_linear.py [--out FILE]
"""

import argparse
import json

import torch
import torch.nn.functional as F

from tritium.bench.common import copy_bandwidth_tbs, header, interleaved_ms
from tritium.fused.matmul import matmul
from tritium.ops.gemv import CONFIGS, gemv
from tritium.ops.quant import dequantize, quantize_rows

SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
MS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 2048)
COPIES = 8


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)
    p.add_argument("--ms", default=",".join(map(str, MS)))
    args = p.parse_args()
    dev = torch.device("cuda")
    result = {"header": header(dev), "copy_tbs": copy_bandwidth_tbs(), "copies": COPIES, "rows": []}
    for name, (n, k) in SHAPES.items():
        ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) / k ** 0.5 for _ in range(COPIES)]
        qs = [quantize_rows(w) for w in ws]
        scratch = torch.empty(n, k, device=dev, dtype=torch.bfloat16)
        for m in map(int, args.ms.split(",")):
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            ref = F.linear(x, dequantize(*qs[0], torch.bfloat16))
            err = lambda y: ((y.float() - ref.float()).norm() / ref.float().norm()).item()  # noqa: E731
            fns = {"cublas_bf16": lambda: [F.linear(x, w) for w in ws],
                   "matmul_fp8": lambda: [matmul(x, w8.t(), b_scale=s) for w8, s in qs],
                   "dequant_cublas": lambda: [F.linear(x, scratch.copy_(w8).mul_(s[:, None])) for w8, s in qs]}
            errors = {"matmul_fp8": err(matmul(x, qs[0][0].t(), b_scale=qs[0][1]))}
            if m <= 4:
                best = None
                for cfg in CONFIGS:
                    try:
                        e = err(gemv(x, qs[0][0], config=cfg, scale=qs[0][1]))
                    except Exception:
                        continue
                    if e > 2e-2:
                        continue
                    fns[f"gemv_fp8 {cfg}"] = (lambda c=cfg: [gemv(x, w8, config=c, scale=s) for w8, s in qs])
                times, _ = interleaved_ms(fns, graph=True, rounds=1, rep_ms=40)
                gemvs = {kk: v for kk, v in times.items() if kk.startswith("gemv_fp8")}
                best = min(gemvs, key=gemvs.get)
                fns = {kk: v for kk, v in fns.items() if not kk.startswith("gemv_fp8") or kk == best}
            times, errs = interleaved_ms(fns, graph=True, rounds=5, rep_ms=60)
            per = {kk: round(v / COPIES * 1e3, 2) for kk, v in times.items()}
            row = {"shape": name, "n": n, "k": k, "m": m, "us": per, "errors": errs, "rel_err": errors,
                   "fp8_tbs": {kk: round(n * k / (v / COPIES * 1e-3) / 1e12, 3) for kk, v in times.items()
                               if kk != "cublas_bf16"},
                   "bf16_tbs": round(2 * n * k / (times["cublas_bf16"] / COPIES * 1e-3) / 1e12, 3)}
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
