"""Rotate-half rope, in place, optionally fused with the KV-cache write (one kernel instead of two a layer) and
with the query/key head RMSNorms that come before it (Qwen3's ``q_norm`` / ``k_norm``: three kernels fewer).

Reference: :func:`tritium.ops.reference.rope` and :func:`tritium.ops.reference.rope_write_kv`; the cos/sin
table comes from :func:`tritium.models.rope.rope_cos_sin`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.runtime import interpreting, pdl_launch
from tritium.runtime.fp8 import e4m3_exact

@triton.jit
def _head_rms_norm(x1, x2, w1, w2, eps, HALF: tl.constexpr, dtype: tl.constexpr):
    """RMSNorm of each row of [x1 | x2] (fp32 halves of heads, 0 outside the head) with weight [w1 | w2] (fp32
    ``[1, BLOCK_D]`` halves): the normed value rounded to ``dtype``, times the weight, rounded again (as the
    reference), back in fp32."""
    rstd = tl.math.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF) + eps)[:, None]
    y1 = (w1 * (x1 * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
    y2 = (w2 * (x2 * rstd).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
    return y1, y2


@triton.jit
def _rope_kernel(
    # pointers
    q_ptr, k_ptr, positions_ptr, cos_sin_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr,
    q_norm_ptr, k_norm_ptr, eps, kv_scale_ptr,
    # strides
    stride_q_t, stride_q_h, stride_k_t, stride_k_h, stride_cs_p, stride_v_t, stride_v_h,
    stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk, stride_vc_tok, stride_vc_head,
    # sizes
    num_q_heads, num_kv_heads, block_size, num_slots,
    # meta-parameters
    HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, WRITE_KV: tl.constexpr,
    USE_PDL: tl.constexpr, QK_NORM: tl.constexpr = False, FP8_MAX: tl.constexpr = 0.0,
    EXACT_FP8: tl.constexpr = False, KV_SCALED: tl.constexpr = False,
):
    """Grid: (num_tokens,). Rotates token t's q and k heads in place; with WRITE_KV also stores the
    rotated k and v into their cache slot (slot_mapping[t] = block * block_size + offset; a slot < 0
    or >= num_slots, the cache's blocks x block_size, is skipped: nothing is written outside the cache).
    QK_NORM: each q and k head is first RMS-normed over its 2 * HALF elements with weights q_norm / k_norm
    (rounded as :func:`tritium.ops.reference.rms_norm`: the normed value, then its product with the weight).
    FP8_MAX > 0: float8 caches, which get k and v (k rotated and rounded to q's dtype first), divided by
    their scales (KV_SCALED: kv_scale_ptr[0] and [1], else 1), saturated to +-FP8_MAX, as ``write_kv_cache``
    stores them."""
    d = tl.arange(0, BLOCK_D)
    dmask = d < HALF
    if QK_NORM:  # the head norms' weights are never written: requested before the wait
        qw1 = tl.load(q_norm_ptr + d, mask=dmask, other=0.0).to(tl.float32)[None, :]
        qw2 = tl.load(q_norm_ptr + HALF + d, mask=dmask, other=0.0).to(tl.float32)[None, :]
        kw1 = tl.load(k_norm_ptr + d, mask=dmask, other=0.0).to(tl.float32)[None, :]
        kw2 = tl.load(k_norm_ptr + HALF + d, mask=dmask, other=0.0).to(tl.float32)[None, :]
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # q and k come from the projection before
    t = tl.program_id(0).to(tl.int64)
    pos = tl.load(positions_ptr + t).to(tl.int64)
    cos = tl.load(cos_sin_ptr + pos * stride_cs_p + d, mask=dmask, other=0.0)[None, :]          # [1, BLOCK_D]
    sin = tl.load(cos_sin_ptr + pos * stride_cs_p + HALF + d, mask=dmask, other=0.0)[None, :]   # [1, BLOCK_D]
    h = tl.arange(0, BLOCK_H)
    # every load before the first store: a load after a store that may alias it waits for the store, so q, k and
    # v loaded in turn between stores would be three round trips to memory on the kernel's path, not one
    qmask = (h[:, None] < num_q_heads) & dmask[None, :]
    q1_ptrs = q_ptr + t * stride_q_t + h[:, None] * stride_q_h + d[None, :]                   # [BLOCK_H, BLOCK_D]
    q1 = tl.load(q1_ptrs, mask=qmask, other=0.0)
    q2 = tl.load(q1_ptrs + HALF, mask=qmask, other=0.0)
    kmask = (h[:, None] < num_kv_heads) & dmask[None, :]
    k1_ptrs = k_ptr + t * stride_k_t + h[:, None] * stride_k_h + d[None, :]
    k1 = tl.load(k1_ptrs, mask=kmask, other=0.0).to(tl.float32)
    k2 = tl.load(k1_ptrs + HALF, mask=kmask, other=0.0).to(tl.float32)
    if WRITE_KV:
        slot = tl.load(slot_mapping_ptr + t)
        v_ptrs = v_ptr + t * stride_v_t + h[:, None] * stride_v_h + d[None, :]
        v1 = tl.load(v_ptrs, mask=kmask)
        v2 = tl.load(v_ptrs + HALF, mask=kmask)
    # q heads: fp32 arithmetic (see _rms_norm_kernel), cos/sin rounded to q's dtype as torch does
    dtype = q1.dtype
    q1 = q1.to(tl.float32)
    q2 = q2.to(tl.float32)
    if QK_NORM:
        q1, q2 = _head_rms_norm(q1, q2, qw1, qw2, eps, HALF, dtype)
    cq = cos.to(dtype).to(tl.float32)
    sq = sin.to(dtype).to(tl.float32)
    tl.store(q1_ptrs, (q1 * cq - q2 * sq).to(dtype), mask=qmask)
    tl.store(q1_ptrs + HALF, (q2 * cq + q1 * sq).to(dtype), mask=qmask)
    # k heads
    if QK_NORM:
        k1, k2 = _head_rms_norm(k1, k2, kw1, kw2, eps, HALF, dtype)
    k1_rot = (k1 * cq - k2 * sq).to(dtype)
    k2_rot = (k2 * cq + k1 * sq).to(dtype)
    tl.store(k1_ptrs, k1_rot, mask=kmask)
    tl.store(k1_ptrs + HALF, k2_rot, mask=kmask)
    if WRITE_KV:
        if (slot >= 0) & (slot < num_slots):
            blk = slot // block_size
            off = slot % block_size
            kc_ptrs = (k_cache_ptr + blk * stride_kc_blk + off * stride_kc_tok + h[:, None] * stride_kc_head
                       + d[None, :])
            # (new names: a value defined before this runtime branch must keep its type inside it)
            kc1, kc2, vc1, vc2 = k1_rot, k2_rot, v1, v2
            if FP8_MAX > 0:
                kc1, kc2, vc1, vc2 = (kc1.to(tl.float32), kc2.to(tl.float32), vc1.to(tl.float32),
                                      vc2.to(tl.float32))
                if KV_SCALED:
                    k_scale = tl.load(kv_scale_ptr)
                    v_scale = tl.load(kv_scale_ptr + 1)
                    kc1, kc2, vc1, vc2 = kc1 / k_scale, kc2 / k_scale, vc1 / v_scale, vc2 / v_scale
                if EXACT_FP8:  # the interpreter (see e4m3_exact)
                    kc1, kc2 = e4m3_exact(kc1, FP8_MAX), e4m3_exact(kc2, FP8_MAX)
                    vc1, vc2 = e4m3_exact(vc1, FP8_MAX), e4m3_exact(vc2, FP8_MAX)
                else:
                    kc1, kc2 = tl.clamp(kc1, -FP8_MAX, FP8_MAX), tl.clamp(kc2, -FP8_MAX, FP8_MAX)
                    vc1, vc2 = tl.clamp(vc1, -FP8_MAX, FP8_MAX), tl.clamp(vc2, -FP8_MAX, FP8_MAX)
            tl.store(kc_ptrs, kc1.to(k_cache_ptr.dtype.element_ty), mask=kmask)
            tl.store(kc_ptrs + HALF, kc2.to(k_cache_ptr.dtype.element_ty), mask=kmask)
            vc_ptrs = (v_cache_ptr + blk * stride_vc_blk + off * stride_vc_tok + h[:, None] * stride_vc_head
                       + d[None, :])
            tl.store(vc_ptrs, vc1.to(v_cache_ptr.dtype.element_ty), mask=kmask)
            tl.store(vc_ptrs + HALF, vc2.to(v_cache_ptr.dtype.element_ty), mask=kmask)


def rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor, *,
         qk_norm: tuple | None = None, pdl: bool = True) -> None:
    """Triton twin of :func:`tritium.ops.reference.rope` (in place).

    q: [T, Hq, D], k: [T, Hkv, D] (last dim contiguous; may be views of one QKV buffer), positions: [T],
    cos_sin: [P, D] fp32 (cos in the first half, sin in the second). ``qk_norm``: (q_weight [D], k_weight
    [D], eps): each head is RMS-normed first.
    """
    _launch_rope(q, k, positions, cos_sin, qk_norm=qk_norm, pdl=pdl)


def rope_write_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                  cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor, *, qk_norm: tuple | None = None, pdl: bool = True,
                  kv_scale: torch.Tensor | None = None) -> None:
    """Triton twin of :func:`tritium.ops.reference.rope_write_kv`: :func:`rope` (``qk_norm`` as there)
    fused with ``write_kv_cache`` (one kernel instead of two in every layer).

    v: [T, Hkv, D]; k_cache, v_cache: [num_blocks, block_size, Hkv, D] of q's dtype or float8_e4m3fn (k and
        v divided by their scales, saturated, as ``write_kv_cache`` stores them), last dim contiguous;
    slot_mapping: [T] int64, block * block_size + offset; a negative slot, or one past the cache, skips
        the token's write.
    kv_scale: float8 caches: [2] fp32 (k's scale, v's), on the device (read there: graph safe); None: 1.
    """
    check_kv_scale(kv_scale, k_cache, "rope_write_kv")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.dtype not in (k.dtype, torch.float8_e4m3fn) or cache.dtype != k_cache.dtype \
                or cache.shape[2:] != k.shape[1:] or cache.stride(-1) != 1:
            raise ValueError(f"rope_write_kv: {name} must be [blocks, block_size, {k.shape[1]}, {k.shape[2]}] "
                             f"{k.dtype} or float8_e4m3fn (both caches alike) with a contiguous last dim, got "
                             f"{tuple(cache.shape)} {cache.dtype}")
    if v.shape != k.shape or slot_mapping.shape != (k.shape[0],):
        raise ValueError(f"rope_write_kv: v {tuple(v.shape)} must match k {tuple(k.shape)} and slot_mapping "
                         f"{tuple(slot_mapping.shape)} have one slot per token")
    _launch_rope(q, k, positions, cos_sin, (v, k_cache, v_cache, slot_mapping), qk_norm=qk_norm, pdl=pdl,
                 kv_scale=kv_scale)


def check_kv_scale(kv_scale: torch.Tensor | None, k_cache: torch.Tensor, what: str) -> None:
    """A float8 cache's scales: None, or a contiguous [2] fp32 tensor (k's, v's) on the cache's device."""
    if kv_scale is None:
        return
    if k_cache.dtype != torch.float8_e4m3fn:
        raise ValueError(f"{what}: kv_scale applies to float8 caches only; the caches are {k_cache.dtype}")
    if kv_scale.shape != (2,) or kv_scale.dtype != torch.float32 or kv_scale.stride(0) != 1 \
            or kv_scale.device != k_cache.device:
        raise ValueError(f"{what}: kv_scale must be a contiguous [2] float32 tensor (k's scale, v's) on "
                         f"{k_cache.device}, got {tuple(kv_scale.shape)} {kv_scale.dtype} on {kv_scale.device}")


def _launch_rope(q, k, positions, cos_sin, kv=None, *, qk_norm=None, pdl: bool, kv_scale=None) -> None:
    T, Hq, D = q.shape
    if qk_norm is not None:
        q_norm, k_norm, eps = qk_norm
        for name, w in (("q_norm", q_norm), ("k_norm", k_norm)):
            if w.shape != (D,) or w.stride(0) != 1 or w.device != q.device:
                raise ValueError(f"rope: {name} must be a contiguous [{D}] tensor on {q.device}, got "
                                 f"{tuple(w.shape)} on {w.device}")
    else:
        q_norm, k_norm, eps = q, k, 0.0
    if T == 0:
        return
    v, k_cache, v_cache, slots = kv if kv is not None else (k, k, k, positions)
    fp8 = kv is not None and k_cache.dtype == torch.float8_e4m3fn
    kc_strides = k_cache.stride()[:3] if kv is not None else (0, 0, 0)
    vc_strides = v_cache.stride()[:3] if kv is not None else (0, 0, 0)
    _rope_kernel[(T,)](
        q, k, positions, cos_sin, v, k_cache, v_cache, slots, q_norm, k_norm, float(eps),
        kv_scale if kv_scale is not None else cos_sin,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos_sin.stride(0), v.stride(0), v.stride(1),
        *kc_strides, *vc_strides,
        Hq, k.shape[1], k_cache.shape[1] if kv is not None else 1,
        k_cache.shape[0] * k_cache.shape[1] if kv is not None else 0,
        HALF=D // 2, BLOCK_H=triton.next_power_of_2(Hq), BLOCK_D=triton.next_power_of_2(D // 2),
        WRITE_KV=kv is not None, QK_NORM=qk_norm is not None,
        FP8_MAX=torch.finfo(k_cache.dtype).max if fp8 else 0.0, EXACT_FP8=fp8 and interpreting(),
        KV_SCALED=kv_scale is not None,
        num_warps=4, **pdl_launch(q.device, pdl),
    )

