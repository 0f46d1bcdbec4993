"""Arguments at the edges of what ``paged_attention`` takes: NumPy scalars, pages behind a sliding window left out
of the block table, query positions near the ends of int32, a grouped configuration given too small a length
hint, an empty batch. Each against the fp32 reference, into poisoned outputs."""

import numpy as np
import pytest
import torch

from tritium.attention import paged_attention
from tritium.attention.config import AttentionConfig, invariant_config
from tritium.attention.reference import paged_attention_ref

from .utils import TOL, assert_rel_close, poisoned_like, random_paged_batch

DTYPE = torch.float32


def _batch(q_lens, seq_lens, **kw):
    kw = {"block_size": 16, "num_q_heads": 4, "num_kv_heads": 2, "head_dim": 64, "dtype": DTYPE, **kw}
    return random_paged_batch(q_lens, seq_lens, **kw)


def test_numpy_scalars():
    """NumPy numbers are numbers: the same result as the Python values."""
    b = _batch((3, 1), (20, 45))
    kw = dict(softmax_scale=0.1, sliding_window=9, softcap=30.0)
    out = paged_attention(*b.args, out=poisoned_like(b.q), softmax_scale=np.float32(0.1),
                          sliding_window=np.int64(9), softcap=np.float64(30.0), max_seqlen_q=np.int32(3),
                          max_seqlen_k=np.int64(45))
    assert_rel_close(out, b.ref(**kw), TOL[DTYPE])


# a config of 64-key tiles over pages of 16 (a tile's start may lie three pages before the window's first key)
WIDE_TILES = AttentionConfig(block_m=16, block_q=4, tile_n=64, num_splits=1, num_warps=4, num_stages=1)


@pytest.mark.parametrize("window", [1, 9, 40])
@pytest.mark.parametrize("config,num_splits", [(None, None), (None, 3), (WIDE_TILES, 1), (WIDE_TILES, 2)],
                         ids=["auto", "split3", "tile64", "tile64-split2"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "noncausal"])
def test_pages_behind_the_window_left_out(window, config, num_splits, causal):
    """Page ids wholly before the first key a sequence's queries see may be anything (-1, past the cache): the
    kernels read none of them, and validate=True does not check them."""
    b = _batch((2, 1, 5), (150, 97, 70))
    want = b.ref(sliding_window=window, causal=causal)
    table = b.block_table.clone()
    for s, (q_len, n) in enumerate(zip(b.q_lens_list, b.seq_lens_list)):
        first_key = max(n - q_len - window + 1, 0)
        table[s, :first_key // 16] = -1 if s % 2 else 10**6
    for validate in (False, True):
        out = paged_attention(b.q, b.k_cache, b.v_cache, table, b.seq_lens, b.cu_seqlens_q, out=poisoned_like(b.q),
                              sliding_window=window, causal=causal, config=config, num_splits=num_splits,
                              validate=validate)
        assert_rel_close(out, want, TOL[DTYPE], f"validate={validate}")
    # a page the window does see, out of range: that sequence's rows NaN (validate=True names it)
    s = 0
    seen = (b.seq_lens_list[s] - b.q_lens_list[s] - window + 1) // 16
    table[s, max(seen, 0)] = -1
    out = paged_attention(b.q, b.k_cache, b.v_cache, table, b.seq_lens, b.cu_seqlens_q, out=poisoned_like(b.q),
                          sliding_window=window, causal=causal, config=config, num_splits=num_splits)
    assert torch.isnan(out[:2]).all()
    assert_rel_close(out[2:], want[2:], TOL[DTYPE], "the other sequences")
    with pytest.raises(ValueError, match=rf"block_table\[0, {max(seen, 0)}\] = -1 is out of range"):
        paged_attention(b.q, b.k_cache, b.v_cache, table, b.seq_lens, b.cu_seqlens_q, sliding_window=window,
                        causal=causal, validate=True)


@pytest.mark.parametrize("start,causal,window", [(2**31 - 25, True, None), (2**31 - 21, False, None),
                                                 (-2**31 + 2, False, 5), (-2**31, True, 3)])
def test_query_positions_near_the_ends_of_int32(start, causal, window):
    """q_start_pos near either end of int32 (the last query still an int32): as the reference."""
    b = _batch((3, 1, 20), (20, 33, 40))
    starts = torch.tensor([0, 5, start], dtype=torch.int32, device=b.q.device)
    kw = dict(q_start_pos=starts, causal=causal, sliding_window=window)
    out = paged_attention(*b.args, out=poisoned_like(b.q), validate=True, **kw)
    want = paged_attention_ref(*b.args, **kw)
    assert_rel_close(out, torch.nan_to_num(want), TOL[DTYPE])  # rows that see no key: 0 in both
    too_far = torch.tensor([0, 5, 2**31 - 19], dtype=torch.int32, device=b.q.device)
    with pytest.raises(ValueError, match=r"q_start_pos\[2\] = 2147483629 puts its last query \(20 of them\) past"):
        paged_attention(*b.args, q_start_pos=too_far, validate=True)


def test_grouped_splits_short_of_the_keys():
    """A grouped (batch-invariant) configuration given a max_seqlen_k hint below a sequence's length: that
    sequence's rows are NaN (its keys past the last split's group are not dropped silently), the others exact."""
    b = _batch((1, 1), (20, 300))
    cfg = invariant_config(num_q_heads=4, num_kv_heads=2, head_dim=64, max_seq_len=200, dtype=DTYPE, max_splits=4)
    out = paged_attention(*b.args, out=poisoned_like(b.q), config=cfg, max_seqlen_q=1, max_seqlen_k=200)
    assert torch.isnan(out[1]).all()
    assert_rel_close(out[:1], b.ref()[:1], TOL[DTYPE])
    out = paged_attention(*b.args, out=poisoned_like(b.q), config=cfg, max_seqlen_q=1, max_seqlen_k=300,
                          num_splits=5)
    assert_rel_close(out, b.ref(), TOL[DTYPE])


def test_empty_batch():
    """No sequence and no token: an empty output; tokens without a sequence: an error naming seq_lens."""
    b = _batch((1,), (20,))
    q = b.q[:0]
    none = b.seq_lens[:0]
    out = paged_attention(q, b.k_cache, b.v_cache, b.block_table[:0], none, b.cu_seqlens_q[:1], validate=True)
    assert out.shape == (0, 4, 64)
    with pytest.raises(ValueError, match=r"seq_lens is empty, q has 1 tokens"):
        paged_attention(b.q, b.k_cache, b.v_cache, b.block_table[:0], none, b.cu_seqlens_q[:1])
