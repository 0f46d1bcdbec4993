"""FP8 projections on one GPU: which product serves each row count, weight-only and W8A8.

For Llama-3-8B's four layer projections, at M rows: bf16 cuBLAS (the anchor); weight-only fp8 (the GEMV's
best config at M <= 4, tritium's matmul converting the weight tile by tile, the weight dequantized in one pass
then cuBLAS); W8A8 (``quantization="fp8-dynamic"``): the whole linear as the engine runs it (per-token
activation quantization + tritium's fp8 x fp8 matmul), the matmul alone under each candidate config of
FP8_CONFIGS, and torch's ``_scaled_mm`` with row-wise scales (cuBLASLt / CUTLASS, the fp8 anchor) on the
same quantized operands. Graph replays over 8 weight copies (no weight from L2), five interleaved rounds;
each output checked against the fp32 reference first. Prints and writes JSON (--out).
Usage: PYTHONPATH=src python bench/probe_fp8_linear.py [--out FILE] [--ms 1,4,...] [--shapes qkv,o,...]
"""

import argparse
import dataclasses
import json

import torch
import torch.nn.functional as F

from tritium.bench.common import copy_bandwidth_tbs, header, interleaved_ms
from tritium.fused.matmul import MatmulConfig, decode_split_k, matmul, select_config
from tritium.models.linear import quantized_linear
from tritium.ops.act_quant import quantize_activations_fp8
from tritium.ops.dequant import dequantize_fp8
from tritium.ops.gemv import CONFIGS, gemv
from tritium.ops.quant import dequantize, dynamic_linear, quantize_rows
from tritium.runtime import num_sms

SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
MS = (1, 4, 16, 64, 256, 2048)
COPIES = 8
# W8A8 matmul candidates: decode tiles (split-K by decode_split_k) up to 64 rows, large tiles above
FP8_DECODE = (MatmulConfig(64, 128, 128, num_warps=4, num_stages=4),
              MatmulConfig(64, 128, 256, num_warps=4, num_stages=4),
              MatmulConfig(64, 64, 256, num_warps=4, num_stages=6),
              MatmulConfig(16, 128, 256, num_warps=4, num_stages=5))
FP8_LARGE = (MatmulConfig(128, 256, 64, num_warps=8, num_stages=3, epilogue_split=2),
             MatmulConfig(128, 256, 128, num_warps=8, num_stages=3, epilogue_split=2),
             MatmulConfig(128, 256, 128, num_warps=8, num_stages=4, epilogue_split=2),
             MatmulConfig(128, 128, 128, num_warps=8, num_stages=4))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)
    p.add_argument("--ms", default=",".join(map(str, MS)))
    p.add_argument("--shapes", default=",".join(SHAPES))
    args = p.parse_args()
    dev = torch.device("cuda")
    sms = num_sms(dev)
    result = {"header": header(dev), "copy_tbs": copy_bandwidth_tbs(), "copies": COPIES, "rows": []}
    for name in args.shapes.split(","):
        n, k = SHAPES[name]
        ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) / k ** 0.5 for _ in range(COPIES)]
        qs = [quantize_rows(w) for w in ws]
        del ws
        scratch = torch.empty(n, k, device=dev, dtype=torch.bfloat16)
        for m in map(int, args.ms.split(",")):
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            x8, xs = quantize_activations_fp8(x)
            w8, s = qs[0]
            ref = F.linear(x.float(), dequantize(w8, s))
            ref_dyn = dynamic_linear(x.float(), w8, s)

            def err(y, r=ref):
                return round(((y.float() - r).norm() / r.norm()).item(), 5)

            dq = [dequantize(w8_, s_, torch.bfloat16) for w8_, s_ in qs]
            fns = {"cublas_bf16": lambda: [F.linear(x, w) for w in dq],
                   "weight_only_matmul": lambda: [matmul(x, w8_.t(), b_scale=s_) for w8_, s_ in qs],
                   "weight_only_dequant_cublas": lambda: [
                       F.linear(x, dequantize_fp8(w8_, s_, torch.bfloat16, out=scratch)) for w8_, s_ in qs],
                   "w8a8_linear": lambda: [quantized_linear(x, w8_, s_, dynamic=True) for w8_, s_ in qs],
                   "w8a8_quantize_only": lambda: [quantize_activations_fp8(x) for _ in qs],
                   "scaled_mm": lambda: [torch._scaled_mm(x8, w8_.t(), scale_a=xs[:, None], scale_b=s_[None, :],
                                                          out_dtype=torch.bfloat16) for w8_, s_ in qs]}
            errors = {"weight_only_matmul": err(matmul(x, w8.t(), b_scale=s)),
                      "w8a8_linear": err(quantized_linear(x, w8, s, dynamic=True), ref_dyn),
                      "w8a8_vs_weight_only": err(ref_dyn)}
            try:
                errors["scaled_mm"] = err(torch._scaled_mm(x8, w8.t(), scale_a=xs[:, None], scale_b=s[None, :],
                                                           out_dtype=torch.bfloat16), ref_dyn)
            except Exception as e:
                errors["scaled_mm"] = f"{type(e).__name__}: {str(e)[:80]}"
            selected = select_config(m, n, k, x8.dtype, dev)
            for cfg in (FP8_DECODE if m <= 64 else FP8_LARGE):
                if m <= 64:
                    cfg = dataclasses.replace(cfg, split_k=decode_split_k(m, n, k, cfg, sms))
                label = f"w8a8 {cfg}" + (" (selected)" if cfg == selected else "")
                try:
                    e = err(matmul(x8, w8.t(), b_scale=s, a_scale=xs, out_dtype=torch.bfloat16, config=cfg), ref_dyn)
                except Exception as ex:
                    errors[label] = f"{type(ex).__name__}: {str(ex)[:80]}"
                    continue
                errors[label] = e
                if e > 2e-2:
                    continue
                fns[label] = (lambda c=cfg: [matmul(x8, w8_.t(), b_scale=s_, a_scale=xs, out_dtype=torch.bfloat16,
                                                    config=c) for w8_, s_ in qs])
            if m <= 4:
                gemvs = {}
                for cfg in CONFIGS:
                    try:
                        if err(gemv(x, w8, config=cfg, scale=s)) > 2e-2:
                            continue
                    except Exception:
                        continue
                    gemvs[f"gemv_fp8 {cfg}"] = (lambda c=cfg: [gemv(x, w8_, config=c, scale=s_) for w8_, s_ in qs])
                times, _ = interleaved_ms(gemvs, graph=True, rounds=1, rep_ms=30)
                best = min(times, key=times.get)
                fns[best] = gemvs[best]
            times, errs = interleaved_ms(fns, graph=True, rounds=5, rep_ms=50)
            per = {kk: round(v / COPIES * 1e3, 2) for kk, v in times.items()}
            row = {"shape": name, "n": n, "k": k, "m": m, "us": per, "errors": errs, "rel_err": errors,
                   "selected_w8a8": str(selected),
                   "fp8_tbs": {kk: round(n * k / (v / COPIES * 1e-3) / 1e12, 3) for kk, v in times.items()
                               if kk != "cublas_bf16"},
                   "bf16_tbs": round(2 * n * k / (times["cublas_bf16"] / COPIES * 1e-3) / 1e12, 3),
                   "tflops": {kk: round(2 * m * n * k / (v / COPIES * 1e-3) / 1e12, 1) for kk, v in times.items()}}
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
            del dq
        del qs, scratch
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
