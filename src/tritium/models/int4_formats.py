"""Readers of the three common int4 weight-only (W4A16) checkpoint layouts into tritium's
:class:`~tritium.ops.int4.Int4Weight`, and the parser of the ``quantization_config`` that names them.

``W [N, K]`` is a Linear's weight (N output features, K input features); ``G`` the group size (``-1`` in a
config: one group for all of K). Each format dequantizes as ``W[n, k] = (q - zero) * scale``:

- GPTQ (AutoGPTQ, optimum, GPTQModel; :func:`from_gptq`): ``qweight [K/8, N]`` int32, nibble ``i`` (bits
  4i..4i+3) of ``qweight[r, n]`` is the code of ``W[n, 8r + i]``; ``qzeros [K/G, N/8]`` int32, nibble ``i``
  of ``qzeros[g, c]`` is the zero of output ``8c + i`` in group ``g``, stored as ``(zero - 1) & 0xF`` in the
  original ("gptq", v1) checkpoint format and as the zero in "gptq_v2"; ``scales [K/G, N]``; optional
  ``g_idx [K]``: the group of each input feature (``k // G`` unless quantized in activation order,
  ``desc_act``, where each group still has G members).
- AWQ "gemm" (AutoAWQ; :func:`from_awq`): ``qweight [K, N/8]`` and ``qzeros [K/G, N/8]`` int32 packed along N
  in the interleaved order :data:`AWQ_ORDER` (nibble ``i`` of word ``c`` holds output ``8c + AWQ_ORDER[i]``),
  the zero itself; ``scales [K/G, N]``; group ``k // G``.
- compressed-tensors ``pack-quantized`` (llm-compressor, symmetric; :func:`from_compressed`):
  ``weight_packed [N, ceil(K/8)]`` int32, nibble ``i`` of ``weight_packed[n, c]`` holds column ``8c + i`` as
  the signed code + 8 (so tritium's codes with zero point 8, ``zeros`` None); ``weight_scale [N, K/G]``
  (``[N, 1]`` for the "channel" strategy); optional ``weight_shape`` = (N, K) and ``weight_g_idx [K]``
  (activation order, read as GPTQ's ``g_idx``; all -1: column order).

A ``g_idx`` other than ``k // G`` becomes tritium's ``perm``: the stable argsort of ``g_idx``, so stored
column ``j`` is input feature ``perm[j]`` and stored group ``g`` is columns ``[gG, (g+1)G)``, the features
whose ``g_idx`` is ``g``. ``zeros`` is None when every zero point is 8 (GPTQ ``sym=True``). The readers take
tensors on any device and return them on ``qweight``'s (``weight_packed``'s); shapes are checked against each
other with a ValueError naming the tensor. :mod:`tritium.testing.int4_checkpoints` writes these layouts (for tests).
"""

from __future__ import annotations

import dataclasses

import torch

from tritium.ops.int4 import SCALE_DTYPES, SYMMETRIC_ZERO, Int4Weight, pack_int4

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)          # nibble i of an AWQ word holds output 8c + AWQ_ORDER[i]
AWQ_REVERSE_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)  # output 8c + j sits in nibble AWQ_REVERSE_ORDER[j]
FORMATS = ("gptq", "awq", "compressed")
GPTQ_ZERO_OFFSETS = {"gptq": 1, "gptq_v2": 0}  # checkpoint_format -> what the stored zero is short of

# per format: (tensor suffix, required)
_TENSORS = {
    "gptq": (("qweight", True), ("qzeros", True), ("scales", True), ("g_idx", False)),
    "awq": (("qweight", True), ("qzeros", True), ("scales", True)),
    "compressed": (("weight_packed", True), ("weight_scale", True), ("weight_shape", False),
                   ("weight_g_idx", False)),
}
_SUPPORTED = ("tritium reads 4-bit GPTQ (checkpoint_format gptq or gptq_v2), AWQ version gemm with zero_point, "
              "and compressed-tensors pack-quantized symmetric int4 weights with unquantized activations")


