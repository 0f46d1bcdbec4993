"""Batched LoRA: each token's row of a projection's output gets its own adapter's low-rank update, many adapters
in one launch pair (the multi-adapter serving of Punica / S-LoRA, written from their description):

    lora_apply(x, y, a, b, slots, bounds)   # y[t] += B[s] @ (A[s] @ x[t]) for every token t, s = slots[t] >= 0

- ``x`` ``[T, K]``: the projection's input; ``y`` ``[T, N]``: its output, updated in place.
- ``a`` ``[S, P * R, K]``: each of ``S`` adapter slots' down-projections ("lora_A"), the ``P`` parts of a merged
  projection (QKV: q, k, v; gate/up: gate, up) stacked, each padded with zero rows to rank ``R``.
- ``b`` ``[S, N, R]``: the up-projections ("lora_B") with the adapter's scaling folded in; output row ``n`` of part
  ``p`` (``bounds`` = the first rows of parts 1 and 2, ``(N, N)`` for one part) reads ranks ``[p R, (p + 1) R)`` of
  the shrunk rows.
- ``slots`` ``[T]`` int: each token's slot, -1: no adapter (its row of ``y`` is left as it is).

Two launches. *Shrink*: ``h = x @ A[s]^T`` in fp32, each program a block of tokens, one part and one chunk of K
(split-K: a decode step's few rows still spread over the SMs); the chunks' partial sums are stored apart, never
added with atomics. *Expand*: ``y += h @ B[s]^T`` (the chunks summed in a fixed order first), each program a block
of tokens and of output rows, inside one part. A block of tokens whose rows hold several adapters loops over the
slots from its lowest to its highest, each row masked to its own. Above 64 tokens the blocks take the tokens
sorted by slot (:func:`sort_order`, once a step; the engine sorts them on the host), so that a block of 64 holds
one adapter or two however the batch mixes them (256 tokens over four adapters, interleaved: bench/NOTES.md "LoRA
adapters"). The grids depend only on the shapes, so a decode step with its slots in a static buffer replays as a
CUDA graph.

``lora_delta`` returns the updates alone (``[T, N]`` fp32, zeros for tokens without an adapter) for a projection
that adds them in its own epilogue, before rope or the SiLU-and-mul there (:func:`tritium.ops.gemv.gemv`'s
``addend``): a decode step with adapters keeps the fused QKV + rope and gate/up + SiLU-and-mul GEMVs.

Reference: :func:`lora_apply_reference` (fp32, a full product per slot, each row keeping its own slot's),
:func:`lora_delta_reference`.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from tritium.runtime import interpreting, pdl_launch

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MIN_RANK = 16  # tl.dot's smallest side: ranks are padded to a power of two >= 16
SORT_FROM = 64  # tokens above which lora_apply visits them sorted by slot (blocks of 16 below, of any mix)
TARGET_PROGRAMS = 128  # shrink programs to aim for (split-K): about one per SM of an H100 / H200


def padded_rank(rank: int) -> int:
    """The rank adapters of rank <= ``rank`` are stored at: a power of two, at least ``MIN_RANK``."""
    return max(MIN_RANK, 1 << (max(rank, 1) - 1).bit_length())


@triton.jit
def _block_rows(slot_ptr, order_ptr, rows, rmask, SORTED: tl.constexpr):
    """A block's rows of x and y (``order``'s where the tokens are sorted by slot), their slots, and the lowest and
    highest slot among them (hi < lo: none has one)."""
    if SORTED:
        phys = tl.load(order_ptr + rows, mask=rmask, other=0)
    else:
        phys = rows
    slot = tl.load(slot_ptr + phys, mask=rmask, other=-1).to(tl.int32)
    lo = tl.min(tl.where(slot >= 0, slot, 2147483647), axis=0)
    hi = tl.max(slot, axis=0)
    return phys.to(tl.int64), slot, lo, hi


@triton.jit
def _shrink_kernel(x_ptr, a_ptr, slot_ptr, order_ptr, h_ptr, T, K, PR, stride_xm, stride_as, stride_ar, stride_hs,
                   stride_hm, K_SPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr,
                   BLOCK_K: tl.constexpr, SORTED: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
                   USE_PDL: tl.constexpr):
    if USE_PDL:  # the expand may launch now and wait for this; x comes from the kernel before
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    pid_m, pid_r, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < T
    phys, slot, lo, hi = _block_rows(slot_ptr, order_ptr, rows, rmask, SORTED)
    r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    acc = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    k0 = pid_k * K_SPLIT
    for s in range(lo, hi + 1):
        mine = rmask & (slot == s)
        for kk in range(0, K_SPLIT, BLOCK_K):
            k = k0 + kk + tl.arange(0, BLOCK_K)
            kmask = k < K
            x = tl.load(x_ptr + phys[:, None] * stride_xm + k[None, :], mask=mine[:, None] & kmask[None, :], other=0.0)
            a = tl.load(a_ptr + s * stride_as + r[:, None] * stride_ar + k[None, :],
                        mask=kmask[None, :], other=0.0)
            if UPCAST:  # the interpreter's 16-bit dots are wrong (../shared/ENVIRONMENT.md)
                x, a = x.to(tl.float32), a.to(tl.float32)
            acc += tl.dot(x, tl.trans(a), input_precision=PRECISION)
    tl.store(h_ptr + pid_k * stride_hs + rows[:, None].to(tl.int64) * stride_hm + r[None, :], acc,
             mask=rmask[:, None] & (r[None, :] < PR))


@triton.jit
def _expand_sum(h_ptr, b_ptr, rows, rmask, slot, lo, hi, pid_n, N, bound1, bound2, stride_hs, stride_hm, stride_bs,
                stride_bn, SPLITS: tl.constexpr, R: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    """``[BLOCK_M, BLOCK_N]`` fp32: each row's update at output rows ``n`` (zeros for rows without a slot), and n."""
    n0 = pid_n * BLOCK_N
    part = (n0 >= bound1).to(tl.int32) + (n0 >= bound2).to(tl.int32)  # BLOCK_N divides both bounds
    n = n0 + tl.arange(0, BLOCK_N)
    nmask = n < N
    r = tl.arange(0, R)
    h = tl.zeros((BLOCK_M, R), dtype=tl.float32)
    for sp in range(SPLITS):  # the K chunks' partial sums, in order
        h += tl.load(h_ptr + sp * stride_hs + rows[:, None].to(tl.int64) * stride_hm + part * R + r[None, :],
                     mask=rmask[:, None], other=0.0)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in range(lo, hi + 1):
        hs = tl.where((slot == s)[:, None], h, 0.0)
        b = tl.load(b_ptr + s * stride_bs + n[:, None].to(tl.int64) * stride_bn + r[None, :],
                    mask=nmask[:, None], other=0.0)
        if UPCAST:
            acc += tl.dot(hs, tl.trans(b.to(tl.float32)), input_precision=PRECISION)
        else:
            acc += tl.dot(hs.to(b.dtype), tl.trans(b), input_precision=PRECISION)
    return acc, n, nmask


