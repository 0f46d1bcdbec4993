"""paged_attention against the fp32 reference on the gathered pages: features, shapes, split-KV, dtypes.

Shapes stay small (a few heads, sequences up to a few hundred tokens) so the suite runs under the
Triton interpreter; the larger shapes are in test_gpu.py.
"""

import itertools

import pytest
import torch

from tritium.attention import AttentionConfig, AttentionWorkspace, paged_attention, select_attention_config

from tritium.attention.reference import paged_attention_ref
from tritium.runtime import default_device

from .order_probe import rank_order_probe
from .utils import FP8, Q_DTYPES, TOL, Shape, dtype_name, dtype_param, feature_kwargs, poisoned_like, \
    run_and_check, assert_rel_close, shape_params

# One launch holding a prefill (no context), a chunked prefill (9 new tokens over 61 cached), a first
# decode step (length 1) and a decode step at 129 (partial last page). 33 tokens x 2 heads per KV head
# is more than 64 rows, so it takes the prefill configuration (large Q blocks and key tiles).
MIXED = Shape(q_lens=(33, 9, 1, 1), seq_lens=(33, 70, 1, 129))
# Decode steps plus a 3-token speculative verification, for the split-KV path.
DECODE = Shape(q_lens=(1, 1, 3), seq_lens=(129, 40, 100))

FEATURES = ["plain", "window70", "softcap", "alibi", "sinks", "window20+softcap", "alibi+sinks",
            "window8+softcap+alibi+sinks", "scale+alibi"]


@pytest.mark.parametrize("path", [
    pytest.param((MIXED, 1), id="mixed-unsplit"),
    pytest.param((DECODE, 4), id="decode-split4"),
])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
@pytest.mark.parametrize("features", FEATURES)
@pytest.mark.parametrize("dtype", Q_DTYPES)
def test_features(dtype, features, causal, path):
    """Every score modifier, alone and combined, causal or not, through the unsplit and split kernels."""
    shape, num_splits = path
    batch = shape.batch(dtype)
    run_and_check(batch, TOL[dtype], causal=causal, num_splits=num_splits,
                  **feature_kwargs(features, shape.num_q_heads))


@pytest.mark.parametrize("dtype", [dtype_param(torch.float16), dtype_param(torch.float32)])
@pytest.mark.parametrize("shape", shape_params(
    # Prefill of odd lengths, no context, GQA 1.
    Shape(q_lens=(1, 17, 63, 129), seq_lens=(1, 17, 63, 129), num_q_heads=4, num_kv_heads=4),
    # Decode at odd lengths, GQA 4, 32-token pages.
    Shape(q_lens=(1, 1, 1, 1), seq_lens=(1, 17, 63, 129), block_size=32, num_q_heads=8, num_kv_heads=2),
    # Chunked prefill over cached context, GQA 8, 48-token pages (not a power of two).
    Shape(q_lens=(17, 1, 63), seq_lens=(129, 63, 100), block_size=48, num_q_heads=8, num_kv_heads=1),
    # One long prefill on 64-token pages.
    Shape(q_lens=(129,), seq_lens=(129,), block_size=64, num_q_heads=8, num_kv_heads=2),
    # Large pages: a sequence shorter than one page, one spanning two.
    Shape(q_lens=(1, 17), seq_lens=(129, 200), block_size=128),
    Shape(q_lens=(63, 1), seq_lens=(300, 257), block_size=256, num_q_heads=4, num_kv_heads=1),
    # GQA 3 (group not a power of two) and pages that end exactly at the sequence end.
    Shape(q_lens=(5, 1), seq_lens=(17, 63), num_q_heads=3, num_kv_heads=1),
    Shape(q_lens=(16, 1), seq_lens=(32, 64)),
    # Sequences with no new tokens (one with an empty cache too, as batch padding).
    Shape(q_lens=(3, 0, 1, 0), seq_lens=(10, 17, 33, 0)),
    # Decode at multiples of the key tile and page, MQA with 16 query heads.
    Shape(q_lens=(1, 1, 1), seq_lens=(64, 128, 65), num_q_heads=16, num_kv_heads=1),
))
def test_shapes(shape, dtype):
    """Odd lengths, partial and full last pages, page sizes 16..256, GQA 1/3/4/8; automatic split choice."""
    run_and_check(shape.batch(dtype), TOL[dtype])


