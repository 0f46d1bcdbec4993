"""Device side of the symmetric heap: ``@triton.jit`` loads, stores and copies on any rank's memory.

Every rank's heap holds the same tensors at the same offsets, and every peer heap is mapped into
this process. A kernel receives pointers into its own (local) heap plus ``bases``, the int64 tensor
``[world_size]`` of every rank's heap base as mapped in this process (``SymmetricHeap.bases``), and
:func:`translate` moves a pointer to the same offset in another rank's heap (Iris style: Triton
refuses peer tensors as kernel arguments, so the translation happens in the kernel).

Argument order, the same for every primitive here and in ``atomics``/``sync``:

    op(pointers..., values..., rank, remote ranks..., bases, options...)

- pointers come first, source before destination; every pointer points into the CALLING rank's
  heap (a local tensor of the heap), whatever rank the data lives on;
- then the values (``value``, ``cmp``), then ``rank`` (the calling rank), then the remote rank(s)
  the op talks to, then ``bases``;
- options are keywords: ``mask``, ``other``, ``hint`` here; ``sem``, ``scope`` on atomics.

``hint`` (constexpr int, 1-D blocks) promises that the pointer block is made of runs of ``hint``
contiguous elements, each starting on a 16-byte boundary. The translated pointer loses the
contiguity and alignment Triton derived for the local one (it comes from an int64 sum), so pass it to
keep 16-byte vector loads and stores. Heap allocations are 256-byte aligned, so ``hint=BLOCK`` holds
for ``t + pid * BLOCK + tl.arange(0, BLOCK)`` whenever ``BLOCK * itemsize`` is a multiple of 16.
For 2-D blocks apply ``tl.max_contiguous`` / ``tl.multiple_of`` to ``remote(...)`` yourself.
"""

import triton
import triton.language as tl


@triton.jit
def translate(ptr, from_rank, to_rank, bases):
    """Pointer(s) ``ptr`` into ``from_rank``'s heap -> the same byte offset in ``to_rank``'s heap.

    ``ptr``: scalar or block of pointers (any element type). ``from_rank``, ``to_rank``: scalars or
    blocks broadcastable with ``ptr`` (e.g. ``tl.arange`` over ranks, every rank < world_size).
    ``bases``: int64 ``[world_size]``, heap bases as mapped in this process.
    Returns pointers of ``ptr``'s type: ``bases[to_rank] + (ptr - bases[from_rank])``.
    """
    from_base = tl.load(bases + from_rank)
    to_base = tl.load(bases + to_rank)
    offset = ptr.to(tl.int64) - from_base
    return (to_base + offset).to(ptr.dtype)


@triton.jit
def _hinted(ptr, hint: tl.constexpr):
    if hint is not None:
        # NOTE: Triton counts pointer divisibility in bytes; 16 is what a 128-bit vector access needs
        ptr = tl.max_contiguous(tl.multiple_of(ptr, 16), hint)
    return ptr


@triton.jit
def remote(ptr, rank, remote_rank, bases, hint: tl.constexpr = None):
    """``translate(ptr, rank, remote_rank, bases)`` with the alignment ``hint`` applied."""
    return _hinted(translate(ptr, rank, remote_rank, bases), hint)


@triton.jit
def load(ptr, rank, remote_rank, bases, mask=None, other=None, hint: tl.constexpr = None):
    """Values at ``ptr``'s offset in ``remote_rank``'s heap (``tl.load`` semantics, shape of ``ptr``)."""
    return tl.load(remote(ptr, rank, remote_rank, bases, hint), mask=mask, other=other)


@triton.jit
def store(ptr, value, rank, remote_rank, bases, mask=None, hint: tl.constexpr = None):
    """Write ``value`` (shape of ``ptr``) at ``ptr``'s offset in ``remote_rank``'s heap."""
    tl.store(remote(ptr, rank, remote_rank, bases, hint), value, mask=mask)


@triton.jit
def get(src_ptr, dst_ptr, rank, remote_rank, bases, mask=None, hint: tl.constexpr = None):
    """Remote to local: ``dst_ptr[...] (this rank) = src_ptr[...] (remote_rank)``, same-shape blocks."""
    value = load(src_ptr, rank, remote_rank, bases, mask=mask, hint=hint)
    tl.store(_hinted(dst_ptr, hint), value, mask=mask)


@triton.jit
def put(src_ptr, dst_ptr, rank, remote_rank, bases, mask=None, hint: tl.constexpr = None):
    """Local to remote: ``dst_ptr[...] (remote_rank) = src_ptr[...] (this rank)``, same-shape blocks."""
    value = tl.load(_hinted(src_ptr, hint), mask=mask)
    store(dst_ptr, value, rank, remote_rank, bases, mask=mask, hint=hint)


@triton.jit
def copy(src_ptr, dst_ptr, rank, src_rank, dst_rank, bases, mask=None, hint: tl.constexpr = None):
    """Any rank to any rank: ``dst_ptr[...] (dst_rank) = src_ptr[...] (src_rank)``, issued by ``rank``."""
    value = load(src_ptr, rank, src_rank, bases, mask=mask, hint=hint)
    store(dst_ptr, value, rank, dst_rank, bases, mask=mask, hint=hint)