@triton.jit
def _expand_kernel(h_ptr, b_ptr, slot_ptr, order_ptr, y_ptr, T, N, bound1, bound2, stride_hs, stride_hm, stride_bs,
                   stride_bn, stride_ym, SPLITS: tl.constexpr, R: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, SORTED: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
                   USE_PDL: tl.constexpr, STORE: tl.constexpr = False):
    """``y += update`` on the rows with a slot (blocks without one return at once); STORE: ``y = update`` on every
    row (zeros where a row has no slot: the per-row addend of :func:`lora_delta`)."""
    if USE_PDL:  # h comes from the shrink, y from the projection before it
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < T
    phys, slot, lo, hi = _block_rows(slot_ptr, order_ptr, rows, rmask, SORTED)
    if STORE:
        acc, n, nmask = _expand_sum(h_ptr, b_ptr, rows, rmask, slot, lo, hi, pid_n, N, bound1, bound2, stride_hs,
                                    stride_hm, stride_bs, stride_bn, SPLITS, R, BLOCK_M, BLOCK_N, UPCAST, PRECISION)
        tl.store(y_ptr + phys[:, None] * stride_ym + n[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=rmask[:, None] & nmask[None, :])
    elif hi >= 0:
        acc, n, nmask = _expand_sum(h_ptr, b_ptr, rows, rmask, slot, lo, hi, pid_n, N, bound1, bound2, stride_hs,
                                    stride_hm, stride_bs, stride_bn, SPLITS, R, BLOCK_M, BLOCK_N, UPCAST, PRECISION)
        ptrs = y_ptr + phys[:, None] * stride_ym + n[None, :]
        mask = (rmask & (slot >= 0))[:, None] & nmask[None, :]
        y = tl.load(ptrs, mask=mask, other=0.0)
        tl.store(ptrs, (y.to(tl.float32) + acc).to(y_ptr.dtype.element_ty), mask=mask)


def _block_n(n: int, bounds: tuple[int, int]) -> int:
    """The widest tile of output rows (16-64) that no part boundary cuts."""
    g = math.gcd(n, *bounds)
    block = 64
    while block > 16 and g % block:
        block //= 2
    return block


def check_lora(x: torch.Tensor, y: torch.Tensor, a: torch.Tensor, b: torch.Tensor, slots: torch.Tensor,
               bounds: tuple[int, int]) -> int:
    """Validate :func:`lora_apply`'s arguments (naming the one that is wrong); returns the padded rank R."""
    if x.dim() != 2 or y.dim() != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"lora: x [T, K] and y [T, N] with the same T expected, got x {tuple(x.shape)}, "
                         f"y {tuple(y.shape)}")
    T, K = x.shape
    N = y.shape[1]
    if a.dim() != 3 or a.shape[2] != K:
        raise ValueError(f"lora: a must be [slots, parts * rank, {K}], got {tuple(a.shape)}")
    if b.dim() != 3 or b.shape[:2] != (a.shape[0], N):
        raise ValueError(f"lora: b must be [{a.shape[0]}, {N}, rank], got {tuple(b.shape)}")
    R = b.shape[2]
    if R < MIN_RANK or R & (R - 1) or a.shape[1] % R or not 1 <= a.shape[1] // R <= 3:
        raise ValueError(f"lora: the rank (b's last size, {R}) must be a power of two >= {MIN_RANK} and a's rows "
                         f"({a.shape[1]}) 1-3 times it")
    b1, b2 = bounds
    if not 0 < b1 <= b2 <= N or (a.shape[1] // R == 1) != (b1 == N) or b1 % 16 or b2 % 16 or N % 16:
        raise ValueError(f"lora: bounds {bounds} must split N={N} into a's {a.shape[1] // R} parts at multiples "
                         f"of 16")
    if slots.shape != (T,) or slots.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"lora: slots must be [{T}] int32/int64, got {tuple(slots.shape)} {slots.dtype}")
    for name, t in (("x", x), ("y", y), ("a", a), ("b", b)):
        if t.dtype not in DTYPES:
            raise ValueError(f"lora: {name} must be one of {DTYPES}, got {t.dtype}")
        if t.stride(-1) != 1:
            raise ValueError(f"lora: {name} must be contiguous in its last dimension")
    if a.dtype != b.dtype or a.stride(1) != K or b.stride(1) != R:
        raise ValueError("lora: a and b must share a dtype and be contiguous per slot")
    return R


