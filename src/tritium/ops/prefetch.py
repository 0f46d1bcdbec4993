"""Weight prefetch into L2: fill the memory system's idle windows of a decode step.

At batch 1 a decode step alternates between projections, which stream their weights at copy bandwidth,
and small latency-bound kernels (rope, KV write, attention, norms) during which DRAM sits idle. A
projection whose weight is small next to L2 (Llama-3-8B's o_proj: 33.5 MB; H100 L2: 50 MB) spends most
of its time on launch, ramp-up and tail rather than on reading. :class:`WeightPrefetcher` asks L2 for the
next projection's weight as soon as the previous projection is done, on a side stream, so the DRAM reads
overlap the small kernels and the projection then reads from L2.

The kernel issues Hopper's bulk L2 prefetch (``cp.async.bulk.prefetch.L2.global``, sm_90+): one
instruction per ``CHUNK`` bytes, no registers or shared memory touched, nothing waited for. A prefetch is
a hint with no effect on any value, so where it is not available (the interpreter, ROCm, pre-Hopper
GPUs) :func:`prefetch_l2` does nothing; there is no reference to compare with beyond "memory unchanged".
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.runtime import pdl_supported

CHUNK = 4096         # bytes per bulk prefetch (a multiple of 16)
LANES = 128          # prefetches per program (one per thread of 4 warps)


@triton.jit
def _prefetch_l2_kernel(base_ptr, nbytes, CHUNK: tl.constexpr, LANES: tl.constexpr, EVICT_LAST: tl.constexpr):
    offs = (tl.program_id(0) * LANES + tl.arange(0, LANES)).to(tl.int64) * CHUNK      # [LANES] byte offsets
    size = tl.minimum(nbytes - offs, CHUNK)
    # lanes past the end re-request the first chunk (harmless) rather than branch: the asm has no mask
    inside = size >= 16
    offs = tl.where(inside, offs, 0)
    size = tl.where(inside, size, 16) // 16 * 16
    if EVICT_LAST:  # kept in L2 ahead of normal lines until read (streams loaded evict_first pass it by)
        tl.inline_asm_elementwise(
            "{\n\t.reg .b64 policy;\n\tcreatepolicy.fractional.L2::evict_last.b64 policy, 1.0;\n\t"
            "cp.async.bulk.prefetch.L2.global.L2::cache_hint [$1], $2, policy;\n\tmov.u32 $0, 0;\n\t}",
            "=r,l,r", [base_ptr + offs, size.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise(
            "cp.async.bulk.prefetch.L2.global [$1], $2;\n\tmov.u32 $0, 0;",
            "=r,l,r", [base_ptr + offs, size.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


def bulk_prefetch_supported(device: torch.device) -> bool:
    """The bulk L2 prefetch needs a compiled kernel on NVIDIA sm_90+ (the same test as programmatic
    dependent launch)."""
    return pdl_supported(device)


def prefetch_l2(t: torch.Tensor, nbytes: int | None = None, *, evict_last: bool = False) -> None:
    """Ask L2 for the first ``nbytes`` (default: all) of contiguous tensor ``t``; asynchronous, no result.

    ``evict_last``: tag the lines so that L2 evicts them after normal ones. No-op where the bulk prefetch
    is unavailable (see :func:`bulk_prefetch_supported`).
    """
    if not isinstance(t, torch.Tensor) or not t.is_contiguous():
        raise ValueError(f"t must be a contiguous tensor, got {type(t).__name__}"
                         + (f" with strides {t.stride()}" if isinstance(t, torch.Tensor) else ""))
    total = t.numel() * t.element_size()
    n = total if nbytes is None else nbytes
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n:
        raise ValueError(f"nbytes must be an int >= 0 or None, got {nbytes!r}")
    n = min(n, total)
    if n < 16 or t.data_ptr() % 16 or not bulk_prefetch_supported(t.device):
        return
    _prefetch_l2_kernel[(triton.cdiv(n, CHUNK * LANES),)](t.view(torch.uint8), n, CHUNK=CHUNK, LANES=LANES,
                                                          EVICT_LAST=bool(evict_last), num_warps=LANES // 32)


class WeightPrefetcher:
    """Issues :func:`prefetch_l2` on a side stream and joins it back to the main stream later.

    ``issue(weight, nbytes)`` forks after the work queued so far on the current stream (the prefetch starts
    when that work is done, i.e. in the idle window that follows it); ``join()`` makes the current stream
    wait for every prefetch issued since the last join. Both are capture-safe (a fork/join inside a CUDA
    graph becomes two parallel branches). Disabled (every call a no-op) where the prefetch does nothing.
    """

    def __init__(self, device: torch.device, enabled: bool = True, *, evict_last: bool = False):
        self.enabled = bool(enabled) and bulk_prefetch_supported(device)
        self.evict_last = evict_last
        self.stream = torch.cuda.Stream(device) if self.enabled else None
        self._pending = False

    def issue(self, weight: torch.Tensor, nbytes: int | None = None) -> None:
        if not self.enabled or nbytes == 0:
            return
        self.stream.wait_stream(torch.cuda.current_stream(weight.device))
        with torch.cuda.stream(self.stream):
            prefetch_l2(weight, nbytes, evict_last=self.evict_last)
        self._pending = True

    def join(self) -> None:
        if self._pending:
            torch.cuda.current_stream(self.stream.device).wait_stream(self.stream)
            self._pending = False
