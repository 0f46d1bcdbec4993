"""LoRA adapters: what the batched update costs a projection and a decode step.

    python -m tritium.bench lora [--shape llama3-8b] [--rank 16] [--batches 1,16] [--out FILE]

Kernels (:func:`tritium.ops.lora.lora_apply`): each of the shape's four projections at 1-2048 tokens, every
token on one adapter or on four (token t on slot t % 4), checked against the torch reference first; timed with
the projection itself (cuBLAS, ``F.linear``: the anchor a LoRA update is added to) and the torch reference
(a full product per slot, up to 256 tokens); the tokens sorted by slot above 64 as the engine sorts them (once a
step, on the host: not timed here). Engine: random bf16 weights and a random rank-``--rank`` adapter on every projection
(a PEFT directory written here), decode steps of ``--batches`` requests and one prefill of ``--prompt-len``
tokens each: the engine without ``enable_lora`` (the anchor), with it and no adapter, every request on one
adapter, the requests over four adapters.
"""

from __future__ import annotations

import gc
import json
import os
import tempfile

import torch
import torch.nn.functional as F

from tritium.bench.args import int_list, integer
from tritium.bench.common import header, interleaved_ms, print_table
from tritium.bench.engine_common import Bench, add_model_arguments, timed
from tritium.engine import LoRARequest, SamplingParams
from tritium.models.lora import MODULES, module_shapes
from tritium.ops.lora import lora_apply, lora_apply_reference, padded_rank, sort_order


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    parser.set_defaults(new_tokens=64)
    parser.add_argument("--rank", type=integer(1), default=16, help="the adapters' rank (default 16)")
    parser.add_argument("--batches", type=int_list(1), default="1,16", help="decode batch sizes (default 1,16)")
    parser.add_argument("--tokens", type=int_list(1), default="1,8,32,256,2048",
                        help="kernel token counts (default 1,8,32,256,2048)")
    parser.add_argument("--repeats", type=integer(1), default=3, help="timed runs of an engine case (median)")
    parser.add_argument("--skip-engine", action="store_true", help="kernels only")


def _projections(cfg) -> dict[str, tuple[int, tuple[int, ...]]]:
    """name -> (K, the parts' output rows)."""
    return {"qkv": (cfg.hidden_size, (cfg.q_size, cfg.kv_size, cfg.kv_size)),
            "o_proj": (cfg.q_size, (cfg.hidden_size,)),
            "gate_up": (cfg.hidden_size, (cfg.intermediate_size,) * 2),
            "down": (cfg.intermediate_size, (cfg.hidden_size,))}


def kernels(bench: Bench, rank: int, tokens: list[int]) -> tuple[list[dict], list[str]]:
    dev, dtype = bench.device, bench.dtype
    R, S = padded_rank(rank), 4
    rows, failures = [], []
    g = torch.Generator(device=dev).manual_seed(0)
    for name, (K, outs) in _projections(bench.config).items():
        N, P = sum(outs), len(outs)
        bounds = (outs[0], outs[0] + outs[1]) if P == 3 else (outs[0], N)
        w = (torch.randn(N, K, generator=g, device=dev) * 0.02).to(dtype)
        a = torch.zeros(S, P * R, K, dtype=dtype, device=dev)
        b = torch.zeros(S, N, R, dtype=dtype, device=dev)
        for p in range(P):
            a[:, p * R:p * R + rank] = (torch.randn(S, rank, K, generator=g, device=dev) / K ** 0.5).to(dtype)
        b[:, :, :rank] = (torch.randn(S, N, rank, generator=g, device=dev) * 0.02).to(dtype)
        for T in tokens:
            x = torch.randn(T, K, generator=g, device=dev).to(dtype)
            for mix in ("one", "four"):
                slots = (torch.zeros(T, dtype=torch.int64, device=dev) if mix == "one" else
                         torch.arange(T, device=dev) % S)
                y0 = F.linear(x, w)
                ref = lora_apply_reference(x, y0.clone(), a, b, slots, bounds).float()
                got = torch.full_like(y0, float("nan"))
                got.copy_(y0)
                lora_apply(x, got, a, b, slots, bounds)
                err = ((got.float() - ref).norm() / (ref - y0.float()).norm()).item()
                if not err < 2e-2 or torch.isnan(got).any():
                    failures.append(f"{name} T={T} {mix}: relative error of the update {err:.3g}")
                row = {"projection": name, "tokens": T, "adapters": mix, "error": err}
                rows.append(row)
                if dev.type != "cuda":  # the CPU checks the update only
                    continue
                y, order = y0.clone(), sort_order(slots)  # the engine sorts once a step (on the host)
                fns = {"lora": lambda: lora_apply(x, y, a, b, slots, bounds, order=order, validate=False),
                       "linear": lambda: F.linear(x, w)}
                if T <= 256:  # (a full product per slot: slow to time at prefill sizes)
                    fns["reference"] = lambda: lora_apply_reference(x, y, a, b, slots, bounds)
                ms, errors = interleaved_ms(fns, graph=True)
                row.update(lora_us=ms["lora"] * 1e3, linear_us=ms["linear"] * 1e3,
                           reference_us=ms.get("reference", float("nan")) * 1e3,
                           lora_vs_linear=ms["lora"] / ms["linear"])
                if errors:
                    row["errors"] = errors
                print(f"  {name} T={T} {mix}: lora {row['lora_us']:.1f} us, linear {row['linear_us']:.1f} us "
                      f"({row['lora_vs_linear']:.3f}x)", flush=True)
    return rows, failures


