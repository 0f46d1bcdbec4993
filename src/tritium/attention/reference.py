"""Pure-PyTorch fp32 references for paged attention and KV-cache writes.

Slow and simple on purpose: each sequence's pages are gathered into dense K/V and attention is
computed with explicit masks. Tests and benchmarks import these; the kernels must match them.
"""

import math

import torch

FP8_DTYPES = (torch.float8_e4m3fn,)
FP8_MAX = torch.finfo(torch.float8_e4m3fn).max  # 448


def gather_kv(cache: torch.Tensor, block_table_row: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Dense [seq_len, num_kv_heads, head_dim] view of one sequence's pages.

    cache: [num_blocks, block_size, num_kv_heads, head_dim]; block_table_row: [max_blocks] page ids.
    """
    block_size = cache.shape[1]
    num_pages = -(-seq_len // block_size)
    pages = cache[block_table_row[:num_pages].long()]  # [num_pages, block_size, H_kv, D]
    return pages.reshape(-1, *cache.shape[2:])[:seq_len]


def paged_attention_ref(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, *,
                        softmax_scale=None, causal=True, sliding_window=None, softcap=None,
                        alibi_slopes=None, sinks=None, k_scale=None, v_scale=None, q_start_pos=None,
                        return_lse=False):
    """Attention of each sequence's new queries over its cached keys, in fp32.

    For sequence s with q_len new tokens and seq_len cached tokens (new ones included), query i sits
    at position p = seq_len - q_len + i. With key position j and head h (kv head h // (Hq / Hkv)):
        s_ij = scale * q_i . k_j                          (k = k_cache * k_scale for fp8 caches)
        s_ij = softcap * tanh(s_ij / softcap)             if softcap
        s_ij += alibi_slopes[h] * (j - p)                 if alibi_slopes
        visible: j < seq_len, j <= p if causal, j > p - sliding_window if sliding_window
        out_i = sum_j softmax_j(s_ij) v_j                 (v = v_cache * v_scale)
    With sinks, the softmax denominator gains exp(sinks[h]) (a logit with no value).
    Rows that see no key (only possible with a window and no causal mask) are 0.
    ``q_start_pos[s]``: p of sequence s's first query instead of seq_len - q_len (queries and keys in the
    same coordinates, the keys possibly a part of the context); then rows may see no key at all.
    Returns [num_tokens, num_q_heads, head_dim] in fp32; with ``return_lse`` also the rows' natural-log
    log-sum-exp of their visible scores (sink included) [num_tokens, num_q_heads], -inf for no key.
    """
    num_tokens, num_q_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    group = num_q_heads // num_kv_heads
    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else float(softmax_scale)
    ks = 1.0 if k_scale is None else float(k_scale)
    vs = 1.0 if v_scale is None else float(v_scale)
    out = torch.zeros(num_tokens, num_q_heads, head_dim, dtype=torch.float32, device=q.device)
    lse = torch.full((num_tokens, num_q_heads), float("-inf"), dtype=torch.float32, device=q.device)
    cu = cu_seqlens_q.tolist()
    lens = seq_lens.tolist()
    starts = None if q_start_pos is None else q_start_pos.tolist()
    for s in range(len(lens)):
        q_lo, q_hi = cu[s], cu[s + 1]
        q_len, seq_len = q_hi - q_lo, lens[s]
        if q_len == 0 or (seq_len == 0 and sinks is None):  # no query, or no key: 0 and -inf
            continue
        k = gather_kv(k_cache, block_table[s], seq_len).float() * ks  # [L, Hkv, D]
        v = gather_kv(v_cache, block_table[s], seq_len).float() * vs
        k = k.repeat_interleave(group, dim=1).transpose(0, 1)  # [Hq, L, D]
        v = v.repeat_interleave(group, dim=1).transpose(0, 1)
        qs = q[q_lo:q_hi].float().transpose(0, 1)  # [Hq, q_len, D]
        scores = scale * qs @ k.transpose(1, 2)  # [Hq, q_len, L]
        if softcap:
            scores = softcap * torch.tanh(scores / softcap)
        first = seq_len - q_len if starts is None else starts[s]
        q_pos = torch.arange(first, first + q_len, device=q.device)[:, None]
        k_pos = torch.arange(seq_len, device=q.device)[None, :]
        if alibi_slopes is not None:
            scores = scores + alibi_slopes.float()[:, None, None] * (k_pos - q_pos)
        visible = torch.ones(q_len, seq_len, dtype=torch.bool, device=q.device)
        if causal:
            visible &= k_pos <= q_pos
        if sliding_window:
            visible &= k_pos > q_pos - sliding_window
        scores = scores.masked_fill(~visible, float("-inf"))
        if sinks is not None:
            sink_col = sinks.float()[:, None, None].expand(num_q_heads, q_len, 1)
            scores = torch.cat([scores, sink_col], dim=-1)
        m = scores.amax(dim=-1, keepdim=True).clamp_min(-1e30)  # rows with no key stay finite
        p = torch.exp(scores - m)
        denom = p.sum(dim=-1, keepdim=True)
        lse[q_lo:q_hi] = torch.where(denom > 0, m + torch.log(denom), float("-inf"))[..., 0].transpose(0, 1)
        p = p[..., :seq_len] / torch.where(denom > 0, denom, torch.ones_like(denom))
        out[q_lo:q_hi] = (p @ v).transpose(0, 1)
    return (out, lse) if return_lse else out


def quantize_fp8_ref(x: torch.Tensor, scale, dtype: torch.dtype = torch.float8_e4m3fn) -> torch.Tensor:
    """x / scale saturated to the range of fp8 ``dtype``, as stored in an fp8 cache."""
    fp8_max = torch.finfo(dtype).max
    return (x.float() / float(scale)).clamp(-fp8_max, fp8_max).to(dtype)


def write_kv_cache_ref(k, v, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None) -> None:
    """In-place: token t goes to slot slot_mapping[t] = block * block_size + offset; a slot outside
    [0, num_blocks * block_size) skips the token."""
    block_size = k_cache.shape[1]
    num_slots = k_cache.shape[0] * block_size
    for t, slot in enumerate(slot_mapping.tolist()):
        if not 0 <= slot < num_slots:
            continue
        blk, off = divmod(slot, block_size)
        for src, cache, scale in ((k, k_cache, k_scale), (v, v_cache, v_scale)):
            if cache.dtype in FP8_DTYPES:
                cache[blk, off] = quantize_fp8_ref(src[t], 1.0 if scale is None else scale, cache.dtype)
            else:
                cache[blk, off] = src[t].to(cache.dtype)