@dataclasses.dataclass(frozen=True)
class Int4Scheme:
    """What a ``quantization_config`` says about an int4 checkpoint.

    - ``format``: "gptq", "awq" or "compressed" (compressed-tensors pack-quantized).
    - ``group_size``: input features per scale; -1: one group for all of K (compressed "channel" strategy).
      None: a GPTQ or AWQ config that states none (:func:`group_size_from_shapes` reads it from the tensors'
      shapes).
    - ``zero_offset``: what a GPTQ stored zero is short of (1 for checkpoint_format "gptq", 0 for "gptq_v2");
      0 for the other formats.
    - ``desc_act``: quantized in activation order (GPTQ ``desc_act``, compressed ``actorder`` "group"): the
      tensors may carry a ``g_idx`` that is not ``k // G``.
    - ``sym``: symmetric (every zero point 8): GPTQ's ``sym``; AWQ False; compressed True.
    - ``ignore``: module names (or compressed-tensors ``re:`` patterns) left unquantized, as the config lists
      them (compressed ``ignore``, AWQ ``modules_to_not_convert``; GPTQ lists none).
    """

    format: str
    group_size: int | None
    zero_offset: int
    desc_act: bool
    sym: bool
    ignore: tuple[str, ...] = ()


def tensor_names(scheme: Int4Scheme, *, optional: bool = True) -> tuple[str, ...]:
    """The suffixes of a quantized Linear's tensors in ``scheme``'s format (``<prefix>.qweight`` ...), in the
    order the reader takes them; ``optional=False``: only those every checkpoint has (GPTQ's ``g_idx``,
    compressed ``weight_shape`` and ``weight_g_idx`` may be absent)."""
    return tuple(name for name, required in _TENSORS[scheme.format] if optional or required)


def int4_scheme(quantization_config: dict | None) -> Int4Scheme | None:
    """The int4 scheme a Hugging Face ``config.json``'s ``quantization_config`` describes; None where it is
    not a GPTQ, AWQ or integer compressed-tensors config (no quantization, FP8 ...: other parsers' business).
    ValueError naming the field for an integer weight-only config tritium cannot read: GPTQ or AWQ with bits
    other than 4, AWQ other than version "gemm" with zero points, compressed-tensors integer weights other
    than symmetric 4-bit "pack-quantized" with strategy "group" or "channel", or with quantized activations
    (W4A8, W8A8), a group_size that is not -1 or a positive even integer."""
    q = quantization_config
    if not q or not isinstance(q, dict):
        return None
    method = str(q.get("quant_method", "")).lower()
    if method == "gptq":
        return _gptq_scheme(q)
    if method == "awq":
        return _awq_scheme(q)
    if method == "compressed-tensors":
        return _compressed_scheme(q)
    return None


def _gptq_scheme(q: dict) -> Int4Scheme:
    bits = q.get("bits")
    if bits != 4:
        raise ValueError(f"quantization_config: GPTQ with bits={bits!r} is not supported; {_SUPPORTED}")
    fmt = q.get("checkpoint_format") or q.get("format") or "gptq"
    if str(fmt).lower() not in GPTQ_ZERO_OFFSETS or q.get("is_marlin_format"):
        raise ValueError(f"quantization_config: GPTQ checkpoint_format {fmt!r}"
                         f"{' (is_marlin_format)' if q.get('is_marlin_format') else ''} is not supported; "
                         f"{_SUPPORTED}")
    if q.get("dynamic"):
        raise ValueError(f"quantization_config: GPTQ 'dynamic' per-module overrides {q['dynamic']!r} are not "
                         f"supported; {_SUPPORTED}")
    return Int4Scheme("gptq", _stated_group_size(q.get("group_size"), "GPTQ"),
                      GPTQ_ZERO_OFFSETS[str(fmt).lower()], _config_flag(q, "desc_act", False, "GPTQ"),
                      _config_flag(q, "sym", True, "GPTQ"))


