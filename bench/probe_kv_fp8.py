"""Probe: decode over an fp8 KV cache, the fp16 dots against the bf16 dots they replace, and the 16-bit cache.

Stop 70 measured the engine's batch-64 step at 2k-token contexts *slower* with an fp8 cache (10.9 vs 10.1
ms) although it reads half the KV bytes. The sm_90 PTX of the kernel with a bf16 q converts each fp8
element to fp16 (``cvt.rn.f16x2.e4m3x2``, a pair an instruction) and then to bf16 (``cvt.bf16.f16``, one
an element): a 128-key tile costs a thread 256 + 512 conversions. Now a bf16 q is turned into fp16 once a
program (``kernels._dot_q``) and the dots run in fp16: 256. This probe times, cold as ``bench attention``
(graphs rotating over copies of 3x the L2), in interleaved rounds:

- ``bf16``: the 16-bit cache, the configuration ``paged_attention`` selects;
- ``fp8``: the fp8 cache with the current kernel (fp16 dots), the configuration it selects, and a few others;
- ``fp8_bf16dots``: the same with the kernel of ``--old REV`` (the bf16 dots), loaded from git;
- ``cudnn``: SDPA's cuDNN backend over the dense bf16 K/V (the anchor).

    PYTHONPATH=src python bench/probe_kv_fp8.py OUT.json [--old REV|FILE] [--rounds N]
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import torch

from tritium.attention import AttentionConfig, AttentionWorkspace, launcher, paged_attention
from tritium.bench.attention import (HEAD_DIM, NUM_KV_HEADS, NUM_Q_HEADS, _cfg_str, _cold_copies, _paged_batch,
                                     _sdpa, _sdpa_backends)
from tritium.bench.common import header, interleaved_ms

CASES = [(64, 2048, 16), (16, 4096, 16), (128, 1024, 16), (32, 8192, 16), (1, 8192, 16), (1, 768, 16)]
FP8 = torch.float8_e4m3fn


def old_kernel(rev: str):
    """``_paged_attention_kernel`` of ``kernels.py`` at git revision ``rev`` (or in the file ``rev``, for a
    machine without the repository's history), as a module of its own."""
    path = rev
    if not os.path.isfile(rev):
        src = subprocess.check_output(["git", "show", f"{rev}:src/tritium/attention/kernels.py"], text=True)
        path = os.path.join(tempfile.mkdtemp(), "kernels_old.py")
        with open(path, "w") as f:
            f.write(src)
    spec = importlib.util.spec_from_file_location("tritium.attention.kernels_old", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module._paged_attention_kernel


def to_fp8(cache: torch.Tensor, scale: float) -> torch.Tensor:
    return (cache.float() / scale).clamp(-448, 448).to(FP8)


def run_case(batch, seq_len, block_size, rounds, old):
    bf16_bytes = batch * seq_len * NUM_KV_HEADS * HEAD_DIM * 2 * 2
    copies = _cold_copies(bf16_bytes // 2)  # enough for the fp8 copies (twice as many as bf16 needs)
    tm = [_paged_batch(batch, seq_len, 1, block_size) for _ in range(copies)]
    k_scale, v_scale = 0.02, 0.015  # randn / 0.02 fills the e4m3 range
    f8 = [dict(b[0], k_cache=to_fp8(b[0]["k_cache"], k_scale), v_cache=to_fp8(b[0]["v_cache"], v_scale),
               k_scale=torch.tensor([k_scale], device=b[0]["q"].device),
               v_scale=torch.tensor([v_scale], device=b[0]["q"].device))
          for b in tm]
    q = tm[0][0]["q"]
    group = NUM_Q_HEADS // NUM_KV_HEADS
    out = torch.empty_like(q)
    ws = AttentionWorkspace(batch, NUM_Q_HEADS, HEAD_DIM, device=q.device)
    hints = dict(max_seqlen_q=1, max_seqlen_k=seq_len)
    q_dense = q.float().view(batch, NUM_KV_HEADS, group, HEAD_DIM)

    def dequant(cache, scale):  # [blocks, bs, H, D] -> dense [B, H, L, D] fp32 in block-table order
        bt = tm[0][0]["block_table"].long()
        d = cache.float()[bt] * scale  # [B, pages, bs, H, D]
        return d.reshape(batch, -1, NUM_KV_HEADS, HEAD_DIM)[:, :seq_len].transpose(1, 2)

    ref16 = torch.nn.functional.scaled_dot_product_attention(
        q_dense, tm[0][1].float(), tm[0][2].float()).reshape_as(q)
    ref8 = torch.nn.functional.scaled_dot_product_attention(
        q_dense, dequant(f8[0]["k_cache"], k_scale), dequant(f8[0]["v_cache"], v_scale)).reshape_as(q)
    row = dict(batch=batch, seq_len=seq_len, block_size=block_size, copies=copies, bf16_bytes=bf16_bytes)
    cfg8 = launcher.select_attention_config(
        num_tokens=batch, num_seqs=batch, num_q_heads=NUM_Q_HEADS, num_kv_heads=NUM_KV_HEADS, head_dim=HEAD_DIM,
        block_size=block_size, max_seqlen_q=1, max_seqlen_k=seq_len, dtype=q.dtype, device=q.device,
        kv_dtype=FP8)
    row["fp8_config"] = _cfg_str(cfg8)
    alts = {"": None}
    for tile_n, splits, stages in ((64, 1, 2), (128, 1, 2), (128, 1, 3), (64, 1, 3), (128, 2, 2)):
        if batch >= 16:
            alts[f"_n{tile_n}-s{splits}-st{stages}"] = AttentionConfig(
                block_m=cfg8.block_m, block_q=1, tile_n=tile_n, num_splits=splits, num_warps=4, num_stages=stages)
    fns = {}

    def add(name, inputs, cfg, ref, kernel=None):
        def call(inp):
            if kernel is None:
                return paged_attention(**inp, **hints, out=out, workspace=ws, config=cfg)
            saved = launcher._paged_attention_kernel
            launcher._paged_attention_kernel = kernel
            try:
                return paged_attention(**inp, **hints, out=out, workspace=ws, config=cfg)
            finally:
                launcher._paged_attention_kernel = saved
        out.fill_(float("nan"))
        err = ((call(inputs[0]).float() - ref).norm() / ref.norm()).item()
        row[f"err_{name}"] = err
        if not err < 2e-2:
            raise RuntimeError(f"{name} B={batch} L={seq_len}: rel err {err}")
        fns[name] = lambda: [call(b) for b in inputs]

    add("bf16", [b[0] for b in tm], None, ref16)
    for suffix, cfg in alts.items():
        add("fp8" + suffix, f8, cfg, ref8)
    if old is not None:
        add("fp8_bf16dots", f8, None, ref8, kernel=old)
    dense = [(b[0]["q"].view(batch, NUM_KV_HEADS, group, HEAD_DIM), b[1], b[2]) for b in tm]
    cudnn = _sdpa_backends()["cudnn"]
    fns["cudnn"] = lambda: [_sdpa(cudnn, *dense[c], False) for c in range(copies)]
    ms, errors = interleaved_ms(fns, graph=True, rounds=rounds)
    row["errors"] = errors
    row["us"] = {name: round(t / copies * 1e3, 2) for name, t in ms.items()}
    print(batch, seq_len, block_size, row["fp8_config"], json.dumps(row["us"]), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--old", default=None,
                    help="git revision (or kernels.py file) whose kernel is the bf16-dot baseline")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    old = old_kernel(args.old) if args.old else None
    result = dict(header(), probe="kv_fp8", rounds=args.rounds, old=args.old, rows=[])
    for case in CASES:
        result["rows"].append(run_case(*case, args.rounds, old))
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
