"""Public launcher of paged attention: validation, configuration, workspace, launch."""

import math
import numbers

import torch
from triton.runtime.errors import OutOfResources

from tritium.runtime import interpreting, pdl_launch, pipeline_stages

from tritium.attention import hopper
from tritium.attention.config import (MAX_SPLITS, AttentionConfig, key_groups, mark_unfit, next_pow2,
                                      register_cap, select_attention_config, select_merge_warps)
from tritium.attention.kernels import _merge_splits_kernel, _paged_attention_kernel

SUPPORTED_HEAD_DIMS = (64, 80, 96, 128, 192, 256)
# True (default): the merge requests its partial outputs with the log-sum-exps (one L2 round trip) and masks the
# empty splits' rows afterwards; False loads the partials once the log-sum-exps tell which splits are empty.
# Measured on the H100 (bench/NOTES.md, stop 36): 0 to -1.7% a split decode call, never slower.
MERGE_PARALLEL_LOADS = True
# The attention kernel's PRELOAD (see _paged_attention_kernel and preload_arg): 1 (default) loads a split program's
# first key tile before its PDL wait where that was measured to pay; 0 never; 2 wherever the kernel can, PDL or not
# (tests run the path under the interpreter).
PRELOAD_FIRST_TILE = 1
# Which Q block a causal, unsplit program takes (the kernel's ORDER; see order_arg): 0 slot order (each sequence's
# blocks last first, one sequence and KV head after another), 1 heaviest first across the batch within each KV head
# (_heaviest_first: a search), 2 the same with the KV heads innermost, 3 rank order where every sequence has the
# same query length (_rank_order: the sequences' last blocks first, then the blocks before them; no search), slot
# order elsewhere. Batches of one sequence or more than ORDER_MAX_SEQS sequences take 0.
# NOTE: 0 by default. Measured on the H100 (bench/NOTES.md, "Paged attention", stop 102): heaviest first runs a
# few long prompts up to 14% faster (2 x 4k tokens: 0.921 -> 0.793x the hand rules' time), but 1's search (~2 us
# a program before the key loop) costs balanced batches 3-6%. 3 orders uniform batches the same way at slot
# order's cost; a scheduling model predicts it never slower (stop 103), but it has not run on a GPU yet: it
# becomes the default once a GPU has timed it (bench/probe_prefill_order.py, PROBE_ORDERS=0,3).
ORDER = 0
ORDER_MAX_SEQS = 256

Q_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# fp8 e4m3 caches (OCP float8_e4m3fn). AMD MI300's float8_e4m3fnuz is not accepted yet: neither the
# interpreter nor an NVIDIA GPU can run it, so it cannot be tested here.
FP8_DTYPES = (torch.float8_e4m3fn,)


class AttentionWorkspace:
    """Split-KV scratch buffers allocated once and reused by every call (and every layer).

    Holds partial outputs [max_splits, max_num_tokens, num_q_heads, head_dim] and their log-sum-exps
    [max_splits, max_num_tokens, num_q_heads], both fp32. With a workspace and the ``max_seqlen_*``
    hints, ``paged_attention`` neither allocates nor syncs with the host, so it can be captured in a
    CUDA graph. Calls whose configuration wants more splits than ``max_splits`` use ``max_splits``.
    """

    def __init__(self, max_num_tokens: int, num_q_heads: int, head_dim: int, *, max_splits: int = MAX_SPLITS,
                 device: torch.device | str | None = None):
        for name, value in (("max_num_tokens", max_num_tokens), ("num_q_heads", num_q_heads),
                            ("head_dim", head_dim), ("max_splits", max_splits)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"AttentionWorkspace: {name} must be a positive int, got {value!r}")
        if max_splits > MAX_SPLITS:
            raise ValueError(f"AttentionWorkspace: max_splits must be <= {MAX_SPLITS}, got {max_splits}")
        self.max_num_tokens, self.num_q_heads, self.head_dim = max_num_tokens, num_q_heads, head_dim
        self.max_splits = max_splits
        self.part_out = torch.empty(max_splits, max_num_tokens, num_q_heads, head_dim, dtype=torch.float32,
                                    device=device)
        self.part_lse = torch.empty(max_splits, max_num_tokens, num_q_heads, dtype=torch.float32, device=device)

    @property
    def device(self) -> torch.device:
        return self.part_out.device

    def check(self, num_tokens: int, num_q_heads: int, head_dim: int, device: torch.device) -> None:
        if (num_q_heads, head_dim) != (self.num_q_heads, self.head_dim):
            raise ValueError(f"workspace is for {self.num_q_heads} heads x head_dim {self.head_dim}, "
                             f"q has {num_q_heads} x {head_dim}")
        if num_tokens > self.max_num_tokens:
            raise ValueError(f"workspace holds {self.max_num_tokens} tokens, q has {num_tokens}")
        if device != self.device:
            raise ValueError(f"workspace is on {self.device}, q is on {device}")


