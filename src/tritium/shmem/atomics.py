"""``@triton.jit`` atomics on any rank's heap: ``atomic_<op>(ptr, value(s), rank, remote_rank, bases, ...)``.

Each applies ``tl.atomic_<op>`` at ``ptr``'s offset in ``remote_rank``'s heap and returns the old
value(s) (shape of ``ptr``). ``ptr`` points into the calling ``rank``'s heap (see ``device`` for the
argument order). Options:

- ``sem``: "relaxed" | "acquire" | "release" | "acq_rel" (default): ordering of this thread's other
  memory accesses around the atomic.
- ``scope``: "sys" (default) | "gpu" | "cta": who the ordering is promised to. Another GPU (or the
  CPU) is outside "gpu" scope: flags and counters read by peers need "sys"; "gpu" is only for
  atomics that peers never observe while the kernel runs.

32- and 64-bit integers (and fp32 add) are atomic across GPUs and across processes under the
interpreter; fp16/bf16 atomics are not atomic across processes under the interpreter.
``atomic_cas`` has no mask (Triton's has none).
"""

import triton
import triton.language as tl

from tritium.shmem.device import translate


@triton.jit
def atomic_add(ptr, value, rank, remote_rank, bases, mask=None,
               sem: tl.constexpr = tl.constexpr("acq_rel"), scope: tl.constexpr = tl.constexpr("sys")):
    """``old = *p; *p = old + value`` on ``remote_rank``; returns ``old``."""
    return tl.atomic_add(translate(ptr, rank, remote_rank, bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_sub(ptr, value, rank, remote_rank, bases, mask=None,
               sem: tl.constexpr = tl.constexpr("acq_rel"), scope: tl.constexpr = tl.constexpr("sys")):
    """``old = *p; *p = old - value`` on ``remote_rank``; returns ``old``."""
    return tl.atomic_add(translate(ptr, rank, remote_rank, bases), -value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_xchg(ptr, value, rank, remote_rank, bases, mask=None,
                sem: tl.constexpr = tl.constexpr("acq_rel"), scope: tl.constexpr = tl.constexpr("sys")):
    """``old = *p; *p = value`` on ``remote_rank``; returns ``old``."""
    return tl.atomic_xchg(translate(ptr, rank, remote_rank, bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_cas(ptr, cmp, value, rank, remote_rank, bases,
               sem: tl.constexpr = tl.constexpr("acq_rel"), scope: tl.constexpr = tl.constexpr("sys")):
    """``old = *p; if old == cmp: *p = value`` on ``remote_rank``; returns ``old``."""
    return tl.atomic_cas(translate(ptr, rank, remote_rank, bases), cmp, value, sem=sem, scope=scope)


@triton.jit
def atomic_min(ptr, value, rank, remote_rank, bases, mask=None,
               sem: tl.constexpr = tl.constexpr("acq_rel"), scope: tl.constexpr = tl.constexpr("sys")):
    """``old = *p; *p = min(old, value)`` on ``remote_rank``; returns ``old``."""
    return tl.atomic_min(translate(ptr, rank, remote_rank, bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_max(ptr, value, rank, remote_rank, bases, mask=None,
               sem: tl.constexpr = tl.constexpr("acq_rel"), scope: tl.constexpr = tl.constexpr("sys")):
    """``old = *p; *p = max(old, value)`` on ``remote_rank``; returns ``old``."""
    return tl.atomic_max(translate(ptr, rank, remote_rank, bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_and(ptr, value, rank, remote_rank, bases, mask=None,
               sem: tl.constexpr = tl.constexpr("acq_rel"), scope: tl.constexpr = tl.constexpr("sys")):
    """``old = *p; *p = old & value`` on ``remote_rank``; returns ``old``."""
    return tl.atomic_and(translate(ptr, rank, remote_rank, bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_or(ptr, value, rank, remote_rank, bases, mask=None,
              sem: tl.constexpr = tl.constexpr("acq_rel"), scope: tl.constexpr = tl.constexpr("sys")):
    """``old = *p; *p = old | value`` on ``remote_rank``; returns ``old``."""
    return tl.atomic_or(translate(ptr, rank, remote_rank, bases), value, mask=mask, sem=sem, scope=scope)


@triton.jit
def atomic_xor(ptr, value, rank, remote_rank, bases, mask=None,
               sem: tl.constexpr = tl.constexpr("acq_rel"), scope: tl.constexpr = tl.constexpr("sys")):
    """``old = *p; *p = old ^ value`` on ``remote_rank``; returns ``old``."""
    return tl.atomic_xor(translate(ptr, rank, remote_rank, bases), value, mask=mask, sem=sem, scope=scope)
