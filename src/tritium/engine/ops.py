"""Fused small Triton kernels of the decoder: RMSNorm (+ residual add), rope (+ KV-cache write), SiLU-and-mul.

Each launcher matches the function of the same name in :mod:`tritium.engine.reference`. They pay in
decode, where every op is memory bound and torch would run several kernels per op (RMSNorm is 6 torch
kernels, rope ~10, SiLU-and-mul 2 plus the slices).

On Hopper every kernel of the decode chain is a programmatic dependent launch: it releases the next
kernel at once (``gdc_launch_dependents``) and waits (``gdc_wait``) before reading what the kernel before
it wrote, so launches overlap and a Triton GEMV after RMSNorm starts reading its weights while it runs.
``greedy_advance`` picks a decode step's greedy tokens and turns them into the next step's inputs on the
device.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tritium.runtime import pdl_launch


@triton.jit
def _rms_norm_kernel(
    # pointers
    x_ptr, residual_ptr, weight_ptr, out_ptr,
    # strides
    stride_x_t, stride_residual_t, stride_out_t,
    # sizes
    hidden, eps,
    # meta-parameters
    HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr, USE_PDL: tl.constexpr,
):
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the next GEMV may start fetching its weights now
        tl.extra.cuda.gdc_wait()  # x and residual come from the kernels before
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    # NOTE: all arithmetic in fp32 with explicit roundings to the input dtype where torch rounds: the
    # interpreter computes bf16 elementwise products wrongly (values ~1e33); fp32 is exact in both.
    x = tl.load(x_ptr + row * stride_x_t + cols, mask=mask, other=0.0)                 # [BLOCK]
    dtype = x.dtype
    xf = x.to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(residual_ptr + row * stride_residual_t + cols, mask=mask, other=0.0)
        x = (xf + r.to(tl.float32)).to(dtype)
        tl.store(residual_ptr + row * stride_residual_t + cols, x, mask=mask)
        xf = x.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(xf * xf, axis=0) / hidden + eps)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0)
    y = (xf * rstd).to(dtype).to(tl.float32) * w.to(tl.float32)
    tl.store(out_ptr + row * stride_out_t + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None, *, pdl: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Triton twin of :func:`tritium.engine.reference.rms_norm`. x, residual: [T, H]; weight: [H].

    With ``residual``, ``h = x + residual`` is written into ``residual`` (in place) and returned.
    ``pdl=False``: launch without programmatic dependent launch (after a cross-stream join).
    """
    T, H = x.shape
    out = torch.empty_like(x)
    if T == 0:
        return out, residual
    _rms_norm_kernel[(T,)](
        x, residual if residual is not None else x, weight, out,
        x.stride(0), residual.stride(0) if residual is not None else 0, out.stride(0),
        H, eps,
        HAS_RESIDUAL=residual is not None, BLOCK=triton.next_power_of_2(H), num_warps=4 if H <= 4096 else 8,
        **pdl_launch(x.device, pdl),
    )
    return out, residual