def _awq_scheme(q: dict) -> Int4Scheme:
    bits = q.get("bits", q.get("w_bit"))
    if bits != 4:
        raise ValueError(f"quantization_config: AWQ with bits={bits!r} is not supported; {_SUPPORTED}")
    version = q.get("version", "gemm")
    if str(version).lower() != "gemm":
        raise ValueError(f"quantization_config: AWQ version {version!r} is not supported (only 'gemm'); "
                         f"{_SUPPORTED}")
    if q.get("zero_point", True) is not True:
        raise ValueError(f"quantization_config: AWQ with zero_point={q.get('zero_point')!r} is not supported; "
                         f"{_SUPPORTED}")
    return Int4Scheme("awq", _stated_group_size(q.get("group_size", q.get("q_group_size")), "AWQ"), 0, False, False,
                      tuple(q.get("modules_to_not_convert") or ()))


def _compressed_scheme(q: dict) -> Int4Scheme | None:
    groups = q.get("config_groups") or {}
    weights = {name: (group or {}).get("weights") or {} for name, group in groups.items()}
    integer = {name for name, w in weights.items() if w.get("type") == "int"}
    if not integer:
        return None  # FP8 or nothing quantized: not int4
    if integer != set(weights):
        raise ValueError(f"quantization_config: compressed-tensors mixes integer weight groups {sorted(integer)} "
                         f"with other groups {sorted(set(weights) - integer)}; {_SUPPORTED}")
    sparsity = q.get("sparsity_config") or {}
    if sparsity.get("format") not in (None, "dense"):
        raise ValueError(f"quantization_config: compressed-tensors sparsity_config format "
                         f"{sparsity.get('format')!r} is not supported; {_SUPPORTED}")
    schemes = set()
    for name in sorted(weights):
        group, w = groups[name], weights[name]
        where = f"quantization_config: compressed-tensors group {name!r}"
        fmt = group.get("format") or q.get("format")
        if w.get("num_bits") != 4:
            raise ValueError(f"{where} has {w.get('num_bits')}-bit integer weights; {_SUPPORTED}")
        if w.get("symmetric") is not True:
            raise ValueError(f"{where}: asymmetric int4 weights (symmetric={w.get('symmetric')!r}) are not "
                             f"supported; {_SUPPORTED}")
        if group.get("input_activations"):
            a = group["input_activations"]
            raise ValueError(f"{where} quantizes input_activations ({a.get('type')!r}, {a.get('num_bits')} bits: "
                             f"W4A{a.get('num_bits')}); {_SUPPORTED}")
        if fmt != "pack-quantized":
            raise ValueError(f"{where}: format {fmt!r} is not supported (only 'pack-quantized'); {_SUPPORTED}")
        if w.get("dynamic"):
            raise ValueError(f"{where}: dynamic weight scales are not supported; {_SUPPORTED}")
        strategy = w.get("strategy")
        if strategy == "group":
            group_size = _config_group_size(w.get("group_size"), f"{where} weights group_size")
            if group_size == -1:
                raise ValueError(f"{where}: strategy 'group' needs a group_size, got -1")
        elif strategy == "channel":
            group_size = -1
        else:
            raise ValueError(f"{where}: weight strategy {strategy!r} is not supported (only 'group', 'channel'); "
                             f"{_SUPPORTED}")
        actorder = w.get("actorder")
        if actorder not in (None, False, True, "group", "weight", "static", "dynamic"):
            raise ValueError(f"{where}: weights actorder {actorder!r} is not supported")
        schemes.add((group_size, actorder in (True, "group", "dynamic")))
    if len(schemes) != 1:
        raise ValueError(f"quantization_config: compressed-tensors config groups disagree on (group_size, "
                         f"actorder by group): {sorted(schemes)}; tritium reads one int4 scheme per model")
    group_size, desc_act = schemes.pop()
    return Int4Scheme("compressed", group_size, 0, desc_act, True, tuple(q.get("ignore") or ()))


