"""GPU-only checks: production-sized shapes and CUDA-graph capture of a decode step.

(bf16 runs of the feature, fp8 and shape tests live beside their CPU versions, marked gpu.)
"""

import pytest
import torch

from tritium.attention import AttentionConfig, AttentionWorkspace, paged_attention, write_kv_cache
from tritium.attention.reference import paged_attention_ref, quantize_fp8_ref, write_kv_cache_ref

from .utils import FP8, Q_DTYPES, TOL, Shape, assert_rel_close, dtype_param, feature_kwargs, run_and_check, \
    shape_params

pytestmark = pytest.mark.gpu

DECODE_LENS = (1500, 2049, 4000, 3333, 1999, 2500, 3071, 4096, 1, 17, 2047, 2222, 3900, 1024, 3585, 2800)


@pytest.mark.parametrize("dtype", Q_DTYPES)
@pytest.mark.parametrize("shape,features", [
    pytest.param(s, f, id=f"{s.id}-{f}") for s, f in [
        # Decode batch of 16, automatic split-KV.
        (Shape(q_lens=(1,) * 16, seq_lens=DECODE_LENS, block_size=16, num_q_heads=32, num_kv_heads=8,
               head_dim=128), "plain"),
        (Shape(q_lens=(1,) * 16, seq_lens=DECODE_LENS, block_size=64, num_q_heads=32, num_kv_heads=8,
               head_dim=128), "window1024+sinks"),
        # Chunked prefill over long context next to decode steps.
        (Shape(q_lens=(1024, 512, 1, 1), seq_lens=(1024, 3000, 4000, 2000), block_size=64, num_q_heads=32,
               num_kv_heads=8, head_dim=128), "plain"),
        (Shape(q_lens=(700, 333, 1), seq_lens=(2100, 333, 3999), block_size=16, num_q_heads=32,
               num_kv_heads=8, head_dim=128), "softcap+alibi"),
    ]
])
def test_large(shape, features, dtype):
    run_and_check(shape.batch(dtype), TOL[dtype], **feature_kwargs(features, shape.num_q_heads))


@pytest.mark.parametrize("dtype", [dtype_param(torch.bfloat16), dtype_param(torch.float16)])
@pytest.mark.parametrize("shape", shape_params(
    Shape(q_lens=(1,) * 16, seq_lens=DECODE_LENS, block_size=16, num_q_heads=32, num_kv_heads=8, head_dim=128),
    Shape(q_lens=(512, 1), seq_lens=(3000, 4000), block_size=64, num_q_heads=32, num_kv_heads=8, head_dim=128),
))
def test_large_fp8_cache(shape, dtype):
    batch = shape.batch(dtype, cache_dtype=FP8)
    run_and_check(batch, max(TOL[dtype], TOL[torch.float16]))


@pytest.mark.parametrize("cache_dtype", [dtype_param(torch.float16), dtype_param(FP8)])
def test_cache_beyond_int32_offsets(cache_dtype):
    """Pages whose element offsets pass 2^31 (a 2.3e9-element cache): the attention kernel and, for the
    fp8 cache, write_kv_cache must compute offsets in 64 bits."""
    shape = Shape(q_lens=(1, 1, 40), seq_lens=(300, 77, 200), num_q_heads=32, num_kv_heads=8, head_dim=128)
    block_elems = shape.block_size * shape.num_kv_heads * shape.head_dim
    first_block = 2 ** 31 // block_elems + 1
    batch = shape.batch(torch.float16, cache_dtype=cache_dtype, first_block=first_block)
    assert int(batch.block_table.min()) * block_elems >= 2 ** 31
    run_and_check(batch, TOL[torch.float16])
    del batch
    torch.cuda.empty_cache()


