"""Inline-PTX helpers shared by Triton kernels (NVIDIA sm_90+ only: callers guard them with a constexpr
that is False under the interpreter, on ROCm and on older GPUs)."""

import triton
import triton.language as tl


@triton.jit
def prefetch_rows_l2(ptrs, ROW_BYTES: tl.constexpr):
    """Ask L2 for ROW_BYTES (a multiple of 16) at each 16-byte aligned pointer of ``ptrs`` with Hopper's
    bulk prefetch (``cp.async.bulk.prefetch.L2``): no registers filled, nothing waited for, no effect on
    any value. Kernels issue it before ``gdc_wait`` for data no earlier kernel of the chain writes."""
    tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], $2;\n\tmov.u32 $0, 0;", "=r,l,r",
                              [ptrs, tl.full(ptrs.shape, ROW_BYTES, tl.int32)], dtype=tl.int32, is_pure=False,
                              pack=1)
