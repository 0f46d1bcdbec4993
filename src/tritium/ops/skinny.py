"""Skinny GEMM on tensor cores for decode steps of a few rows: ``y = x @ W^T`` with 1 <= M <= ``MAX_M`` rows in
x, the product computed transposed (``W x^T``: the weight's rows fill the tensor core's tall side, x's few rows
its narrow one, padded to 16 or 32), so each program streams ``block_n`` weight rows through shared memory in a
software pipeline ``num_stages`` chunks of ``block_k`` columns deep.

    y = skinny(x, weight, bias)                         # x [M, K] @ weight [N, K]^T (+ bias) -> [M, N], x's dtype
    y = skinny(x, w_gate_up, swiglu=True)               # silu(x @ gate^T) * (x @ up^T) -> [M, N / 2]
    skinny(x, weight, residual=r)                       # r += x @ weight^T (in place), returned

Where it stands among the decode projections: the GEMV (:mod:`tritium.ops.gemv`, 1-4 rows) keeps one
accumulator per row of x in registers, so its bytes in flight fall as M grows (Llama-3-8B's gate/up at 2 rows:
3.80 TB/s against 4.24 at one, H200); cuBLAS runs 4 rows and more at 3.2-4.1 TB/s. Here the accumulator is
``[block_n, 16]`` whatever M and the pipeline's depth sets the bytes in flight: 4.0-4.2 TB/s on gate/up and the
LM head at 2-32 rows. On NVIDIA sm_90 each program first asks L2 for its rows' first ``num_stages`` chunks
(Hopper's bulk prefetch), before the programmatic-dependent-launch wait: the weights depend on no earlier
kernel. ``SkinnyConfig.split_k`` > 1 splits each block of weight rows' columns over that many programs, for
projections with fewer row blocks than SMs: each stores its fp32 sums, and the last of a block to finish adds them
in split order (the same bits whichever finishes last) and runs the epilogue. :class:`~tritium.models.linear.
LinearDispatch` times it against cuBLAS where cuBLAS could run (bench/NOTES.md, "Decode steps of 2-32 rows: the
skinny GEMM", "Split-K").

fp32 accumulation; the same result as ``F.linear`` up to summation order. Reference:
:func:`tritium.ops.reference.linear` (and ``silu_and_mul`` / ``linear_residual`` for the epilogues).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tritium.ops.gemv import _rows, _silu_mul, check_addend
from tritium.ops.prefetch import bulk_prefetch_supported
from tritium.runtime import pdl_launch, pdl_supported, pipeline_stages

MAX_M = 32
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class SkinnyConfig:
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 4
    split_k: int = 1  # programs a block of weight rows' columns are split over (their sums added in a fixed order)

    def __str__(self) -> str:
        split = f"-sk{self.split_k}" if self.split_k > 1 else ""
        return f"skinny-n{self.block_n}-k{self.block_k}-w{self.num_warps}-st{self.num_stages}{split}"


# Candidates LinearDispatch.tune times at 1..MAX_M rows: the best of a grid of 39 (block_n 16-128, block_k 64-512,
# 3-6 stages, 4-8 warps) on Llama-3-8B's projections at 1-32 rows on an H200 (bench/probe_skinny.py); n64-k128
# with 4 stages wins most shapes, 6 stages the 4096-row ones, 64-column chunks gate/up with the SiLU-and-mul; and two
# split-K ones (a row block's columns over two programs), the best of a grid of 2-8 splits on the 4096-row projections
# (o, down: 64 row blocks of 64 for 132 SMs; `probe_skinny.py --split`), timed from 16 rows (LinearDispatch)
CONFIGS = (
    SkinnyConfig(64, 128, 4, 4), SkinnyConfig(64, 128, 4, 6), SkinnyConfig(64, 128, 4, 3), SkinnyConfig(64, 256, 4, 4),
    SkinnyConfig(64, 256, 4, 3), SkinnyConfig(32, 256, 4, 6), SkinnyConfig(64, 64, 4, 3), SkinnyConfig(128, 128, 8, 4),
    SkinnyConfig(128, 128, 4, 3), SkinnyConfig(64, 256, 4, 3, 2), SkinnyConfig(64, 128, 4, 6, 2),
)
DEFAULT_CONFIG = SkinnyConfig(64, 128, 4, 4)


# per device: split-K's fp32 partial sums and its per-row-block arrival counts (zero between launches). Grown, never
# freed: a captured CUDA graph keeps the addresses it was captured with (the old buffers stay alive in _RETIRED)
_WORKSPACES: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}
_RETIRED: list[torch.Tensor] = []


def _workspace(device: torch.device, partials: int, programs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """At least ``partials`` fp32 partial sums and ``programs`` int32 counts (zeroed) on ``device``. Grows before any
    graph captures the product (LinearDispatch.tune and warm-up run every shape first); RuntimeError where it
    would have to grow inside a capture."""
    parts, counts = _WORKSPACES.get(device, (None, None))
    if parts is not None and parts.numel() >= partials and counts.numel() >= programs:
        return parts, counts
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        raise RuntimeError(f"skinny split-K workspace ({partials} partial sums, {programs} counts) first needed "
                           "inside a CUDA graph capture: run the product once before capturing it")
    if parts is not None:
        _RETIRED.extend((parts, counts))
        partials, programs = max(partials, parts.numel()), max(programs, counts.numel())
    parts = torch.empty(partials, dtype=torch.float32, device=device)
    counts = torch.zeros(programs, dtype=torch.int32, device=device)
    _WORKSPACES[device] = (parts, counts)
    return parts, counts


def block_m(M: int) -> int:
    """x's rows padded to the tensor core's narrow side (16 at least)."""
    return max(16, triton.next_power_of_2(M))


@triton.jit
def _skinny_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr, part_ptr, count_ptr, add_ptr,
    stride_x_m, stride_w_n, stride_out_m, stride_add_m,
    M, N, K, k_per_split,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    EVEN_N: tl.constexpr, EVEN_K: tl.constexpr, HAS_BIAS: tl.constexpr, SWIGLU: tl.constexpr, RESIDUAL: tl.constexpr,
    SPLIT: tl.constexpr, PREFETCH_BYTES: tl.constexpr, USE_PDL: tl.constexpr, ADDEND: tl.constexpr = False,
):
    """Program (p, s): output columns of weight rows ``[p * BLOCK_N, (p + 1) * BLOCK_N)`` (SWIGLU: BLOCK_N / 2 gate
    rows and their up rows, side by side in pairs) for every row of x, ``acc [BLOCK_N, BLOCK_M] = W_rows @ x^T``
    over columns ``[s * k_per_split, (s + 1) * k_per_split)``. SPLIT (more than one program a row block): each
    stores its sum in ``part_ptr`` and counts itself in ``count_ptr[p]``; the last of a row block to arrive adds
    the sums in split order (the same bits whichever arrives last), applies the epilogue and zeroes the count."""
    pid = tl.program_id(0)
    k_lo = tl.program_id(1) * k_per_split
    k_hi = tl.minimum(K, k_lo + k_per_split)
    rows = _rows(N, BLOCK_N, SWIGLU)  # SWIGLU: (gate row j, up row N/2 + j) side by side, split after a reshape
    ks = tl.arange(0, BLOCK_K)
    ms = tl.arange(0, BLOCK_M)
    w_ptrs = w_ptr + rows.to(tl.int64)[:, None] * stride_w_n + (k_lo + ks)[None, :]  # [BLOCK_N, BLOCK_K]
    x_ptrs = x_ptr + ms[:, None] * stride_x_m + (k_lo + ks)[None, :]                 # [BLOCK_M, BLOCK_K]
    row_ok = rows[:, None] < N
    m_ok = ms[:, None] < M
    if PREFETCH_BYTES > 0:  # the weights wait for nothing: their first chunks into L2 while earlier kernels end
        first = w_ptr + tl.minimum(rows, N - 1).to(tl.int64) * stride_w_n + k_lo
        nbytes = tl.minimum(PREFETCH_BYTES, (K - k_lo) * w_ptr.dtype.element_ty.primitive_bitwidth // 8 // 16 * 16)
        if nbytes > 0:
            tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], $2;\n\tmov.u32 $0, 0;", "=r,l,r",
                                      [first, tl.full([BLOCK_N], 0, tl.int32) + nbytes], dtype=tl.int32,
                                      is_pure=False, pack=1)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x (and a residual) belong to the previous kernels from here on
        tl.extra.cuda.gdc_launch_dependents()
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):  # software-pipelined num_stages deep (the launch option)
        if EVEN_K and EVEN_N:
            w = tl.load(w_ptrs, eviction_policy="evict_first")
        elif EVEN_K:
            w = tl.load(w_ptrs, mask=row_ok, other=0.0, eviction_policy="evict_first")
        else:
            w = tl.load(w_ptrs, mask=row_ok & (k0 + ks[None, :] < K), other=0.0, eviction_policy="evict_first")
        if EVEN_K:
            x = tl.load(x_ptrs, mask=m_ok, other=0.0)
        else:
            x = tl.load(x_ptrs, mask=m_ok & (k0 + ks[None, :] < K), other=0.0)
        acc = tl.dot(w, tl.trans(x), acc, input_precision="ieee")  # (fp32 x: exact products, no tf32)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    if SPLIT:
        splits = tl.num_programs(1)
        here = tl.program_id(1)
        tile = tl.arange(0, BLOCK_N)[:, None] * BLOCK_M + ms[None, :]                 # [BLOCK_N, BLOCK_M]
        block = part_ptr + pid.to(tl.int64) * splits * (BLOCK_N * BLOCK_M)
        tl.store(block + here * (BLOCK_N * BLOCK_M) + tile, acc)
        tl.debug_barrier()  # every thread's sums stored before the count says so (release below)
        arrived = tl.atomic_add(count_ptr + pid, 1, sem="acq_rel")
        if arrived == splits - 1:  # the last of the row block: the others' sums are visible (acquire)
            total = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for s in range(0, splits):  # in split order, whichever program arrived last
                part = tl.load(block + s * (BLOCK_N * BLOCK_M) + tile, mask=s != here, other=0.0)
                total += tl.where(s == here, acc, part)
            tl.store(count_ptr + pid, 0)  # ready for the next launch
            _epilogue(total, bias_ptr, out_ptr, stride_out_m, add_ptr, stride_add_m, rows, ms, m_ok, pid, M, N,
                      BLOCK_M, BLOCK_N, HAS_BIAS, SWIGLU, RESIDUAL, ADDEND)
    else:
        _epilogue(acc, bias_ptr, out_ptr, stride_out_m, add_ptr, stride_add_m, rows, ms, m_ok, pid, M, N, BLOCK_M,
                  BLOCK_N, HAS_BIAS, SWIGLU, RESIDUAL, ADDEND)


@triton.jit
def _epilogue(acc, bias_ptr, out_ptr, stride_out_m, add_ptr, stride_add_m, rows, ms, m_ok, pid, M, N,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_BIAS: tl.constexpr, SWIGLU: tl.constexpr,
              RESIDUAL: tl.constexpr, ADDEND: tl.constexpr):
    """The product's sums ``acc [BLOCK_N, BLOCK_M]`` of program ``pid``'s weight rows: the bias and the per-row
    addend added, rounded to the output's dtype, then stored (SWIGLU: silu(gate) * up; RESIDUAL: added to the
    output in place)."""
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rows, mask=rows < N, other=0.0).to(tl.float32)[:, None]
    if ADDEND:
        acc += tl.load(add_ptr + ms.to(tl.int64)[None, :] * stride_add_m + rows[:, None],
                       mask=(rows[:, None] < N) & (ms[None, :] < M), other=0.0).to(tl.float32)
    y = tl.trans(acc).to(out_ptr.dtype.element_ty)                                  # [BLOCK_M, BLOCK_N]
    if SWIGLU:
        gate, up = tl.split(tl.reshape(y, (BLOCK_M, BLOCK_N // 2, 2)))
        cols = pid * (BLOCK_N // 2) + tl.arange(0, BLOCK_N // 2)
        tl.store(out_ptr + ms[:, None] * stride_out_m + cols[None, :], _silu_mul(gate, up),
                 mask=m_ok & (cols[None, :] < N // 2))
    else:
        out_ptrs = out_ptr + ms[:, None] * stride_out_m + rows[None, :]
        mask = m_ok & (rows[None, :] < N)
        if RESIDUAL:
            res = tl.load(out_ptrs, mask=mask, other=0.0)
            y = (y.to(tl.float32) + res.to(tl.float32)).to(out_ptr.dtype.element_ty)
        tl.store(out_ptrs, y, mask=mask)


def skinny(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           config: SkinnyConfig | None = None, swiglu: bool = False, residual: torch.Tensor | None = None,
           pdl: bool | None = None, addend: torch.Tensor | None = None) -> torch.Tensor:
    """``x [M, K] @ weight [N, K]^T (+ bias [N])`` -> ``[M, N]`` in x's dtype (1 <= M <= ``MAX_M``; fp16, bf16
    or fp32).

    ``bias``: added to the product (fp32) before it is rounded. ``swiglu``: weight is ``[gate; up]``
    (``[2I, K]``), the result ``[M, I]`` = ``silu_and_mul`` of the rounded product (the config's ``block_n``
    even). ``residual`` ``[M, N]``: the product is added to it in place and it is returned. ``addend`` ``[M, N]``:
    a per-row term added with the bias (:func:`tritium.ops.gemv.gemv`'s). ``pdl``: a
    programmatic dependent launch (default: where supported). ValueError naming the operand that does not
    fit."""
    cfg = config or DEFAULT_CONFIG
    if not (isinstance(cfg.split_k, int) and cfg.split_k >= 1):
        raise ValueError(f"config.split_k must be an int >= 1, got {cfg.split_k!r}")
    if x.dim() != 2 or weight.dim() != 2:
        raise ValueError(f"x must be [M, K] and weight [N, K], got x {tuple(x.shape)} and weight "
                         f"{tuple(weight.shape)}")
    M, K = x.shape
    N = weight.shape[0]
    if not 1 <= M <= MAX_M:
        raise ValueError(f"x must have 1 to {MAX_M} rows for the skinny GEMM, got {M}")
    if weight.shape[1] != K:
        raise ValueError(f"weight must be [N, {K}] to match x [{M}, {K}], got {tuple(weight.shape)}")
    if x.dtype not in DTYPES or weight.dtype != x.dtype or weight.device != x.device:
        raise ValueError(f"x and weight must share a dtype of {DTYPES} and a device, got {x.dtype}/{x.device} and "
                         f"{weight.dtype}/{weight.device}")
    if x.stride(1) != 1 or weight.stride(1) != 1:
        raise ValueError(f"x and weight need a contiguous last dimension, got strides {x.stride()} and "
                         f"{weight.stride()}")
    if bias is not None and (bias.shape != (N,) or bias.dtype != x.dtype or bias.stride(0) != 1
                             or bias.device != x.device):
        raise ValueError(f"bias must be a contiguous [{N}] {x.dtype} tensor on {x.device}, got {tuple(bias.shape)} "
                         f"{bias.dtype} on {bias.device}")
    check_addend(addend, M, N, x.device)
    if swiglu:
        if residual is not None:
            raise ValueError("swiglu=True does not combine with residual (its output is [M, N/2])")
        if N % 2 or cfg.block_n % 2:
            raise ValueError(f"swiglu: weight rows ({N}) and config.block_n ({cfg.block_n}) must be even")
    if residual is not None:
        if residual.shape != (M, N) or residual.dtype != x.dtype or residual.stride(1) != 1 \
                or residual.device != x.device:
            raise ValueError(f"residual must be a [{M}, {N}] {x.dtype} tensor with a contiguous last dimension on "
                             f"{x.device}, got {tuple(residual.shape)} {residual.dtype} strides {residual.stride()}")
        if residual.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
            raise ValueError("residual must not share memory with x (every program reads all of x while others "
                             "write their columns of residual)")
        out = residual
    else:
        out = torch.empty((M, N // 2 if swiglu else N), dtype=x.dtype, device=x.device)
    if pdl and not pdl_supported(x.device):
        raise ValueError(f"pdl=True needs a compiled kernel on an NVIDIA sm_90+ GPU, not {x.device}")
    # Hopper's bulk L2 prefetch of each weight row's first num_stages chunks, issued before the PDL wait (the
    # GEMV loads its first chunk there; a pipeline's loads come after it): 16-byte aligned rows only
    programs = triton.cdiv(N // 2, cfg.block_n // 2) if swiglu else triton.cdiv(N, cfg.block_n)
    # split-K: whole chunks a split, every split at least one (fewer splits than asked where K is short)
    chunks = triton.cdiv(K, cfg.block_k)
    k_per_split = triton.cdiv(chunks, cfg.split_k) * cfg.block_k
    splits = triton.cdiv(K, k_per_split)
    elsize = weight.element_size()
    prefetch = 0  # bytes of a split's first chunks (the kernel trims them to its row's end)
    if bulk_prefetch_supported(x.device) and weight.data_ptr() % 16 == 0 and weight.stride(0) * elsize % 16 == 0:
        prefetch = min(k_per_split, cfg.num_stages * cfg.block_k) * elsize // 16 * 16
    parts = counts = weight  # (unused without a split)
    if splits > 1:
        parts, counts = _workspace(x.device, programs * splits * cfg.block_n * block_m(M), programs)
    _skinny_kernel[(programs, splits)](
        x, weight, bias if bias is not None else weight, out, parts, counts,
        addend if addend is not None else weight, x.stride(0), weight.stride(0), out.stride(0),
        addend.stride(0) if addend is not None else 0, M, N, K, k_per_split,
        BLOCK_M=block_m(M), BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        EVEN_N=N % cfg.block_n == 0, EVEN_K=K % cfg.block_k == 0, HAS_BIAS=bias is not None, SWIGLU=swiglu,
        RESIDUAL=residual is not None, SPLIT=splits > 1, PREFETCH_BYTES=prefetch, ADDEND=addend is not None,
        num_warps=cfg.num_warps, num_stages=pipeline_stages(cfg.num_stages), **pdl_launch(x.device, pdl is not False),
    )
    return out
