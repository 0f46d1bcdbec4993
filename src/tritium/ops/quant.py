"""Weight-only FP8: a weight stored as float8_e4m3fn with one fp32 scale per row (output feature).

``W ~= scale[:, None] * W8``. A decode step reads every weight once, so storing them in one byte instead of
two halves the bytes a batch-1 step streams; the products still run in the activations' dtype with fp32
accumulation (the GEMV converts each weight chunk after loading it and scales each row's dot product once:
:func:`tritium.ops.gemv.gemv` and :func:`tritium.fused.matmul.matmul` take the ``scale``).

:func:`quantize_rows` is what ``quantization="fp8"`` does to a 16/32-bit checkpoint at load (round to
nearest, each row's largest magnitude mapped to 448, the format's largest finite value);
:func:`expand_scale` turns a checkpoint's per-tensor or per-channel scale into per-row scales;
:func:`dequantize` is the reference the kernels are tested against.
"""

from __future__ import annotations

import torch

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8_DTYPE).max)  # 448
QUANTIZED_DTYPES = (FP8_DTYPE,)  # weight dtypes the kernels take with row scales (gemv's scale, matmul's b_scale)
QUANTIZATIONS = ("fp8",)


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``w [N, K]`` (any float dtype) -> (``w8 [N, K]`` float8_e4m3fn, ``scale [N]`` fp32) with
    ``w ~= scale[:, None] * w8``: each row's largest magnitude maps to 448; an all-zero row gets scale 1.
    Non-finite weights are refused (ValueError): they would quantize to NaN silently."""
    if w.dim() != 2 or not w.dtype.is_floating_point:
        raise ValueError(f"quantize_rows: w must be a 2-D float tensor, got {tuple(w.shape)} {w.dtype}")
    wf = w.float()
    if not torch.isfinite(wf).all():
        raise ValueError("quantize_rows: the weight holds non-finite values")
    amax = wf.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    w8 = (wf / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return w8, scale.contiguous()


def expand_scale(scale: torch.Tensor, rows: int) -> torch.Tensor:
    """A checkpoint's weight scale as fp32 per-row scales ``[rows]``: one value (per-tensor: shape ``[]``,
    ``[1]`` or ``[1, 1]``) repeated, or one per row (per-channel: ``[rows]`` or ``[rows, 1]``). ValueError for
    any other shape (e.g. block-wise scales)."""
    s = scale.float()
    if s.numel() == 1:
        return s.reshape(1).expand(rows).contiguous()
    if s.shape in ((rows,), (rows, 1)):
        return s.reshape(rows).contiguous()
    raise ValueError(f"weight scale of shape {tuple(scale.shape)}: expected one value (per tensor) or one per "
                     f"output row ({rows}, per channel); block-wise scales are not supported")


def dequantize(w8: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``scale[:, None] * w8`` in fp32, rounded to ``dtype``: the weight a quantized projection multiplies by."""
    return (w8.float() * scale.float()[:, None]).to(dtype)
