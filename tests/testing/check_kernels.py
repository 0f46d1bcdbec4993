"""Kernels for tests/testing/test_compile_check.py: portable ones, one that uses NVIDIA-only features only
behind constexprs the compile check sets for AMD, one with inline PTX and no portable path. ``TAG``
selects nothing: launches that differ only in it are one program after the frontend."""

import triton
import triton.language as tl


@triton.jit
def portable_kernel(x_ptr, n, BLOCK: tl.constexpr, ADD: tl.constexpr = True, TAG: tl.constexpr = 0):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if ADD:
        x += 1
    tl.store(x_ptr + offs, x, mask=offs < n)


@triton.jit
def switched_kernel(x_ptr, n, BLOCK: tl.constexpr, USE_PDL: tl.constexpr, USE_TMA: tl.constexpr):
    if USE_PDL:
        tl.extra.cuda.gdc_wait()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if USE_TMA:  # an NVIDIA-only instruction standing for the TMA path
        tl.inline_asm_elementwise("fence.proxy.async.global; mov.u32 $0, 0;", "=r", [], dtype=tl.int32,
                                  is_pure=False, pack=1)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def ptx_kernel(x_ptr, BLOCK: tl.constexpr, TAG: tl.constexpr = 0):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(x_ptr + offs, y)
