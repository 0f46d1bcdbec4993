"""A ``tl.dot`` for the Triton interpreter whose rows do not depend on their position in the block.

Under ``TRITON_INTERPRET=1`` Triton computes ``tl.dot`` with ``np.matmul`` (BLAS). OpenBLAS sums a row's
products in an order that depends on where the row sits in the block (its micro-kernel treats some rows
apart): the same query row at row 0 of a Q block and at row 20 of another gets results a few ulps apart
(numpy 2.x, fp32, 64 x 64 @ 64 x 32: 34 of 64 rows). A GPU's MMA has no such dependence (measured on the
H200, ``bench/probe_invariance.py``: every row equal across tile shapes, row counts and positions), and
batch invariance rests on it. ``row_independent_dot()`` swaps the interpreter's dot for a sum of products
taken in k order for every element, so that CPU tests check the kernels' own arithmetic:

    with row_independent_dot():
        ...   # interpreted launches
"""

from __future__ import annotations

import contextlib

import numpy as np


@contextlib.contextmanager
def row_independent_dot():
    """Within the block, interpreted ``tl.dot`` calls sum each element's products in k order (fp32 or the
    accumulator's dtype), the same for every row position. A no-op where Triton is not interpreting."""
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.data.ndim != 2 or a.data.dtype.itemsize == 1 or b.data.dtype.itemsize == 1:  # 3-D, fp8: as is
            return original(self, a, b, d, input_precision, max_num_imprecise_acc)
        acc = d.data.dtype
        products = a.data.astype(acc)[:, :, None] * b.data.astype(acc)[None, :, :]   # [M, K, N]
        return interpreter.TensorHandle(products.sum(axis=1, dtype=acc) + d.data, d.dtype.scalar)

    builder.create_dot = create_dot
    try:
        yield
    finally:
        builder.create_dot = original