@triton.jit
def _rope_kernel(
    # pointers
    q_ptr, k_ptr, positions_ptr, cos_sin_ptr, v_ptr, k_cache_ptr, v_cache_ptr, slot_mapping_ptr,
    # strides
    stride_q_t, stride_q_h, stride_k_t, stride_k_h, stride_cs_p, stride_v_t, stride_v_h,
    stride_kc_blk, stride_kc_tok, stride_kc_head, stride_vc_blk, stride_vc_tok, stride_vc_head,
    # sizes
    num_q_heads, num_kv_heads, block_size,
    # meta-parameters
    HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, WRITE_KV: tl.constexpr,
    USE_PDL: tl.constexpr,
):
    """Grid: (num_tokens,). Rotates token t's q and k heads in place; with WRITE_KV also stores the
    rotated k and v into their cache slot (slot_mapping[t] = block * block_size + offset; < 0 skips)."""
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # q and k come from the projection before
    t = tl.program_id(0).to(tl.int64)
    pos = tl.load(positions_ptr + t).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    dmask = d < HALF
    cos = tl.load(cos_sin_ptr + pos * stride_cs_p + d, mask=dmask, other=0.0)[None, :]          # [1, BLOCK_D]
    sin = tl.load(cos_sin_ptr + pos * stride_cs_p + HALF + d, mask=dmask, other=0.0)[None, :]   # [1, BLOCK_D]
    h = tl.arange(0, BLOCK_H)
    # q heads
    qmask = (h[:, None] < num_q_heads) & dmask[None, :]
    q1_ptrs = q_ptr + t * stride_q_t + h[:, None] * stride_q_h + d[None, :]                   # [BLOCK_H, BLOCK_D]
    # fp32 arithmetic (see _rms_norm_kernel), cos/sin rounded to q's dtype as torch does
    q1 = tl.load(q1_ptrs, mask=qmask, other=0.0)
    dtype = q1.dtype
    q1 = q1.to(tl.float32)
    q2 = tl.load(q1_ptrs + HALF, mask=qmask, other=0.0).to(tl.float32)
    cq = cos.to(dtype).to(tl.float32)
    sq = sin.to(dtype).to(tl.float32)
    tl.store(q1_ptrs, (q1 * cq - q2 * sq).to(dtype), mask=qmask)
    tl.store(q1_ptrs + HALF, (q2 * cq + q1 * sq).to(dtype), mask=qmask)
    # k heads
    kmask = (h[:, None] < num_kv_heads) & dmask[None, :]
    k1_ptrs = k_ptr + t * stride_k_t + h[:, None] * stride_k_h + d[None, :]
    k1 = tl.load(k1_ptrs, mask=kmask, other=0.0).to(tl.float32)
    k2 = tl.load(k1_ptrs + HALF, mask=kmask, other=0.0).to(tl.float32)
    k1_rot = (k1 * cq - k2 * sq).to(dtype)
    k2_rot = (k2 * cq + k1 * sq).to(dtype)
    tl.store(k1_ptrs, k1_rot, mask=kmask)
    tl.store(k1_ptrs + HALF, k2_rot, mask=kmask)
    if WRITE_KV:
        slot = tl.load(slot_mapping_ptr + t)
        if slot >= 0:
            blk = slot // block_size
            off = slot % block_size
            kc_ptrs = (k_cache_ptr + blk * stride_kc_blk + off * stride_kc_tok + h[:, None] * stride_kc_head
                       + d[None, :])
            tl.store(kc_ptrs, k1_rot.to(k_cache_ptr.dtype.element_ty), mask=kmask)
            tl.store(kc_ptrs + HALF, k2_rot.to(k_cache_ptr.dtype.element_ty), mask=kmask)
            v_ptrs = v_ptr + t * stride_v_t + h[:, None] * stride_v_h + d[None, :]
            vc_ptrs = (v_cache_ptr + blk * stride_vc_blk + off * stride_vc_tok + h[:, None] * stride_vc_head
                       + d[None, :])
            tl.store(vc_ptrs, tl.load(v_ptrs, mask=kmask), mask=kmask)
            tl.store(vc_ptrs + HALF, tl.load(v_ptrs + HALF, mask=kmask), mask=kmask)


def rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor) -> None:
    """Triton twin of :func:`tritium.engine.reference.rope` (in place).

    q: [T, Hq, D], k: [T, Hkv, D] (last dim contiguous; may be views of one QKV buffer), positions: [T],
    cos_sin: [P, D] fp32 (cos in the first half, sin in the second).
    """
    _launch_rope(q, k, positions, cos_sin)


def rope_write_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                  cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor) -> None:
    """Triton twin of :func:`tritium.engine.reference.rope_write_kv`: :func:`rope` fused with
    ``write_kv_cache`` (one kernel instead of two in every layer).

    v: [T, Hkv, D]; k_cache, v_cache: [num_blocks, block_size, Hkv, D] of q's dtype, last dim contiguous;
    slot_mapping: [T] int64, block * block_size + offset, negative skips the token.
    """
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.dtype != k.dtype or cache.shape[2:] != k.shape[1:] or cache.stride(-1) != 1:
            raise ValueError(f"rope_write_kv: {name} must be [blocks, block_size, {k.shape[1]}, {k.shape[2]}] "
                             f"{k.dtype} with a contiguous last dim, got {tuple(cache.shape)} {cache.dtype}")
    if v.shape != k.shape or slot_mapping.shape != (k.shape[0],):
        raise ValueError(f"rope_write_kv: v {tuple(v.shape)} must match k {tuple(k.shape)} and slot_mapping "
                         f"{tuple(slot_mapping.shape)} have one slot per token")
    _launch_rope(q, k, positions, cos_sin, (v, k_cache, v_cache, slot_mapping))


