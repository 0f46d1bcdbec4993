"""FP8 projections: a weight stored as float8_e4m3fn with one fp32 scale per row (output feature).

``W ~= scale[:, None] * W8``. A decode step reads every weight once, so storing them in one byte instead of
two halves the bytes a batch-1 step streams; the products still run in the activations' dtype with fp32
accumulation (the GEMV converts each weight chunk after loading it and scales each row's dot product once:
:func:`tritium.ops.gemv.gemv` and :func:`tritium.fused.matmul.matmul` take the ``scale``).

:func:`quantize_rows` is what ``quantization="fp8"`` does to a 16/32-bit checkpoint at load (round to
nearest, each row's largest magnitude mapped to 448, the format's largest finite value);
:func:`expand_scale` turns a checkpoint's per-tensor or per-channel scale into per-row scales;
:func:`dequantize` is the reference the kernels are tested against.

``quantization="fp8-dynamic"`` (W8A8) quantizes the activations too, each row (token) with its own scale
computed as the product runs (:func:`quantize_activations`, the reference of
:func:`tritium.ops.act_quant.quantize_activations_fp8`), and multiplies fp8 by fp8 on the tensor cores
(:func:`dynamic_linear` is the reference of the product).
"""

from __future__ import annotations

import dataclasses

import torch

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8_DTYPE).max)  # 448
QUANTIZED_DTYPES = (FP8_DTYPE,)  # weight dtypes the kernels take with row scales (gemv's scale, matmul's b_scale)
# "fp8": weight-only (the products in the activations' dtype); "fp8-dynamic": fp8 activations too (W8A8);
# "int4": weight-only 4-bit codes in groups (tritium.ops.int4)
QUANTIZATIONS = ("fp8", "fp8-dynamic", "int4")


def check_row_scales(name: str, scale, n: int, device: torch.device, what: str) -> None:
    """``scale`` must be a contiguous fp32 ``[n]`` tensor on ``device`` (a quantized operand's scales: ``what``
    says whose); ValueError naming ``name`` otherwise."""
    if not isinstance(scale, torch.Tensor) or scale.shape != (n,) or scale.dtype != torch.float32 \
            or scale.stride(0) != 1 or scale.device != device:
        got = (f"{tuple(scale.shape)} {scale.dtype} on {scale.device}" if isinstance(scale, torch.Tensor)
               else type(scale).__name__)
        raise ValueError(f"{name} must be a contiguous [{n}] float32 tensor on {device} ({what}), got {got}")


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
    # the quotient in fp64, then rounded: fp32's correctly rounded quotient on every device (see
    # quantize_activations); a checkpoint quantized on the CPU then holds what quantizing at load on a GPU gives
    scale = torch.where(amax > 0, (amax.double() / FP8_MAX).float(), torch.ones_like(amax))
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


def quantize_activations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x [M, K]`` -> (``x8 [M, K]`` float8_e4m3fn, ``scale [M]`` fp32), ``x ~= scale[:, None] * x8``, each row
    on its own (per-token dynamic quantization): ``amax`` its largest magnitude in fp32, ``scale = amax / 448``
    and ``x8 = round(x * (448 / amax))`` to nearest even, both quotients rounded once (an all-zero row: scale
    1, zeros). A row holding NaN gets a NaN scale (its products are NaN, as they would be unquantized)."""
    if x.dim() != 2 or not x.dtype.is_floating_point:
        raise ValueError(f"quantize_activations: x must be a 2-D float tensor, got {tuple(x.shape)} {x.dtype}")
    xf = x.float()
    amax = xf.abs().amax(dim=1)                                          # NaN where the row holds one
    zero = amax == 0
    # NOTE: the quotients in fp64, then rounded: that is fp32's correctly rounded quotient (53 >= 2 x 24 + 2
    # bits); torch's fp32 tensor / scalar on a GPU multiplies by the reciprocal instead (1 ulp off, seen on H200)
    scale = torch.where(zero, torch.ones_like(amax), (amax.double() / FP8_MAX).float())
    inv = torch.where(zero, torch.ones_like(amax), (FP8_MAX / amax.double()).float())
    x8 = (xf * inv[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)
    return x8, scale.contiguous()


@dataclasses.dataclass(frozen=True)
class Fp8Rows:
    """Activations already quantized per row, as :func:`quantize_activations` does, by the kernel that produced
    them (RMSNorm or SiLU-and-mul with ``quantize=True``): ``data [M, K]`` float8_e4m3fn, ``scale [M]`` fp32,
    standing for ``[M, K]`` values in ``dtype``. A W8A8 projection takes them instead of quantizing x itself
    (one launch fewer); its output is in ``dtype``."""

    data: torch.Tensor
    scale: torch.Tensor
    dtype: torch.dtype

    def __post_init__(self):
        if not isinstance(self.data, torch.Tensor) or self.data.dim() != 2 or self.data.dtype != FP8_DTYPE \
                or self.data.stride(-1) != 1:
            got = (f"{tuple(self.data.shape)} {self.data.dtype}" if isinstance(self.data, torch.Tensor)
                   else type(self.data).__name__)
            raise ValueError(f"Fp8Rows.data must be a 2-D {FP8_DTYPE} tensor with a contiguous last dimension, "
                             f"got {got}")
        check_row_scales("Fp8Rows.scale", self.scale, self.data.shape[0], self.data.device, "one per row")
        if self.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise ValueError(f"Fp8Rows.dtype must be float16, bfloat16 or float32, got {self.dtype}")

    @property
    def shape(self) -> torch.Size:
        return self.data.shape

    @property
    def device(self) -> torch.device:
        return self.data.device

    def dequantize(self) -> torch.Tensor:
        """``scale[:, None] * data`` in fp32, rounded to ``dtype``."""
        return (self.data.float() * self.scale[:, None]).to(self.dtype)


def quantized_rows(x: torch.Tensor) -> Fp8Rows:
    """:func:`quantize_activations` of ``x [M, K]`` as :class:`Fp8Rows` standing for x's dtype."""
    return Fp8Rows(*quantize_activations(x), x.dtype)


def dynamic_linear(x: torch.Tensor | Fp8Rows, w8: torch.Tensor, w_scale: torch.Tensor,
                   bias: torch.Tensor | None = None) -> torch.Tensor:
    """The W8A8 product ``x @ W^T + bias`` (x ``[..., K]``, ``w8 [N, K]`` with row scales ``w_scale``) as
    ``quantization="fp8-dynamic"`` computes it: x quantized per row (:func:`quantize_activations`; x may come
    quantized already, as :class:`Fp8Rows`), the fp8 products summed in fp32 (an fp8 value has a 4-bit
    significand: every product is exact in fp32, in tf32 too), scaled by both scales, the bias added,
    rounded to x's dtype."""
    rows = x if isinstance(x, Fp8Rows) else quantized_rows(x.reshape(-1, x.shape[-1]))
    acc = (rows.data.float() @ w8.float().t()) * rows.scale[:, None] * w_scale.float()[None, :]
    if bias is not None:
        acc = acc + bias.float()
    return acc.to(rows.dtype).view(*x.shape[:-1], w8.shape[0])
