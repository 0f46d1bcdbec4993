"""Kernel helpers for float8 stores, shared by the attention and ops kernels (imported after
:func:`tritium.runtime.select_backend`: ``@triton.jit`` decides between compiling and interpreting as it
decorates)."""

import triton
import triton.language as tl


@triton.jit
def e4m3_exact(x, FP8_MAX: tl.constexpr):
    """fp32 ``x`` as float8_e4m3fn (saturated to +-FP8_MAX, nearest, ties to even), encoded with integer
    arithmetic and bitcast: what a kernel stores into a float8 tensor under the interpreter, whose own
    conversion drops the carry of a rounding into the exponent (126.4 -> 64, not 128) and makes no
    subnormals (Triton 3.6). Compiled kernels convert in hardware and do not call this."""
    a = tl.minimum(tl.abs(x), FP8_MAX)
    bits = a.to(tl.int32, bitcast=True)
    normal = ((bits + 0x7FFFF + ((bits >> 20) & 1)) >> 20) - ((127 - 7) << 3)  # rebiased exponent, 3 bits
    sub = ((a * 512.0 + 8388608.0) - 8388608.0).to(tl.int32)                 # multiples of 2^-9, to even
    code = tl.where(a < 0.015625, sub, normal)
    code = tl.where(x.to(tl.int32, bitcast=True) < 0, code | 0x80, code)
    return code.to(tl.int8).to(tl.float8e4nv, bitcast=True)
