"""Parallel linear layers: each owns this rank's shard of one weight and copies it in from the full tensor.

Megatron-style tensor parallelism over a :class:`ParallelGroup` of ``world_size`` ranks (nano-vllm's
``layers/linear.py``: the split lives in each layer's weight loader, so loading never concatenates whole
weights). A loader takes the full checkpoint tensor, or a :class:`~tritium.models.weights.LazyTensor` of
which it reads only this rank's rows or columns:

- :class:`ColumnParallelLinear`, :class:`MergedColumnParallelLinear` (gate/up), :class:`QKVParallelLinear`:
  rank r holds rows (output features) of the weight; its output is its columns of ``y``, nothing is gathered.
- :class:`RowParallelLinear` (o, down): rank r holds columns (input features); the partial products are
  summed by one all-reduce.
- :class:`VocabParallelEmbedding`, :class:`ParallelLMHead`: rank r holds ``ceil(vocab / world_size)``
  vocabulary rows; the embedding all-reduces, the LM head all-gathers its logits.

At world size 1 every hook is the identity: a forward launches exactly the ops of ``linear(x, W, b)``
(``F.embedding(ids, W)`` for the embedding) and nothing else.

``quant="fp8"`` (the four linear kinds): the layer stores its weight as float8_e4m3fn with one fp32 scale per
row (``weight_scale``; :mod:`tritium.ops.quant`) and passes ``scale=weight_scale`` to every ``linear`` call.
A 16/32-bit checkpoint weight is quantized as it loads, each row's scale from the whole row (a row-parallel
rank reads the full rows for it), so every world size holds the same values; an fp8 checkpoint weight is
copied as stored and needs its ``weight_scale`` (per tensor or per channel) loaded too (``load_weight_scale``).

``quant="int4"`` (weight-only int4): the weight is an :class:`~tritium.ops.int4.Int4Weight` (4-bit codes, one
scale and zero point per row and group of ``group_size`` input features), passed to ``linear`` as the weight.
A 16/32-bit checkpoint weight is quantized as it loads (round to nearest, :func:`~tritium.ops.int4.quantize_int4`;
group of 128 where the input features divide by it); a GPTQ / AWQ / compressed-tensors checkpoint's weight
arrives converted (``load_int4``, :mod:`tritium.models.int4_formats`). A row-parallel rank's columns must hold
whole groups. :meth:`finish_int4` narrows the storage once every part is in (16-bit scales where every part
had them, no zero points where every one is 8).

Forward methods take a ``linear`` object (:class:`~tritium.models.linear.LinearDispatch` in the model):
``linear(x, weight, bias=None)`` = ``x @ weight^T + bias``, ``linear.gated(x, weight)`` =
``linear(silu(x[:, :I]) * x[:, I:], weight)`` for x = [gate | up] of width 2I, and ``linear.swiglu(x, weight,
bias)`` = ``silu(y[:, :I]) * y[:, I:]`` for y = ``linear(x, weight, bias)`` of width 2I.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch
import torch.nn.functional as F

from tritium.models.weights import LazyTensor, materialize
from tritium.ops.int4 import SYMMETRIC_ZERO, Int4Weight, quantize_int4
from tritium.ops.quant import FP8_DTYPE, QUANTIZATIONS, expand_scale, quantize_rows

INT4_GROUP_SIZE = 128  # input features per scale of a 16/32-bit weight quantized to int4 at load


@dataclasses.dataclass(frozen=True)
class ParallelGroup:
    """The tensor-parallel group a layer is sharded over; at world_size 1 every hook is the identity.

    - ``all_reduce(x)``: the sum of ``x`` over ranks, returned (it may be ``x`` itself, reduced in place).
    - ``all_gather(x)``: ``x [n, ...]`` of every rank concatenated in rank order -> ``[world_size * n, ...]``.
    - ``all_reduce_rms_norm(x, residual, weight, eps)`` (optional): ``h = all_reduce(x) + residual``,
      ``residual <- h`` in place, returns ``rms_norm(h) * weight``: the row-parallel layer's all-reduce
      fused with the residual add and RMSNorm that follow it (tritium's one-kernel collective). None, or a
      call that returns None (a message it leaves to ``all_reduce``): the model calls ``all_reduce`` and
      then its own norm.
    - ``linear_all_reduce_rms_norm(x, weight, residual, norm_weight, eps, gated)`` (optional): the whole
      row-parallel layer and that epilogue in one launch: ``h = all_reduce(x @ weight^T) + residual``
      (``gated``: x is [gate | up] and the product uses ``silu(gate) * up``), ``residual <- h``, returns
      ``rms_norm(h) * norm_weight``; or None where it does not take the shape (the model then runs the
      layer and ``all_reduce_rms_norm``).

    ``all_reduce`` and ``all_gather`` are required when ``world_size > 1``; none is called at
    ``world_size == 1``.
    """

    rank: int = 0
    world_size: int = 1
    all_reduce: Callable[[torch.Tensor], torch.Tensor] | None = None
    all_gather: Callable[[torch.Tensor], torch.Tensor] | None = None
    all_reduce_rms_norm: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor] | None = None
    linear_all_reduce_rms_norm: Callable[..., torch.Tensor | None] | None = None

    def __post_init__(self):
        for field in ("rank", "world_size"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"ParallelGroup: {field} must be an int, got {value!r}")
        if self.world_size < 1:
            raise ValueError(f"ParallelGroup: world_size must be >= 1, got {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"ParallelGroup: rank must be in [0, {self.world_size}) for world_size "
                             f"{self.world_size}, got {self.rank}")
        if self.world_size > 1:
            for field in ("all_reduce", "all_gather"):
                if not callable(getattr(self, field)):
                    raise ValueError(f"ParallelGroup: world_size {self.world_size} needs a callable {field}, "
                                     f"got {getattr(self, field)!r}")


SINGLE = ParallelGroup()


def shard_range(size: int, rank: int, world_size: int, *, name: str = "size") -> tuple[int, int]:
    """``[start, end)`` of rank ``rank``'s equal share of ``size`` items. ``name`` is the argument the
    error names when ``size`` does not divide by ``world_size``."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"shard_range: rank must be in [0, world_size), got rank {rank}, world_size {world_size}")
    if size % world_size:
        raise ValueError(f"{name} must be divisible by the tensor-parallel world_size {world_size}, got {size}")
    per = size // world_size
    return rank * per, (rank + 1) * per


def _positive(owner: str, **sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")


def _local_sizes(owner: str, sizes, group: ParallelGroup, label: str) -> list[int]:
    """Each size's share at one rank; the error names ``label`` (formatted with the index)."""
    _check_group(owner, group)
    _positive(owner, **{label.format(i): s for i, s in enumerate(sizes)})
    local = []
    for i, size in enumerate(sizes):
        start, end = shard_range(size, 0, group.world_size, name=f"{owner}: " + label.format(i))
        local.append(end - start)
    return local


def _check_group(owner: str, group) -> None:
    if not isinstance(group, ParallelGroup):
        raise TypeError(f"{owner}: group must be a ParallelGroup, got {type(group).__name__}")


def _nbytes(*tensors: torch.Tensor | Int4Weight | None) -> int:
    return sum(t.nbytes() if isinstance(t, Int4Weight) else t.numel() * t.element_size()
               for t in tensors if t is not None)


def _flat(*tensors: torch.Tensor | Int4Weight | None) -> list[torch.Tensor]:
    out = []
    for t in tensors:
        if isinstance(t, Int4Weight):
            out += t.tensors()
        elif t is not None:
            out.append(t)
    return out


def _same_order(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Whether two int4 input-feature permutations are the same (None: the identity)."""
    return (a is None) == (b is None) and (a is None or torch.equal(a.to(b.device), b))


def int4_group_size(owner: str, full_k: int, local_k: int, group_size: int | None) -> int:
    """The group an int4 layer stores, for ``local_k`` of its ``full_k`` input features at this rank:
    ``group_size`` (a checkpoint's; -1: one group a row), or None (quantized at load): 128, else the largest
    of 64, 32, 16 that divides ``local_k``, else one group a row of the rank's columns (the usual shapes take
    128 at every tensor-parallel size; others may quantize in smaller groups at larger sizes). ValueError
    where a checkpoint's groups do not fit the rank's columns."""
    if local_k % 2:
        raise ValueError(f"{owner}: int4 needs an even number of input features a rank, got {local_k}")
    if group_size is None:
        return next((g for g in (INT4_GROUP_SIZE, 64, 32, 16) if local_k % g == 0), local_k)
    if group_size == -1 or group_size == full_k:
        return local_k
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 2 or group_size % 2:
        raise ValueError(f"{owner}: group_size must be an even int >= 2 or -1, got {group_size!r}")
    if local_k % group_size:
        raise ValueError(f"{owner}: int4 groups of {group_size} input features do not divide this rank's "
                         f"{local_k} of {full_k} (the tensor-parallel size splits a group)")
    return group_size


def checkpoint_scale(owner: str, label: str, t, rows: int) -> torch.Tensor:
    """An FP8 checkpoint's weight scale ``t`` (one value, or one per row of the full weight) as fp32 ``[rows]``;
    TypeError / ValueError naming ``owner: label`` for anything else, or for values not finite and positive."""
    if not isinstance(t, (torch.Tensor, LazyTensor)):
        raise TypeError(f"{owner}: {label} must be a torch.Tensor or LazyTensor, got {type(t).__name__}")
    try:
        scale = expand_scale(materialize(t), rows)
    except ValueError as e:
        raise ValueError(f"{owner}: {label}: {e}") from None
    if not torch.isfinite(scale).all() or not (scale > 0).all():
        raise ValueError(f"{owner}: {label} must hold finite positive values")
    return scale


def _scale_label(label: str) -> str:
    """The scale part of a weight part: "weight" -> "weight_scale", "weight[q]" -> "weight_scale[q]"."""
    return label.replace("weight", "weight_scale", 1)


class _ShardedLayer:
    """What every layer shares: the group, loading bookkeeping and the shard copy with its shape check."""

    def __init__(self, parts: list[str], group: ParallelGroup, dtype: torch.dtype, device, name: str | None,
                 quant: str | None = None, group_size: int | None = None):
        _check_group(name or type(self).__name__, group)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(f"{type(self).__name__}: dtype must be a floating-point torch.dtype, got {dtype!r}")
        if quant is not None and quant not in QUANTIZATIONS:
            raise ValueError(f"{name or type(self).__name__}: quant must be None or one of {QUANTIZATIONS}, "
                             f"got {quant!r}")
        self.group = group
        self.dtype = dtype
        self.device = torch.device(device)
        self.name = name or type(self).__name__
        self.quant = quant
        self.group_size = group_size  # int4: a checkpoint's group (-1: one a row); None: chosen at load
        self.weight_scale: torch.Tensor | None = None
        self._parts = parts          # every part a checkpoint must provide, in order
        self._loaded: set[str] = set()
        self._stored_fp8: set[str] = set()  # weight parts copied as stored in fp8: their scales are due too
        self._int4_scale_dtypes: set[torch.dtype] = set()  # int4: the scale dtypes the parts came with
        self._int4_perm_from: str | None = None  # int4: the part whose input-feature order the weight keeps

    def missing(self) -> list[str]:
        """Names of the parts not loaded yet ("weight", "bias", "weight[q]", "weight[0]" ...; the
        "weight_scale..." of a weight loaded in fp8)."""
        due = [_scale_label(p) for p in self._parts if p in self._stored_fp8]
        return [p for p in self._parts + due if p not in self._loaded]

    @property
    def _scale_kw(self) -> dict:
        """``linear``'s keyword for this layer's weight: its row scales where it is quantized."""
        return {} if self.weight_scale is None else {"scale": self.weight_scale}

    def _empty_weight(self, rows: int, cols: int, full_cols: int | None = None) -> torch.Tensor | Int4Weight:
        """The weight's storage: the layer's dtype, fp8 with a row-scale vector beside it, or int4 (fp32 scales
        and zero points until :meth:`finish_int4`). ``full_cols``: the checkpoint's input features (a
        row-parallel rank holds ``cols`` of them)."""
        if self.quant is None:
            return self._empty(rows, cols)
        if self.quant == "int4":
            g = int4_group_size(self.name, full_cols or cols, cols, self.group_size)
            return Int4Weight(torch.zeros((rows, cols // 2), dtype=torch.uint8, device=self.device),
                              torch.ones((rows, cols // g), dtype=torch.float32, device=self.device),
                              torch.full((rows, cols // g), SYMMETRIC_ZERO, dtype=torch.uint8, device=self.device),
                              None, g)
        self.weight_scale = torch.ones(rows, dtype=torch.float32, device=self.device)
        return torch.empty((rows, cols), dtype=FP8_DTYPE, device=self.device)

    def _check_full(self, part: str, full, expected: tuple[int, ...]) -> None:
        if not isinstance(full, (torch.Tensor, LazyTensor)):
            raise TypeError(f"{self.name}: {part} must be a torch.Tensor or LazyTensor, got {type(full).__name__}")
        if not full.dtype.is_floating_point:
            raise TypeError(f"{self.name}: {part} must be a floating-point tensor, got {full.dtype}")
        if tuple(full.shape) != tuple(expected):
            raise ValueError(f"{self.name}: {part} has shape {tuple(full.shape)}, expected {tuple(expected)} "
                             f"(the full checkpoint tensor)")
        if full.dtype == FP8_DTYPE and self.quant is None:
            raise TypeError(f"{self.name}: {part} is stored in {full.dtype}, but this layer is not quantized: "
                            f"quantization='fp8' stores the decoder layers' projections in fp8 (the embedding and "
                            f"the LM head stay 16/32-bit)")
        if full.dtype == FP8_DTYPE and not part.startswith("weight"):
            raise TypeError(f"{self.name}: {part} is stored in {full.dtype}; only weights may be")

    def _load_quantized(self, part: str, full, expected: tuple[int, ...], rows: slice, cols: slice,
                        row0: int) -> None:
        """Weight part ``part`` of a quantized layer: ``full[rows, cols]`` into the weight at row ``row0``.
        Stored in fp8 already: copied as is (its scale loads separately). Otherwise quantized, each row's
        scale from the whole row ``full[rows]`` (all columns, whatever this rank holds)."""
        self._check_full(part, full, expected)
        n = rows.stop - rows.start
        if self.quant == "int4":
            if full.dtype == FP8_DTYPE:
                raise TypeError(f"{self.name}: {part} is stored in {full.dtype}; an int4 layer quantizes 16/32-bit "
                                f"weights (run an FP8 checkpoint with quantization='fp8')")
            w = full[rows, cols].to(self.device)
            self._put_int4(part, quantize_int4(w, self.weight.group_size, scale_dtype=torch.float16), row0)
            return
        with torch.no_grad():
            if full.dtype == FP8_DTYPE:
                self.weight[row0: row0 + n].copy_(full[rows, cols])
                self._stored_fp8.add(part)
            else:
                w8, scale = quantize_rows(full[rows].to(self.device))
                self.weight[row0: row0 + n].copy_(w8[:, cols])
                self.weight_scale[row0: row0 + n].copy_(scale)
                self._stored_fp8.discard(part)
                self._loaded.add(_scale_label(part))
        self._loaded.add(part)

    def _check_int4(self, part: str, t, expected: tuple[int, int]) -> None:
        """``t`` must be an :class:`Int4Weight` of the full checkpoint shape ``expected`` for an int4 layer."""
        if self.quant != "int4":
            raise ValueError(f"{self.name}: got an int4 checkpoint weight ({part}) but the layer is not int4: build "
                             f"the model with quantization='int4'")
        if not isinstance(t, Int4Weight):
            raise TypeError(f"{self.name}: {part} must be an Int4Weight, got {type(t).__name__}")
        if tuple(t.shape) != tuple(expected):
            raise ValueError(f"{self.name}: {part} has shape {tuple(t.shape)}, expected {tuple(expected)} "
                             f"(the full checkpoint tensor)")

    def _put_int4(self, part: str, w: Int4Weight, row0: int) -> None:
        """This rank's rows and columns of int4 weight part ``part`` (``w``, its group size the layer's) into
        the weight at row ``row0``. Every part must keep the same input-feature order (``perm``)."""
        store = self.weight
        n = w.shape[0]
        if w.shape[1] != store.shape[1] or w.group_size != store.group_size:
            raise ValueError(f"{self.name}: {part} has {w.shape[1]} input features in groups of {w.group_size} "
                             f"here, the layer holds {store.shape[1]} in groups of {store.group_size}")
        if self._int4_perm_from is None or self._int4_perm_from == part:
            store.perm = None if w.perm is None else w.perm.to(self.device).contiguous()
            self._int4_perm_from = part
        elif not _same_order(w.perm, store.perm):
            raise ValueError(f"{self.name}: {part} orders its input features (act-order g_idx) differently from "
                             f"{self._int4_perm_from}; parts fused into one weight must share that order")
        with torch.no_grad():
            dst = store.rows(row0, row0 + n)
            dst.packed.copy_(w.packed)
            dst.scales.copy_(w.scales)
            if w.zeros is None:
                dst.zeros.fill_(SYMMETRIC_ZERO)
            else:
                dst.zeros.copy_(w.zeros)
        self._int4_scale_dtypes.add(w.scales.dtype)
        self._loaded.add(part)

    def finish_int4(self) -> None:
        """Once every part is loaded: scales narrowed to the 16-bit dtype every part came in (exact), zero points
        dropped where all are 8 (a symmetric format: the kernels then load none). No-op for other layers."""
        w = self.weight
        if not isinstance(w, Int4Weight):
            return
        if len(self._int4_scale_dtypes) == 1 and next(iter(self._int4_scale_dtypes)) != torch.float32:
            w.scales = w.scales.to(next(iter(self._int4_scale_dtypes))).contiguous()
        if w.zeros is not None and bool((w.zeros == SYMMETRIC_ZERO).all()):
            w.zeros = None
        w.validate()

    def _load_scale(self, part: str, t, full_rows: int, rows: slice, row0: int) -> None:
        """A checkpoint's scale of an fp8 weight part (one value, or one per row of the full part):
        rows ``rows`` of it into ``weight_scale`` at ``row0``."""
        if self.quant is None or self.quant == "int4":
            raise ValueError(f"{self.name}: got a weight scale ({_scale_label(part)}) but the layer is not "
                             f"quantized to fp8: build the model with quantization='fp8'")
        scale = checkpoint_scale(self.name, _scale_label(part), t, full_rows)
        n = rows.stop - rows.start
        self.weight_scale[row0: row0 + n].copy_(scale[rows])
        self._loaded.add(_scale_label(part))

    def _empty(self, *shape: int) -> torch.Tensor:
        return torch.empty(shape, dtype=self.dtype, device=self.device)

    def _copy(self, part: str, dst: torch.Tensor, full: torch.Tensor | LazyTensor, expected: tuple[int, ...],
              src: Callable[[torch.Tensor | LazyTensor], torch.Tensor]) -> None:
        """Check ``full`` against the checkpoint shape ``expected``, then copy ``src(full)`` (this rank's
        shard: a slice ``full[a:b]`` or ``full[:, a:b]``) into ``dst`` (cast to the layer's dtype, moved to
        its device). ``full`` is the whole tensor or a :class:`~tritium.models.weights.LazyTensor`, of which
        only the shard is read."""
        self._check_full(part, full, expected)
        with torch.no_grad():
            dst.copy_(src(full))
        self._loaded.add(part)


class ColumnParallelLinear(_ShardedLayer):
    """``y = x @ W^T + b`` with W ``[output_size, input_size]`` split by rows: rank r holds output features
    ``[r * n, (r + 1) * n)``, n = output_size / world_size.

    ``weight``: ``[n, input_size]``; ``bias``: ``[n]`` or None. ``forward(x [T, input_size])`` -> this rank's
    columns of y ``[T, n]`` (not gathered).
    """

    def __init__(self, input_size: int, output_size: int, *, bias: bool = False, group: ParallelGroup = SINGLE,
                 dtype: torch.dtype, device: torch.device | str, name: str | None = None, quant: str | None = None,
                 group_size: int | None = None):
        sizes = [output_size]
        self._init(input_size, sizes, _local_sizes(name or type(self).__name__, sizes, group, "output_size"),
                   bias, group, dtype, device, name, ["weight"] + ["bias"] * bias, quant, group_size)

    def _init(self, input_size, output_sizes, local_sizes, bias, group, dtype, device, name, parts,
              quant=None, group_size=None) -> None:
        """``output_sizes``: the full parts stacked in the weight; ``local_sizes``: this rank's rows of each."""
        super().__init__(parts, group, dtype, device, name, quant, group_size)
        _positive(self.name, input_size=input_size)
        self.input_size = input_size
        self.output_sizes = list(output_sizes)
        self.output_size = sum(output_sizes)
        self.local_sizes = list(local_sizes)
        self.weight = self._empty_weight(sum(local_sizes), input_size)
        self.bias = self._empty(sum(local_sizes)) if bias else None

    def _load_part(self, kind: str, t: torch.Tensor | LazyTensor, index: int, label: str,
                   first_row: int | None = None) -> None:
        """Copy rows ``[first_row, first_row + local_sizes[index])`` of part ``index`` (full
        ``[output_sizes[index], ...]``; default first row: this rank's equal share) into its slot."""
        if kind == "bias" and self.bias is None:
            raise ValueError(f"{self.name}: was built with bias=False, cannot load a bias")
        n = self.local_sizes[index]
        start = self.group.rank * n if first_row is None else first_row
        offset = sum(self.local_sizes[:index])
        full = self.output_sizes[index]
        if kind == "weight_scale":
            self._load_scale(label, t, full, slice(start, start + n), offset)
            return
        if kind == "int4":
            self._check_int4(label, t, (full, self.input_size))
            self._put_int4(label, t.rows(start, start + n), offset)
            return
        expected = (full, self.input_size) if kind == "weight" else (full,)
        if kind == "weight" and self.quant is not None:
            self._load_quantized(label, t, expected, slice(start, start + n), slice(None), offset)
            return
        dst = (self.weight if kind == "weight" else self.bias)[offset: offset + n]
        self._copy(label, dst, t, expected, lambda full: full[start: start + n])

    def load_weight(self, t: torch.Tensor | LazyTensor) -> None:
        """t: the full weight ``[output_size, input_size]`` (any float dtype, any device)."""
        self._load_part("weight", t, 0, "weight")

    def load_bias(self, t: torch.Tensor | LazyTensor) -> None:
        """t: the full bias ``[output_size]``."""
        self._load_part("bias", t, 0, "bias")

    def load_weight_scale(self, t: torch.Tensor | LazyTensor) -> None:
        """t: the scale of an fp8 checkpoint weight (one value, or one per output row); quantized layers only."""
        self._load_part("weight_scale", t, 0, "weight")

    def load_int4(self, t: Int4Weight) -> None:
        """t: the full weight of an int4 checkpoint, converted (:mod:`tritium.models.int4_formats`)."""
        self._load_part("int4", t, 0, "weight")

    def forward(self, x: torch.Tensor, linear) -> torch.Tensor:
        """x ``[T, input_size]`` -> ``[T, output_size / world_size]``: exactly ``linear(x, weight, bias)``."""
        return linear(x, self.weight, self.bias, **self._scale_kw)

    def forward_normed(self, h: torch.Tensor, norm_weight: torch.Tensor | None, eps: float, linear) -> torch.Tensor:
        """``forward(rms_norm(h, norm_weight))`` as one GEMV (``linear.normed``: the normed row never
        rounded; ``norm_weight`` None: folded into this layer's weight); h is replicated, so this holds at
        any world size. Only where ``linear.gemv_runs``."""
        return linear.normed(h, norm_weight, eps, self.weight, self.bias, **self._scale_kw)

    def weight_bytes(self) -> int:
        """Bytes of weight this rank reads per forward."""
        return _nbytes(self.weight, self.weight_scale, self.bias)

    def weights(self) -> list[torch.Tensor]:
        """The tensors this layer holds."""
        return _flat(self.weight, self.weight_scale, self.bias)


class MergedColumnParallelLinear(ColumnParallelLinear):
    """Several column-parallel weights stacked into one (gate/up: ``output_sizes = [I, I]``).

    The local weight is the concatenation of each part's rank shard: ``[sum(output_sizes) / world_size,
    input_size]``; for gate/up that is ``[gate_shard | up_shard]`` of the output, which is what
    :meth:`RowParallelLinear.forward` takes with ``gated=True``. Each output size must divide by world_size.
    """

    def __init__(self, input_size: int, output_sizes: list[int], *, bias: bool = False,
                 group: ParallelGroup = SINGLE, dtype: torch.dtype, device: torch.device | str,
                 name: str | None = None, quant: str | None = None, group_size: int | None = None):
        parts = [f"weight[{i}]" for i in range(len(output_sizes))]
        parts += [f"bias[{i}]" for i in range(len(output_sizes))] if bias else []
        owner = name or type(self).__name__
        if not output_sizes:
            raise ValueError(f"{owner}: output_sizes must not be empty")
        self._init(input_size, list(output_sizes), _local_sizes(owner, output_sizes, group, "output_sizes[{}]"),
                   bias, group, dtype, device, name, parts, quant, group_size)

    def _part(self, part: int) -> int:
        if not isinstance(part, int) or isinstance(part, bool) or not 0 <= part < len(self.output_sizes):
            raise ValueError(f"{self.name}: part must be an int in [0, {len(self.output_sizes)}), got {part!r}")
        return part

    def load_weight(self, t: torch.Tensor | LazyTensor, part: int) -> None:
        """t: part ``part``'s full weight ``[output_sizes[part], input_size]`` (0: gate, 1: up)."""
        self._load_part("weight", t, self._part(part), f"weight[{part}]")

    def load_bias(self, t: torch.Tensor | LazyTensor, part: int) -> None:
        """t: part ``part``'s full bias ``[output_sizes[part]]``."""
        self._load_part("bias", t, self._part(part), f"bias[{part}]")

    def load_weight_scale(self, t: torch.Tensor | LazyTensor, part: int) -> None:
        """t: the scale of part ``part``'s fp8 checkpoint weight (one value, or one per row of the part)."""
        self._load_part("weight_scale", t, self._part(part), f"weight[{part}]")

    def load_int4(self, t: Int4Weight, part: int) -> None:
        """t: part ``part``'s full weight from an int4 checkpoint, converted."""
        self._load_part("int4", t, self._part(part), f"weight[{part}]")

    def forward_swiglu(self, x: torch.Tensor, linear, *, addend: torch.Tensor | None = None) -> torch.Tensor:
        """gate/up: x ``[T, input_size]`` -> ``silu(gate) * up`` of this rank's shard ``[T, I / world_size]``
        (``linear.swiglu``: one GEMV with the SiLU-and-mul in its epilogue where the GEMV runs, else the
        product then SiLU-and-mul), what :meth:`RowParallelLinear.forward` takes without ``gated``. ``addend``
        ``[T, 2I]``: added to the product before the SiLU-and-mul (a LoRA update)."""
        if len(self.local_sizes) != 2 or self.local_sizes[0] != self.local_sizes[1]:
            raise ValueError(f"{self.name}: forward_swiglu needs two equal parts (gate, up), got output_sizes "
                             f"{self.output_sizes}")
        return linear.swiglu(x, self.weight, self.bias, addend=addend, **self._scale_kw)


class QKVParallelLinear(ColumnParallelLinear):
    """The fused Q/K/V projection, ``[(num_heads + 2 num_kv_heads) head_dim, hidden_size]`` in full,
    sharded by heads.

    Rank r holds query heads ``[r * h, (r + 1) * h)``, h = num_heads / world_size. KV heads are sharded
    the same way when ``num_kv_heads % world_size == 0``; when ``world_size % num_kv_heads == 0`` (more
    ranks than KV heads, e.g. MQA) each rank holds one KV head, ``r // (world_size / num_kv_heads)``, the
    one its query heads attend with. ``num_heads``/``num_kv_heads`` are this rank's counts, ``q_size`` =
    ``num_heads * head_dim`` and ``kv_size`` = ``num_kv_heads * head_dim`` its widths; ``forward`` gives
    ``[T, q_size + 2 kv_size]`` = [q | k | v] of the local heads.
    """

    def __init__(self, hidden_size: int, head_dim: int, num_heads: int, num_kv_heads: int, *, bias: bool = False,
                 group: ParallelGroup = SINGLE, dtype: torch.dtype, device: torch.device | str,
                 name: str | None = None, quant: str | None = None, group_size: int | None = None):
        owner = name or type(self).__name__
        _check_group(owner, group)
        _positive(owner, hidden_size=hidden_size, head_dim=head_dim, num_heads=num_heads, num_kv_heads=num_kv_heads)
        ws = group.world_size
        if num_heads % num_kv_heads:
            raise ValueError(f"{owner}: num_heads must be a multiple of num_kv_heads, got num_heads {num_heads}, "
                             f"num_kv_heads {num_kv_heads}")
        if num_heads % ws:
            raise ValueError(f"{owner}: num_heads must be divisible by the tensor-parallel world_size {ws}, "
                             f"got {num_heads}")
        if num_kv_heads % ws == 0:
            local_kv, self.kv_replicas = num_kv_heads // ws, 1
            self.kv_head_start = group.rank * local_kv
        elif ws % num_kv_heads == 0:
            local_kv, self.kv_replicas = 1, ws // num_kv_heads
            self.kv_head_start = group.rank // self.kv_replicas
        else:
            raise ValueError(f"{owner}: num_kv_heads must divide or be divisible by the tensor-parallel "
                             f"world_size {ws}, got {num_kv_heads}")
        self.total_num_heads = num_heads
        self.total_num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.num_heads = num_heads // ws
        self.num_kv_heads = local_kv
        self.q_size = self.num_heads * head_dim
        self.kv_size = self.num_kv_heads * head_dim
        parts = ["weight[q]", "weight[k]", "weight[v]"] + (["bias[q]", "bias[k]", "bias[v]"] if bias else [])
        self._init(hidden_size, [num_heads * head_dim, num_kv_heads * head_dim, num_kv_heads * head_dim],
                   [self.q_size, self.kv_size, self.kv_size], bias, group, dtype, device, name, parts, quant,
                   group_size)

    def _load(self, kind: str, t: torch.Tensor | LazyTensor, part: str) -> None:
        if part == "q":
            index, first_row = 0, self.group.rank * self.q_size
        elif part in ("k", "v"):
            index, first_row = (1 if part == "k" else 2), self.kv_head_start * self.head_dim
        else:
            raise ValueError(f"{self.name}: part must be 'q', 'k' or 'v', got {part!r}")
        self._load_part(kind, t, index, f"{'weight' if kind in ('weight_scale', 'int4') else kind}[{part}]", first_row)

    def forward_rope_kv(self, x: torch.Tensor, linear, positions: torch.Tensor, cos_sin: torch.Tensor,
                        k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor,
                        kv_scale: torch.Tensor | None = None, addend: torch.Tensor | None = None) -> torch.Tensor:
        """``forward(x)`` with rope applied to its q and k heads and k, v written into the cache slots (one
        GEMV, ``linear.qkv_rope``; ``kv_scale``: a float8 cache's scales; ``addend`` ``[T, q_size + 2 kv_size]``:
        added to the product before rope, a LoRA update); only where ``linear.gemv_runs``."""
        return linear.qkv_rope(x, self.weight, self.bias, positions, cos_sin, k_cache, v_cache, slot_mapping,
                               num_q_heads=self.num_heads, num_kv_heads=self.num_kv_heads, kv_scale=kv_scale,
                               addend=addend, **self._scale_kw)

    def load_weight(self, t: torch.Tensor | LazyTensor, part: str) -> None:
        """t: the full ``q_proj`` ``[num_heads * head_dim, hidden]`` (part "q") or ``k_proj``/``v_proj``
        ``[num_kv_heads * head_dim, hidden]`` (part "k"/"v") weight, with the total head counts."""
        self._load("weight", t, part)

    def load_bias(self, t: torch.Tensor | LazyTensor, part: str) -> None:
        """t: the full bias of part "q", "k" or "v"."""
        self._load("bias", t, part)

    def load_weight_scale(self, t: torch.Tensor | LazyTensor, part: str) -> None:
        """t: the scale of part "q", "k" or "v"'s fp8 checkpoint weight (one value, or one per row)."""
        self._load("weight_scale", t, part)

    def load_int4(self, t: Int4Weight, part: str) -> None:
        """t: part "q", "k" or "v"'s full weight from an int4 checkpoint, converted."""
        self._load("int4", t, part)


class RowParallelLinear(_ShardedLayer):
    """``y = x @ W^T + b`` with W ``[output_size, input_size]`` split by columns: rank r holds input features
    ``[r * k, (r + 1) * k)``, k = input_size / world_size, and computes a partial sum of y; one all-reduce
    sums them.

    ``weight``: ``[output_size, k]``; ``bias``: ``[output_size]`` (every rank holds it, rank 0 adds it).
    """

    def __init__(self, input_size: int, output_size: int, *, bias: bool = False, group: ParallelGroup = SINGLE,
                 dtype: torch.dtype, device: torch.device | str, name: str | None = None, quant: str | None = None,
                 group_size: int | None = None):
        super().__init__(["weight"] + ["bias"] * bias, group, dtype, device, name, quant, group_size)
        _positive(self.name, input_size=input_size, output_size=output_size)
        self.input_size = input_size
        self.output_size = output_size
        self._cols = shard_range(input_size, group.rank, group.world_size, name=f"{self.name}: input_size")
        self.weight = self._empty_weight(output_size, self._cols[1] - self._cols[0], input_size)
        self.bias = self._empty(output_size) if bias else None
        self._bias_here = self.bias if group.rank == 0 else None  # added once: on rank 0, before the sum

    def load_weight(self, t: torch.Tensor | LazyTensor) -> None:
        """t: the full weight ``[output_size, input_size]``; this rank copies its columns."""
        start, end = self._cols
        expected = (self.output_size, self.input_size)
        if self.quant is not None:
            self._load_quantized("weight", t, expected, slice(0, self.output_size), slice(start, end), 0)
            return
        self._copy("weight", self.weight, t, expected, lambda full: full[:, start:end])

    def load_weight_scale(self, t: torch.Tensor | LazyTensor) -> None:
        """t: the scale of an fp8 checkpoint weight (one value, or one per output row; every rank holds all)."""
        self._load_scale("weight", t, self.output_size, slice(0, self.output_size), 0)

    def load_int4(self, t: Int4Weight) -> None:
        """t: the full weight of an int4 checkpoint, converted; this rank copies its columns (whole groups;
        a weight whose input features are permuted, GPTQ act-order, only at world size 1)."""
        self._check_int4("weight", t, (self.output_size, self.input_size))
        try:
            local = t.columns(*self._cols)
        except ValueError as e:
            raise ValueError(f"{self.name}: at tensor-parallel size {self.group.world_size}: {e}") from None
        self._put_int4("weight", local, 0)

    def load_bias(self, t: torch.Tensor | LazyTensor) -> None:
        """t: the full bias ``[output_size]`` (held whole by every rank)."""
        if self.bias is None:
            raise ValueError(f"{self.name}: was built with bias=False, cannot load a bias")
        self._copy("bias", self.bias, t, (self.output_size,), lambda full: full[:])

    def forward(self, x: torch.Tensor, linear, *, gated: bool = False, reduce: bool = True) -> torch.Tensor:
        """x ``[T, k]`` (``[T, 2k]`` = [gate_shard | up_shard] when ``gated``) -> y ``[T, output_size]``.

        ``gated``: ``linear.gated(x, weight)``, i.e. SiLU-and-mul of the column-parallel gate/up output
        first. ``reduce``: all-reduce over the group (world_size > 1); False returns this rank's partial
        sum (bias included on rank 0 only) so that the caller can fuse the all-reduce with what follows.
        At world size 1 this is exactly ``linear(x, weight, bias)`` (or ``linear.gated(x, weight)``).
        """
        bias = self._bias_here
        if gated:
            y = linear.gated(x, self.weight, **self._scale_kw)
            if bias is not None:
                y = y + bias  # linear.gated takes no bias; Llama-family MLPs have none
        else:
            y = linear(x, self.weight, bias, **self._scale_kw)
        if reduce and self.group.world_size > 1:
            y = self.group.all_reduce(y)
        return y

    def forward_residual(self, x: torch.Tensor, residual: torch.Tensor, linear, *, gated: bool = False) -> torch.Tensor:
        """``residual += forward(x)`` in place as one GEMV (``linear.add_into``), at world size 1 (a partial
        sum needs its all-reduce before the add). Only where ``linear.gemv_runs``."""
        if self.group.world_size != 1:
            raise ValueError(f"{self.name}: forward_residual needs world size 1 (got {self.group.world_size}): "
                             "the partial sums must be all-reduced before the residual add")
        return linear.add_into(x, self.weight, residual, self._bias_here, gated=gated, **self._scale_kw)

    def forward_add_norm(self, x: torch.Tensor, residual: torch.Tensor, norm_weight: torch.Tensor, eps: float, *,
                         gated: bool = False) -> torch.Tensor | None:
        """The layer, its all-reduce and the next residual add + RMSNorm in one launch
        (``ParallelGroup.linear_all_reduce_rms_norm``): ``residual`` updated in place, the normalised rows
        returned; None where the group has no such launch for these inputs (or the layer has a bias)."""
        fused = self.group.linear_all_reduce_rms_norm
        if fused is None or self.bias is not None or self.group.world_size == 1 or self.quant is not None:
            return None
        return fused(x, self.weight, residual, norm_weight, eps, gated)

    def weight_bytes(self) -> int:
        """Bytes of weight this rank reads per forward (the bias only on rank 0)."""
        return _nbytes(self.weight, self.weight_scale, self._bias_here)

    def weights(self) -> list[torch.Tensor]:
        """The tensors this layer holds."""
        return _flat(self.weight, self.weight_scale, self.bias)


class _VocabParallel(_ShardedLayer):
    """A ``[num_embeddings, embedding_dim]`` table split by vocabulary rows: rank r holds rows
    ``[r * per, (r + 1) * per)``, per = ceil(num_embeddings / world_size); rows past the vocabulary (on the
    last ranks) are zero. ``weight``: ``[per, embedding_dim]``."""

    def __init__(self, num_embeddings: int, embedding_dim: int, group: ParallelGroup, dtype, device,
                 name: str | None, allocate: bool = True):
        super().__init__(["weight"], group, dtype, device, name)
        _positive(self.name, num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.per_rank = -(-num_embeddings // group.world_size)
        self.vocab_start = group.rank * self.per_rank
        self.vocab_end = min(self.vocab_start + self.per_rank, num_embeddings)  # may equal vocab_start
        self.weight = self._empty(self.per_rank, embedding_dim) if allocate else None
        if self.weight is not None:
            self.weight[self.vocab_end - self.vocab_start:].zero_()

    def load_weight(self, t: torch.Tensor | LazyTensor) -> None:
        """t: the full table ``[num_embeddings, embedding_dim]``; this rank copies its rows."""
        start, end = self.vocab_start, self.vocab_end
        self._copy("weight", self.weight[: end - start], t, (self.num_embeddings, self.embedding_dim),
                   lambda full: full[start:end])

    def weights(self) -> list[torch.Tensor]:
        """The tensors this layer holds."""
        return [self.weight]


class VocabParallelEmbedding(_VocabParallel):
    """Token embedding, vocabulary-parallel. ``forward(ids [T])`` -> ``[T, embedding_dim]``."""

    def __init__(self, num_embeddings: int, embedding_dim: int, *, group: ParallelGroup = SINGLE,
                 dtype: torch.dtype, device: torch.device | str, name: str | None = None):
        super().__init__(num_embeddings, embedding_dim, group, dtype, device, name)

    def forward(self, ids: torch.Tensor, *, reduce: bool = True) -> torch.Tensor:
        """ids ``[T]`` (int) -> ``[T, embedding_dim]``. At world size 1 exactly ``F.embedding(ids, weight)``.
        At world size > 1 each rank looks up the ids in its shard, zeros for the others (a mask, no host
        sync: CUDA-graph safe), then the all-reduce (``reduce=False``: this rank's part; the sum over ranks
        is the embedding). Ids outside ``[0, num_embeddings)`` give zeros there instead of an error."""
        if self.group.world_size == 1:
            return F.embedding(ids, self.weight)
        local = ids - self.vocab_start
        outside = (local < 0) | (local >= self.vocab_end - self.vocab_start)   # [T]
        y = F.embedding(local.masked_fill(outside, 0), self.weight)             # [T, D]
        y.masked_fill_(outside.unsqueeze(-1), 0)
        return self.group.all_reduce(y) if reduce else y

    def weight_bytes(self) -> int:
        """0: a lookup reads T rows of the table, not the table (negligible next to the projections)."""
        return 0


class ParallelLMHead(_VocabParallel):
    """Logits ``hidden @ W^T`` with W ``[num_embeddings, embedding_dim]``, vocabulary-parallel like
    :class:`VocabParallelEmbedding` (and tied to it by :meth:`tie` or ``tied_to=``: then it holds no
    weight of its own and loads nothing)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, *, group: ParallelGroup = SINGLE,
                 dtype: torch.dtype, device: torch.device | str, name: str | None = None,
                 tied_to: VocabParallelEmbedding | None = None):
        super().__init__(num_embeddings, embedding_dim, group, dtype, device, name, allocate=tied_to is None)
        self.tied = False
        if tied_to is not None:
            self.tie(tied_to)

    def tie(self, embedding: VocabParallelEmbedding) -> None:
        """Share ``embedding``'s weight tensor (tied word embeddings); the one allocated here is dropped.
        ``missing()`` is then empty: the embedding reports its own weight."""
        if not isinstance(embedding, VocabParallelEmbedding):
            raise TypeError(f"{self.name}: tie needs a VocabParallelEmbedding, got {type(embedding).__name__}")
        mine = (self.num_embeddings, self.embedding_dim, self.group.rank, self.group.world_size, self.dtype)
        theirs = (embedding.num_embeddings, embedding.embedding_dim, embedding.group.rank,
                  embedding.group.world_size, embedding.dtype)
        if mine != theirs:
            raise ValueError(f"{self.name}: cannot tie to {embedding.name}: (num_embeddings, embedding_dim, rank, "
                             f"world_size, dtype) are {mine} here, {theirs} there")
        self.weight = embedding.weight
        self.tied = True
        self._loaded.add("weight")

    def load_weight(self, t: torch.Tensor | LazyTensor) -> None:
        """t: the full ``lm_head.weight`` ``[num_embeddings, embedding_dim]``; this rank copies its rows."""
        if self.tied:
            raise ValueError(f"{self.name}: is tied to the embedding; load the embedding's weight instead")
        super().load_weight(t)

    def forward(self, hidden: torch.Tensor, linear, *, gather: bool = True) -> torch.Tensor:
        """hidden ``[S, embedding_dim]`` -> fp32 logits ``[S, num_embeddings]``; at world size 1 exactly
        ``linear(hidden, weight).float()``. At world size > 1: this rank's logits ``[S, per]``, all-gathered
        and reordered to ``[S, vocab]`` with the padding columns dropped. ``gather=False`` returns the local
        logits ``[S, per]`` in the linear's dtype (padding columns are zero)."""
        logits = linear(hidden, self.weight)
        if not gather:
            return logits
        ws = self.group.world_size
        if ws > 1:
            S = logits.shape[0]
            gathered = self.group.all_gather(logits)                                       # [ws * S, per]
            logits = gathered.view(ws, S, self.per_rank).transpose(0, 1).reshape(S, ws * self.per_rank)
            return logits[:, : self.num_embeddings].float().contiguous()
        return logits.float()

    def weight_bytes(self) -> int:
        """Bytes of weight this rank reads per forward (tied or not)."""
        return _nbytes(self.weight)
