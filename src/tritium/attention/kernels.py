"""Triton kernels of paged attention: the attention kernel (prefill, chunked prefill, decode, with
optional split-KV) and the merge of split-KV partial results.

Layout conventions (see ``paged_attention`` for the public contract):
    q            [num_tokens, num_q_heads, head_dim]
    k/v cache    [num_blocks, PAGE_SIZE, num_kv_heads, head_dim]
    block_table  [num_seqs, max_blocks_per_seq] int32
A program owns one "Q block": BLOCK_Q consecutive query tokens of one sequence times the QPKV query
heads that share one KV head, packed into BLOCK_M = BLOCK_Q * QPKV (padded) rows, so every K/V tile
is loaded once for all heads of its group. Row r holds token r // QPKV and head r % QPKV of the group.

Scores are kept in the log2 domain (scaled by log2(e)) so the softmax uses exp2.

Inconsistent metadata (what ``paged_attention(validate=True)`` rejects) never makes a kernel access
memory outside its tensors: each program checks its sequence's lengths and query range once (scalar
work), skips the keys of an impossible sequence and writes NaN into its rows, and checks the page ids
it will read once before its key loop: one outside [0, num_blocks) makes it read nothing, its rows NaN.
"""

import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _find_seq(cu_seqlens_q_ptr, num_seqs, q_slot, BLOCK_Q: tl.constexpr):
    """Sequence owning Q-block slot ``q_slot``: the largest s with cu_seqlens_q[s] // BLOCK_Q + s <= q_slot.

    Sequence s owns slots [cu[s] // BLOCK_Q + s, cu[s+1] // BLOCK_Q + s + 1), at least
    cdiv(q_len_s, BLOCK_Q) of them, so a grid of num_tokens // BLOCK_Q + num_seqs slots covers every
    batch of that many tokens and sequences without reading lengths on the host.

    Counted, not searched: the number of s in [1, num_seqs) with cu[s] // BLOCK_Q + s <= q_slot, in one
    vector load per 256 sequences, where a binary search waits for one load per halving (8 at 256
    sequences, at the start of every program). Equal to the largest such s when the entries do not
    decrease; where they do, ``_q_block_of``'s checks make the sequences involved NaN.
    """
    count = tl.full([], 0, tl.int32)
    for start in range(1, num_seqs, 256):
        s = start + tl.arange(0, 256)
        cu = tl.load(cu_seqlens_q_ptr + s, mask=s < num_seqs, other=0)
        count += tl.sum(((s < num_seqs) & (cu // BLOCK_Q + s <= q_slot)).to(tl.int32), 0)
    return count


@triton.jit
def _q_block_of(seq, cu_seqlens_q_ptr, seq_lens_ptr, num_seqs, num_tokens, max_kv_len, q_slot,
                BLOCK_Q: tl.constexpr, HAS_Q_START: tl.constexpr):
    """The Q block of slot ``q_slot`` of sequence ``seq`` (``_find_seq``'s, or ``_heaviest_first``'s; the Gluon
    kernel finds it its own way) and its sequence's checks: (seq, q_start, q_end, seq_len, bad, row_start,
    row_end, block_row). ``bad``: the sequence's metadata is impossible (the neighbours' cu_seqlens_q entries
    catch a range that overlaps another sequence's; without HAS_Q_START, seq_len shorter than the query).
    Rows [row_start, row_end) of q/out are what the sequence's Q blocks cover (the first sequence's start at
    0, as _find_seq counts them; the last's end at num_tokens), equal to [q_start, q_end) when consistent;
    ``block_row`` is this Q block's first row (>= row_end: no rows)."""
    q_start = tl.load(cu_seqlens_q_ptr + seq)
    q_end = tl.load(cu_seqlens_q_ptr + seq + 1)
    seq_len = tl.load(seq_lens_ptr + seq)
    prev_start = tl.load(cu_seqlens_q_ptr + tl.maximum(seq - 1, 0))
    next_end = tl.load(cu_seqlens_q_ptr + tl.minimum(seq + 2, num_seqs))
    is_first = seq == 0
    is_last = seq == num_seqs - 1
    bad = (q_start < 0) | (q_start < prev_start) | (q_end < q_start) | (next_end < q_end) | (q_end > num_tokens)
    bad = bad | (is_first & (q_start != 0)) | (is_last & (q_end != num_tokens))
    if HAS_Q_START:
        bad = bad | (seq_len < 0) | (seq_len > max_kv_len)
    else:
        bad = bad | (seq_len < q_end - q_start) | (seq_len > max_kv_len)
    row_start = tl.where(is_first, 0, q_start)
    row_end = tl.where(is_last, num_tokens, tl.minimum(q_end, num_tokens))
    block_row = row_start + (q_slot - (row_start // BLOCK_Q + seq)) * BLOCK_Q
    return seq, q_start, q_end, seq_len, bad, row_start, row_end, block_row


@triton.jit
def _heaviest_first(cu_seqlens_q_ptr, seq_lens_ptr, num_seqs, num_tokens, max_kv_len, pid_q, pid_head,
                    BLOCK_Q: tl.constexpr, ORDER: tl.constexpr, MAX_SEQS: tl.constexpr):
    """The Q block a causal, unsplit program takes when blocks are handed out heaviest first across the
    whole batch: (seq, q_slot, kv_head, empty, ok).

    A Q block's work grows with the keys it sees, so each gets a *level*: its sequence's top level
    ceil(seq_len / BLOCK_Q) (seq_len clamped to [0, max_kv_len]) for its last block, one less for each
    block before it (a sequence's blocks hold consecutive levels). Programs take levels from the highest
    down, the sequences of one level in order; ORDER 1 within each KV head (grid order: the head is the
    slow index, as in slot order), ORDER 2 with the KV heads innermost (program p takes head p % H of
    position p // H). Slot order (ORDER 0, REVERSE) hands out one sequence's blocks after another, so a
    batch of several long prompts ends its last wave in short blocks.

    Position j -> level: the highest v with G(v) > j, G(v) = the blocks at level >= v (a clamped sum over
    the sequences, all in one vector of MAX_SEQS), by a binary search (~log2(levels) reductions); then the
    sequence among those holding a block at that level, by a prefix count. Every program runs this before its
    key loop: ~1-2 us on the H100 (bench/NOTES.md, "Paged attention"). ``empty``: j is
    past the batch's blocks (the grid's spare slots). ``ok`` is false where cu_seqlens_q is not consistent
    (entry 0 not 0, a decrease, the last not num_tokens): the caller then takes slot order, whose checks
    NaN the rows. The host passes ORDER > 0 only for 2 <= num_seqs <= MAX_SEQS."""
    offs = tl.arange(0, MAX_SEQS)
    live = offs < num_seqs
    cu_lo = tl.load(cu_seqlens_q_ptr + offs, mask=live, other=0)
    cu_hi = tl.load(cu_seqlens_q_ptr + offs + 1, mask=live, other=0)
    seq_lens = tl.load(seq_lens_ptr + offs, mask=live, other=0)
    q_lens = cu_hi - cu_lo
    first = tl.load(cu_seqlens_q_ptr)
    last = tl.load(cu_seqlens_q_ptr + num_seqs)
    ok = (first == 0) & (last == num_tokens) & (tl.min(q_lens, 0) >= 0)
    blocks = tl.where(live & (q_lens > 0), (q_lens + BLOCK_Q - 1) // BLOCK_Q, 0)
    top = tl.maximum((tl.minimum(tl.maximum(seq_lens, 0), max_kv_len) + BLOCK_Q - 1) // BLOCK_Q, blocks)
    if ORDER == 2:
        num_heads = tl.num_programs(1)
        flat = pid_head * tl.num_programs(0) + pid_q  # launch order of the (slot, head) grid
        j = flat // num_heads
        kv_head = flat % num_heads
    else:
        j = pid_q
        kv_head = pid_head
    # G(lo) > j >= G(hi): the level of position j lies in [lo, hi); a binary search. NOTE: a 16-way search
    # (G at 16 levels a round, a [16, MAX_SEQS] tensor) took the registers of two programs an SM from the key
    # loop: 1.2x slower on the H100 (bench/NOTES.md, "Paged attention").
    total = tl.sum(blocks, 0)
    empty = j >= total
    lo = tl.full([], 1, tl.int32)
    hi = tl.max(top, 0) + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        take = tl.sum(tl.minimum(tl.maximum(top - mid + 1, 0), blocks), 0) > j
        lo = tl.where(take, mid, lo)
        hi = tl.where(take, hi, mid)
    above = tl.sum(tl.minimum(tl.maximum(top - lo, 0), blocks), 0)  # G(lo + 1): blocks before this level
    holds = (blocks > 0) & (top - blocks + 1 <= lo) & (lo <= top)
    seq = tl.sum((tl.cumsum(holds.to(tl.int32), 0) <= j - above).to(tl.int32), 0)
    seq = tl.minimum(seq, tl.maximum(num_seqs - 1, 0))
    mine = offs == seq
    seq_blocks = tl.sum(tl.where(mine, blocks, 0), 0)
    seq_top = tl.sum(tl.where(mine, top, 0), 0)
    seq_start = tl.sum(tl.where(mine, cu_lo, 0), 0)
    q_slot = seq_start // BLOCK_Q + seq + seq_blocks - 1 - (seq_top - lo)
    return seq, q_slot, kv_head, empty, ok


@triton.jit
def _rank_order(cu_seqlens_q_ptr, num_seqs, num_tokens, pid_q, BLOCK_Q: tl.constexpr, MAX_SEQS: tl.constexpr):
    """ORDER 3, for batches whose sequences all have the same query length: (seq, q_slot, empty, ok).

    Program j takes rank j // num_seqs of sequence j % num_seqs, rank 0 being a sequence's last (heaviest)
    Q block: the last blocks of all sequences first, then the blocks before them, within each KV head (the
    grid's slow index, as in slot order). Where the sequences also see the same keys that is heaviest first
    across the batch (``_heaviest_first``'s order) at the cost of slot order: one vector load of
    cu_seqlens_q and one reduction, which check that entry s is s * (num_tokens // num_seqs) for every s.
    ``ok`` is false where they are not (the caller then takes slot order, whose checks NaN the rows);
    ``empty``: j is past the batch's blocks. The host passes ORDER 3 only for 2 <= num_seqs <= MAX_SEQS."""
    q_len = num_tokens // num_seqs
    offs = tl.arange(0, MAX_SEQS)
    live = offs < num_seqs
    cu = tl.load(cu_seqlens_q_ptr + offs, mask=live, other=0)
    last = tl.load(cu_seqlens_q_ptr + num_seqs)
    off = tl.sum((live & (cu != offs * q_len)).to(tl.int32), 0)
    ok = (off == 0) & (last == num_tokens) & (q_len * num_seqs == num_tokens)
    blocks = tl.cdiv(q_len, BLOCK_Q)
    seq = pid_q % num_seqs
    rank = pid_q // num_seqs
    empty = rank >= blocks
    q_slot = (seq * q_len) // BLOCK_Q + seq + blocks - 1 - rank
    return seq, q_slot, empty, ok


@triton.jit
def _softcap(x, cap):
    # cap * tanh(x / cap), with tanh(y) = 2 * sigmoid(2y) - 1 (no libdevice: also runs in the interpreter)
    return cap * (2.0 * tl.sigmoid(2.0 * x / cap) - 1.0)


@triton.jit
def _pages_out_of_range(block_table_row_ptr, key_lo, key_hi, num_blocks, PAGE_SIZE: tl.constexpr):
    """True when a page id that keys [key_lo, key_hi) use lies outside [0, num_blocks). One pass over the
    row's entries before the key loop (128 int32 per load; B=1 L=8192 with 64 splits: 8 pages a
    program), so the key loop itself carries no check."""
    p_lo = key_lo // PAGE_SIZE
    p_hi = tl.cdiv(key_hi, PAGE_SIZE)
    bad = tl.full([], 0, tl.int32)
    for start in range(p_lo, p_hi, 128):
        idx = start + tl.arange(0, 128)
        pages = tl.load(block_table_row_ptr + idx, mask=idx < p_hi, other=0)
        bad = bad | tl.max(((pages < 0) | (pages >= num_blocks)).to(tl.int32), 0)
    return bad != 0


@triton.jit
def _dot_q(q, k_cache_ptr):
    """q as the operand of the key and value dots. With an fp8 cache and a bf16 q: fp16, clamped to its
    range (+-65504). fp8 -> fp16 is one packed conversion a pair of elements (``cvt.rn.f16x2.e4m3x2``);
    fp8 -> bf16 goes through fp16 and then one more conversion an element (``cvt.bf16.f16``), which on
    the conversion units held batch-64 decode at the 16-bit cache's speed with half its bytes
    (bench/NOTES.md, "FP8 KV cache"). fp16 holds every bf16 q of magnitude 6.1e-5 .. 65504 exactly and p
    (in [0, 1]) with three more bits than bf16."""
    out = q
    if k_cache_ptr.dtype.element_ty.is_fp8() and q.dtype == tl.bfloat16:
        out = tl.clamp(q.to(tl.float32), -65504.0, 65504.0).to(tl.float16)
    return out


@triton.jit
def _tile_scores(q, k, offs_n, q_pos, alibi_log2, qk_scale, softcap, HAS_SOFTCAP: tl.constexpr,
                 HAS_ALIBI: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """Scores of one key tile [BLOCK_M, TILE_N]: raw q.k when neither softcap nor ALiBi (the scale is
    folded into the exponent by _online_softmax), else scaled into the log2 domain."""
    s = tl.dot(q, tl.trans(k.to(q.dtype)), input_precision=DOT_PRECISION)
    if HAS_SOFTCAP:
        s = _softcap(s * qk_scale, softcap) * 1.4426950408889634
    elif HAS_ALIBI:
        s = s * (qk_scale * 1.4426950408889634)
    if HAS_ALIBI:
        s += alibi_log2[:, None] * (offs_n[None, :] - q_pos[:, None]).to(tl.float32)
    return s


@triton.jit
def _online_softmax(s, m_i, l_i, qk_scale, MASKED: tl.constexpr, SCALED: tl.constexpr):
    """One tile's step of the online softmax: (p, alpha, l_i, m_new) from the tile's scores ``s``
    (-inf where masked; raw unless SCALED, see _tile_scores) and the running max / sum."""
    if not SCALED:
        c = qk_scale * 1.4426950408889634
        m_new = tl.maximum(m_i, tl.max(s, 1) * c)
        if MASKED:
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that saw no key yet
        else:
            m_use = m_new  # every row saw a finite score of this tile
        p = tl.math.exp2(s * c - m_use[:, None])
    else:
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows that saw no key yet
        p = tl.math.exp2(s - m_use[:, None])
    alpha = tl.math.exp2(m_i - m_use)
    l_i = l_i * alpha + tl.sum(p, 1)
    return p, alpha, l_i, m_new


@triton.jit
def _merge_step(o_run, w_run, m_run, o_part, lse_part):
    """Fold one normalised part (``o_part``, its log2-sum-exp ``lse_part``) into a running merge (``o_run``: the
    parts' outputs weighted by 2^(lse - m_run), ``w_run``: those weights' sum, ``m_run``: the largest lse so
    far; start from 0, 0, -inf). The batch-invariant path's one way of merging, shared by the grouped
    attention kernel (its key groups, one after another) and the sequential merge kernel (the same groups
    computed by split programs): one explicit FMA per value, so both compile to the same arithmetic. A part
    with lse -inf (no visible key) changes nothing and is never read; a NaN lse makes the result NaN."""
    empty = lse_part == float("-inf")
    take = lse_part > m_run  # the part's lse becomes the running max (false for NaN)
    lse_use = tl.where(empty, 0.0, lse_part)
    m_use = tl.where(m_run == float("-inf"), lse_use, m_run)
    down = tl.math.exp2(tl.where(take, m_use - lse_use, 0.0))  # rescales the running values when take
    up = tl.where(empty, 0.0, tl.math.exp2(tl.where(take, 0.0, lse_use - m_use)))  # weight of the part otherwise
    down = tl.where(take & (m_run == float("-inf")), 0.0, down)
    o_part = tl.where(empty[:, None], 0.0, o_part)
    o_take = tl.fma(o_run, down[:, None], o_part)
    o_keep = tl.fma(o_part, up[:, None], o_run)
    o_run = tl.where(take[:, None], o_take, o_keep)
    w_run = tl.where(take, tl.fma(w_run, down, 1.0), w_run + up)
    m_run = tl.where(take, lse_part, m_run)
    return o_run, w_run, m_run


@triton.jit
def _attend_tiles(
    acc, l_i, m_i, q,
    tile_lo, tile_hi,
    k_head_ptr, v_head_ptr, block_table_row_ptr,
    stride_k_blk, stride_k_tok, stride_v_blk, stride_v_tok,
    seq_len, q_pos, alibi_log2, qk_scale, softcap, window, key_lo,
    offs_d, d_mask,
    PAGE_SIZE: tl.constexpr, TILE_N: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr, DOT_PRECISION: tl.constexpr,
    o_run, w_run, m_run, v_scale, FOLD: tl.constexpr,
):
    """Online-softmax accumulation over KV tiles [tile_lo, tile_hi).

    FOLD > 0 (the grouped, batch-invariant kernel walking its key groups): after the last tile of each group
    of FOLD tiles (counted from tile 0) the group's state is folded into (o_run, w_run, m_run) by
    ``_fold_group`` and starts afresh, inside this one pipelined loop. FOLD = 0: those pass through.

    MASKED=False is for tiles every row sees entirely (no bounds, causal or window checks). With a window,
    a masked tile neither loads the page ids nor the K/V of keys before ``key_lo`` (the first key any row of
    the Q block sees): a caller may leave pages wholly behind the window out of its block table.
    acc [BLOCK_M, HEAD_DIM_PAD] fp32, l_i / m_i [BLOCK_M] fp32 (m in log2 units). The caller has checked
    every page id these tiles read (_pages_out_of_range). qk_scale > 0 (the launcher checks it).

    The page ids of tile t + 1 are loaded in iteration t and carried to the next (``pages_next``): then
    no K/V address depends on a load of the same iteration, and Triton's pipeliner keeps num_stages - 1
    tiles of K/V in flight. Loaded in the same iteration, the page ids took one stage of the pipeline
    and every iteration waited for all outstanding copies (the K/V of the next tile included) at any
    num_stages (sm_90 TTGIR: ``async_wait {num = 0}``; now ``num = 2`` at 3 stages).
    Without softcap or ALiBi the scale is folded into the exponent (one FMA per score): the row max is
    taken over the raw scores and scaled once.
    """
    offs_next = tile_lo * TILE_N + tl.arange(0, TILE_N)
    page_mask = (offs_next < seq_len) & (tile_lo < tile_hi)
    if MASKED and HAS_WINDOW:
        page_mask = page_mask & (offs_next >= key_lo)
    pages_next = tl.load(block_table_row_ptr + offs_next // PAGE_SIZE, mask=page_mask, other=0)
    if MASKED and HAS_WINDOW:  # each row's first visible key, max(q_pos - window + 1, 0) without overflow
        row_lo = q_pos - tl.minimum(q_pos, window - 1)
    for tile in range(tile_lo, tile_hi):
        offs_n = tile * TILE_N + tl.arange(0, TILE_N)  # [TILE_N] key positions
        if MASKED:
            kv_mask = offs_n < seq_len
            if HAS_WINDOW:
                kv_mask = kv_mask & (offs_n >= key_lo)
        slots = pages_next.to(tl.int64)
        offs_next = offs_n + TILE_N
        page_mask = (offs_next < seq_len) & (tile + 1 < tile_hi)
        if MASKED and HAS_WINDOW:
            page_mask = page_mask & (offs_next >= key_lo)
        pages_next = tl.load(block_table_row_ptr + offs_next // PAGE_SIZE, mask=page_mask, other=0)
        k_offs = slots * stride_k_blk + (offs_n % PAGE_SIZE) * stride_k_tok  # [TILE_N]
        v_offs = slots * stride_v_blk + (offs_n % PAGE_SIZE) * stride_v_tok
        if MASKED:
            load_mask = kv_mask[:, None] & d_mask[None, :]
            k = tl.load(k_head_ptr + k_offs[:, None] + offs_d[None, :], mask=load_mask, other=0.0)
        elif HEAD_DIM != HEAD_DIM_PAD:
            k = tl.load(k_head_ptr + k_offs[:, None] + offs_d[None, :], mask=d_mask[None, :], other=0.0)
        else:
            k = tl.load(k_head_ptr + k_offs[:, None] + offs_d[None, :])  # [TILE_N, HEAD_DIM_PAD]
        s = _tile_scores(q, k, offs_n, q_pos, alibi_log2, qk_scale, softcap, HAS_SOFTCAP, HAS_ALIBI,
                         DOT_PRECISION)
        if MASKED:
            visible = kv_mask[None, :]
            if IS_CAUSAL:
                visible = visible & (offs_n[None, :] <= q_pos[:, None])
            if HAS_WINDOW:
                visible = visible & (offs_n[None, :] >= row_lo[:, None])
            s = tl.where(visible, s, float("-inf"))
        p, alpha, l_i, m_new = _online_softmax(s, m_i, l_i, qk_scale, MASKED, HAS_SOFTCAP or HAS_ALIBI)
        if MASKED:
            v = tl.load(v_head_ptr + v_offs[:, None] + offs_d[None, :], mask=load_mask, other=0.0)
        elif HEAD_DIM != HEAD_DIM_PAD:
            v = tl.load(v_head_ptr + v_offs[:, None] + offs_d[None, :], mask=d_mask[None, :], other=0.0)
        else:
            v = tl.load(v_head_ptr + v_offs[:, None] + offs_d[None, :])
        v = v.to(q.dtype)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)
        m_i = m_new
        if FOLD > 0:
            if (tile + 1) % FOLD == 0:  # a key group's last tile: fold the group, start the next afresh
                o_run, w_run, m_run = _fold_group(o_run, w_run, m_run, acc, l_i, m_i, v_scale)
                acc = tl.zeros_like(acc)
                l_i = tl.zeros_like(l_i)
                m_i = tl.full(m_i.shape, float("-inf"), dtype=tl.float32)
    return acc, l_i, m_i, o_run, w_run, m_run


@triton.jit
def _fold_group(o_run, w_run, m_run, acc, l_i, m_i, v_scale):
    """Fold one key group's online-softmax state (acc, l_i, m_i) into the running merge: its normalised
    output and log2-sum-exp, by the same expressions as a split program's epilogue writes them for the
    merge kernel (kept inline there: sharing a helper changed the default kernel's PTX)."""
    mass = l_i != 0.0
    o_g = acc * (v_scale / tl.where(mass, l_i, 1.0))[:, None]
    lse_g = tl.where(mass, m_i + tl.math.log2(tl.where(mass, l_i, 1.0)), float("-inf"))
    return _merge_step(o_run, w_run, m_run, o_g, lse_g)


@triton.jit
def _fold_result(o_run, w_run, m_run):
    """A running merge's output (o_run / w_run; 0 where no part saw a key) and natural-log log-sum-exp (-inf
    there; NaN stays NaN)."""
    has_w = w_run > 0.0
    o = o_run / tl.where(has_w, w_run, 1.0)[:, None]
    lse = tl.where(has_w, (m_run + tl.math.log2(tl.where(has_w, w_run, 1.0))) * 0.6931471805599453, float("-inf"))
    return o, tl.where(w_run == w_run, lse, w_run)


@triton.jit
def _attend_key_range(
    acc, l_i, m_i, q,
    lo, hi, full_lo, full_hi,
    k_head_ptr, v_head_ptr, block_table_row_ptr,
    stride_k_blk, stride_k_tok, stride_v_blk, stride_v_tok,
    seq_len, q_pos, alibi_log2, qk_scale, softcap, window, key_lo,
    offs_d, d_mask,
    PAGE_SIZE: tl.constexpr, TILE_N: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr,
    DOT_PRECISION: tl.constexpr, o_run, w_run, m_run, v_scale, FOLD: tl.constexpr,
):
    """Key tiles [lo, hi) through _attend_tiles: masked before full_lo (the window's start), unmasked
    [full_lo, full_hi), masked from full_hi (the diagonal, the last partial page). Every part is clamped
    to [lo, hi), so a caller that empties [lo, hi) (hi = lo: a page id out of range) reads no key.
    FOLD and the fold state (o_run, w_run, m_run): see _attend_tiles."""
    acc, l_i, m_i, o_run, w_run, m_run = _attend_tiles(
        acc, l_i, m_i, q, lo, tl.minimum(hi, full_lo), k_head_ptr, v_head_ptr, block_table_row_ptr,
        stride_k_blk, stride_k_tok, stride_v_blk, stride_v_tok, seq_len, q_pos, alibi_log2, qk_scale,
        softcap, window, key_lo, offs_d, d_mask, PAGE_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, True, IS_CAUSAL,
        HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, DOT_PRECISION, o_run, w_run, m_run, v_scale, FOLD)
    acc, l_i, m_i, o_run, w_run, m_run = _attend_tiles(
        acc, l_i, m_i, q, tl.maximum(lo, full_lo), tl.minimum(hi, full_hi), k_head_ptr, v_head_ptr,
        block_table_row_ptr, stride_k_blk, stride_k_tok, stride_v_blk, stride_v_tok, seq_len, q_pos, alibi_log2,
        qk_scale, softcap, window, key_lo, offs_d, d_mask, PAGE_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, False,
        IS_CAUSAL, HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, DOT_PRECISION, o_run, w_run, m_run, v_scale, FOLD)
    acc, l_i, m_i, o_run, w_run, m_run = _attend_tiles(
        acc, l_i, m_i, q, tl.maximum(lo, full_hi), hi, k_head_ptr, v_head_ptr, block_table_row_ptr,
        stride_k_blk, stride_k_tok, stride_v_blk, stride_v_tok, seq_len, q_pos, alibi_log2, qk_scale,
        softcap, window, key_lo, offs_d, d_mask, PAGE_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, True, IS_CAUSAL,
        HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, DOT_PRECISION, o_run, w_run, m_run, v_scale, FOLD)
    return acc, l_i, m_i, o_run, w_run, m_run


@triton.jit(do_not_specialize=["num_seqs", "num_tokens", "num_blocks", "max_kv_len", "window"])
def _paged_attention_kernel(
    # pointers
    out_ptr, q_ptr, k_cache_ptr, v_cache_ptr,
    block_table_ptr, seq_lens_ptr, cu_seqlens_q_ptr,
    alibi_ptr, sinks_ptr, k_scale_ptr, v_scale_ptr,
    part_out_ptr, part_lse_ptr, q_start_ptr, lse_ptr,
    # strides (the head_dim stride of every tensor is 1)
    stride_q_tok, stride_q_head,
    stride_o_tok, stride_o_head, stride_lse_tok,
    stride_k_blk, stride_k_tok, stride_k_head,
    stride_v_blk, stride_v_tok, stride_v_head,
    stride_bt_seq,
    stride_po_split, stride_po_tok, stride_po_head,
    stride_pl_split, stride_pl_tok,
    # sizes and scalars
    num_seqs, num_tokens, num_blocks, max_kv_len, sm_scale, softcap, window, k_scale_val, v_scale_val,
    # meta-parameters
    QPKV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, PAGE_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_Q: tl.constexpr, TILE_N: tl.constexpr, IS_SPLIT: tl.constexpr,
    IS_CAUSAL: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
    HAS_ALIBI: tl.constexpr, HAS_SINKS: tl.constexpr, SCALES_FROM_PTR: tl.constexpr,
    REVERSE: tl.constexpr, DOT_PRECISION: tl.constexpr, USE_PDL: tl.constexpr,
    HAS_Q_START: tl.constexpr = False, WRITE_LSE: tl.constexpr = False, PRELOAD: tl.constexpr = 1,
    GROUP_TILES: tl.constexpr = 0, ORDER: tl.constexpr = 0, MAX_SEQS: tl.constexpr = 256,
):
    """Grid: (num_tokens // BLOCK_Q + num_seqs, num_kv_heads, num_splits). Programs whose slot holds no
    Q block exit at once. With IS_SPLIT each program covers 1/num_splits of its KV tiles and writes a
    normalised partial output plus its log2-sum-exp to the workspace for the merge kernel; without it
    the grid's last dimension is 1 and the program writes the output.

    USE_PDL (a programmatic dependent launch): the next kernel (the merge, or a projection) may be
    scheduled at once. Before waiting for the kernel before it (which wrote q and the new tokens' K/V),
    a program reads only the batch layout (cu_seqlens_q, seq_lens, block_table), constant inputs
    (scales, ALiBi slopes, sinks) and, with PRELOAD, the K/V of its first key tile where every key of
    that tile lies before the sequence's new tokens (earlier steps wrote those).
    PRELOAD: 0 never, 1 with USE_PDL, 2 always (tests: the same arithmetic without PDL); the launcher
    passes 1 only where it was measured to pay (launcher.preload_arg). Only for tiles of at most 4096
    elements (sm_90, bf16: 32-key tiles at D=128 114 -> 115 registers; 128-key tiles would spill) and
    without HAS_Q_START (whose keys the kernel before may have written). The tile's DRAM round trip then
    overlaps the tail of the kernel before (a projection, or the merge of the attention before).

    max_kv_len: tokens a block-table row holds (block_table.shape[1] * PAGE_SIZE; 0 with no pages).
    HAS_Q_START: q_start_ptr[s] is the position of sequence s's first query in its keys' coordinates
    (default seq_len - q_len: the new tokens are the last keys); any int32, the keys need not include
    the queries (a part of a context held elsewhere). WRITE_LSE (no split): lse_ptr[token, head] gets
    the row's natural-log log-sum-exp of its visible scores (sink included), -inf for a row with none.
    Metadata checks (scalar, once per program; the launcher's ``validate=True`` reports the same cases
    as errors): sequence s is impossible unless 0 <= cu[s-1] <= cu[s] <= cu[s+1] <= cu[s+2] <=
    num_tokens (neighbours where they exist), cu[0] == 0 for the first, cu[num_seqs] == num_tokens for
    the last, and q_len <= seq_len <= max_kv_len. An impossible sequence reads no key and its rows,
    clamped to [0, num_tokens) (the first's from row 0, the last's up to num_tokens, so tokens no
    sequence claims get NaN too), are NaN. Rows of a consistent sequence are exact.
    GROUP_TILES > 0 (batch invariance): a sequence's key tiles fall in groups of GROUP_TILES counted from tile
    0, each group's online softmax starts afresh, and the groups' normalised results are folded together in
    order by ``_merge_step``. Without split-KV one program walks the groups; with it, split s computes group s
    (the grid needs as many splits as the longest sequence has groups) and the merge kernel folds them with
    SEQUENTIAL. Either way a row's bits depend only on its own keys and position, not on the batch, its Q
    block or the split count (the caller also fixes BLOCK_M, TILE_N and the warps, which set the order of
    the reductions)."""
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
    q_slot = tl.program_id(0)
    if REVERSE:  # longest causal Q blocks (last in their sequence) first: better tail balance
        q_slot = tl.num_programs(0) - 1 - q_slot
    kv_head = tl.program_id(1)
    split = tl.program_id(2)

    # Impossible metadata (see above): scalar checks, once per program (_q_block_of). Cost per program:
    # a few more scalar loads of cu_seqlens_q (the cache lines the search already read) and ~20 scalar
    # integer ops, all before the PDL wait; one more [BLOCK_M] compare in row_valid; in the epilogue one
    # [BLOCK_M] select; the page ids the program reads are checked in one pass before the key loop
    # (_pages_out_of_range), so the key loop is unchanged.
    if ORDER != 0:  # heaviest Q blocks of the whole batch first (see _heaviest_first and _rank_order)
        if ORDER == 3:
            seq, lpt_slot, lpt_empty, lpt_ok = _rank_order(cu_seqlens_q_ptr, num_seqs, num_tokens, tl.program_id(0),
                                                           BLOCK_Q, MAX_SEQS)
            lpt_head = kv_head
        else:
            seq, lpt_slot, lpt_head, lpt_empty, lpt_ok = _heaviest_first(
                cu_seqlens_q_ptr, seq_lens_ptr, num_seqs, num_tokens, max_kv_len, tl.program_id(0),
                tl.program_id(1), BLOCK_Q, ORDER, MAX_SEQS)
        if lpt_ok & lpt_empty:
            if USE_PDL:
                tl.extra.cuda.gdc_wait()
            return
        if not lpt_ok:
            seq = _find_seq(cu_seqlens_q_ptr, num_seqs, q_slot, BLOCK_Q)
        q_slot = tl.where(lpt_ok, lpt_slot, q_slot)
        kv_head = tl.where(lpt_ok, lpt_head, kv_head)
    else:
        seq = _find_seq(cu_seqlens_q_ptr, num_seqs, q_slot, BLOCK_Q)
    seq, q_start, q_end, seq_len, bad, row_start, row_end, block_row = _q_block_of(
        seq, cu_seqlens_q_ptr, seq_lens_ptr, num_seqs, num_tokens, max_kv_len, q_slot, BLOCK_Q, HAS_Q_START)
    q_len = q_end - q_start
    if block_row >= row_end:
        if USE_PDL:
            tl.extra.cuda.gdc_wait()  # finish only after the kernel before: later kernels count on it
        return
    if HAS_Q_START:
        context_len = tl.load(q_start_ptr + seq)  # position of the sequence's first new token
    else:
        context_len = seq_len - q_len

    offs_m = tl.arange(0, BLOCK_M)
    rows = block_row + offs_m // QPKV  # [BLOCK_M] token row in q / out
    tok = rows - q_start  # [BLOCK_M] token index within the sequence
    head = kv_head * QPKV + offs_m % QPKV  # [BLOCK_M] query head
    row_valid = (offs_m < BLOCK_Q * QPKV) & (rows < row_end) & (rows >= 0)
    q_pos = context_len + tok  # [BLOCK_M] absolute position of each row's token
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_mask = offs_d < HEAD_DIM

    q_rows = rows.to(tl.int64)

    if SCALES_FROM_PTR:
        k_scale = tl.load(k_scale_ptr).to(tl.float32)
        v_scale = tl.load(v_scale_ptr).to(tl.float32)
    else:
        k_scale = k_scale_val
        v_scale = v_scale_val
    qk_scale = sm_scale * k_scale

    alibi_log2 = tl.zeros([BLOCK_M], dtype=tl.float32)
    if HAS_ALIBI:
        alibi_log2 = tl.load(alibi_ptr + head, mask=row_valid, other=0.0).to(tl.float32) * 1.4426950408889634

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    if HAS_SINKS:
        if split == 0:  # the sink term enters the softmax once, in the first split
            m_i = tl.load(sinks_ptr + head, mask=row_valid, other=float("-inf")).to(tl.float32) * 1.4426950408889634
            l_i = tl.where(row_valid, 1.0, 0.0)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)

    # Key range of this Q block and the part of it that needs no mask.
    first_pos = context_len + (block_row - q_start)
    # min(first_pos + BLOCK_Q - 1, seq_len - 1), not overflowing int32 for queries near its end (q_start_pos)
    last_pos = tl.minimum(first_pos, seq_len - BLOCK_Q) + (BLOCK_Q - 1)
    if IS_CAUSAL:
        kv_end = last_pos + 1
        full_end = first_pos + 1
        if HAS_Q_START:  # queries may lie past the keys (and last_pos before first_pos)
            kv_end = tl.maximum(kv_end, 0)
            full_end = tl.minimum(full_end, seq_len)
    else:
        kv_end = seq_len
        full_end = seq_len
    tile_lo = 0
    full_lo = 0
    key_lo = 0  # the first key a row of this Q block sees
    if HAS_WINDOW:  # max(pos - window + 1, 0), not overflowing int32 for positions near its start
        key_lo = first_pos - tl.minimum(first_pos, window - 1)
        tile_lo = key_lo // TILE_N
        full_lo = tl.cdiv(last_pos - tl.minimum(last_pos, window - 1), TILE_N)
    tile_hi = tl.cdiv(kv_end, TILE_N)
    tile_hi = tl.where(bad, tile_lo, tile_hi)  # an impossible sequence reads no key: its rows become NaN
    full_lo = tl.minimum(tl.maximum(full_lo, tile_lo), tile_hi)
    full_hi = tl.minimum(tl.maximum(full_end // TILE_N, full_lo), tile_hi)

    # This split's share of the tiles.
    if IS_SPLIT:
        if GROUP_TILES > 0:  # split s is key group s, counted from tile 0 whatever the Q block
            lo = tl.maximum(tile_lo, split * GROUP_TILES)
            hi = tl.minimum(tile_hi, (split + 1) * GROUP_TILES)
            # keys past the last split's group (a max_seqlen_k hint below a sequence's length): NaN rows
            bad = bad | (tile_hi > tl.num_programs(2) * GROUP_TILES)
        else:
            per_split = tl.cdiv(tile_hi - tile_lo, tl.num_programs(2))
            lo = tile_lo + split * per_split
            hi = tl.minimum(lo + per_split, tile_hi)
    else:
        lo = tile_lo
        hi = tile_hi

    # Page ids this program reads, checked once: an out-of-range one makes its rows NaN (read nothing).
    bt_row_ptr = block_table_ptr + seq.to(tl.int64) * stride_bt_seq
    if lo < hi:
        bad = bad | _pages_out_of_range(bt_row_ptr, tl.maximum(lo * TILE_N, key_lo), tl.minimum(hi * TILE_N, seq_len),
                                        num_blocks, PAGE_SIZE)
    hi = tl.where(bad, lo, hi)

    if IS_SPLIT:
        # A split with no key tile (a short sequence in a grid sized for long ones, e.g. a CUDA graph
        # captured for max_model_len) writes only its empty log-sum-exp; the merge skips its output.
        # An impossible sequence writes NaN instead, which the merge turns into NaN rows.
        empty = lo >= hi
        if HAS_SINKS:
            empty = empty & (split != 0)  # the sink term lives in split 0
        empty = empty | bad
        if empty:
            if USE_PDL:
                tl.extra.cuda.gdc_wait()  # finish only after the kernel before: later kernels count on it
            lse_empty = tl.where(bad, float("nan"), float("-inf"))
            tl.store(part_lse_ptr + split.to(tl.int64) * stride_pl_split + q_rows * stride_pl_tok + head,
                     tl.zeros([BLOCK_M], tl.float32) + lse_empty, mask=row_valid)
            return

    k_head_ptr = k_cache_ptr + kv_head * stride_k_head
    v_head_ptr = v_cache_ptr + kv_head * stride_v_head
    DO_PRELOAD: tl.constexpr = ((PRELOAD == 2 or (PRELOAD == 1 and USE_PDL)) and not HAS_Q_START
                                and TILE_N * HEAD_DIM_PAD <= 4096 and GROUP_TILES == 0)
    if DO_PRELOAD:
        # The first tile, where it needs no mask (inside [full_lo, full_hi)) and holds only keys older
        # than the sequence's new tokens: its page ids were checked above, and no kernel of this step
        # writes it.
        pre = (lo < hi) & (lo >= full_lo) & (lo < full_hi) & ((lo + 1) * TILE_N <= context_len)
        offs_pre = lo * TILE_N + tl.arange(0, TILE_N)
        slots_pre = tl.load(bt_row_ptr + offs_pre // PAGE_SIZE, mask=pre, other=0).to(tl.int64)
        pre_mask = pre & d_mask[None, :]
        k_pre = tl.load(k_head_ptr + (slots_pre * stride_k_blk + (offs_pre % PAGE_SIZE) * stride_k_tok)[:, None]
                        + offs_d[None, :], mask=pre_mask, other=0.0)
        v_pre = tl.load(v_head_ptr + (slots_pre * stride_v_blk + (offs_pre % PAGE_SIZE) * stride_v_tok)[:, None]
                        + offs_d[None, :], mask=pre_mask, other=0.0)
        loop_lo = tl.where(pre, lo + 1, lo)
    else:
        loop_lo = lo
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # q and the new tokens' K/V come from the kernels before
    q = tl.load(q_ptr + q_rows[:, None] * stride_q_tok + head[:, None] * stride_q_head + offs_d[None, :],
                mask=row_valid[:, None] & d_mask[None, :], other=0.0)  # [BLOCK_M, HEAD_DIM_PAD]
    q = _dot_q(q, k_cache_ptr)
    if DO_PRELOAD:
        if pre:
            s = _tile_scores(q, k_pre, offs_pre, q_pos, alibi_log2, qk_scale, softcap, HAS_SOFTCAP, HAS_ALIBI,
                             DOT_PRECISION)
            p, alpha, l_i, m_i = _online_softmax(s, m_i, l_i, qk_scale, False, HAS_SOFTCAP or HAS_ALIBI)
            v_tile = v_pre.to(q.dtype)  # a new name: fp8 K/V would change v_pre's type inside the branch
            acc = tl.dot(p.to(v_tile.dtype), v_tile, acc * alpha[:, None], input_precision=DOT_PRECISION)
    store_mask = row_valid[:, None] & d_mask[None, :]
    if GROUP_TILES > 0 and not IS_SPLIT:
        # The key groups one after another in one pipelined key loop, each computed as the split program of
        # that group would, folded (_fold_group) as the sequential merge kernel folds the splits' results.
        o_run = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
        w_run = tl.zeros([BLOCK_M], dtype=tl.float32)
        m_run = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        if HAS_SINKS:  # the sink lives in group 0 (split 0): where no tile of group 0 is read, it folds alone
            alone = lo >= GROUP_TILES
            o_s, w_s, m_s = _fold_group(o_run, w_run, m_run, acc, l_i, m_i, v_scale)
            o_run = tl.where(alone, o_s, o_run)
            w_run = tl.where(alone, w_s, w_run)
            m_run = tl.where(alone, m_s, m_run)
            l_i = tl.where(alone, 0.0, l_i)
            m_i = tl.where(alone, float("-inf"), m_i)
        acc, l_i, m_i, o_run, w_run, m_run = _attend_key_range(
            acc, l_i, m_i, q, lo, hi, full_lo, full_hi, k_head_ptr, v_head_ptr, bt_row_ptr, stride_k_blk,
            stride_k_tok, stride_v_blk, stride_v_tok, seq_len, q_pos, alibi_log2, qk_scale, softcap, window, key_lo,
            offs_d, d_mask, PAGE_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, IS_CAUSAL, HAS_WINDOW, HAS_SOFTCAP,
            HAS_ALIBI, DOT_PRECISION, o_run, w_run, m_run, v_scale, GROUP_TILES)
        # the last group, unless it ended on a group boundary (then its state is empty: a no-op fold)
        o_run, w_run, m_run = _fold_group(o_run, w_run, m_run, acc, l_i, m_i, v_scale)
        o, lse = _fold_result(o_run, tl.where(bad, float("nan"), w_run), m_run)
        o = tl.where(bad, float("nan"), o)
        o_ptrs = out_ptr + q_rows[:, None] * stride_o_tok + head[:, None] * stride_o_head + offs_d[None, :]
        tl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=store_mask)
        if WRITE_LSE:  # natural log; NaN rows stay NaN
            tl.store(lse_ptr + q_rows * stride_lse_tok + head, lse, mask=row_valid)
        return

    acc, l_i, m_i, _, _, _ = _attend_key_range(
        acc, l_i, m_i, q, loop_lo, hi, full_lo, full_hi, k_head_ptr, v_head_ptr, bt_row_ptr,
        stride_k_blk, stride_k_tok, stride_v_blk, stride_v_tok, seq_len, q_pos, alibi_log2, qk_scale,
        softcap, window, key_lo, offs_d, d_mask, PAGE_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, IS_CAUSAL,
        HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, DOT_PRECISION, 0.0, 0.0, 0.0, v_scale, 0)

    # NaN rows for an impossible sequence or a page id out of range. NaN counts as mass, so it reaches
    # the output (and the merge, through the log-sum-exp).
    l_i = tl.where(bad, float("nan"), l_i)
    has_mass = l_i != 0.0
    o = acc * (v_scale / tl.where(has_mass, l_i, 1.0))[:, None]  # rows that saw no key give 0
    if not IS_SPLIT:
        o_ptrs = out_ptr + q_rows[:, None] * stride_o_tok + head[:, None] * stride_o_head + offs_d[None, :]
        tl.store(o_ptrs, o.to(out_ptr.dtype.element_ty), mask=store_mask)
        if WRITE_LSE:  # natural log; NaN rows stay NaN
            lse = tl.where(has_mass, (m_i + tl.math.log2(tl.where(has_mass, l_i, 1.0))) * 0.6931471805599453,
                           float("-inf"))
            tl.store(lse_ptr + q_rows * stride_lse_tok + head, lse, mask=row_valid)
    else:
        split64 = split.to(tl.int64)
        po_ptrs = (part_out_ptr + split64 * stride_po_split + q_rows[:, None] * stride_po_tok
                   + head[:, None] * stride_po_head + offs_d[None, :])
        tl.store(po_ptrs, o, mask=store_mask)
        lse = tl.where(has_mass, m_i + tl.math.log2(tl.where(has_mass, l_i, 1.0)), float("-inf"))
        tl.store(part_lse_ptr + split64 * stride_pl_split + q_rows * stride_pl_tok + head, lse, mask=row_valid)


@triton.jit
def _merge_in_order(out_ptr, part_out_ptr, part_lse_ptr, lse_ptr, tok, head, stride_o_tok, stride_o_head,
                    stride_lse_tok, stride_po_split, stride_po_tok, stride_po_head, stride_pl_split, stride_pl_tok,
                    num_splits, SPLITS_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
                    WRITE_LSE: tl.constexpr):
    """The batch-invariant merge (GROUP_TILES splits): splits 0, 1, ... folded one at a time by _merge_step, as
    the grouped attention kernel folds its key groups, on [1]- and [1, HEAD_DIM_PAD]-shaped values."""
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_mask = offs_d < HEAD_DIM
    one = tl.zeros([1], dtype=tl.int64)
    o_run = tl.zeros([1, HEAD_DIM_PAD], dtype=tl.float32)
    w_run = tl.zeros([1], dtype=tl.float32)
    m_run = tl.full([1], float("-inf"), dtype=tl.float32)
    # Unrolled over the padded split count, so that every split's loads can be in flight at once (a runtime
    # loop waits for one L2 round trip a split: 64 splits ~20 us); splits past num_splits read as empty.
    for s in tl.static_range(SPLITS_PAD):
        split = one + s  # [1] int64
        here = split < num_splits
        lse_s = tl.load(part_lse_ptr + split * stride_pl_split + tok * stride_pl_tok + head, mask=here,
                        other=float("-inf"))  # [1]
        full = lse_s > float("-inf")  # empty splits wrote no output: not read
        o_s = tl.load(part_out_ptr + split[:, None] * stride_po_split + tok * stride_po_tok + head * stride_po_head
                      + offs_d[None, :], mask=full[:, None] & d_mask[None, :], other=0.0)  # [1, HEAD_DIM_PAD]
        o_run, w_run, m_run = _merge_step(o_run, w_run, m_run, o_s, lse_s)
    o, lse = _fold_result(o_run, w_run, m_run)
    tl.store(out_ptr + tok * stride_o_tok + head * stride_o_head + offs_d[None, :], o.to(out_ptr.dtype.element_ty),
             mask=d_mask[None, :])
    if WRITE_LSE:  # natural log; -inf when no split saw a key, NaN stays NaN
        tl.store(lse_ptr + tok * stride_lse_tok + head + one, lse)


@triton.jit
def _merge_splits_kernel(
    # pointers
    out_ptr, part_out_ptr, part_lse_ptr, lse_ptr,
    # strides
    stride_o_tok, stride_o_head, stride_lse_tok,
    stride_po_split, stride_po_tok, stride_po_head,
    stride_pl_split, stride_pl_tok,
    # sizes
    num_splits,
    # meta-parameters
    SPLITS_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, USE_PDL: tl.constexpr,
    WRITE_LSE: tl.constexpr = False, PARALLEL_LOADS: tl.constexpr = False, SEQUENTIAL: tl.constexpr = False,
):
    """Grid: (num_tokens, num_q_heads). out = sum_s w_s o_s / sum_s w_s with w_s = 2^(lse_s - max lse).

    Every index comes from the grid (token < num_tokens <= the workspace's rows, split < num_splits), so
    no metadata value can move its accesses. A NaN log-sum-exp (a sequence with impossible metadata)
    gives a NaN weight, hence a NaN row."""
    if USE_PDL:  # the next kernel (a decode projection) may start loading its weights now
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # the partial results come from the attention kernel
    tok = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    if SEQUENTIAL:
        _merge_in_order(out_ptr, part_out_ptr, part_lse_ptr, lse_ptr, tok, head, stride_o_tok, stride_o_head,
                        stride_lse_tok, stride_po_split, stride_po_tok, stride_po_head, stride_pl_split,
                        stride_pl_tok, num_splits, SPLITS_PAD, HEAD_DIM, HEAD_DIM_PAD, WRITE_LSE)
        return
    offs_s = tl.arange(0, SPLITS_PAD)
    s_mask = offs_s < num_splits
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_mask = offs_d < HEAD_DIM
    part_ptrs = (part_out_ptr + offs_s[:, None].to(tl.int64) * stride_po_split + tok * stride_po_tok
                 + head * stride_po_head + offs_d[None, :])                           # [SPLITS_PAD, HEAD_DIM_PAD]
    if PARALLEL_LOADS:  # every partial requested with the log-sum-exps: one L2 round trip, not two
        parts = tl.load(part_ptrs, mask=s_mask[:, None] & d_mask[None, :], other=0.0)
    lse = tl.load(part_lse_ptr + offs_s * stride_pl_split + tok * stride_pl_tok + head,
                  mask=s_mask, other=float("-inf"))  # [SPLITS_PAD]
    lse_max = tl.max(lse, 0)
    lse_max = tl.where(lse_max == float("-inf"), 0.0, lse_max)
    w = tl.math.exp2(lse - lse_max)  # empty splits weigh 0
    full = s_mask & (lse > float("-inf"))  # empty splits wrote no output: not read (or, loaded, not used)
    if PARALLEL_LOADS:
        parts = tl.where(full[:, None], parts, 0.0)  # stale rows of empty splits may hold anything, NaN too
    else:
        parts = tl.load(part_ptrs, mask=full[:, None] & d_mask[None, :], other=0.0)
    den = tl.sum(w, 0)
    o = tl.sum(parts * w[:, None], 0) / tl.where(den > 0.0, den, 1.0)
    tl.store(out_ptr + tok * stride_o_tok + head * stride_o_head + offs_d, o.to(out_ptr.dtype.element_ty),
             mask=d_mask)
    if WRITE_LSE:  # natural log of the merged sum; -inf when no split saw a key, NaN stays NaN
        lse_all = tl.where(den > 0.0, (lse_max + tl.math.log2(tl.where(den > 0.0, den, 1.0))) * 0.6931471805599453,
                           float("-inf"))
        tl.store(lse_ptr + tok * stride_lse_tok + head, tl.where(den == den, lse_all, den))
