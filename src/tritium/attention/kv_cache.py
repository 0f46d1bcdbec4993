"""Writing new keys and values into the paged KV cache (with fp8 quantisation)."""

import torch
import triton
import triton.language as tl

from tritium.attention.config import next_pow2, select_write_kv_warps
from tritium.attention.launcher import FP8_DTYPES, Q_DTYPES, _check_tensor, _scale_arg
from tritium.runtime import interpreting, pdl_launch
from tritium.runtime.fp8 import e4m3_exact


@triton.jit
def _write_kv_cache_kernel(
    # pointers
    k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr, k_scale_ptr, v_scale_ptr,
    # strides (head_dim stride is 1)
    stride_k_tok, stride_k_head, stride_v_tok, stride_v_head,
    stride_kc_blk, stride_kc_tok, stride_kc_head,
    stride_vc_blk, stride_vc_tok, stride_vc_head,
    # sizes and scalars
    block_size, num_slots, k_scale_val, v_scale_val,
    # meta-parameters
    NUM_KV_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, HEADS_PAD: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
    IS_FP8: tl.constexpr, FP8_MAX: tl.constexpr, SCALES_FROM_PTR: tl.constexpr, USE_PDL: tl.constexpr,
    EXACT_FP8: tl.constexpr = False,
):
    """Grid: (num_tokens,). Token t goes to slot_mapping[t] = block * block_size + offset; a slot outside
    [0, num_slots = num_blocks * block_size) skips the token (one scalar compare per program), so a
    garbage slot never writes outside the cache."""
    if USE_PDL:  # programmatic dependent launch: wait for the kernel before (k, v) before anything else
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    tok = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + tok)
    if (slot < 0) | (slot >= num_slots):
        return
    blk = slot // block_size
    off = slot % block_size
    offs_h = tl.arange(0, HEADS_PAD)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    mask = (offs_h < NUM_KV_HEADS)[:, None] & (offs_d < HEAD_DIM)[None, :]
    k = tl.load(k_ptr + tok * stride_k_tok + offs_h[:, None] * stride_k_head + offs_d[None, :], mask=mask)
    v = tl.load(v_ptr + tok * stride_v_tok + offs_h[:, None] * stride_v_head + offs_d[None, :], mask=mask)
    if IS_FP8:
        if SCALES_FROM_PTR:
            k_scale = tl.load(k_scale_ptr)
            v_scale = tl.load(v_scale_ptr)
        else:
            k_scale = k_scale_val
            v_scale = v_scale_val
        k = tl.clamp(k.to(tl.float32) / k_scale, -FP8_MAX, FP8_MAX)
        v = tl.clamp(v.to(tl.float32) / v_scale, -FP8_MAX, FP8_MAX)
        if EXACT_FP8:  # the interpreter (see e4m3_exact)
            k = e4m3_exact(k, FP8_MAX)
            v = e4m3_exact(v, FP8_MAX)
    kc = k_cache_ptr + blk * stride_kc_blk + off * stride_kc_tok
    vc = v_cache_ptr + blk * stride_vc_blk + off * stride_vc_tok
    tl.store(kc + offs_h[:, None] * stride_kc_head + offs_d[None, :], k.to(k_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(vc + offs_h[:, None] * stride_vc_head + offs_d[None, :], v.to(v_cache_ptr.dtype.element_ty), mask=mask)


def write_kv_cache(k, v, k_cache, v_cache, slot_mapping, k_scale=None, v_scale=None) -> None:
    """Store new keys and values into their cache slots, in place.

    Args:
        k, v: [num_tokens, num_kv_heads, head_dim] fp16/bf16/fp32.
        k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim], k's dtype or float8_e4m3fn.
        slot_mapping: [num_tokens] int64, block_id * block_size + offset; a negative slot skips the token.
            So does a slot past the cache (>= num_blocks * block_size): no write lands outside it, and
            nothing reports it (the caller's bug shows up as the token's keys missing from the cache).
        k_scale, v_scale: fp8 caches store k / k_scale (v / v_scale) saturated to the fp8 range (+-448);
            a float or a 1-element fp32 tensor (the tensor form keeps the call capturable in a CUDA graph).
    """
    _check_tensor("k", k, 3, Q_DTYPES)
    _check_tensor("v", v, 3, Q_DTYPES)
    _check_tensor("k_cache", k_cache, 4, Q_DTYPES + FP8_DTYPES)
    _check_tensor("v_cache", v_cache, 4, Q_DTYPES + FP8_DTYPES)
    _check_tensor("slot_mapping", slot_mapping, 1, (torch.int64,))
    if v.shape != k.shape:
        raise ValueError(f"v shape {tuple(v.shape)} differs from k shape {tuple(k.shape)}")
    if v.dtype != k.dtype:
        raise TypeError(f"v dtype {v.dtype} differs from k dtype {k.dtype}")
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache shape {tuple(v_cache.shape)} differs from k_cache shape {tuple(k_cache.shape)}")
    if v_cache.dtype != k_cache.dtype:
        raise TypeError(f"v_cache dtype {v_cache.dtype} differs from k_cache dtype {k_cache.dtype}")
    num_tokens, num_kv_heads, head_dim = k.shape
    if k_cache.shape[2:] != k.shape[1:]:
        raise ValueError(f"k_cache has {k_cache.shape[2]} heads x head_dim {k_cache.shape[3]}, "
                         f"k has {num_kv_heads} x {head_dim}")
    if slot_mapping.shape[0] != num_tokens:
        raise ValueError(f"slot_mapping has {slot_mapping.shape[0]} entries, k has {num_tokens} tokens")
    is_fp8 = k_cache.dtype in FP8_DTYPES
    if not is_fp8 and k_cache.dtype != k.dtype:
        raise TypeError(f"k_cache dtype {k_cache.dtype} must match k ({k.dtype}) or be float8_e4m3fn")
    if not is_fp8 and (k_scale is not None or v_scale is not None):
        raise ValueError("k_scale / v_scale apply to float8 caches only")
    for name, t in (("v", v), ("k_cache", k_cache), ("v_cache", v_cache), ("slot_mapping", slot_mapping)):
        if t.device != k.device:
            raise ValueError(f"{name} is on {t.device}, k is on {k.device}: all tensors must share one device")
    for name, t in (("k", k), ("v", v), ("k_cache", k_cache), ("v_cache", v_cache), ("slot_mapping", slot_mapping)):
        if t.numel() > 0 and t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension (stride {t.stride(-1)})")
    k_scale_t, k_scale_val = _scale_arg("k_scale", k_scale, k.device)
    v_scale_t, v_scale_val = _scale_arg("v_scale", v_scale, k.device)
    scales_from_ptr = k_scale_t is not None and v_scale_t is not None
    if (k_scale_t is None) != (v_scale_t is None):
        raise ValueError("k_scale and v_scale must both be tensors or both be floats/None")
    if num_tokens == 0:
        return
    _write_kv_cache_kernel[(num_tokens,)](
        k, v, k_cache, v_cache, slot_mapping,
        k_scale_t if scales_from_ptr else k, v_scale_t if scales_from_ptr else k,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        k_cache.shape[1], k_cache.shape[0] * k_cache.shape[1], k_scale_val, v_scale_val,
        NUM_KV_HEADS=num_kv_heads, HEAD_DIM=head_dim, HEADS_PAD=next_pow2(num_kv_heads),
        HEAD_DIM_PAD=next_pow2(head_dim), IS_FP8=is_fp8,
        FP8_MAX=torch.finfo(k_cache.dtype).max if is_fp8 else 0.0, SCALES_FROM_PTR=scales_from_ptr,
        EXACT_FP8=is_fp8 and interpreting(),
        num_warps=select_write_kv_warps(num_kv_heads, head_dim), **pdl_launch(k.device),
    )
