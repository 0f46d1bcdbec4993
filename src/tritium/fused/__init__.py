"""GEMM and GEMM + communication kernels in Triton (issue 15).

    from tritium.fused import matmul
    c = matmul(a, b, out=None)      # a [M, K] @ b [K, N]: persistent, grouped tiles, TMA on Hopper

:mod:`tritium.fused.matmul` holds the GEMM: the kernel, its launcher, the per-shape configuration
(:func:`select_config`) and the ``@triton.jit`` building blocks the fused kernels share with it
(``matmul_operands``, ``tile_coords``, ``matmul_tile``, ``store_tile``, ``reduce_split_tile``) with
:func:`launch_options`, their meta-parameters for given tensors. References in
:mod:`tritium.fused.reference`.
"""

from tritium.fused.matmul import CONFIGS, MatmulConfig, launch_options, matmul, select_config

__all__ = ["matmul", "MatmulConfig", "select_config", "launch_options", "CONFIGS"]
