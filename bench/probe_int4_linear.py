"""Int4 projections on one GPU: which product serves each row count (weight-only int4, groups of 128).

For Llama-3-8B's four layer projections, at M rows: bf16 cuBLAS on the 16-bit weights (the anchor); the int4
GEMVs at M <= 4 (every candidate of GEMV_CONFIGS, the byte GEMV, and of WORD_GEMV_CONFIGS, the word GEMV;
the best of each kept), tritium's int4 matmul (the selected config
and the other candidates), the weight dequantized in one pass then cuBLAS, and ``int4_linear`` as the engine
calls it. Asymmetric codes (zero points loaded, as AWQ / GPTQ asym), plus at M <= 4 the symmetric case
(no zero points) and an act-order permutation (x gathered). Graph replays over 8 weight copies (no weight
from L2), five interleaved rounds; each output checked against the fp32 reference first. Prints and
writes JSON (--out).
Usage: PYTHONPATH=src python bench/probe_int4_linear.py [--out FILE] [--ms 1,4,...] [--shapes qkv,o,...]
"""

import argparse
import json

import torch
import torch.nn.functional as F

from tritium.bench.common import copy_bandwidth_tbs, header, interleaved_ms
from tritium.ops.int4 import Int4Weight, dequantize_int4_reference, quantize_int4
from tritium.ops.int4_linear import (GEMV_CONFIGS, MATMUL_CONFIGS, MAX_M, WORD_GEMV_CONFIGS, dequantize_int4, int4_gemv,
                                     int4_linear, int4_matmul, select_int4_matmul_config)

SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
MS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)
COPIES = 8
GROUP = 128


def _rel(y, ref) -> float:
    return round(((y.float() - ref).norm() / ref.norm()).item(), 5)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)
    p.add_argument("--ms", default=",".join(map(str, MS)))
    p.add_argument("--shapes", default=",".join(SHAPES))
    args = p.parse_args()
    dev = torch.device("cuda")
    result = {"header": header(dev), "copy_tbs": copy_bandwidth_tbs(), "copies": COPIES, "group_size": GROUP,
              "rows": []}
    for name in args.shapes.split(","):
        n, k = SHAPES[name]
        ws = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) / k ** 0.5 for _ in range(COPIES)]
        qs = [quantize_int4(w, GROUP) for w in ws]
        sym = [quantize_int4(w, GROUP, symmetric=True) for w in ws]
        perm = torch.randperm(k, device=dev).to(torch.int32)
        permuted = [Int4Weight(q.packed, q.scales, q.zeros, perm, GROUP) for q in qs]
        ref_w = dequantize_int4_reference(qs[0])
        scratch = torch.empty(n, k, device=dev, dtype=torch.bfloat16)
        int4_bytes = qs[0].nbytes()
        for m in map(int, args.ms.split(",")):
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            ref = x.float() @ ref_w.t()
            fns = {"cublas_bf16": lambda: [F.linear(x, w) for w in ws],
                   "int4_linear": lambda: [int4_linear(x, q) for q in qs],
                   "dequant_cublas": lambda: [F.linear(x, dequantize_int4(q, torch.bfloat16, out=scratch))
                                              for q in qs]}
            errors = {"int4_linear": _rel(int4_linear(x, qs[0]), ref),
                      "dequant_cublas": _rel(F.linear(x, dequantize_int4(qs[0], torch.bfloat16)), ref),
                      "bf16_weights_vs_int4": _rel(F.linear(x, ws[0]), ref)}
            selected = select_int4_matmul_config(m, n, k, GROUP)
            if MAX_M < m <= 256:  # the matmul serves 5-64 rows (at 1-4 it trailed the GEMVs by 2-3x)
                for cfg in dict.fromkeys((selected,) + MATMUL_CONFIGS):
                    label = f"matmul {cfg}" + (" (selected)" if cfg == selected else "")
                    try:
                        errors[label] = e = _rel(int4_matmul(x, qs[0], config=cfg), ref)
                    except Exception as ex:
                        errors[label] = f"{type(ex).__name__}: {str(ex)[:80]}"
                        continue
                    if e < 2e-2:
                        fns[label] = (lambda c=cfg: [int4_matmul(x, q, config=c) for q in qs])
            if m <= 4:
                gemvs, kinds = {}, {}
                for cfg in GEMV_CONFIGS + WORD_GEMV_CONFIGS:
                    try:
                        errors[f"gemv {cfg}"] = e = _rel(int4_gemv(x, qs[0], config=cfg), ref)
                    except Exception as ex:
                        errors[f"gemv {cfg}"] = f"{type(ex).__name__}: {str(ex)[:80]}"
                        continue
                    if e < 2e-2:
                        gemvs[f"gemv {cfg}"] = (lambda c=cfg: [int4_gemv(x, q, config=c) for q in qs])
                        kinds[f"gemv {cfg}"] = cfg
                screen, _ = interleaved_ms(gemvs, graph=True, rounds=2, rep_ms=30)
                result.setdefault("gemv_screen", []).append(
                    {"shape": name, "m": m, "us": {kk: round(v / COPIES * 1e3, 2) for kk, v in screen.items()}})
                for kind, words in (("byte", False), ("words", True)):
                    ours = [kk for kk in screen if kinds[kk].words == words]
                    if not ours:
                        continue
                    best = min(ours, key=screen.get)
                    fns[f"best {kind} " + best] = gemvs[best]
                    cfg = kinds[best]
                    errors[f"sym {kind}"] = _rel(int4_gemv(x, sym[0], config=cfg),
                                                 x.float() @ dequantize_int4_reference(sym[0]).t())
                    fns[f"best {kind} gemv, symmetric"] = lambda c=cfg: [int4_gemv(x, q, config=c) for q in sym]
                    errors[f"act_order {kind}"] = _rel(int4_gemv(x, permuted[0], config=cfg),
                                                       x.float() @ dequantize_int4_reference(permuted[0]).t())
                    fns[f"best {kind} gemv, act-order"] = lambda c=cfg: [int4_gemv(x, q, config=c) for q in permuted]
            times, errs = interleaved_ms(fns, graph=True, rounds=5, rep_ms=50)
            per = {kk: round(v / COPIES * 1e3, 2) for kk, v in times.items()}
            row = {"shape": name, "n": n, "k": k, "m": m, "us": per, "errors": errs, "rel_err": errors,
                   "selected_matmul": str(selected), "int4_bytes": int4_bytes,
                   "int4_tbs": {kk: round(int4_bytes / (v / COPIES * 1e-3) / 1e12, 3) for kk, v in times.items()
                                if kk != "cublas_bf16"},
                   "bf16_tbs": round(2 * n * k / (times["cublas_bf16"] / COPIES * 1e-3) / 1e12, 3),
                   "speedup_vs_cublas_bf16": {kk: round(times["cublas_bf16"] / v, 3) for kk, v in times.items()
                                              if kk != "cublas_bf16"}}
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
            if args.out:  # as it goes: a run cut short keeps the rows it finished
                with open(args.out, "w") as f:
                    json.dump(result, f, indent=1)
        del ws, qs, sym, permuted, scratch, ref_w
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
