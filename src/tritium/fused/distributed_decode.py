"""Distributed flash decode: each rank holds a contiguous part of every sequence's KV cache.

    out = distributed_paged_decode(q, k_cache, v_cache, block_table, seq_lens, comm, mode="bulk")

Rank r holds tokens ``[offset_r, offset_r + seq_lens_r)`` of each sequence (in rank order, ``offset_r``
the sum of the lower ranks' ``seq_lens``); the query of sequence s (one new token) sits at position
``total_s - 1``, ``total_s = sum_r seq_lens_r[s]``, and sees every key (decode is causal on the last
position). Per call:

1. an all-gather of ``seq_lens`` (tritium collectives) gives every rank the offsets and totals on the
   device (no host sync);
2. ``_partial_decode_kernel`` computes, per (sequence, query head, split), attention of q over one of
   ``num_splits`` chunks of this rank's part with the keys' global positions (ALiBi, sliding window): the
   normalised partial output ``o_r`` and its log-sum-exp ``lse_r`` (log2 domain; ``-inf`` for an empty or
   fully masked chunk), a row ``r = rank * num_splits + split`` of the merge;
3. ``mode="bulk"``: an all-gather of the ``[o_r, lse_r]`` rows, then ``_merge_partials_kernel``:
   ``m = max_r lse_r``, ``w_r = exp2(lse_r - m)``, ``out = sum_r w_r o_r / (sum_r w_r + exp2(sink - m))``.
   Sinks enter once, in the merge (a logit with no value).

NOTE: the partial kernel is written for correctness first and has not run on a GPU yet: one program per
(sequence, query head, split) reads its KV head alone (the heads of a GQA group each read it), with
scalar-by-vector products instead of ``tl.dot``; the split-KV kernel of :mod:`tritium.attention` is the
model for a faster one.

``mode="fused"``: step 2's programs push their ``[o_r, lse_r]`` row into every rank's heap (this call's
half of a double-buffered receive buffer) and raise a per-(row, sequence, head) flag there; the merge
program of (s, h) waits for the flags of its rows only (bounded polls; a give-up is counted and raised by
``comm.check()``), with no all-gather of the partials and no barrier. Epochs and parities follow
:mod:`tritium.fused.workspace`. The lengths all-gather of step 1 remains in both modes.

Ranks must agree on ``num_seqs``, the head counts and ``num_splits``; the call cannot tell without a
host sync, the device does (see :func:`distributed_paged_decode`, and ``comm.check()``).
Reference: :func:`tritium.fused.reference.distributed_paged_decode`.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from tritium.attention.config import next_pow2
from tritium.attention.kernels import _softcap
from tritium.attention.launcher import FP8_DTYPES, Q_DTYPES, _scale_arg, check_kv_cache
from tritium.collectives import Communicator
from tritium.fused.workspace import STATE_WORDS, end_call, epoch_of, raise_flag, wait_flag
from tritium.runtime import interpreting, num_sms
from tritium.shmem.device import translate

MODES = ("bulk", "fused")
LOG2E = 1.4426950408889634


@triton.jit(do_not_specialize=["num_seqs", "rank", "num_blocks", "max_kv_len", "window"])
def _partial_decode_kernel(
    # pointers
    q_ptr, k_ptr, v_ptr, block_table_ptr, seq_lens_ptr, lens_all_ptr, alibi_ptr, k_scale_ptr, v_scale_ptr, part_ptr,
    # fused mode: flags [world, max_num_seqs, num_q_heads] and op state in the heap, the heap bases
    flags_ptr, state_ptr, bases,
    # strides
    stride_q_s, stride_q_h,
    stride_k_b, stride_k_t, stride_k_h,
    stride_v_b, stride_v_t, stride_v_h,
    stride_bt_s,
    stride_part_r, stride_part_s, stride_part_h,
    # sizes and scalars
    num_seqs, rank, world_size, parity_rows, num_blocks, max_kv_len, qk_scale, softcap, window, k_scale_val,
    v_scale_val,
    # meta-parameters
    QPKV: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, PAGE_SIZE: tl.constexpr,
    TILE_N: tl.constexpr, HAS_WINDOW: tl.constexpr, HAS_SOFTCAP: tl.constexpr, HAS_ALIBI: tl.constexpr,
    SCALES_FROM_PTR: tl.constexpr, PUSH: tl.constexpr, SPLITS: tl.constexpr,
):
    """One program per (sequence, query head, split): o and lse (log2) of q over the split-th of SPLITS
    chunks of this rank's part, written to part[split, s, h, :HEAD_DIM] and part[split, s, h, HEAD_DIM];
    PUSH: to row rank * SPLITS + split of this call's half (rows from parity * parity_rows) of every
    rank's heap buffer, then the flag [row, s, h] is raised there."""
    s = tl.program_id(0)
    h = tl.program_id(1)
    split = tl.program_id(2)
    kvh = h // QPKV
    # offset of this rank's part and the sequence's total length, from the gathered lengths
    offset = 0
    total = 0
    for r in range(world_size):
        n = tl.load(lens_all_ptr + r * num_seqs + s)
        total += n
        offset += tl.where(r < rank, n, 0)
    # this rank's own length (not the gathered copy, which a mismatched call leaves stale), cut at what a
    # block-table row holds: inconsistent metadata never reads outside the tensors
    n_local = tl.minimum(tl.maximum(tl.load(seq_lens_ptr + s), 0), max_kv_len)
    chunk = tl.cdiv(tl.cdiv(n_local, SPLITS), TILE_N) * TILE_N  # this split's keys: [k_lo, k_hi)
    k_lo = split * chunk
    k_hi = tl.minimum(k_lo + chunk, n_local)
    q_pos = total - 1
    lo = 0
    if HAS_WINDOW:  # keys at global positions > q_pos - window
        lo = tl.maximum(q_pos - window + 1 - offset, 0)
        lo = (lo // TILE_N) * TILE_N
    if SCALES_FROM_PTR:
        k_scale_val = tl.load(k_scale_ptr)
        v_scale_val = tl.load(v_scale_ptr)

    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_mask = offs_d < HEAD_DIM
    q = tl.load(q_ptr + s.to(tl.int64) * stride_q_s + h * stride_q_h + offs_d, mask=d_mask, other=0.0)
    q = q.to(tl.float32)  # [HEAD_DIM_PAD]
    alibi = 0.0
    if HAS_ALIBI:
        alibi = tl.load(alibi_ptr + h) * 1.4426950408889634
    m_i = -float("inf")
    l_i = 0.0
    acc = tl.zeros([HEAD_DIM_PAD], dtype=tl.float32)
    offs_n = tl.arange(0, TILE_N)
    for start in range(tl.maximum(lo, k_lo), k_hi, TILE_N):
        j = start + offs_n  # [TILE_N] local key index
        valid = j < k_hi
        if HAS_WINDOW:
            valid = valid & (offset + j > q_pos - window)
        page = tl.load(block_table_ptr + s.to(tl.int64) * stride_bt_s + j // PAGE_SIZE, mask=valid, other=0)
        page = tl.minimum(tl.maximum(page, 0), num_blocks - 1)  # ids outside the cache read a page of it
        slot = j % PAGE_SIZE
        kv_mask = valid[:, None] & d_mask[None, :]
        k_off = page.to(tl.int64)[:, None] * stride_k_b + slot[:, None] * stride_k_t + kvh * stride_k_h
        k = tl.load(k_ptr + k_off + offs_d[None, :], mask=kv_mask, other=0.0).to(tl.float32) * k_scale_val
        sc = tl.sum(q[None, :] * k, axis=1) * qk_scale  # [TILE_N]
        if HAS_SOFTCAP:
            sc = _softcap(sc, softcap)
        sc = sc * 1.4426950408889634
        if HAS_ALIBI:
            sc += alibi * (offset + j - q_pos).to(tl.float32)
        sc = tl.where(valid, sc, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(sc, axis=0))
        m_use = tl.where(m_new == -float("inf"), 0.0, m_new)
        p = tl.math.exp2(sc - m_use)
        alpha = tl.math.exp2(m_i - m_use)
        v_off = page.to(tl.int64)[:, None] * stride_v_b + slot[:, None] * stride_v_t + kvh * stride_v_h
        v = tl.load(v_ptr + v_off + offs_d[None, :], mask=kv_mask, other=0.0).to(tl.float32) * v_scale_val
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new
    has = l_i > 0.0
    o = acc / tl.where(has, l_i, 1.0)
    lse = tl.where(has, m_i + tl.math.log2(tl.where(has, l_i, 1.0)), -float("inf"))
    if PUSH:
        epoch, parity = epoch_of(state_ptr)
        row = rank * SPLITS + split
        part = part_ptr + (parity * parity_rows + row).to(tl.int64) * stride_part_r + s * stride_part_s \
            + h * stride_part_h
        flag = flags_ptr + (row * stride_part_r + s * stride_part_s + h * stride_part_h) // stride_part_h
        for dst in range(0, world_size):
            remote = translate(part, rank, dst, bases)
            tl.store(remote + offs_d, o, mask=d_mask)
            tl.store(remote + HEAD_DIM, lse)
            raise_flag(flag, epoch, rank, dst, bases)
    else:
        part = part_ptr + split.to(tl.int64) * stride_part_r + s * stride_part_s + h * stride_part_h
        tl.store(part + offs_d, o, mask=d_mask)
        tl.store(part + HEAD_DIM, lse)


@triton.jit(do_not_specialize=["num_seqs", "num_rows", "parity_rows"])
def _merge_partials_kernel(
    # pointers
    out_ptr, gathered_ptr, sinks_ptr,
    # fused mode: flags, op state, the communicator's state (timeouts)
    flags_ptr, state_ptr, comm_state_ptr,
    # strides
    stride_out_s, stride_out_h,
    stride_g_r, stride_g_s, stride_g_h,
    # sizes
    num_seqs, num_rows, parity_rows, max_spins,
    # meta-parameters
    WORLD_PAD: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, HAS_SINKS: tl.constexpr,
    WAIT: tl.constexpr,
):
    """One program per (sequence, query head): gathered[r, s, h] = [o_r (HEAD_DIM), lse_r] of every row r
    (rank * splits + split) -> out[s, h] = sum_r w_r o_r / (sum_r w_r + exp2(sink - m)). WAIT: gathered is
    this call's half of the heap buffer (rows from parity * parity_rows), each row read once its flag
    [r, s, h] holds the call's epoch (bounded waits); the last program advances the call counter."""
    s = tl.program_id(0)
    h = tl.program_id(1)
    offs_r = tl.arange(0, WORLD_PAD)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    r_mask = offs_r < num_rows
    if WAIT:
        epoch, parity = epoch_of(state_ptr)
        gathered_ptr += parity * parity_rows * stride_g_r
        for r in range(0, num_rows):
            wait_flag(flags_ptr + (r * stride_g_r + s * stride_g_s + h * stride_g_h) // stride_g_h, epoch,
                      max_spins, comm_state_ptr)
    rows = gathered_ptr + offs_r.to(tl.int64) * stride_g_r + s * stride_g_s + h * stride_g_h  # [WORLD_PAD]
    lse = tl.load(rows + HEAD_DIM, mask=r_mask, other=-float("inf"))
    m = tl.max(lse, axis=0)
    sink = -float("inf")
    if HAS_SINKS:
        sink = tl.load(sinks_ptr + h) * 1.4426950408889634
        m = tl.maximum(m, sink)
    m_use = tl.where(m == -float("inf"), 0.0, m)
    w = tl.math.exp2(lse - m_use)  # empty parts weigh 0
    o = tl.load(rows[:, None] + offs_d[None, :], mask=r_mask[:, None] & (offs_d < HEAD_DIM)[None, :], other=0.0)
    den = tl.sum(w, axis=0) + tl.math.exp2(sink - m_use)
    res = tl.sum(w[:, None] * o, axis=0) / tl.where(den > 0.0, den, 1.0)  # [HEAD_DIM_PAD]
    tl.store(out_ptr + s.to(tl.int64) * stride_out_s + h * stride_out_h + offs_d,
             res.to(out_ptr.dtype.element_ty), mask=offs_d < HEAD_DIM)
    if WAIT:
        end_call(state_ptr, tl.num_programs(0) * tl.num_programs(1))


class DistributedDecodeWorkspace:
    """Buffers of :func:`distributed_paged_decode`, allocated once for up to ``max_num_seqs`` sequences and
    ``max_splits`` chunks of each rank's part (S below): the gathered lengths ``[world_size * max_num_seqs]``
    int32, this rank's partials ``[S, max_num_seqs, num_q_heads, head_dim + 1]`` fp32 (o, then lse) and
    the gathered partials (``world_size`` times as many); in the communicator's heap (fused mode) the
    double-buffered receive slots ``[2, world_size * S, max_num_seqs, num_q_heads, head_dim + 1]`` fp32,
    one flag per (row, sequence, head) and a call counter: :meth:`heap_bytes`. Constructing one is
    collective (every rank, same sizes, same order). With one, a call neither allocates (given ``out=``)
    nor syncs with the host. The communicator's ``max_bytes`` must hold this rank's partials (bulk mode):
    :meth:`message_bytes`."""

    def __init__(self, comm, max_num_seqs: int, num_q_heads: int, head_dim: int, *, max_splits: int = 1):
        for name, value in (("max_num_seqs", max_num_seqs), ("num_q_heads", num_q_heads), ("head_dim", head_dim),
                            ("max_splits", max_splits)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"DistributedDecodeWorkspace: {name} must be a positive int, got {value!r}")
        world, dev = comm.world_size, comm.device
        self.max_num_seqs, self.num_q_heads, self.head_dim = max_num_seqs, num_q_heads, head_dim
        self.max_splits, self.world_size, self.device = max_splits, world, dev
        row = max_num_seqs * num_q_heads * (head_dim + 1)
        self.lens_all = torch.zeros(world * max_num_seqs, dtype=torch.int32, device=dev)
        self.part = torch.empty(max_splits * row, dtype=torch.float32, device=dev)
        self.gathered = torch.empty(world * max_splits * row, dtype=torch.float32, device=dev)
        heap = comm.heap
        self.slots = heap.empty((2, world * max_splits, max_num_seqs, num_q_heads, head_dim + 1), torch.float32)
        self.flags = heap.zeros((world * max_splits, max_num_seqs, num_q_heads), torch.int64)
        self.state = heap.zeros((STATE_WORDS,), torch.int64)
        heap.barrier()  # every rank's flags are zero before any peer raises one

    @staticmethod
    def heap_bytes(max_num_seqs: int, num_q_heads: int, head_dim: int, world_size: int, max_splits: int = 1) -> int:
        """Heap bytes one workspace takes (add them to the communicator's ``Communicator.heap_bytes``)."""
        rows = world_size * max_splits * max_num_seqs * num_q_heads
        return 2 * rows * (head_dim + 1) * 4 + rows * 8 + 3 * 256

    @staticmethod
    def message_bytes(max_num_seqs: int, num_q_heads: int, head_dim: int, max_splits: int = 1) -> int:
        """Bytes of one rank's partials (the all-gather message): the communicator's ``max_bytes`` floor."""
        return max_splits * max_num_seqs * num_q_heads * (head_dim + 1) * 4

    def views(self, num_seqs: int, splits: int):
        """(lengths, this rank's partials ``[splits * num_seqs, heads, head_dim + 1]``, gathered partials)."""
        n = splits * num_seqs * self.num_q_heads * (self.head_dim + 1)
        shape = (-1, self.num_q_heads, self.head_dim + 1)
        return (self.lens_all[:self.world_size * num_seqs], self.part[:n].view(shape),
                self.gathered[:self.world_size * n].view(shape))


def _default_workspace(comm, num_seqs: int, num_q_heads: int, head_dim: int,
                       splits: int) -> DistributedDecodeWorkspace:
    """The communicator's own workspace for calls without one, made on first use and remade larger when a
    call has more sequences or splits (heap allocation is collective: every rank makes the same calls)."""
    cache = comm.__dict__.setdefault("_decode_workspaces", {})
    held = cache.get((num_q_heads, head_dim))
    if held is None or held.max_num_seqs < num_seqs or held.max_splits < splits:
        held = cache[(num_q_heads, head_dim)] = DistributedDecodeWorkspace(
            comm, num_seqs, num_q_heads, head_dim, max_splits=splits)
    return held


def select_num_splits(num_seqs: int, num_q_heads: int, device: torch.device) -> int:
    """Chunks of each rank's part computed by programs of their own (more programs for small batches).

    NOTE: not measured yet (written without a GPU): enough (sequence, head, split) programs to give every
    SM about two, at most 16; 1 under the interpreter, whose programs run one after another."""
    if interpreting():
        return 1
    return max(1, min(16, 2 * num_sms(device) // (num_seqs * num_q_heads)))


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
                             k_scale=None, v_scale=None, out=None, workspace=None, mode="bulk",
                             num_splits=None):
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
            the first call, remade when a call has more sequences) and calls allocate only ``out``.
        mode: "bulk" (all-gather of partials, then merge) or "fused" (per-row push and flags).
        num_splits: chunks of this rank's part, each a program's (and a row of the merge), default
            :func:`select_num_splits` (capped at the workspace's ``max_splits``).

    Returns:
        [num_seqs, num_q_heads, head_dim] in q's dtype, the attention over the whole sequence, the same
        on every rank. A sequence of total length 0 (and no sinks) gives zeros.

    Metadata values are not read on the host: a length longer than its block-table row holds is cut at
    the row, and page ids outside ``[0, num_blocks)`` read a page of the cache (no access outside the
    tensors; such sequences' results are meaningless). Ranks disagreeing on ``num_seqs`` or the head
    counts: bulk mode's all-gathers then write nothing and ``comm.check()`` raises
    :class:`~tritium.collectives.CollectiveMismatch`; in fused mode the merge's waits give up and
    ``comm.check()`` raises :class:`~tritium.shmem.DeviceTimeout` (as when a peer does not call). After
    a timeout in fused mode the workspace's call counter is out of step with the peers': make a new
    workspace on every rank.
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
    if num_splits is None:
        num_splits = select_num_splits(num_seqs, num_q_heads, dev)
        if workspace is not None:
            num_splits = min(num_splits, workspace.max_splits)
    elif not isinstance(num_splits, int) or isinstance(num_splits, bool) or not 1 <= num_splits <= 64:
        raise ValueError(f"num_splits must be an int in [1, 64] or None, got {num_splits!r}")
    if workspace is None:
        workspace = _default_workspace(comm, num_seqs, num_q_heads, head_dim, num_splits)
    elif not isinstance(workspace, DistributedDecodeWorkspace):
        raise TypeError(f"workspace must be a DistributedDecodeWorkspace, got {type(workspace).__name__}")
    elif (workspace.world_size != comm.world_size or workspace.device != dev
          or (workspace.num_q_heads, workspace.head_dim) != (num_q_heads, head_dim)
          or workspace.max_num_seqs < num_seqs or workspace.max_splits < num_splits):
        raise ValueError(f"workspace is for {workspace.max_num_seqs} sequences x {workspace.num_q_heads} heads x "
                         f"head_dim {workspace.head_dim}, {workspace.max_splits} split(s), world "
                         f"{workspace.world_size} on {workspace.device}; the call has {num_seqs} x {num_q_heads} x "
                         f"{head_dim}, {num_splits} split(s), world {comm.world_size} on {dev}")
    lens_all, part, gathered = workspace.views(num_seqs, num_splits)
    comm.all_gather(seq_lens, out=lens_all)
    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else float(softmax_scale)
    head_pad = next_pow2(head_dim)
    dummy = part
    fused_mode = mode == "fused"
    slots, flags, state = workspace.slots, workspace.flags, workspace.state
    # rank, sequence, head strides of this call's partials: the heap slots (fused) or this rank's rows
    if fused_mode:
        part, part_strides = slots, slots.stride()[1:4]
    else:
        part_strides = (num_seqs * part.stride(0), part.stride(0), part.stride(1))  # row = rank * splits + split
    parity_rows = comm.world_size * workspace.max_splits  # rows of one half of the heap slots
    _partial_decode_kernel[(num_seqs, num_q_heads, num_splits)](
        q, k_cache, v_cache, block_table, seq_lens, lens_all,
        dummy if alibi_slopes is None else alibi_slopes,
        dummy if k_scale_t is None else k_scale_t, dummy if v_scale_t is None else v_scale_t, part,
        flags, state, comm.heap.bases,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        block_table.stride(0),
        *part_strides,
        num_seqs, comm.rank, comm.world_size, parity_rows, num_blocks,
        block_table.shape[1] * block_size if num_blocks else 0,
        scale, float(softcap or 0.0), int(sliding_window or 0), k_scale_val, v_scale_val,
        QPKV=num_q_heads // num_kv_heads, HEAD_DIM=head_dim, HEAD_DIM_PAD=head_pad, PAGE_SIZE=block_size,
        TILE_N=16, HAS_WINDOW=sliding_window is not None, HAS_SOFTCAP=softcap is not None,
        HAS_ALIBI=alibi_slopes is not None, SCALES_FROM_PTR=k_scale_t is not None, PUSH=fused_mode,
        SPLITS=num_splits,
    )
    if not fused_mode:
        comm.all_gather(part, out=gathered)
    _merge_partials_kernel[(num_seqs, num_q_heads)](
        out, slots if fused_mode else gathered, dummy if sinks is None else sinks,
        flags, state, comm._state,
        out.stride(0), out.stride(1),
        *part_strides,
        num_seqs, comm.world_size * num_splits, parity_rows, comm.heap.max_spins,
        WORLD_PAD=triton.next_power_of_2(comm.world_size * num_splits), HEAD_DIM=head_dim, HEAD_DIM_PAD=head_pad,
        HAS_SINKS=sinks is not None, WAIT=fused_mode,
    )
    return out
