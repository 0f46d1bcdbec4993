"""A short paged-attention run that checks itself against the fp32 reference and prints a table.

    python -m tritium.attention.demo

Runs compiled on a GPU, else under the Triton interpreter (small shapes).
"""

import time

import torch

from tritium.attention import paged_attention, write_kv_cache
from tritium.attention.reference import paged_attention_ref
from tritium.runtime import interpreting


def _batch(q_lens, seq_lens, *, num_q_heads, num_kv_heads, head_dim, block_size, dtype, cache_dtype, device,
           gen):
    """A random paged batch: shuffled block table, K/V written through write_kv_cache."""

    pages = [-(-n // block_size) for n in seq_lens]
    num_blocks = sum(pages) + 3
    perm = torch.randperm(num_blocks, generator=gen)
    block_table = torch.zeros(len(seq_lens), max(pages), dtype=torch.int32)
    slots, used = [], 0
    for s, (n, p) in enumerate(zip(seq_lens, pages)):
        block_table[s, :p] = perm[used:used + p].int()
        used += p
        slots += [int(block_table[s, i // block_size]) * block_size + i % block_size for i in range(n)]
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.zeros(shape, dtype=cache_dtype, device=device)
    v_cache = torch.zeros(shape, dtype=cache_dtype, device=device)
    total = sum(seq_lens)
    k = torch.randn(total, num_kv_heads, head_dim, generator=gen).to(device=device, dtype=dtype)
    v = torch.randn(total, num_kv_heads, head_dim, generator=gen).to(device=device, dtype=dtype)
    fp8 = cache_dtype == torch.float8_e4m3fn
    scales = dict(k_scale=0.05, v_scale=0.05) if fp8 else {}
    write_kv_cache(k, v, k_cache, v_cache, torch.tensor(slots, dtype=torch.int64, device=device), **scales)
    q = torch.randn(sum(q_lens), num_q_heads, head_dim, generator=gen).to(device=device, dtype=dtype)
    cu = torch.tensor([0] + torch.tensor(q_lens).cumsum(0).tolist(), dtype=torch.int32, device=device)
    args = (q, k_cache, v_cache, block_table.to(device), torch.tensor(seq_lens, dtype=torch.int32, device=device), cu)
    return args, scales


def main() -> int:
    backend = "interpreter" if interpreting() else "gpu"

    gpu = backend == "gpu"
    device = torch.device("cuda" if gpu else "cpu")
    # bf16 dots are broken in the interpreter (ENVIRONMENT.md): fp16 there.
    dtype = torch.bfloat16 if gpu else torch.float16
    heads = dict(num_q_heads=32, num_kv_heads=8, head_dim=128) if gpu else dict(num_q_heads=8, num_kv_heads=2,
                                                                                head_dim=64)
    n = 8 if gpu else 1  # length multiplier
    cases = [
        ("prefill", [256 * n], [256 * n], {}),
        ("chunked prefill", [64 * n], [300 * n], {}),
        ("decode, split-KV", [1] * 4, [1000 * n, 17, 129, 500 * n], {}),
        ("mixed batch", [48 * n, 1, 20 * n, 1], [48 * n, 700 * n, 200 * n, 63], {}),
        ("sliding window + sinks", [1, 30 * n], [600 * n, 90 * n], dict(sliding_window=128 * n, sinks=True)),
        ("softcap + ALiBi", [40 * n], [40 * n], dict(softcap=30.0, alibi=True)),
        ("fp8 KV cache", [1, 1, 16 * n], [400 * n, 33, 160 * n], dict(fp8=True)),
    ]
    gen = torch.Generator().manual_seed(0)
    tol = 2e-2 if dtype == torch.bfloat16 else 3e-3
    where = "GPU " + torch.cuda.get_device_name() if gpu else "CPU (Triton interpreter)"
    print(f"tritium paged attention demo on {where}"
          f"; {heads['num_q_heads']}/{heads['num_kv_heads']} heads, head_dim {heads['head_dim']}, {str(dtype)[6:]}")
    print(f"{'case':24s} {'seqs':>4s} {'q tokens':>8s} {'kv tokens':>9s} {'rel err':>9s} {'ms':>8s}  result")
    failures = 0
    for name, q_lens, seq_lens, opts in cases:
        cache_dtype = torch.float8_e4m3fn if opts.get("fp8") else dtype
        args, scales = _batch(q_lens, seq_lens, block_size=16, dtype=dtype, cache_dtype=cache_dtype,
                              device=device, gen=gen, **heads)
        kw = dict(scales)
        if "sliding_window" in opts:
            kw["sliding_window"] = opts["sliding_window"]
        if opts.get("sinks"):
            kw["sinks"] = torch.randn(heads["num_q_heads"], generator=gen).to(device)
        if "softcap" in opts:
            kw["softcap"] = opts["softcap"]
        if opts.get("alibi"):
            kw["alibi_slopes"] = torch.rand(heads["num_q_heads"], generator=gen).to(device) * 0.1
        out = paged_attention(*args, **kw)  # compile / warm up
        if gpu:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = paged_attention(*args, **kw)
        if gpu:
            torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        ref = paged_attention_ref(*args, **kw)
        err = ((out.float() - ref).norm() / ref.norm()).item()
        ok = err < tol and not out.isnan().any()
        failures += not ok
        print(f"{name:24s} {len(q_lens):4d} {sum(q_lens):8d} {sum(seq_lens):9d} {err:9.2e} {ms:8.2f}  "
              f"{'ok' if ok else 'FAILED'}")
    print("all cases match the fp32 reference" if not failures else f"{failures} case(s) FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
