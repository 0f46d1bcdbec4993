"""PyTorch references of the engine's small ops; also the ``op_backend="torch"`` implementation.

The arithmetic follows Hugging Face transformers' Llama modules step for step (RMSNorm in fp32, rope as
``x * cos + rotate_half(x) * sin``), so fp32 runs agree with transformers bit for bit where it matters.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
             residual: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``y = weight * (h / sqrt(mean(h^2) + eps))`` with ``h = x + residual`` (or ``x``), in fp32.

    x, residual: [T, H]; weight: [H]. Returns (y [T, H] in x's dtype, h [T, H] or None when no residual).
    """
    h = x if residual is None else x + residual
    hf = h.float()
    y = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * y.to(x.dtype), (None if residual is None else h)


def rope_cos_sin(inv_freq: torch.Tensor, max_positions: int, scaling: float = 1.0) -> torch.Tensor:
    """Rope table [max_positions, head_dim]: cos of (position * inv_freq) in the first half, sin in the
    second. inv_freq: [head_dim // 2] fp32."""
    pos = torch.arange(max_positions, dtype=torch.float32, device=inv_freq.device)
    freqs = pos[:, None] * inv_freq[None, :].float()
    return torch.cat([freqs.cos() * scaling, freqs.sin() * scaling], dim=-1)


def rope_inv_freq(head_dim: int, theta: float, rope_scaling: dict | None = None,
                  freq_factors: torch.Tensor | None = None) -> torch.Tensor:
    """Inverse wavelengths [head_dim // 2] fp32 of rotate-half rope: ``theta ** (-2i / head_dim)``, rescaled
    by ``rope_scaling`` (a dict normalised by :class:`~tritium.engine.config.ModelConfig`) as transformers'
    ``ROPE_INIT_FUNCTIONS`` do, or divided by GGUF per-frequency ``freq_factors``.

    - ``linear``: all frequencies / factor.
    - ``dynamic`` (NTK): transformers stretches the base only once a sequence passes
      ``max_position_embeddings``; the engine's table stops there, so it is the default table.
    - ``llama3``: low frequencies / factor, high ones kept, a smooth blend between.
    - ``yarn``: per-dimension blend of interpolation (/ factor) and extrapolation along a linear ramp between
      the dimensions that turn ``beta_fast`` and ``beta_slow`` times in ``original_max_position_embeddings``;
      its cos/sin magnitude is :func:`rope_attention_factor`.
    """
    wavelen_over_2pi = theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    inv = 1.0 / wavelen_over_2pi
    if freq_factors is not None:
        return inv / freq_factors.float()
    kind = None if rope_scaling is None else rope_scaling["rope_type"]
    if kind in (None, "default", "dynamic"):
        return inv
    factor = rope_scaling["factor"]
    if kind == "linear":
        return inv / factor
    old_len = rope_scaling["original_max_position_embeddings"]
    if kind == "yarn":
        def dim_of(rotations):  # the dimension that turns `rotations` times in old_len positions
            return head_dim * math.log(old_len / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        low, high = dim_of(rope_scaling.get("beta_fast") or 32), dim_of(rope_scaling.get("beta_slow") or 1)
        if rope_scaling.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, head_dim - 1)
        high = high + 0.001 if high == low else high
        ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        extrapolated = 1 - ramp  # share of the unscaled frequency; `1 - (1 - ramp)` below rounds as transformers
        return 1.0 / (factor * wavelen_over_2pi) * (1 - extrapolated) + inv * extrapolated
    # llama3
    low, high = rope_scaling.get("low_freq_factor", 1.0), rope_scaling.get("high_freq_factor", 4.0)
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv
    inv_llama = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
    is_medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(is_medium, smoothed, inv_llama)


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction ``0.1 * mscale * ln(factor) + 1`` (1 for factor <= 1)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def rope_attention_factor(rope_scaling: dict | None) -> float:
    """Scale of the cos/sin table (transformers' ``attention_scaling``): 1 except for yarn, where it is
    ``attention_factor`` if given, else ``yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)``
    when both are set, else ``yarn_mscale(factor)``."""
    if rope_scaling is None or rope_scaling["rope_type"] != "yarn":
        return 1.0
    if rope_scaling.get("attention_factor") is not None:
        return float(rope_scaling["attention_factor"])
    factor, mscale, mscale_all_dim = (rope_scaling.get(k) for k in ("factor", "mscale", "mscale_all_dim"))
    if mscale and mscale_all_dim:
        return yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim)
    return yarn_mscale(factor)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def rope(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin: torch.Tensor) -> None:
    """Rotate-half rope in place. q: [T, Hq, D], k: [T, Hkv, D], positions: [T] int, cos_sin: [P, D]."""
    half = q.shape[-1] // 2
    cs = cos_sin[positions]                                   # [T, D]
    cos = torch.cat([cs[:, :half], cs[:, :half]], -1)[:, None, :].to(q.dtype)
    sin = torch.cat([cs[:, half:], cs[:, half:]], -1)[:, None, :].to(q.dtype)
    q.copy_(_rotate(q, cos, sin))
    k.copy_(_rotate(k, cos, sin))


def rope_write_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                  cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor) -> None:
    """:func:`rope` in place, then the rotated k and v of token t into cache slot ``slot_mapping[t]``
    (block * block_size + offset of a [blocks, block_size, Hkv, D] cache); a negative slot skips."""
    from tritium.attention.reference import write_kv_cache_ref

    rope(q, k, positions, cos_sin)
    write_kv_cache_ref(k, v, k_cache, v_cache, slot_mapping)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[:, :I]) * x[:, I:]``; x: [T, 2I] -> [T, I]."""
    inter = x.shape[-1] // 2
    return F.silu(x[:, :inter]) * x[:, inter:]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight^T + bias`` in fp64, rounded to x's dtype: the reference of :func:`tritium.engine.gemv.gemv`."""
    y = x.double() @ weight.double().T
    if bias is not None:
        y = y + bias.double()
    return y.to(x.dtype)


def greedy_advance(logits: torch.Tensor, hist: torch.Tensor, ids: torch.Tensor, pos: torch.Tensor,
                   seq_lens: torch.Tensor, slots: torch.Tensor, stop: torch.Tensor, block_table: torch.Tensor,
                   block_size: int, scratch: torch.Tensor | None = None) -> None:
    """Greedy-sample one decode step and turn the tokens into the next step's inputs, in place.

    For every row r of ``logits`` [rows, vocab] whose ``slots[r] >= 0`` (graph padding rows have -1 and are
    left alone): tok = argmax(logits[r]) (first maximum); p = pos[r] + 1; hist[p % H, r] = tok; then, if
    p < stop[r] (p is not the row's last token) and ``block_table`` [rows, max_blocks] has a column for p:
    ids[r] = tok, pos[r] = p, seq_lens[r] += 1, slots[r] = block_table[r, p // block_size] * block_size +
    p % block_size; if not, the row stops: slots[r] = -1 and nothing else moves (later steps repeat without
    writing the cache or sampling). ``scratch`` is unused (the Triton twin's atomics).
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
    page = block_table[:rows].gather(1, col[:, None].long())[:, 0].long()
    slots[:rows] = torch.where(move, page * block_size + p % block_size, torch.where(live, -1, slots[:rows]))