@pytest.mark.parametrize("num_splits", [None, 1, 3, 4, 7], ids=lambda n: f"splits{n or 'auto'}")
@pytest.mark.parametrize("shape,dtype", [
    pytest.param(Shape(q_lens=(1,) * 5, seq_lens=(1, 17, 63, 129, 100), num_q_heads=8, num_kv_heads=2),
                 torch.float16, id="decode-B5-L129-H8/2-fp16"),
    pytest.param(Shape(q_lens=(4, 2), seq_lens=(129, 63), num_q_heads=4, num_kv_heads=1, block_size=32),
                 torch.float32, id="verify-B2-L129-H4/1-fp32"),
])
def test_splits(shape, dtype, num_splits):
    """Split-KV against unsplit: explicit counts (including more splits than key tiles, so some splits
    are empty) and the automatic choice."""
    run_and_check(shape.batch(dtype), TOL[dtype], num_splits=num_splits)


@pytest.mark.parametrize("num_seqs,length,tile_n,split", [(2, 520, 64, True), (24, 520, 128, True),
                                                         (140, 30, 64, False)],
                         ids=["tiny-batch", "one-program-per-sm", "large-batch"])
def test_decode_regimes(num_seqs, length, tile_n, split):
    """The hand rules' three decode regimes (programs vs SMs) are each exact, and so is the automatic
    choice (on a GPU with a tuned tree, the tree's configuration: the regimes are the hand rules')."""
    lens = [length + 37 * (s % 7) for s in range(num_seqs)]
    shape = Shape(q_lens=(1,) * num_seqs, seq_lens=tuple(lens), num_q_heads=8, num_kv_heads=2)
    batch = shape.batch(torch.float16)
    workload = dict(num_tokens=num_seqs, num_seqs=num_seqs, num_q_heads=8, num_kv_heads=2, head_dim=64,
                    block_size=16, max_seqlen_q=1, max_seqlen_k=max(lens), dtype=torch.float16,
                    device=batch.q.device)
    config = select_attention_config(**workload, tree=False)
    assert (config.tile_n, config.num_splits > 1) == (tile_n, split), config
    run_and_check(batch, TOL[torch.float16], config=config)
    if select_attention_config(**workload) != config:  # where no tree is shipped (the CPU) it is the same
        run_and_check(batch, TOL[torch.float16])


def test_split_prefill():
    """Split-KV on a prefill-shaped batch (128-row Q blocks, causal) stays exact."""
    shape = Shape(q_lens=(65, 20), seq_lens=(65, 90), num_q_heads=2, num_kv_heads=1)
    run_and_check(shape.batch(torch.float16), TOL[torch.float16], num_splits=3)


@pytest.mark.parametrize("features", ["plain", "sinks", "window20+softcap", "alibi+sinks"])
def test_mostly_empty_splits(features):
    """A grid of 32 splits over sequences of 1-9 key tiles (a graph captured for long contexts decoding
    short ones): empty splits write only their log-sum-exp and the merge skips their outputs; split 0
    keeps the sink term even with no keys of its own."""
    shape = Shape(q_lens=(1, 1, 1, 2), seq_lens=(1, 16, 129, 40))
    run_and_check(shape.batch(torch.float16), TOL[torch.float16], num_splits=32,
                  **feature_kwargs(features, shape.num_q_heads))