@pytest.mark.parametrize("cache_dtype", [dtype_param(torch.float16), dtype_param(FP8)])
def test_cuda_graph_decode(cache_dtype):
    """Capture write_kv_cache + paged_attention of a decode step (workspace and max_seqlen hints) in a
    CUDA graph, then change q, the new keys and values, the cached history, the fp8 scales, seq_lens
    and the block table in place and replay: every replay matches the reference."""
    device, dtype = torch.device("cuda"), torch.float16
    num_seqs, num_q_heads, num_kv_heads, head_dim, block_size, max_len = 8, 32, 8, 128, 16, 1024
    pages = max_len // block_size
    num_blocks = num_seqs * pages + 2
    is_fp8 = cache_dtype == FP8

    def random_cache():
        x = torch.randn(num_blocks, block_size, num_kv_heads, head_dim, device=device)
        return quantize_fp8_ref(x * 50, 1.0) if is_fp8 else x.to(dtype)

    k_cache, v_cache = random_cache(), random_cache()
    q = torch.empty(num_seqs, num_q_heads, head_dim, dtype=dtype, device=device)
    k_new = torch.empty(num_seqs, num_kv_heads, head_dim, dtype=dtype, device=device)
    v_new = torch.empty_like(k_new)
    slot_mapping = torch.zeros(num_seqs, dtype=torch.int64, device=device)
    block_table = torch.zeros(num_seqs, pages, dtype=torch.int32, device=device)
    seq_lens = torch.ones(num_seqs, dtype=torch.int32, device=device)
    cu_seqlens_q = torch.arange(num_seqs + 1, dtype=torch.int32, device=device)
    scales = {}
    if is_fp8:
        scales = {"k_scale": torch.ones(1, device=device), "v_scale": torch.ones(1, device=device)}
    out = torch.empty_like(q)
    workspace = AttentionWorkspace(num_seqs, num_q_heads, head_dim, device=device)

    def step():
        write_kv_cache(k_new, v_new, k_cache, v_cache, slot_mapping, **scales)
        paged_attention(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, out=out, workspace=workspace,
                        max_seqlen_q=1, max_seqlen_k=max_len, **scales)

    def new_inputs(lens):
        """Fill the captured inputs in place for sequences of the given lengths (new token last)."""
        lens = torch.tensor(lens)
        seq_lens.copy_(lens)
        table = torch.randperm(num_blocks)[:num_seqs * pages].view(num_seqs, pages)
        block_table.copy_(table)
        last = lens - 1
        slot_mapping.copy_(table[torch.arange(num_seqs), last // block_size] * block_size + last % block_size)
        q.copy_(torch.randn_like(q, dtype=torch.float32) / (10 if is_fp8 else 1))
        k_new.copy_(torch.randn_like(k_new, dtype=torch.float32) * (0.1 if is_fp8 else 1))
        v_new.copy_(torch.randn_like(v_new, dtype=torch.float32) * (0.1 if is_fp8 else 1))
        k_cache.copy_(random_cache())
        v_cache.copy_(random_cache())
        for value in scales.values():
            value.fill_(float(torch.rand(())) * 0.02 + 0.002)
        out.fill_(float("nan"))

    new_inputs([1] * num_seqs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # compile and warm up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()

    for lens in ([1, 17, 1024, 500, 63, 129, 1000, 2], [1024] * num_seqs, [5, 900, 33, 1, 700, 16, 48, 1023]):
        new_inputs(lens)
        want_k, want_v = k_cache.clone(), v_cache.clone()
        write_kv_cache_ref(k_new, v_new, want_k, want_v, slot_mapping, **scales)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(k_cache.view(torch.uint8), want_k.view(torch.uint8)), f"k_cache after replay, lens {lens}"
        assert torch.equal(v_cache.view(torch.uint8), want_v.view(torch.uint8)), f"v_cache after replay, lens {lens}"
        ref = paged_attention_ref(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, **scales)
        assert_rel_close(out, ref, TOL[dtype], f"replay with lens {lens}")


@pytest.mark.parametrize("shape", [
    pytest.param(s, id=s.id) for s in [
        # Head dims that pad to 256, in the batch shapes where the H100/H200 trees answered configurations
        # over the 227 KiB a program has (16-row blocks with 128-key tiles and 3 stages; 64-row blocks with
        # 128-key tiles): now the trees' UNFIT and the launcher's fallback give the hand rules there.
        Shape(q_lens=(1, 1), seq_lens=(8192, 5000), block_size=16, num_q_heads=16, num_kv_heads=2, head_dim=256),
        Shape(q_lens=(8, 8), seq_lens=(4096, 3000), block_size=64, num_q_heads=16, num_kv_heads=2, head_dim=256),
        Shape(q_lens=(1,) * 4, seq_lens=(1000, 2000, 3000, 4000), block_size=16, num_q_heads=8, num_kv_heads=2,
              head_dim=192),
        Shape(q_lens=(300, 1), seq_lens=(4000, 900), block_size=16, num_q_heads=16, num_kv_heads=2, head_dim=256),
    ]
])
def test_large_head_dims_fit(shape):
    run_and_check(shape.batch(torch.bfloat16), TOL[torch.bfloat16])


@pytest.mark.parametrize("cap", [96, 80], ids=lambda c: f"r{c}")
@pytest.mark.parametrize("block_size", [16, 64])
def test_register_cap(block_size, cap):
    """A register cap (``AttentionConfig.max_registers``, ptxas maxnreg) on the batch-1 split decode it was
    measured on, and a cap low enough to spill: exact either way."""
    shape = Shape(q_lens=(1, 1), seq_lens=(8192, 3001), block_size=block_size, num_q_heads=32, num_kv_heads=8,
                  head_dim=128)
    config = AttentionConfig(block_m=16, block_q=4, tile_n=32, num_splits=64, num_warps=4, num_stages=2,
                             max_registers=cap)
    run_and_check(shape.batch(torch.bfloat16), TOL[torch.bfloat16], config=config)
