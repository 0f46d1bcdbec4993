"""GEMM + all-reduce: ``y = sum_r a_r @ b_r`` on every rank (the row-parallel layer: o_proj, down_proj;
decode M = 1..64 as well as prefill).

    y = matmul_all_reduce(a, b, comm, overlap="auto")   # a [M, k], b [k, N] -> y [M, N]

``overlap``: ``"bulk"`` (tritium's GEMM, then tritium's all-reduce, in place), ``"producer_consumer"``
and ``"fused"`` (the kernels of :mod:`tritium.fused.matmul_reduce_scatter` with every tile pushed to
every rank, and every rank reducing every tile), ``"auto"``. Each rank's product is rounded to the output
dtype before the fp32 sum (as bulk does), in rank order, so every rank gets the same bits.
Reference: :func:`tritium.fused.reference.matmul_all_reduce`.
"""

from __future__ import annotations

import torch

from tritium.collectives import Communicator
from tritium.fused.matmul import matmul
from tritium.fused.matmul_reduce_scatter import launch_matmul_reduce
from tritium.fused.overlap import check_operands, output, select_overlap


def matmul_all_reduce(a: torch.Tensor, b: torch.Tensor, comm: Communicator, overlap: str = "auto",
                      out: torch.Tensor | None = None) -> torch.Tensor:
    """``sum over ranks of a @ b``: ``a [M, k]``, ``b [k, N]`` -> ``[M, N]`` in a's dtype on every rank.
    ``out``: written in place (contiguous rows)."""
    check_operands("matmul_all_reduce", a, b, comm)
    M, K = a.shape
    N = b.shape[1]
    W = comm.world_size
    out = output(out, (M, N), a)
    mode = select_overlap("matmul_all_reduce", M, N, K, W, overlap)
    if M == 0 or N == 0:
        return out
    if mode == "bulk" or W == 1:
        matmul(a, b, out=out)
        if W > 1:
            comm.all_reduce(out, out=out)
        return out
    launch_matmul_reduce("ar", a, b, out, comm, mode, scatter=False)
    return out
