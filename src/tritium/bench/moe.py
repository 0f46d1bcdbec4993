"""Mixture-of-experts layer: the router's top-k and the routed experts, decode to prefill sizes.

    python -m tritium.bench moe [--out FILE] [--shapes qwen3-30b-a3b,mixtral-8x7b] [--tokens 1,2,4,...]

One layer's experts in bf16 (random weights, std 0.02) at the shapes of Qwen3-30B-A3B (128 experts of 768, 8 a
token, hidden 2048) and Mixtral-8x7B (8 experts of 14336, 2 a token, hidden 4096); tokens routed by random logits
(every expert about equally likely). Each call is timed cold (L2 flushed first: in a model every layer reads other
weights), the GPU's time, not the host's launch:

- ``tritium``: :func:`tritium.ops.moe.fused_moe` as the engine calls it (its path by the number of slots), and
  each path forced (``slot``: per-slot GEMVs, ``sorted``: expert-sorted grouped GEMMs) where it is sensible;
  ``route``: :func:`tritium.ops.moe.moe_route` on the router's logits alone.
- ``torch_loop``: transformers' way (``Qwen3MoeExperts.forward``): a loop over the experts that received tokens,
  gathering their rows (the loop waits for the device to know which experts those are).
- ``cublas_bmm``: an anchor that does the same arithmetic as one batched cuBLAS product per projection with the
  slots spread evenly over the experts (no gather, no scatter, perfect balance: what a grouped GEMM can at
  best reach); only where every expert gets at least one slot.
- ``fp8``: the same call with weight-only fp8 experts (``quantization="fp8"``: float8 weights, a scale per row),
  its own path by the number of slots; ``fp8_tbs`` counts its bytes (half the weights' and the scales).
- ceilings measured in the same run: the bytes of the experts the call touches at the copy bandwidth, and its
  FLOPs at the bf16 matmul rate; ``ceiling_us`` is the larger.

Before timing, each shape is checked against the fp32 reference (:func:`tritium.ops.reference.fused_moe`) on
both paths; a failed check stops the suite.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tritium.bench.args import int_list, integer, name_list
from tritium.bench.common import cold_us, copy_bandwidth_tbs, header, matmul_tflops, print_table
from tritium.ops import reference
from tritium.ops.moe import PER_SLOT_MAX_SLOTS_PER_EXPERT, fused_moe, moe_route
from tritium.ops.quant import quantize_rows

# name -> (hidden H, expert intermediate I, experts E, experts a token k)
SHAPES = {"qwen3-30b-a3b": (2048, 768, 128, 8), "mixtral-8x7b": (4096, 14336, 8, 2)}
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 512, 2048, 8192)
NEEDS_GPU = "it times cold expert layers against cuBLAS"
SLOT_PATH_MAX = 512  # slots beyond which the per-slot path (CUDA-core FMAs) is not timed: minutes of GEMVs
TOL_BF16 = 2e-2


def add_arguments(parser) -> None:
    parser.add_argument("--shapes", type=name_list(SHAPES), default=",".join(SHAPES),
                        help=f"comma-separated subset of {','.join(SHAPES)}")
    parser.add_argument("--tokens", type=int_list(1), default=",".join(map(str, TOKENS)), help="token counts T")
    parser.add_argument("--repeats", type=integer(1), default=15, help="cold calls a figure (median)")


def torch_loop(x, w_gate_up, w_down, weights, ids):
    """transformers' experts loop (Qwen3MoeExperts.forward, transformers 5): the experts hit, one at a time."""
    E, I = w_gate_up.shape[0], w_down.shape[2]
    out = torch.zeros_like(x)
    mask = F.one_hot(ids.long(), num_classes=E).permute(2, 1, 0)  # [E, k, T]
    for e in (mask.sum(dim=(1, 2)) > 0).nonzero()[:, 0].tolist():
        pos, tok = torch.where(mask[e])
        h = F.linear(x[tok], w_gate_up[e])
        h = F.linear(F.silu(h[:, :I]) * h[:, I:], w_down[e]) * weights[tok, pos, None]
        out.index_add_(0, tok, h.to(out.dtype))
    return out


