"""Paged causal prefill for NVIDIA Hopper in Gluon (``triton.experimental.gluon``), warp-specialized.

What the tile language cannot express and these kernels do (FlashAttention-3's schedule): a work item is
one Q block (128 rows: query tokens x the query heads of one KV head, as in ``kernels.py``), run by
partitions of one program (``gl.warp_specialize``):

- two loaders (a warp and 24 registers each, one for K and one for V): per key tile, the tile's page
  ids in one vector load, then TMA copies of ``[min(page, tile), head_dim]`` per page into a ring of
  ``STAGES`` K/V slots (``ready`` mbarriers count both loaders' bytes; ``empty`` ones count both
  consumers' releases). The K loader also checks every page id it reads and hands the verdict to the
  consumers (bad ids are copied as zeros: TMA is bounds-checked against the cache);
- two consumers (a warpgroup and 240 registers each, 64 rows each). Per key tile j::

      issue   S_j = Q K_j^T                     (wgmma, async)
      issue   O = O * alpha_{j-1} + P_{j-1} V_{j-1}   (wgmma, async)
      wait    S_j                               (warpgroup_mma_wait(1): P V still running)
      softmax S_j -> P_j, alpha_j               (under P_{j-1} V_{j-1})
      wait    O; release slot j-1

  With ``PINGPONG`` the consumers take turns issuing their pair (two mbarriers), so one's softmax runs
  under the other's wgmmas. Each stores its output through its Q buffer (16-byte stores).

Two grids over the same partitions:

- ``_persistent_kernel``: one program an SM. The K loader is also the scheduler: it takes the program's
  first item, then claims the next from a per-launch counter (zeroed before the launch) when it has
  issued the current one's tiles, works out each item's record and hands it to the consumers and the V
  loader through shared memory (two buffers). The ring position, the consumers' turns and their
  barrier phases carry from item to item; the loaders fill the next item's first slots during this
  one's last tiles, and the consumers load the next Q rows under their last P V. Items run longest
  first, the KV heads of a Q block next to each other.
- ``_grid_kernel``: one program a work item (the hardware hands them out in the same order).

``launch`` runs the persistent kernel where a sequence spans at most ``PERSISTENT_MAX_KEYS`` keys
(``persistent_by_default``), the grid beyond. Measured on the H100 (bench/NOTES.md): per work item the
grid spends ~8,000 cycles outside its key loop (program start, metadata, Q, epilogue), the persistent
kernel ~2,000; that is +4-7% at B=8 S=2048 (short items), while on one 16k-token sequence the grid is
3-6% faster.

Nothing crosses a key loop's back edge in flight: written that way (stop 27) ptxas serialised every
wgmma (C7514). Measured on the H100: 0.94-1.09x cuDNN on the prefill anchors, 1.3-1.7x the Triton kernel.

Scope (``supported`` says whether a call fits): causal, no sliding window, softcap, ALiBi, sinks,
``q_start_pos`` or ``lse``; fp16/bf16 queries with a cache of the same dtype; head_dim 128; pages of
16, 32, 64 or a multiple of 128 keys; contiguous caches; at most 128 query heads per KV head.
``paged_attention`` picks it by itself (``auto_selects``) for prefill-heavy batches that fit, on Hopper;
``AttentionConfig(kernel="gluon")`` asks for it (an error if the call does not fit) and
``TRITIUM_GLUON=0`` in the environment turns the automatic choice off. Inconsistent metadata follows
``kernels.py``: an impossible sequence or a page id outside the cache gives NaN rows and no access
outside the tensors.
"""

import functools
import os

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_init, warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from tritium.attention.config import AttentionConfig
from tritium.attention.kernels import _q_block_of

BLOCK_M, TILE_N, HEAD_DIM, NUM_WARPS, STAGES = 128, 128, 128, 4, 3
# Registers per thread: the two consumer warpgroups and the loader's (12 warps in all, 168 x 384 = 64,512 <= 65,536).
CONSUMER_REGS, LOADER_REGS, MAXNREG = 240, 24, 168
PINGPONG = True
# Launches over at most this many keys a sequence (max_kv_len) run the persistent kernel, longer ones one
# program a Q block (bench/NOTES.md: B=8 S=2048 +4-7% persistent, B=1 S=16384 -3-6%; B=4 S=8192 +2-4% in a
# probe of the two kernels alone but -1-3% in the benchmark, so not switched).
PERSISTENT_MAX_KEYS = 4096
# The automatic choice (auto_selects): off with TRITIUM_GLUON=0.
AUTO = os.environ.get("TRITIUM_GLUON", "1") != "0"
# Batches with fewer query tokens per sequence than this stay on the Triton kernel (decode and mostly-decode
# mixes: split-KV serves them, this kernel has none).
MIN_TOKENS_PER_SEQ = 64
# What paged_attention runs when it picks this kernel (its tiles are fixed: the fields say what they are).
CONFIG = AttentionConfig(block_m=BLOCK_M, block_q=32, tile_n=TILE_N, num_splits=1, num_warps=8, num_stages=STAGES,
                         kernel="gluon")
_GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}


