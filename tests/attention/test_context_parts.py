"""Attention over a part of a context (``q_start_pos``) and the log-sum-exp output (``lse``).

A sequence's keys split into page-aligned parts, as context parallelism holds them: each part's
output and log-sum-exp, merged with the log-sum-exp weights, must equal attention over the whole
context; each part alone must equal the reference given the same query positions.
"""

import math

import pytest
import torch

from tritium.attention import paged_attention
from tritium.attention.reference import paged_attention_ref

from .utils import TOL, assert_rel_close, dtype_param, feature_kwargs, poisoned_like

# Three sequences: a prefill chunk after context, a decode step, a whole prompt; pages of 16.
Q_LENS, SEQ_LENS, BLOCK = (5, 1, 17), (40, 70, 33), 16


def _parts(batch_seq_lens, num_parts):
    """Page-aligned [start, end) key ranges of each sequence, part after part (some empty)."""
    out = []
    for n in batch_seq_lens:
        pages = -(-n // BLOCK)
        per = -(-pages // num_parts)
        out.append([(min(n, p * per * BLOCK), min(n, (p + 1) * per * BLOCK)) for p in range(num_parts)])
    return out


def _part_args(batch, parts, p):
    """block_table, seq_lens and q_start_pos of part p of every sequence (keys in the part's coordinates)."""
    rows, lens, starts = [], [], []
    for s, ranges in enumerate(parts):
        lo, hi = ranges[p]
        row = batch.block_table[s, lo // BLOCK:]
        rows.append(torch.cat([row, row.new_zeros(batch.block_table.shape[1] - row.shape[0])]))
        lens.append(hi - lo)
        starts.append(SEQ_LENS[s] - Q_LENS[s] - lo)  # the first query's position, minus the part's start
    dev = batch.q.device
    return (torch.stack(rows), torch.tensor(lens, dtype=torch.int32, device=dev),
            torch.tensor(starts, dtype=torch.int32, device=dev))


@pytest.mark.parametrize("dtype", [dtype_param(torch.float32), dtype_param(torch.float16)])
@pytest.mark.parametrize("features", ["plain", "window24+alibi", "softcap+sinks"])
@pytest.mark.parametrize("num_splits", [None, 3])
@pytest.mark.parametrize("num_parts", [2, 3])
def test_parts_merge_to_the_whole_context(dtype, features, num_splits, num_parts):
    from .utils import random_paged_batch

    batch = random_paged_batch(Q_LENS, SEQ_LENS, block_size=BLOCK, num_q_heads=4, num_kv_heads=2, head_dim=64,
                               dtype=dtype)
    kwargs = feature_kwargs(features, 4)
    sinks = kwargs.pop("sinks", None)
    whole = paged_attention_ref(*batch.args, sinks=sinks, **kwargs)
    parts = _parts(SEQ_LENS, num_parts)
    outs, lses = [], []
    for p in range(num_parts):
        block_table, seq_lens, starts = _part_args(batch, parts, p)
        part_sinks = sinks if p == 0 else None  # the sink term enters once
        out, lse = poisoned_like(batch.q), torch.full(batch.q.shape[:2], float("nan"), device=batch.q.device)
        paged_attention(batch.q, batch.k_cache, batch.v_cache, block_table, seq_lens, batch.cu_seqlens_q,
                        max_seqlen_q=max(Q_LENS), max_seqlen_k=int(seq_lens.max()), num_splits=num_splits,
                        q_start_pos=starts, lse=lse, out=out, sinks=part_sinks, **kwargs)
        ref_out, ref_lse = paged_attention_ref(batch.q, batch.k_cache, batch.v_cache, block_table, seq_lens,
                                               batch.cu_seqlens_q, q_start_pos=starts, return_lse=True,
                                               sinks=part_sinks, **kwargs)
        seen = torch.isfinite(ref_lse)  # rows that see a key of this part (or its sink)
        assert torch.equal(torch.isfinite(lse), seen), f"part {p}: rows with keys differ"
        assert not torch.isnan(lse).any()
        assert_rel_close(out, ref_out, TOL[dtype] + 1e-6, what=f"part {p} out")
        assert_rel_close(lse[seen], ref_lse[seen], 1e-4 if dtype == torch.float16 else 1e-5, what=f"part {p} lse")
        outs.append(out.float())
        lses.append(lse)
    lse_all = torch.logsumexp(torch.stack(lses), 0)
    merged = sum(torch.exp(lse - lse_all)[..., None] * out for lse, out in zip(lses, outs))
    assert_rel_close(merged, whole, TOL[dtype] + 1e-6, what="merged parts")


def test_lse_of_the_whole_context_and_rows_without_keys():
    """Without q_start_pos the lse is the row's log-sum-exp over its keys; queries placed before all keys
    (a negative start) see none: output 0, lse -inf."""
    from .utils import random_paged_batch

    batch = random_paged_batch((3, 1), (20, 9), block_size=BLOCK, num_q_heads=2, num_kv_heads=1, head_dim=64,
                               dtype=torch.float32)
    lse = torch.empty(4, 2, device=batch.q.device)
    out = paged_attention(*batch.args, lse=lse)
    ref_out, ref_lse = batch.ref(return_lse=True)
    assert_rel_close(out, ref_out, TOL[torch.float32])
    assert_rel_close(lse, ref_lse, 1e-5, what="lse")
    scores = batch.k_cache[batch.block_table[1, 0], :9, 0].float() @ batch.q[3, 0].float() / math.sqrt(64)
    assert abs(float(lse[3, 0]) - float(torch.logsumexp(scores, 0))) < 1e-4  # decode row, head 0, by hand
    starts = torch.tensor([-5, -1], dtype=torch.int32, device=batch.q.device)
    out = paged_attention(*batch.args, q_start_pos=starts, lse=lse)
    assert torch.equal(out, torch.zeros_like(out))
    assert bool((lse == float("-inf")).all())


def test_bad_part_arguments():
    from .utils import random_paged_batch

    batch = random_paged_batch((3,), (20,), block_size=BLOCK, num_q_heads=2, num_kv_heads=1, head_dim=64,
                               dtype=torch.float32)
    dev = batch.q.device
    with pytest.raises(TypeError, match="q_start_pos"):
        paged_attention(*batch.args, q_start_pos=torch.zeros(1, dtype=torch.int64, device=dev))
    with pytest.raises(ValueError, match="q_start_pos must be contiguous with num_seqs = 1"):
        paged_attention(*batch.args, q_start_pos=torch.zeros(2, dtype=torch.int32, device=dev))
    with pytest.raises(TypeError, match="lse"):
        paged_attention(*batch.args, lse=torch.zeros(3, 2, dtype=torch.float16, device=dev))
    with pytest.raises(ValueError, match=r"lse must be \[num_tokens, num_q_heads\] = \[3, 2\]"):
        paged_attention(*batch.args, lse=torch.zeros(3, 3, device=dev))
    # validate=True accepts a part shorter than its queries when q_start_pos places them.
    starts = torch.tensor([30], dtype=torch.int32, device=dev)
    short = torch.tensor([2], dtype=torch.int32, device=dev)
    out = paged_attention(batch.q, batch.k_cache, batch.v_cache, batch.block_table, short, batch.cu_seqlens_q,
                          q_start_pos=starts, validate=True)
    ref = paged_attention_ref(batch.q, batch.k_cache, batch.v_cache, batch.block_table, short, batch.cu_seqlens_q,
                              q_start_pos=starts)
    assert_rel_close(out, ref, TOL[torch.float32])
