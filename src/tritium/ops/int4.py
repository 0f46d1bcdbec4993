"""4-bit weights (weight-only int4, W4A16): the storage every int4 checkpoint format is converted to, and
its PyTorch reference.

A weight ``W [N, K]`` (N output features, K input features) is held as unsigned 4-bit codes ``q`` in
``[0, 15]`` with one scale and one zero point per row and group of ``group_size`` consecutive columns:

    W[n, k] ~= (q[n, k] - zero[n, g]) * scale[n, g],   g = k // group_size

(:class:`Int4Weight`). The codes are packed two to a byte along K, the even column in the low nibble
(``packed [N, K / 2]`` uint8), so a row's bytes are contiguous and a decode GEMV streams 0.5 byte per weight
plus the group's scale (and zero). Checkpoints that reorder the input features to quantize them in order of
importance (GPTQ's ``desc_act``) keep that order in storage: column ``j`` of the stored weight multiplies
input feature ``perm[j]``, so every group is still ``group_size`` consecutive stored columns.

:func:`quantize_int4` is what ``quantization="int4"`` does to a 16/32-bit checkpoint at load (round to
nearest, asymmetric per group); :func:`dequantize_int4_reference` and :func:`linear_int4_reference` are the
fp32 references the kernels (:mod:`tritium.ops.int4_linear`) are tested against. The GPTQ, AWQ and
compressed-tensors layouts are converted in :mod:`tritium.models.int4_formats`.
"""

from __future__ import annotations

import dataclasses

import torch

