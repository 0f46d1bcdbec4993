"""Distributed flash decode: each rank holds a contiguous part of every sequence's KV cache.

    out = distributed_paged_decode(q, k_cache, v_cache, block_table, seq_lens, comm, mode="fused")

Rank r holds tokens ``[offset_r, offset_r + seq_lens_r)`` of each sequence (in rank order, ``offset_r``
the sum of the lower ranks' ``seq_lens``); the query of sequence s (one new token) sits at position
``total_s - 1``, ``total_s = sum_r seq_lens_r[s]``, and sees every key (decode is causal on the last
position). Per call:

1. with a sliding window or ALiBi only (the features that depend on positions): an all-gather of
   ``seq_lens`` (tritium collectives) gives every rank the query's position relative to its part,
   ``total_s - 1 - offset_r = sum_{r' >= r} seq_lens_r'[s] - 1``, on the device (no host sync);
2. ``_partial_decode_kernel``, one program per (sequence, KV head, split): the query heads of the GQA
   group packed into the rows of a ``tl.dot`` (as in :mod:`tritium.attention`, whose key loop
   ``_attend_key_range`` it runs), online softmax in the log2 domain over ``TILE_N``-key tiles of the
   split-th of ``num_splits`` chunks of this rank's part, keys at their global positions (window,
   ALiBi). It writes the normalised partial output ``o_r`` and its log-sum-exp ``lse_r`` (log2 domain;
   ``-inf`` for an empty or fully masked chunk, NaN for impossible metadata) as row
   ``r = rank * num_splits + split`` of the merge;
3. the rows of every rank meet on every rank, and ``_merge_partials_kernel`` merges them per (sequence,
   query head): ``m = max_r lse_r``, ``w_r = exp2(lse_r - m)``,
   ``out = sum_r w_r o_r / (sum_r w_r + exp2(sink - m))``. Sinks enter once, in the merge (a logit with
   no value).

How the rows meet (``mode``):

- ``"fused"`` (default): step 2's programs push their rows into every rank's heap (this call's half of a
  double-buffered receive buffer) and raise a flag per (row, sequence, KV head) there; the merge program
  of (s, h) waits for the flags of its rows only (polled together, bounded; a give-up is counted and
  raised by ``comm.check()``), with no all-gather of the partials and no barrier. Epochs and parities
  follow :mod:`tritium.fused.workspace`.
- ``"bulk"``: an all-gather of the rows (tritium collectives), then the merge.
- ``"torch"``: the same with ``torch.distributed``'s all-gather into one tensor over the communicator's group
  (NCCL on GPUs, gloo on the CPU): the baseline the benchmark compares with.

Ranks must agree on ``num_seqs``, the head counts and ``num_splits``; the call cannot tell without a
host sync. The device tells when the partials' size or layout differs (``num_seqs``, ``num_q_heads``,
splits: a layout tag rides with the all-gathers' sizes and the fused flags; see
:func:`distributed_paged_decode`, and ``comm.check()``), not when only ``num_kv_heads`` does (a
workspace is made collectively for one ``num_q_heads`` and ``head_dim``). Ranks in different modes (fused
against bulk) get ``CollectiveMismatch`` on every rank, after a wait gives up (slow path only): a fused call
raises the workspace's "hello" flags (:func:`tritium.fused.workspace.announce`, one program, once a call;
their addresses are in the communicator's state, :func:`tritium.fused.workspace.register_protocol`), so a
bulk rank's all-gather that gives up finds the peer in a fused call, and the merge's waits that give up
look for the ranks their missing rows belong to (row ``r`` is rank ``r // splits``'s) in the bulk mode's
all-gather (:func:`tritium.collectives.kernels.count_timeout`); the call counters are then out of step
(make a new communicator and workspace). Not told apart from a missing rank: a rank without sequences (a
``ValueError`` there before any launch; its peers time out, and its next ``check`` says they gave up on it),
and the "torch" mode against the others (its all-gather is torch.distributed's, bounded by its group's
timeout).
Reference: :func:`tritium.fused.reference.distributed_paged_decode`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import triton
import triton.language as tl

from tritium.attention.config import next_pow2
from tritium.attention.kernels import _attend_key_range, _dot_q, _pages_out_of_range
from tritium.attention.launcher import FP8_DTYPES, Q_DTYPES, _scale_arg, _softmax_scale_arg, check_kv_cache
from tritium.collectives import Communicator
from tritium.collectives.all_gather import all_gather
from tritium.collectives.kernels import TAG_BITS, fail_fast
from tritium.fused.workspace import (FLAG_TAG_BITS, STATE_WORDS, announce, end_call, epoch_of, raise_flag,
                                     register_protocol, tagged, wait_flags_tagged)
from tritium.runtime import interpreting, num_sms, pipeline_stages
from tritium.shmem.device import translate

MODES = ("fused", "bulk", "torch")
# torch 2.13 deprecates all_gather_into_tensor for all_gather_single (same arguments); older torch lacks the latter
_torch_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
MAX_SPLITS = 64
LOG2E = 1.4426950408889634


@triton.jit(do_not_specialize=["num_seqs", "rank", "parity_offset", "num_blocks", "max_kv_len", "window",
                               "layout_tag"])
def _partial_decode_kernel(
    # pointers
    q_ptr, k_ptr, v_ptr, block_table_ptr, seq_lens_ptr, lens_all_ptr, alibi_ptr, k_scale_ptr, v_scale_ptr, part_ptr,
    # fused mode: flags, hello flags and op state in the heap, the heap bases
    flags_ptr, hello_ptr, state_ptr, bases,
    # strides (the head_dim stride of every tensor is 1)
    stride_q_s, stride_q_h,
    stride_k_b, stride_k_t, stride_k_h,
    stride_v_b, stride_v_t, stride_v_h,
    stride_bt_s,
    stride_part_r, stride_part_s, stride_part_h,
    stride_flag_p, stride_flag_r, stride_flag_s,
    # sizes and scalars
    num_seqs, rank, world_size, parity_offset, num_blocks, max_kv_len, sm_scale, softcap, window, k_scale_val,
    v_scale_val, layout_tag,
    # meta-parameters
    QPKV: tl.constexpr, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    PAGE_SIZE: tl.constexpr, TILE_N: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_SOFTCAP: tl.constexpr,
    HAS_ALIBI: tl.constexpr, SCALES_FROM_PTR: tl.constexpr, PUSH: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """Grid (num_seqs, num_kv_heads, num_splits). Rows of the dot: the QPKV query heads of KV head
    ``kv_head`` (padded to BLOCK_M). Keys: the split-th of num_splits equal runs of the tiles this rank's
    part has inside the window. Writes ``[o (HEAD_DIM), lse]`` of each head to row split of
    ``part[row, s, h]`` (bulk), or (PUSH) to row rank * num_splits + split of this call's half
    (``parity * parity_offset``) of every rank's heap buffer, then raises the flag
    ``[parity, row, s, kv_head]`` there to the call's epoch; program (0, 0, 0) then raises this rank's hello
    flag of the call on every rank (:func:`tritium.fused.workspace.announce`: how a peer in the bulk mode whose
    wait gives up tells that this rank is in a fused call).

    ``lens_all`` [world_size, num_seqs] (gathered seq_lens) is read only with a window or ALiBi.
    ``max_kv_len``: tokens a block-table row holds. A length outside [0, max_kv_len] or a page id
    outside [0, num_blocks) among those the program reads makes its rows NaN (no access outside the
    tensors); rows of an empty chunk are 0 with lse -inf."""
    s = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    num_splits = tl.num_programs(2)
    n_local = tl.load(seq_lens_ptr + s)
    bad = (n_local < 0) | (n_local > max_kv_len)
    n_local = tl.where(bad, 0, n_local)
    # the query's position relative to this part's first key: total - 1 - offset
    q_pos = 0
    if HAS_WINDOW or HAS_ALIBI:
        for r in range(rank, world_size):
            q_pos += tl.load(lens_all_ptr + r * num_seqs + s)
        q_pos -= 1
    # tiles with keys inside the window, [tile_lo, tile_hi); [full_lo, full_hi) need no mask
    tile_lo = 0
    full_lo = 0
    key_lo = 0  # the first key the query sees (masked tiles read no page id before it)
    if HAS_WINDOW:  # keys j > q_pos - window
        key_lo = tl.maximum(q_pos - window + 1, 0)
        tile_lo = tl.minimum(key_lo // TILE_N, tl.cdiv(n_local, TILE_N))
        full_lo = tl.cdiv(key_lo, TILE_N)
    tile_hi = tl.cdiv(n_local, TILE_N)
    # this split's run of tiles
    per_split = tl.cdiv(tile_hi - tile_lo, num_splits)
    lo = tl.minimum(tile_lo + split * per_split, tile_hi)
    hi = tl.minimum(lo + per_split, tile_hi)
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.minimum(tl.maximum(n_local // TILE_N, full_lo), hi)
    bt_row_ptr = block_table_ptr + s.to(tl.int64) * stride_bt_s
    if lo < hi:  # page ids checked once, before the key loop
        bad = bad | _pages_out_of_range(bt_row_ptr, tl.maximum(lo * TILE_N, key_lo), tl.minimum(hi * TILE_N, n_local),
                                        num_blocks, PAGE_SIZE)
    hi = tl.where(bad, lo, hi)

    offs_m = tl.arange(0, BLOCK_M)
    head = kv_head * QPKV + offs_m  # [BLOCK_M] query head of each row
    row_valid = offs_m < QPKV
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_mask = offs_d < HEAD_DIM
    q = tl.load(q_ptr + s.to(tl.int64) * stride_q_s + head[:, None] * stride_q_h + offs_d[None, :],
                mask=row_valid[:, None] & d_mask[None, :], other=0.0)  # [BLOCK_M, HEAD_DIM_PAD]
    q = _dot_q(q, k_ptr)
    if SCALES_FROM_PTR:
        k_scale_val = tl.load(k_scale_ptr).to(tl.float32)
        v_scale_val = tl.load(v_scale_ptr).to(tl.float32)
    qk_scale = sm_scale * k_scale_val
    alibi_log2 = tl.zeros([BLOCK_M], dtype=tl.float32)
    if HAS_ALIBI:
        alibi_log2 = tl.load(alibi_ptr + head, mask=row_valid, other=0.0).to(tl.float32) * 1.4426950408889634
    q_pos_rows = tl.zeros([BLOCK_M], dtype=tl.int32) + q_pos  # [BLOCK_M]
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
    k_head_ptr = k_ptr + kv_head * stride_k_h
    v_head_ptr = v_ptr + kv_head * stride_v_h
    # masked tiles at the window's start, the unmasked middle, the masked last (partial) tile; every key
    # of the part is before the query, so nothing is causal-masked
    acc, l_i, m_i, _, _, _ = _attend_key_range(
        acc, l_i, m_i, q, lo, hi, full_lo, full_hi, k_head_ptr, v_head_ptr, bt_row_ptr,
        stride_k_b, stride_k_t, stride_v_b, stride_v_t, n_local, q_pos_rows, alibi_log2, qk_scale,
        softcap, window, key_lo, offs_d, d_mask, PAGE_SIZE, TILE_N, HEAD_DIM, HEAD_DIM_PAD, False,
        HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, DOT_PRECISION, 0.0, 0.0, 0.0, v_scale_val, 0)  # no key groups

    l_i = tl.where(bad, float("nan"), l_i)  # NaN counts as mass: it reaches lse, and the merge's output
    has_mass = l_i != 0.0
    o = acc * (v_scale_val / tl.where(has_mass, l_i, 1.0))[:, None]  # [BLOCK_M, HEAD_DIM_PAD]
    lse = tl.where(has_mass, m_i + tl.math.log2(tl.where(has_mass, l_i, 1.0)), float("-inf"))  # [BLOCK_M]
    row_offs = s * stride_part_s + head * stride_part_h  # [BLOCK_M]
    store_mask = row_valid[:, None] & d_mask[None, :]
    if PUSH:
        epoch, parity = epoch_of(state_ptr)
        row = rank * num_splits + split
        rows = part_ptr + parity * parity_offset + row.to(tl.int64) * stride_part_r + row_offs
        # flags of each parity apart: a row's writer changes with the layout (num_seqs, splits) from call
        # to call, and a peer can be one call ahead (see the workspace), never two
        flag = flags_ptr + parity * stride_flag_p + row * stride_flag_r + s * stride_flag_s + kv_head
        for dst in range(0, world_size):
            remote = translate(rows, rank, dst, bases)  # [BLOCK_M]
            tl.store(remote[:, None] + offs_d[None, :], o, mask=store_mask)
            tl.store(remote + HEAD_DIM, lse, mask=row_valid)
            raise_flag(flag, tagged(epoch, layout_tag), rank, dst, bases)
        # (after this program's rows: W more flag stores in one program of the launch, off the merge's path;
        # not timed: no two GPUs lent since)
        if (s == 0) & (kv_head == 0) & (split == 0):
            announce(hello_ptr, epoch, parity, layout_tag, rank, world_size, bases)
    else:
        rows = part_ptr + split.to(tl.int64) * stride_part_r + row_offs
        tl.store(rows[:, None] + offs_d[None, :], o, mask=store_mask)
        tl.store(rows + HEAD_DIM, lse, mask=row_valid)


@triton.jit(do_not_specialize=["num_rows", "parity_offset", "qpkv", "layout_tag"])
def _merge_partials_kernel(
    # pointers
    out_ptr, rows_ptr, sinks_ptr,
    # fused mode: flags, hello flags, op state, the communicator's state (timeouts, mismatches)
    flags_ptr, hello_ptr, state_ptr, comm_state_ptr,
    # strides
    stride_out_s, stride_out_h,
    stride_part_r, stride_part_s, stride_part_h,
    stride_flag_p, stride_flag_r, stride_flag_s,
    # sizes
    num_rows, world_size, parity_offset, qpkv, max_spins, layout_tag,
    # meta-parameters
    ROWS_PAD: tl.constexpr, CHUNK: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    HAS_SINKS: tl.constexpr, WAIT: tl.constexpr,
):
    """Grid (num_seqs, num_q_heads). ``rows[r, s, h] = [o_r (HEAD_DIM), lse_r]`` for every row r
    (rank * splits + split) -> ``out[s, h] = sum_r w_r o_r / (sum_r w_r + exp2(sink - m))``, the rows'
    outputs read CHUNK at a time. WAIT: ``rows`` is this call's half of the heap buffer (from
    ``parity * parity_offset``), read once the flags ``[parity, r, s, h // qpkv]`` of all rows hold the call's
    epoch (bounded waits: none once a wait of this rank gave up since the last check, ``fail_fast``; one that
    gives up looks for the ranks of the missing rows, ``rank = r // (num_rows / world_size)``, in a call of
    another protocol); the last program advances the call counter."""
    s = tl.program_id(0)
    h = tl.program_id(1)
    offs_r = tl.arange(0, ROWS_PAD)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    r_mask = offs_r < num_rows
    d_mask = offs_d < HEAD_DIM
    if WAIT:
        epoch, parity = epoch_of(state_ptr)
        rows_ptr += parity * parity_offset
        flags_ptr += parity * stride_flag_p + s * stride_flag_s + h // qpkv
        sender = offs_r // (num_rows // world_size)  # [ROWS_PAD] the rank that pushes each row
        senders = tl.full([ROWS_PAD], 1, tl.int64) << tl.minimum(sender, 63).to(tl.int64)
        ok = wait_flags_tagged(flags_ptr + offs_r * stride_flag_r, r_mask, epoch, layout_tag,
                               fail_fast(comm_state_ptr, max_spins), comm_state_ptr, senders, hello_ptr.to(tl.int64))
    base = rows_ptr + s.to(tl.int64) * stride_part_s + h * stride_part_h
    lse = tl.load(base + offs_r.to(tl.int64) * stride_part_r + HEAD_DIM, mask=r_mask,
                  other=float("-inf"))  # [ROWS_PAD]
    m = tl.max(lse, axis=0)
    sink = float("-inf")
    if HAS_SINKS:
        sink = tl.load(sinks_ptr + h) * 1.4426950408889634
        m = tl.maximum(m, sink)
    m_use = tl.where(m == float("-inf"), 0.0, m)
    den = tl.sum(tl.math.exp2(lse - m_use), axis=0) + tl.math.exp2(sink - m_use)  # empty rows weigh 0
    acc = tl.zeros([HEAD_DIM_PAD], dtype=tl.float32)
    for start in range(0, num_rows, CHUNK):
        offs_c = start + tl.arange(0, CHUNK)
        c_mask = offs_c < num_rows
        ptrs = base + offs_c.to(tl.int64) * stride_part_r  # [CHUNK]
        lse_c = tl.load(ptrs + HEAD_DIM, mask=c_mask, other=float("-inf"))
        full = c_mask & (lse_c > float("-inf"))  # an empty row's output is not read
        o = tl.load(ptrs[:, None] + offs_d[None, :], mask=full[:, None] & d_mask[None, :], other=0.0)
        acc += tl.sum(tl.math.exp2(lse_c - m_use)[:, None] * o, axis=0)
    res = acc / tl.where(den > 0.0, den, 1.0)  # [HEAD_DIM_PAD]; NaN where a row's lse is NaN
    if WAIT:
        res = tl.where(ok != 0, res, float("nan"))  # rows of another layout (or none): no answer
    tl.store(out_ptr + s.to(tl.int64) * stride_out_s + h * stride_out_h + offs_d,
             res.to(out_ptr.dtype.element_ty), mask=d_mask)
    if WAIT:
        end_call(state_ptr, tl.num_programs(0) * tl.num_programs(1))


@dataclass(frozen=True)
class DecodeConfig:
    tile_n: int  # keys per inner iteration
    num_splits: int  # chunks of each rank's part, a program (and a merge row) each
    num_warps: int
    num_stages: int


def select_num_splits(num_seqs: int, num_kv_heads: int, device: torch.device) -> int:
    """Chunks of each rank's part computed by programs of their own: ``floor(2 * SMs / (num_seqs *
    num_kv_heads))``, in [1, 64]; 1 under the interpreter, whose programs run one after another.

    NOTE: one wave of equally long runs. At the benchmark's shape (bf16, D=128, 64-key tiles, 3 stages;
    ptxas for sm_90a) a program takes 157 registers and 70 KiB of shared memory, so 3 fit on an SM, but
    2 per SM measured best. 2x H200 sweep (``bench distributed_decode
    --sweep``, bf16, GQA 32/8, D=128, 64-key tiles, 3 stages; bench/NOTES.md "Distributed decode"), fused
    us at 1 / 2 / 3 / 4 programs per SM: B=1 T=512k 286 / 259 / 265 / 320; B=4 T=512k 1091 / 974 / 974 /
    1216; B=16 T=128k 1097 / 972 / 975 / 1214."""
    if interpreting():
        return 1
    return max(1, min(MAX_SPLITS, 2 * num_sms(device) // (num_seqs * num_kv_heads)))


def select_decode_config(num_seqs: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype,
                         device: torch.device) -> DecodeConfig:
    """Tile, splits, warps and stages of the partial kernel.

    NOTE: 2x H200 sweep of 64/128-key tiles x 2-4 stages x 1-4 programs per SM (``bench distributed_decode
    --sweep``; bench/NOTES.md "Distributed decode"), fused us: 64-key tiles with 3 stages at 2 per SM are
    within 2% of each case's best but one (B=1 T=128k: 86 vs 80, 128-key tiles at 1 per SM, which lose
    1-3% at B >= 4), where 2 stages (the single-GPU decode rule this started from) were 15-25% slower
    (B=1 T=512k 306 -> 259, B=4 T=512k 1166 -> 974, B=16 T=512k 4585 -> 3893): with page ids loaded one
    tile ahead, 2 stages keep only one tile of K/V in flight. 32-key tiles and 2 stages for head_dim > 128
    and fp32 (registers and shared memory), as in ``tritium.attention``. 16-key tiles under the
    interpreter: test parts of tens of keys then still have unmasked tiles."""
    splits = select_num_splits(num_seqs, num_kv_heads, device)
    if interpreting():
        return DecodeConfig(tile_n=16, num_splits=splits, num_warps=4, num_stages=1)
    if next_pow2(head_dim) > 128 or dtype == torch.float32:
        return DecodeConfig(tile_n=32, num_splits=splits, num_warps=4, num_stages=2)
    return DecodeConfig(tile_n=64, num_splits=splits, num_warps=4, num_stages=3)


class DistributedDecodeWorkspace:
    """Buffers of :func:`distributed_paged_decode`, allocated once for calls of up to ``max_num_seqs``
    sequences and ``max_num_seqs * max_splits`` (sequence, split) rows per rank (R below; a call of n
    sequences in s splits takes n * s of them): the gathered lengths ``[world_size * max_num_seqs]``
    int32, this rank's partials ``[R, num_q_heads, head_dim + 1]`` fp32 (o, then lse) and the gathered
    partials (``world_size`` times as many); in the communicator's heap (fused mode) the double-buffered
    receive slots ``[2, world_size * R, num_q_heads, head_dim + 1]`` fp32, as many flags (one per
    parity, row, sequence and KV head used), hello flags ``[2, world_size]`` and a call counter:
    :meth:`heap_bytes`.
    ``max_splits=select_num_splits(1, num_kv_heads, device)`` makes room for the default split count of
    every batch size up to ``max_num_seqs``.

    Constructing one is collective (every rank, same sizes, same order). With one, a call neither
    allocates (given ``out=``) nor syncs with the host. The communicator's ``max_bytes`` must hold this
    rank's partials (bulk mode): :meth:`message_bytes`."""

    def __init__(self, comm, max_num_seqs: int, num_q_heads: int, head_dim: int, *, max_splits: int = 1):
        for name, value in (("max_num_seqs", max_num_seqs), ("num_q_heads", num_q_heads), ("head_dim", head_dim),
                            ("max_splits", max_splits)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"DistributedDecodeWorkspace: {name} must be a positive int, got {value!r}")
        world, dev = comm.world_size, comm.device
        self.max_num_seqs, self.num_q_heads, self.head_dim = max_num_seqs, num_q_heads, head_dim
        self.max_splits, self.world_size, self.device = max_splits, world, dev
        self.max_rows = max_num_seqs * max_splits
        row = num_q_heads * (head_dim + 1)
        self.lens_all = torch.zeros(world * max_num_seqs, dtype=torch.int32, device=dev)
        self.part = torch.empty(self.max_rows * row, dtype=torch.float32, device=dev)
        self.gathered = torch.empty(world * self.max_rows * row, dtype=torch.float32, device=dev)
        heap = comm.heap
        self.slots = heap.empty((2, world * self.max_rows * row), torch.float32)
        self.flags = heap.zeros((2, world * self.max_rows * num_q_heads), torch.int64)
        self.hello = heap.zeros((2, world), torch.int64)
        self.state = heap.zeros((STATE_WORDS,), torch.int64)
        _register(comm, self)
        heap.barrier()  # every rank's flags are zero before any peer raises one

    @staticmethod
    def heap_bytes(max_num_seqs: int, num_q_heads: int, head_dim: int, world_size: int, max_splits: int = 1) -> int:
        """Heap bytes one workspace takes (add them to the communicator's ``Communicator.heap_bytes``)."""
        rows = world_size * max_splits * max_num_seqs * num_q_heads
        return 2 * rows * (head_dim + 1) * 4 + 2 * rows * 8 + 2 * world_size * 8 + 4 * 256

    @staticmethod
    def message_bytes(max_num_seqs: int, num_q_heads: int, head_dim: int, max_splits: int = 1) -> int:
        """Bytes of one rank's partials (the all-gather message): the communicator's ``max_bytes`` floor."""
        return max_splits * max_num_seqs * num_q_heads * (head_dim + 1) * 4

    def fits(self, num_seqs: int, splits: int) -> bool:
        return num_seqs <= self.max_num_seqs and num_seqs * splits <= self.max_rows

    def views(self, num_seqs: int, splits: int):
        """(lengths, this rank's partials ``[splits * num_seqs, heads, head_dim + 1]``, gathered partials,
        this call's heap slots (both halves, each laid out as the gathered partials), the flags of both
        halves, each ``[world_size * splits, num_seqs, num_q_heads]``)."""
        rows = splits * num_seqs
        n = rows * self.num_q_heads * (self.head_dim + 1)
        shape = (-1, self.num_q_heads, self.head_dim + 1)
        world = self.world_size
        return (self.lens_all[:world * num_seqs], self.part[:n].view(shape), self.gathered[:world * n].view(shape),
                self.slots, self.flags[:, :world * rows * self.num_q_heads].view(2, world * splits, num_seqs, -1))


