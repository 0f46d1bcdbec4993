"""Rope tables: inverse frequencies under every supported scaling (default, linear, dynamic, llama3, yarn,
GGUF per-frequency factors) and the cos/sin table the rope kernels read.

The arithmetic follows transformers' ``ROPE_INIT_FUNCTIONS`` step for step, so fp32 tables agree with it.
"""

from __future__ import annotations

import math

import torch


def rope_cos_sin(inv_freq: torch.Tensor, max_positions: int, scaling: float = 1.0) -> torch.Tensor:
    """Rope table [max_positions, head_dim]: cos of (position * inv_freq) in the first half, sin in the
    second. inv_freq: [head_dim // 2] fp32."""
    pos = torch.arange(max_positions, dtype=torch.float32, device=inv_freq.device)
    freqs = pos[:, None] * inv_freq[None, :].float()
    return torch.cat([freqs.cos() * scaling, freqs.sin() * scaling], dim=-1)


def rope_inv_freq(head_dim: int, theta: float, rope_scaling: dict | None = None,
                  freq_factors: torch.Tensor | None = None) -> torch.Tensor:
    """Inverse wavelengths [head_dim // 2] fp32 of rotate-half rope: ``theta ** (-2i / head_dim)``, rescaled
    by ``rope_scaling`` (a dict normalised by :class:`~tritium.models.config.ModelConfig`) as transformers'
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