@pytest.mark.parametrize("parallel", [False, True], ids=["lse-first", "parallel-loads"])
def test_merge_never_reads_stale_partials(parallel, monkeypatch):
    """Mostly empty splits over a workspace whose partial outputs hold NaN from before: the merge (either
    load order, launcher.MERGE_PARALLEL_LOADS) uses only the splits that wrote, so no NaN leaks."""
    from tritium.attention import launcher

    monkeypatch.setattr(launcher, "MERGE_PARALLEL_LOADS", parallel)
    shape = Shape(q_lens=(1, 1, 1, 2), seq_lens=(1, 16, 129, 40))
    batch = shape.batch(torch.float16)
    workspace = AttentionWorkspace(batch.q.shape[0], shape.num_q_heads, batch.q.shape[-1], device=batch.q.device)
    workspace.part_out.fill_(float("nan"))
    run_and_check(batch, TOL[torch.float16], workspace=workspace, num_splits=32)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
@pytest.mark.parametrize("window", [1, 17, 64, 100], ids=lambda w: f"window{w}")
@pytest.mark.parametrize("dtype", [dtype_param(torch.float16), dtype_param(torch.float32)])
def test_window_prefill(dtype, window, causal):
    """Sliding windows (down to a single key) over prefills spanning several Q blocks and key tiles."""
    shape = Shape(q_lens=(129, 40), seq_lens=(129, 100))
    run_and_check(shape.batch(dtype), TOL[dtype], causal=causal, sliding_window=window)


@pytest.mark.parametrize("config", [
    AttentionConfig(block_m=16, block_q=8, tile_n=16, num_splits=1, num_warps=2, num_stages=1),
    AttentionConfig(block_m=32, block_q=16, tile_n=32, num_splits=2, num_warps=4, num_stages=2),
    AttentionConfig(block_m=64, block_q=24, tile_n=64, num_splits=1, num_warps=4, num_stages=2),
    AttentionConfig(block_m=16, block_q=8, tile_n=32, num_splits=3, num_warps=4, num_stages=2, max_registers=96),
], ids=lambda c: f"m{c.block_m}-q{c.block_q}-n{c.tile_n}-s{c.num_splits}-r{c.max_registers}")
def test_config_override(config):
    """Hand-picked configurations (small tiles, a Q block not filling its rows, split) stay exact."""
    batch = MIXED.batch(torch.float16)
    run_and_check(batch, TOL[torch.float16], config=config, sliding_window=40)


@pytest.mark.parametrize("num_splits", [1, 3], ids=["unsplit", "split3"])
@pytest.mark.parametrize("head_dim", [64, 80, 96, 128, 192, 256], ids=lambda d: f"D{d}")
def test_head_dims(head_dim, num_splits):
    """Every supported head_dim, including those padded to the next power of two (80, 96, 192)."""
    shape = Shape(q_lens=(9, 1), seq_lens=(40, 63), head_dim=head_dim)
    dtype = torch.float32 if head_dim in (96, 192) else torch.float16
    run_and_check(shape.batch(dtype), TOL[dtype], num_splits=num_splits)


