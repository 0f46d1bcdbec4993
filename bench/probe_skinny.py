"""The skinny tensor-core GEMM (``tritium.ops.skinny``) against cuBLAS and the GEMV on Llama-3-8B's decode projections
at 1-32 rows: each candidate timed over enough copies of the weight that none is read from L2, in a CUDA graph
(``tritium.models.linear._time_group``), after a check against the fp32 product.

    PYTHONPATH=src python bench/probe_skinny.py [--ms 1,2,4,8,16,32] [--shapes o_proj,down] [--split] [--out FILE]
"""

import argparse
import importlib
import json

import torch
import torch.nn.functional as F

from tritium.bench.common import header
from tritium.models.linear import _time_group
from tritium.ops import reference as ref
from tritium.ops import silu_and_mul
from tritium.ops.skinny import SkinnyConfig, skinny

gemv_mod = importlib.import_module("tritium.ops.gemv")  # (tritium.ops.gemv is also a function name)
SHAPES = {"qkv": (6144, 4096), "o_proj": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
          "lm_head": (128256, 4096)}


def grid():
    out = []
    for n in (16, 32, 64, 128):
        for k in (64, 128, 256, 512):
            for s in (3, 4, 6):
                for w in ((4, 8) if n == 128 else (4,)):
                    if (n + 32) * k * 2 * s <= 200 * 1024:
                        out.append(SkinnyConfig(n, k, w, s))
    return out


def split_grid():
    """Split-K candidates (for the projections with few row blocks: o_proj, down, qkv), CONFIGS among them."""
    from tritium.ops.skinny import CONFIGS
    out = list(CONFIGS)
    for n in (32, 64, 128):
        for k in (128, 256):
            for s in (3, 4, 6):
                for split in (2, 4, 8):
                    if (n + 32) * k * 2 * s <= 200 * 1024:
                        out.append(SkinnyConfig(n, k, 4, s, split))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ms", default="1,2,4,8,16,32")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--out", default=None)
    ap.add_argument("--split", action="store_true", help="the split-K grid (and CONFIGS) instead of the unsplit one")
    args = ap.parse_args()
    dev = torch.device("cuda")
    dtype = torch.bfloat16
    ms = [int(m) for m in args.ms.split(",")]
    configs = split_grid() if args.split else grid()
    result = {"header": header(dev), "configs": [str(c) for c in configs], "cases": []}
    for name in args.shapes.split(","):
        N, K = SHAPES[name]
        nbytes = N * K * 2
        copies = max(2, -(-400 * 2**20 // nbytes))
        group = [torch.randn(N, K, device=dev, dtype=dtype) * 0.02 for _ in range(copies)]
        for variant in (("plain", "swiglu") if name == "gate_up" else ("plain",)):
            sw = variant == "swiglu"
            for m in ms:
                x = torch.randn(m, K, device=dev, dtype=dtype)
                exact = x.float() @ group[0].float().T
                want = ref.silu_and_mul(exact.to(dtype)).float() if sw else exact
                tol = 2e-2 * want.abs().max().item() + 1e-2

                def ok(y):
                    return bool(torch.isfinite(y).all()) and (y.float() - want).abs().max().item() <= tol

                times = {}
                # cuBLAS's gate/up as the engine runs it: then tritium's SiLU-and-mul kernel (not the torch reference,
                # several kernels: the first run of this probe timed that, 8-13 us too slow)
                post = silu_and_mul if sw else (lambda y: y)
                times["cublas"] = _time_group(lambda w: post(F.linear(x, w)), group, 5)
                if m <= gemv_mod.MAX_M:
                    for cfg in gemv_mod.CONFIGS:
                        if sw and cfg.block_n % 2:
                            continue
                        try:
                            if ok(gemv_mod.gemv(x, group[0], config=cfg, swiglu=sw)):
                                times[str(cfg)] = _time_group(lambda w, c=cfg: gemv_mod.gemv(x, w, config=c, swiglu=sw),
                                                              group, 5)
                        except Exception as e:  # noqa: BLE001 - a config that does not compile here
                            print(f"  gemv {cfg}: {type(e).__name__}", flush=True)
                for cfg in configs:
                    try:
                        y = skinny(x, group[0], config=cfg, swiglu=sw)
                        if not ok(y):
                            print(f"  {cfg} m={m}: WRONG (max err {(y.float() - want).abs().max().item():.3g})",
                                  flush=True)
                            continue
                        times[str(cfg)] = _time_group(lambda w, c=cfg: skinny(x, w, config=c, swiglu=sw), group, 5)
                    except Exception as e:  # noqa: BLE001
                        print(f"  {cfg}: {type(e).__name__}: {str(e)[:120]}", flush=True)
                us = {k: v / copies * 1e3 for k, v in times.items()}
                gemvs = {k: v for k, v in us.items() if not k.startswith("skinny") and k != "cublas"}
                sk = {k: v for k, v in us.items() if k.startswith("skinny")}
                best_g = min(gemvs, key=gemvs.get) if gemvs else None
                best_s = min(sk, key=sk.get) if sk else None
                top = sorted(sk, key=sk.get)[:4]
                tbs = lambda t: nbytes / (t * 1e-6) / 1e12  # noqa: E731
                print(f"{name:>8} {variant:>6} m={m:3d}: cublas {us['cublas']:7.2f} us ({tbs(us['cublas']):.2f} TB/s)"
                      + (f" | gemv {best_g} {gemvs[best_g]:7.2f}" if best_g else "")
                      + (f" | {best_s} {sk[best_s]:7.2f} ({tbs(sk[best_s]):.2f} TB/s)" if best_s else "")
                      + f" | top {', '.join(f'{k[7:]} {sk[k]:.1f}' for k in top)}", flush=True)
                result["cases"].append({"shape": name, "variant": variant, "m": m, "n": N, "k": K, "us": us})
        del group
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
