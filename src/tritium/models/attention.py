"""Attention backends of the engine: tritium's paged attention, PyTorch SDPA over gathered pages, or
(context parallelism) distributed decode over KV parts held by several ranks.

All take the per-step :class:`AttentionMetadata` built once by the runner and shared by every layer
("plan once, run per layer"). The KV cache of one layer is a pair of tensors
``[num_blocks, block_size, num_kv_heads, head_dim]``.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from tritium.attention import AttentionWorkspace, hopper, paged_attention, write_kv_cache
from tritium.attention.config import AttentionConfig, key_groups, next_pow2
from tritium.attention.launcher import SUPPORTED_HEAD_DIMS, planned_launch  # (SUPPORTED_HEAD_DIMS: the engine's)
from tritium.fused import DistributedDecodeWorkspace, distributed_paged_decode
from tritium.ops import reference
from tritium.runtime import num_sms


@dataclasses.dataclass
class AttentionMetadata:
    """Per-step batch layout.

    - slot_mapping: [T] int64, cache slot (block * block_size + offset) of each new token; -1 skips.
    - block_table: [S, max_blocks] int32, pages of each sequence.
    - seq_lens: [S] int32, tokens of each sequence in the cache after this step.
    - cu_seqlens_q: [S + 1] int32, sequence s owns tokens cu_seqlens_q[s]:cu_seqlens_q[s + 1].
    - max_seqlen_q, max_seqlen_k: host ints (upper bounds), so no kernel needs a host sync.
    - q_lens_host, seq_lens_host: host lists (the torch backend loops over sequences in prefill); None
      for CUDA-graph decode, where every sequence has one query token.
    - q_start_pos: context parallel steps run per part (see :class:`DistributedDecodeAttention`): [S]
      int32, the position of each sequence's first new token relative to the start of this rank's part
      of its keys (negative where the part starts after it); ``seq_lens`` is then the part's length.
    - window: the same step as the layers with a sliding window see it when they keep their K/V in a pool
      of their own (the runner's ``window_cache``): its ``slot_mapping`` and ``block_table``; None: every
      layer reads this one.
    """

    slot_mapping: torch.Tensor
    block_table: torch.Tensor
    seq_lens: torch.Tensor
    cu_seqlens_q: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int
    q_lens_host: list[int] | None = None
    seq_lens_host: list[int] | None = None
    q_start_pos: torch.Tensor | None = None
    window: AttentionMetadata | None = None


class TritonAttention:
    """tritium's ``write_kv_cache`` + ``paged_attention``.

    One split-KV workspace, shared by all layers, holds ``max_decode_tokens`` tokens (the largest decode
    batch, so CUDA-graph steps never allocate); larger batches are prefill-like, which do not split KV,
    and run without it.

    ``invariant``: a batch-invariant configuration (:func:`tritium.attention.config.invariant_config`) that
    every call runs, split into its key groups or one program walking them: a row's output has the same
    bits in any batch (``EngineConfig.batch_invariant``).
    """

    name = "triton"

    def __init__(self, max_decode_tokens: int, num_q_heads: int, head_dim: int, device: torch.device,
                 sliding_window: int | None = None, *, pdl: bool = False, num_splits: int | None = None,
                 invariant: AttentionConfig | None = None, softcap: float | None = None,
                 workspace: AttentionWorkspace | None = None):
        if invariant is not None and not invariant.group_tiles:
            raise ValueError(f"invariant must be a grouped configuration (invariant_config), got {invariant}")
        self.invariant = invariant
        # one workspace for every layer: layers of another window share another's (they run one at a time)
        self.workspace = workspace or AttentionWorkspace(max_decode_tokens, num_q_heads, head_dim, device=device)
        self._sms = num_sms(device)
        self.sliding_window = sliding_window
        self.softcap = softcap  # scores become softcap * tanh(scores / softcap) (Gemma 2)
        # pdl: whether the engine launches attention by PDL (EngineConfig.attention_pdl, on: 0.06 ms faster
        # a batch-1 Llama-3-8B step on the H100, bench/NOTES.md); the ablation suite compares both.
        self.pdl = pdl
        self.num_splits = num_splits  # split-KV override (None: select_attention_config's choice)

    def __call__(self, q, k, v, k_cache, v_cache, meta: AttentionMetadata, scale: float,
                 kv_scale: torch.Tensor | None = None) -> torch.Tensor:
        """q: [T, Hq, D], k/v: [T, Hkv, D] new tokens -> [T, Hq, D]. ``kv_scale``: a float8 cache's [2] fp32
        scales (k's, v's) on the device."""
        write_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping, **_scale_kw(kv_scale))
        return self.attend(q, k_cache, v_cache, meta, scale, kv_scale)

    def attend(self, q, k_cache, v_cache, meta: AttentionMetadata, scale: float,
               kv_scale: torch.Tensor | None = None) -> torch.Tensor:
        """Attention over a cache that already holds this step's keys and values (written by
        ``write_kv_cache`` or the engine's fused ``rope_write_kv``). q: [T, Hq, D] -> [T, Hq, D]."""
        return paged_attention(q, k_cache, v_cache, meta.block_table, meta.seq_lens, meta.cu_seqlens_q,
                               max_seqlen_q=meta.max_seqlen_q, max_seqlen_k=meta.max_seqlen_k,
                               softmax_scale=scale, sliding_window=self.sliding_window, softcap=self.softcap,
                               pdl=self.pdl, **_scale_kw(kv_scale),
                               **self._split_args(q.shape[0], meta.max_seqlen_k, k_cache.shape[2]))

    def _split_args(self, num_tokens: int, max_seqlen_k: int = 0, num_kv_heads: int = 1) -> dict:
        """The workspace and split override of a ``num_tokens`` call: decode-sized batches only.

        Invariant: the configuration too. Split or not, a row gets the same bits, so the choice is made for
        speed: a batch that fits the workspace and gives fewer (token, KV head) programs than the GPU has
        SMs is split into the key groups of its longest sequence (the sequential merge folds them); larger
        batches and prefill-sized calls walk the groups in one program (bench/probe_invariance.py, stop 54,
        H200, GQA 32/8: B=16 L=4096 133 us split vs 141 in one program, B=64 L=2048 253 vs 163)."""
        small = num_tokens <= self.workspace.max_num_tokens
        if self.invariant is not None:
            cfg = self.invariant
            if not small:
                return dict(config=cfg, workspace=None, num_splits=1)
            groups = key_groups(cfg, max_seqlen_k)
            split = groups > 1 and num_tokens * num_kv_heads < self._sms
            return dict(config=cfg, workspace=self.workspace if split else None, num_splits=groups if split else 1)
        return dict(workspace=self.workspace if small else None, num_splits=self.num_splits if small else None)

    def warmup_plan(self, q, k_cache, batches, block_table_width: int | None = None) -> dict:
        """{compile key: the first of ``batches`` that gives it} for what ``attend`` would launch on each of
        ``batches`` (``warmup_batches``). The key is what a compile depends on: the configuration's tiles,
        warps and stages, split-KV or not, and the merge kernel's padded split count (the Gluon kernel: its
        fixed configuration, and with ``block_table_width`` pages a row, which of its two kernels
        ``hopper.launch`` runs). ``q``: [tokens, Hq, D] with at least as many tokens as the largest batch (only
        its shape, dtype and device are read)."""
        plan = {}
        # which Gluon kernel hopper.launch runs depends on the table's keys a row only
        persistent = hopper.persistent_by_default(block_table_width * k_cache.shape[1]) if block_table_width else None
        if self.invariant is not None:  # one configuration: its split and its one-program kernel
            for q_lens, seq_len in batches:
                args = self._split_args(sum(q_lens), seq_len, k_cache.shape[2])
                plan.setdefault((args["config"], args["workspace"] is not None), (q_lens, seq_len))
            return plan
        for q_lens, seq_len in batches:
            tokens = q[:sum(q_lens)]
            config, splits = planned_launch(tokens, k_cache, num_seqs=len(q_lens), max_seqlen_q=max(q_lens),
                                            max_seqlen_k=seq_len, sliding_window=self.sliding_window,
                                            softcap=self.softcap, **self._split_args(tokens.shape[0]))
            key = (dataclasses.replace(config, num_splits=1), splits > 1, next_pow2(splits) if splits > 1 else 1,
                   persistent if config.kernel == "gluon" else None)
            plan.setdefault(key, (q_lens, seq_len))
        return plan

    def warmup(self, k_cache, v_cache, batches, *, block_table_width: int, dtype: torch.dtype) -> int:
        """Run one batch for every kernel configuration that ``attend`` would launch for ``batches``
        (``warmup_plan``), so that each is compiled (or loaded from Triton's cache) now rather than inside
        a request. Reads page 0 of the caches; writes nothing but scratch outputs. Returns the number of
        configurations run. The batches are built as the runner builds its own (block tables
        ``block_table_width`` pages wide, this backend's workspace where ``attend`` uses it), so each launch
        has the specialisation (argument alignment, constexprs) of the real ones."""
        device = k_cache.device
        # a float8 cache is read with scale tensors, as the model passes them (floats compile another variant)
        kv_scale = torch.ones(2, device=device) if k_cache.dtype == torch.float8_e4m3fn else None
        most = max(sum(q_lens) for q_lens, _ in batches)
        q_all = torch.zeros(most, self.workspace.num_q_heads, self.workspace.head_dim, dtype=dtype, device=device)
        plan = self.warmup_plan(q_all, k_cache, batches, block_table_width)
        for q_lens, seq_len in plan.values():
            n = len(q_lens)
            cu = torch.zeros(n + 1, dtype=torch.int32)
            cu[1:] = torch.tensor(q_lens, dtype=torch.int32).cumsum(0)
            meta = AttentionMetadata(
                slot_mapping=torch.full((int(cu[-1]),), -1, dtype=torch.int64, device=device),
                block_table=torch.zeros(n, block_table_width, dtype=torch.int32, device=device),
                seq_lens=torch.full((n,), seq_len, dtype=torch.int32, device=device),
                cu_seqlens_q=cu.to(device), max_seqlen_q=max(q_lens), max_seqlen_k=seq_len,
                q_lens_host=list(q_lens), seq_lens_host=[seq_len] * n)
            self.attend(q_all[:int(cu[-1])], k_cache, v_cache, meta, self.workspace.head_dim ** -0.5, kv_scale)
        return len(plan)


def _grid(hi: int) -> list[int]:
    """1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, ... (four points an octave) up to ``hi``, and ``hi``."""
    return sorted({hi} | {v for i in range(hi.bit_length()) for v in ((4 << i) >> 2, (5 << i) >> 2, (6 << i) >> 2,
                                                                    (7 << i) >> 2) if 1 <= v <= hi})


def warmup_batches(max_num_seqs: int, max_model_len: int, max_num_batched_tokens: int
                   ) -> list[tuple[tuple[int, ...], int]]:
    """Batches an engine with these limits runs, as (query tokens of each sequence, sequence length):
    decode batches, one prefill chunk beside decoding sequences, and equal chunks within the step's token
    budget, with sequence counts, chunk lengths and sequence lengths on a grid of four points an octave up
    to each limit (sequence lengths also one past each point). The attention configurations are chosen on
    these same features (batch size, tokens, longest query, longest sequence), which is what lets a warm-up
    over them meet the configurations real steps use."""
    budget = max(max_num_batched_tokens, max_num_seqs)
    # sequence lengths also one past each grid point: split counts step where a length crosses a key tile
    # (the grid's points are multiples of tiles), e.g. 2 splits of 128-key tiles from 321 keys on
    seq_lens = sorted({v for g in _grid(max_model_len) for v in (g, g + 1) if v <= max_model_len})
    out = []
    for n in _grid(max_num_seqs):
        for seq_len in seq_lens:
            out.append(((1,) * n, seq_len))
            for chunk in _grid(min(budget, seq_len)):
                if chunk == 1:
                    continue
                if chunk + n - 1 <= budget:
                    out.append(((chunk,) + (1,) * (n - 1), seq_len))
                if n > 1 and chunk * n <= budget:
                    out.append(((chunk,) * n, seq_len))
    return out


class DistributedDecodeAttention:
    """Context parallelism: each sequence's keys are spread over the communicator's ranks.

    The runner gives each rank its view of the step (``slot_mapping`` is -1 for tokens another rank
    stores), in one of two layouts:

    - decode steps (one new token per sequence): ``block_table`` / ``seq_lens`` have one row per token,
      this rank's pages of its sequence and how many of the keys it sees lie in this rank's part;
      :func:`tritium.fused.distributed_paged_decode` (one workspace, shared by all layers, holds
      ``max_rows`` rows, so a call neither allocates nor syncs: CUDA-graph decode steps);
    - steps with prefill (``meta.q_start_pos`` set): one row per sequence, its pages on this rank, the
      length of its part and where its new tokens sit relative to the part. Each rank runs
      ``paged_attention`` over its part (causal, windows in the part's coordinates) with each row's
      log-sum-exp, the parts are all-gathered (``all_gather``, torch.distributed: prefill messages are
      large) and merged, so a T-token chunk reads each part's keys once per query tile, not once per token.

    ``q`` is the same on every rank (the whole model runs on every rank); so is the output.
    Constructing it is collective (the workspace).
    """

    name = "context_parallel"

    def __init__(self, comm, max_rows: int, num_q_heads: int, head_dim: int, sliding_window: int | None = None, *,
                 mode: str = "fused", triton_write: bool = True, all_gather=None):
        self.comm, self.mode, self.sliding_window = comm, mode, sliding_window
        self.workspace = DistributedDecodeWorkspace(comm, max_rows, num_q_heads, head_dim)
        self.triton_write = triton_write  # False: a torch scatter (the CPU, where Triton is interpreted)
        self.all_gather = all_gather  # x [n, ...] -> [world * n, ...]: the prefill parts' exchange

    def __call__(self, q, k, v, k_cache, v_cache, meta: AttentionMetadata, scale: float) -> torch.Tensor:
        """q: [T, Hq, D], k/v: [T, Hkv, D] new tokens -> [T, Hq, D]; this rank stores its tokens' K/V."""
        if self.triton_write:
            write_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping)
        else:
            _scatter_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        return self.attend(q, k_cache, v_cache, meta, scale)

    @property
    def prefill_parts(self) -> bool:
        """Whether steps with prefill run per part (the runner then makes one row per sequence)."""
        return self.all_gather is not None

    def attend(self, q, k_cache, v_cache, meta: AttentionMetadata, scale: float) -> torch.Tensor:
        if meta.q_start_pos is not None:
            return self._attend_parts(q, k_cache, v_cache, meta, scale)
        return distributed_paged_decode(q, k_cache, v_cache, meta.block_table, meta.seq_lens, self.comm,
                                        softmax_scale=scale, sliding_window=self.sliding_window,
                                        workspace=self.workspace, mode=self.mode)

    def _attend_parts(self, q, k_cache, v_cache, meta: AttentionMetadata, scale: float) -> torch.Tensor:
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:2], dtype=torch.float32, device=q.device)
        paged_attention(q, k_cache, v_cache, meta.block_table, meta.seq_lens, meta.cu_seqlens_q,
                        max_seqlen_q=meta.max_seqlen_q, max_seqlen_k=max(meta.max_seqlen_k, 1),
                        softmax_scale=scale, sliding_window=self.sliding_window, q_start_pos=meta.q_start_pos,
                        lse=lse, out=out)
        return merge_parts(self.all_gather(torch.cat([out.float(), lse[..., None]], dim=-1)), self.comm.world_size,
                           q.dtype)