def balanced_bmm(x_e, w_gate_up, w_down):
    """The anchor: x_e ``[E, S / E, H]`` through every expert as two batched products (gate/up, down)."""
    I = w_down.shape[2]
    h = torch.bmm(x_e, w_gate_up.transpose(1, 2))
    return torch.bmm(F.silu(h[..., :I]) * h[..., I:], w_down.transpose(1, 2))


def fp8_experts(w_gate_up: torch.Tensor, w_down: torch.Tensor) -> dict:
    """fused_moe's fp8 operands of bf16 experts, quantized per row as the models do."""
    (gu8, gus), (d8, ds) = (quantize_rows(w.reshape(-1, w.shape[-1])) for w in (w_gate_up, w_down))
    return {"w_gate_up": gu8.view(w_gate_up.shape), "w_down": d8.view(w_down.shape),
            "gate_up_scale": gus.view(w_gate_up.shape[:2]), "down_scale": ds.view(w_down.shape[:2])}


def _check(w_gate_up, w_down, router, k: int, dev, fp8: dict) -> dict:
    """Both paths and the auto choice against the fp32 reference at decode and prefill sizes; fp8 experts
    (both paths) against the reference on their dequantized weights."""
    errors = {}
    for T in (1, 8, 64, 512):
        x = torch.randn(T, w_gate_up.shape[2], device=dev).bfloat16()
        weights, ids = moe_route(x @ router.T, k, True)
        ref = reference.fused_moe(x.float(), w_gate_up.float(), w_down.float(), weights, ids)
        for path in (None, "slot", "sorted"):
            out = torch.full_like(x, float("nan"))
            fused_moe(x, w_gate_up, w_down, weights, ids, out=out, path=path)
            err = ((out.float() - ref).norm() / ref.norm()).item()
            errors[f"T{T}-{path or 'auto'}"] = err
            if not err < TOL_BF16:  # NaN fails too
                raise SystemExit(f"fused_moe T={T} path={path}: relative error {err:.3e} >= {TOL_BF16}")
        scales = {n: fp8[n] for n in ("gate_up_scale", "down_scale")}
        ref8 = reference.fused_moe(x.float(), fp8["w_gate_up"], fp8["w_down"], weights, ids, **scales)
        for path in ("slot", "sorted"):
            out = torch.full_like(x, float("nan"))
            fused_moe(x, weights=weights, ids=ids, out=out, path=path, **fp8)
            err = ((out.float() - ref8).norm() / ref8.norm()).item()
            errors[f"T{T}-{path}-fp8"] = err
            if not err < TOL_BF16:
                raise SystemExit(f"fused_moe fp8 T={T} path={path}: relative error {err:.3e} >= {TOL_BF16}")
    return errors


