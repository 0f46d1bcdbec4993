"""Decode attention with the key tiles of the whole batch dealt evenly over a fixed grid (stream-K).

The split-KV kernel of ``kernels.py`` gives every (sequence, KV head) pair the same number of splits, so
its programs come in whole multiples of the batch's pairs: 8 KV heads at batch 16 are 128 programs on an
H100's 132 SMs (four idle for the whole call), and 17 splits at batch 1 are 136 (four SMs run two). Here
the work of a decode batch, every pair's key tiles laid end to end (sequence, then KV head, then tile), is
cut into ``num_programs`` equal ranges, one a program, whatever the batch: every SM reads the same number
of tiles (to one tile). A program walks its range in pieces, one a pair it touches; a piece that covers
its pair whole writes the output, the others write a partial result (normalised output and log2-sum-exp)
into one of the program's two slots (its first piece and its last), and the merge kernel combines the
pieces of each split pair. The grid depends on the GPU only, so CUDA graphs capture it once for every
batch of the same size.

Decode only: one query token a sequence (``num_tokens == num_seqs``), its position the sequence's last
(no ``q_start_pos``), every feature of the paged kernel otherwise (paging, GQA packing, sliding window,
softcap, ALiBi, sinks, fp8 caches). Inconsistent metadata behaves as in ``kernels.py``: a sequence whose
``cu_seqlens_q`` entries are not ``s, s + 1`` or whose length is outside [1, max_kv_len] gets no work and
NaN rows; a page id out of range makes its piece read nothing and its rows NaN.
"""

import torch
import triton
import triton.language as tl

from tritium.runtime import pdl_launch, pipeline_stages

from tritium.attention.kernels import _attend_key_range, _pages_out_of_range

LOG2E = 1.4426950408889634