def sort_order(slots: torch.Tensor) -> torch.Tensor | None:
    """The order :func:`lora_apply` visits ``slots``' tokens in: sorted by slot (a block of tokens then holds one or
    two adapters, however a batch mixes them) above ``SORT_FROM`` tokens; None (as they come) below. One call
    serves every projection of a step."""
    return torch.argsort(slots, stable=True) if slots.shape[0] > SORT_FROM else None


def lora_apply(x: torch.Tensor, y: torch.Tensor, a: torch.Tensor, b: torch.Tensor, slots: torch.Tensor,
               bounds: tuple[int, int] | None = None, *, order: torch.Tensor | bool | None = True,
               validate: bool = True, pdl: bool = True) -> torch.Tensor:
    """``y[t] += B[slots[t]] @ (A[slots[t]] @ x[t])`` in place for every token with a slot; returns y. ``order``:
    :func:`sort_order`'s, or any permutation of the tokens (True: computed here; None: tokens as they come).
    ``pdl``: both launches by programmatic dependent launch where supported (Hopper), each waiting for the kernel
    before it to finish before reading anything."""
    return _launch(x, y, a, b, slots, bounds, order, validate, pdl, store=False)


def lora_delta(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, slots: torch.Tensor,
               bounds: tuple[int, int] | None = None, *, order: torch.Tensor | bool | None = True,
               validate: bool = True, pdl: bool = True, out: torch.Tensor | None = None) -> torch.Tensor:
    """Each token's update alone: ``[T, N]`` fp32, row t = ``B[slots[t]] @ (A[slots[t]] @ x[t])``, zeros where
    ``slots[t] < 0`` (the arguments as :func:`lora_apply`'s; ``out``: where to write it, every row overwritten).
    The projection then takes it as a per-row addend in its epilogue (:func:`tritium.ops.gemv.gemv`'s
    ``addend``), before rope or the SiLU-and-mul there."""
    T, N = x.shape[0], b.shape[1] if b.dim() == 3 else -1
    if out is None:
        out = torch.empty(T, N, dtype=torch.float32, device=x.device)
    elif out.shape != (T, N) or out.dtype != torch.float32 or out.stride(-1) != 1 or out.device != x.device:
        raise ValueError(f"lora: out must be a [{T}, {N}] float32 tensor with a contiguous last dimension on "
                         f"{x.device}, got {tuple(out.shape)} {out.dtype} on {out.device}")
    return _launch(x, out, a, b, slots, bounds, order, validate, pdl, store=True)


