"""The decode QKV projection with rope and the KV-cache write in its epilogue: one kernel instead of the
GEMV and ``rope_write_kv`` (reference: :func:`tritium.ops.reference.linear` then
:func:`tritium.ops.reference.rope_write_kv`).

Rotate-half rope pairs element j of a head with element j + D/2, which a plain GEMV program (consecutive
weight rows) does not hold together. Here a program takes ``block_n / 2`` pairs of one head: rows
``j .. j + block_n/2`` and the same rows D/2 further on. Two kernels, as for the GEMV
(:mod:`tritium.ops.gemv`): one holds the two halves as two 3-D accumulators; the ``flat`` one
(``GemvConfig.flat``) runs the flat GEMV's loop over the pairs side by side (rows j, j + D/2, j + 1, ...)
and splits them apart after its reduction. Each program's epilogue rounds both
products to the model dtype (as the GEMV's store does), rotates query and key pairs as the rope kernel
does (fp32, cos/sin rounded to the dtype), writes q and k (rotated) and v into the QKV output, and k and
v into the token's cache slot. On Hopper it is a programmatic dependent launch like the GEMV.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.ops.gemv import (GemvConfig, _addend, _flat_products, _pairs_side_by_side, _w_chunk, check_addend,
                              check_operands)
from tritium.ops.rope import check_kv_scale
from tritium.runtime import interpreting, pdl_launch, pdl_supported, pipeline_stages
from tritium.runtime.fp8 import e4m3_exact

DEFAULT_CONFIG = GemvConfig(8, 512, 4)


@triton.jit
def _qkv_rope_kernel(
    # pointers
    x_ptr, w_ptr, bias_ptr, out_ptr, positions_ptr, cos_sin_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr,
    scale_ptr, kv_scale_ptr, add_ptr,
    # strides
    stride_x_m, stride_w_n, stride_out_m, stride_cs_p, stride_add_m,
    stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk, stride_vc_tok, stride_vc_head,
    # sizes
    M, K, num_q_heads, num_kv_heads, block_size, num_slots,
    # meta-parameters
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, PAIRS: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, USE_PDL: tl.constexpr, SCALED: tl.constexpr = False,
    FP8_MAX: tl.constexpr = 0.0, EXACT_FP8: tl.constexpr = False, KV_SCALED: tl.constexpr = False,
    ADDEND: tl.constexpr = False,
):
    """Grid: (N / 2 / PAIRS,), N = (num_q_heads + 2 num_kv_heads) HEAD_DIM. Program p: head h = p // (HEAD_DIM / 2
    / PAIRS), rows h HEAD_DIM + j and h HEAD_DIM + j + HEAD_DIM / 2 for its PAIRS values of j."""
    HALF: tl.constexpr = HEAD_DIM // 2
    pid = tl.program_id(0)
    per_head = HALF // PAIRS
    head = pid // per_head
    j = (pid % per_head) * PAIRS + tl.arange(0, PAIRS)                             # [PAIRS] in [0, HALF)
    rows1 = head * HEAD_DIM + j
    rows2 = rows1 + HALF
    ms = tl.arange(0, BLOCK_M)
    ks = tl.arange(0, BLOCK_K)
    w1_ptrs = w_ptr + rows1.to(tl.int64)[:, None] * stride_w_n + ks[None, :]      # [PAIRS, BLOCK_K]
    w2_ptrs = w_ptr + rows2.to(tl.int64)[:, None] * stride_w_n + ks[None, :]
    x_ptrs = x_ptr + ms[:, None] * stride_x_m + ks[None, :]                       # [BLOCK_M, BLOCK_K]
    # weights first (they never depend on earlier kernels), then wait for x
    if EVEN_K:
        w1 = tl.load(w1_ptrs, eviction_policy="evict_first")
        w2 = tl.load(w2_ptrs, eviction_policy="evict_first")
    else:
        w1 = tl.load(w1_ptrs, mask=ks[None, :] < K, other=0.0, eviction_policy="evict_first")
        w2 = tl.load(w2_ptrs, mask=ks[None, :] < K, other=0.0, eviction_policy="evict_first")
    if SCALED:  # a quantized weight's row scales (never written by earlier kernels)
        scale1 = tl.load(scale_ptr + rows1)
        scale2 = tl.load(scale_ptr + rows2)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x, positions and slots come from the kernels before
        tl.extra.cuda.gdc_launch_dependents()
    # the epilogue's loads, issued now so that their latency hides under the weight stream
    mmask = ms < M
    c, s, slot = _rope_inputs(positions_ptr, cos_sin_ptr, slot_mapping_ptr, ms, M, j, stride_cs_p, HALF,
                              out_ptr.dtype.element_ty)                           # [BLOCK_M, PAIRS], [BLOCK_M]
    acc1 = tl.zeros((BLOCK_M, PAIRS, BLOCK_K), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, PAIRS, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x = tl.load(x_ptrs, mask=(ms[:, None] < M) & (k0 + ks[None, :] < K), other=0.0).to(tl.float32)
        w1_ptrs += BLOCK_K
        w2_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
        more = k0 + BLOCK_K + ks[None, :] < K
        w1_next = tl.load(w1_ptrs, mask=more, other=0.0, eviction_policy="evict_first")
        w2_next = tl.load(w2_ptrs, mask=more, other=0.0, eviction_policy="evict_first")
        acc1 += w1.to(tl.float32)[None, :, :] * x[:, None, :]
        acc2 += w2.to(tl.float32)[None, :, :] * x[:, None, :]
        w1 = w1_next
        w2 = w2_next
    y1 = tl.sum(acc1, axis=2)                                                      # [BLOCK_M, PAIRS]
    y2 = tl.sum(acc2, axis=2)
    if SCALED:
        y1 = y1 * scale1[None, :]
        y2 = y2 * scale2[None, :]
    if HAS_BIAS:
        y1 += tl.load(bias_ptr + rows1).to(tl.float32)[None, :]
        y2 += tl.load(bias_ptr + rows2).to(tl.float32)[None, :]
    if ADDEND:  # a per-row term (a LoRA update) before the rounding and rope
        N = (num_q_heads + 2 * num_kv_heads) * HEAD_DIM
        y1 += _addend(add_ptr, stride_add_m, ms, rows1, M, N)
        y2 += _addend(add_ptr, stride_add_m, ms, rows2, M, N)
    _rope_store(y1, y2, c, s, ms, mmask, slot, head, j, out_ptr, stride_out_m, k_cache_ptr, v_cache_ptr,
                stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk, stride_vc_tok, stride_vc_head,
                num_q_heads, num_kv_heads, block_size, num_slots, HEAD_DIM, FP8_MAX,
                EXACT_FP8, kv_scale_ptr, KV_SCALED)


@triton.jit
def _rope_inputs(positions_ptr, cos_sin_ptr, slot_mapping_ptr, ms, M, j, stride_cs_p, HALF: tl.constexpr, dtype):
    """Rows ``ms``' rope factors (cos and sin ``[rows, PAIRS]`` at pairs ``j``, rounded to the model dtype as the
    rope kernel rounds them, in fp32) and cache slots; requested after the PDL wait, before the weight loop."""
    mmask = ms < M
    pos = tl.load(positions_ptr + ms, mask=mmask, other=0).to(tl.int64)
    cs_ptrs = cos_sin_ptr + pos[:, None] * stride_cs_p + j[None, :]
    c = tl.load(cs_ptrs, mask=mmask[:, None], other=0.0).to(dtype).to(tl.float32)
    s = tl.load(cs_ptrs + HALF, mask=mmask[:, None], other=0.0).to(dtype).to(tl.float32)
    slot = tl.load(slot_mapping_ptr + ms, mask=mmask, other=-1)
    return c, s, slot


@triton.jit
def _rope_store(y1, y2, c, s, ms, mmask, slot, head, j, out_ptr, stride_out_m, k_cache_ptr, v_cache_ptr,
                stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk, stride_vc_tok, stride_vc_head,
                num_q_heads, num_kv_heads, block_size, num_slots, HEAD_DIM: tl.constexpr,
                FP8_MAX: tl.constexpr, EXACT_FP8: tl.constexpr, kv_scale_ptr, KV_SCALED: tl.constexpr):
    """The epilogue of both kernels: products ``y1`` (element j of the head) and ``y2`` (j + HEAD_DIM / 2),
    fp32 ``[rows, PAIRS]`` with the bias in, rounded as the GEMV stores them, rotated where the head is a
    query or key head (the rope kernel's arithmetic), stored into the QKV output and, for key and value
    heads, into row ``ms``'s cache slot (a slot outside the cache skips); FP8_MAX > 0: float8 caches, which
    get the rounded values divided by their scale (KV_SCALED: kv_scale_ptr[0] for keys, [1] for values, else
    1) and saturated, as ``rope_write_kv`` stores them."""
    HALF: tl.constexpr = HEAD_DIM // 2
    dtype = out_ptr.dtype.element_ty
    y1 = y1.to(dtype).to(tl.float32)
    y2 = y2.to(dtype).to(tl.float32)
    if head < num_q_heads + num_kv_heads:  # q or k: rotate
        r1 = y1 * c - y2 * s
        r2 = y2 * c + y1 * s
    else:
        r1 = y1
        r2 = y2
    o1 = r1.to(dtype)
    o2 = r2.to(dtype)
    out1 = out_ptr + ms[:, None] * stride_out_m + head * HEAD_DIM + j[None, :]
    tl.store(out1, o1, mask=mmask[:, None])
    tl.store(out1 + HALF, o2, mask=mmask[:, None])
    if head >= num_q_heads:  # k or v: also into the token's cache slot
        ok = mmask & (slot >= 0) & (slot < num_slots)
        blk = tl.where(ok, slot // block_size, 0).to(tl.int64)
        off = tl.where(ok, slot % block_size, 0).to(tl.int64)
        if head < num_q_heads + num_kv_heads:
            kv_head = head - num_q_heads
            c_ptrs = (k_cache_ptr + blk[:, None] * stride_kc_blk + off[:, None] * stride_kc_tok
                      + kv_head * stride_kc_head)
        else:
            kv_head = head - num_q_heads - num_kv_heads
            c_ptrs = (v_cache_ptr + blk[:, None] * stride_vc_blk + off[:, None] * stride_vc_tok
                      + kv_head * stride_vc_head)
        # (the caches hold the model dtype or float8_e4m3fn: the launcher checks)
        c1, c2 = o1, o2
        if FP8_MAX > 0:
            c1, c2 = o1.to(tl.float32), o2.to(tl.float32)
            if KV_SCALED:
                kv_scale = tl.load(kv_scale_ptr + (head >= num_q_heads + num_kv_heads).to(tl.int32))
                c1, c2 = c1 / kv_scale, c2 / kv_scale
            if EXACT_FP8:  # the interpreter (see e4m3_exact)
                c1, c2 = e4m3_exact(c1, FP8_MAX), e4m3_exact(c2, FP8_MAX)
            else:
                c1, c2 = tl.clamp(c1, -FP8_MAX, FP8_MAX), tl.clamp(c2, -FP8_MAX, FP8_MAX)
        tl.store(c_ptrs + j[None, :], c1.to(k_cache_ptr.dtype.element_ty), mask=ok[:, None])
        tl.store(c_ptrs + HALF + j[None, :], c2.to(k_cache_ptr.dtype.element_ty), mask=ok[:, None])


@triton.jit
def _row_addend(add_ptr, stride_add_m, m, M, rows, ADDEND: tl.constexpr):
    """Row m's per-row addend at weight rows ``rows`` in fp32 (zeros without ADDEND or past M)."""
    add = rows.to(tl.float32) * 0.0
    if ADDEND:
        add = tl.load(add_ptr + m * stride_add_m + rows, mask=(rows * 0 + m) < M, other=0.0).to(tl.float32)
    return add


@triton.jit
def _qkv_rope_flat_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr, positions_ptr, cos_sin_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr,
    scale_ptr, kv_scale_ptr, add_ptr,
    stride_x_m, stride_w_n, stride_out_m, stride_cs_p, stride_add_m,
    stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk, stride_vc_tok, stride_vc_head,
    M, K, num_q_heads, num_kv_heads, block_size, num_slots,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, PAIRS: tl.constexpr, BLOCK_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, USE_PDL: tl.constexpr, SCALED: tl.constexpr = False,
    FP8_MAX: tl.constexpr = 0.0, EXACT_FP8: tl.constexpr = False, KV_SCALED: tl.constexpr = False,
    ADDEND: tl.constexpr = False,
):
    """What :func:`_qkv_rope_kernel` computes, with the flat GEMV's loop (:func:`tritium.ops.gemv._flat_products`:
    one ``[2 PAIRS, BLOCK_K]`` accumulator per row of x in the weight chunk's layout, no layout conversion in
    the loop). The program's weight rows are its pairs side by side (row h HEAD_DIM + j, then the row
    HEAD_DIM / 2 further on, for each of its PAIRS values of j), one load a chunk, as the SiLU-and-mul GEMV
    pairs gate and up rows; the epilogue splits each row's products apart with one reshape."""
    HALF: tl.constexpr = HEAD_DIM // 2
    BLOCK_N: tl.constexpr = 2 * PAIRS
    pid = tl.program_id(0)
    per_head = HALF // PAIRS
    head = pid // per_head
    j0 = (pid % per_head) * PAIRS
    j = j0 + tl.arange(0, PAIRS)                                                   # [PAIRS] in [0, HALF)
    rows = _pairs_side_by_side(head * HEAD_DIM + j0, HALF, BLOCK_N)                # [BLOCK_N]
    ks = tl.arange(0, BLOCK_K)
    w_ptrs = w_ptr + rows.to(tl.int64)[:, None] * stride_w_n + ks[None, :]        # [BLOCK_N, BLOCK_K]
    N = (num_q_heads + 2 * num_kv_heads) * HEAD_DIM
    w = _w_chunk(w_ptrs, rows, ks, 0, N, K, EVEN_K, True)  # weights first: they never depend on earlier kernels
    if HAS_BIAS:
        bias = tl.load(bias_ptr + rows).to(tl.float32)
    else:
        bias = tl.zeros((BLOCK_N,), dtype=tl.float32)
    if SCALED:
        w_scale = tl.load(scale_ptr + rows)
    else:
        w_scale = tl.full((BLOCK_N,), 1.0, tl.float32)
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # x, positions and slots come from the kernels before
        tl.extra.cuda.gdc_launch_dependents()
    dtype = out_ptr.dtype.element_ty
    m0 = tl.arange(0, 1)
    c0, s0, slot0 = _rope_inputs(positions_ptr, cos_sin_ptr, slot_mapping_ptr, m0, M, j, stride_cs_p, HALF, dtype)
    if BLOCK_M > 1:
        c1, s1, slot1 = _rope_inputs(positions_ptr, cos_sin_ptr, slot_mapping_ptr, m0 + 1, M, j, stride_cs_p, HALF,
                                     dtype)
    if BLOCK_M > 2:
        c2, s2, slot2 = _rope_inputs(positions_ptr, cos_sin_ptr, slot_mapping_ptr, m0 + 2, M, j, stride_cs_p, HALF,
                                     dtype)
        c3, s3, slot3 = _rope_inputs(positions_ptr, cos_sin_ptr, slot_mapping_ptr, m0 + 3, M, j, stride_cs_p, HALF,
                                     dtype)
    acc0, acc1, acc2, acc3, _, _, _, _ = _flat_products(
        x_ptr, w_ptrs, w, rows, ks, x_ptr, stride_x_m, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, EVEN_K, False, False,
        False)
    y1, y2 = tl.split(tl.reshape(tl.sum(acc0, axis=1) * w_scale + bias
                                     + _row_addend(add_ptr, stride_add_m, 0, M, rows, ADDEND), (PAIRS, 2)))
    _rope_store(y1[None, :], y2[None, :], c0, s0, m0, m0 < M, slot0, head, j, out_ptr, stride_out_m, k_cache_ptr,
                v_cache_ptr, stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk, stride_vc_tok,
                stride_vc_head, num_q_heads, num_kv_heads, block_size, num_slots, HEAD_DIM, FP8_MAX,
                EXACT_FP8, kv_scale_ptr, KV_SCALED)
    if BLOCK_M > 1:
        y1, y2 = tl.split(tl.reshape(tl.sum(acc1, axis=1) * w_scale + bias
                                     + _row_addend(add_ptr, stride_add_m, 1, M, rows, ADDEND), (PAIRS, 2)))
        _rope_store(y1[None, :], y2[None, :], c1, s1, m0 + 1, m0 + 1 < M, slot1, head, j, out_ptr, stride_out_m,
                    k_cache_ptr, v_cache_ptr, stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk,
                    stride_vc_tok, stride_vc_head, num_q_heads, num_kv_heads, block_size, num_slots, HEAD_DIM, FP8_MAX,
                EXACT_FP8, kv_scale_ptr, KV_SCALED)
    if BLOCK_M > 2:
        y1, y2 = tl.split(tl.reshape(tl.sum(acc2, axis=1) * w_scale + bias
                                     + _row_addend(add_ptr, stride_add_m, 2, M, rows, ADDEND), (PAIRS, 2)))
        _rope_store(y1[None, :], y2[None, :], c2, s2, m0 + 2, m0 + 2 < M, slot2, head, j, out_ptr, stride_out_m,
                    k_cache_ptr, v_cache_ptr, stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk,
                    stride_vc_tok, stride_vc_head, num_q_heads, num_kv_heads, block_size, num_slots, HEAD_DIM, FP8_MAX,
                EXACT_FP8, kv_scale_ptr, KV_SCALED)
        y1, y2 = tl.split(tl.reshape(tl.sum(acc3, axis=1) * w_scale + bias
                                     + _row_addend(add_ptr, stride_add_m, 3, M, rows, ADDEND), (PAIRS, 2)))
        _rope_store(y1[None, :], y2[None, :], c3, s3, m0 + 3, m0 + 3 < M, slot3, head, j, out_ptr, stride_out_m,
                    k_cache_ptr, v_cache_ptr, stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk,
                    stride_vc_tok, stride_vc_head, num_q_heads, num_kv_heads, block_size, num_slots, HEAD_DIM, FP8_MAX,
                EXACT_FP8, kv_scale_ptr, KV_SCALED)