def _config_flag(q: dict, key: str, default: bool, method: str) -> bool:
    """``q[key]`` as a bool (``default`` where absent or null); ValueError for any other value (the string
    "false" was taken as true)."""
    value = q.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"quantization_config: {method} {key} must be true or false, got {value!r}")
    return value


def _stated_group_size(value, method: str) -> int | None:
    """A GPTQ or AWQ config's group size, or None where it states none: HF's GPTQConfig, AutoGPTQ and AutoAWQ
    default it to 128, but the tensors say what it is (tritium.models.weights.load_hf_config sets it from their
    shapes: :func:`group_size_from_shapes`)."""
    return None if value is None else _config_group_size(value, f"{method} group_size")


def _config_group_size(value, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not (value == -1 or (value >= 2 and value % 2 == 0)):
        raise ValueError(f"quantization_config: {field} must be -1 (one group per row) or a positive even "
                         f"integer, got {value!r}")
    return value


# per format that group_size_from_shapes reads: the input features a row of a Linear's qweight covers (K = its
# rows times that), and the qweight's layout (for messages), as from_gptq and from_awq read them
_QWEIGHT_LAYOUTS = {"gptq": (8, "[K/8, N]"), "awq": (1, "[K, N/8]")}


def group_size_from_shapes(fmt: str, shapes: dict[str, tuple[int, ...]], stated: int | None,
                           g_idx_groups: dict[str, int] | None = None) -> int:
    """The group size G of a GPTQ or AWQ checkpoint (``fmt`` "gptq" or "awq") from its tensors' shapes
    (``shapes``: checkpoint name -> shape of every ``*.qweight``, ``*.qzeros``, ``*.scales``, ``*.g_idx``): each
    Linear's qweight gives its K input features (GPTQ ``[K/8, N]``, AWQ ``[K, N/8]``), its ``scales [K/G, N]`` and
    ``qzeros [K/G, N/8]`` (both formats) the number of groups, which must agree and divide K; a GPTQ ``g_idx
    [K]``, where present, must have K entries and (``g_idx_groups``: name -> largest value + 1) as many groups.
    Every Linear must give the same G (a Linear of one group is G = K, which is also -1: one group a row).
    Returns ``stated`` (the config's ``group_size``) where it fits every Linear, else the G the shapes give (-1
    where every Linear has one group). ValueError naming the tensor and its shapes where ``stated`` disagrees
    with them, the shapes of a Linear disagree with each other, two Linears give different group sizes, or
    there is nothing to infer a missing group size from."""
    per_row, layout = _QWEIGHT_LAYOUTS[fmt]
    kind = fmt.upper()
    g_idx_groups = g_idx_groups or {}
    where = "quantization_config's group_size"
    answer, first = None, None  # the group sizes every Linear so far fits; the first Linear's evidence
    for name in sorted(n for n in shapes if n.endswith(".qweight")):
        prefix = name[: -len("qweight")]
        qweight = shapes[name]
        if len(qweight) != 2:
            raise ValueError(f"{kind} tensor {name!r} has shape {list(qweight)}, expected {layout} (2-D)")
        k = per_row * qweight[0]
        groups = {t: shapes[prefix + t] for t in ("scales", "qzeros") if prefix + t in shapes}
        for t, shape in groups.items():
            if len(shape) != 2 or not shape[0]:
                raise ValueError(f"{kind} tensor {prefix + t!r} has shape {list(shape)}, expected [K/G, ...] (2-D, "
                                 f"at least one group)")
        if len({shape[0] for shape in groups.values()}) > 1:
            raise ValueError(f"{kind} tensors {prefix + 'scales'!r} {list(groups['scales'])} and "
                             f"{prefix + 'qzeros'!r} {list(groups['qzeros'])} disagree on the number of groups "
                             f"(their first dimension, K/G)")
        g_idx = shapes.get(prefix + "g_idx")
        if g_idx is not None and tuple(g_idx) != (k,):
            raise ValueError(f"{kind} tensor {prefix + 'g_idx'!r} has shape {list(g_idx)}, expected [{k}]: one "
                             f"group index for each of the K = {k} input features of {name!r} {list(qweight)}")
        if not groups:
            continue  # the load names the missing tensors
        label, shape = next(iter(groups.items()))
        count = shape[0]
        if prefix + "g_idx" in g_idx_groups and g_idx_groups[prefix + "g_idx"] != count:
            raise ValueError(f"{kind} tensor {prefix + 'g_idx'!r} indexes {g_idx_groups[prefix + 'g_idx']} groups, "
                             f"{prefix + label!r} {list(shape)} holds {count}")
        if k % count:
            raise ValueError(f"{kind} tensor {prefix + label!r} has shape {list(shape)}: {count} groups do not divide "
                             f"the K = {k} input features of {name!r} {list(qweight)} evenly")
        g = k // count
        fits = {g, -1} if count == 1 else {g}
        evidence = (f"{prefix + label!r} has shape {list(shape)}: {count} group{'s' * (count > 1)} of {g} of the "
                    f"K = {k} input features of {name!r} {list(qweight)}")
        if stated is not None and stated not in fits:
            raise ValueError(f"{where} is {stated}, but {kind} tensor {evidence}")
        if answer is not None and not answer & fits:
            raise ValueError(f"{kind} tensors give different group sizes: {first}, while {evidence}")
        answer, first = fits if answer is None else answer & fits, first or evidence
    if stated is not None:
        return stated
    if answer is None:
        raise ValueError(f"{where} is not stated, and there are no {kind} tensors (*.qweight with *.scales) to "
                         f"read it from")
    g = -1 if -1 in answer else answer.pop()
    if g != -1 and (g < 2 or g % 2):
        raise ValueError(f"{kind} tensors give groups of {g} input features ({first}); tritium reads even group "
                         f"sizes only")
    return g


def from_gptq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, g_idx: torch.Tensor | None = None,
              *, group_size: int, zero_offset: int = 1) -> Int4Weight:
    """A GPTQ Linear's tensors (module docstring) -> :class:`Int4Weight`: ``qweight [K/8, N]``, ``qzeros
    [K/G, N/8]`` (integers, read as 32-bit words), ``scales [K/G, N]`` float, ``g_idx [K]`` or None.
    ``group_size``: G, or -1 for G = K. ``zero_offset``: 1 for checkpoint_format "gptq" (zero = (stored + 1)
    mod 16; AutoGPTQ's kernels add 1 without the mod, so a stored 15 is 0 here and 16 there: a zero no int4
    quantizer produces), 0 for "gptq_v2". ``zeros`` is None when every zero is 8; ``perm`` None unless g_idx
    is not k // G."""
    if zero_offset not in (0, 1):
        raise ValueError(f"from_gptq: zero_offset must be 1 (checkpoint_format 'gptq') or 0 ('gptq_v2'), "
                         f"got {zero_offset!r}")
    qw = _words(qweight, "qweight")
    k, n = 8 * qw.shape[0], qw.shape[1]
    if n % 8:
        raise ValueError(f"from_gptq: qweight [K/8, N] has N = {n} outputs, not a multiple of the 8 that qzeros "
                         f"packs per int32")
    g = _group_size(group_size, k, "from_gptq")
    groups = k // g
    qz = _words(qzeros, "qzeros", (groups, n // 8), qw.device)
    s = _scales(scales, "scales", (groups, n), qw.device).t().contiguous()   # [N, K/G]
    codes = _nibbles(qw).permute(1, 0, 2).reshape(n, k)                        # [K/8, N, 8] -> [N, K]
    zeros = (_nibbles(qz).reshape(groups, n).t() + zero_offset) & 0xF         # [N, K/G]
    perm = _perm_from_g_idx(g_idx, "g_idx", k, g, qw.device)
    if perm is not None:
        codes = codes[:, perm.long()]
    return Int4Weight(pack_int4(codes), s, _zeros_or_none(zeros), perm, g)


def from_awq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, *, group_size: int) -> Int4Weight:
    """An AWQ "gemm" Linear's tensors (module docstring) -> :class:`Int4Weight`: ``qweight [K, N/8]``,
    ``qzeros [K/G, N/8]`` (integers, read as 32-bit words, interleaved :data:`AWQ_ORDER`), ``scales [K/G, N]``.
    ``group_size``: G, or -1 for G = K."""
    qw = _words(qweight, "qweight")
    k, n = qw.shape[0], 8 * qw.shape[1]
    g = _group_size(group_size, k, "from_awq")
    groups = k // g
    qz = _words(qzeros, "qzeros", (groups, n // 8), qw.device)
    s = _scales(scales, "scales", (groups, n), qw.device).t().contiguous()   # [N, K/G]
    order = torch.tensor(AWQ_REVERSE_ORDER, device=qw.device)
    codes = _nibbles(qw)[..., order].reshape(k, n).t()                        # [K, N/8, 8] -> [N, K]
    zeros = _nibbles(qz)[..., order].reshape(groups, n).t()                   # [N, K/G]
    return Int4Weight(pack_int4(codes), s, _zeros_or_none(zeros), None, g)


def from_compressed(weight_packed: torch.Tensor, weight_scale: torch.Tensor, weight_shape: torch.Tensor | None = None,
                    weight_g_idx: torch.Tensor | None = None, *, group_size: int | None,
                    weight_zero_point: torch.Tensor | None = None) -> Int4Weight:
    """A compressed-tensors "pack-quantized" symmetric int4 Linear's tensors (module docstring) ->
    :class:`Int4Weight` with ``zeros`` None: ``weight_packed [N, ceil(K/8)]`` (integers, read as 32-bit
    words; columns past K are padding), ``weight_scale [N, K/G]`` float, ``weight_shape`` (N, K) or None (K =
    8 * weight_packed's columns), ``weight_g_idx [K]`` or None (all -1: column order). ``group_size``: G;
    None or -1 for the "channel" strategy (G = K). A ``weight_zero_point`` (an asymmetric checkpoint) is
    refused."""
    if weight_zero_point is not None:
        raise ValueError("from_compressed: asymmetric pack-quantized is not supported (the checkpoint has a "
                         "weight_zero_point)")
    wp = _words(weight_packed, "weight_packed")
    n, words = wp.shape
    k = 8 * words
    if weight_shape is not None:
        shape = weight_shape.reshape(-1).tolist() if isinstance(weight_shape, torch.Tensor) else list(weight_shape)
        if len(shape) != 2 or shape[0] != n or not 8 * words - 8 < shape[1] <= 8 * words:
            raise ValueError(f"from_compressed: weight_shape must be (N, K) = ({n}, K) with "
                             f"ceil(K / 8) = {words} (weight_packed is {tuple(wp.shape)}), got {shape}")
        k = int(shape[1])
    g = _group_size(-1 if group_size is None else group_size, k, "from_compressed")
    s = _scales(weight_scale, "weight_scale", (n, k // g), wp.device).contiguous()
    codes = _nibbles(wp).reshape(n, 8 * words)[:, :k]
    perm = None
    if weight_g_idx is not None:
        g_idx = weight_g_idx.to(wp.device)
        if not (g_idx.numel() and bool((g_idx == -1).all())):   # all -1: never set, column order
            perm = _perm_from_g_idx(g_idx, "weight_g_idx", k, g, wp.device)
    if perm is not None:
        codes = codes[:, perm.long()]
    return Int4Weight(pack_int4(codes), s, None, perm, g)


def _is_integer(t: torch.Tensor) -> bool:
    return not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)


def _words(t: torch.Tensor, name: str, shape: tuple[int, int] | None = None,
           device: torch.device | None = None) -> torch.Tensor:
    """``t`` (a 2-D integer tensor, ``shape`` if given) on ``device``, as int32 (whose nibbles :func:`_nibbles`
    reads with a masked arithmetic shift) or, from another integer dtype, as its low 32 bits in int64."""
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or not _is_integer(t) or \
            (shape is not None and tuple(t.shape) != shape):
        want = f"[{shape[0]}, {shape[1]}]" if shape is not None else "2-D"
        raise ValueError(f"{name} must be a {want} integer (int32) tensor, got {_describe(t)}")
    if t.dtype == torch.int32:
        return t.to(device)
    return t.to(device=device, dtype=torch.int64) & 0xFFFFFFFF


def _nibbles(words: torch.Tensor) -> torch.Tensor:
    """``words [..., M]`` (32-bit words, :func:`_words`) -> uint8 ``[..., M, 8]``: element ``i`` is bits
    4i..4i+3. One nibble at a time, so that no int32/int64 tensor of 8x the words' count is made (a load-time
    peak: ``[K, N]`` int64 is 470 MB for a 4096 x 14336 projection)."""
    out = torch.empty(*words.shape, 8, dtype=torch.uint8, device=words.device)
    for i in range(8):
        out[..., i] = (words >> (4 * i)) & 0xF
    return out


def _scales(t: torch.Tensor, name: str, shape: tuple[int, int], device: torch.device) -> torch.Tensor:
    if not isinstance(t, torch.Tensor) or t.dtype not in SCALE_DTYPES or tuple(t.shape) != shape:
        raise ValueError(f"{name} must be a [{shape[0]}, {shape[1]}] float16/bfloat16/float32 tensor, got "
                         f"{_describe(t)}")
    return t.to(device)


def _group_size(group_size, k: int, fn: str) -> int:
    """The group size (-1: K) checked to be even and to divide ``k``."""
    g = k if group_size == -1 else group_size
    if not isinstance(g, int) or isinstance(g, bool) or g < 2 or g % 2 or k % g:
        raise ValueError(f"{fn}: group_size must be -1 or an even int that divides K = {k}, got {group_size!r}")
    return g


def _perm_from_g_idx(g_idx: torch.Tensor | None, name: str, k: int, group_size: int,
                     device: torch.device) -> torch.Tensor | None:
    """None for a missing or column-order (``k // G``) ``g_idx``; else its stable argsort as int32, after
    checking that every group has exactly ``group_size`` members."""
    if g_idx is None:
        return None
    if not isinstance(g_idx, torch.Tensor) or not _is_integer(g_idx) or tuple(g_idx.shape) != (k,):
        raise ValueError(f"{name} must be a [{k}] integer tensor (the group of each input feature), got "
                         f"{_describe(g_idx)}")
    gi = g_idx.to(device=device, dtype=torch.int64)
    groups = k // group_size
    if torch.equal(gi, torch.arange(k, device=device) // group_size):
        return None
    if bool((gi < 0).any()) or bool((gi >= groups).any()):
        raise ValueError(f"{name}: group indices must lie in [0, {groups}), got [{int(gi.min())}, {int(gi.max())}]")
    counts = torch.bincount(gi, minlength=groups)
    if bool((counts != group_size).any()):
        bad = int(torch.nonzero(counts != group_size)[0])
        raise ValueError(f"{name}: every group must have group_size = {group_size} input features; group {bad} "
                         f"has {int(counts[bad])}")
    return torch.argsort(gi, stable=True).to(torch.int32).contiguous()


def _zeros_or_none(zeros: torch.Tensor) -> torch.Tensor | None:
    """None where every zero point is 8 (a symmetric checkpoint), else ``[N, K/G]`` uint8."""
    if bool((zeros == SYMMETRIC_ZERO).all()):
        return None
    return zeros.to(torch.uint8).contiguous()


def _describe(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"{list(t.shape)} {t.dtype}"
    return type(t).__name__
