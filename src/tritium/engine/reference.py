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
    """Inverse wavelengths [head_dim // 2] fp32 of rotate-half rope, with linear or llama3 scaling
    (transformers' ``_compute_llama3_parameters``) or GGUF per-frequency ``freq_factors``."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    if freq_factors is not None:
        return inv / freq_factors.float()
    if rope_scaling is None:
        return inv
    if rope_scaling["rope_type"] == "linear":
        return inv / rope_scaling["factor"]
    # llama3
    factor = rope_scaling["factor"]
    low, high = rope_scaling.get("low_freq_factor", 1.0), rope_scaling.get("high_freq_factor", 4.0)
    old_len = rope_scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv
    inv_llama = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_llama / factor + smooth * inv_llama
    is_medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(is_medium, smoothed, inv_llama)


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


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[:, :I]) * x[:, I:]``; x: [T, 2I] -> [T, I]."""
    inter = x.shape[-1] // 2
    return F.silu(x[:, :inter]) * x[:, inter:]