class TorchContextParallelAttention:
    """Context parallelism in PyTorch (the CPU's path, as :class:`TorchAttention` is one rank's): each rank
    computes every row's attention over its part of the keys with its log-sum-exp, the parts are
    all-gathered (``all_gather``: ``x [n, ...]`` of every rank in rank order -> ``[world_size * n, ...]``,
    torch.distributed) and merged: ``out = sum_r exp(lse_r - m) o_r / sum_r exp(lse_r - m)``,
    ``m = max_r lse_r``. Rows and metadata as in :class:`DistributedDecodeAttention`."""

    name = "context_parallel_torch"

    def __init__(self, rank: int, world_size: int, all_gather, sliding_window: int | None = None):
        self.rank, self.world_size, self.all_gather, self.sliding_window = rank, world_size, all_gather, sliding_window

    def __call__(self, q, k, v, k_cache, v_cache, meta: AttentionMetadata, scale: float) -> torch.Tensor:
        _scatter_kv(k, v, k_cache, v_cache, meta.slot_mapping)
        return self.attend(q, k_cache, v_cache, meta, scale)

    def attend(self, q, k_cache, v_cache, meta: AttentionMetadata, scale: float) -> torch.Tensor:
        T, hq, d = q.shape
        _, block_size, hkv, _ = k_cache.shape
        lens = meta.seq_lens.long()                                                         # [T]
        table = meta.block_table.long()
        keys = k_cache[table].reshape(T, -1, hkv, d).float().repeat_interleave(hq // hkv, dim=2)  # [T, L, Hq, D]
        vals = v_cache[table].reshape(T, -1, hkv, d).float().repeat_interleave(hq // hkv, dim=2)
        k_pos = torch.arange(keys.shape[1], device=q.device)[None, :]
        visible = k_pos < lens[:, None]                                                    # [T, L]
        if self.sliding_window is not None:  # the query's position relative to this part: sum_{r' >= r} lens - 1
            everyone = self.all_gather(meta.seq_lens.contiguous()).view(self.world_size, T).long()
            q_pos = everyone[self.rank:].sum(0) - 1
            visible &= k_pos > (q_pos - self.sliding_window)[:, None]
        scores = torch.einsum("thd,tlhd->thl", q.float(), keys) * scale
        scores = scores.masked_fill(~visible[:, None, :], float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)                                              # [T, Hq], -inf: no key
        probs = torch.exp(scores - lse.clamp_min(torch.finfo(torch.float32).min)[..., None])
        part = torch.cat([torch.einsum("thl,tlhd->thd", probs, vals), lse[..., None]], dim=-1)  # [T, Hq, D + 1]
        return merge_parts(self.all_gather(part), self.world_size, q.dtype)


def merge_parts(parts: torch.Tensor, world_size: int, dtype: torch.dtype) -> torch.Tensor:
    """``parts [R * T, Hq, D + 1]`` fp32, every rank's ``[o_r, lse_r]`` of the same T rows (rank order; lse
    natural-log, -inf where a part holds no key of the row) -> ``sum_r exp(lse_r - m) o_r / sum_r
    exp(lse_r - m)``, ``m = max_r lse_r``, as ``[T, Hq, D]`` in ``dtype``."""
    _, hq, d1 = parts.shape
    parts = parts.view(world_size, -1, hq, d1)
    lses = parts[..., d1 - 1]
    weights = torch.exp(lses - lses.max(0).values.clamp_min(torch.finfo(torch.float32).min))  # [R, T, Hq]
    terms = torch.where(weights[..., None] > 0, weights[..., None] * parts[..., :d1 - 1], 0.0)  # no key: no term
    return (terms.sum(0) / weights.sum(0).clamp_min(1e-30)[..., None]).to(dtype)


def _scale_kw(kv_scale: torch.Tensor | None) -> dict:
    """``write_kv_cache`` / ``paged_attention``'s k_scale and v_scale from a [2] scale tensor (None: none)."""
    return {} if kv_scale is None else dict(k_scale=kv_scale[0:1], v_scale=kv_scale[1:2])


def _dequant(pages: torch.Tensor, q: torch.Tensor, scale: torch.Tensor | None = None) -> torch.Tensor:
    """Gathered pages of a float8 cache in q's dtype (times ``scale``, a 1-element tensor; None: 1); others as
    they are."""
    if pages.dtype != torch.float8_e4m3fn:
        return pages
    return pages.to(q.dtype) if scale is None else (pages.float() * scale).to(q.dtype)


def _scatter_kv(k, v, k_cache, v_cache, slot_mapping, kv_scale: torch.Tensor | None = None) -> None:
    """Write k/v [T, Hkv, D] to their cache slots; skipped slots (< 0) go to the last page, which the runner
    reserves as scratch (a static-shape scatter: CUDA-graph safe, no boolean indexing)."""
    num_blocks, block_size, hkv, d = k_cache.shape
    idx = torch.where(slot_mapping >= 0, slot_mapping, torch.full_like(slot_mapping, (num_blocks - 1) * block_size))
    for i, (cache, x) in enumerate(((k_cache, k), (v_cache, v))):
        x = reference.to_cache(x, cache.dtype, None if kv_scale is None else kv_scale[i])  # fp8: saturated
        if cache.dtype == torch.float8_e4m3fn:  # (no index_copy_ of float8): as bytes
            cache, x = cache.view(torch.uint8), x.view(torch.uint8)
        cache.view(-1, hkv, d).index_copy_(0, idx, x)


class TorchAttention:
    """PyTorch path: scatter the new K/V into the pages, gather each sequence's pages, run SDPA.

    The cache's last page must be scratch (never in a block table): skipped slots are written there.

    Decode batches (every query length 1) run as one padded SDPA call over ``block_table``'s full width
    with a length mask (static shapes, CUDA-graph safe); other batches loop over sequences.
    """

    name = "torch"

    def __init__(self, sliding_window: int | None = None, softcap: float | None = None):
        self.sliding_window = sliding_window
        self.softcap = softcap  # scores become softcap * tanh(scores / softcap): explicit softmax, not SDPA

    def __call__(self, q, k, v, k_cache, v_cache, meta: AttentionMetadata, scale: float,
                 kv_scale: torch.Tensor | None = None) -> torch.Tensor:
        """``kv_scale``: a float8 cache's [2] scales (k's, v's): stored x / scale, read back times it."""
        # skipped slots (CUDA-graph padding): scratch
        _scatter_kv(k, v, k_cache, v_cache, meta.slot_mapping, kv_scale)
        scales = (None, None) if kv_scale is None else (kv_scale[0:1], kv_scale[1:2])
        if meta.q_lens_host is None or meta.max_seqlen_q == 1:
            return self._decode(q, k_cache, v_cache, meta, scale, scales)
        return self._varlen(q, k_cache, v_cache, meta, scale, scales)

    def _mask(self, q_pos: torch.Tensor, k_pos: torch.Tensor, seq_len) -> torch.Tensor:
        """[..., Tq, Tk] bool: key visible to query (causal, in range, inside the window)."""
        m = (k_pos <= q_pos) & (k_pos < seq_len)
        if self.sliding_window is not None:
            m &= k_pos > q_pos - self.sliding_window
        return m

    def _sdpa(self, q, keys, vals, mask, scale):
        """Grouped SDPA ``[..., Hq, Tq, D]`` over ``[..., Hkv, Tk, D]`` with a bool mask; with a softcap the
        scores are capped before the mask (fp32 softmax, as transformers' eager attention)."""
        if self.softcap is None:
            return F.scaled_dot_product_attention(q, keys, vals, attn_mask=mask, scale=scale, enable_gqa=True)
        group = q.shape[-3] // keys.shape[-3]
        keys, vals = keys.repeat_interleave(group, dim=-3), vals.repeat_interleave(group, dim=-3)
        scores = torch.matmul(q, keys.transpose(-1, -2)) * scale
        scores = torch.tanh(scores / self.softcap) * self.softcap
        probs = torch.softmax(scores.masked_fill(~mask, float("-inf")).float(), dim=-1).to(vals.dtype)
        return torch.matmul(probs, vals)

    def _decode(self, q, k_cache, v_cache, meta, scale, scales):
        S = meta.seq_lens.shape[0]
        _, block_size, hkv, d = k_cache.shape
        # Eager steps gather only the pages in use; graph-captured ones (max_seqlen_k = max_model_len) all.
        table = meta.block_table[:, : -(-meta.max_seqlen_k // block_size)].long()
        keys = _dequant(k_cache[table], q, scales[0]).reshape(S, -1, hkv, d).transpose(1, 2)  # [S, Hkv, L, D]
        vals = _dequant(v_cache[table], q, scales[1]).reshape(S, -1, hkv, d).transpose(1, 2)
        L = keys.shape[2]
        seq_lens = meta.seq_lens.long()[:, None, None, None]                              # [S, 1, 1, 1]
        k_pos = torch.arange(L, device=q.device)[None, None, None, :]
        mask = self._mask(seq_lens - 1, k_pos, seq_lens)                                  # [S, 1, 1, L]
        out = self._sdpa(q[:, :, None, :].to(keys.dtype), keys, vals, mask, scale)          # [S, Hq, 1, D]
        return out[:, :, 0, :].to(q.dtype)

    def _varlen(self, q, k_cache, v_cache, meta, scale, scales):
        _, block_size, hkv, d = k_cache.shape
        out = torch.empty_like(q)
        start = 0
        for s, (q_len, seq_len) in enumerate(zip(meta.q_lens_host, meta.seq_lens_host)):
            if q_len == 0:
                continue
            pages = meta.block_table[s, : (seq_len + block_size - 1) // block_size].long()
            keys = _dequant(k_cache[pages], q, scales[0]).reshape(-1, hkv, d)[:seq_len].transpose(0, 1)
            vals = _dequant(v_cache[pages], q, scales[1]).reshape(-1, hkv, d)[:seq_len].transpose(0, 1)
            qs = q[start:start + q_len].transpose(0, 1)                                       # [Hq, Tq, D]
            q_pos = torch.arange(seq_len - q_len, seq_len, device=q.device)[:, None]
            k_pos = torch.arange(seq_len, device=q.device)[None, :]
            o = self._sdpa(qs, keys, vals, self._mask(q_pos, k_pos, seq_len), scale)
            out[start:start + q_len] = o.transpose(0, 1)
            start += q_len
        return out