@gluon.jit
def _find_seq(cu_seqlens_q_ptr, num_seqs, q_slot, BLOCK_Q: gl.constexpr, WIDTH: gl.constexpr,
              num_warps: gl.constexpr):
    """``kernels._find_seq`` in vector loads of ``WIDTH`` entries instead of a binary search (a load latency
    per halving): the count of s in [1, num_seqs) with cu_seqlens_q[s] // BLOCK_Q + s <= q_slot, which is
    the largest such s when the entries do not decrease (where they do, the checks of ``_q_block_of`` make
    the sequences involved NaN)."""
    layout: gl.constexpr = gl.BlockedLayout([WIDTH // (32 * num_warps)], [32], [num_warps], [0])
    count = gl.to_tensor(0)
    for start in range(1, num_seqs, WIDTH):
        s = start + gl.arange(0, WIDTH, layout=layout)
        cu = gl.load(cu_seqlens_q_ptr + s, mask=s < num_seqs, other=0)
        count += gl.sum(((s < num_seqs) & (cu // BLOCK_Q + s <= q_slot)).to(gl.int32), 0)
    return count


@gluon.jit
def _issue_tile(desc, bt_row_ptr, tile, p_hi, kv_col, num_blocks, slot, bar, flag, bad,
                PAGE_SIZE: gl.constexpr, TILE_N: gl.constexpr, CHECK: gl.constexpr):
    """TMA copies of key tile ``tile`` of one cache (K or V) into a ring slot, counted on ``bar``: one copy
    of ``BOX = min(PAGE_SIZE, TILE_N)`` keys per page. A page past the sequence's ``p_hi`` pages is
    addressed past the cache (row num_blocks * PAGE_SIZE), and so is any page id out of range: TMA copies
    are bounds-checked against the cache and fill what lies outside with zeros. Runs in a one-warp loader
    partition: the tile's page ids come in one vector load (one latency, not one per page). With CHECK,
    ``bad`` (the Q block's page ids so far) or'ed with whether one of this tile's ids lies outside
    [0, num_blocks) is stored in the slot's ``flag`` before ``bar`` counts the arrival, and returned."""
    BOX: gl.constexpr = PAGE_SIZE if PAGE_SIZE < TILE_N else TILE_N
    NP: gl.constexpr = TILE_N // BOX
    if NP == 1:
        key = tile * TILE_N
        p = key // PAGE_SIZE
        page = gl.load(bt_row_ptr + p, mask=p < p_hi, other=num_blocks)
        out = (page < 0) | ((page >= num_blocks) & (p < p_hi))
        bad = bad | out.to(gl.int32)
        rows = gl.where(out, num_blocks, page) * PAGE_SIZE + key % PAGE_SIZE
    else:
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
        idx = gl.arange(0, NP, layout=layout)
        pidx = tile * NP + idx
        pages = gl.load(bt_row_ptr + pidx, mask=pidx < p_hi, other=num_blocks)
        out = (pages < 0) | ((pages >= num_blocks) & (pidx < p_hi))
        bad = bad | gl.max(out.to(gl.int32), 0)
        rows = gl.where(out, num_blocks, pages) * PAGE_SIZE
    if CHECK:
        flag.store(gl.full([32], 0, gl.int32, layout=gl.BlockedLayout([1], [32], [1], [0])) + bad)
    mbarrier.expect(bar, desc.block_type.nbytes * NP)
    if NP == 1:
        tma.async_copy_global_to_shared(desc, [rows, kv_col], bar, slot)
    else:
        for i in gl.static_range(NP):
            row = gl.sum(gl.where(idx == i, rows, 0), 0)
            tma.async_copy_global_to_shared(desc, [row, kv_col], bar, slot.slice(i * BOX, BOX))
    return bad


@gluon.jit
def _softmax_tile(s, m_i, l_i, tile, seq_len, q_pos, full_hi, qk_scale_log2,
                  TILE_N: gl.constexpr, mma: gl.constexpr):
    """Online softmax of one tile's scores ``s`` ([rows, TILE_N] fp32, raw q.k): returns P (fp32),
    the factor that rescales the running output, and the new row max and sum (log2 units)."""
    if tile >= full_hi:  # the diagonal or the last partial tile: keys past the query or the sequence
        offs_n = tile * TILE_N + gl.arange(0, TILE_N, layout=gl.SliceLayout(0, mma))
        visible = (offs_n[None, :] < seq_len) & (offs_n[None, :] <= q_pos[:, None])
        s = gl.where(visible, s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale_log2)
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)  # rows that saw no key yet
    p = gl.exp2(s * qk_scale_log2 - m_use[:, None])
    alpha = gl.exp2(m_i - m_use)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_i


@gluon.jit
def _row_offsets(block_row, row_end, kv_head, stride_tok, stride_head, ROW0: gl.constexpr, ROWS: gl.constexpr,
                 HEAD_DIM: gl.constexpr, QPKV: gl.constexpr, BLOCK_Q: gl.constexpr, layout: gl.constexpr):
    """Element offsets into q or out ([tokens, heads, head_dim]) of Q block rows [ROW0, ROW0 + ROWS) (row r:
    token block_row + r // QPKV, head kv_head * QPKV + r % QPKV), and the mask of rows the block owns."""
    offs_m = ROW0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
    offs_d = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, layout))
    rows = block_row + offs_m // QPKV
    valid = (offs_m < BLOCK_Q * QPKV) & (rows < row_end) & (rows >= 0)
    heads = kv_head * QPKV + offs_m % QPKV
    offs = rows.to(gl.int64)[:, None] * stride_tok + heads[:, None] * stride_head + offs_d[None, :]
    return offs, valid[:, None]


@gluon.jit
def _turn_wait(bars, ME: gl.constexpr, k, PINGPONG: gl.constexpr):
    """Ping-pong: consumer ME issues its k-th pair of wgmmas only after the other consumer issued its
    (k-1)-th (consumer 0 goes first: a fresh mbarrier counts as having completed phase 1). ``k`` counts
    key tiles over all of the program's work items: both consumers run the same tiles."""
    if PINGPONG:
        mbarrier.wait(bars.index(ME), (k & 1) ^ (1 - ME))


@gluon.jit
def _turn_pass(bars, ME: gl.constexpr, PINGPONG: gl.constexpr):
    if PINGPONG:
        mbarrier.arrive(bars.index(1 - ME), count=1)


@gluon.jit
def _key_loop(q_half, k_bufs, v_bufs, ready, empty, bars, n, tile_hi, full_hi, seq_len, q_pos, qk_scale_log2, o, m_i,
              l_i, TILE_N: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr, ME: gl.constexpr):
    """A consumer's key tiles [0, tile_hi) (at least one) of a work item, in ring slots n, n + 1, ... Per
    tile j (FlashAttention-3's intra-warpgroup overlap): issue S_j = Q K_j^T and O += P_{j-1} V_{j-1}
    back to back, wait for S_j, run softmax_j while P_{j-1} V_{j-1} is still on the tensor cores, wait
    for it, release slot j-1. With PINGPONG the two consumers take turns issuing (turn n + j), so one's
    softmax runs under the other's wgmmas. Returns (o, p, alpha, m_i, l_i): the last tile's P V is left
    to ``_last_pv``, its slot unreleased."""
    ROWS: gl.constexpr = q_half.type.shape[0]
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, TILE_N, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    zero_s = gl.zeros([ROWS, TILE_N], gl.float32, layout=mma)
    slot = n % STAGES
    mbarrier.wait(ready.index(slot), (n // STAGES) & 1)
    _turn_wait(bars, ME, n, PINGPONG)
    s_tok = warpgroup_mma(q_half, k_bufs.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    _turn_pass(bars, ME, PINGPONG)
    s = warpgroup_mma_wait(0, deps=(s_tok, ))
    p, alpha, m_i, l_i = _softmax_tile(s, m_i, l_i, 0, seq_len, q_pos, full_hi, qk_scale_log2, TILE_N, mma)
    for j in range(1, tile_hi):
        c = n + j
        slot = c % STAGES
        prev = (c - 1) % STAGES
        mbarrier.wait(ready.index(slot), (c // STAGES) & 1)
        _turn_wait(bars, ME, c, PINGPONG)
        s_tok = warpgroup_mma(q_half, k_bufs.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        o = o * alpha[:, None]
        p16 = gl.convert_layout(p.to(q_half.dtype), p_layout)
        acc = warpgroup_mma(p16, v_bufs.index(prev), o, is_async=True)
        _turn_pass(bars, ME, PINGPONG)
        s = warpgroup_mma_wait(1, deps=(s_tok, ))
        p, alpha, m_i, l_i = _softmax_tile(s, m_i, l_i, j, seq_len, q_pos, full_hi, qk_scale_log2, TILE_N, mma)
        o = warpgroup_mma_wait(0, deps=(acc, ))
        mbarrier.arrive(empty.index(prev), count=1)
    return o, p, alpha, m_i, l_i


@gluon.jit
def _last_pv(v_bufs, bars, o, p, alpha, slot, last, seq_len, fixes, TILE_N: gl.constexpr, ME: gl.constexpr):
    """Issues the last tile's O += P V (async: the caller waits) from ring slot ``slot``. Keys past the
    sequence in that tile hold whatever the page holds: P is 0 there, but 0 * NaN is NaN, so their V rows
    are zeroed first, each consumer half of them, then both wait for each other (barrier 2 counts two
    arrivals; ``fixes``: its uses so far). Returns the wgmma and the uses of barrier 2."""
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, TILE_N, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    if (last + 1) * TILE_N > seq_len:
        half = v_bufs.index(slot).slice(ME * (TILE_N // 2), TILE_N // 2)
        v_half = half.load(blocked)
        keys = last * TILE_N + ME * (TILE_N // 2) + gl.arange(0, TILE_N // 2, layout=gl.SliceLayout(1, blocked))
        half.store(gl.where((keys < seq_len)[:, None], v_half, 0.0))
        fence_async_shared()
        mbarrier.arrive(bars.index(2), count=1)
        mbarrier.wait(bars.index(2), fixes & 1)
        fixes += 1
    o = o * alpha[:, None]
    p16 = gl.convert_layout(p.to(v_bufs.dtype), p_layout)
    return warpgroup_mma(p16, v_bufs.index(slot), o, is_async=True), fixes


@gluon.jit
def _epilogue(q_half, o, l_i, bad, out_ptr, stride_o_tok, stride_o_head, block_row, row_end, kv_head,
              ME: gl.constexpr, QPKV: gl.constexpr, BLOCK_Q: gl.constexpr):
    """A consumer's output rows: O / l (NaN rows where ``bad``, impossible metadata or a bad page id; l is 0
    where no key was read), staged through its Q buffer (its last QK^T is done) so that the stores are
    16-byte vectors."""
    ROWS: gl.constexpr = q_half.type.shape[0]
    HEAD_DIM: gl.constexpr = q_half.type.shape[1]
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    l_i = gl.where(bad, float("nan"), l_i)
    o = o / gl.where(l_i != 0.0, l_i, 1.0)[:, None]
    q_half.store(o.to(q_half.dtype))
    o_offs, o_mask = _row_offsets(block_row, row_end, kv_head, stride_o_tok, stride_o_head, ME * ROWS, ROWS, HEAD_DIM,
                                  QPKV, BLOCK_Q, blocked)
    gl.store(out_ptr + o_offs, q_half.load(blocked), mask=o_mask)


# Fields of a work item's record (``_scheduler`` writes it in ``meta``; every thread reads all 16).
F_KV_HEAD = gl.constexpr(0)
F_SEQ_LEN = gl.constexpr(1)
F_BAD = gl.constexpr(2)
F_ROW_END = gl.constexpr(3)
F_BLOCK_ROW = gl.constexpr(4)
F_POS0 = gl.constexpr(5)
F_TILE_HI = gl.constexpr(6)
F_FULL_HI = gl.constexpr(7)
F_SEQ = gl.constexpr(8)
F_P_HI = gl.constexpr(9)
F_VALID = gl.constexpr(10)


@gluon.jit
def _field(rec, i: gl.constexpr):
    """Field ``i`` of a work item's record (held whole by every thread: no shuffle)."""
    idx = gl.arange(0, 16, layout=rec.type.layout)
    return gl.sum(gl.where(idx == i, rec, 0), 0)


@gluon.jit
def _claim(sched_ptr, lane):
    """Claims the next work item: one atomic add on the launch's counter (lane 0 of the warp). Returns the
    lanes' old values: read them (``_claimed``) only when the item is needed, so the round trip runs under
    other work."""
    return gl.atomic_add(sched_ptr + lane * 0, lane * 0 + 1, mask=lane == 0)


@gluon.jit
def _claimed(old, lane):
    """The work item a ``_claim`` got: the counter's old value (lane 0's) after the first ``programs``."""
    return gl.sum(gl.where(lane == 0, old, 0), 0) + gl.num_programs(0)


@gluon.jit
def _record(item, num_items, num_slots, num_kv_heads, cu_seqlens_q_ptr, seq_lens_ptr, num_seqs, num_tokens,
            max_kv_len, rec_idx, BLOCK_Q: gl.constexpr, TILE_N: gl.constexpr, PAGE_SIZE: gl.constexpr):
    """Work item ``item``'s record (``F_*`` fields; all zero past the last item: F_VALID 0, no more work).
    Item i is Q slot ``num_slots - 1 - i // num_kv_heads`` of KV head ``i % num_kv_heads``: the heads of a
    Q block side by side, longest Q blocks first (KV-head-major order measured slower, bench/NOTES.md).
    The Q block owns rows from ``block_row`` when ``block_row < row_end``; it reads key tiles [0, tile_hi)
    (none when its metadata is ``bad``), of which the first ``full_hi`` are visible to every row whole,
    over the sequence's first ``p_hi`` pages."""
    q_slot = num_slots - 1 - item // num_kv_heads
    kv_head = item % num_kv_heads
    seq = _find_seq(cu_seqlens_q_ptr, num_seqs, q_slot, BLOCK_Q, 64, 1)
    seq, q_start, q_end, seq_len, bad, row_start, row_end, block_row = _q_block_of(
        seq, cu_seqlens_q_ptr, seq_lens_ptr, num_seqs, num_tokens, max_kv_len, q_slot, BLOCK_Q, False)
    context_len = seq_len - (q_end - q_start)
    first_pos = context_len + (block_row - q_start)
    last_pos = gl.minimum(first_pos + BLOCK_Q - 1, seq_len - 1)
    tile_hi = gl.where(bad | (block_row >= row_end), 0, gl.cdiv(last_pos + 1, TILE_N))
    full_hi = gl.minimum((first_pos + 1) // TILE_N, tile_hi)
    p_hi = gl.cdiv(gl.minimum(tile_hi * TILE_N, seq_len), PAGE_SIZE)
    rec = (gl.where(rec_idx == F_KV_HEAD, kv_head, 0) + gl.where(rec_idx == F_SEQ_LEN, seq_len, 0)
           + gl.where(rec_idx == F_BAD, bad.to(gl.int32), 0) + gl.where(rec_idx == F_ROW_END, row_end, 0)
           + gl.where(rec_idx == F_BLOCK_ROW, block_row, 0) + gl.where(rec_idx == F_POS0, first_pos, 0)
           + gl.where(rec_idx == F_TILE_HI, tile_hi, 0) + gl.where(rec_idx == F_FULL_HI, full_hi, 0)
           + gl.where(rec_idx == F_SEQ, seq, 0) + gl.where(rec_idx == F_P_HI, p_hi, 0)
           + gl.where(rec_idx == F_VALID, 1, 0))
    return gl.where(item < num_items, rec, 0)


@gluon.jit
def _fetch_q(r, meta, meta_ready, q_ptr, stride_q_tok, stride_q_head, ROW0: gl.constexpr, ROWS: gl.constexpr,
             HEAD_DIM: gl.constexpr, QPKV: gl.constexpr, BLOCK_Q: gl.constexpr, blocked: gl.constexpr):
    """A consumer's start on round ``r``: waits for the round's record and loads this consumer's Q rows
    into registers (zeros where the Q block owns no rows). Returns them and whether the round has a work
    item (the scheduler ends a program's rounds with an invalid record)."""
    rec_l: gl.constexpr = gl.BlockedLayout([16], [32], [4], [0])
    mbarrier.wait(meta_ready.index(r % 2), (r // 2) & 1)
    rec = meta.index(r % 2).load(rec_l)
    q_offs, q_mask = _row_offsets(_field(rec, F_BLOCK_ROW), _field(rec, F_ROW_END), _field(rec, F_KV_HEAD),
                                  stride_q_tok, stride_q_head, ROW0, ROWS, HEAD_DIM, QPKV, BLOCK_Q, blocked)
    q = gl.load(q_ptr + q_offs, mask=q_mask & (_field(rec, F_VALID) != 0), other=0.0)
    return q, _field(rec, F_VALID)


@gluon.jit
def _consumer(q_half, k_bufs, v_bufs, ready, empty, bars, flags, meta, meta_ready, meta_empty, q_ptr, stride_q_tok,
              stride_q_head, out_ptr, stride_o_tok, stride_o_head, qk_scale_log2,
              QPKV: gl.constexpr, BLOCK_Q: gl.constexpr, TILE_N: gl.constexpr, STAGES: gl.constexpr,
              PINGPONG: gl.constexpr, ME: gl.constexpr):
    """``_persistent_kernel``'s consumer: one warpgroup, rows [64 * ME, 64 * ME + 64) of each Q block the
    program is handed (``_key_loop``, ``_last_pv``). Between work items the ring position, the turns and
    barrier 2's phase carry over, and the next item's Q rows are loaded while this item's last P V runs.
    The record stays in ``meta`` until the epilogue (read where needed, not held in registers across the
    key loop)."""
    ROWS: gl.constexpr = 64
    HEAD_DIM: gl.constexpr = q_half.type.shape[1]
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, TILE_N, 16])
    rows_l: gl.constexpr = gl.SliceLayout(1, mma)
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rec_l: gl.constexpr = gl.BlockedLayout([16], [32], [4], [0])

    n = gl.to_tensor(0)  # key tiles consumed so far: the ring position and the turn count
    fixes = gl.to_tensor(0)  # uses of barrier 2 so far (its phase)
    r = gl.to_tensor(0)  # rounds so far (the record buffer and its phase)
    q_regs, valid = _fetch_q(r, meta, meta_ready, q_ptr, stride_q_tok, stride_q_head, ME * ROWS, ROWS, HEAD_DIM, QPKV,
                             BLOCK_Q, blocked)
    while valid != 0:
        rec = meta.index(r % 2).load(rec_l)
        seq_len = _field(rec, F_SEQ_LEN)
        tile_hi = _field(rec, F_TILE_HI)
        if _field(rec, F_BLOCK_ROW) < _field(rec, F_ROW_END):  # the Q block owns rows
            q_half.store(q_regs)
            fence_async_shared()
            offs_m = ME * ROWS + gl.arange(0, ROWS, layout=rows_l)
            q_pos = _field(rec, F_POS0) + offs_m // QPKV  # each row's position in its sequence
            full_hi = _field(rec, F_FULL_HI)
            m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=rows_l)
            l_i = gl.zeros([ROWS], gl.float32, layout=rows_l)
            o = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=mma)
            verdict = gl.to_tensor(0)
            if tile_hi > 0:
                o, p, alpha, m_i, l_i = _key_loop(q_half, k_bufs, v_bufs, ready, empty, bars, n, tile_hi, full_hi,
                                                  seq_len, q_pos, qk_scale_log2, o, m_i, l_i, TILE_N, STAGES,
                                                  PINGPONG, ME)
                slot = (n + tile_hi - 1) % STAGES
                acc, fixes = _last_pv(v_bufs, bars, o, p, alpha, slot, tile_hi - 1, seq_len, fixes, TILE_N, ME)
                q_regs, valid = _fetch_q(r + 1, meta, meta_ready, q_ptr, stride_q_tok, stride_q_head, ME * ROWS, ROWS,
                                         HEAD_DIM, QPKV, BLOCK_Q, blocked)
                o = warpgroup_mma_wait(0, deps=(acc, ))
                # The K loader's verdict on every page id of the Q block, stored with the last tile (the
                # slot cannot be refilled before this consumer releases it).
                verdict = gl.max(flags.index(slot).load(gl.BlockedLayout([1], [32], [4], [0])), 0)
                mbarrier.arrive(empty.index(slot), count=1)
                n += tile_hi
            else:
                q_regs, valid = _fetch_q(r + 1, meta, meta_ready, q_ptr, stride_q_tok, stride_q_head, ME * ROWS, ROWS,
                                         HEAD_DIM, QPKV, BLOCK_Q, blocked)

            rec = meta.index(r % 2).load(rec_l)
            _epilogue(q_half, o, l_i, (_field(rec, F_BAD) != 0) | (verdict != 0), out_ptr, stride_o_tok,
                      stride_o_head, _field(rec, F_BLOCK_ROW), _field(rec, F_ROW_END), _field(rec, F_KV_HEAD), ME,
                      QPKV, BLOCK_Q)
        else:
            q_regs, valid = _fetch_q(r + 1, meta, meta_ready, q_ptr, stride_q_tok, stride_q_head, ME * ROWS, ROWS,
                                     HEAD_DIM, QPKV, BLOCK_Q, blocked)
        mbarrier.arrive(meta_empty.index(r % 2), count=1)
        r += 1


@gluon.jit
def _scheduler(k_bufs, ready, empty, flags, meta, meta_ready, meta_empty, k_desc, block_table_ptr, stride_bt_seq,
               cu_seqlens_q_ptr, seq_lens_ptr, sched_ptr, num_seqs, num_tokens, max_kv_len, num_blocks, num_slots,
               num_kv_heads, num_items, HEAD_DIM: gl.constexpr, PAGE_SIZE: gl.constexpr, TILE_N: gl.constexpr,
               STAGES: gl.constexpr, BLOCK_Q: gl.constexpr):
    """One warp, the K loader and the program's scheduler. It takes work items (its program's id first,
    then the launch's counter: items run longest first and a program takes the next one when it is free),
    works out each item's record, hands it to the consumers and the V loader (``meta``: two buffers,
    ``meta_ready`` / ``meta_empty``), then loads the item's K tiles into the ring (each slot refilled once
    both consumers released it; a fresh mbarrier passes the first round's wait), checking every page id
    it reads (its verdict so far goes with each slot's flag). A last, invalid record ends the others'
    rounds. The ring position carries over, so the next item's first tiles load during this one's last."""
    rec_l: gl.constexpr = gl.BlockedLayout([16], [32], [1], [0])
    lane = gl.arange(0, 32, layout=gl.BlockedLayout([1], [32], [1], [0]))
    rec_idx = gl.arange(0, 16, layout=rec_l)
    t = gl.to_tensor(0)  # key tiles loaded so far: the ring position
    r = gl.to_tensor(0)  # rounds so far
    old = _claim(sched_ptr, lane)
    rec = _record(gl.program_id(0), num_items, num_slots, num_kv_heads, cu_seqlens_q_ptr, seq_lens_ptr, num_seqs,
                  num_tokens, max_kv_len, rec_idx, BLOCK_Q, TILE_N, PAGE_SIZE)
    valid = gl.to_tensor(1)
    while valid != 0:
        mbarrier.wait(meta_empty.index(r % 2), ((r // 2) & 1) ^ 1)
        meta.index(r % 2).store(rec)
        mbarrier.arrive(meta_ready.index(r % 2), count=1)
        valid = _field(rec, F_VALID)
        # The next item's record, worked out before this one's tiles are issued: the ring is then still
        # full of the previous item's tiles, and the V loader already has this item's record.
        item = _claimed(old, lane)
        old = _claim(sched_ptr, lane)
        nxt = _record(item, num_items, num_slots, num_kv_heads, cu_seqlens_q_ptr, seq_lens_ptr, num_seqs, num_tokens,
                      max_kv_len, rec_idx, BLOCK_Q, TILE_N, PAGE_SIZE)
        tile_hi = _field(rec, F_TILE_HI)
        p_hi = _field(rec, F_P_HI)
        kv_col = _field(rec, F_KV_HEAD) * HEAD_DIM
        bt_row_ptr = block_table_ptr + _field(rec, F_SEQ).to(gl.int64) * stride_bt_seq
        page_bad = gl.to_tensor(0)
        for j in range(tile_hi):
            slot = t % STAGES
            mbarrier.wait(empty.index(slot), ((t // STAGES) & 1) ^ 1)
            page_bad = _issue_tile(k_desc, bt_row_ptr, j, p_hi, kv_col, num_blocks, k_bufs.index(slot),
                                   ready.index(slot), flags.index(slot), page_bad, PAGE_SIZE, TILE_N, True)
            t += 1
        rec = nxt
        r += 1


@gluon.jit
def _v_loader(v_bufs, ready, empty, flags, meta, meta_ready, meta_empty, v_desc, block_table_ptr, stride_bt_seq,
              num_blocks, HEAD_DIM: gl.constexpr, PAGE_SIZE: gl.constexpr, TILE_N: gl.constexpr,
              STAGES: gl.constexpr):
    """One warp: the V tiles of each item the scheduler hands out (its record, released as soon as read),
    into the same ring slots as their K tiles. A second loader because one warp issuing every copy (32 a
    tile with 16-key pages) fell behind the consumers."""
    rec_l: gl.constexpr = gl.BlockedLayout([16], [32], [1], [0])
    t = gl.to_tensor(0)
    r = gl.to_tensor(0)
    valid = gl.to_tensor(1)
    while valid != 0:
        mbarrier.wait(meta_ready.index(r % 2), (r // 2) & 1)
        rec = meta.index(r % 2).load(rec_l)
        mbarrier.arrive(meta_empty.index(r % 2), count=1)
        valid = _field(rec, F_VALID)
        tile_hi = _field(rec, F_TILE_HI)
        p_hi = _field(rec, F_P_HI)
        bt_row_ptr = block_table_ptr + _field(rec, F_SEQ).to(gl.int64) * stride_bt_seq
        kv_col = _field(rec, F_KV_HEAD) * HEAD_DIM
        for j in range(tile_hi):
            slot = t % STAGES
            mbarrier.wait(empty.index(slot), ((t // STAGES) & 1) ^ 1)
            _issue_tile(v_desc, bt_row_ptr, j, p_hi, kv_col, num_blocks, v_bufs.index(slot), ready.index(slot),
                        flags.index(slot), gl.to_tensor(0), PAGE_SIZE, TILE_N, False)
            t += 1
        r += 1


@gluon.jit(do_not_specialize=["num_seqs", "num_tokens", "num_blocks", "max_kv_len", "num_slots", "num_items"])
def _persistent_kernel(
    # pointers and TMA descriptors (K and V: [num_blocks * page_size, num_kv_heads * head_dim])
    out_ptr, q_ptr, k_desc, v_desc,
    block_table_ptr, seq_lens_ptr, cu_seqlens_q_ptr, sched_ptr,
    # strides
    stride_q_tok, stride_q_head, stride_o_tok, stride_o_head, stride_bt_seq,
    # sizes and scalars
    num_seqs, num_tokens, num_blocks, max_kv_len, num_slots, num_kv_heads, num_items, qk_scale_log2,
    # meta-parameters
    QPKV: gl.constexpr, HEAD_DIM: gl.constexpr, PAGE_SIZE: gl.constexpr, BLOCK_M: gl.constexpr,
    BLOCK_Q: gl.constexpr, TILE_N: gl.constexpr, STAGES: gl.constexpr, Q_LAYOUT: gl.constexpr,
    PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr, num_warps: gl.constexpr,
):
    """Grid: (programs,) (at most one an SM), over the ``num_items = num_slots * num_kv_heads`` work items
    (``_record``): program p takes item p, then what the counter at ``sched_ptr`` (zero at launch)
    hands out. num_warps=4: this warpgroup is consumer 0; the workers are consumer 1 (4 warps), the
    scheduler-and-K-loader and the V loader (1 warp each)."""
    # Q as two halves of 64 rows, one per consumer (each loads its own).
    q_bufs = gl.allocate_shared_memory(q_ptr.dtype.element_ty, [2, BLOCK_M // 2, HEAD_DIM], Q_LAYOUT)
    # The K/V ring, its barriers and the K loader's page-id verdict a slot.
    k_bufs = gl.allocate_shared_memory(k_desc.dtype, [STAGES, TILE_N, HEAD_DIM], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(v_desc.dtype, [STAGES, TILE_N, HEAD_DIM], v_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    flags = gl.allocate_shared_memory(gl.int32, [STAGES, 32], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    # The work items' records, from the scheduler to the consumers and the V loader (two buffers).
    meta = gl.allocate_shared_memory(gl.int32, [2, 16], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    meta_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    meta_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    # bars: 0 and 1 the consumers' turns (ping-pong), 2 the last tile's V fix (both consumers arrive).
    bars = gl.allocate_shared_memory(gl.int64, [3, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=2)
        mbarrier.init(empty.index(i), count=2)
    for i in gl.static_range(2):
        mbarrier.init(meta_ready.index(i), count=1)
        mbarrier.init(meta_empty.index(i), count=3)
    for i in gl.static_range(3):
        mbarrier.init(bars.index(i), count=2 if i == 2 else 1)
    fence_async_shared()

    gl.warp_specialize([
        (_consumer, (q_bufs.index(0), k_bufs, v_bufs, ready, empty, bars, flags, meta, meta_ready, meta_empty, q_ptr,
                     stride_q_tok, stride_q_head, out_ptr, stride_o_tok, stride_o_head, qk_scale_log2, QPKV, BLOCK_Q,
                     TILE_N, STAGES, PINGPONG, 0)),
        (_consumer, (q_bufs.index(1), k_bufs, v_bufs, ready, empty, bars, flags, meta, meta_ready, meta_empty, q_ptr,
                     stride_q_tok, stride_q_head, out_ptr, stride_o_tok, stride_o_head, qk_scale_log2, QPKV, BLOCK_Q,
                     TILE_N, STAGES, PINGPONG, 1)),
        (_scheduler, (k_bufs, ready, empty, flags, meta, meta_ready, meta_empty, k_desc, block_table_ptr,
                      stride_bt_seq, cu_seqlens_q_ptr, seq_lens_ptr, sched_ptr, num_seqs, num_tokens, max_kv_len,
                      num_blocks, num_slots, num_kv_heads, num_items, HEAD_DIM, PAGE_SIZE, TILE_N, STAGES, BLOCK_Q)),
        (_v_loader, (v_bufs, ready, empty, flags, meta, meta_ready, meta_empty, v_desc, block_table_ptr,
                     stride_bt_seq, num_blocks, HEAD_DIM, PAGE_SIZE, TILE_N, STAGES)),
    ], [4, 1, 1], [CONSUMER_REGS, LOADER_REGS, LOADER_REGS])


@gluon.jit
def _grid_consumer(q_half, k_bufs, v_bufs, ready, empty, bars, flag, q_ptr, stride_q_tok, stride_q_head,
                   out_ptr, stride_o_tok, stride_o_head, tile_hi, full_hi, seq_len, context_len, q_start, block_row,
                   row_end, kv_head, bad, qk_scale_log2,
                   QPKV: gl.constexpr, BLOCK_Q: gl.constexpr, TILE_N: gl.constexpr, STAGES: gl.constexpr,
                   PINGPONG: gl.constexpr, ME: gl.constexpr):
    """``_grid_kernel``'s consumer: one warpgroup, rows [64 * ME, 64 * ME + 64) of the Q block
    (``_key_loop``, ``_last_pv``)."""
    ROWS: gl.constexpr = 64
    HEAD_DIM: gl.constexpr = q_half.type.shape[1]
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, TILE_N, 16])
    rows_l: gl.constexpr = gl.SliceLayout(1, mma)

    # This warpgroup's Q rows -> shared memory (while the loader's first copies are in flight).
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    q_offs, q_mask = _row_offsets(block_row, row_end, kv_head, stride_q_tok, stride_q_head, ME * ROWS, ROWS, HEAD_DIM,
                                  QPKV, BLOCK_Q, blocked)
    q_half.store(gl.load(q_ptr + q_offs, mask=q_mask, other=0.0))
    fence_async_shared()

    offs_m = ME * ROWS + gl.arange(0, ROWS, layout=rows_l)
    q_pos = context_len + (block_row + offs_m // QPKV - q_start)  # each row's position in its sequence
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=rows_l)
    l_i = gl.zeros([ROWS], gl.float32, layout=rows_l)
    o = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=mma)

    if tile_hi > 0:
        o, p, alpha, m_i, l_i = _key_loop(q_half, k_bufs, v_bufs, ready, empty, bars, 0, tile_hi, full_hi, seq_len,
                                          q_pos, qk_scale_log2, o, m_i, l_i, TILE_N, STAGES, PINGPONG, ME)
        acc, fixes = _last_pv(v_bufs, bars, o, p, alpha, (tile_hi - 1) % STAGES, tile_hi - 1, seq_len,
                              gl.to_tensor(0), TILE_N, ME)
        o = warpgroup_mma_wait(0, deps=(acc, ))

    mbarrier.wait(bars.index(3), 0)  # the loader's verdict on the page ids it read
    bad = bad | (gl.max(flag.load(gl.BlockedLayout([1], [32], [4], [0])), 0) != 0)
    _epilogue(q_half, o, l_i, bad, out_ptr, stride_o_tok, stride_o_head, block_row, row_end, kv_head, ME, QPKV,
              BLOCK_Q)


@gluon.jit
def _grid_loader(q_half, k_bufs, v_bufs, ready, empty, bars, flag, k_desc, v_desc, bt_row_ptr, tile_hi, p_hi, kv_col,
                 num_blocks, consumer_args, PAGE_SIZE: gl.constexpr, TILE_N: gl.constexpr, STAGES: gl.constexpr,
                 QPKV: gl.constexpr, BLOCK_Q: gl.constexpr, PINGPONG: gl.constexpr, WHICH: gl.constexpr):
    """``_grid_kernel``'s loaders, one warp each: TMA copies of the K (WHICH=0) or V (WHICH=1) tiles into
    the ring, each slot refilled once both consumers released it (``empty`` counts two arrivals; a fresh
    mbarrier passes the first round's wait; ``ready`` counts both loaders). Two loaders because one warp
    issuing every copy (32 a tile with 16-key pages) fell behind the consumers. The K loader also checks
    every page id it reads and tells the consumers (``flag``, then barrier 3) whether one was bad."""
    bad = gl.to_tensor(0)
    for t in range(tile_hi):
        slot = t % STAGES
        mbarrier.wait(empty.index(slot), ((t // STAGES) & 1) ^ 1)
        if WHICH == 0:
            bad = _issue_tile(k_desc, bt_row_ptr, t, p_hi, kv_col, num_blocks, k_bufs.index(slot), ready.index(slot),
                              flag, bad, PAGE_SIZE, TILE_N, False)
        else:
            bad = _issue_tile(v_desc, bt_row_ptr, t, p_hi, kv_col, num_blocks, v_bufs.index(slot), ready.index(slot),
                              flag, bad, PAGE_SIZE, TILE_N, False)
    if WHICH == 0:
        # Page ids outside the cache make the whole Q block NaN: the consumers read the verdict before
        # their epilogue (a generic store, published by the mbarrier arrive).
        flag.store(gl.full([32], 0, gl.int32, layout=gl.BlockedLayout([1], [32], [1], [0])) + bad)
        mbarrier.arrive(bars.index(3), count=1)


@gluon.jit
def _grid_consumer1(q_half, k_bufs, v_bufs, ready, empty, bars, flag, k_desc, v_desc, bt_row_ptr, tile_hi, p_hi, kv_col,
                    num_blocks, consumer_args, PAGE_SIZE: gl.constexpr, TILE_N: gl.constexpr, STAGES: gl.constexpr,
                    QPKV: gl.constexpr, BLOCK_Q: gl.constexpr, PINGPONG: gl.constexpr, WHICH: gl.constexpr):
    """``_grid_kernel``'s second consumer (a worker partition: same signature as the loader)."""
    (q_ptr, stride_q_tok, stride_q_head, out_ptr, stride_o_tok, stride_o_head, full_hi, seq_len, context_len, q_start,
     block_row, row_end, kv_head, bad, qk_scale_log2) = consumer_args
    _grid_consumer(q_half, k_bufs, v_bufs, ready, empty, bars, flag, q_ptr, stride_q_tok, stride_q_head, out_ptr,
              stride_o_tok, stride_o_head, tile_hi,
              full_hi, seq_len, context_len, q_start, block_row, row_end, kv_head, bad, qk_scale_log2,
              QPKV, BLOCK_Q, TILE_N, STAGES, PINGPONG, 1)


@gluon.jit(do_not_specialize=["num_seqs", "num_tokens", "num_blocks", "max_kv_len"])
def _grid_kernel(
    # pointers and TMA descriptors (K and V: [num_blocks * page_size, num_kv_heads * head_dim])
    out_ptr, q_ptr, k_desc, v_desc,
    block_table_ptr, seq_lens_ptr, cu_seqlens_q_ptr,
    # strides
    stride_q_tok, stride_q_head, stride_o_tok, stride_o_head, stride_bt_seq,
    # sizes and scalars
    num_seqs, num_tokens, num_blocks, max_kv_len, qk_scale_log2,
    # meta-parameters
    QPKV: gl.constexpr, HEAD_DIM: gl.constexpr, PAGE_SIZE: gl.constexpr, BLOCK_M: gl.constexpr,
    BLOCK_Q: gl.constexpr, TILE_N: gl.constexpr, STAGES: gl.constexpr, Q_LAYOUT: gl.constexpr,
    PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr, LOADER_REGS: gl.constexpr, num_warps: gl.constexpr,
):
    """One program a Q block (a work item), without ``_persistent_kernel``'s scheduling. Grid:
    (num_tokens // BLOCK_Q + num_seqs, num_kv_heads), longest causal Q blocks first. num_warps=4:
    this warpgroup is consumer 0; the workers are consumer 1 (4 warps) and the loader (1 warp)."""
    q_slot = gl.num_programs(0) - 1 - gl.program_id(0)
    kv_head = gl.program_id(1)
    # Impossible metadata gives `bad`, as in kernels._paged_attention_kernel.
    seq = _find_seq(cu_seqlens_q_ptr, num_seqs, q_slot, BLOCK_Q, 512, num_warps)
    seq, q_start, q_end, seq_len, bad, row_start, row_end, block_row = _q_block_of(
        seq, cu_seqlens_q_ptr, seq_lens_ptr, num_seqs, num_tokens, max_kv_len, q_slot, BLOCK_Q, False)
    if block_row < row_end:
        context_len = seq_len - (q_end - q_start)
        first_pos = context_len + (block_row - q_start)
        last_pos = gl.minimum(first_pos + BLOCK_Q - 1, seq_len - 1)
        tile_hi = gl.where(bad, 0, gl.cdiv(last_pos + 1, TILE_N))
        full_hi = gl.minimum((first_pos + 1) // TILE_N, tile_hi)  # tiles every row sees whole
        bt_row_ptr = block_table_ptr + seq.to(gl.int64) * stride_bt_seq
        p_hi = gl.cdiv(gl.minimum(tile_hi * TILE_N, seq_len), PAGE_SIZE)

        # Q as two halves of 64 rows, one per consumer (each loads its own).
        q_bufs = gl.allocate_shared_memory(q_ptr.dtype.element_ty, [2, BLOCK_M // 2, HEAD_DIM], Q_LAYOUT)

        # The K/V ring and its barriers.
        k_bufs = gl.allocate_shared_memory(k_desc.dtype, [STAGES, TILE_N, HEAD_DIM], k_desc.layout)
        v_bufs = gl.allocate_shared_memory(v_desc.dtype, [STAGES, TILE_N, HEAD_DIM], v_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        # bars: 0 and 1 the consumers' turns (ping-pong), 2 the last tile's V fix (both consumers arrive),
        # 3 the loader's page-id verdict in `flag`.
        bars = gl.allocate_shared_memory(gl.int64, [4, 1], mbarrier.MBarrierLayout())
        flag = gl.allocate_shared_memory(gl.int32, [32], gl.SwizzledSharedLayout(1, 1, 1, [0]))
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=2)
            mbarrier.init(empty.index(i), count=2)
        for i in gl.static_range(4):
            mbarrier.init(bars.index(i), count=2 if i == 2 else 1)
        fence_async_shared()

        kv_col = kv_head * HEAD_DIM
        consumer_args = (q_ptr, stride_q_tok, stride_q_head, out_ptr, stride_o_tok, stride_o_head, full_hi, seq_len,
                         context_len, q_start, block_row, row_end, kv_head, bad, qk_scale_log2)
        gl.warp_specialize([
            (_grid_consumer, (q_bufs.index(0), k_bufs, v_bufs, ready, empty, bars, flag, q_ptr, stride_q_tok,
                              stride_q_head, out_ptr, stride_o_tok, stride_o_head, tile_hi, full_hi, seq_len,
                              context_len, q_start, block_row, row_end, kv_head, bad, qk_scale_log2, QPKV, BLOCK_Q,
                              TILE_N, STAGES, PINGPONG, 0)),
            (_grid_consumer1, (q_bufs.index(1), k_bufs, v_bufs, ready, empty, bars, flag, k_desc, v_desc, bt_row_ptr,
                          tile_hi, p_hi, kv_col, num_blocks, consumer_args, PAGE_SIZE, TILE_N, STAGES, QPKV, BLOCK_Q,
                          PINGPONG, 0)),
            (_grid_loader, (q_bufs.index(1), k_bufs, v_bufs, ready, empty, bars, flag, k_desc, v_desc, bt_row_ptr,
                       tile_hi, p_hi, kv_col, num_blocks, consumer_args, PAGE_SIZE, TILE_N, STAGES, QPKV, BLOCK_Q,
                       PINGPONG, 0)),
            (_grid_loader, (q_bufs.index(1), k_bufs, v_bufs, ready, empty, bars, flag, k_desc, v_desc, bt_row_ptr,
                       tile_hi, p_hi, kv_col, num_blocks, consumer_args, PAGE_SIZE, TILE_N, STAGES, QPKV, BLOCK_Q,
                       PINGPONG, 1)),
        ], [4, 1, 1], [CONSUMER_REGS, LOADER_REGS, LOADER_REGS])


@functools.lru_cache(maxsize=None)
def _capability(index):
    return torch.cuda.get_device_capability(index)


def supported(q, k_cache, *, causal=True, sliding_window=None, softcap=None, alibi_slopes=None, sinks=None,
              k_scale=None, v_scale=None, q_start_pos=None, lse=None, v_cache=None) -> str | None:
    """None when this kernel can serve the call, else why not (one phrase). ``v_cache`` (when given) must be
    laid out as ``k_cache`` (its shape and dtype are the caller's to check)."""
    if q.dtype not in _GL_DTYPES or k_cache.dtype != q.dtype:
        return "needs fp16/bf16 q with a cache of the same dtype"
    if q.shape[-1] != HEAD_DIM:
        return f"needs head_dim {HEAD_DIM}"
    if not causal or any(x is not None for x in (sliding_window, softcap, alibi_slopes, sinks, k_scale, v_scale,
                                                  q_start_pos, lse)):
        return "serves plain causal attention only"
    num_blocks, page, kv_heads, dim = k_cache.shape
    if k_cache.stride() != (page * kv_heads * dim, kv_heads * dim, dim, 1) or k_cache.data_ptr() % 16:
        return "needs a contiguous, 16-byte aligned cache"
    if v_cache is not None and (v_cache.stride() != k_cache.stride() or v_cache.data_ptr() % 16):
        return "needs v_cache laid out like k_cache (contiguous, 16-byte aligned)"
    if num_blocks == 0:
        return "needs a cache with pages"
    if TILE_N % page and page % TILE_N:  # a key tile is whole pages, or a page whole key tiles
        return f"needs pages of 16, 32, 64 or a multiple of {TILE_N} keys (got {page})"
    if (q.shape[1] // kv_heads) > BLOCK_M:
        return f"needs at most {BLOCK_M} query heads per KV head"
    if not (q.is_cuda and torch.version.hip is None and _capability(q.device.index)[0] >= 9):
        return "needs an NVIDIA Hopper (sm_90+) GPU"
    return None


def auto_selects(q, k_cache, *, num_seqs: int, max_seqlen_q: int, **features) -> bool:
    """Whether ``paged_attention`` without a config runs this kernel: prefill-heavy batches (at least
    ``MIN_TOKENS_PER_SEQ`` query tokens per sequence on average, one of at least 128) that ``supported``
    accepts, unless ``TRITIUM_GLUON=0``."""
    return (AUTO and max_seqlen_q >= 128 and q.shape[0] >= MIN_TOKENS_PER_SEQ * num_seqs
            and supported(q, k_cache, **features) is None)


def descriptor(cache: torch.Tensor) -> TensorDescriptor:
    """The cache [num_blocks, page, kv_heads, head_dim] as a 2-D TMA descriptor [num_blocks * page,
    kv_heads * head_dim] with boxes of one page (at most TILE_N keys) x head_dim."""
    num_blocks, page, kv_heads, dim = cache.shape
    box = [min(page, TILE_N), dim]
    layout = gl.NVMMASharedLayout.get_default_for(box, _GL_DTYPES[cache.dtype])
    flat = cache.view(num_blocks * page, kv_heads * dim)
    return TensorDescriptor(flat, list(flat.shape), list(flat.stride()), box, layout)


@functools.lru_cache(maxsize=None)
def _sm_count(index):
    return torch.cuda.get_device_properties(index).multi_processor_count


_COUNTERS: dict = {}


def _counter(device: torch.device) -> torch.Tensor:
    """The work-item counter of launches on the current stream of ``device`` (one int32, created once per
    stream and zeroed before each launch on it: launches on one stream run in order, so they can share
    it; another stream gets its own)."""
    key = (device.index, torch.cuda.current_stream(device).cuda_stream)
    counter = _COUNTERS.get(key)
    if counter is None:
        counter = _COUNTERS[key] = torch.zeros(1, dtype=torch.int32, device=device)
    return counter


def persistent_by_default(max_kv_len: int) -> bool:
    """Whether ``launch`` runs ``_persistent_kernel`` (else ``_grid_kernel``) over sequences of at most
    ``max_kv_len`` keys: at most ``PERSISTENT_MAX_KEYS`` (for longer ones the grid, whose programs take the
    KV heads one after another, keeps each head's K/V in L2)."""
    return max_kv_len <= PERSISTENT_MAX_KEYS


def launch(out, q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, *, scale: float,
           max_kv_len: int, pingpong: bool | None = None, persistent: bool | None = None,
           programs: int | None = None) -> None:
    """One launch over the batch (callers check ``supported`` for q and k_cache first; v_cache has
    k_cache's shape and dtype, which paged_attention checks). ``persistent``: ``_persistent_kernel``
    (default: ``persistent_by_default``) or ``_grid_kernel``; ``programs``: how many
    programs the persistent kernel runs (default one an SM)."""
    if v_cache.stride() != k_cache.stride() or v_cache.data_ptr() % 16:
        raise ValueError("config.kernel='gluon' (the Hopper prefill kernel) needs v_cache laid out like k_cache")
    num_tokens, num_q_heads, head_dim = q.shape
    num_blocks, page, num_kv_heads, _ = k_cache.shape
    group = num_q_heads // num_kv_heads
    block_q = max(1, BLOCK_M // group)
    q_layout = gl.NVMMASharedLayout.get_default_for([BLOCK_M // 2, HEAD_DIM], _GL_DTYPES[q.dtype])
    num_slots = num_tokens // block_q + seq_lens.shape[0]
    common = dict(QPKV=group, HEAD_DIM=HEAD_DIM, PAGE_SIZE=page, BLOCK_M=BLOCK_M, BLOCK_Q=block_q, TILE_N=TILE_N,
                  STAGES=STAGES, Q_LAYOUT=q_layout, PINGPONG=PINGPONG if pingpong is None else pingpong,
                  CONSUMER_REGS=CONSUMER_REGS, LOADER_REGS=LOADER_REGS, num_warps=NUM_WARPS, maxnreg=MAXNREG)
    strides = (q.stride(0), q.stride(1), out.stride(0), out.stride(1), block_table.stride(0))
    if not (persistent_by_default(max_kv_len) if persistent is None else persistent):
        _grid_kernel[(num_slots, num_kv_heads)](
            out, q, descriptor(k_cache), descriptor(v_cache), block_table, seq_lens, cu_seqlens_q, *strides,
            seq_lens.shape[0], num_tokens, num_blocks, max_kv_len, scale * 1.4426950408889634, **common)
        return
    num_items = num_slots * num_kv_heads
    device = q.device if q.device.index is not None else torch.device("cuda", torch.cuda.current_device())
    if programs is None:
        programs = _sm_count(device.index)
    counter = _counter(device)
    counter.zero_()
    _persistent_kernel[(max(1, min(programs, num_items)), )](
        out, q, descriptor(k_cache), descriptor(v_cache), block_table, seq_lens, cu_seqlens_q, counter, *strides,
        seq_lens.shape[0], num_tokens, num_blocks, max_kv_len, num_slots, num_kv_heads, num_items,
        scale * 1.4426950408889634, **common)