def _check_tensor(name, t, ndim, dtypes=None):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
    if dtypes is not None and t.dtype not in dtypes:
        names = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} must have dtype {names}; got {str(t.dtype).replace('torch.', '')}")


def check_kv_cache(q, k_cache, v_cache) -> None:
    """q [.., heads, head_dim] against k_cache / v_cache [num_blocks, block_size, num_kv_heads, head_dim]
    (both 4-D tensors): one shape and dtype for both caches, q's dtype or fp8, q's head_dim."""
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache shape {tuple(v_cache.shape)} differs from k_cache shape {tuple(k_cache.shape)}")
    if v_cache.dtype != k_cache.dtype:
        raise TypeError(f"v_cache dtype {v_cache.dtype} differs from k_cache dtype {k_cache.dtype}")
    if k_cache.dtype not in FP8_DTYPES and k_cache.dtype != q.dtype:
        raise TypeError(f"k_cache dtype {k_cache.dtype} must match q ({q.dtype}) or be float8_e4m3fn")
    if k_cache.shape[-1] != q.shape[-1]:
        raise ValueError(f"k_cache has head_dim {k_cache.shape[-1]}, q has {q.shape[-1]}")


def _check_inputs(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, alibi_slopes, sinks, out):
    _check_tensor("q", q, 3, Q_DTYPES)
    _check_tensor("k_cache", k_cache, 4, Q_DTYPES + FP8_DTYPES)
    _check_tensor("v_cache", v_cache, 4, Q_DTYPES + FP8_DTYPES)
    _check_tensor("block_table", block_table, 2, (torch.int32,))
    _check_tensor("seq_lens", seq_lens, 1, (torch.int32,))
    _check_tensor("cu_seqlens_q", cu_seqlens_q, 1, (torch.int32,))
    num_tokens, num_q_heads, head_dim = q.shape
    num_blocks, block_size, num_kv_heads, _ = k_cache.shape
    check_kv_cache(q, k_cache, v_cache)
    if head_dim not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {SUPPORTED_HEAD_DIMS}, got {head_dim}")
    if num_q_heads % num_kv_heads != 0:
        raise ValueError(f"num_q_heads ({num_q_heads}, q.shape[1]) must be divisible by num_kv_heads "
                         f"({num_kv_heads}, k_cache.shape[2])")
    if block_size < 16 or block_size % 16 != 0:
        raise ValueError(f"block size (k_cache.shape[1]) must be a positive multiple of 16, got {block_size}")
    num_seqs = seq_lens.shape[0]
    if block_table.shape[0] != num_seqs:
        raise ValueError(f"block_table has {block_table.shape[0]} rows, seq_lens has {num_seqs} sequences")
    if cu_seqlens_q.shape[0] != num_seqs + 1:
        raise ValueError(f"cu_seqlens_q must have num_seqs + 1 = {num_seqs + 1} entries, got {cu_seqlens_q.shape[0]}")
    if num_seqs == 0 and num_tokens:
        raise ValueError(f"seq_lens is empty, q has {num_tokens} tokens: a token needs a sequence")
    if alibi_slopes is not None:
        _check_tensor("alibi_slopes", alibi_slopes, 1, (torch.float32,))
        if alibi_slopes.shape[0] != num_q_heads:
            raise ValueError(f"alibi_slopes must have num_q_heads = {num_q_heads} entries, got {alibi_slopes.shape[0]}")
    if sinks is not None:
        _check_tensor("sinks", sinks, 1, (torch.float32,))
        if sinks.shape[0] != num_q_heads:
            raise ValueError(f"sinks must have num_q_heads = {num_q_heads} entries, got {sinks.shape[0]}")
    if out is not None:
        _check_tensor("out", out, 3, (q.dtype,))
        if out.shape != q.shape:
            raise ValueError(f"out shape {tuple(out.shape)} must equal q shape {tuple(q.shape)}")
    named = [("q", q), ("k_cache", k_cache), ("v_cache", v_cache), ("block_table", block_table),
             ("seq_lens", seq_lens), ("cu_seqlens_q", cu_seqlens_q), ("alibi_slopes", alibi_slopes),
             ("sinks", sinks), ("out", out)]
    for name, t in named:
        if t is not None and t.device != q.device:
            raise ValueError(f"{name} is on {t.device}, q is on {q.device}: all tensors must share one device")
    for name, t in named:
        if t is not None and t.numel() > 0 and t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension (stride {t.stride(-1)})")
    if seq_lens.stride(0) != 1 or cu_seqlens_q.stride(0) != 1:
        raise ValueError("seq_lens and cu_seqlens_q must be contiguous")


