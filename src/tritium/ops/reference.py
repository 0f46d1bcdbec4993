"""PyTorch references of the small ops (fp32 where it matters); also the ``op_backend="torch"`` implementation.

The arithmetic follows Hugging Face transformers' Llama modules step for step (RMSNorm in fp32, rope as
``x * cos + rotate_half(x) * sin``), so fp32 runs agree with transformers bit for bit where it matters.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tritium.ops.quant import Fp8Rows, quantized_rows


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None, *,
             quantize: bool = False, pre_weight: torch.Tensor | None = None
             ) -> tuple[torch.Tensor | Fp8Rows, torch.Tensor | None]:
    """``y = weight * (h / sqrt(mean(h^2) + eps))`` with ``h = x + residual`` (or ``x``), in fp32; ``pre_weight``:
    x is first ``rms_norm(x, pre_weight, eps)`` (a sublayer's output norm before the residual add, Gemma).

    x, residual: [T, H]; weight: [H]. Returns (y [T, H] in x's dtype, h [T, H] or None when no residual).
    ``quantize``: y quantized per row to fp8 (:func:`tritium.ops.quant.quantize_activations`) as
    :class:`~tritium.ops.quant.Fp8Rows` (what a W8A8 projection takes).
    """
    if pre_weight is not None:
        x = rms_norm(x, pre_weight, eps)[0]
    h = x if residual is None else x + residual
    hf = h.float()
    y = weight * (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (quantized_rows(y) if quantize else y), (None if residual is None else h)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor, *,
         qk_norm: tuple | None = None) -> None:
    """Rotate-half rope in place. q: [T, Hq, D], k: [T, Hkv, D], positions: [T] int, cos_sin: [P, D].
    ``qk_norm`` = (q_weight [D], k_weight [D], eps): every q and k head is RMS-normed (:func:`rms_norm`) first."""
    if qk_norm is not None:
        q_weight, k_weight, eps = qk_norm
        q.copy_(rms_norm(q, q_weight, eps)[0])
        k.copy_(rms_norm(k, k_weight, eps)[0])
    half = q.shape[-1] // 2
    cs = cos_sin[positions]                                   # [T, D]
    cos = torch.cat([cs[:, :half], cs[:, :half]], -1)[:, None, :].to(q.dtype)
    sin = torch.cat([cs[:, half:], cs[:, half:]], -1)[:, None, :].to(q.dtype)
    q.copy_(_rotate(q, cos, sin))
    k.copy_(_rotate(k, cos, sin))


def rope_write_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                  cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor, *, qk_norm: tuple | None = None,
                  kv_scale: torch.Tensor | None = None) -> None:
    """:func:`rope` (``qk_norm`` as there) in place, then the rotated k and v of token t into cache slot
    ``slot_mapping[t]`` (block * block_size + offset of a [blocks, block_size, Hkv, D] cache); a slot < 0 or
    past the cache skips. ``kv_scale``: a float8 cache's [2] scales (k's, v's; None: 1)."""
    rope(q, k, positions, cos_sin, qk_norm=qk_norm)
    keep = ((slot_mapping >= 0) & (slot_mapping < k_cache.shape[0] * k_cache.shape[1])).nonzero()[:, 0]
    slots = slot_mapping[keep]
    ks, vs = (None, None) if kv_scale is None else (kv_scale[0], kv_scale[1])
    k_cache.view(-1, *k_cache.shape[2:])[slots] = to_cache(k[keep], k_cache.dtype, ks)
    v_cache.view(-1, *v_cache.shape[2:])[slots] = to_cache(v[keep], v_cache.dtype, vs)


def to_cache(x: torch.Tensor, dtype: torch.dtype, scale: torch.Tensor | None = None) -> torch.Tensor:
    """Keys or values as a KV cache of ``dtype`` stores them: a float8 cache gets x / scale (fp32; default
    scale 1) saturated to its range, as ``write_kv_cache`` stores them; others a cast."""
    if dtype == torch.float8_e4m3fn:
        limit = torch.finfo(dtype).max
        x = x.float() if scale is None else x.float() / scale
        return x.clamp(-limit, limit).to(dtype)
    return x.to(dtype)


def silu_and_mul(x: torch.Tensor, *, quantize: bool = False) -> torch.Tensor | Fp8Rows:
    """``silu(x[:, :I]) * x[:, I:]``; x: [T, 2I] -> [T, I]. ``quantize``: the result quantized per row to fp8
    as :class:`~tritium.ops.quant.Fp8Rows` (see :func:`rms_norm`)."""
    inter = x.shape[-1] // 2
    y = F.silu(x[:, :inter]) * x[:, inter:]
    return quantized_rows(y) if quantize else y


def gelu_tanh_and_mul(x: torch.Tensor, *, quantize: bool = False) -> torch.Tensor | Fp8Rows:
    """``gelu(x[:, :I], approximate="tanh") * x[:, I:]`` (Gemma's GeGLU); x: [T, 2I] -> [T, I]; ``quantize`` as
    :func:`silu_and_mul`."""
    inter = x.shape[-1] // 2
    y = F.gelu(x[:, :inter], approximate="tanh") * x[:, inter:]
    return quantized_rows(y) if quantize else y


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           scale: torch.Tensor | None = None, addend: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight^T + bias`` in fp64, rounded to x's dtype: the reference of :func:`tritium.ops.gemv.gemv`.
    ``scale``: weight is stored quantized (fp8) with these row scales ``[N]`` (weight = scale[:, None] * w).
    ``addend`` ``[M, N]``: a per-row term added before the rounding (a LoRA update)."""
    w = weight.double() if scale is None else weight.double() * scale.double()[:, None]
    y = x.double() @ w.T
    if bias is not None:
        y = y + bias.double()
    if addend is not None:
        y = y + addend.double()
    return y.to(x.dtype)


def rms_norm_linear(h: torch.Tensor, norm_weight: torch.Tensor | None, eps: float, weight: torch.Tensor,
                    bias: torch.Tensor | None = None) -> torch.Tensor:
    """``rms_norm(h) @ weight^T + bias`` with the normed row kept in fp64 (never rounded to h's dtype), rounded
    once at the end: the reference of :func:`tritium.ops.gemv.gemv` with ``eps``. It differs from
    ``linear(rms_norm(h)[0], ...)`` by that one rounding of the normed row. ``norm_weight`` None: a unit
    weight (the norm's weight folded into ``weight``)."""
    hd = h.double()
    normed = hd * torch.rsqrt(hd.pow(2).mean(-1, keepdim=True) + eps)
    if norm_weight is not None:
        normed = normed * norm_weight.double()
    y = normed @ weight.double().T
    if bias is not None:
        y = y + bias.double()
    return y.to(h.dtype)


def linear_residual(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                    bias: torch.Tensor | None = None) -> torch.Tensor:
    """``residual + linear(x, weight, bias)``, the product rounded to x's dtype before the add (as the unfused
    add sees it); returns a new tensor: the reference of :func:`tritium.ops.gemv.gemv` with ``residual``."""
    return (linear(x, weight, bias).double() + residual.double()).to(x.dtype)


def greedy_advance(logits: torch.Tensor, hist: torch.Tensor, ids: torch.Tensor, pos: torch.Tensor,
                   seq_lens: torch.Tensor, slots: torch.Tensor, stop: torch.Tensor, block_table: torch.Tensor,
                   block_size: int, scratch: torch.Tensor | None = None, window_slots: torch.Tensor | None = None,
                   window_table: torch.Tensor | None = None) -> None:
    """Greedy-sample one decode step and turn the tokens into the next step's inputs, in place.

    For every row r of ``logits`` [rows, vocab] whose ``slots[r] >= 0`` (graph padding rows have -1 and are
    left alone): tok = argmax(logits[r]) (first maximum); p = pos[r] + 1; hist[p % H, r] = tok; then, if
    p < stop[r] (p is not the row's last token) and ``block_table`` [rows, max_blocks] has a column for p:
    ids[r] = tok, pos[r] = p, seq_lens[r] += 1, slots[r] = block_table[r, p // block_size] * block_size +
    p % block_size; if not, the row stops: slots[r] = -1 and nothing else moves (later steps repeat without
    writing the cache or sampling). ``scratch`` is unused (the Triton twin's atomics). ``window_slots`` and
    ``window_table`` (the windowed layers' pool) move as ``slots`` and ``block_table`` do.
    """
    rows = logits.shape[0]
    live = slots[:rows] >= 0
    tok = torch.argmax(logits.float(), dim=-1)
    p = pos[:rows] + 1
    # NOTE: no boolean indexing (it syncs with the device): this also runs inside CUDA graphs
    r = torch.arange(rows, device=logits.device)
    at = p % hist.shape[0]
    hist[at, r] = torch.where(live, tok, hist[at, r])
    fits = p < block_table.shape[1] * block_size
    move = live & fits & (p < stop[:rows])
    ids[:rows] = torch.where(move, tok, ids[:rows])
    pos[:rows] = torch.where(move, p, pos[:rows])
    seq_lens[:rows] += move.to(seq_lens.dtype)
    col = torch.where(fits, p // block_size, 0)
    for sl, table in ((slots, block_table), (window_slots, window_table)):
        if sl is None:
            continue
        page = table[:rows].gather(1, col[:, None].long())[:, 0].long()
        sl[:rows] = torch.where(move, page * block_size + p % block_size, torch.where(live, -1, sl[:rows]))


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per row of ``logits`` [R, V] (any float dtype) and ``targets`` [R] (token ids): fp32 (log-probability
    of the target, log-sum-exp of the row, log-probability of the most likely token), then int64 (its id: the
    first maximum; the target's rank: 1 + the tokens strictly more likely), from the fp32 log-softmax."""
    x = logits.float()
    lse = torch.logsumexp(x, dim=-1)
    best_v, best_i = x.max(dim=-1)
    target = x.gather(-1, targets.long()[:, None])
    rank = 1 + (x > target).sum(-1)
    return target[:, 0] - lse, lse, best_v - lse, best_i, rank


def moe_route(logits: torch.Tensor, top_k: int, renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The router of a mixture of experts: logits ``[T, E]`` -> (weights ``[T, top_k]`` fp32, ids ``[T, top_k]``
    int32): the ``top_k`` largest probabilities of the fp32 softmax over E in descending order (ties: the lower
    expert index first), divided by their sum with ``renormalize``."""
    probs = torch.softmax(logits.float(), dim=-1)
    # NOTE: a stable sort, not torch.topk, whose order among equal values is unspecified (CPU: [1, 5, 2] for
    # three equal maxima at 1, 2, 5)
    weights, ids = torch.sort(probs, dim=-1, descending=True, stable=True)
    weights, ids = weights[:, :top_k], ids[:, :top_k]
    if renormalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights.contiguous(), ids.to(torch.int32)


def fused_moe(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor, weights: torch.Tensor,
              ids: torch.Tensor, *, gate_up_scale: torch.Tensor | None = None,
              down_scale: torch.Tensor | None = None) -> torch.Tensor:
    """The routed experts' SwiGLU MLPs, weighted and summed: x ``[T, H]``, w_gate_up ``[E, 2I, H]`` (gate rows
    then up rows), w_down ``[E, H, I]``, weights ``[T, k]`` fp32, ids ``[T, k]`` int -> ``[T, H]`` in x's dtype::

        act_j  = silu(x[t] @ Wg[e].T) * (x[t] @ Wu[e].T)     e = ids[t, j]: products in fp32, then each
                                                             step rounded to x's dtype as transformers does
        out[t] = sum_j weights[t, j] * (act_j @ Wd[e].T)      in fp32, rounded once

    A slot whose id is outside [0, E) adds nothing. Dense over the experts (each expert's MLP on every token,
    kept where routed): no host syncs and static shapes (CUDA-graph safe), each weight read once, but E / k
    times the routed arithmetic. fp8 weights: dequantized by their per-row scales (``gate_up_scale [E, 2I]``,
    ``down_scale [E, H]``) in fp32 first."""
    if gate_up_scale is not None:
        w_gate_up = w_gate_up.float() * gate_up_scale[..., None]
        w_down = w_down.float() * down_scale[..., None]
    inter = w_gate_up.shape[1] // 2
    xf = x.float()
    ids = ids.long()
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in range(w_gate_up.shape[0]):
        hit = ids == e                                                   # [T, k]
        coef = torch.where(hit, weights, 0.0).sum(-1, keepdim=True)      # [T, 1]
        gate_up = xf @ w_gate_up[e].float().T                            # [T, 2I]
        act = F.silu(gate_up[:, :inter].to(x.dtype)) * gate_up[:, inter:].to(x.dtype)
        y = act.float() @ w_down[e].float().T                            # [T, H]
        out += torch.where(hit.any(-1, keepdim=True), coef * y, 0.0)  # not 0 * y: y may overflow where not routed
    return out.to(x.dtype)


def moe_norm_route(x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float,
                   router: torch.Tensor, top_k: int, renormalize: bool,
                   counters: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """:func:`rms_norm` of ``x + residual``, the router's logits of the normed rows (in x's dtype) and their
    :func:`moe_route`: (normed, the new residual, weights, ids). ``counters``: the Triton op's, unused here."""
    normed, h = rms_norm(x, norm_weight, eps, residual)
    return (normed, h, *moe_route(linear(normed, router), top_k, renormalize))


def fused_moe_add_norm(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor, weights: torch.Tensor,
                       ids: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor,
                       eps: float, **scales) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fused_moe` (``scales``: its fp8 weights' ``gate_up_scale`` / ``down_scale``), then :func:`rms_norm` of
    it plus ``residual``: (normed rows, the new residual)."""
    return rms_norm(fused_moe(x, w_gate_up, w_down, weights, ids, **scales), norm_weight, eps, residual)
