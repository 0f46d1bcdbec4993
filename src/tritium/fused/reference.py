"""PyTorch references of the fused package's ops, in fp32; tests and benchmarks import these. The
multi-rank ones take every rank's operands (lists indexed by rank)."""

from __future__ import annotations

import torch

from tritium.attention.reference import gather_kv, paged_attention_ref


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [M, K] @ b [K, N]`` -> ``[M, N]`` in fp32 (inputs upcast; no reduced-precision products)."""
    return a.float() @ b.float()


def all_gather_matmul(a_by_rank: list[torch.Tensor], b: torch.Tensor) -> torch.Tensor:
    """``cat(a_r over ranks) @ b`` in fp32: what every rank's ``all_gather_matmul`` returns for its b."""
    return torch.cat([a.float() for a in a_by_rank]) @ b.float()


def matmul_all_reduce(a_by_rank: list[torch.Tensor], b_by_rank: list[torch.Tensor], dtype=None) -> torch.Tensor:
    """``sum_r a_r @ b_r``; with ``dtype``, each rank's product is rounded to it before the fp32 sum (what
    the kernels and the bulk path compute)."""
    total = 0
    for a, b in zip(a_by_rank, b_by_rank):
        p = a.float() @ b.float()
        total = total + (p.to(dtype).float() if dtype is not None else p)
    return total


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` for x = [gate | up] ``[M, 2k]``, rounded to x's dtype after the SiLU and after the
    product (as the kernels round it)."""
    g, up = x.float().chunk(2, dim=1)
    return (torch.nn.functional.silu(g).to(x.dtype).float() * up).to(x.dtype)


def matmul_all_reduce_rms_norm(a_by_rank: list[torch.Tensor], b_by_rank: list[torch.Tensor], residual: torch.Tensor,
                               weight: torch.Tensor, eps: float, gated: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, the new residual) of ``matmul_all_reduce_rms_norm``: ``h = round(sum_r round(a_r @ b_r)) +
    residual`` (rounded), ``out = round(round(h * rsqrt(mean(h^2) + eps)) * weight)``, all in fp32 between
    the roundings to residual's dtype; ``gated``: each a_r is [gate | up] (:func:`silu_and_mul` first)."""
    dtype = residual.dtype
    xs = [silu_and_mul(a) if gated else a for a in a_by_rank]
    y = matmul_all_reduce(xs, b_by_rank, dtype).to(dtype)
    h = (y.float() + residual.float()).to(dtype)
    hf = h.float()
    normed = (hf * torch.rsqrt(hf.pow(2).mean(dim=1, keepdim=True) + eps)).to(dtype)
    return (normed.float() * weight.float()).to(dtype), h


def matmul_reduce_scatter(a_by_rank: list[torch.Tensor], b_by_rank: list[torch.Tensor], rank: int,
                          dtype=None) -> torch.Tensor:
    """Rank ``rank``'s rows (the ``rank``-th of ``world_size`` equal chunks) of :func:`matmul_all_reduce`."""
    total = matmul_all_reduce(a_by_rank, b_by_rank, dtype)
    rows = total.shape[0] // len(a_by_rank)
    return total[rank * rows:(rank + 1) * rows]


def distributed_paged_decode(q, k_caches, v_caches, block_tables, seq_lens_by_rank, *, k_scale=None,
                             v_scale=None, **kwargs) -> torch.Tensor:
    """Single-device attention on the concatenated cache: every rank's part of each sequence (lists indexed
    by rank: its ``k_cache``, ``v_cache``, ``block_table``, ``seq_lens``), dequantised to fp32 and joined in
    rank order, then :func:`tritium.attention.reference.paged_attention_ref` with one query per sequence at
    the last position (``kwargs``: its softmax_scale, sliding_window, softcap, alibi_slopes, sinks).
    Returns ``[num_seqs, num_q_heads, head_dim]`` fp32."""
    num_seqs, dev = q.shape[0], q.device
    ks, vs = (1.0 if s is None else float(s) for s in (k_scale, v_scale))
    dense_k, dense_v, totals = [], [], []
    for s in range(num_seqs):
        parts = [(gather_kv(k.float(), bt[s], int(n[s])), gather_kv(v.float(), bt[s], int(n[s])))
                 for k, v, bt, n in zip(k_caches, v_caches, block_tables, seq_lens_by_rank)]
        dense_k.append(torch.cat([p[0] for p in parts]) * ks)
        dense_v.append(torch.cat([p[1] for p in parts]) * vs)
        totals.append(dense_k[-1].shape[0])
    page = max(max(totals), 1)
    shape = (num_seqs, page, *k_caches[0].shape[2:])
    k_all, v_all = torch.zeros(shape, device=dev), torch.zeros(shape, device=dev)
    for s in range(num_seqs):
        k_all[s, :totals[s]], v_all[s, :totals[s]] = dense_k[s], dense_v[s]
    block_table = torch.arange(num_seqs, dtype=torch.int32, device=dev)[:, None]
    seq_lens = torch.tensor(totals, dtype=torch.int32, device=dev)
    cu_seqlens_q = torch.arange(num_seqs + 1, dtype=torch.int32, device=dev)
    return paged_attention_ref(q, k_all, v_all, block_table, seq_lens, cu_seqlens_q, causal=True, **kwargs)