def part_shape(num_programs: int, group: int, head_dim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shapes of the fp32 partial outputs and log2-sum-exps a launch of ``num_programs`` programs needs."""
    return (2 * num_programs, group, head_dim), (2 * num_programs, group)


def launch(out, q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, *, part_out, part_lse, pair_info,
           num_programs: int, tile_n: int, block_m: int, num_warps: int, num_stages: int, scale: float,
           sliding_window: int | None = None, softcap: float | None = None, alibi_slopes=None, sinks=None,
           k_scale_t=None, v_scale_t=None, k_scale_val: float = 1.0, v_scale_val: float = 1.0,
           pdl: bool = True, _precheck: bool = True, _merge: bool = True) -> None:
    """The two launches of one decode call (``paged_attention`` checks the arguments first; here only the
    decode shape and the workspace). part_out / part_lse: fp32, at least ``part_shape`` elements."""
    num_tokens, num_q_heads, head_dim = q.shape
    num_blocks, block_size, num_kv_heads, _ = k_cache.shape
    num_seqs = seq_lens.shape[0]
    group = num_q_heads // num_kv_heads
    if num_tokens != num_seqs:
        raise ValueError(f"the stream-K decode kernel takes one query token a sequence: q has {num_tokens} "
                         f"tokens for {num_seqs} sequences")
    out_shape, lse_shape = part_shape(num_programs, group, head_dim)
    if part_out.numel() < 2 * num_programs * group * head_dim or part_lse.numel() < 2 * num_programs * group:
        raise ValueError(f"stream-K workspace too small for {num_programs} programs: part_out needs "
                         f"{out_shape}, part_lse {lse_shape}")
    if pair_info.numel() < 2 * num_seqs * num_kv_heads:
        raise ValueError(f"stream-K workspace too small: pair_info needs {2 * num_seqs * num_kv_heads} int32")
    if num_tokens == 0:
        return
    head_pad = 1 << max(0, (head_dim - 1).bit_length())
    seqs_pad = max(16, 1 << max(0, (num_seqs - 1).bit_length()))
    max_kv_len = block_table.shape[1] * block_size if num_blocks else 0
    window = int(sliding_window or 0)
    dummy = q
    common = dict(NUM_KV_HEADS=num_kv_heads, QPKV=group, HEAD_DIM=head_dim, HEAD_DIM_PAD=head_pad,
                  BLOCK_M=block_m, TILE_N=tile_n, SEQS_PAD=seqs_pad, HAS_WINDOW=sliding_window is not None)
    _streamk_decode_kernel[(num_programs,)](
        out, q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q,
        dummy if alibi_slopes is None else alibi_slopes, dummy if sinks is None else sinks,
        dummy if k_scale_t is None else k_scale_t, dummy if v_scale_t is None else v_scale_t,
        part_out, part_lse, pair_info,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), block_table.stride(0),
        num_seqs, num_blocks, max_kv_len, scale, float(softcap or 0.0), window, k_scale_val, v_scale_val,
        PAGE_SIZE=block_size, HAS_SOFTCAP=softcap is not None, HAS_ALIBI=alibi_slopes is not None,
        HAS_SINKS=sinks is not None, SCALES_FROM_PTR=k_scale_t is not None, DOT_PRECISION="ieee",
        num_warps=num_warps, num_stages=pipeline_stages(num_stages), PRECHECK=_precheck, **common,
        **pdl_launch(q.device, pdl))
    if not _merge:
        return
    _streamk_merge_kernel[(num_seqs, num_q_heads)](
        out, part_out, part_lse, pair_info, seq_lens, cu_seqlens_q, out.stride(0), out.stride(1), num_seqs,
        max_kv_len, NUM_KV_HEADS=num_kv_heads, QPKV=group, HEAD_DIM=head_dim, HEAD_DIM_PAD=head_pad, CHUNK=32,
        num_warps=4, **pdl_launch(q.device, pdl))


@triton.jit
def _decode_work(seq_lens_ptr, cu_seqlens_q_ptr, num_seqs, max_kv_len, window,
                 NUM_KV_HEADS: tl.constexpr, SEQS_PAD: tl.constexpr, TILE_N: tl.constexpr,
                 HAS_WINDOW: tl.constexpr):
    """Per sequence, as [SEQS_PAD] vectors: (seq_len, first key tile its query sees, key tiles n, start
    of its work, bad). A sequence's work is NUM_KV_HEADS * n tiles from ``start`` (int64); n is 0 for
    padding and for a sequence whose metadata is impossible (``bad``). Also the batch's total work."""
    idx = tl.arange(0, SEQS_PAD)
    live = idx < num_seqs
    seq_len = tl.load(seq_lens_ptr + idx, mask=live, other=1)
    cu0 = tl.load(cu_seqlens_q_ptr + idx, mask=live, other=0)
    cu1 = tl.load(cu_seqlens_q_ptr + idx + 1, mask=live, other=0)
    bad = live & ((cu0 != idx) | (cu1 != idx + 1) | (seq_len < 1) | (seq_len > max_kv_len))
    tile_hi = tl.cdiv(seq_len, TILE_N)
    if HAS_WINDOW:  # the query at seq_len - 1 sees keys from seq_len - window on
        tile_lo = tl.maximum(seq_len - window, 0) // TILE_N
    else:
        tile_lo = tl.zeros([SEQS_PAD], tl.int32)
    n = tl.where(live & ~bad, tile_hi - tile_lo, 0)
    work = n.to(tl.int64) * NUM_KV_HEADS
    end = tl.cumsum(work, 0)
    return seq_len, tile_lo, n, end - work, bad, tl.sum(work, 0)


@triton.jit
def _pick(vec, idx, i):
    """vec[i] of a register vector (idx = its arange)."""
    return tl.sum(tl.where(idx == i, vec, 0), 0)


@triton.jit(do_not_specialize=["num_seqs", "num_blocks", "max_kv_len", "window"])
def _streamk_decode_kernel(
    # pointers
    out_ptr, q_ptr, k_cache_ptr, v_cache_ptr, block_table_ptr, seq_lens_ptr, cu_seqlens_q_ptr,
    alibi_ptr, sinks_ptr, k_scale_ptr, v_scale_ptr, part_out_ptr, part_lse_ptr, pair_info_ptr,
    # strides (the head_dim stride of every tensor is 1)
    stride_q_tok, stride_q_head, stride_o_tok, stride_o_head,
    stride_k_blk, stride_k_tok, stride_k_head, stride_v_blk, stride_v_tok, stride_v_head, stride_bt_seq,
    # sizes and scalars
    num_seqs, num_blocks, max_kv_len, sm_scale, softcap, window, k_scale_val, v_scale_val,
    # meta-parameters
    NUM_KV_HEADS: tl.constexpr, QPKV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    PAGE_SIZE: tl.constexpr, BLOCK_M: tl.constexpr, TILE_N: tl.constexpr, SEQS_PAD: tl.constexpr,
    HAS_WINDOW: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr, HAS_SINKS: tl.constexpr,
    SCALES_FROM_PTR: tl.constexpr, DOT_PRECISION: tl.constexpr, USE_PDL: tl.constexpr,
    PRECHECK: tl.constexpr = True,
):
    """Grid: (num_programs,). Program p takes work [p * W // P, (p + 1) * W // P) of the batch's W tiles.

    Partial results: part_out [2 * P, QPKV, HEAD_DIM] fp32 (normalised), part_lse [2 * P, QPKV] fp32
    (log2 domain); slot 2p holds the program's first piece, 2p + 1 its last, when they split a pair."""
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)
    seq_len_v, tile_lo_v, n_v, start_v, bad_v, total = _decode_work(
        seq_lens_ptr, cu_seqlens_q_ptr, num_seqs, max_kv_len, window, NUM_KV_HEADS, SEQS_PAD, TILE_N, HAS_WINDOW)
    end_v = start_v + n_v * NUM_KV_HEADS
    idx = tl.arange(0, SEQS_PAD)
    # With fewer tiles than programs, the first ``total`` programs take one each: no range is empty.
    num_programs = tl.minimum(tl.num_programs(0).to(tl.int64), total)
    w0 = pid.to(tl.int64) * total // tl.maximum(num_programs, 1)
    w1 = (pid + 1).to(tl.int64) * total // tl.maximum(num_programs, 1)
    w1 = tl.where(pid < num_programs, w1, w0)

    if SCALES_FROM_PTR:
        k_scale = tl.load(k_scale_ptr).to(tl.float32)
        v_scale = tl.load(v_scale_ptr).to(tl.float32)
    else:
        k_scale = k_scale_val
        v_scale = v_scale_val
    qk_scale = sm_scale * k_scale
    offs_m = tl.arange(0, BLOCK_M)
    m_valid = offs_m < QPKV
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_mask = offs_d < HEAD_DIM
    store_mask = m_valid[:, None] & d_mask[None, :]
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # q and the new tokens' K/V come from the kernels before

    w = w0
    while w < w1:
        # The pair holding tile w: sequence s (the count of sequences whose work ends at or before w,
        # empty ones included), KV head h; this piece runs to the pair's end or the program's.
        s = tl.sum((end_v <= w).to(tl.int32), 0)
        n = _pick(n_v, idx, s)
        seq_len = _pick(seq_len_v, idx, s)
        t_lo = _pick(tile_lo_v, idx, s)
        seq_start = _pick(start_v, idx, s)
        kv_head = ((w - seq_start) // n).to(tl.int32)
        pair_start = seq_start + kv_head.to(tl.int64) * n
        pair_end = pair_start + n
        piece_end = tl.minimum(pair_end, w1)
        lo = t_lo + (w - pair_start).to(tl.int32)
        hi = t_lo + (piece_end - pair_start).to(tl.int32)
        tile_hi = t_lo + n
        if HAS_WINDOW:
            full_lo = tl.cdiv(tl.maximum(seq_len - window, 0), TILE_N)
        else:
            full_lo = t_lo
        full_lo = tl.minimum(tl.maximum(full_lo, t_lo), tile_hi)
        full_hi = tl.minimum(tl.maximum(seq_len // TILE_N, full_lo), tile_hi)

        bt_row_ptr = block_table_ptr + s.to(tl.int64) * stride_bt_seq
        if PRECHECK:
            bad = _pages_out_of_range(bt_row_ptr, lo * TILE_N, tl.minimum(hi * TILE_N, seq_len), num_blocks,
                                      PAGE_SIZE)
        else:
            bad = lo < 0
        read_hi = tl.where(bad, lo, hi)

        head = kv_head * QPKV + offs_m  # [BLOCK_M] query heads of this pair
        row = s.to(tl.int64)  # the sequence's one token
        q = tl.load(q_ptr + row * stride_q_tok + head[:, None] * stride_q_head + offs_d[None, :],
                    mask=store_mask, other=0.0)
        q_pos = tl.zeros([BLOCK_M], tl.int32) + (seq_len - 1)
        alibi_log2 = tl.zeros([BLOCK_M], dtype=tl.float32)
        if HAS_ALIBI:
            alibi_log2 = tl.load(alibi_ptr + head, mask=m_valid, other=0.0).to(tl.float32) * LOG2E
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        if HAS_SINKS:
            if lo == t_lo:  # the sink term enters once, with the pair's first tile
                m_i = tl.load(sinks_ptr + head, mask=m_valid, other=float("-inf")).to(tl.float32) * LOG2E
                l_i = tl.where(m_valid, 1.0, 0.0)
        acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
        k_head_ptr = k_cache_ptr + kv_head * stride_k_head
        v_head_ptr = v_cache_ptr + kv_head * stride_v_head
        acc, l_i, m_i = _attend_key_range(
            acc, l_i, m_i, q, lo, read_hi, full_lo, full_hi, k_head_ptr, v_head_ptr, bt_row_ptr,
            stride_k_blk, stride_k_tok, stride_v_blk, stride_v_tok, seq_len, q_pos, alibi_log2, qk_scale,
            softcap, window, offs_d, d_mask, PAGE_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, False,
            HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, DOT_PRECISION)

        l_i = tl.where(bad, float("nan"), l_i)  # NaN counts as mass: it reaches the output or the merge
        has_mass = l_i != 0.0
        o = acc * (v_scale / tl.where(has_mass, l_i, 1.0))[:, None]
        if w == pair_start:  # the pair's record for the merge: its first slot, how many programs hold it
            pair = s.to(tl.int64) * NUM_KV_HEADS + kv_head
            last = (pair_end * num_programs - 1) // total
            tl.store(pair_info_ptr + 2 * pair, (2 * pid + (w != w0).to(tl.int32)).to(tl.int32))
            tl.store(pair_info_ptr + 2 * pair + 1, (last - pid + 1).to(tl.int32))
        if (w == pair_start) & (piece_end == pair_end):  # the whole pair: the output itself
            tl.store(out_ptr + row * stride_o_tok + head[:, None] * stride_o_head + offs_d[None, :],
                     o.to(out_ptr.dtype.element_ty), mask=store_mask)
        else:
            slot = 2 * pid.to(tl.int64) + (w != w0).to(tl.int64)
            tl.store(part_out_ptr + (slot * QPKV + offs_m[:, None]) * HEAD_DIM + offs_d[None, :], o,
                     mask=store_mask)
            lse = tl.where(has_mass, m_i + tl.math.log2(tl.where(has_mass, l_i, 1.0)), float("-inf"))
            tl.store(part_lse_ptr + slot * QPKV + offs_m, lse, mask=m_valid)
        w = piece_end


@triton.jit(do_not_specialize=["num_seqs", "max_kv_len"])
def _streamk_merge_kernel(
    out_ptr, part_out_ptr, part_lse_ptr, pair_info_ptr, seq_lens_ptr, cu_seqlens_q_ptr,
    stride_o_tok, stride_o_head, num_seqs, max_kv_len,
    NUM_KV_HEADS: tl.constexpr, QPKV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    CHUNK: tl.constexpr, USE_PDL: tl.constexpr,
):
    """Grid: (num_seqs, num_q_heads). The pair's record (first slot, programs) comes from the program
    that holds its first tile; one program: it wrote the output. A sequence with impossible metadata
    (no program saw it, its record is stale) gets NaN rows, checked here again."""
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # the pieces come from the attention kernel
    s = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // QPKV
    m_row = head % QPKV
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_mask = offs_d < HEAD_DIM
    out_ptrs = out_ptr + s.to(tl.int64) * stride_o_tok + head * stride_o_head + offs_d
    seq_len = tl.load(seq_lens_ptr + s)
    bad = (tl.load(cu_seqlens_q_ptr + s) != s) | (tl.load(cu_seqlens_q_ptr + s + 1) != s + 1)
    bad = bad | (seq_len < 1) | (seq_len > max_kv_len)
    if bad:
        tl.store(out_ptrs, tl.full([HEAD_DIM_PAD], float("nan"), tl.float32).to(out_ptr.dtype.element_ty),
                 mask=d_mask)
        return
    pair = s.to(tl.int64) * NUM_KV_HEADS + kv_head
    first_slot = tl.load(pair_info_ptr + 2 * pair)
    count = tl.load(pair_info_ptr + 2 * pair + 1)
    if count <= 1:
        return
    m = tl.full([], float("-inf"), tl.float32)
    den = tl.full([], 0.0, tl.float32)
    acc = tl.zeros([HEAD_DIM_PAD], tl.float32)
    nan = tl.full([], 0, tl.int32)
    for c0 in range(0, count, CHUNK):
        i = c0 + tl.arange(0, CHUNK)
        live = i < count
        slot = tl.where(i == 0, first_slot, (first_slot // 2 + i) * 2).to(tl.int64)
        lse = tl.load(part_lse_ptr + slot * QPKV + m_row, mask=live, other=float("-inf"))
        part = tl.load(part_out_ptr + (slot * QPKV + m_row)[:, None] * HEAD_DIM + offs_d[None, :],
                       mask=live[:, None] & d_mask[None, :], other=0.0)
        nan = nan | tl.max((lse != lse).to(tl.int32), 0)
        lse = tl.where(lse != lse, float("-inf"), lse)
        m_new = tl.maximum(m, tl.max(lse, 0))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.math.exp2(m - m_use)
        w = tl.math.exp2(lse - m_use)
        den = den * alpha + tl.sum(w, 0)
        acc = acc * alpha + tl.sum(part * w[:, None], 0)
        m = m_new
    o = acc / tl.where(den > 0.0, den, 1.0)
    o = tl.where(nan != 0, float("nan"), o)
    tl.store(out_ptrs, o.to(out_ptr.dtype.element_ty), mask=d_mask)