def write_adapter(path: str, cfg, rank: int, seed: int) -> None:
    """A random PEFT adapter on every projection of every layer (bf16)."""
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(seed)
    shapes = module_shapes(cfg)
    tensors = {}
    for i in range(cfg.num_hidden_layers):
        for module, (proj, _) in MODULES.items():
            out, inp = shapes[module]
            block = "self_attn" if proj in ("qkv_proj", "o_proj") else "mlp"
            key = f"base_model.model.model.layers.{i}.{block}.{module}"
            tensors[f"{key}.lora_A.weight"] = (torch.randn(rank, inp, generator=g) / inp ** 0.5).bfloat16()
            tensors[f"{key}.lora_B.weight"] = (torch.randn(out, rank, generator=g) * 0.02).bfloat16()
    os.makedirs(path, exist_ok=True)
    save_file(tensors, os.path.join(path, "adapter_model.safetensors"))
    with open(os.path.join(path, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": rank, "lora_alpha": 2 * rank, "bias": "none",
                   "target_modules": list(MODULES)}, f)


def _engine_case(bench, llm, batch: int, loras, repeats: int) -> dict:
    """Decode step (ms) and prefill (s) of ``batch`` requests, request i on ``loras[i % len(loras)]``."""
    n = bench.args.new_tokens
    params = SamplingParams(max_tokens=n, ignore_eos=True)

    def generate(prompts, tokens):
        reqs = [loras[i % len(loras)] for i in range(len(prompts))]
        llm.generate(prompts, SamplingParams(max_tokens=tokens, ignore_eos=True), lora_request=reqs)

    generate(bench.prompts(batch, 500 + batch), 4)
    steps, prefills = [], []
    for r in range(repeats):
        t_full = timed(lambda: generate(bench.prompts(batch, 10 * r + batch), params.max_tokens), bench.device)
        t_one = timed(lambda: generate(bench.prompts(batch, 10 * r + batch + 5), 1), bench.device)
        steps.append((t_full - t_one) / (n - 1) * 1e3)
        prefills.append(t_one)
    mid = repeats // 2
    print(f"  b{batch} {sorted(set(r.name if r else 'base' for r in loras))}: {sorted(steps)[mid]:.3f} ms/step, "
          f"prefill {sorted(prefills)[mid]:.3f} s", flush=True)
    return {"decode_step_ms": sorted(steps)[mid], "decode_step_ms_all": sorted(steps),
            "prefill_s": sorted(prefills)[mid]}


def engine(bench: Bench, rank: int, batches: list[int], repeats: int) -> dict:
    cases = {}
    llm = bench.llm("triton", max(batches))
    for batch in batches:
        cases[f"b{batch}-plain"] = _engine_case(bench, llm, batch, [None], repeats)
    del llm
    gc.collect()
    torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as tmp:
        names = [f"a{i}" for i in range(4)]
        for i, name in enumerate(names):
            write_adapter(os.path.join(tmp, name), bench.config, rank, i)
        llm = bench.llm("triton", max(batches), enable_lora=True, max_loras=4, max_lora_rank=rank)
        loras = [LoRARequest(name, os.path.join(tmp, name)) for name in names]
        for lora in loras:
            llm.engine.load_lora(lora.name, lora.path)
        for batch in batches:
            cases[f"b{batch}-lora-engine-none"] = _engine_case(bench, llm, batch, [None], repeats)
            cases[f"b{batch}-one-adapter"] = _engine_case(bench, llm, batch, loras[:1], repeats)
            if batch >= 4:
                cases[f"b{batch}-four-adapters"] = _engine_case(bench, llm, batch, loras, repeats)
        del llm
        gc.collect()
    for key, c in cases.items():
        plain = cases[key.split("-")[0] + "-plain"]
        c["step_vs_plain"] = c["decode_step_ms"] / plain["decode_step_ms"]
        c["prefill_vs_plain"] = c["prefill_s"] / plain["prefill_s"]
    return cases


def run(args) -> dict:
    bench = Bench(args)
    tokens, batches = args.tokens, args.batches
    result = {"header": header(bench.device if bench.device.type == "cuda" else None), "suite": "lora",
              "shape": bench.label, "rank": args.rank, "dtype": str(bench.dtype).removeprefix("torch.")}
    rows, failures = kernels(bench, args.rank, tokens)
    result["kernels"], result["correctness_failures"] = rows, failures
    print_table(rows, ["projection", "tokens", "adapters", "lora_us", "linear_us", "reference_us", "lora_vs_linear",
                       "error"], title="LoRA update vs its projection (CUDA-graph replays)")
    if failures:
        print("CORRECTNESS FAILURES:\n  " + "\n  ".join(failures), flush=True)
    if not args.skip_engine and bench.device.type == "cuda":
        result["engine"] = cases = engine(bench, args.rank, batches, args.repeats)
        print_table([{"case": k, **{f: v for f, v in c.items() if not f.endswith("_all")}} for k, c in cases.items()],
                    ["case", "decode_step_ms", "step_vs_plain", "prefill_s", "prefill_vs_plain"],
                    title=f"engine, prompts of {args.prompt_len}, rank {args.rank}")
    return result
