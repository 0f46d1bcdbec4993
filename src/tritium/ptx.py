"""Inline-PTX helpers shared by kernels of several packages (attention, ops): NVIDIA sm_90+ only.

Each is a ``@triton.jit`` function for use inside a kernel, behind a constexpr that the launcher sets only
where the instruction exists (a compiled kernel on Hopper or newer: :func:`tritium.runtime.pdl_supported`);
the interpreter and AMD targets never reach them. Imports nothing of tritium's.
"""

import triton
import triton.language as tl

_PREFETCH = tl.constexpr("cp.async.bulk.prefetch.L2.global [$1], $2;\n\tmov.u32 $0, 0;")
_PREFETCH_EVICT_LAST = tl.constexpr("{\n\t.reg .b64 policy;\n\tcreatepolicy.fractional.L2::evict_last.b64 policy, 1.0;\n\t"
                                    "cp.async.bulk.prefetch.L2.global.L2::cache_hint [$1], $2, policy;\n\tmov.u32 $0, 0;\n\t}")


@triton.jit
def prefetch_l2(ptrs, nbytes, EVICT_LAST: tl.constexpr = False):
    """Hopper's bulk L2 prefetch (``cp.async.bulk.prefetch.L2``) of ``nbytes`` (a multiple of 16, > 0) from
    each of ``ptrs`` (16-byte aligned; any shape: one prefetch an element). A hint: no register or shared
    memory filled, nothing waited for, no value changes. ``EVICT_LAST``: the lines are tagged to be evicted
    after normal ones."""
    ptrs = ptrs.to(tl.pointer_type(tl.int8))
    if EVICT_LAST:
        tl.inline_asm_elementwise(_PREFETCH_EVICT_LAST, "=r,l,r", [ptrs, nbytes.to(tl.int32)], dtype=tl.int32,
                                  is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise(_PREFETCH, "=r,l,r", [ptrs, nbytes.to(tl.int32)], dtype=tl.int32, is_pure=False,
                                  pack=1)


@triton.jit
def prefetch_span_l2(base_ptr, nbytes, LANES: tl.constexpr, EVICT_LAST: tl.constexpr = False):
    """:func:`prefetch_l2` of bytes [0, nbytes) from ``base_ptr`` (16-byte aligned, nbytes a multiple of 16) as
    LANES equal pieces (one a thread where LANES is the program's thread count)."""
    piece = (nbytes + 16 * LANES - 1) // (16 * LANES) * 16                    # bytes a lane, a multiple of 16
    offs = tl.arange(0, LANES).to(tl.int64) * piece
    size = tl.minimum(nbytes - offs, piece)
    inside = size >= 16
    # lanes past the end re-request the first piece (harmless) rather than branch: the asm has no mask
    offs = tl.where(inside, offs, 0)
    size = tl.where(inside, size, tl.minimum(nbytes, piece))
    prefetch_l2(base_ptr.to(tl.pointer_type(tl.int8)) + offs, size, EVICT_LAST)