@pytest.mark.parametrize("scales", ["float", "tensor"])
@pytest.mark.parametrize("path,features", [
    pytest.param((MIXED, 1), "plain", id="mixed-unsplit-plain"),
    pytest.param((DECODE, 3), "window20+softcap+alibi+sinks", id="decode-split3-all"),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dtype_name)
def test_fp8_cache(dtype, path, features, scales):
    """float8_e4m3fn caches written by write_kv_cache with scales, against the reference on the
    dequantised cache. bf16 queries run on the CPU too: with an fp8 cache the dots are fp16
    (``kernels._dot_q``), which the interpreter computes correctly."""
    shape, num_splits = path
    batch = shape.batch(dtype, cache_dtype=FP8)
    if scales == "tensor":
        batch.scales = {k: torch.tensor([v], dtype=torch.float32, device=batch.q.device)
                        for k, v in batch.scales.items()}
    tol = max(TOL[dtype], TOL[torch.float16])
    run_and_check(batch, tol, num_splits=num_splits, **feature_kwargs(features, shape.num_q_heads))


@pytest.mark.parametrize("num_splits", [1, 3], ids=["unsplit", "split3"])
def test_fp8_cache_bf16_q_beyond_fp16_range(num_splits):
    """With an fp8 cache a bf16 q enters the dots as fp16 clamped to +-65504: a query element beyond that
    range gives finite rows equal to the reference on the clamped q, and leaves the other rows exact."""
    batch = DECODE.batch(torch.bfloat16, cache_dtype=FP8)
    batch.q[0, 0, :4] = torch.tensor([1e5, -3e5, 7e4, -65504.0], dtype=torch.bfloat16)
    out = paged_attention(*batch.args, num_splits=num_splits, **batch.scales)
    assert torch.isfinite(out).all()
    ref = paged_attention_ref(batch.q.float().clamp(-65504.0, 65504.0), *batch.args[1:], **batch.scales)
    assert_rel_close(out, ref, TOL[torch.bfloat16])


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_window_longer_than_sequence(causal):
    """A window wider than every sequence changes nothing: same as no window, and as the reference."""
    batch = MIXED.batch(torch.float32)
    out = run_and_check(batch, TOL[torch.float32], causal=causal, sliding_window=1000)
    no_window = paged_attention(*batch.args, causal=causal)
    assert_rel_close(out, no_window, TOL[torch.float32], "window=1000 vs no window")


def test_strided_views():
    """q taken from a fused QKV tensor, caches from one [blocks, 2, page, heads, dim] KV tensor and
    out= a view into a wider buffer: the launcher must honour every stride and write only the view."""
    batch = MIXED.batch(torch.float16)
    num_tokens, num_q_heads, head_dim = batch.q.shape
    qkv = torch.randn(num_tokens, num_q_heads + 4, head_dim, dtype=batch.q.dtype, device=batch.q.device)
    qkv[:, 2:2 + num_q_heads] = batch.q
    kv = torch.stack([batch.k_cache, batch.v_cache], dim=1)  # [num_blocks, 2, page, heads, dim]
    wide = torch.full((num_tokens, 2 * num_q_heads, head_dim), float("nan"), dtype=batch.q.dtype,
                      device=batch.q.device)
    out = wide[:, num_q_heads:]
    q = qkv[:, 2:2 + num_q_heads]
    paged_attention(q, kv[:, 0], kv[:, 1], batch.block_table, batch.seq_lens, batch.cu_seqlens_q, out=out,
                    num_splits=1)
    assert_rel_close(out, batch.ref(), TOL[torch.float16])
    assert torch.isnan(wide[:, :num_q_heads]).all(), "paged_attention wrote outside the out= view"


@pytest.mark.parametrize("num_splits", [1, 3], ids=["unsplit", "split3"])
def test_returns_new_tensor_without_out(num_splits):
    batch = DECODE.batch(torch.float16)
    out = paged_attention(*batch.args, num_splits=num_splits)
    assert out.dtype == batch.q.dtype and out.shape == batch.q.shape
    assert_rel_close(out, batch.ref(), TOL[torch.float16])


def test_max_seqlen_hints():
    """Exact hints give bitwise the same result as none; loose upper bounds (as a CUDA graph uses) can
    change the configuration but not the answer."""
    batch = MIXED.batch(torch.float16)
    without = run_and_check(batch, TOL[torch.float16])
    exact = run_and_check(batch, TOL[torch.float16], **batch.hints)
    assert torch.equal(without, exact)
    run_and_check(batch, TOL[torch.float16], max_seqlen_q=64, max_seqlen_k=512)


def test_workspace_reused_across_batches():
    """One AttentionWorkspace serves a split decode batch, then a different, smaller batch with another
    split count, then the first again: stale partial results must never leak."""
    dtype = torch.float16
    first = Shape(q_lens=(1, 1, 3, 1), seq_lens=(129, 40, 100, 63)).batch(dtype)
    second = Shape(q_lens=(2, 1), seq_lens=(80, 17)).batch(dtype)
    workspace = AttentionWorkspace(8, 4, 64, max_splits=4, device=first.q.device)
    run_and_check(first, TOL[dtype], workspace=workspace, num_splits=4, **first.hints)
    run_and_check(second, TOL[dtype], workspace=workspace, num_splits=2, **second.hints)
    run_and_check(first, TOL[dtype], workspace=workspace, **first.hints)


def test_workspace_caps_splits():
    """A workspace with fewer splits than requested caps the split count instead of overflowing."""
    batch = DECODE.batch(torch.float16)
    workspace = AttentionWorkspace(batch.q.shape[0], 4, 64, max_splits=2, device=batch.q.device)
    run_and_check(batch, TOL[torch.float16], workspace=workspace, num_splits=8)


def test_validate_accepts_good_batch():
    """validate=True passes a valid batch, ignoring block-table columns past a sequence's pages."""
    batch = MIXED.batch(torch.float16)
    batch.block_table[:, -1] = -1  # every row has one spare column; none of them is read
    run_and_check(batch, TOL[torch.float16], validate=True)


def test_empty_query():
    """No new tokens at all: nothing to compute, an empty result."""
    batch = Shape(q_lens=(0, 0), seq_lens=(5, 17)).batch(torch.float16)
    out = paged_attention(*batch.args)
    assert out.shape == (0, 4, 64)


def test_out_is_written_in_place():
    batch = DECODE.batch(torch.float32)
    out = poisoned_like(batch.q)
    ptr = out.data_ptr()
    result = paged_attention(*batch.args, out=out, num_splits=3)
    assert result is out and out.data_ptr() == ptr
    assert_rel_close(out, batch.ref(), TOL[torch.float32])


@pytest.mark.parametrize("config", [
    AttentionConfig(block_m=16, block_q=4, tile_n=16, num_splits=1, num_warps=2, num_stages=2),
    AttentionConfig(block_m=16, block_q=2, tile_n=32, num_splits=3, num_warps=4, num_stages=2),
    AttentionConfig(block_m=64, block_q=16, tile_n=64, num_splits=2, num_warps=4, num_stages=2),
], ids=lambda c: f"m{c.block_m}-n{c.tile_n}-s{c.num_splits}")
@pytest.mark.parametrize("features", ["plain", "window70+softcap+alibi+sinks", "scale+alibi", "sinks"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_first_tile_preloaded(config, features, causal, monkeypatch):
    """The first key tile loaded before the PDL wait (launcher.PRELOAD_FIRST_TILE = 2 runs that path
    without PDL): decode, verification and chunked-prefill rows, tiles that hold new keys or need a
    mask (not preloaded) beside tiles that do not, splits, windows, sinks in split 0. Exact either way."""
    from tritium.attention import launcher

    monkeypatch.setattr(launcher, "PRELOAD_FIRST_TILE", 2)
    shape = Shape(q_lens=(1, 3, 9, 1, 20), seq_lens=(129, 100, 70, 16, 20), num_q_heads=8, num_kv_heads=2)
    batch = shape.batch(torch.float16)
    run_and_check(batch, TOL[torch.float16], config=config, causal=causal,
                  **feature_kwargs(features, shape.num_q_heads))


def test_preload_policy(monkeypatch):
    """Where the first tile is loaded before the PDL wait by default (launcher.preload_arg): split calls
    of 32-key tiles at 2 stages only; PRELOAD_FIRST_TILE 0 and 2 override it everywhere."""
    from tritium.attention import launcher

    def arg(tile_n, stages, splits):
        config = AttentionConfig(block_m=16, block_q=4, tile_n=tile_n, num_splits=8, num_warps=4, num_stages=stages)
        return launcher.preload_arg(config, splits)

    assert launcher.PRELOAD_FIRST_TILE == 1
    assert [arg(32, 2, 8), arg(16, 1, 2)] == [1, 1]
    assert [arg(32, 2, 1), arg(32, 3, 8), arg(64, 2, 8), arg(128, 3, 8)] == [0, 0, 0, 0]
    for forced in (0, 2):
        monkeypatch.setattr(launcher, "PRELOAD_FIRST_TILE", forced)
        assert {arg(32, 2, 8), arg(64, 3, 1)} == {forced}


@pytest.mark.parametrize("order", [1, 2], ids=["heaviest-first", "heaviest-first-heads-inner"])
@pytest.mark.parametrize("shape,features", [
    # Prompts of equal and unequal lengths, over context or not (a level holds blocks of several sequences, a
    # sequence's lowest level lies just above another's), one with no new tokens.
    pytest.param(Shape(q_lens=(40, 17, 0, 40, 5, 23), seq_lens=(60, 17, 5, 40, 50, 23), num_q_heads=8,
                       num_kv_heads=2), "plain", id="prefill-B6"),
    # Chunked prefill over context, decode rows (their level is their sequence's), 48-token pages.
    pytest.param(Shape(q_lens=(33, 9, 1, 1, 20), seq_lens=(33, 70, 1, 129, 90), block_size=48), "window20+softcap",
                 id="mixed-B5"),
    # Two prompts, GQA 3 (partial Q blocks), sinks and ALiBi.
    pytest.param(Shape(q_lens=(67, 30), seq_lens=(100, 30), num_q_heads=3, num_kv_heads=1), "alibi+sinks",
                 id="B2-G3"),
])
def test_heaviest_first_order(shape, features, order, monkeypatch):
    """Q blocks handed out heaviest first across the batch (launcher.ORDER 1, 2): every block is computed
    once, by the same arithmetic, whatever the order: the same bits as slot order (ORDER 0), small Q blocks
    (many levels: several rounds of the search) and the 16-sequence vector (MAX_SEQS) included."""
    from tritium.attention import launcher

    batch = shape.batch(torch.float16)
    kwargs = feature_kwargs(features, shape.num_q_heads)
    group = shape.num_q_heads // shape.num_kv_heads
    config = AttentionConfig(block_m=16, block_q=max(1, 16 // group), tile_n=16, num_splits=1, num_warps=2,
                             num_stages=2)
    base = run_and_check(batch, TOL[torch.float16], config=config, **kwargs).clone()
    monkeypatch.setattr(launcher, "ORDER", order)
    monkeypatch.setattr(launcher, "ORDER_MAX_SEQS", 16)
    assert torch.equal(run_and_check(batch, TOL[torch.float16], config=config, **kwargs), base)
    # More sequences than the vector holds: slot order.
    monkeypatch.setattr(launcher, "ORDER_MAX_SEQS", len(shape.q_lens) - 1)
    assert torch.equal(run_and_check(batch, TOL[torch.float16], config=config, **kwargs), base)


@pytest.mark.parametrize("q_lens,block_q,ok", [
    ((20, 20, 20, 20), 8, True),  # 3 blocks a sequence, the last partial
    ((16, 16, 16), 16, True),  # one block a sequence
    ((7, 7, 7, 7, 7), 2, True),
    ((30, 10), 8, False),  # the same total as 2 x 20: cu_seqlens_q says otherwise
    ((20, 20, 19, 21), 8, False),
    ((21, 20, 20, 20), 8, False),  # a total that 4 sequences cannot share evenly
])
def test_rank_order_mapping(q_lens, block_q, ok):
    """_rank_order (ORDER 3) on uniform batches: each sequence's Q blocks exactly once, in rank order (every
    sequence's last block, then the ones before), the grid's spare slots empty; where cu_seqlens_q is not
    uniform, ``ok`` is false (the kernel then takes slot order)."""
    device = default_device()
    num_seqs, num_tokens = len(q_lens), sum(q_lens)
    cu = torch.tensor([0, *itertools.accumulate(q_lens)], dtype=torch.int32, device=device)
    grid = num_tokens // block_q + num_seqs
    out = torch.full((grid, 4), -7, dtype=torch.int32, device=device)
    rank_order_probe[(grid,)](cu, out, num_seqs, num_tokens, BLOCK_Q=block_q, MAX_SEQS=8)
    seq, q_slot, empty, oks = out.cpu().T.tolist()
    assert set(oks) == {int(ok)}
    if not ok:
        return
    q_len = q_lens[0]
    blocks = -(-q_len // block_q)
    taken = [(seq[j], q_slot[j]) for j in range(grid) if not empty[j]]
    want = [(s, (s * q_len) // block_q + s + blocks - 1 - r) for r in range(blocks) for s in range(num_seqs)]
    assert taken == want
    assert all(empty[j] for j in range(len(want), grid))


@pytest.mark.parametrize("shape,features,max_seqlen_q", [
    # Prompts of one length over different contexts (rank order is then not heaviest first: still every
    # block once), partial last Q blocks.
    pytest.param(Shape(q_lens=(20, 20, 20, 20), seq_lens=(20, 45, 33, 70), num_q_heads=8, num_kv_heads=4),
                 "window20+softcap", None, id="uniform-B4"),
    pytest.param(Shape(q_lens=(23, 23, 23), seq_lens=(23, 23, 60), num_q_heads=3, num_kv_heads=1),
                 "alibi+sinks", None, id="uniform-B3-G3"),
    # A max_seqlen_q under the truth that makes the host's figures look uniform: the kernel's check takes
    # slot order.
    pytest.param(Shape(q_lens=(30, 10), seq_lens=(30, 40), num_q_heads=4, num_kv_heads=2), "plain", 20,
                 id="not-uniform"),
])
def test_rank_order(shape, features, max_seqlen_q, monkeypatch):
    """ORDER 3 on batches of prompts of one length: the same bits as slot order (ORDER 0)."""
    from tritium.attention import launcher

    monkeypatch.setattr(launcher, "ORDER", 3)
    batch = shape.batch(torch.float16)
    kwargs = feature_kwargs(features, shape.num_q_heads)
    if max_seqlen_q is not None:
        kwargs["max_seqlen_q"] = max_seqlen_q
    group = shape.num_q_heads // shape.num_kv_heads
    config = AttentionConfig(block_m=16, block_q=max(1, 16 // group), tile_n=16, num_splits=1, num_warps=2,
                             num_stages=2)
    num_tokens = sum(shape.q_lens)
    assert launcher.order_arg(True, 1, len(shape.q_lens), num_tokens, max_seqlen_q or max(shape.q_lens),
                              config.block_q) == 3
    got = run_and_check(batch, TOL[torch.float16], config=config, **kwargs).clone()
    monkeypatch.setattr(launcher, "ORDER", 0)
    assert torch.equal(run_and_check(batch, TOL[torch.float16], config=config, **kwargs), got)


def test_order_arg(monkeypatch):
    """Where the launcher asks for rank order (ORDER 3, not the default): causal, unsplit, 2-ORDER_MAX_SEQS
    sequences of one query length of more than one Q block; ORDER 1 / 2 wherever causal and unsplit batches of
    2-ORDER_MAX_SEQS."""
    from tritium.attention import launcher

    arg = launcher.order_arg
    assert launcher.ORDER == 0 and arg(True, 1, 4, 80, 20, 8) == 0
    monkeypatch.setattr(launcher, "ORDER", 3)
    assert arg(True, 1, 4, 80, 20, 8) == 3
    assert [arg(False, 1, 4, 80, 20, 8), arg(True, 2, 4, 80, 20, 8), arg(True, 1, 1, 20, 20, 8)] == [0, 0, 0]
    assert [arg(True, 1, 4, 79, 20, 8), arg(True, 1, 4, 80, 20, 20), arg(True, 1, 257, 257 * 20, 20, 8)] == [0, 0, 0]
    monkeypatch.setattr(launcher, "ORDER", 1)
    assert [arg(True, 1, 4, 79, 20, 8), arg(True, 1, 4, 80, 20, 20), arg(True, 1, 1, 20, 20, 8)] == [1, 1, 0]