def supports(config: GemvConfig, head_dim: int) -> bool:
    """Whether ``config``'s rows split into pairs of one head: block_n / 2 must divide head_dim / 2."""
    return config.block_n % 2 == 0 and head_dim % 2 == 0 and (head_dim // 2) % (config.block_n // 2) == 0


def qkv_rope_write_kv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, positions: torch.Tensor,
                      cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      slot_mapping: torch.Tensor, *, num_q_heads: int, num_kv_heads: int,
                      config: GemvConfig | None = None, pdl: bool | None = None,
                      scale: torch.Tensor | None = None, kv_scale: torch.Tensor | None = None,
                      addend: torch.Tensor | None = None) -> torch.Tensor:
    """``qkv = x @ weight^T (+ bias)`` for ``x [M, K]`` (1 <= M <= ``MAX_M``), with rope applied to its q and
    k heads and k, v written into cache slot ``slot_mapping[t]`` of row t: returns ``qkv [M, N]``, N =
    (num_q_heads + 2 num_kv_heads) * head_dim, as ``gemv`` then ``rope_write_kv`` leave it.

    weight ``[N, K]``, bias ``[N]``, positions ``[M]`` int, cos_sin ``[P, head_dim]`` fp32 (cos in the
    first half, sin in the second), k_cache / v_cache ``[blocks, block_size, num_kv_heads, head_dim]``
    with a contiguous last dim, of x's dtype or float8_e4m3fn (stored saturated, scales of 1, as
    ``rope_write_kv`` stores them), slot_mapping ``[M]`` int64 (a slot < 0 or past the cache skips).
    ``config``: a GEMV config whose ``block_n / 2`` divides ``head_dim / 2`` (:func:`supports`). ``scale``:
    weight is stored quantized with these fp32 row scales ``[N]`` (as :func:`tritium.ops.gemv.gemv` takes them).
    ``kv_scale``: float8 caches' [2] fp32 scales (k's, v's) on the device, as ``rope_write_kv`` takes them.
    ``addend`` ``[M, N]``: a per-row term added with the bias, before rope and the cache write (a LoRA update:
    :func:`tritium.ops.gemv.gemv`'s).
    """
    M, N, K = check_operands(x, weight, bias, scale=scale)
    check_addend(addend, M, N, x.device)
    heads = num_q_heads + 2 * num_kv_heads
    if num_q_heads < 1 or num_kv_heads < 1 or N % heads:
        raise ValueError(f"weight has {N} rows: not (num_q_heads {num_q_heads} + 2 num_kv_heads {num_kv_heads}) "
                         "heads of equal size")
    head_dim = N // heads
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if (cache.dim() != 4 or cache.shape[2:] != (num_kv_heads, head_dim)
                or cache.dtype not in (x.dtype, torch.float8_e4m3fn) or cache.dtype != k_cache.dtype
                or cache.stride(-1) != 1 or cache.device != x.device):
            raise ValueError(f"{name} must be [blocks, block_size, {num_kv_heads}, {head_dim}] {x.dtype} or "
                             f"float8_e4m3fn (both caches alike) with a contiguous last dim, got "
                             f"{tuple(cache.shape)} {cache.dtype}")
    fp8 = k_cache.dtype == torch.float8_e4m3fn
    check_kv_scale(kv_scale, k_cache, "qkv_rope_write_kv")
    if k_cache.shape[:2] != v_cache.shape[:2]:
        raise ValueError(f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} must have the same pages")
    if positions.shape != (M,) or slot_mapping.shape != (M,):
        raise ValueError(f"positions {tuple(positions.shape)} and slot_mapping {tuple(slot_mapping.shape)} must "
                         f"have one entry per row of x ({M})")
    if cos_sin.dim() != 2 or cos_sin.shape[1] != head_dim or cos_sin.dtype != torch.float32 or cos_sin.stride(1) != 1:
        raise ValueError(f"cos_sin must be a [positions, {head_dim}] float32 table, got {tuple(cos_sin.shape)} "
                         f"{cos_sin.dtype}")
    cfg = config or DEFAULT_CONFIG
    if not supports(cfg, head_dim):
        raise ValueError(f"config {cfg}: block_n / 2 must divide head_dim / 2 ({head_dim // 2})")
    if pdl and not pdl_supported(x.device):
        raise ValueError(f"pdl=True needs a compiled kernel on an NVIDIA sm_90+ GPU, not {x.device}")
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    pairs = cfg.block_n // 2
    kernel = _qkv_rope_flat_kernel if cfg.flat else _qkv_rope_kernel
    kernel[(N // 2 // pairs,)](
        x, weight, bias if bias is not None else weight, out, positions, cos_sin, k_cache, v_cache, slot_mapping,
        scale if scale is not None else weight, kv_scale if kv_scale is not None else cos_sin,
        addend if addend is not None else weight,
        x.stride(0), weight.stride(0), out.stride(0), cos_sin.stride(0), addend.stride(0) if addend is not None else 0,
        *k_cache.stride()[:3], *v_cache.stride()[:3],
        M, K, num_q_heads, num_kv_heads, k_cache.shape[1], k_cache.shape[0] * k_cache.shape[1],
        HEAD_DIM=head_dim, BLOCK_M=triton.next_power_of_2(M), PAIRS=pairs, BLOCK_K=cfg.block_k,
        HAS_BIAS=bias is not None, EVEN_K=K % cfg.block_k == 0, SCALED=scale is not None,
        FP8_MAX=torch.finfo(k_cache.dtype).max if fp8 else 0.0, EXACT_FP8=fp8 and interpreting(),
        KV_SCALED=kv_scale is not None, ADDEND=addend is not None, num_warps=cfg.num_warps,
        num_stages=pipeline_stages(cfg.num_stages),
        **pdl_launch(x.device, pdl is not False),
    )
    return out
