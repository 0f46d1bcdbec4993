"""Probe: which of tritium's kernel configurations give every row the same bits whatever the other rows.

Batch invariance needs each row's reduction order fixed. For the GEMM that means no split-K; whether the
tile shape (block_m / block_n / block_k, wgmma vs mma.sync) changes a row's bits is a property of the
hardware's MMA and the compiler, measured here on the GPU:

    PYTHONPATH=src python3 bench/probe_invariance.py [--out probe.json]

For each configuration and row count M, ``matmul(x[:M], W^T)`` is compared bit for bit with a reference
configuration's result for all rows at the largest M (and cuBLAS's ``F.linear`` across M the same way).
Then the candidates for decode rows are timed on the Llama-3-8B projection shapes inside CUDA graphs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch
import torch.nn.functional as F

from tritium.fused.matmul import MatmulConfig, matmul


def _rows_differing(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((a.view(torch.int16) != b.view(torch.int16)).any(dim=1).sum())


def bitwise(dtype=torch.bfloat16, K=4096, N=6144, ms=(1, 2, 3, 4, 7, 16, 64, 65, 200, 1024, 2048)) -> dict:
    torch.manual_seed(0)
    x = torch.randn(max(ms), K, device="cuda", dtype=dtype)
    w = torch.randn(N, K, device="cuda", dtype=dtype) / K ** 0.5
    ref_cfg = MatmulConfig(64, 128, 64, num_warps=4, num_stages=4, flatten=False)
    ref = matmul(x, w.t(), config=ref_cfg)
    configs = {
        "m64-n128-k64-w4": ref_cfg,
        "m64-n128-k128-w4": MatmulConfig(64, 128, 128, num_warps=4, num_stages=4, flatten=False),
        "m64-n64-k128-w4": MatmulConfig(64, 64, 128, num_warps=4, num_stages=6, flatten=False),
        "m64-n32-k128-w4": MatmulConfig(64, 32, 128, num_warps=4, num_stages=8, flatten=False),
        "m64-n16-k256-w4": MatmulConfig(64, 16, 256, num_warps=4, num_stages=6, flatten=False),
        "m128-n256-k64-w8-wide": MatmulConfig(128, 256, 64, num_warps=8, num_stages=3, epilogue_split=2),
        "m128-n128-k64-w4-narrow": MatmulConfig(128, 128, 64, num_warps=4, num_stages=4),
        "m128-n128-k64-w8": MatmulConfig(128, 128, 64, num_warps=8, num_stages=4),
        "m16-n128-k128-w4-mma": MatmulConfig(16, 128, 128, num_warps=4, num_stages=6, flatten=False),
        "m64-n128-k128-notma": MatmulConfig(64, 128, 128, num_warps=4, num_stages=4, flatten=False, tma=False),
        "m64-n128-k128-split4": MatmulConfig(64, 128, 128, num_warps=4, num_stages=4, split_k=4),
    }
    out = {}
    for name, cfg in configs.items():
        row = {}
        for m in ms:
            try:
                y = matmul(x[:m], w.t(), config=cfg)
                row[m] = _rows_differing(y, ref[:m])
            except Exception as e:  # noqa: BLE001 - a probe: record what failed
                row[m] = f"error: {type(e).__name__}: {str(e)[:120]}"
        out[name] = row
        print(name, row, flush=True)
    cub_ref = F.linear(x, w)
    out["cublas vs cublas@max"] = {m: _rows_differing(F.linear(x[:m], w), cub_ref[:m]) for m in ms}
    out["cublas vs ref"] = {m: _rows_differing(F.linear(x[:m], w), ref[:m]) for m in ms}
    print("cublas", out["cublas vs cublas@max"], out["cublas vs ref"], flush=True)
    return out


def _graph_us(fn, replays=50) -> float:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(replays):
            fn()
    times = []
    for _ in range(7):
        torch.cuda.synchronize()
        t = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) / replays * 1e6)
    return sorted(times)[3]


def timing(dtype=torch.bfloat16) -> dict:
    shapes = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
              "lm_head": (128256, 4096)}
    cands = {
        "m64-n128-k128-s4": MatmulConfig(64, 128, 128, num_warps=4, num_stages=4, flatten=False),
        "m64-n64-k128-s6": MatmulConfig(64, 64, 128, num_warps=4, num_stages=6, flatten=False),
        "m64-n64-k128-s6-notma": MatmulConfig(64, 64, 128, num_warps=4, num_stages=6, flatten=False, tma=False),
        "m16-n128-k128-s6": MatmulConfig(16, 128, 128, num_warps=4, num_stages=6, flatten=False),
        "m16-n64-k128-s8": MatmulConfig(16, 64, 128, num_warps=4, num_stages=8, flatten=False),
        "m16-n64-k256-s5": MatmulConfig(16, 64, 256, num_warps=4, num_stages=5, flatten=False),
        "m16-n32-k256-s6": MatmulConfig(16, 32, 256, num_warps=4, num_stages=6, flatten=False),
        "m16-n64-k128-s8-notma": MatmulConfig(16, 64, 128, num_warps=4, num_stages=8, flatten=False, tma=False),
        "m16-n32-k128-s8-notma-w2": MatmulConfig(16, 32, 128, num_warps=2, num_stages=8, flatten=False, tma=False),
    }
    res = {}
    for sname, (N, K) in shapes.items():
        w = torch.randn(N, K, device="cuda", dtype=dtype) / K ** 0.5
        gb = N * K * 2 / 1e9
        for m in (1, 4, 16, 64):
            x = torch.randn(m, K, device="cuda", dtype=dtype)
            y = torch.empty(m, N, device="cuda", dtype=dtype)
            row = {"cublas": _graph_us(lambda: torch.mm(x, w.t(), out=y))}
            if m < 16:  # the same rows inside a 16-row buffer (what a padded decode bucket would give)
                xp = torch.randn(16, K, device="cuda", dtype=dtype)
                yp = torch.empty(16, N, device="cuda", dtype=dtype)
                for cname in ("m16-n64-k128-s8", "m16-n128-k128-s6"):
                    row[cname + "-pad16"] = _graph_us(lambda c=cands[cname]: matmul(xp, w.t(), yp, config=c))
            for cname, cfg in cands.items():
                try:
                    row[cname] = _graph_us(lambda cfg=cfg: matmul(x, w.t(), y, config=cfg))
                except Exception as e:  # noqa: BLE001
                    row[cname] = f"error: {type(e).__name__}"
            best = min((v, k) for k, v in row.items() if isinstance(v, float) and k != "cublas")
            print(f"{sname} M={m}: cublas {row['cublas']:.1f} us ({gb / row['cublas'] * 1e3:.2f} TB/s), best "
                  f"{best[1]} {best[0]:.1f} us ({gb / best[0] * 1e3:.2f} TB/s)", flush=True)
            res[f"{sname}-m{m}"] = row
        del w
    return res


def attention_timing() -> dict:
    """paged_attention at decode and prefill shapes (GQA 32/8, D=128, bf16, pages of 16), the automatic
    configuration vs ``invariant_config`` (sized for 8192 keys; decode split into its key groups), in graphs."""
    from tritium.attention import AttentionWorkspace, paged_attention
    from tritium.attention.config import invariant_config

    hq, hkv, d, bs = 32, 8, 128, 16
    res = {}
    for name, (b, q_len, L) in {"decode B=1 L=8192": (1, 1, 8192), "decode B=1 L=768": (1, 1, 768),
                                "decode B=16 L=4096": (16, 1, 4096), "decode B=64 L=2048": (64, 1, 2048),
                                "prefill B=1 S=4096": (1, 4096, 4096)}.items():
        pages = L // bs
        k = torch.randn(b * pages, bs, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        table = torch.randperm(b * pages, device="cuda", dtype=torch.int32).view(b, pages)
        q = torch.randn(b * q_len, hq, d, device="cuda", dtype=torch.bfloat16)
        seq_lens = torch.full((b,), L, device="cuda", dtype=torch.int32)
        cu = torch.arange(0, b + 1, device="cuda", dtype=torch.int32) * q_len
        out = torch.empty_like(q)
        ws = AttentionWorkspace(b * q_len, hq, d, device="cuda") if q_len == 1 else None
        inv = invariant_config(num_q_heads=hq, num_kv_heads=hkv, head_dim=d, max_seq_len=8192, dtype=torch.bfloat16)
        groups = -(-(L // inv.tile_n) // inv.group_tiles)
        kw = dict(max_seqlen_q=q_len, max_seqlen_k=L, out=out)
        row = {"auto": _graph_us(lambda: paged_attention(q, k, v, table, seq_lens, cu, workspace=ws, **kw), 20),
               "invariant": _graph_us(lambda: paged_attention(q, k, v, table, seq_lens, cu, config=inv,
                                                              workspace=ws if q_len == 1 else None,
                                                              num_splits=groups if q_len == 1 else 1, **kw), 20)}
        row["kv_bytes"] = 2 * b * L * hkv * d * 2
        print(f"{name}: auto {row['auto']:.1f} us, invariant {row['invariant']:.1f} us "
              f"({row['invariant'] / row['auto']:.2f}x)", flush=True)
        res[name] = row
    return res


def attention_configs() -> dict:
    """Which attention tiles keep a row's bits (tile_n and groups fixed): Q blocks of 16 rows (4 warps,
    mma.sync), 64 (4 warps, one warpgroup) and 128 (8 warps, two), 2 or 3 stages, prefill rows against the same
    tokens decoded (split into groups, or one program walking them); then each one's time."""
    import dataclasses

    from tritium.attention import AttentionWorkspace, paged_attention
    from tritium.attention.config import invariant_config

    hq, hkv, d, bs = 32, 8, 128, 16
    lens = [300, 1000, 64, 2000]
    pages = [-(-n // bs) for n in lens]
    k = torch.randn(sum(pages), bs, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    perm = torch.randperm(sum(pages), device="cuda", dtype=torch.int32)
    table = torch.zeros(len(lens), max(pages), dtype=torch.int32, device="cuda")
    start = 0
    for i, n in enumerate(pages):
        table[i, :n] = perm[start:start + n]
        start += n
    q = torch.randn(sum(lens), hq, d, device="cuda", dtype=torch.bfloat16)
    seq_lens = torch.tensor(lens, device="cuda", dtype=torch.int32)
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), device="cuda", dtype=torch.int32)
    base = invariant_config(num_q_heads=hq, num_kv_heads=hkv, head_dim=d, max_seq_len=8192, dtype=torch.bfloat16)
    variants = {"m64-w4-s2": base,
                "m16-w4-s2": dataclasses.replace(base, block_m=16, block_q=4),
                "m128-w8-s2": dataclasses.replace(base, block_m=128, block_q=32, num_warps=8),
                "m128-w8-s3": dataclasses.replace(base, block_m=128, block_q=32, num_warps=8, num_stages=3),
                "m64-w4-s3": dataclasses.replace(base, num_stages=3)}
    ref = paged_attention(q, k, v, table, seq_lens, cu, max_seqlen_q=max(lens), max_seqlen_k=max(lens),
                          config=base, num_splits=1)
    last = (cu[1:] - 1).long()
    dq = q[last].contiguous()
    dcu = torch.arange(len(lens) + 1, device="cuda", dtype=torch.int32)
    ws = AttentionWorkspace(len(lens), hq, d, device="cuda")
    out = {}
    for name, cfg in variants.items():
        row = {}
        try:
            pre = paged_attention(q, k, v, table, seq_lens, cu, max_seqlen_q=max(lens), max_seqlen_k=max(lens),
                                  config=cfg, num_splits=1)
            row["prefill_rows_differing"] = _rows_differing(pre.view(pre.shape[0], -1), ref.view(ref.shape[0], -1))
            groups = -(-(max(lens) // cfg.tile_n) // cfg.group_tiles)
            for mode, kw in (("decode_split", dict(workspace=ws, num_splits=groups)), ("decode_one", dict(num_splits=1))):
                dec = paged_attention(dq, k, v, table, seq_lens, dcu, max_seqlen_q=1, max_seqlen_k=max(lens), config=cfg,
                                      **kw)
                row[mode + "_rows_differing"] = _rows_differing(dec.view(dec.shape[0], -1), ref[last].view(len(lens), -1))
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
        print(name, row, flush=True)
        out[name] = row
    return out


def attention_splits() -> dict:
    """Invariant decode split into its key groups vs one program walking them (the same bits), and Q blocks of
    16 rows, against the automatic configuration."""
    import dataclasses

    from tritium.attention import AttentionWorkspace, paged_attention
    from tritium.attention.config import invariant_config

    hq, hkv, d, bs = 32, 8, 128, 16
    res = {}
    base = invariant_config(num_q_heads=hq, num_kv_heads=hkv, head_dim=d, max_seq_len=8192, dtype=torch.bfloat16)
    m16 = dataclasses.replace(base, block_m=16, block_q=4)
    for name, (b, L) in {"B=1 L=8192": (1, 8192), "B=1 L=768": (1, 768), "B=4 L=4096": (4, 4096),
                         "B=16 L=4096": (16, 4096), "B=64 L=2048": (64, 2048)}.items():
        pages = L // bs
        k = torch.randn(b * pages, bs, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        table = torch.randperm(b * pages, device="cuda", dtype=torch.int32).view(b, pages)
        q = torch.randn(b, hq, d, device="cuda", dtype=torch.bfloat16)
        seq_lens = torch.full((b,), L, device="cuda", dtype=torch.int32)
        cu = torch.arange(0, b + 1, device="cuda", dtype=torch.int32)
        o = torch.empty_like(q)
        ws = AttentionWorkspace(b, hq, d, device="cuda")
        groups = -(-(L // base.tile_n) // base.group_tiles)
        kw = dict(max_seqlen_q=1, max_seqlen_k=L, out=o)
        row = {"auto": _graph_us(lambda: paged_attention(q, k, v, table, seq_lens, cu, workspace=ws, **kw), 20)}
        for cname, cfg in (("m64", base), ("m16", m16)):
            row[cname + "_split"] = _graph_us(lambda cfg=cfg: paged_attention(q, k, v, table, seq_lens, cu, config=cfg,
                                                                              workspace=ws, num_splits=groups, **kw), 20)
            row[cname + "_one"] = _graph_us(lambda cfg=cfg: paged_attention(q, k, v, table, seq_lens, cu, config=cfg,
                                                                            num_splits=1, **kw), 20)
        print(name, {a: round(x, 1) for a, x in row.items()}, flush=True)
        res[name] = row
    # prefill: 64-row blocks with 4 warps vs 128-row blocks with 8
    for S in (2048, 8192):
        pages = S // bs
        k = torch.randn(pages, bs, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        table = torch.randperm(pages, device="cuda", dtype=torch.int32).view(1, pages)
        q = torch.randn(S, hq, d, device="cuda", dtype=torch.bfloat16)
        seq_lens = torch.tensor([S], device="cuda", dtype=torch.int32)
        cu = torch.tensor([0, S], device="cuda", dtype=torch.int32)
        o = torch.empty_like(q)
        kw = dict(max_seqlen_q=S, max_seqlen_k=S, out=o)
        row = {"auto": _graph_us(lambda: paged_attention(q, k, v, table, seq_lens, cu, **kw), 5)}
        for cname, cfg in (("m64-w4-s2", base), ("m128-w8-s2", dataclasses.replace(base, block_m=128, block_q=32, num_warps=8)),
                           ("m128-w8-s3", dataclasses.replace(base, block_m=128, block_q=32, num_warps=8, num_stages=3))):
            try:
                row[cname] = _graph_us(lambda cfg=cfg: paged_attention(q, k, v, table, seq_lens, cu, config=cfg,
                                                                       num_splits=1, **kw), 5)
            except Exception as e:  # noqa: BLE001
                row[cname] = f"{type(e).__name__}"
        print(f"prefill S={S}", {a: (round(x, 1) if isinstance(x, float) else x) for a, x in row.items()}, flush=True)
        res[f"prefill S={S}"] = row
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--skip-bitwise", action="store_true")
    ap.add_argument("--attention-only", action="store_true")
    args = ap.parse_args()
    result = {"gpu": torch.cuda.get_device_name()}
    if args.attention_only:
        result["attention_configs_bitwise"] = attention_configs()
        result["attention_splits_us"] = attention_splits()
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
        return
    if not args.skip_bitwise:
        result["bitwise_bf16"] = bitwise()
        result["bitwise_fp16_k14336"] = bitwise(torch.float16, K=14336, N=4096, ms=(1, 3, 64, 300))
    result["timing_us"] = timing()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1, default=str)


if __name__ == "__main__":
    main()