def run(args) -> dict:
    dev = torch.device("cuda")
    result = {"header": header(dev), "suite": "moe", "copy_bandwidth_tbs": copy_bandwidth_tbs(),
              "matmul_tflops": matmul_tflops(), "per_slot_max_slots_per_expert": PER_SLOT_MAX_SLOTS_PER_EXPERT,
              "shapes": {}}
    copy_bw, mm = result["copy_bandwidth_tbs"], result["matmul_tflops"]
    print(f"copy {copy_bw:.2f} TB/s, bf16 matmul {mm:.0f} TFLOP/s", flush=True)
    flush = torch.empty(512 << 20, dtype=torch.uint8, device=dev)
    tokens = args.tokens
    for name in args.shapes:
        H, I, E, k = SHAPES[name]
        g = torch.Generator(device=dev).manual_seed(0)
        w_gate_up = (torch.randn(E, 2 * I, H, generator=g, device=dev) * 0.02).bfloat16()
        w_down = (torch.randn(E, H, I, generator=g, device=dev) * 0.02).bfloat16()
        router = (torch.randn(E, H, generator=g, device=dev) * 0.02).bfloat16()
        per_expert = (3 * I * H) * 2
        shape = {"hidden": H, "intermediate": I, "experts": E, "top_k": k, "check_rel_err": None, "rows": []}
        fp8 = fp8_experts(w_gate_up, w_down)
        shape["check_rel_err"] = _check(w_gate_up, w_down, router, k, dev, fp8)
        print(f"{name}: checked against the fp32 reference, worst relative error "
              f"{max(shape['check_rel_err'].values()):.2e}", flush=True)
        for T in tokens:
            S = T * k
            x = torch.randn(T, H, generator=g, device=dev).bfloat16()
            logits = torch.randn(T, E, generator=g, device=dev).bfloat16()
            weights, ids = moe_route(logits, k, True)
            out = torch.empty_like(x)
            touched = int(torch.unique(ids).numel())
            nbytes = touched * per_expert + 2 * x.numel() * 2
            flops = 2 * S * 3 * I * H
            ceiling = max(nbytes / (copy_bw * 1e12), flops / (mm * 1e12)) * 1e6
            row = {"T": T, "slots": S, "experts_touched": touched, "bytes": nbytes, "flops": flops,
                   "ceiling_us": ceiling, "us": {}}
            row["us"]["route"] = cold_us(lambda: moe_route(logits, k, True), flush, args.repeats)
            for label, path in (("tritium", None), ("slot", "slot"), ("sorted", "sorted")):
                if path == "slot" and S > SLOT_PATH_MAX:
                    continue
                row["us"][label] = cold_us(lambda: fused_moe(x, w_gate_up, w_down, weights, ids, out=out, path=path),
                                           flush, args.repeats)
            row["us"]["fp8"] = cold_us(lambda: fused_moe(x, weights=weights, ids=ids, out=out, **fp8), flush,
                                       args.repeats)
            fp8_bytes = touched * (3 * I * H + (3 * I + H) * 4) + 2 * x.numel() * 2
            row["fp8_tbs"] = fp8_bytes / row["us"]["fp8"] / 1e6
            if T <= 2048:  # the loop's host round trips make it slow; enough to place it
                row["us"]["torch_loop"] = cold_us(lambda: torch_loop(x, w_gate_up, w_down, weights, ids), flush,
                                                  max(3, args.repeats // 3))
            if S % E == 0:
                x_e = x.repeat_interleave(k, 0).view(E, S // E, H)
                row["us"]["cublas_bmm"] = cold_us(lambda: balanced_bmm(x_e, w_gate_up, w_down), flush, args.repeats)
            us = row["us"]
            row["tritium_tbs"] = nbytes / us["tritium"] / 1e6
            row["tritium_tflops"] = flops / us["tritium"] / 1e6
            row["ceiling_over_tritium"] = ceiling / us["tritium"]
            row["fp8_speedup"] = us["tritium"] / us["fp8"]
            for anchor in ("torch_loop", "cublas_bmm"):
                if anchor in us:
                    row[f"speedup_vs_{anchor}"] = us[anchor] / us["tritium"]
            shape["rows"].append(row)
            others = "  ".join(f"{n} {v:.1f}" for n, v in us.items() if n != "tritium")
            print(f"  T={T:5d} slots {S:6d} experts {touched:3d}: tritium {us['tritium']:8.1f} us "
                  f"({row['tritium_tbs']:.2f} TB/s, {row['tritium_tflops']:.0f} TFLOP/s, "
                  f"{row['ceiling_over_tritium']:.2f} of the ceiling)  {others}", flush=True)
        result["shapes"][name] = shape
        print_table([{"T": r["T"], **{n: r["us"].get(n) for n in ("route", "tritium", "slot", "sorted", "cublas_bmm",
                                                                   "torch_loop", "fp8")},
                      "ceiling": r["ceiling_us"], "of ceiling": r["ceiling_over_tritium"],
                      "fp8 speedup": r["fp8_speedup"]} for r in shape["rows"]],
                    ["T", "route", "tritium", "slot", "sorted", "cublas_bmm", "torch_loop", "fp8", "ceiling",
                     "of ceiling", "fp8 speedup"], title=f"{name} (us, cold)")
        del w_gate_up, w_down, router, fp8
        torch.cuda.empty_cache()
    return result