def _launch(x, y, a, b, slots, bounds, order, validate: bool, pdl: bool, *, store: bool) -> torch.Tensor:
    N = y.shape[1]
    bounds = (N, N) if bounds is None else bounds
    R = check_lora(x, y, a, b, slots, bounds) if validate else b.shape[2]
    T, K = x.shape
    if T == 0:
        return y
    PR = a.shape[1]
    if order is True:
        order = sort_order(slots)
    block_m = 16 if T <= SORT_FROM else 64
    # K in chunks over more programs where the blocks of tokens are too few to fill the GPU (decode sizes): about
    # TARGET_PROGRAMS shrink programs, chunks of 256 columns or more (their partial sums stored apart)
    programs = triton.cdiv(T, block_m) * (PR // R)
    splits = max(1, min(triton.cdiv(K, 256), triton.cdiv(TARGET_PROGRAMS, programs)))
    k_split = triton.cdiv(triton.cdiv(K, splits), 64) * 64
    splits = triton.cdiv(K, k_split)
    h = torch.empty(splits, T, PR, dtype=torch.float32, device=x.device)
    upcast = interpreting()
    # fp32 models get fp32 products (no TF32); 16-bit ones the default (gfx950 knows no "tf32" to name)
    precision = "ieee" if x.dtype == torch.float32 else None
    sort = order is not None
    _shrink_kernel[(triton.cdiv(T, block_m), PR // R, splits)](
        x, a, slots, order if sort else slots, h, T, K, PR, x.stride(0), a.stride(0), a.stride(1), h.stride(0),
        h.stride(1), K_SPLIT=k_split, BLOCK_M=block_m, BLOCK_R=R, BLOCK_K=64, SORTED=sort, UPCAST=upcast,
        PRECISION=precision, num_warps=4, **pdl_launch(x.device, pdl))
    block_n = _block_n(N, bounds)
    _expand_kernel[(triton.cdiv(T, block_m), triton.cdiv(N, block_n))](
        h, b, slots, order if sort else slots, y, T, N, bounds[0], bounds[1], h.stride(0), h.stride(1), b.stride(0),
        b.stride(1), y.stride(0), SPLITS=splits, R=R, BLOCK_M=block_m, BLOCK_N=block_n, SORTED=sort, UPCAST=upcast,
        PRECISION=precision, STORE=store, num_warps=4, **pdl_launch(x.device, pdl))
    return y


def lora_apply_reference(x: torch.Tensor, y: torch.Tensor, a: torch.Tensor, b: torch.Tensor, slots: torch.Tensor,
                         bounds: tuple[int, int] | None = None) -> torch.Tensor:
    """:func:`lora_apply` in fp32, slot by slot over every row, each row keeping its own slot's (the
    ``op_backend="torch"`` implementation: no host sync, so it is captured in a CUDA graph as it is)."""
    N = y.shape[1]
    b1, b2 = (N, N) if bounds is None else bounds
    R = b.shape[2]
    parts = [(p, lo, hi) for p, (lo, hi) in enumerate(((0, b1), (b1, b2), (b2, N))) if hi > lo]
    xf = x.float()
    total = torch.zeros(y.shape, dtype=torch.float32, device=y.device)
    for s in range(a.shape[0]):
        h = xf @ a[s].float().T                                            # [T, P * R]
        delta = torch.cat([h[:, p * R:(p + 1) * R] @ b[s, lo:hi].float().T for p, lo, hi in parts], dim=1)
        total += torch.where((slots == s)[:, None], delta, 0.0)
    y.copy_(torch.where((slots >= 0)[:, None], (y.float() + total).to(y.dtype), y))
    return y


def lora_delta_reference(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, slots: torch.Tensor,
                         bounds: tuple[int, int] | None = None) -> torch.Tensor:
    """:func:`lora_delta` in fp32 (:func:`lora_apply_reference` on zeros)."""
    out = torch.zeros(x.shape[0], b.shape[1], dtype=torch.float32, device=x.device)
    return lora_apply_reference(x, out, a, b, slots, bounds)