def _register(comm, workspace: DistributedDecodeWorkspace) -> None:
    """Make ``workspace``'s hello flags and call counter the ones a wait of another protocol that gives up
    reads (``register_protocol``): at its construction, and again when a call uses another workspace than
    the last one registered (a host write, not on the path of a call with the same workspace)."""
    if comm.__dict__.get("_decode_registered") is not workspace:
        register_protocol(comm, "dd", workspace.hello, workspace.state)
        comm.__dict__["_decode_registered"] = workspace


def _default_workspace(comm, num_seqs: int, num_q_heads: int, head_dim: int,
                       splits: int) -> DistributedDecodeWorkspace:
    """The communicator's own workspace for calls without one, made on first use and remade larger when a
    call has more sequences or rows (heap allocation is collective: every rank makes the same calls)."""
    cache = comm.__dict__.setdefault("_decode_workspaces", {})
    held = cache.get((num_q_heads, head_dim))
    if held is None or not held.fits(num_seqs, splits):
        max_seqs = num_seqs if held is None else max(num_seqs, held.max_num_seqs)
        held = cache[(num_q_heads, head_dim)] = DistributedDecodeWorkspace(
            comm, max_seqs, num_q_heads, head_dim, max_splits=-(-num_seqs * splits // max_seqs))
    return held


def _check_tensor(name, t, ndim, dtypes, device):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} must have dtype {names}; got {str(t.dtype).replace('torch.', '')}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device}; the communicator's ranks work on {device}")
    if t.numel() > 0 and t.stride(-1) != 1:
        raise ValueError(f"{name} must be contiguous in its last dimension (stride {t.stride(-1)})")