def _launch_rope(q, k, positions, cos_sin, kv=None) -> None:
    T, Hq, D = q.shape
    if T == 0:
        return
    v, k_cache, v_cache, slots = kv if kv is not None else (k, k, k, positions)
    kc_strides = k_cache.stride()[:3] if kv is not None else (0, 0, 0)
    vc_strides = v_cache.stride()[:3] if kv is not None else (0, 0, 0)
    _rope_kernel[(T,)](
        q, k, positions, cos_sin, v, k_cache, v_cache, slots,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos_sin.stride(0), v.stride(0), v.stride(1),
        *kc_strides, *vc_strides,
        Hq, k.shape[1], k_cache.shape[1] if kv is not None else 1,
        HALF=D // 2, BLOCK_H=triton.next_power_of_2(Hq), BLOCK_D=triton.next_power_of_2(D // 2),
        WRITE_KV=kv is not None, num_warps=4, **pdl_launch(q.device),
    )


@triton.jit
def _silu_and_mul_kernel(
    # pointers
    x_ptr, out_ptr,
    # strides
    stride_x_t, stride_out_t,
    # sizes
    inter,
    # meta-parameters
    BLOCK: tl.constexpr, USE_PDL: tl.constexpr,
):
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the next GEMV may start fetching its weights now
        tl.extra.cuda.gdc_wait()  # x comes from the projection before
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inter
    gate = tl.load(x_ptr + t * stride_x_t + cols, mask=mask, other=0.0).to(tl.float32)         # [BLOCK]
    up = tl.load(x_ptr + t * stride_x_t + inter + cols, mask=mask, other=0.0)
    dtype = up.dtype
    # fp32 arithmetic (see _rms_norm_kernel); silu rounded to the input dtype before the product, as torch
    act = (gate / (1.0 + tl.exp(-gate))).to(dtype).to(tl.float32)
    tl.store(out_ptr + t * stride_out_t + cols, (act * up.to(tl.float32)).to(dtype), mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """Triton twin of :func:`tritium.engine.reference.silu_and_mul`; x: [T, 2I] -> [T, I]."""
    T, two_i = x.shape
    inter = two_i // 2
    out = torch.empty((T, inter), dtype=x.dtype, device=x.device)
    if T == 0:
        return out
    # 1024 columns a program (not tuned): 14 programs a token for Llama-3-8B (I=14336).
    block = min(1024, triton.next_power_of_2(inter))
    _silu_and_mul_kernel[(T, triton.cdiv(inter, block))](
        x, out, x.stride(0), out.stride(0), inter, BLOCK=block, num_warps=4, **pdl_launch(x.device))
    return out


# Greedy sampling state of one launch: row 0 the best (value, index) key of each row so far, row 1 how many
# of the row's programs are done. Both return to their initial values by the end of every launch.
_NO_KEY = -(2**63)
_NO_KEY_C = tl.constexpr(_NO_KEY)
_LOW32 = tl.constexpr(2**32 - 1)


def greedy_scratch(rows: int, device) -> torch.Tensor:
    """Scratch of :func:`greedy_advance` for up to ``rows`` rows: int64 [2, rows], reused by every launch."""
    s = torch.zeros(2, rows, dtype=torch.int64, device=device)
    s[0] = _NO_KEY
    return s


@triton.jit
def _greedy_advance_kernel(
    # pointers
    logits_ptr, hist_ptr, ids_ptr, pos_ptr, seq_lens_ptr, slots_ptr, stop_ptr, block_table_ptr, scratch_ptr,
    # strides and sizes
    stride_l, stride_hist, stride_bt, stride_scratch, vocab, hist_rows, max_blocks, block_size,
    # meta-parameters
    BLOCK: tl.constexpr, SPLITS: tl.constexpr,
):
    """Grid (rows, SPLITS): program (r, s) reduces BLOCK logits of row r to one int64 key (the value's
    bits, made signed-monotonic, above the complement of the index: the largest key is the first
    maximum), folds it into the row's best key with an atomic max, and the row's last program to
    finish (an atomic ticket) turns the winner into the row's next decode inputs."""
    row = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots_ptr + row)
    if slot < 0:  # graph padding: no sequence in this row
        return
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < vocab
    x = tl.load(logits_ptr + row * stride_l + cols, mask=mask, other=0.0).to(tl.float32)
    bits = x.to(tl.int32, bitcast=True)
    key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # orders as the floats do (-0 just below +0)
    key = tl.where(x != x, 0x7FFFFFFF, key)  # NaN is the maximum, as in torch.argmax
    low = tl.full([BLOCK], _LOW32, tl.int64)
    packed = (key.to(tl.int64) << 32) | (low - cols.to(tl.int64))
    packed = tl.where(mask, packed, tl.full([BLOCK], _NO_KEY_C, tl.int64))
    best_ptr = scratch_ptr + row
    ticket_ptr = scratch_ptr + stride_scratch + row
    tl.atomic_max(best_ptr, tl.max(packed, 0), sem="acq_rel", scope="gpu")
    tl.debug_barrier()
    done = tl.atomic_add(ticket_ptr, 1, sem="acq_rel", scope="gpu")
    if done == SPLITS - 1:  # every other program of the row has folded its key in
        best = tl.atomic_xchg(best_ptr, tl.full([], _NO_KEY_C, tl.int64), sem="acq_rel", scope="gpu")
        tl.atomic_xchg(ticket_ptr, 0, sem="relaxed", scope="gpu")
        low32 = tl.full([], _LOW32, tl.int64)
        tok = low32 - (best & low32)
        pos = tl.load(pos_ptr + row) + 1
        tl.store(hist_ptr + (pos % hist_rows) * stride_hist + row, tok)
        if (pos < max_blocks * block_size) & (pos < tl.load(stop_ptr + row)):
            tl.store(ids_ptr + row, tok)
            tl.store(pos_ptr + row, pos)
            tl.store(seq_lens_ptr + row, tl.load(seq_lens_ptr + row) + 1)
            page = tl.load(block_table_ptr + row * stride_bt + pos // block_size).to(tl.int64)
            tl.store(slots_ptr + row, page * block_size + pos % block_size)
        else:  # its last token, or past its block table: the row stops (writes nowhere, reads what it has)
            tl.store(slots_ptr + row, -1)


def greedy_advance(logits: torch.Tensor, hist: torch.Tensor, ids: torch.Tensor, pos: torch.Tensor,
                   seq_lens: torch.Tensor, slots: torch.Tensor, stop: torch.Tensor, block_table: torch.Tensor,
                   block_size: int, scratch: torch.Tensor) -> None:
    """Triton twin of :func:`tritium.engine.reference.greedy_advance`: argmax and next-step inputs in one
    launch of (rows, vocab / 4096) programs; graph safe (no host sync, ``scratch`` from
    :func:`greedy_scratch` is left as it was found).

    logits [rows, vocab] (any float dtype, unit stride); hist int64 [H, >= rows]; ids, pos, slots, stop int64
    and seq_lens int32 [>= rows]; block_table int32 [>= rows, max_blocks], unit last stride.
    """
    rows, vocab = logits.shape
    if rows == 0:
        return
    if scratch.shape[0] != 2 or scratch.shape[1] < rows or scratch.dtype != torch.int64:
        raise ValueError(f"scratch must be greedy_scratch(rows >= {rows}), got {scratch.dtype} {tuple(scratch.shape)}")
    if logits.stride(1) != 1 or block_table.stride(1) != 1 or hist.stride(1) != 1:
        raise ValueError("logits, hist and block_table must have a unit last stride")
    block = min(4096, triton.next_power_of_2(vocab))
    splits = triton.cdiv(vocab, block)
    _greedy_advance_kernel[(rows, splits)](
        logits, hist, ids, pos, seq_lens, slots, stop, block_table, scratch,
        logits.stride(0), hist.stride(0), block_table.stride(0), scratch.stride(0), vocab, hist.shape[0],
        block_table.shape[1], block_size,
        BLOCK=block, SPLITS=splits, num_warps=4)
