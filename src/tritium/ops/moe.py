"""Mixture of Experts in Triton: the router's top-k (:func:`moe_route`) and the routed experts' SwiGLU MLPs,
weighted and summed (:func:`fused_moe`). References: :func:`tritium.ops.reference.moe_route` and
:func:`tritium.ops.reference.fused_moe`.

Token t goes to the k experts ``ids[t, :]`` with the routing weights ``weights[t, :]``; each (token, expert)
pair is a *slot* ``s = t * k + j`` (S = T * k slots). Expert e holds ``w_gate_up[e]`` = [Wg; Wu] (``[2I, H]``)
and ``w_down[e]`` (``[H, I]``). :func:`fused_moe` takes one of two paths by the number of slots:

- per slot (one token, or S <= ``PER_SLOT_MAX_SLOTS_PER_EXPERT`` x E = E / 2: decode): no sorting.
  :func:`_moe_up_slot_kernel` (grid: slots x I tiles) computes each slot's ``act = silu(x Wg^T) * (x Wu^T)`` tile GEMV-style into a workspace
  ``[S, I]``; :func:`_moe_down_token_kernel` (grid: tokens x H tiles) sums each token's k slots'
  ``weight * act @ Wd^T`` in fp32 and stores the output row once (no atomics: deterministic); at one token, a
  program a slot instead (k times the programs), its fp32 partial rows summed after. The slot (token) is the
  fastest-varying grid axis, so the programs that read one weight tile run together and share it through L2
  where slots share an expert.
- sorted (prefill): the slots grouped by expert, each expert's run padded to ``BLOCK_M`` slots
  (:func:`_sort_slots`: torch ops of static shapes that never wait for the device), then grouped GEMMs with
  tensor cores: :func:`_moe_up_sorted_kernel` (gate and up, SiLU-and-mul in the epilogue, act rows written
  at the slots' indices) and :func:`_moe_down_sorted_kernel` (times the routing weight, into an fp32
  ``[S, H]`` buffer at the slots' indices), then ``buf.view(T, k, H).sum(1)`` in torch (deterministic).

An id outside ``[0, E)`` is never used as an address: its slot contributes nothing to the output (as if its
routing weight were 0), on both paths; a token whose ids are all out of range gets an output row of zeros.
That is also the expert-parallel convention for experts held elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tritium.ops.gemv import _silu_mul
from tritium.ops.quant import FP8_DTYPE
from tritium.ops.rms_norm import _rms_normed, rms_norm, sum_rms_norm
from tritium.runtime import max_shared_memory, pdl_launch, pipeline_stages

# The router: one program holds a token's logits in registers.
MAX_EXPERTS = 512
MAX_TOP_K = 16

# NOTE: the per-slot path reads an expert once for every slot it has (programs of different slots share it
# through L2 only by luck), the sorted one once a block; so the per-slot path while there are at most half as many
# slots as experts. Measured on an H200 (`python -m tritium.bench moe`, cold, bf16, bench/NOTES.md "Mixture of
# experts"), per slot vs sorted since the sorted path's slot table is one Triton program: Qwen3-30B-A3B (E = 128,
# k = 8) T = 8 (64 slots) 137 vs 142 us, T = 16 233 vs 212; Mixtral-8x7B (E = 8, k = 2) T = 2 (4 slots) 337 vs
# 370, T = 4 482 vs 354. (Before it, with ~20 torch launches sorting the slots: per slot up to S = E.)
PER_SLOT_MAX_SLOTS_PER_EXPERT = 0.5

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _describe(v) -> str:
    return f"{v.dtype} {list(v.shape)}" if isinstance(v, torch.Tensor) else repr(v)


# -- router ------------------------------------------------------------------------------------------------------

@triton.jit
def _top_k(probs, valid, cols, TOP_K: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr,
           RENORMALIZE: tl.constexpr):
    """The TOP_K largest of ``probs`` ``[BLOCK_E]`` (non-negative or NaN where ``valid``) in descending order, the
    lowest index first among equal ones: (weights ``[BLOCK_K]`` fp32, ids ``[BLOCK_K]`` int32; entries past TOP_K
    0). TOP_K rounds of arg-max, each taking its expert out of the running; a NaN probability ranks below every
    number and gets a NaN weight; with RENORMALIZE the weights are divided by their sum.

    A round is one max-reduction of 64-bit keys (a probability's bits above the complement of its index: for
    non-negative floats the bits order as the values do), not three (max, the lowest index holding it, the
    weight): the reductions are the router's critical path (a warp's shuffles each)."""
    # high word: the probability's bits; NaN -1, experts taken -2, columns past E -3 (each round takes a new
    # expert in [0, E) whatever the logits); low word: BLOCK_E - 1 - the index (the max takes the lowest index)
    bits = tl.where(valid, tl.where(probs == probs, probs.to(tl.int32, bitcast=True), -1), -3)
    low = (BLOCK_E - 1 - cols).to(tl.int64)
    key = (bits.to(tl.int64) << 32) | low                                               # [BLOCK_E]
    ks = tl.arange(0, BLOCK_K)                                                         # [BLOCK_K]
    top_w = tl.zeros((BLOCK_K,), dtype=tl.float32)
    top_i = tl.zeros((BLOCK_K,), dtype=tl.int32)
    for j in tl.static_range(TOP_K):
        best = tl.max(key, axis=0)
        idx = (BLOCK_E - 1 - (best & 0xFFFFFFFF)).to(tl.int32)
        hi = (best >> 32).to(tl.int32)
        top_w = tl.where(ks == j, tl.where(hi >= 0, hi.to(tl.float32, bitcast=True), float("nan")), top_w)
        top_i = tl.where(ks == j, idx, top_i)
        key = tl.where(cols == idx, (-2 << 32) | low, key)
    if RENORMALIZE:
        top_w = top_w / tl.sum(top_w, axis=0)  # the entries past TOP_K are 0
    return top_w, top_i


@triton.jit
def _softmax_top_k(logits, valid, cols, TOP_K: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr,
                   RENORMALIZE: tl.constexpr):
    """:func:`_top_k` of the fp32 softmax of ``logits`` ``[BLOCK_E]`` (-inf past E)."""
    p = tl.where(valid, tl.exp(logits - tl.max(logits, axis=0)), 0.0)
    return _top_k(p / tl.sum(p, axis=0), valid, cols, TOP_K, BLOCK_E, BLOCK_K, RENORMALIZE)


@triton.jit
def _moe_route_kernel(
    # pointers
    logits_ptr, weights_ptr, ids_ptr,
    # strides
    stride_l_t, stride_w_t, stride_ids_t,
    # sizes
    E,
    # meta-parameters
    TOP_K: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr, RENORMALIZE: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """One program a token: fp32 softmax of its E logits and their top-k (:func:`_top_k`)."""
    t = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_E)                                                       # [BLOCK_E]
    valid = cols < E
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the logits come from the gate projection before
        tl.extra.cuda.gdc_launch_dependents()
    x = tl.load(logits_ptr + t * stride_l_t + cols, mask=valid, other=-float("inf")).to(tl.float32)
    top_w, top_i = _softmax_top_k(x, valid, cols, TOP_K, BLOCK_E, BLOCK_K, RENORMALIZE)
    ks = tl.arange(0, BLOCK_K)
    tl.store(weights_ptr + t * stride_w_t + ks, top_w, mask=ks < TOP_K)
    tl.store(ids_ptr + t * stride_ids_t + ks, top_i, mask=ks < TOP_K)


@triton.jit
def _moe_norm_route_kernel(
    # pointers
    x_ptr, res_ptr, nw_ptr, router_ptr, normed_ptr, logits_ptr, weights_ptr, ids_ptr, count_ptr,
    # strides
    stride_x_t, stride_res_t, stride_r_e, stride_n_t, stride_l_t, stride_w_t, stride_ids_t,
    # sizes
    H, E, eps,
    # meta-parameters
    TOP_K: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr, RENORMALIZE: tl.constexpr, PROGRAMS: tl.constexpr, USE_PDL: tl.constexpr,
):
    """Grid (T, PROGRAMS): program (t, r) forms token t's ``h = x + residual`` and its RMSNorm (every program of
    the token the same, from the same inputs) and the router logits of rows ``[r BLOCK_R, (r + 1) BLOCK_R)``,
    rounded to x's dtype as the projection stores them, into ``logits``. The token's last program to finish (a
    ticket on ``count[t]``, reset to 0 for the next launch) writes h into the residual (no program reads it after
    that), the normed row and the softmax top-k of the token's logits. The router's rows and the norm's weight are
    requested before the PDL wait (never written)."""
    t = tl.program_id(0).to(tl.int64)
    rows = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)                         # [BLOCK_R]
    cols = tl.arange(0, BLOCK_H)                                                       # [BLOCK_H]
    col_ok = cols < H
    row_ok = rows < E
    nw = tl.load(nw_ptr + cols, mask=col_ok, other=0.0)
    wr = tl.load(router_ptr + rows.to(tl.int64)[:, None] * stride_r_e + cols[None, :],
                 mask=row_ok[:, None] & col_ok[None, :], other=0.0)                   # [BLOCK_R, BLOCK_H]
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x (the projection before) and the residual
        tl.extra.cuda.gdc_launch_dependents()
    x = tl.load(x_ptr + t * stride_x_t + cols, mask=col_ok, other=0.0)
    dtype = x.dtype
    # as rms_norm: h rounded to x's dtype, the normed row rounded before and after its weight
    h = (x.to(tl.float32) + tl.load(res_ptr + t * stride_res_t + cols, mask=col_ok, other=0.0).to(tl.float32)).to(dtype)
    y = _rms_normed(h.to(tl.float32), nw, H, eps, dtype).to(dtype)                    # [BLOCK_H]
    logit = tl.sum(wr.to(tl.float32) * y.to(tl.float32)[None, :], axis=1).to(dtype)  # [BLOCK_R]
    tl.store(logits_ptr + t * stride_l_t + rows, logit.to(tl.float32), mask=row_ok)
    tl.debug_barrier()  # every thread's logits stored before the ticket releases them
    done = tl.atomic_add(count_ptr + t, 1, sem="acq_rel", scope="gpu")
    if done == PROGRAMS - 1:  # the token's other programs have stored their logits and read the residual
        tl.atomic_xchg(count_ptr + t, 0, sem="relaxed", scope="gpu")
        tl.store(res_ptr + t * stride_res_t + cols, h, mask=col_ok)
        tl.store(normed_ptr + t * stride_n_t + cols, y, mask=col_ok)
        experts = tl.arange(0, BLOCK_E)
        valid = experts < E
        z = tl.load(logits_ptr + t * stride_l_t + experts, mask=valid, other=-float("inf"), cache_modifier=".cg")
        top_w, top_i = _softmax_top_k(z, valid, experts, TOP_K, BLOCK_E, BLOCK_K, RENORMALIZE)
        ks = tl.arange(0, BLOCK_K)
        tl.store(weights_ptr + t * stride_w_t + ks, top_w, mask=ks < TOP_K)
        tl.store(ids_ptr + t * stride_ids_t + ks, top_i, mask=ks < TOP_K)


def _check_out(name: str, out: torch.Tensor, shape: tuple, dtype: torch.dtype, device: torch.device) -> None:
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) != shape or out.dtype != dtype or out.device != device:
        raise ValueError(f"{name} must be a {list(shape)} {dtype} tensor on {device}, got {list(out.shape)} "
                         f"{out.dtype} on {out.device}")
    if out.dim() == 2 and out.shape[1] > 1 and out.stride(1) != 1:
        raise ValueError(f"{name} needs a contiguous last dimension, got strides {out.stride()}")


def moe_route(logits: torch.Tensor, top_k: int, renormalize: bool, *, weights_out: torch.Tensor | None = None,
              ids_out: torch.Tensor | None = None, pdl: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """logits ``[T, E]`` (fp32/fp16/bf16) -> (weights ``[T, top_k]`` fp32, ids ``[T, top_k]`` int32).

    Softmax over E in fp32, the ``top_k`` largest probabilities in descending order (ties: the lower expert
    index first) and their experts; with ``renormalize`` the weights divided by their sum. One Triton program
    a token holds its row in registers (E up to ``MAX_EXPERTS``) and takes the arg-max ``top_k`` times
    (``top_k`` in [1, min(E, ``MAX_TOP_K``)]). ``weights_out`` / ``ids_out``: where to write them (e.g. a
    CUDA graph's buffers; last dimension contiguous). A row with a NaN logit gets NaN weights and still
    ``top_k`` distinct ids in [0, E). ``pdl``: programmatic dependent launch where supported.
    """
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2:
        raise ValueError(f"logits must be a [T, E] tensor, got {getattr(logits, 'shape', type(logits).__name__)}")
    T, E = logits.shape
    if logits.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"logits must be float32, float16 or bfloat16, got {logits.dtype}")
    if not 1 <= E <= MAX_EXPERTS:
        raise ValueError(f"logits must have 1 to {MAX_EXPERTS} experts (columns), got {E}")
    if E > 1 and logits.stride(1) != 1:
        raise ValueError(f"logits needs a contiguous last dimension, got strides {logits.stride()}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= min(E, MAX_TOP_K):
        raise ValueError(f"top_k must be an int in [1, {min(E, MAX_TOP_K)}] (E = {E}, at most {MAX_TOP_K}), "
                         f"got {top_k!r}")
    weights = weights_out if weights_out is not None else torch.empty(
        (T, top_k), dtype=torch.float32, device=logits.device)
    ids = ids_out if ids_out is not None else torch.empty((T, top_k), dtype=torch.int32, device=logits.device)
    _check_out("weights_out", weights, (T, top_k), torch.float32, logits.device)
    _check_out("ids_out", ids, (T, top_k), torch.int32, logits.device)
    if T == 0:
        return weights, ids
    block_e = triton.next_power_of_2(E)
    # 1 warp up to 256 experts (8 a thread), 2 at 512: not tuned (a few hundred bytes a token)
    _moe_route_kernel[(T,)](
        logits, weights, ids, logits.stride(0), weights.stride(0), ids.stride(0), E,
        TOP_K=top_k, BLOCK_E=block_e, BLOCK_K=triton.next_power_of_2(top_k), RENORMALIZE=bool(renormalize),
        num_warps=max(1, block_e // 256), **pdl_launch(logits.device, pdl))
    return weights, ids


# Rows of hidden size up to which moe_norm_route holds a row in registers.
NORM_ROUTE_MAX_HIDDEN = 8192


def norm_route_counters(tokens: int, device) -> torch.Tensor:
    """The tickets of :func:`moe_norm_route` for up to ``tokens`` tokens: int32 zeros, left zero by every launch
    (one buffer a caller, e.g. a layer: launches that may overlap need buffers of their own)."""
    return torch.zeros(tokens, dtype=torch.int32, device=device)


def moe_norm_route(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                   router: torch.Tensor, top_k: int, renormalize: bool, counters: torch.Tensor, *,
                   pdl: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The residual add and RMSNorm before a mixture of experts, its router's logits and their top-k, in one
    launch: ``residual += x`` (in place, rounded to x's dtype), ``normed = rms_norm(residual)``, ``logits = normed
    @ router^T`` (rounded to x's dtype) and ``moe_route(logits, top_k, renormalize)``; returns (normed, residual,
    weights ``[T, top_k]`` fp32, ids ``[T, top_k]`` int32), as :func:`tritium.ops.rms_norm.rms_norm`, a projection
    and :func:`moe_route` give them one after the other (reference: :func:`tritium.ops.reference.moe_norm_route`).

    x, residual ``[T, H]`` (16-bit or fp32, contiguous last dimension), norm_weight ``[H]``, router ``[E, H]`` in
    x's dtype, H up to ``NORM_ROUTE_MAX_HIDDEN``; ``counters``: :func:`norm_route_counters` for at least T tokens,
    not used by another launch in flight. Grid (T, E / rows a program): each program norms its token's row and
    computes some router rows; the token's last program to finish writes the residual, the normed row and the
    top-k. Decode sizes: the router's rows are read once a token."""
    for name, v in (("x", x), ("residual", residual), ("norm_weight", norm_weight), ("router", router),
                    ("counters", counters)):
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(v).__name__}")
    if x.dim() != 2 or x.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"x must be a [T, H] float32, float16 or bfloat16 tensor, got {list(x.shape)} {x.dtype}")
    T, H = x.shape
    if not 1 <= H <= NORM_ROUTE_MAX_HIDDEN:
        raise ValueError(f"x must have 1 to {NORM_ROUTE_MAX_HIDDEN} columns (hidden size), got {H}")
    _check_out("residual", residual, (T, H), x.dtype, x.device)
    if tuple(norm_weight.shape) != (H,) or norm_weight.device != x.device:
        raise ValueError(f"norm_weight must be a [{H}] tensor on {x.device}, got {list(norm_weight.shape)} on "
                         f"{norm_weight.device}")
    if router.dim() != 2 or router.shape[1] != H or router.dtype != x.dtype or router.device != x.device:
        raise ValueError(f"router must be an [E, {H}] {x.dtype} tensor on {x.device}, got {list(router.shape)} "
                         f"{router.dtype} on {router.device}")
    E = router.shape[0]
    if not 1 <= E <= MAX_EXPERTS:
        raise ValueError(f"router must have 1 to {MAX_EXPERTS} experts (rows), got {E}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= min(E, MAX_TOP_K):
        raise ValueError(f"top_k must be an int in [1, {min(E, MAX_TOP_K)}] (E = {E}, at most {MAX_TOP_K}), "
                         f"got {top_k!r}")
    if counters.dtype != torch.int32 or counters.dim() != 1 or counters.shape[0] < T or counters.device != x.device:
        raise ValueError(f"counters must be int32 [>= {T}] on {x.device} (norm_route_counters), got "
                         f"{counters.dtype} {list(counters.shape)} on {counters.device}")
    for name, v in (("x", x), ("router", router)):
        if H > 1 and v.stride(1) != 1:
            raise ValueError(f"{name} needs a contiguous last dimension, got strides {v.stride()}")
    normed = torch.empty((T, H), dtype=x.dtype, device=x.device)
    logits = torch.empty((T, E), dtype=torch.float32, device=x.device)
    weights = torch.empty((T, top_k), dtype=torch.float32, device=x.device)
    ids = torch.empty((T, top_k), dtype=torch.int32, device=x.device)
    if T == 0:
        return normed, residual, weights, ids
    block_h = triton.next_power_of_2(H)
    # NOTE: a router row a program and a warp a 2048 columns (sm_90: 208 registers at 2048, no spills; two rows
    # spill): the kernel is a chain of latencies, and one warp's reductions are shuffles where four warps' pass
    # through shared memory behind barriers (measured on an H200 with 4 warps and 4 rows a program, bench/NOTES.md
    # "Mixture of experts": 4.67 us exposed a layer against 4.3 for the three launches it replaced)
    _moe_norm_route_kernel[(T, E)](
        x, residual, norm_weight, router, normed, logits, weights, ids, counters,
        x.stride(0), residual.stride(0), router.stride(0), normed.stride(0), logits.stride(0), weights.stride(0),
        ids.stride(0), H, E, eps,
        TOP_K=top_k, BLOCK_H=block_h, BLOCK_R=1, BLOCK_E=triton.next_power_of_2(E),
        BLOCK_K=triton.next_power_of_2(top_k), RENORMALIZE=bool(renormalize), PROGRAMS=E,
        num_warps=max(1, block_h // 2048), **pdl_launch(x.device, pdl))
    return normed, residual, weights, ids


# -- experts: per-slot path --------------------------------------------------------------------------------------

@triton.jit
def _moe_up_slot_kernel(
    # pointers
    x_ptr, w_ptr, ids_ptr, act_ptr, scale_ptr,
    # strides
    stride_x_t, stride_w_e, stride_w_n, stride_ids_t, stride_ids_k, stride_act_s, stride_scale_e,
    # sizes
    H, I, E,
    # meta-parameters
    TOP_K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, USE_PDL: tl.constexpr,
    SCALED: tl.constexpr = False,
):
    """Grid (S, cdiv(I, BLOCK_N)): program (s, n) writes ``act[s, cols] = silu(x[t] Wg[e]^T) * (x[t] Wu[e]^T)``
    for the BLOCK_N columns ``cols`` of tile n, t = s // TOP_K, e = ids[t, s % TOP_K]: fp32 products
    accumulated over BLOCK_K chunks of H and reduced once, the next weight chunks requested before the
    current ones are used; rounded to x's dtype as :func:`tritium.ops.reference.fused_moe` rounds. SCALED (fp8
    weights): each row's sum times its scale ``scale[e, row]`` before the rounding."""
    s = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)                         # [BLOCK_N] gate rows
    ks = tl.arange(0, BLOCK_K)                                                         # [BLOCK_K]
    col_ok = cols < I
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x and ids come from the kernels before
        tl.extra.cuda.gdc_launch_dependents()  # the down projection may launch (it waits for act)
    t = s // TOP_K
    e = tl.load(ids_ptr + t * stride_ids_t + (s % TOP_K) * stride_ids_k)
    ok = (e >= 0) & (e < E)
    k_end = tl.where(ok, H, 0)  # an id outside [0, E): no weight read, act = silu(0) * 0 = 0
    w_base = w_ptr + tl.where(ok, e, 0).to(tl.int64) * stride_w_e
    wg_ptrs = w_base + cols.to(tl.int64)[:, None] * stride_w_n + ks[None, :]           # [BLOCK_N, BLOCK_K]
    wu_ptrs = w_base + (cols + I).to(tl.int64)[:, None] * stride_w_n + ks[None, :]     # [BLOCK_N, BLOCK_K]
    x_ptrs = x_ptr + t.to(tl.int64) * stride_x_t + ks                                  # [BLOCK_K]
    mask = ok & col_ok[:, None] & (ks < H)[None, :]
    wg = tl.load(wg_ptrs, mask=mask, other=0.0)
    wu = tl.load(wu_ptrs, mask=mask, other=0.0)
    acc_g = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, k_end, BLOCK_K):
        xk = tl.load(x_ptrs + k0, mask=k0 + ks < H, other=0.0).to(tl.float32)[None, :]  # [1, BLOCK_K]
        mask = col_ok[:, None] & (k0 + BLOCK_K + ks < H)[None, :]  # the next chunk (none past H)
        wg_next = tl.load(wg_ptrs + (k0 + BLOCK_K), mask=mask, other=0.0)
        wu_next = tl.load(wu_ptrs + (k0 + BLOCK_K), mask=mask, other=0.0)
        acc_g += wg.to(tl.float32) * xk
        acc_u += wu.to(tl.float32) * xk
        wg = wg_next
        wu = wu_next
    dtype = act_ptr.dtype.element_ty
    g = tl.sum(acc_g, axis=1)
    u = tl.sum(acc_u, axis=1)
    if SCALED:
        scale_row = scale_ptr + tl.where(ok, e, 0).to(tl.int64) * stride_scale_e
        g *= tl.load(scale_row + cols, mask=col_ok, other=0.0)
        u *= tl.load(scale_row + I + cols, mask=col_ok, other=0.0)
    act = _silu_mul(g.to(dtype), u.to(dtype))  # [BLOCK_N]
    tl.store(act_ptr + s.to(tl.int64) * stride_act_s + cols, act, mask=col_ok)


@triton.jit
def _moe_down_token_kernel(
    # pointers
    act_ptr, w_ptr, ids_ptr, rw_ptr, out_ptr, scale_ptr,
    # strides
    stride_act_s, stride_w_e, stride_w_n, stride_ids_t, stride_ids_k, stride_rw_t, stride_rw_k, stride_out_t,
    stride_scale_e,
    # sizes
    H, I, E,
    # meta-parameters
    TOP_K: tl.constexpr, SLOTS: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    USE_PDL: tl.constexpr, SCALED: tl.constexpr = False,
):
    """Grid (S / SLOTS, cdiv(H, BLOCK_N)): program (p, n) writes ``out[p, cols] = sum_s rw[s] * act[s] Wd[e_s]^T``
    over its SLOTS slots s = p * SLOTS + jj for the BLOCK_N columns of tile n: each act chunk scaled by its routing
    weight, the slots' products in one fp32 accumulator, reduced and rounded once. SLOTS = TOP_K: a token's row of
    the output; SLOTS = 1: one slot's weighted row (an fp32 partial, summed over the token's slots after).

    The first slot's id, routing weight and weight chunk are requested before the PDL wait: the ids and weights
    come from the router two launches before (the gate/up kernel this one follows waited for it before
    releasing this one) and Wd is never written, so only act has to wait; the latency of the first DRAM reads
    hides under the gate/up kernel's last programs.

    SCALED (fp8 weights, a scale per row of Wd[e]): a slot's products are reduced at the end of its chunks and
    times its expert's row scales (its own reduction), the slots' scaled sums added in fp32."""
    p = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)                         # [BLOCK_N] rows of Wd
    ks = tl.arange(0, BLOCK_K)                                                         # [BLOCK_K]
    col_ok = cols < H
    row_offs = cols.to(tl.int64)[:, None] * stride_w_n + ks[None, :]                   # [BLOCK_N, BLOCK_K]
    # slot p * SLOTS: its expert, routing weight and first weight chunk
    t = (p * SLOTS) // TOP_K
    j = (p * SLOTS) % TOP_K
    e = tl.load(ids_ptr + t * stride_ids_t + j * stride_ids_k)
    rw = tl.load(rw_ptr + t * stride_rw_t + j * stride_rw_k)
    ok = (e >= 0) & (e < E)
    w_ptrs = w_ptr + tl.where(ok, e, 0).to(tl.int64) * stride_w_e + row_offs
    w = tl.load(w_ptrs, mask=ok & col_ok[:, None] & (ks < I)[None, :], other=0.0)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # act comes from the gate/up kernel before
        tl.extra.cuda.gdc_launch_dependents()
    acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
    total = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for jj in range(SLOTS):
        s = p * SLOTS + jj
        k_end = tl.where(ok, I, 0)  # an id outside [0, E): the slot adds nothing
        if SCALED:
            scale = tl.load(scale_ptr + tl.where(ok, e, 0).to(tl.int64) * stride_scale_e + cols, mask=col_ok,
                            other=0.0)
        a_ptrs = act_ptr + s * stride_act_s + ks                                         # [BLOCK_K]
        for k0 in range(0, k_end, BLOCK_K):
            a = tl.load(a_ptrs + k0, mask=k0 + ks < I, other=0.0).to(tl.float32) * rw  # [BLOCK_K]
            w_next = tl.load(w_ptrs + (k0 + BLOCK_K), mask=col_ok[:, None] & (k0 + BLOCK_K + ks < I)[None, :],
                             other=0.0)
            acc += w.to(tl.float32) * a[None, :]
            w = w_next
        if SCALED:
            total += tl.sum(acc, axis=1) * scale
            acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        # the next slot's expert, routing weight and first chunk (none after the last)
        more = jj + 1 < SLOTS
        t = (s + 1) // TOP_K
        j = (s + 1) % TOP_K
        e = tl.load(ids_ptr + t * stride_ids_t + j * stride_ids_k, mask=more, other=-1)
        rw = tl.load(rw_ptr + t * stride_rw_t + j * stride_rw_k, mask=more, other=0.0)
        ok = (e >= 0) & (e < E)
        w_ptrs = w_ptr + tl.where(ok, e, 0).to(tl.int64) * stride_w_e + row_offs
        w = tl.load(w_ptrs, mask=ok & col_ok[:, None] & (ks < I)[None, :], other=0.0)
    if SCALED:
        out = total
    else:
        out = tl.sum(acc, axis=1)                                                      # [BLOCK_N]
    tl.store(out_ptr + p * stride_out_t + cols, out.to(out_ptr.dtype.element_ty), mask=col_ok)