def _check_values(k_cache, block_table, seq_lens, cu_seqlens_q, num_tokens, q_start_pos=None, window=None):
    """validate=True: checks that read tensor values (syncs with the device). Without ``q_start_pos`` the
    new tokens are the last keys, so no sequence is shorter than its query. With a ``window``, the page ids
    wholly before a sequence's first query's window are not read, so not checked."""
    num_blocks, block_size = k_cache.shape[:2]
    cu = cu_seqlens_q.cpu()
    lens = seq_lens.cpu().long()
    q_lens = (cu[1:] - cu[:-1]).long()
    if int(cu[0]) != 0 or int(cu[-1]) != num_tokens:
        raise ValueError(f"cu_seqlens_q must start at 0 and end at num_tokens = {num_tokens}, "
                         f"got {int(cu[0])} .. {int(cu[-1])}")
    if bool((q_lens < 0).any()):
        raise ValueError("cu_seqlens_q must be non-decreasing")
    if bool((lens < 0).any()):
        s = int((lens < 0).nonzero()[0])
        raise ValueError(f"seq_lens[{s}] = {int(lens[s])} is negative")
    short = (lens < (q_lens if q_start_pos is None else 0)).nonzero()
    if short.numel():
        s = int(short[0])
        raise ValueError(f"seq_lens[{s}] = {int(lens[s])} is shorter than its query length {int(q_lens[s])}")
    first = lens - q_lens if q_start_pos is None else q_start_pos.cpu().long()
    if q_start_pos is not None and bool((first + q_lens > 2**31 - 1).any()):
        s = int((first + q_lens > 2**31 - 1).nonzero()[0])
        raise ValueError(f"q_start_pos[{s}] = {int(first[s])} puts its last query ({int(q_lens[s])} of them) past "
                         f"the int32 positions")
    pages = (lens + block_size - 1) // block_size
    if bool((pages > block_table.shape[1]).any()):
        s = int((pages > block_table.shape[1]).nonzero()[0])
        raise ValueError(f"seq_lens[{s}] = {int(lens[s])} needs {int(pages[s])} pages of {block_size}, block_table "
                         f"has {block_table.shape[1]} columns")
    bt = block_table.cpu()
    cols = torch.arange(bt.shape[1])[None, :]
    used = cols < pages[:, None]
    if window is not None:  # the first key any query of the sequence sees
        used &= cols >= ((first - window + 1).clamp(min=0) // block_size)[:, None]
    bad = used & ((bt < 0) | (bt >= num_blocks))
    if bool(bad.any()):
        s, j = (int(i) for i in bad.nonzero()[0])
        raise ValueError(f"block_table[{s}, {j}] = {int(bt[s, j])} is out of range [0, {num_blocks})")


def _positive(name: str, value, integer: bool = False, zero: bool = False):
    """``value`` as a Python float (int with ``integer``), checked: a Python or NumPy number (not a bool, not a
    tensor: reading one would sync with the device), finite, > 0 (>= 0 with ``zero``); ValueError naming
    ``name`` otherwise."""
    kind = numbers.Integral if integer else numbers.Real
    what = f"{'a non-negative' if zero else 'a positive'} {'int' if integer else 'finite number'}"
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{name} must be {what} (a Python or NumPy scalar), got {type(value).__name__} {value!r}")
    if not (value >= 0 if zero else value > 0) or not math.isfinite(value):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return int(value) if integer else float(value)


def _softmax_scale_arg(softmax_scale, head_dim: int) -> float:
    """The softmax scale as a float (default 1/sqrt(head_dim)); it must be positive and finite, because the
    kernels fold it into the exponent after taking the row max over raw scores."""
    if softmax_scale is None:
        return 1.0 / math.sqrt(head_dim)
    return _positive("softmax_scale", softmax_scale)


def _scale_arg(name, scale, device):
    """(tensor or None, float) for a dequantisation scale given as float or 1-element tensor on ``device``."""
    if scale is None:
        return None, 1.0
    if isinstance(scale, torch.Tensor):
        if scale.numel() != 1:
            raise ValueError(f"{name} must be a float or a 1-element tensor, got shape {tuple(scale.shape)}")
        if scale.dtype != torch.float32:
            raise TypeError(f"{name} tensor must be float32, got {scale.dtype}")
        if scale.device != device:
            raise ValueError(f"{name} is on {scale.device}, the caches are on {device}")
        return scale, 1.0
    if not isinstance(scale, numbers.Real) or isinstance(scale, bool) or not 0 < scale < math.inf:
        raise ValueError(f"{name} must be a positive finite float or a 1-element tensor, got {scale!r}")
    return None, float(scale)


def order_arg(causal: bool, splits: int, num_seqs: int, num_tokens: int, max_seqlen_q: int, block_q: int) -> int:
    """The kernel's ORDER for one launch (see ORDER): 0 where the order cannot matter or is not served (not causal,
    split-KV, one sequence, more than ORDER_MAX_SEQS), 3 only where the host's figures say every sequence has
    max_seqlen_q query tokens (the kernel checks cu_seqlens_q itself and takes slot order where that is false)
    of more than one Q block."""
    if not causal or splits != 1 or not 2 <= num_seqs <= ORDER_MAX_SEQS:
        return 0
    if ORDER == 3:
        return 3 if num_tokens == num_seqs * max_seqlen_q and max_seqlen_q > block_q else 0
    return ORDER


def preload_arg(config: AttentionConfig, splits: int) -> int:
    """The kernel's PRELOAD for a launch. With PRELOAD_FIRST_TILE = 1: only split-KV calls of 32-key (or
    smaller) tiles at 2 stages. Measured on the H100 (bench/NOTES.md, stop 42; cold decode, the tree's
    configurations): 32-key tiles x 2 stages with splits +9% at B=1 L=8192, +2% at 32768, +12% at L=768
    (B=1 and 4); 64-key tiles x 3 stages with splits -14 to -16%; unsplit calls -0.2 to -0.6%. (Asking L2
    for the first 256 keys' rows instead lost 2-18% on the same anchors, stop 43: removed.)"""
    if PRELOAD_FIRST_TILE != 1:
        return PRELOAD_FIRST_TILE
    return 1 if splits > 1 and config.tile_n <= 32 and config.num_stages <= 2 else 0


def _splits(config: AttentionConfig, num_splits: int | None, workspace) -> int:
    """The split-KV count a call launches: the configuration's, or ``num_splits``, at most the workspace's
    (a grouped configuration's count is checked against its sequences instead: ``_check_groups``)."""
    splits = config.num_splits if num_splits is None else num_splits
    return splits if workspace is None or config.group_tiles else min(splits, workspace.max_splits)


def _check_groups(config: AttentionConfig, splits: int, max_seqlen_k: int, workspace) -> None:
    """A grouped (batch-invariant) split call must give every key group of the longest sequence a split."""
    need = key_groups(config, max_seqlen_k)
    if splits < need:
        raise ValueError(f"config.group_tiles = {config.group_tiles} with {splits} splits covers "
                         f"{splits * config.group_tiles * config.tile_n} keys, max_seqlen_k is {max_seqlen_k}: "
                         f"give num_splits >= {need} or 1")
    if workspace is not None and splits > workspace.max_splits:
        raise ValueError(f"{splits} splits of a grouped configuration need a workspace of that many splits; "
                         f"this one holds {workspace.max_splits}")


def planned_launch(q, k_cache, *, num_seqs: int, max_seqlen_q: int, max_seqlen_k: int,
                   workspace: "AttentionWorkspace | None" = None, num_splits: int | None = None,
                   **gluon_features) -> tuple[AttentionConfig, int]:
    """(configuration, split-KV count) that ``paged_attention`` without ``config`` launches for a call
    with these arguments (the Gluon kernel's ``hopper.CONFIG`` and 1 where it picks that kernel).
    Only shapes, dtypes and the device of ``q`` and ``k_cache`` are read. ``gluon_features``: the call's
    ``causal``, ``sliding_window``, ... as ``hopper.supported`` takes them. What a warm-up compiles."""
    if num_splits is None and hopper.auto_selects(q, k_cache, num_seqs=num_seqs, max_seqlen_q=max_seqlen_q,
                                                  **gluon_features):
        return hopper.CONFIG, 1
    config = _select(q, k_cache, num_seqs, max_seqlen_q, max_seqlen_k, workspace)
    return config, _splits(config, num_splits, workspace)


def _select(q, k_cache, num_seqs: int, max_seqlen_q: int, max_seqlen_k: int, workspace) -> AttentionConfig:
    num_tokens, num_q_heads, head_dim = q.shape
    return select_attention_config(
        num_tokens=num_tokens, num_seqs=num_seqs, num_q_heads=num_q_heads, num_kv_heads=k_cache.shape[2],
        head_dim=head_dim, block_size=k_cache.shape[1], max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        dtype=q.dtype, device=q.device, max_splits=MAX_SPLITS if workspace is None else workspace.max_splits,
        kv_dtype=k_cache.dtype)


def paged_attention(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, *,
                    max_seqlen_q: int | None = None, max_seqlen_k: int | None = None,
                    softmax_scale: float | None = None, causal: bool = True,
                    sliding_window: int | None = None, softcap: float | None = None,
                    alibi_slopes: torch.Tensor | None = None, sinks: torch.Tensor | None = None,
                    k_scale=None, v_scale=None, out: torch.Tensor | None = None,
                    workspace: AttentionWorkspace | None = None, num_splits: int | None = None,
                    config: AttentionConfig | None = None, validate: bool = False,
                    pdl: bool = True, q_start_pos: torch.Tensor | None = None,
                    lse: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of a variable-length batch of new query tokens over a paged KV cache.

    One launch serves prefill, chunked prefill (cached context plus new tokens) and decode sequences.

    Args:
        q: [num_tokens, num_q_heads, head_dim] fp16/bf16/fp32, the new tokens of all sequences, concatenated.
        k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim], q's dtype or float8_e4m3fn.
        block_table: [num_seqs, max_blocks_per_seq] int32, page ids of each sequence in order.
        seq_lens: [num_seqs] int32, tokens of each sequence in the cache, new ones included.
        cu_seqlens_q: [num_seqs + 1] int32, sequence s owns q[cu_seqlens_q[s]:cu_seqlens_q[s+1]].
        max_seqlen_q, max_seqlen_k: host-side upper bounds of the query and sequence lengths. Given
            both, the call does not sync with the device.
        softmax_scale: default 1/sqrt(head_dim).
        causal: query i of sequence s sits at position seq_lens[s] - q_len_s + i and sees keys <= it.
        sliding_window: W, a query at position p sees keys at positions > p - W.
        softcap: c, scores become c * tanh(scores / c).
        alibi_slopes: [num_q_heads] fp32, adds slope * (key_pos - query_pos) to the scores.
        sinks: [num_q_heads] fp32 sink logits: one more softmax term with no value.
        k_scale, v_scale: dequantisation scales (float or 1-element fp32 tensor) of fp8 caches.
        out: optional [num_tokens, num_q_heads, head_dim] output in q's dtype.
        workspace: split-KV buffers (``AttentionWorkspace``); without one, a split call allocates them.
        num_splits: override of the split-KV factor chosen by ``select_attention_config``.
        pdl: where supported (NVIDIA Hopper or newer), launch as programmatic dependent launches: each
            kernel is scheduled while the kernel before it runs and waits for it on the device. Off for a
            launch that follows a cross-stream join (or to measure what it saves).
        config: override of the whole kernel configuration (tuning).
        validate: also check block ids and lengths (reads them, so it syncs) and raise ValueError
            naming the first inconsistency.
        q_start_pos: [num_seqs] int32, the position of each sequence's first query in the coordinates
            of its keys (default seq_len - q_len: the new tokens are the last keys). Any value whose last
            query position (q_start_pos + q_len - 1) is below 2**31 - 1: with a
            sequence's keys split into parts held apart (context parallelism), the part that starts at
            global position o gets P - o for queries starting at global position P; its queries may lie
            before, inside or after its keys. seq_lens may then be shorter than the query length.
        lse: optional [num_tokens, num_q_heads] float32 output: each row's natural-log log-sum-exp of
            its visible scaled scores (the sink term included), -inf for a row that sees no key. With
            the outputs and lse of the parts of a context, out = sum_p exp(lse_p - lse) out_p with
            lse = logsumexp_p lse_p (give ``sinks`` to one part only).

    Returns:
        [num_tokens, num_q_heads, head_dim] in q's dtype (``out`` when given).

    Inconsistent metadata with ``validate=False`` (the default, which never reads the metadata on the
    host) never makes the kernels read or write outside their tensors, and shows up as NaN rows:

    - a sequence whose lengths are impossible (seq_lens[s] shorter than its query length without
      q_start_pos, or longer than a block-table row holds: block_table.shape[1] * block_size) gets NaN
      in all its rows;
    - a page id outside [0, num_blocks) read from block_table reads a page of the cache instead and
      makes NaN of the rows whose Q block read it (a decode step's whole sequence); with a sliding
      window, the pages wholly before the first key a Q block's rows see are not read, so not checked
      (a caller may free them and leave any id there);
    - cu_seqlens_q: sequence s gets NaN rows unless 0 <= cu[s-1] <= cu[s] <= cu[s+1] <= cu[s+2] <=
      num_tokens (entries that exist), cu[0] == 0 for the first sequence and cu[num_seqs] == num_tokens
      for the last. Its rows are cu[s]..cu[s+1] clamped to [0, num_tokens), from row 0 for the first
      sequence and up to num_tokens for the last, so rows no sequence claims are NaN too.

    The other sequences' rows are exact. Where decreasing entries make two sequences' ranges overlap
    beyond their neighbours', the shared rows hold either sequence's result (NaN or exact), and rows
    that the slot search maps to no program are not written (in a split call they are then merged
    from whatever the workspace holds).
    """
    _check_inputs(q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, alibi_slopes, sinks, out)
    num_tokens, num_q_heads, head_dim = q.shape
    if q_start_pos is not None:
        _check_tensor("q_start_pos", q_start_pos, 1, (torch.int32,))
        if q_start_pos.shape[0] != seq_lens.shape[0] or q_start_pos.stride(0) != 1:
            raise ValueError(f"q_start_pos must be contiguous with num_seqs = {seq_lens.shape[0]} entries, "
                             f"got shape {tuple(q_start_pos.shape)}")
        if q_start_pos.device != q.device:
            raise ValueError(f"q_start_pos is on {q_start_pos.device}, q is on {q.device}")
    if lse is not None:
        _check_tensor("lse", lse, 2, (torch.float32,))
        if tuple(lse.shape) != (num_tokens, num_q_heads) or lse.stride(1) != 1:
            raise ValueError(f"lse must be [num_tokens, num_q_heads] = [{num_tokens}, {num_q_heads}] with "
                             f"contiguous heads, got shape {tuple(lse.shape)}")
        if lse.device != q.device:
            raise ValueError(f"lse is on {lse.device}, q is on {q.device}")
    num_blocks, block_size, num_kv_heads, _ = k_cache.shape
    num_seqs = seq_lens.shape[0]
    if q.device.type == "cpu":
        if not interpreting():
            raise ValueError("q is on the CPU: CPU tensors need the Triton interpreter "
                             "(TRITON_INTERPRET=1 when tritium is first imported)")
    if sliding_window is not None:
        sliding_window = _positive("sliding_window", sliding_window, integer=True)
    scale = _softmax_scale_arg(softmax_scale, head_dim)
    if softcap is not None:
        softcap = _positive("softcap", softcap)
    for name, value in (("causal", causal), ("pdl", pdl), ("validate", validate)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be a bool, got {value!r}")
    if max_seqlen_q is not None:
        max_seqlen_q = _positive("max_seqlen_q", max_seqlen_q, integer=True, zero=True)
    if max_seqlen_k is not None:
        max_seqlen_k = _positive("max_seqlen_k", max_seqlen_k, integer=True, zero=True)
    if num_splits is not None and not (isinstance(num_splits, int) and 1 <= num_splits <= MAX_SPLITS):
        raise ValueError(f"num_splits must be an int in [1, {MAX_SPLITS}], got {num_splits!r}")
    is_fp8 = k_cache.dtype in FP8_DTYPES
    k_scale_t, k_scale_val = _scale_arg("k_scale", k_scale, q.device)
    v_scale_t, v_scale_val = _scale_arg("v_scale", v_scale, q.device)
    if (k_scale_t is None) != (v_scale_t is None):
        raise ValueError("k_scale and v_scale must both be tensors or both be floats/None")
    if not is_fp8 and (k_scale is not None or v_scale is not None):
        raise ValueError("k_scale / v_scale apply to float8 caches only; the caches are "
                         f"{str(k_cache.dtype).replace('torch.', '')}")
    scales_from_ptr = k_scale_t is not None
    if validate:
        _check_values(k_cache, block_table, seq_lens, cu_seqlens_q, num_tokens, q_start_pos, sliding_window)

    if out is None:
        out = torch.empty_like(q)
    if num_tokens == 0:
        return out
    if max_seqlen_q is None:
        max_seqlen_q = int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max())
    if max_seqlen_k is None:
        max_seqlen_k = int(seq_lens.max())

    gluon_features = dict(causal=causal, sliding_window=sliding_window, softcap=softcap, alibi_slopes=alibi_slopes,
                          sinks=sinks, k_scale=k_scale, v_scale=v_scale, q_start_pos=q_start_pos, lse=lse,
                          v_cache=v_cache)
    selected = config is None
    if selected:  # the Gluon kernel where it serves the call, else the tree's or the hand rules' choice
        config, _ = planned_launch(q, k_cache, num_seqs=num_seqs, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                                   workspace=workspace, num_splits=num_splits, **gluon_features)
    if config.kernel == "gluon":
        why = hopper.supported(q, k_cache, **gluon_features)
        if why is not None:
            raise ValueError(f"config.kernel='gluon' (the Hopper prefill kernel) {why}")
        hopper.launch(out, q, k_cache, v_cache, block_table, seq_lens, cu_seqlens_q, scale=scale,
                      max_kv_len=block_table.shape[1] * block_size)
        return out
    if workspace is not None:
        workspace.check(num_tokens, num_q_heads, head_dim, q.device)
    group = num_q_heads // num_kv_heads
    if config.block_q * group > config.block_m:  # a Q block's rows would not fit its program: rows left unwritten
        raise ValueError(f"config.block_q * (num_q_heads // num_kv_heads) = {config.block_q} * {group} must be at most "
                         f"config.block_m = {config.block_m}")
    head_pad = next_pow2(head_dim)
    dummy = q
    launch = pdl_launch(q.device, pdl)
    while True:
        splits = _splits(config, num_splits, workspace)
        if splits > 1 and config.group_tiles:
            _check_groups(config, splits, max_seqlen_k, workspace)
        if splits > 1:
            if workspace is None:
                workspace = AttentionWorkspace(num_tokens, num_q_heads, head_dim, max_splits=splits, device=q.device)
            part_out, part_lse = workspace.part_out, workspace.part_lse
        else:
            part_out, part_lse = out, out  # unused without split-KV
        # NOTE: DOT_PRECISION "ieee" for every dtype: exact fp32 products; fp16/bf16 operands compile to the same
        # sm_90 code under any precision (as checked for the fused matmul), and gfx950 (MI350X) rejects "tf32".
        grid = (num_tokens // config.block_q + num_seqs, num_kv_heads, splits)
        try:
            _paged_attention_kernel[grid](
                out, q, k_cache, v_cache,
                block_table, seq_lens, cu_seqlens_q,
                dummy if alibi_slopes is None else alibi_slopes,
                dummy if sinks is None else sinks,
                k_scale_t if scales_from_ptr else dummy,
                v_scale_t if scales_from_ptr else dummy,
                part_out, part_lse,
                dummy if q_start_pos is None else q_start_pos,
                dummy if lse is None else lse,
                q.stride(0), q.stride(1),
                out.stride(0), out.stride(1), 0 if lse is None else lse.stride(0),
                k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
                v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
                block_table.stride(0),
                part_out.stride(0), part_out.stride(1), part_out.stride(2),
                part_lse.stride(0), part_lse.stride(1),
                num_seqs, num_tokens, num_blocks, block_table.shape[1] * block_size if num_blocks else 0,
                scale, float(softcap or 0.0), int(sliding_window or 0), k_scale_val, v_scale_val,
                QPKV=group, HEAD_DIM=head_dim, HEAD_DIM_PAD=head_pad, PAGE_SIZE=block_size,
                BLOCK_M=config.block_m, BLOCK_Q=config.block_q, TILE_N=config.tile_n, IS_SPLIT=splits > 1,
                IS_CAUSAL=bool(causal), HAS_WINDOW=sliding_window is not None, HAS_SOFTCAP=softcap is not None,
                HAS_ALIBI=alibi_slopes is not None, HAS_SINKS=sinks is not None, SCALES_FROM_PTR=scales_from_ptr,
                REVERSE=bool(causal) and splits == 1, DOT_PRECISION="ieee",
                HAS_Q_START=q_start_pos is not None, WRITE_LSE=lse is not None and splits == 1,
                PRELOAD=0 if config.group_tiles else preload_arg(config, splits), GROUP_TILES=config.group_tiles,
                ORDER=order_arg(causal, splits, num_seqs, num_tokens, max_seqlen_q, config.block_q),
                MAX_SEQS=ORDER_MAX_SEQS,
                num_warps=config.num_warps, num_stages=pipeline_stages(config.num_stages), **launch,
                **register_cap(config, q.device),
            )
            break
        except OutOfResources:
            # A tree's configuration that does not fit this GPU (shared memory, registers; the tree module's
            # UNFIT lists those its sweep met): remembered, and this call runs the hand rules' instead (once:
            # if that fails too, or the caller chose the configuration, the error stands).
            if not selected:
                raise
            mark_unfit(config, head_dim=head_dim, dtype=q.dtype, kv_dtype=k_cache.dtype, device=q.device)
            fallback = _select(q, k_cache, num_seqs, max_seqlen_q, max_seqlen_k, workspace)
            if fallback == config:  # the hand rules' own configuration
                raise
            config, selected = fallback, False
    if splits > 1:
        _merge_splits_kernel[(num_tokens, num_q_heads)](
            out, part_out, part_lse, dummy if lse is None else lse,
            out.stride(0), out.stride(1), 0 if lse is None else lse.stride(0),
            part_out.stride(0), part_out.stride(1), part_out.stride(2),
            part_lse.stride(0), part_lse.stride(1),
            splits,
            SPLITS_PAD=next_pow2(splits), HEAD_DIM=head_dim, HEAD_DIM_PAD=head_pad, WRITE_LSE=lse is not None,
            PARALLEL_LOADS=MERGE_PARALLEL_LOADS, SEQUENTIAL=config.group_tiles > 0,
            num_warps=select_merge_warps(head_dim, splits), **pdl_launch(q.device, pdl),
        )
    return out
