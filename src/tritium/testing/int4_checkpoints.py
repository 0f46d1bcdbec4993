"""Writers of the GPTQ, AWQ and compressed-tensors int4 checkpoint tensors, for tests that build synthetic
checkpoints: each takes a weight's 4-bit codes, scales and zero points and returns the tensors a checkpoint
of that format holds for one Linear (``{suffix: tensor}``).

Every writer takes the weight ``W [N, K]`` (N outputs, K input features) as

    W[n, k] = (codes[n, k] - zeros[n, grp(k)]) * scales[n, grp(k)]

with ``codes [N, K]`` (integers in [0, 15], input-feature order), ``scales [N, K/G]``, ``zeros [N, K/G]`` (in
[0, 15]) and ``grp(k) = k // G``, or, given ``perm`` (a permutation of 0..K-1, tritium's meaning: stored
column j is feature perm[j]), ``grp(perm[j]) = j // G``. ``group_size`` -1 (None for compressed): G = K.

The bit packing is written out from the formats' descriptions, one nibble at a time, on purpose apart from
:mod:`tritium.models.int4_formats` (which reads them), so that a round trip checks the readers against the
descriptions rather than against their own inverse:

- GPTQ: ``qweight [K/8, N]``, nibble i of ``qweight[r, n]`` = code of ``W[n, 8r + i]``; ``qzeros [K/G, N/8]``,
  nibble i of ``qzeros[g, c]`` = ``(zero[8c + i, g] - zero_offset) & 0xF``; ``scales [K/G, N]``; ``g_idx [K]``.
- AWQ: ``qweight [K, N/8]``, nibble i of ``qweight[k, c]`` = code of ``W[8c + ORDER[i], k]`` with
  ORDER = (0, 2, 4, 6, 1, 3, 5, 7); ``qzeros [K/G, N/8]`` the same way; ``scales [K/G, N]``.
- compressed-tensors pack-quantized (symmetric): ``weight_packed [N, ceil(K/8)]``, nibble i of
  ``weight_packed[n, c]`` = code of ``W[n, 8c + i]`` (signed code + 8; 0 past K); ``weight_scale [N, K/G]``;
  ``weight_shape`` = (N, K); ``weight_g_idx [K]`` with ``perm``.
"""

from __future__ import annotations

import torch

_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # AutoAWQ's pack order, written out here rather than imported


def to_gptq(codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, *, group_size: int,
            perm: torch.Tensor | None = None, zero_offset: int = 1) -> dict[str, torch.Tensor]:
    """``{"qweight", "qzeros", "scales", "g_idx"}`` of a GPTQ checkpoint (``zero_offset`` 1: checkpoint_format
    "gptq", the stored zero is ``zero - 1`` mod 16; 0: "gptq_v2"). ``g_idx`` is written always (as AutoGPTQ
    does): ``k // G`` without ``perm``."""
    n, k, g = _check(codes, scales, zeros, group_size, n_multiple=8, k_multiple=8)
    c = codes.to(torch.int64)
    stored = (zeros.to(torch.int64) - zero_offset) & 0xF                      # [N, K/G]
    qweight = torch.zeros(k // 8, n, dtype=torch.int64)
    qzeros = torch.zeros(k // g, n // 8, dtype=torch.int64)
    for i in range(8):
        qweight |= c[:, i::8].t() << (4 * i)           # qweight[r, n] nibble i <- codes[n, 8r + i]
        qzeros |= stored[i::8, :].t() << (4 * i)       # qzeros[g, c] nibble i <- zero of output 8c + i
    return {"qweight": _int32(qweight), "qzeros": _int32(qzeros), "scales": scales.t().contiguous(),
            "g_idx": _g_idx(k, g, perm)}


def to_awq(codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, *,
           group_size: int) -> dict[str, torch.Tensor]:
    """``{"qweight", "qzeros", "scales"}`` of an AutoAWQ "gemm" checkpoint (zero points stored as they are)."""
    n, k, g = _check(codes, scales, zeros, group_size, n_multiple=8, k_multiple=1)
    ct = codes.to(torch.int64).t()                                            # [K, N]
    zt = zeros.to(torch.int64).t()                                            # [K/G, N]
    qweight = torch.zeros(k, n // 8, dtype=torch.int64)
    qzeros = torch.zeros(k // g, n // 8, dtype=torch.int64)
    for i in range(8):
        qweight |= ct[:, _ORDER[i]::8] << (4 * i)      # qweight[k, c] nibble i <- codes[8c + ORDER[i], k]
        qzeros |= zt[:, _ORDER[i]::8] << (4 * i)
    return {"qweight": _int32(qweight), "qzeros": _int32(qzeros), "scales": scales.t().contiguous()}


def to_compressed(codes: torch.Tensor, scales: torch.Tensor, group_size: int | None, *,
                  zeros: torch.Tensor | None = None, perm: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """``{"weight_packed", "weight_scale", "weight_shape"}`` (and ``"weight_g_idx"`` given ``perm``) of a
    compressed-tensors symmetric pack-quantized checkpoint; ``group_size`` None: the "channel" strategy.
    Symmetric: ``zeros``, if given, must all be 8."""
    if zeros is None:
        zeros = torch.full_like(scales, 8, dtype=torch.uint8)
    n, k, g = _check(codes, scales, zeros, -1 if group_size is None else group_size, n_multiple=1, k_multiple=1)
    if not bool((zeros == 8).all()):
        raise ValueError("to_compressed: pack-quantized is symmetric: every zero point must be 8")
    words = (k + 7) // 8
    c = torch.zeros(n, 8 * words, dtype=torch.int64)
    c[:, :k] = codes.to(torch.int64)                                          # padding columns hold 0
    packed = torch.zeros(n, words, dtype=torch.int64)
    for i in range(8):
        packed |= c[:, i::8] << (4 * i)                # weight_packed[n, c] nibble i <- codes[n, 8c + i]
    out = {"weight_packed": _int32(packed), "weight_scale": scales.contiguous(),
           "weight_shape": torch.tensor([n, k], dtype=torch.int64)}
    if perm is not None:
        out["weight_g_idx"] = _g_idx(k, g, perm)
    return out


def _check(codes, scales, zeros, group_size, *, n_multiple: int, k_multiple: int) -> tuple[int, int, int]:
    n, k = codes.shape
    g = k if group_size == -1 else group_size
    if n % n_multiple or k % k_multiple or k % g:
        raise ValueError(f"codes [{n}, {k}]: N must be a multiple of {n_multiple}, K of {k_multiple} and of the "
                         f"group size {g}")
    if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) > 15):
        raise ValueError("codes must lie in [0, 15]")
    if tuple(scales.shape) != (n, k // g) or tuple(zeros.shape) != (n, k // g):
        raise ValueError(f"scales and zeros must be [{n}, {k // g}], got {list(scales.shape)}, {list(zeros.shape)}")
    return n, k, g


def _g_idx(k: int, group_size: int, perm: torch.Tensor | None) -> torch.Tensor:
    """``g_idx [K]`` int32: the group of each input feature (feature perm[j] is in group j // G)."""
    groups_in_storage_order = torch.arange(k, dtype=torch.int32) // group_size
    if perm is None:
        return groups_in_storage_order
    g_idx = torch.full((k,), -1, dtype=torch.int32)
    g_idx[perm.long()] = groups_in_storage_order
    return g_idx


def _int32(words: torch.Tensor) -> torch.Tensor:
    """Unsigned 32-bit words held in int64 -> the int32 tensors with those bits."""
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)