SYMMETRIC_ZERO = 8  # the zero point of a symmetric format (codes 0..15 stand for -8..7)
SCALE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@dataclasses.dataclass
class Int4Weight:
    """A ``[N, K]`` weight in 4-bit codes (see the module docstring).

    - ``packed``: ``[N, K // 2]`` uint8, contiguous; byte ``j`` holds column ``2j`` (low nibble) and ``2j + 1``.
    - ``scales``: ``[N, K // group_size]`` float16, bfloat16 or float32, contiguous.
    - ``zeros``: ``[N, K // group_size]`` uint8 codes in [0, 15], contiguous; None: every zero point is 8
      (a symmetric format), which the kernels then never load.
    - ``perm``: ``[K]`` int32 (a permutation of 0..K-1): stored column j multiplies input feature perm[j];
      None: the identity.
    - ``group_size``: columns per scale; divides K and is even (K itself: one scale per row).
    """

    packed: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor | None
    perm: torch.Tensor | None
    group_size: int

    def __post_init__(self):
        self.validate()

    @property
    def shape(self) -> tuple[int, int]:
        """The logical ``(N, K)`` of the weight."""
        return (self.packed.shape[0], 2 * self.packed.shape[1])

    @property
    def device(self) -> torch.device:
        return self.packed.device

    @property
    def num_groups(self) -> int:
        return self.shape[1] // self.group_size

    def tensors(self) -> list[torch.Tensor]:
        """The tensors it holds (what a forward reads)."""
        return [t for t in (self.packed, self.scales, self.zeros, self.perm) if t is not None]

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())

    def rows(self, start: int, stop: int) -> "Int4Weight":
        """Rows ``[start, stop)`` as a view (the same storage): what a loader copies a shard into."""
        return Int4Weight(self.packed[start:stop], self.scales[start:stop],
                          None if self.zeros is None else self.zeros[start:stop], self.perm, self.group_size)

    def columns(self, start: int, stop: int) -> "Int4Weight":
        """Input features ``[start, stop)`` as a new weight (copies): what a row-parallel rank holds. Both ends
        must fall on group boundaries; with one group a row (``group_size`` = K) the slice keeps the row's
        scale and is one group itself. ValueError for a permuted weight (its stored columns are not the input
        features) unless the slice is all of K."""
        n, k = self.shape
        if not (isinstance(start, int) and isinstance(stop, int) and 0 <= start < stop <= k):
            raise ValueError(f"Int4Weight.columns: need 0 <= start < stop <= K = {k}, got {start!r}, {stop!r}")
        if (start, stop) == (0, k):
            return self
        if self.perm is not None:
            raise ValueError("Int4Weight.columns: the weight's input features are permuted (GPTQ act-order, "
                             "desc_act): its columns cannot be split between ranks")
        g = self.group_size
        if start % 2 or stop % 2:
            raise ValueError(f"Int4Weight.columns: start and stop must be even, got {start}, {stop}")
        if g == k:
            return Int4Weight(self.packed[:, start // 2: stop // 2].contiguous(), self.scales,
                              self.zeros, None, stop - start)
        if start % g or stop % g:
            raise ValueError(f"Int4Weight.columns: [{start}, {stop}) does not fall on groups of {g} columns")
        cut = slice(start // g, stop // g)
        return Int4Weight(self.packed[:, start // 2: stop // 2].contiguous(), self.scales[:, cut].contiguous(),
                          None if self.zeros is None else self.zeros[:, cut].contiguous(), None, g)

    def validate(self) -> None:
        """ValueError naming the field whose shape, dtype, device or layout does not fit the others."""
        p = self.packed
        if not isinstance(p, torch.Tensor) or p.dim() != 2 or p.dtype != torch.uint8:
            raise ValueError(f"Int4Weight: packed must be a 2-D uint8 tensor [N, K // 2], got "
                             f"{_describe(p)}")
        n, k = p.shape[0], 2 * p.shape[1]
        g = self.group_size
        if not isinstance(g, int) or isinstance(g, bool) or g < 2 or g % 2 or (k and k % g):
            raise ValueError(f"Int4Weight: group_size must be an even int that divides K = {k}, got {g!r}")
        groups = k // g
        s = self.scales
        if not isinstance(s, torch.Tensor) or s.dtype not in SCALE_DTYPES or tuple(s.shape) != (n, groups):
            raise ValueError(f"Int4Weight: scales must be a [{n}, {groups}] float16/bfloat16/float32 tensor "
                             f"(one per row and group of {g}), got {_describe(s)}")
        z = self.zeros
        if z is not None and (not isinstance(z, torch.Tensor) or z.dtype != torch.uint8
                              or tuple(z.shape) != (n, groups)):
            raise ValueError(f"Int4Weight: zeros must be None or a [{n}, {groups}] uint8 tensor, got {_describe(z)}")
        perm = self.perm
        if perm is not None and (not isinstance(perm, torch.Tensor) or perm.dtype != torch.int32
                                 or tuple(perm.shape) != (k,)):
            raise ValueError(f"Int4Weight: perm must be None or a [{k}] int32 tensor, got {_describe(perm)}")
        for name in ("packed", "scales", "zeros", "perm"):
            t = getattr(self, name)
            if t is None:
                continue
            if t.device != p.device:
                raise ValueError(f"Int4Weight: {name} is on {t.device}, packed on {p.device}")
            if not t.is_contiguous():
                raise ValueError(f"Int4Weight: {name} must be contiguous, got strides {t.stride()}")


def _describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"{tuple(t.shape)} {t.dtype}"
    return type(t).__name__


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """``codes [N, K]`` (integers in [0, 15], any integer dtype, K even) -> ``[N, K // 2]`` uint8, column 2j
    in the low nibble of byte j."""
    if codes.dim() != 2 or codes.shape[1] % 2 or codes.dtype.is_floating_point:
        raise ValueError(f"pack_int4: codes must be a 2-D integer tensor with an even number of columns, got "
                         f"{_describe(codes)}")
    c = codes.to(torch.int32)
    if c.numel() and (c.min() < 0 or c.max() > 15):
        raise ValueError("pack_int4: codes must lie in [0, 15]")
    return (c[:, 0::2] | (c[:, 1::2] << 4)).to(torch.uint8).contiguous()


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """``packed [N, K // 2]`` uint8 -> codes ``[N, K]`` uint8 (the inverse of :func:`pack_int4`)."""
    if packed.dim() != 2 or packed.dtype != torch.uint8:
        raise ValueError(f"unpack_int4: packed must be a 2-D uint8 tensor, got {_describe(packed)}")
    low, high = packed & 0xF, packed >> 4
    return torch.stack((low, high), dim=2).reshape(packed.shape[0], 2 * packed.shape[1])


def quantize_int4(w: torch.Tensor, group_size: int = 128, *, symmetric: bool = False,
                  scale_dtype: torch.dtype = torch.float16) -> Int4Weight:
    """Round-to-nearest int4 of ``w [N, K]`` (any float dtype), one scale (and zero point) per row and group of
    ``group_size`` columns. Asymmetric: each group's [min, max] (widened to hold 0) maps onto codes 0..15;
    symmetric: its largest magnitude maps to 7 (codes 1..15 used, zero point 8). ``scale_dtype``: the scales'
    storage (a group's scale is computed in fp32, rounded to it, and the codes are computed with the rounded
    scale). Non-finite weights are refused."""
    if w.dim() != 2 or not w.dtype.is_floating_point:
        raise ValueError(f"quantize_int4: w must be a 2-D float tensor, got {_describe(w)}")
    n, k = w.shape
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 2 or group_size % 2 \
            or k % group_size:
        raise ValueError(f"quantize_int4: group_size must be an even int that divides K = {k}, got {group_size!r}")
    if scale_dtype not in SCALE_DTYPES:
        raise ValueError(f"quantize_int4: scale_dtype must be one of {SCALE_DTYPES}, got {scale_dtype}")
    wf = w.float().reshape(n, k // group_size, group_size)
    if not torch.isfinite(wf).all():
        raise ValueError("quantize_int4: the weight holds non-finite values")
    tiny = torch.finfo(scale_dtype).tiny
    if symmetric:
        scale = wf.abs().amax(dim=2) / 7.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale)).clamp_min(tiny).to(scale_dtype)
        s = scale.float()[..., None]
        codes = torch.clamp(torch.round(wf / s) + SYMMETRIC_ZERO, 0, 15)
        zeros = None
    else:
        lo = wf.amin(dim=2).clamp_max(0.0)
        hi = wf.amax(dim=2).clamp_min(0.0)
        scale = (hi - lo) / 15.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale)).clamp_min(tiny).to(scale_dtype)
        s = scale.float()
        zero = torch.clamp(torch.round(-lo / s), 0, 15)
        codes = torch.clamp(torch.round(wf / s[..., None]) + zero[..., None], 0, 15)
        zeros = zero.to(torch.uint8).contiguous()
    packed = pack_int4(codes.reshape(n, k).to(torch.uint8))
    return Int4Weight(packed, scale.contiguous(), zeros, None, group_size)


def dequantize_int4_reference(w: Int4Weight, dtype: torch.dtype = torch.float32, *,
                              unpermute: bool = True) -> torch.Tensor:
    """The ``[N, K]`` weight ``(q - zero) * scale`` in fp32, rounded once to ``dtype``. ``unpermute``: columns
    in input-feature order (stored column j put at perm[j]); False: in stored order."""
    n, k = w.shape
    codes = unpack_int4(w.packed).float().reshape(n, w.num_groups, w.group_size)
    zeros = (torch.full((n, w.num_groups), float(SYMMETRIC_ZERO), device=w.device) if w.zeros is None
             else w.zeros.float())
    full = ((codes - zeros[..., None]) * w.scales.float()[..., None]).reshape(n, k)
    if unpermute and w.perm is not None:
        out = torch.empty_like(full)
        out[:, w.perm.long()] = full
        full = out
    return full.to(dtype)


def linear_int4_reference(x: torch.Tensor, w: Int4Weight, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ W^T + bias`` in fp32 from the dequantized weight, rounded once to x's dtype."""
    y = x.float() @ dequantize_int4_reference(w).t()
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)