def distributed_paged_decode(q, k_cache, v_cache, block_table, seq_lens, comm, *, softmax_scale=None,
                             sliding_window=None, softcap=None, alibi_slopes=None, sinks=None,
                             k_scale=None, v_scale=None, out=None, workspace=None, mode="fused",
                             num_splits=None, config=None):
    """Decode attention of one new token per sequence over a KV cache split across ranks by position.

    Args:
        q: [num_seqs, num_q_heads, head_dim] fp16/bf16/fp32, identical on every rank.
        k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim] of THIS rank, q's dtype or
            float8_e4m3fn (with ``k_scale`` / ``v_scale``).
        block_table: [num_seqs, max_blocks_per_seq] int32, this rank's pages of each sequence.
        seq_lens: [num_seqs] int32, tokens of each sequence this rank holds (0 allowed); rank r's part
            starts at the sum of the lower ranks' seq_lens.
        comm: :class:`tritium.collectives.Communicator` over the ranks holding the parts.
        softmax_scale, sliding_window, softcap, alibi_slopes, sinks, k_scale, v_scale: as in
            :func:`tritium.attention.paged_attention`, with the query at position total_len - 1 and the
            keys at their global positions.
        out: optional [num_seqs, num_q_heads, head_dim] in q's dtype.
        workspace: :class:`DistributedDecodeWorkspace`; without one, the communicator keeps one (made on
            the first call, remade when a call needs more rows) and calls allocate only ``out``.
        mode: "fused" (per-row push and flags), "bulk" (all-gather of partials with tritium collectives,
            then merge) or "torch" (the same through ``torch.distributed``).
        num_splits: chunks of this rank's part, each a program's (and a row of the merge), default
            :func:`select_num_splits` (capped at what the workspace holds).
        config: a :class:`DecodeConfig` for the partial kernel instead of :func:`select_decode_config`'s
            (tuning; its ``num_splits`` applies when ``num_splits`` is None).

    Returns:
        [num_seqs, num_q_heads, head_dim] in q's dtype, the attention over the whole sequence, the same
        on every rank. A sequence of total length 0 (and no sinks) gives zeros.

    Metadata values are not read on the host. A length outside ``[0, block_table.shape[1] * block_size]``
    or a page id outside ``[0, num_blocks)`` (among those a program reads) makes that sequence's output
    NaN on every rank, without any access outside the tensors; the other sequences are exact. Ranks
    disagreeing on ``num_seqs`` or the head counts: bulk mode's all-gathers then write nothing and
    ``comm.check()`` raises :class:`~tritium.collectives.CollectiveMismatch`; in fused mode the merge sees
    flags of another layout (``CollectiveMismatch``, NaN rows) or its waits give up
    (:class:`~tritium.shmem.DeviceTimeout`, as when a peer does not call). Ranks calling in different modes
    (fused against bulk) get ``CollectiveMismatch`` on every rank once a wait gives up (module docstring).
    After a timeout or a mode mismatch in fused mode the workspace's call counter is out of step with the
    peers': make a new communicator and workspace on every rank.
    """
    if not isinstance(comm, Communicator):
        raise TypeError(f"comm must be a tritium.collectives.Communicator, got {type(comm).__name__}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    dev = comm.device
    _check_tensor("q", q, 3, Q_DTYPES, dev)
    _check_tensor("k_cache", k_cache, 4, Q_DTYPES + FP8_DTYPES, dev)
    _check_tensor("v_cache", v_cache, 4, Q_DTYPES + FP8_DTYPES, dev)
    _check_tensor("block_table", block_table, 2, (torch.int32,), dev)
    _check_tensor("seq_lens", seq_lens, 1, (torch.int32,), dev)
    num_seqs, num_q_heads, head_dim = q.shape
    num_blocks, block_size, num_kv_heads, _ = k_cache.shape
    check_kv_cache(q, k_cache, v_cache)
    if num_kv_heads < 1 or num_q_heads % num_kv_heads:
        raise ValueError(f"num_q_heads ({num_q_heads}, q.shape[1]) must be divisible by num_kv_heads "
                         f"({num_kv_heads}, k_cache.shape[2])")
    if head_dim < 16:
        raise ValueError(f"head_dim must be at least 16 (tl.dot), got {head_dim}")
    if block_size < 16 or block_size % 16:
        raise ValueError(f"block size (k_cache.shape[1]) must be a positive multiple of 16, got {block_size}")
    if num_seqs == 0:
        raise ValueError("q has 0 sequences: a batch needs at least one")
    if seq_lens.shape[0] != num_seqs or block_table.shape[0] != num_seqs:
        raise ValueError(f"q has {num_seqs} sequences, seq_lens {seq_lens.shape[0]}, block_table rows "
                         f"{block_table.shape[0]}")
    for name, t, n in (("alibi_slopes", alibi_slopes, num_q_heads), ("sinks", sinks, num_q_heads)):
        if t is not None:
            _check_tensor(name, t, 1, (torch.float32,), dev)
            if t.shape[0] != n:
                raise ValueError(f"{name} must have num_q_heads = {n} entries, got {t.shape[0]}")
    if sliding_window is not None and (not isinstance(sliding_window, int) or isinstance(sliding_window, bool)
                                       or sliding_window < 1):
        raise ValueError(f"sliding_window must be a positive int or None, got {sliding_window!r}")
    if softcap is not None and not softcap > 0:
        raise ValueError(f"softcap must be a positive float or None, got {softcap!r}")
    scale = _softmax_scale_arg(softmax_scale, head_dim)
    is_fp8 = k_cache.dtype in FP8_DTYPES
    k_scale_t, k_scale_val = _scale_arg("k_scale", k_scale, dev)
    v_scale_t, v_scale_val = _scale_arg("v_scale", v_scale, dev)
    if (k_scale_t is None) != (v_scale_t is None):
        raise ValueError("k_scale and v_scale must both be tensors or both be floats/None")
    if not is_fp8 and (k_scale is not None or v_scale is not None):
        raise ValueError("k_scale / v_scale apply to float8 caches only; the caches are "
                         f"{str(k_cache.dtype).replace('torch.', '')}")
    if out is None:
        out = torch.empty_like(q)
    else:
        _check_tensor("out", out, 3, (q.dtype,), dev)
        if out.shape != q.shape or not out.is_contiguous():
            raise ValueError(f"out must be a contiguous {tuple(q.shape)} tensor, got shape {tuple(out.shape)} "
                             f"strides {out.stride()}")
    if config is None:
        config = select_decode_config(num_seqs, num_kv_heads, head_dim, q.dtype, dev)
    elif not isinstance(config, DecodeConfig):
        raise TypeError(f"config must be a DecodeConfig or None, got {type(config).__name__}")
    elif config.tile_n not in (16, 32, 64, 128) or not 1 <= config.num_splits <= MAX_SPLITS:
        raise ValueError(f"config: tile_n must be 16, 32, 64 or 128 and num_splits in [1, {MAX_SPLITS}], got "
                         f"{config}")
    if num_splits is None:
        num_splits = config.num_splits
        if workspace is not None and isinstance(workspace, DistributedDecodeWorkspace):
            num_splits = max(1, min(num_splits, workspace.max_rows // num_seqs))
    elif not isinstance(num_splits, int) or isinstance(num_splits, bool) or not 1 <= num_splits <= MAX_SPLITS:
        raise ValueError(f"num_splits must be an int in [1, {MAX_SPLITS}] or None, got {num_splits!r}")
    if workspace is None:
        workspace = _default_workspace(comm, num_seqs, num_q_heads, head_dim, num_splits)
    elif not isinstance(workspace, DistributedDecodeWorkspace):
        raise TypeError(f"workspace must be a DistributedDecodeWorkspace, got {type(workspace).__name__}")
    elif (workspace.world_size != comm.world_size or workspace.device != dev
          or (workspace.num_q_heads, workspace.head_dim) != (num_q_heads, head_dim)
          or not workspace.fits(num_seqs, num_splits)):
        raise ValueError(f"workspace is for {workspace.max_num_seqs} sequences x {workspace.num_q_heads} heads x "
                         f"head_dim {workspace.head_dim}, {workspace.max_rows} (sequence, split) rows, world "
                         f"{workspace.world_size} on {workspace.device}; the call has {num_seqs} x {num_q_heads} x "
                         f"{head_dim}, {num_splits} split(s), world {comm.world_size} on {dev}")
    _register(comm, workspace)
    if mode == "torch" and not dist.is_initialized():
        raise ValueError("mode='torch' needs torch.distributed initialised (the communicator's process group)")
    lens_all, part, gathered, slots, flags = workspace.views(num_seqs, num_splits)
    # ranks disagreeing on num_seqs can still send messages and flags of equal sizes (2 sequences x 1 split
    # against 1 x 2): the layout rides with the all-gathers' sizes and the fused mode's flags, and a peer of
    # another layout gives CollectiveMismatch (NaN rows), not a wrong answer
    layout_tag = (num_seqs * MAX_SPLITS + num_splits - 1) % (1 << min(TAG_BITS, FLAG_TAG_BITS))
    positions = sliding_window is not None or alibi_slopes is not None
    if positions:  # the query's position relative to this rank's part needs the lower ranks' lengths
        if mode == "torch":
            _torch_all_gather(lens_all, seq_lens, group=comm.group)
        else:
            all_gather(comm, seq_lens, lens_all, tag=layout_tag)
    head_pad = next_pow2(head_dim)
    dummy = part
    fused_mode = mode == "fused"
    state = workspace.state
    # fused mode: rows go to the heap slots, laid out as the gathered partials, halves apart by parity
    rows_in = slots if fused_mode else part
    parity_offset = slots.stride(0)
    part_strides = (num_seqs * gathered.stride(0), gathered.stride(0), gathered.stride(1))  # row, sequence, head
    flag_strides = flags.stride()[:3]  # parity, row, sequence
    qpkv = num_q_heads // num_kv_heads
    # NOTE: DOT_PRECISION "ieee" as in tritium.attention: exact fp32 products; fp16/bf16 operands give the
    # same sm_90 code under any precision, and gfx950 rejects "tf32".
    _partial_decode_kernel[(num_seqs, num_kv_heads, num_splits)](
        q, k_cache, v_cache, block_table, seq_lens, lens_all,
        dummy if alibi_slopes is None else alibi_slopes,
        dummy if k_scale_t is None else k_scale_t, dummy if v_scale_t is None else v_scale_t, rows_in,
        flags, workspace.hello, state, comm.heap.bases,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_table.stride(0),
        *part_strides, *flag_strides,
        num_seqs, comm.rank, comm.world_size, parity_offset, num_blocks,
        block_table.shape[1] * block_size if num_blocks else 0,
        scale, float(softcap or 0.0), int(sliding_window or 0), k_scale_val, v_scale_val, layout_tag,
        QPKV=qpkv, BLOCK_M=max(16, next_pow2(qpkv)), HEAD_DIM=head_dim, HEAD_DIM_PAD=head_pad,
        PAGE_SIZE=block_size, TILE_N=config.tile_n, HAS_WINDOW=sliding_window is not None,
        HAS_SOFTCAP=softcap is not None, HAS_ALIBI=alibi_slopes is not None, SCALES_FROM_PTR=k_scale_t is not None,
        PUSH=fused_mode, DOT_PRECISION="ieee", num_warps=config.num_warps,
        num_stages=pipeline_stages(config.num_stages),
    )
    if mode == "bulk":
        all_gather(comm, part, gathered, tag=layout_tag)
    elif mode == "torch":
        _torch_all_gather(gathered, part, group=comm.group)
    num_rows = comm.world_size * num_splits
    _merge_partials_kernel[(num_seqs, num_q_heads)](
        out, slots if fused_mode else gathered, dummy if sinks is None else sinks,
        flags, workspace.hello, state, comm._state,
        out.stride(0), out.stride(1),
        *part_strides, *flag_strides,
        num_rows, comm.world_size, parity_offset, qpkv, comm.heap.max_spins, layout_tag,
        ROWS_PAD=triton.next_power_of_2(num_rows), CHUNK=min(16, triton.next_power_of_2(num_rows)),
        HEAD_DIM=head_dim, HEAD_DIM_PAD=head_pad, HAS_SINKS=sinks is not None, WAIT=fused_mode,
    )
    return out