# -- experts: sorted path ----------------------------------------------------------------------------------------

@triton.jit
def _sorted_block(sorted_slots_ptr, block_expert_ptr, b, S, BLOCK_M: tl.constexpr):
    """Block b of the sorted slots: its expert (-1: none), its BLOCK_M slots (padding as slot 0) and which are
    real (``slots < S``)."""
    e = tl.load(block_expert_ptr + b)
    slots = tl.load(sorted_slots_ptr + b * BLOCK_M + tl.arange(0, BLOCK_M))           # [BLOCK_M]
    row_ok = slots < S
    return e, tl.where(row_ok, slots, 0).to(tl.int64), row_ok


@triton.jit(do_not_specialize=["S"])  # S changes with every batch
def _moe_up_sorted_kernel(
    # pointers
    x_ptr, w_ptr, sorted_slots_ptr, block_expert_ptr, act_ptr, scale_ptr,
    # strides
    stride_x_t, stride_w_e, stride_w_n, stride_act_s, stride_scale_e,
    # sizes
    H, I, S,
    # meta-parameters
    TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr, USE_PDL: tl.constexpr, SCALED: tl.constexpr = False,
):
    """Grid (blocks, cdiv(I, BLOCK_N)): program (b, n) takes the BLOCK_M sorted slots of block b (one expert
    e = block_expert[b]; padding slots are S), gathers their tokens' rows of x and writes
    ``act[slot, cols] = silu(x Wg[e]^T) * (x Wu[e]^T)`` (tl.dot, fp32 accumulators). Blocks of expert -1
    (past the end, or ids out of range) read no weight. SCALED (fp8 weights): the tiles converted to x's dtype in
    registers, each column of the products times its row's scale ``scale[e, row]`` after the loop."""
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)                         # [BLOCK_N]
    ks = tl.arange(0, BLOCK_K)                                                         # [BLOCK_K]
    col_ok = cols < I
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x and the sorted slots come from the kernels before
        tl.extra.cuda.gdc_launch_dependents()
    e, slots, row_ok = _sorted_block(sorted_slots_ptr, block_expert_ptr, b, S, BLOCK_M)
    k_end = tl.where(e >= 0, H, 0)
    w_base = w_ptr + tl.maximum(e, 0).to(tl.int64) * stride_w_e
    x_ptrs = x_ptr + (slots // TOP_K)[:, None] * stride_x_t + ks[None, :]              # [BLOCK_M, BLOCK_K]
    wg_ptrs = w_base + cols.to(tl.int64)[None, :] * stride_w_n + ks[:, None]           # [BLOCK_K, BLOCK_N]
    wu_ptrs = w_base + (cols + I).to(tl.int64)[None, :] * stride_w_n + ks[:, None]     # [BLOCK_K, BLOCK_N]
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k_end, BLOCK_K):
        k_ok = k0 + ks < H
        a = tl.load(x_ptrs + k0, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        wg = tl.load(wg_ptrs + k0, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        wu = tl.load(wu_ptrs + k0, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc_g = tl.dot(a, wg.to(a.dtype), acc_g, input_precision=DOT_PRECISION)
        acc_u = tl.dot(a, wu.to(a.dtype), acc_u, input_precision=DOT_PRECISION)
    if SCALED:
        scale_row = scale_ptr + tl.maximum(e, 0).to(tl.int64) * stride_scale_e
        acc_g *= tl.load(scale_row + cols, mask=col_ok, other=0.0)[None, :]
        acc_u *= tl.load(scale_row + I + cols, mask=col_ok, other=0.0)[None, :]
    dtype = act_ptr.dtype.element_ty
    act = _silu_mul(acc_g.to(dtype), acc_u.to(dtype))                                 # [BLOCK_M, BLOCK_N]
    tl.store(act_ptr + slots[:, None] * stride_act_s + cols[None, :], act, mask=row_ok[:, None] & col_ok[None, :])


@triton.jit(do_not_specialize=["S"])  # S changes with every batch
def _moe_down_sorted_kernel(
    # pointers
    act_ptr, w_ptr, sorted_slots_ptr, block_expert_ptr, rw_ptr, buf_ptr, scale_ptr,
    # strides
    stride_act_s, stride_w_e, stride_w_n, stride_rw_t, stride_rw_k, stride_buf_s, stride_scale_e,
    # sizes
    H, I, S,
    # meta-parameters
    TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr, USE_PDL: tl.constexpr, SCALED: tl.constexpr = False,
):
    """Grid (blocks, cdiv(H, BLOCK_N)): program (b, n) writes ``buf[slot, cols] = rw[slot] * act[slot]
    Wd[e]^T`` (fp32) for the block's slots; a block of expert -1 writes zeros for its slots (ids out of
    range), so that every slot's row of buf is written. SCALED (fp8 weights): as the gate/up kernel, the scale of
    Wd[e]'s row ``cols`` times each column."""
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)                         # [BLOCK_N]
    ks = tl.arange(0, BLOCK_K)                                                         # [BLOCK_K]
    col_ok = cols < H
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # act comes from the gate/up kernel before
        tl.extra.cuda.gdc_launch_dependents()
    e, slots, row_ok = _sorted_block(sorted_slots_ptr, block_expert_ptr, b, S, BLOCK_M)
    k_end = tl.where(e >= 0, I, 0)
    a_ptrs = act_ptr + slots[:, None] * stride_act_s + ks[None, :]                     # [BLOCK_M, BLOCK_K]
    w_ptrs = (w_ptr + tl.maximum(e, 0).to(tl.int64) * stride_w_e
              + cols.to(tl.int64)[None, :] * stride_w_n + ks[:, None])                # [BLOCK_K, BLOCK_N]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k_end, BLOCK_K):
        k_ok = k0 + ks < I
        a = tl.load(a_ptrs + k0, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_ptrs + k0, mask=k_ok[:, None] & col_ok[None, :], other=0.0)
        acc = tl.dot(a, w.to(a.dtype), acc, input_precision=DOT_PRECISION)
    if SCALED:
        acc *= tl.load(scale_ptr + tl.maximum(e, 0).to(tl.int64) * stride_scale_e + cols, mask=col_ok,
                       other=0.0)[None, :]
    rw = tl.load(rw_ptr + (slots // TOP_K) * stride_rw_t + (slots % TOP_K) * stride_rw_k, mask=row_ok, other=0.0)
    out = tl.where(e >= 0, acc * rw[:, None], 0.0)                                     # [BLOCK_M, BLOCK_N]
    tl.store(buf_ptr + slots[:, None] * stride_buf_s + cols[None, :], out, mask=row_ok[:, None] & col_ok[None, :])


@triton.jit
def _moe_sum_slots_kernel(
    # pointers
    buf_ptr, out_ptr,
    # strides
    stride_buf_s, stride_out_t,
    # sizes
    H,
    # meta-parameters
    TOP_K: tl.constexpr, BLOCK: tl.constexpr, USE_PDL: tl.constexpr,
):
    """Grid (T, cdiv(H, BLOCK)): ``out[t, cols] = sum_j buf[t * TOP_K + j, cols]`` (fp32 rows, added in slot
    order, rounded once to out's dtype)."""
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)                             # [BLOCK]
    mask = cols < H
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # buf comes from the down kernel before
        tl.extra.cuda.gdc_launch_dependents()
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for j in range(TOP_K):
        acc += tl.load(buf_ptr + (t * TOP_K + j) * stride_buf_s + cols, mask=mask, other=0.0)
    tl.store(out_ptr + t * stride_out_t + cols, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _sum_slots(buf: torch.Tensor, out: torch.Tensor, k: int, pdl_kw: dict) -> None:
    """out ``[T, H]`` = each token's k fp32 rows of buf ``[T k, H]`` summed (one launch, in the PDL chain)."""
    T, H = out.shape
    block = min(1024, triton.next_power_of_2(H))
    # NOTE: one launch instead of torch's sum and cast (two, outside the PDL chain); not timed apart
    _moe_sum_slots_kernel[(T, triton.cdiv(H, block))](
        buf, out, buf.stride(0), out.stride(0), H, TOP_K=k, BLOCK=block, num_warps=4, **pdl_kw)


# Slots up to which one program sorts them (_moe_align_kernel); above, torch ops (_sort_slots).
# NOTE: a chunk of 64 slots a step, one gather and one scatter each: ~1-2 us a chunk, where _sort_slots' ~20
# small launches cost ~30-40 us inside a graph (estimates; the engine's batch-64 step measures it).
ALIGN_MAX_SLOTS = 2048


@triton.jit
def _chunk_experts(ids_ptr, stride_ids_t, stride_ids_k, s, S, E, TOP_K: tl.constexpr):
    """Slots ``s`` (a chunk): (s, which are real, their experts; bucket E for ids outside [0, E))."""
    ok = s < S
    e = tl.load(ids_ptr + (s // TOP_K).to(tl.int64) * stride_ids_t + (s % TOP_K) * stride_ids_k, mask=ok, other=0)
    return s, ok, tl.where((e >= 0) & (e < E), e, E).to(tl.int32)


@triton.jit
def _bin_counts(e, ok, bins):
    """How many of the real slots of a chunk each bucket ``bins`` has."""
    return tl.sum(((e[:, None] == bins[None, :]) & ok[:, None]).to(tl.int32), axis=0)


@triton.jit
def _moe_align_kernel(
    # pointers
    ids_ptr, sorted_ptr, block_expert_ptr, cursor_ptr,
    # strides
    stride_ids_t, stride_ids_k,
    # sizes
    S, E, num_blocks,
    # meta-parameters
    TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, E_PAD: tl.constexpr, CHUNK: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """One program: :func:`_sort_slots`' table (the same, element for element) with a scratch ``cursor``
    ``[E_PAD]``. Counts per expert (bucket E: ids out of range), each expert's run from a multiple of BLOCK_M,
    the table filled with the sentinel S, each block's expert, then the slots placed chunk by chunk in slot
    order: a slot's place = its expert's cursor + the earlier slots of its chunk with the same expert."""
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the ids come from the router before
        tl.extra.cuda.gdc_launch_dependents()
    bins = tl.arange(0, E_PAD)                                                         # [E_PAD]
    lanes = tl.arange(0, CHUNK)                                                        # [CHUNK]
    counts = tl.zeros((E_PAD,), dtype=tl.int32)
    for c0 in range(0, S, CHUNK):
        s, ok, e = _chunk_experts(ids_ptr, stride_ids_t, stride_ids_k, c0 + lanes, S, E, TOP_K)
        counts += _bin_counts(e, ok, bins)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, 0)                                                        # [E_PAD]
    cursor = ends - padded
    for p0 in range(0, num_blocks * BLOCK_M, CHUNK):
        fill = S + tl.zeros((CHUNK,), dtype=tl.int32)
        tl.store(sorted_ptr + p0 + lanes, fill, mask=p0 + lanes < num_blocks * BLOCK_M)
    for b0 in range(0, num_blocks, CHUNK):
        b = b0 + lanes
        owner = tl.sum((ends[None, :] <= (b * BLOCK_M)[:, None]).to(tl.int32), axis=1)  # buckets that end before
        tl.store(block_expert_ptr + b, tl.where(owner < E, owner, -1), mask=b < num_blocks)
    tl.store(cursor_ptr + bins, cursor)
    tl.debug_barrier()
    for c0 in range(0, S, CHUNK):
        s, ok, e = _chunk_experts(ids_ptr, stride_ids_t, stride_ids_k, c0 + lanes, S, E, TOP_K)
        earlier = tl.sum(((e[:, None] == e[None, :]) & (lanes[None, :] < lanes[:, None]) & ok[None, :])
                         .to(tl.int32), axis=1)                                        # [CHUNK]
        place = tl.load(cursor_ptr + e, mask=ok, other=0) + earlier
        tl.store(sorted_ptr + place, s, mask=ok)
        cursor += _bin_counts(e, ok, bins)
        tl.debug_barrier()  # every lane has read the cursors before they move
        tl.store(cursor_ptr + bins, cursor)
        tl.debug_barrier()


def _align_slots(ids: torch.Tensor, E: int, block_m: int, pdl_kw: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_sort_slots`' table by one launch of :func:`_moe_align_kernel` (S <= ``ALIGN_MAX_SLOTS``)."""
    T, k = ids.shape
    S = T * k
    blocks = S // block_m + min(E + 1, S)
    sorted_slots = torch.empty(blocks * block_m, dtype=torch.int32, device=ids.device)
    block_expert = torch.empty(blocks, dtype=torch.int32, device=ids.device)
    e_pad = triton.next_power_of_2(E + 1)
    cursor = torch.empty(e_pad, dtype=torch.int32, device=ids.device)
    _moe_align_kernel[(1,)](
        ids, sorted_slots, block_expert, cursor, ids.stride(0), ids.stride(1), S, E, blocks,
        TOP_K=k, BLOCK_M=block_m, E_PAD=e_pad, CHUNK=64, num_warps=4, **pdl_kw)
    return sorted_slots, block_expert


def _sort_slots(ids: torch.Tensor, E: int, block_m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The slots of ``ids`` ``[T, k]`` grouped by expert for the sorted kernels, with torch ops of static shapes
    that never wait for the device (CUDA-graph safe): (sorted_slots int32 ``[blocks * block_m]``, block_expert
    int32 ``[blocks]``). Each expert's slots, in slot order, fill whole blocks of ``block_m`` from a multiple of
    ``block_m`` on, the rest of its last block the sentinel S; ``block_expert[b]`` is the expert of block b, or
    -1 past the last expert's blocks. Slots with an id outside [0, E) go to an extra bucket E after them
    (blocks of -1 too). ``blocks`` = S // block_m + min(E + 1, S), enough whatever the ids:
    sum_e ceil(c_e / block_m) <= S / block_m + (buckets in use)."""
    S = ids.numel()
    dev = ids.device
    flat = ids.reshape(-1).long()
    eid = torch.where((flat >= 0) & (flat < E), flat, E)                               # [S], bucket E: out of range
    # NOTE: counts by scatter_add_, not torch.bincount (which reads the maximum back to the host)
    counts = torch.zeros(E + 1, dtype=torch.int64, device=dev).scatter_add_(0, eid, torch.ones_like(eid))
    padded = (counts + block_m - 1) // block_m * block_m                               # [E + 1]
    padded_end = torch.cumsum(padded, 0)                                               # [E + 1]
    order = torch.argsort(eid, stable=True)                                            # [S] slots by expert
    sorted_eid = eid[order]
    first = torch.cumsum(counts, 0) - counts                                           # [E + 1]
    dest = (padded_end - padded)[sorted_eid] + torch.arange(S, device=dev) - first[sorted_eid]
    blocks = S // block_m + min(E + 1, S)
    sorted_slots = torch.full((blocks * block_m,), S, dtype=torch.int32, device=dev)
    sorted_slots.scatter_(0, dest, order.to(torch.int32))
    starts = torch.arange(blocks, device=dev) * block_m
    block_expert = torch.searchsorted(padded_end, starts, right=True)                  # [blocks] in 0..E + 1
    block_expert = torch.where(block_expert < E, block_expert, -1).to(torch.int32)
    return sorted_slots, block_expert


# -- launcher ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MoeTiles:
    """Tiles of one :func:`fused_moe` call. ``block_m``: sorted slots a program (sorted path; 0 on the per-slot
    path); ``up_n`` / ``up_k``: columns of I and chunk of H of a gate/up program; ``down_n`` / ``down_k``:
    columns of H and chunk of I of a down program; ``down_per_slot`` (per-slot path): a down program per slot
    writing an fp32 partial row (summed over each token's slots after: k times the programs, one more launch)
    instead of one per token."""
    block_m: int
    up_n: int
    up_k: int
    down_n: int
    down_k: int
    num_warps: int
    num_stages: int
    down_per_slot: bool = False

    def __post_init__(self):
        for name in ("block_m", "up_n", "up_k", "down_n", "down_k", "num_warps", "num_stages"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "block_m" else 1):
                raise ValueError(f"MoeTiles: {name} must be a positive int (block_m: 0 for the per-slot path), "
                                 f"got {v!r}")
            if name != "num_stages" and v & (v - 1):
                raise ValueError(f"MoeTiles: {name} must be a power of two, got {v}")
        if self.block_m and self.block_m < 16:
            raise ValueError(f"MoeTiles: block_m must be 0 (per-slot path) or >= 16 (tl.dot), got {self.block_m}")


def moe_tiles(T: int, k: int, H: int, I: int, E: int, dtype: torch.dtype, device: torch.device,
              path: str | None = None) -> MoeTiles:
    """Tiles for :func:`fused_moe` by shape (path: per slot for one token, whose slots are distinct experts, or
    S = T * k <= ``PER_SLOT_MAX_SLOTS_PER_EXPERT`` x E; unless ``path`` = "slot" or "sorted" forces one).

    NOTE: measured on an H200 (bench/probe_moe.py: 48 per-slot and 11 sorted candidates, cold, bf16, at the
    shapes of Qwen3-30B-A3B and Mixtral-8x7B, T = 1..8192; bench/NOTES.md "Mixture of experts"). Per-slot: gate/up
    4 columns x 512-wide chunks at T <= 2, 8 x 256 above (16 x 128, the first guess, was 1.1-1.6x the best);
    down 16 x 256 a slot (fp32 partials, summed after) at T = 1, 8 x 256 a token above; within 1.1% of the
    best at every T swept. Sorted, by the average slots an expert a = S / E: a < 8 BLOCK_M 16 with 32 x 128
    tiles (4 warps, 4 stages); a < 64 BLOCK_M 64, 64 x 64 gate/up and 128 x 64 down tiles (8 warps); a < 256
    BLOCK_M 128, the same; above, 128 x 64 gate/up tiles too: within 1.08x of the best swept (1.0x at T >= 1024;
    the first guess, BLOCK_M <= 64 with 64 x 64 tiles, was 1.24-1.56x there). Where a tile's pipelined shared
    memory passes the device's (MI300X: 64 KiB), the 64 x 64 tiles at BLOCK_M 64, 4 warps. fp32 (the CPU tests;
    FMA dots, no tensor cores): 32-wide chunks, BLOCK_M at most 32 (at 64 it spills)."""
    S = T * k
    if path not in (None, "slot", "sorted"):
        raise ValueError(f"path must be None (chosen by the number of slots), 'slot' or 'sorted', got {path!r}")
    if path == "slot" or (path is None and (T == 1 or S <= PER_SLOT_MAX_SLOTS_PER_EXPERT * E)):
        up_n, up_k = (4, 512) if T <= 2 else (8, 256)
        down_n, down_k = (16, 256) if T == 1 else (8, 256)
        return MoeTiles(0, up_n, min(up_k, max(16, triton.next_power_of_2(H))), down_n,
                        min(down_k, max(16, triton.next_power_of_2(I))), num_warps=4, num_stages=1,
                        down_per_slot=T == 1)
    if dtype == torch.float32:
        block_m = min(32, max(16, triton.next_power_of_2(triton.cdiv(S, E))))
        return MoeTiles(block_m, 64, 32, 64, 32, num_warps=4, num_stages=3)
    a = S / E
    if a < 8:
        tiles = MoeTiles(16, 32, 128, 32, 128, num_warps=4, num_stages=4)
    elif a < 256:
        tiles = MoeTiles(64 if a < 64 else 128, 64, 64, 128, 64, num_warps=8, num_stages=3)
    else:
        tiles = MoeTiles(128, 128, 64, 128, 64, num_warps=8, num_stages=3)
    limit = max_shared_memory(device)
    if limit is not None and _sorted_smem(tiles, dtype) > limit:
        tiles = MoeTiles(64, 64, 64, 64, 64, num_warps=4, num_stages=3)
    return tiles


def _sorted_smem(t: MoeTiles, dtype: torch.dtype) -> int:
    """Shared memory of the sorted kernels' pipelined operands (the larger of the two), bytes."""
    stages = pipeline_stages(t.num_stages)
    up = t.block_m * t.up_k + 2 * t.up_k * t.up_n
    down = t.block_m * t.down_k + t.down_k * t.down_n
    return stages * max(up, down) * dtype.itemsize


def _check_moe(x, w_gate_up, w_down, weights, ids, out, gate_up_scale=None, down_scale=None
               ) -> tuple[int, int, int, int, int]:
    """(T, H, I, E, k) of :func:`fused_moe`'s operands; ValueError naming the one that does not fit."""
    for name, v in (("x", x), ("w_gate_up", w_gate_up), ("w_down", w_down), ("weights", weights), ("ids", ids)):
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(v).__name__}")
    if x.dim() != 2:
        raise ValueError(f"x must be [T, H], got {list(x.shape)}")
    T, H = x.shape
    if x.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"x must be float32, float16 or bfloat16, got {x.dtype}")
    if w_gate_up.dim() != 3 or w_gate_up.shape[2] != H or w_gate_up.shape[1] % 2 or w_gate_up.shape[1] == 0:
        raise ValueError(f"w_gate_up must be [E, 2I, {H}] (gate rows then up rows, H of x), got "
                         f"{list(w_gate_up.shape)}")
    E, I = w_gate_up.shape[0], w_gate_up.shape[1] // 2
    if E == 0:
        raise ValueError("w_gate_up must hold at least one expert, got E = 0")
    if tuple(w_down.shape) != (E, H, I):
        raise ValueError(f"w_down must be [{E}, {H}, {I}] (E, H, I of w_gate_up and x), got {list(w_down.shape)}")
    if (w_gate_up.dtype == FP8_DTYPE) != (w_down.dtype == FP8_DTYPE):
        raise ValueError(f"w_gate_up and w_down must both be float8 (weight-only fp8) or neither, got "
                         f"{w_gate_up.dtype} and {w_down.dtype}")
    for name, w, scale, rows in (("w_gate_up", w_gate_up, gate_up_scale, 2 * I), ("w_down", w_down, down_scale, H)):
        sname = "gate_up_scale" if name == "w_gate_up" else "down_scale"
        if w.dtype == FP8_DTYPE:
            if not isinstance(scale, torch.Tensor) or scale.dtype != torch.float32 or tuple(scale.shape) != (E, rows):
                raise ValueError(f"{name} is float8: {sname} must be a float32 [{E}, {rows}] tensor (a scale per row "
                                 f"of each expert), got {_describe(scale)}")
            if scale.device != x.device or scale.stride(-1) != 1:
                raise ValueError(f"{sname} must be on x's device {x.device} with a contiguous last dimension")
        elif w.dtype != x.dtype:
            raise ValueError(f"{name} must have x's dtype {x.dtype} or be float8_e4m3fn (with {sname}), got {w.dtype}")
        elif scale is not None:
            raise ValueError(f"{sname} is for float8 weights; {name} is {w.dtype}")
    if weights.dim() != 2 or weights.shape[0] != T:
        raise ValueError(f"weights must be [{T}, k] (a row per token of x), got {list(weights.shape)}")
    k = weights.shape[1]
    if not 1 <= k <= E:
        raise ValueError(f"weights must have 1 to E = {E} columns (top_k), got {k}")
    if weights.dtype != torch.float32:
        raise ValueError(f"weights must be float32 (routing weights), got {weights.dtype}")
    if tuple(ids.shape) != (T, k):
        raise ValueError(f"ids must be [{T}, {k}] like weights, got {list(ids.shape)}")
    if ids.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"ids must be int32 or int64, got {ids.dtype}")
    for name, v in (("w_gate_up", w_gate_up), ("w_down", w_down), ("weights", weights), ("ids", ids)):
        if v.device != x.device:
            raise ValueError(f"{name} must be on x's device {x.device}, got {v.device}")
    for name, v in (("x", x), ("w_gate_up", w_gate_up), ("w_down", w_down)):
        if v.shape[-1] > 1 and v.stride(-1) != 1:
            raise ValueError(f"{name} needs a contiguous last dimension, got strides {v.stride()}")
    if out is not None:
        _check_out("out", out, (T, H), x.dtype, x.device)
    return T, H, I, E, k


def fused_moe(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor, weights: torch.Tensor,
              ids: torch.Tensor, *, out: torch.Tensor | None = None, pdl: bool = True,
              path: str | None = None, tiles: MoeTiles | None = None, gate_up_scale: torch.Tensor | None = None,
              down_scale: torch.Tensor | None = None) -> torch.Tensor:
    """The routed experts' SwiGLU MLPs, weighted and summed: x ``[T, H]`` (fp32/fp16/bf16), w_gate_up
    ``[E, 2I, H]`` (rows 0..I-1 the gate, I..2I-1 the up projection; x's dtype), w_down ``[E, H, I]``,
    weights ``[T, k]`` fp32, ids ``[T, k]`` int32/int64 -> out ``[T, H]`` in x's dtype::

        act_j  = silu(x[t] @ Wg[e].T) * (x[t] @ Wu[e].T)         e = ids[t, j]; fp32 sums, act in x's dtype
        out[t] = sum_j weights[t, j] * (act_j @ Wd[e].T)          fp32 sums, rounded once

    (act rounded as transformers computes it in the model dtype: the products, the SiLU and act). A slot
    whose id is outside [0, E) adds nothing (see the module docstring). x, w_gate_up, w_down and ``out``
    need a contiguous last dimension; weights and ids any strides. T = 0 launches nothing. ``out``: where
    to write the result. ``pdl``: programmatic dependent launch where supported. Per-slot path for one token or S = T *
    k <= ``PER_SLOT_MAX_SLOTS_PER_EXPERT`` x E, else the sorted one (module docstring); ``path`` = "slot" or
    "sorted" forces one and ``tiles`` (:class:`MoeTiles`) sets every tile, its ``block_m`` the path (benchmarks,
    tuning).

    Weight-only fp8: w_gate_up and w_down float8_e4m3fn with ``gate_up_scale [E, 2I]`` and ``down_scale [E, H]``
    (fp32, a scale per row of each expert's weight: Wg[e] = w_gate_up[e, :I] * gate_up_scale[e, :I, None] ...).
    The weights are converted in registers (to fp32 in the per-slot kernels, to x's dtype for the sorted
    path's tensor cores) and each row's products scaled once."""
    T, H, _, _, _ = _check_moe(x, w_gate_up, w_down, weights, ids, out, gate_up_scale, down_scale)
    if out is None:
        out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    parts = _experts(x, w_gate_up, w_down, weights, ids, out, pdl, path, tiles, gate_up_scale, down_scale)
    if parts is not None:
        _sum_slots(parts, out, weights.shape[1], pdl_launch(x.device, pdl))
    return out


def fused_moe_add_norm(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor, weights: torch.Tensor,
                       ids: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float, *,
                       pdl: bool = True, path: str | None = None, tiles: MoeTiles | None = None,
                       gate_up_scale: torch.Tensor | None = None,
                       down_scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fused_moe` followed by the residual add and RMSNorm of the layer after it:
    ``residual += fused_moe(x, ...)`` (rounded to x's dtype first, in place) and ``(rms_norm(residual), residual)``
    returned, as :func:`tritium.ops.rms_norm.rms_norm` (x, residual) does. Where the experts leave fp32 partial
    rows to sum (one token, or the sorted path), the sum, the add and the norm are one launch
    (:func:`tritium.ops.rms_norm.sum_rms_norm`) instead of two. residual: ``[T, H]`` in x's dtype; norm_weight
    ``[H]``; fp8 weights with their scales as :func:`fused_moe`."""
    T, H, _, _, k = _check_moe(x, w_gate_up, w_down, weights, ids, None, gate_up_scale, down_scale)
    _check_out("residual", residual, (T, H), x.dtype, x.device)
    if not isinstance(norm_weight, torch.Tensor) or tuple(norm_weight.shape) != (H,):
        raise ValueError(f"norm_weight must be a [{H}] tensor, got {getattr(norm_weight, 'shape', norm_weight)!r}")
    out = torch.empty((T, H), dtype=x.dtype, device=x.device)
    parts = _experts(x, w_gate_up, w_down, weights, ids, out, pdl, path, tiles, gate_up_scale, down_scale)
    if parts is not None:
        return sum_rms_norm(parts, k, norm_weight, eps, residual, pdl=pdl)
    return rms_norm(out, norm_weight, eps, residual, pdl=pdl)


def _experts(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor, weights: torch.Tensor,
             ids: torch.Tensor, out: torch.Tensor, pdl: bool, path: str | None, tiles: MoeTiles | None,
             gate_up_scale: torch.Tensor | None = None, down_scale: torch.Tensor | None = None
             ) -> torch.Tensor | None:
    """The experts' launches of :func:`fused_moe` (operands checked): the output written into ``out``, or the
    fp32 ``[T k, H]`` rows of each slot returned for the caller to sum (one token on the per-slot path, and the
    sorted path)."""
    (T, H), (E, I2, _), k = x.shape, w_gate_up.shape, weights.shape[1]
    I = I2 // 2
    if path not in (None, "slot", "sorted"):
        raise ValueError(f"path must be None (chosen by the number of slots), 'slot' or 'sorted', got {path!r}")
    if T == 0:
        return None
    S = T * k
    if tiles is None:
        tiles = moe_tiles(T, k, H, I, E, x.dtype, x.device, path)
    elif not isinstance(tiles, MoeTiles):
        raise ValueError(f"tiles must be a MoeTiles or None, got {type(tiles).__name__}")
    act = torch.empty((S, I), dtype=x.dtype, device=x.device)  # [S, I] workspace
    pdl_kw = pdl_launch(x.device, pdl)
    scaled = gate_up_scale is not None
    gus = gate_up_scale if scaled else x  # never read unscaled
    ds = down_scale if scaled else x
    gus_e, ds_e = (gus.stride(0), ds.stride(0)) if scaled else (0, 0)
    launch = dict(num_warps=tiles.num_warps, num_stages=pipeline_stages(tiles.num_stages), **pdl_kw)
    if not tiles.block_m:
        _moe_up_slot_kernel[(S, triton.cdiv(I, tiles.up_n))](
            x, w_gate_up, ids, act, gus,
            x.stride(0), w_gate_up.stride(0), w_gate_up.stride(1), ids.stride(0), ids.stride(1), act.stride(0), gus_e,
            H, I, E, TOP_K=k, BLOCK_N=tiles.up_n, BLOCK_K=tiles.up_k, SCALED=scaled, **launch)
        per_slot = tiles.down_per_slot and k > 1
        dst = torch.empty((S, H), dtype=torch.float32, device=x.device) if per_slot else out
        _moe_down_token_kernel[(S if per_slot else T, triton.cdiv(H, tiles.down_n))](
            act, w_down, ids, weights, dst, ds,
            act.stride(0), w_down.stride(0), w_down.stride(1), ids.stride(0), ids.stride(1), weights.stride(0),
            weights.stride(1), dst.stride(0), ds_e,
            H, I, E, TOP_K=k, SLOTS=1 if per_slot else k, BLOCK_N=tiles.down_n, BLOCK_K=tiles.down_k,
            SCALED=scaled, **launch)
        return dst if per_slot else None
    if S <= ALIGN_MAX_SLOTS and E < 1024:
        sorted_slots, block_expert = _align_slots(ids, E, tiles.block_m, pdl_kw)
    else:
        sorted_slots, block_expert = _sort_slots(ids, E, tiles.block_m)
    blocks = block_expert.shape[0]
    buf = torch.empty((S, H), dtype=torch.float32, device=x.device)  # every row written by the down kernel
    precision = "ieee" if x.dtype == torch.float32 else None  # fp32 stays fp32 (no tf32)
    _moe_up_sorted_kernel[(blocks, triton.cdiv(I, tiles.up_n))](
        x, w_gate_up, sorted_slots, block_expert, act, gus,
        x.stride(0), w_gate_up.stride(0), w_gate_up.stride(1), act.stride(0), gus_e,
        H, I, S, TOP_K=k, BLOCK_M=tiles.block_m, BLOCK_N=tiles.up_n, BLOCK_K=tiles.up_k, DOT_PRECISION=precision,
        SCALED=scaled, **launch)
    _moe_down_sorted_kernel[(blocks, triton.cdiv(H, tiles.down_n))](
        act, w_down, sorted_slots, block_expert, weights, buf, ds,
        act.stride(0), w_down.stride(0), w_down.stride(1), weights.stride(0), weights.stride(1), buf.stride(0), ds_e,
        H, I, S, TOP_K=k, BLOCK_M=tiles.block_m, BLOCK_N=tiles.down_n, BLOCK_K=tiles.down_k,
        DOT_PRECISION=precision, SCALED=scaled, **launch)
    return buf
