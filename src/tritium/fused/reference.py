"""PyTorch references of the fused package's ops, in fp32; tests and benchmarks import these. The
multi-rank ones take every rank's operands (lists indexed by rank)."""

from __future__ import annotations

import torch


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


def matmul_reduce_scatter(a_by_rank: list[torch.Tensor], b_by_rank: list[torch.Tensor], rank: int,
                          dtype=None) -> torch.Tensor:
    """Rank ``rank``'s rows (the ``rank``-th of ``world_size`` equal chunks) of :func:`matmul_all_reduce`."""
    total = matmul_all_reduce(a_by_rank, b_by_rank, dtype)
    rows = total.shape[0] // len(a_by_rank)
    return total[rank * rows:(rank + 1) * rows]
