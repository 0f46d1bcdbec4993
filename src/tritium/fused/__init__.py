"""GEMM and GEMM + communication kernels in Triton.

    from tritium.fused import all_gather_matmul, matmul_reduce_scatter, matmul_all_reduce, matmul
    y = all_gather_matmul(a, b, comm, overlap="auto")       # all_gather(a) @ b
    y = matmul_reduce_scatter(a, b, comm, overlap="auto")   # this rank's rows of sum_r a_r @ b_r
    y = matmul_all_reduce(a, b, comm, overlap="auto")       # sum_r a_r @ b_r
    y = matmul_all_reduce_rms_norm(a, b, comm, residual, weight, eps)  # + residual, RMSNorm (decode layer)
    c = matmul(a, b, out=None)                              # tritium's GEMM: persistent, grouped, TMA
    o = distributed_paged_decode(q, k_cache, v_cache, block_table, seq_lens, comm)  # KV split by position

``overlap``: "bulk" (collective, then GEMM, or GEMM then collective), "producer_consumer" (the data moves
on a side stream while the GEMM runs, handing tiles over through per-tile flags: the copy engine for
all-gather + GEMM, a reduce kernel on other SMs for the reductions), "fused" (one persistent launch whose
programs are specialised: some move data, some compute), "auto" (measured per shape).

:mod:`tritium.fused.matmul` holds the GEMM and its ``@triton.jit`` building blocks (``matmul_operands``,
``tile_coords``, ``matmul_tile``, ``store_tile``, ``reduce_split_tile``); one module per fused op
(:mod:`~tritium.fused.all_gather_matmul`, :mod:`~tritium.fused.matmul_reduce_scatter`,
:mod:`~tritium.fused.matmul_all_reduce`, :mod:`~tritium.fused.distributed_decode`);
:mod:`~tritium.fused.workspace` their heap buffers and
flag signalling; :mod:`~tritium.fused.overlap` checks and the mode selection. References in
:mod:`tritium.fused.reference`.
"""

from tritium.fused.all_gather_matmul import all_gather_matmul
from tritium.fused.distributed_decode import DistributedDecodeWorkspace, distributed_paged_decode
from tritium.fused.matmul import CONFIGS, MatmulConfig, launch_options, matmul, select_config
from tritium.fused.matmul_all_reduce import matmul_all_reduce, matmul_all_reduce_rms_norm
from tritium.fused.matmul_reduce_scatter import matmul_reduce_scatter
from tritium.fused.overlap import OVERLAPS, select_overlap
from tritium.fused.workspace import heap_bytes

__all__ = ["matmul", "MatmulConfig", "select_config", "launch_options", "CONFIGS", "all_gather_matmul",
           "matmul_reduce_scatter", "matmul_all_reduce", "matmul_all_reduce_rms_norm", "select_overlap", "OVERLAPS",
           "heap_bytes", "distributed_paged_decode", "DistributedDecodeWorkspace"]
