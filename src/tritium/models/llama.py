"""Llama-family decoder (Llama 2/3, Qwen2, Qwen3, Mistral, SmolLM2; Mixtral and Qwen3-MoE, whose MLPs are sparse
mixtures of experts: :mod:`tritium.models.moe`) over a flat batch of tokens and a paged KV cache.

Tokens of all sequences in a step are concatenated: ``input_ids`` and ``positions`` are ``[T]``. The model is
built from layers (:mod:`tritium.models.layers`) that own their shard of each weight: QKV and gate/up
column-parallel, o and down row-parallel (one all-reduce each), vocabulary-parallel embedding and LM head.
At one rank every sharding hook is the identity and a decode step launches exactly the kernels of a plain
model. Q/K/V projections are one fused ``[q + 2 kv, hidden]`` weight and gate/up one ``[2 I, hidden]``.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import torch

from tritium.attention.config import invariant_config as invariant_attention_config
from tritium.models.attention import (AttentionMetadata, DistributedDecodeAttention, TorchAttention,
                                     TorchContextParallelAttention, TritonAttention)
from tritium.models.config import ModelConfig
from tritium.models.int4_formats import Int4Scheme, from_awq, from_compressed, from_gptq, tensor_names
from tritium.models.layers import (SINGLE, MergedColumnParallelLinear, ParallelGroup, ParallelLMHead,
                                   QKVParallelLinear, RowParallelLinear, VocabParallelEmbedding)
from tritium.models.linear import LinearDispatch, decode_choices, encode_choices, warm_dense_paths
from tritium.models.lora import LoRAStack
from tritium.models.moe import SparseMoeBlock
from tritium.models.weights import LazyTensor, materialize
from tritium.models.rope import rope_attention_factor, rope_cos_sin, rope_inv_freq
from tritium.ops import OP_BACKENDS, WeightPrefetcher, op_set
from tritium.ops.int4 import Int4Weight
from tritium.ops.int4_linear import int4_warm_rows
from tritium.ops.quant import FP8_MAX, QUANTIZATIONS, dequantize, quantize_rows

# A decoder layer's projections, in the order a step runs them.
LAYER_PROJECTIONS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
# Projections whose weights can be prefetched, in the order a layer reads them.
PREFETCH_POINTS = ("o_proj", "gate_up_proj", "down_proj", "qkv_proj", "lm_head")
# Measured on the H100 (bench/NOTES.md): o_proj fits L2 whole and follows ~10 us of small kernels.
DEFAULT_PREFETCH_PLAN: dict[str, int | None] = {"o_proj": None}
ATTENTION_BACKENDS = ("triton", "torch")


@dataclasses.dataclass(frozen=True)
class ModelOptions:
    """How the model runs (the engine fills it from :class:`~tritium.engine.config.EngineConfig`).

    - ``attention_backend``: "triton" (tritium's paged attention) or "torch" (SDPA over gathered pages).
    - ``op_backend``: "triton" (fused RMSNorm, rope, SiLU-and-mul kernels) or "torch" (the references).
    - ``linear_backend``: "auto" | "triton" | "torch" (:class:`~tritium.models.linear.LinearDispatch`).
    - ``pdl``: the decode chain's kernels launch by programmatic dependent launch (Hopper); False turns it
      off everywhere. ``attention_pdl``: attention too (on: 0.06 ms faster a batch-1 step on the H100, bench/NOTES.md).
    - ``attention_num_splits``: split-KV override for decode (None: ``select_attention_config``'s).
    - ``fuse_rope_kv_write``: rope and the KV-cache write as one kernel (triton ops and attention only).
    - ``fuse_norms``: in decode steps whose four projections all run the Triton GEMV (triton ops, one rank),
      the RMSNorms go into the GEMVs after them and the residual adds into the GEMVs before them
      (``LinearDispatch.normed`` / ``add_into``): two launches fewer a layer. Set at construction (with
      triton ops, a linear backend other than torch, one rank), the two norms' weights are also folded into
      the columns of the QKV and gate/up weights when the weights load (``W[:, k] * w[k]``, rounded once),
      so the GEMVs need not load them; every path then runs those norms with a unit weight. Off by default:
      on the H100 (Llama-3-8B, batch 1) the fused GEMVs cost what the norm kernels did (bench/NOTES.md).
    - ``fuse_qkv_rope``: in decode steps whose QKV projection runs the Triton GEMV (with ``fuse_rope_kv_write``
      active), rope and the KV-cache write run in that GEMV's epilogue (:mod:`tritium.ops.qkv_rope`): one
      launch fewer a layer (not in the ``fuse_norms`` chain, whose QKV GEMV holds the norm). On: 0.012-0.064 ms
      faster a batch-1 Llama-3-8B step on the H100 in the two runs of 2026-11-27, each way with configs tuned
      for it (bench/NOTES.md).
    - ``fuse_swiglu``: in steps whose gate/up projection runs the Triton GEMV, the MLP's SiLU-and-mul runs in
      that GEMV's epilogue (``LinearDispatch.swiglu``: each program pairs gate rows with their up rows) and
      the down projection is a plain product, GEMV or cuBLAS; off (or where gate/up runs on cuBLAS) the
      down GEMV takes [gate | up] and does the SiLU-and-mul while loading it (``gated``), or a SiLU-and-mul
      kernel runs before a cuBLAS one. Not in the ``fuse_norms`` chain.
    - ``fuse_act_quant``: under ``quantization="fp8-dynamic"``, the RMSNorm before a W8A8 projection
      (``ops.rms_norm(..., quantize=True)``) and the SiLU-and-mul before the down one (``LinearDispatch.gated``)
      write their rows quantized to fp8 (:class:`~tritium.ops.quant.Fp8Rows`), bit for bit what the
      projection's own quantization launch gives (which they replace). Where the norm is the tensor-parallel
      all-reduce + norm kernel, the projection quantizes as before.
    - ``batch_invariant``: every kernel gives a token's row the same bits whatever else its batch holds
      (``EngineConfig.batch_invariant``): projections through :func:`tritium.fused.matmul` under
      ``invariant_config`` (``linear_backend="invariant"``), attention under one grouped configuration for
      every call (:func:`tritium.attention.config.invariant_config`, groups sized for the model's
      ``max_position_embeddings``), per-row Triton ops. Needs triton attention and ops.
    - ``max_decode_tokens``: tokens of the largest decode batch (the attention workspace holds them).
    - ``quantization``: None, or "fp8": the layers' projection weights are stored as float8_e4m3fn with one
      fp32 scale per output row (weight-only: activations, the embedding and the LM head stay in the model
      dtype; :mod:`tritium.ops.quant`). A 16/32-bit checkpoint is quantized as it loads; an FP8 checkpoint
      (compressed-tensors, per-tensor or per-channel weight scales) is read as stored. "fp8-dynamic": the
      same weights, and each projection's input quantized per token to fp8 as it runs, the product fp8 times
      fp8 (W8A8: :func:`tritium.models.linear.quantized_linear`). Fixed at construction.
    - ``check_finite``: ``load_weights`` looks for NaN and infinite values in every floating-point tensor it
      loaded into (on their device: a min/max reduction a tensor, one host sync at the end; see
      ``LlamaModel.load_weights``) and raises ValueError naming the first checkpoint tensor, with its file,
      that holds one: such a model loaded and produced NaN logits. False skips the pass.
    - ``context_parallel``: the attention of a context-parallel engine, built by the engine
      (:class:`~tritium.models.attention.DistributedDecodeAttention` for Triton attention, its workspace
      made collectively; ``TorchContextParallelAttention`` for torch); it replaces ``attention_backend``'s.
    """

    attention_backend: str = "torch"
    op_backend: str = "torch"
    linear_backend: str = "torch"
    pdl: bool = True
    attention_pdl: bool = True
    attention_num_splits: int | None = None
    fuse_rope_kv_write: bool = True
    fuse_norms: bool = False
    fuse_qkv_rope: bool = True
    fuse_swiglu: bool = True
    fuse_act_quant: bool = True
    batch_invariant: bool = False
    max_decode_tokens: int = 1
    quantization: str | None = None
    context_parallel: DistributedDecodeAttention | TorchContextParallelAttention | None = None
    check_finite: bool = True

    def __post_init__(self):
        if not isinstance(self.check_finite, bool):
            raise TypeError(f"check_finite must be True or False, got {self.check_finite!r}")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention_backend must be one of {', '.join(ATTENTION_BACKENDS)}, "
                             f"got {self.attention_backend!r}")
        if self.op_backend not in OP_BACKENDS:
            raise ValueError(f"op_backend must be one of {', '.join(OP_BACKENDS)}, got {self.op_backend!r}")
        if self.linear_backend not in LinearDispatch.MODES:
            raise ValueError(f"linear_backend must be one of {', '.join(LinearDispatch.MODES)}, "
                             f"got {self.linear_backend!r}")
        if self.quantization is not None and self.quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be None or one of {', '.join(QUANTIZATIONS)}, "
                             f"got {self.quantization!r}")
        if self.batch_invariant and (self.attention_backend, self.op_backend, self.linear_backend,
                                     self.context_parallel) != ("triton", "triton", "invariant", None):
            raise ValueError(f"batch_invariant needs attention_backend='triton', op_backend='triton', "
                             f"linear_backend='invariant' and no context parallelism; got "
                             f"{self.attention_backend!r}, {self.op_backend!r}, {self.linear_backend!r}")


class LlamaDecoderLayer:
    """One decoder layer's weights: two RMSNorm weights (replicated), with ``qk_norm`` two more over head_dim
    (replicated: every rank's heads share them), and four parallel linears; with ``num_experts`` the MLP's two
    (gate/up, down) are None and ``moe`` holds the router and the experts."""

    def __init__(self, cfg: ModelConfig, group: ParallelGroup, dtype: torch.dtype, device: torch.device,
                 quant: str | None = None, index: int = 0):
        # an int4 checkpoint's layout and group (None: a 16/32-bit checkpoint, quantized at load if asked)
        self.int4: Int4Scheme | None = cfg.int4 if quant == "int4" else None
        kw = dict(group=group, dtype=dtype, device=device, quant=quant,
                  group_size=None if self.int4 is None else self.int4.group_size)
        self.input_norm = torch.empty(cfg.hidden_size, dtype=dtype, device=device)
        self.post_norm = torch.empty(cfg.hidden_size, dtype=dtype, device=device)  # the MLP's input norm
        # Gemma's sandwich: the attention's and the MLP's outputs normed before their residual adds
        self.attn_out_norm = torch.empty(cfg.hidden_size, dtype=dtype, device=device) if cfg.sandwich_norms else None
        self.mlp_out_norm = torch.empty(cfg.hidden_size, dtype=dtype, device=device) if cfg.sandwich_norms else None
        self.norm_names = _SANDWICH_NORM_NAMES if cfg.sandwich_norms else _NORM_NAMES
        self.norm_offset = cfg.norm_weight_offset
        self.index = index
        # Phi-3's fused checkpoint tensors: (the layer's linear, its parts, their rows)
        self.fused_tensors = {"self_attn.qkv_proj.weight": ("qkv_proj", ("q", "k", "v"),
                                                            (cfg.q_size, cfg.kv_size, cfg.kv_size)),
                              "mlp.gate_up_proj.weight": ("gate_up_proj", (0, 1), (cfg.intermediate_size,) * 2)}
        self.q_norm = torch.empty(cfg.head_dim, dtype=dtype, device=device) if cfg.qk_norm else None
        self.k_norm = torch.empty(cfg.head_dim, dtype=dtype, device=device) if cfg.qk_norm else None
        # a float8 KV cache's scales (k's, v's: stored x / scale): 1, or a checkpoint's (_KV_SCALE_NAMES)
        self.kv_scale = torch.ones(2, dtype=torch.float32, device=device)
        self.kv_scale_loaded = [False, False]  # (k, v): set by the checkpoint (else calibrate_kv_scales may set it)
        self.qkv_proj = QKVParallelLinear(cfg.hidden_size, cfg.head_dim, cfg.num_attention_heads,
                                          cfg.num_key_value_heads, bias=cfg.attention_bias, **kw)
        self.o_proj = RowParallelLinear(cfg.q_size, cfg.hidden_size, **kw)
        self.moe = None
        if cfg.num_experts:
            self.moe = SparseMoeBlock(cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts,
                                      cfg.num_experts_per_tok, cfg.norm_topk_prob, group=group, dtype=dtype,
                                      device=device, name=f"model.layers.{index}.experts",
                                      shared_intermediate_size=cfg.shared_expert_intermediate_size,
                                      quant="fp8" if quant == "fp8" else None)
            self.gate_up_proj = self.down_proj = None
        else:
            self.gate_up_proj = MergedColumnParallelLinear(cfg.hidden_size, [cfg.intermediate_size] * 2, **kw)
            self.down_proj = RowParallelLinear(cfg.intermediate_size, cfg.hidden_size, **kw)
        self._norms_loaded: set[str] = set()
        self._int4_pending: dict[str, dict[str, torch.Tensor | LazyTensor]] = {}  # projection -> its int4 tensors
        self.device = device

    def load(self, name: str, tensor: torch.Tensor | LazyTensor) -> bool:
        """Load a checkpoint tensor (full or lazy: the projections read only this rank's shard of it) by its
        name inside the layer (``self_attn.q_proj.weight`` ...); False if the name is not one of the layer's."""
        if name in self.norm_names:
            self._load_norm(name, getattr(self, self.norm_names[name]), tensor, "hidden_size")
        elif name in _KV_SCALE_NAMES:
            value = materialize(tensor).float().flatten()
            if value.numel() != 1 or not bool(torch.isfinite(value).all()) or not value.item() > 0:
                raise ValueError(f"{name}: a KV-cache scale must be one positive finite number, got "
                                 f"{value.numel()} values {value[:4].tolist()}")
            for i in _KV_SCALE_NAMES[name]:
                self.kv_scale[i] = value.item()
                self.kv_scale_loaded[i] = True
        elif name in _QK_NORM_NAMES and self.q_norm is not None:
            norm = self.q_norm if name == "self_attn.q_norm.weight" else self.k_norm
            self._load_norm(name, norm, tensor, "head_dim")
        elif self.moe is not None and name.startswith(("mlp.", "block_sparse_moe.")):
            return self.moe.load(name, tensor)  # every MLP tensor of a mixture of experts is the block's
        elif name in self.fused_tensors and self.int4 is None:  # Phi-3: q, k and v (gate and up) in one tensor
            attr, parts, sizes = self.fused_tensors[name]
            if tuple(tensor.shape)[:1] != (sum(sizes),):
                raise ValueError(f"{name}: expected {sum(sizes)} rows ({' + '.join(map(str, sizes))}), got shape "
                                 f"{tuple(tensor.shape)}")
            start = 0
            for part, size in zip(parts, sizes):
                getattr(self, attr).load_weight(tensor[start:start + size], part)
                start += size
        elif name.rpartition(".")[0] in _PROJECTIONS:
            proj, _, kind = name.rpartition(".")
            attr, part = _PROJECTIONS[proj]
            if self.int4 is not None and kind in tensor_names(self.int4) + _INT4_EXTRA[self.int4.format]:
                self._int4_pending.setdefault(proj, {})[kind] = tensor  # converted once all have come
                return True
            if kind == "input_scale" and self.o_proj.quant:
                return True  # an FP8 checkpoint's static activation scale: activations stay in the model dtype
            if kind not in ("weight", "weight_scale") + (("bias",) if attr == "qkv_proj" else ()):
                return False
            load = getattr(getattr(self, attr), f"load_{kind}")
            if part is None:
                load(tensor)
            else:
                load(tensor, part)
        else:
            return False
        return True

    def _load_norm(self, name: str, norm: torch.Tensor, tensor, size: str) -> None:
        """A norm's weight as the kernels apply it: plus ``norm_weight_offset`` (Gemma's ``1 + w``, in fp32,
        rounded once)."""
        value = materialize(tensor)
        _check_norm(name, value, tuple(norm.shape), size)
        norm.copy_(value.float() + self.norm_offset if self.norm_offset else value)
        self._norms_loaded.add(name)

    def finish_int4(self) -> None:
        """Convert each projection's int4 checkpoint tensors (:mod:`tritium.models.int4_formats`) and load
        them; then narrow every int4 projection's storage (``finish_int4`` of the layers). ValueError naming a
        projection whose tensors are incomplete or inconsistent."""
        for proj, tensors in self._int4_pending.items():
            attr, part = _PROJECTIONS[proj]
            need = tensor_names(self.int4, optional=False)
            lacking = [k for k in need if k not in tensors]
            if lacking:
                raise ValueError(f"{proj}: the int4 ({self.int4.format}) checkpoint has {sorted(tensors)} but not "
                                 f"{lacking}")
            got = {k: materialize(t).to(self.device) for k, t in tensors.items()}
            try:
                weight = _convert_int4(self.int4, got)
            except ValueError as e:
                raise ValueError(f"{proj}: {e}") from None
            layer = getattr(self, attr)
            layer.load_int4(weight) if part is None else layer.load_int4(weight, part)
        self._int4_pending.clear()
        for layer in self.projections():
            layer.finish_int4()

    def projections(self) -> list:
        """The layer's parallel linears, in the order a step runs them (two where the MLP is ``moe``)."""
        return [getattr(self, name) for name in LAYER_PROJECTIONS if getattr(self, name) is not None]

    def missing(self) -> list[str]:
        norms = tuple(self.norm_names) + (_QK_NORM_NAMES if self.q_norm is not None else ())
        missing = [n for n in norms if n not in self._norms_loaded]
        for name in LAYER_PROJECTIONS:
            if getattr(self, name) is not None:
                missing += [f"{name}.{m}" for m in getattr(self, name).missing()]
        if self.moe is not None:
            missing += [f"moe.{m}" for m in self.moe.missing()]
        return missing

    def weight_bytes(self) -> int:
        norms = len(self.norm_names) * self.input_norm.numel() * self.input_norm.element_size()
        if self.q_norm is not None:
            norms += 2 * self.q_norm.numel() * self.q_norm.element_size()
        experts = 0 if self.moe is None else self.moe.weight_bytes()
        return norms + experts + sum(p.weight_bytes() for p in self.projections())


# checkpoint projection -> (the layer's parallel linear, its part there; None: the whole weight)
_PROJECTIONS = {"self_attn.q_proj": ("qkv_proj", "q"), "self_attn.k_proj": ("qkv_proj", "k"),
                "self_attn.v_proj": ("qkv_proj", "v"), "self_attn.o_proj": ("o_proj", None),
                "mlp.gate_proj": ("gate_up_proj", 0), "mlp.up_proj": ("gate_up_proj", 1),
                "mlp.down_proj": ("down_proj", None)}
_QK_NORM_NAMES = ("self_attn.q_norm.weight", "self_attn.k_norm.weight")
# calibrate_kv_scales: the tokens of its prefill, and the headroom it keeps below float8 e4m3's largest value (448)
CALIBRATION_TOKENS = 256
CALIBRATION_MARGIN = 4.0
# an FP8 checkpoint's KV-cache scales (llm-compressor / vLLM: k_scale and v_scale; older: one kv_scale; AutoFP8:
# the k and v projections' output scales) -> which of (k, v) each sets
_KV_SCALE_NAMES = {"self_attn.k_scale": (0,), "self_attn.v_scale": (1,), "self_attn.kv_scale": (0, 1),
                   "self_attn.k_proj.output_scale": (0,), "self_attn.v_proj.output_scale": (1,)}
# a layer's norms by checkpoint name -> the layer's attribute. Gemma's post_attention_layernorm norms the
# attention's output; its MLP's input norm is pre_feedforward_layernorm (Llama's post_attention_layernorm).
_NORM_NAMES = {"input_layernorm.weight": "input_norm", "post_attention_layernorm.weight": "post_norm"}
_SANDWICH_NORM_NAMES = {"input_layernorm.weight": "input_norm", "post_attention_layernorm.weight": "attn_out_norm",
                        "pre_feedforward_layernorm.weight": "post_norm",
                        "post_feedforward_layernorm.weight": "mlp_out_norm"}
# tensors of an int4 projection beyond int4_formats.tensor_names: a compressed-tensors zero point (refused
# unless a symmetric scheme wrote it all zeros, as some releases did)
_INT4_EXTRA = {"gptq": (), "awq": (), "compressed": ("weight_zero_point",)}


# a multimodal checkpoint's text model (Gemma 3 with its vision tower): its prefixes, as transformers 4 and 5
# write them, and the towers the engine does not run
_TEXT_PREFIXES = {"language_model.model.": "model.", "language_model.lm_head.": "lm_head.",
                  "model.language_model.": "model."}
_VISION_PREFIXES = ("vision_tower.", "multi_modal_projector.", "model.vision_tower.", "model.multi_modal_projector.")


def _check_norm(name: str, value: torch.Tensor, shape: tuple[int, ...], size: str) -> None:
    """ValueError / TypeError naming a norm weight of the wrong shape or of a non-float dtype (an int8 norm
    loaded silently, rounded)."""
    if tuple(value.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape} ({size}), got {tuple(value.shape)}")
    if not value.dtype.is_floating_point:
        raise TypeError(f"{name}: must be a floating-point tensor, got {value.dtype}")


# the NaN check's failure path reads a checkpoint tensor this many values at a time
_SCAN_CHUNK = 1 << 24


def _extremes(t: torch.Tensor) -> torch.Tensor:
    """float32 ``[2]`` on ``t``'s device, not finite exactly where ``t`` holds a NaN or an infinity: its min and
    max (``aminmax`` propagates NaN), read by the host later. A float8 e4m3 tensor (no infinities; its NaNs are
    the bytes 0x7F and 0xFF) is reduced as bytes: 0x7F is int8's largest value, 0xFF uint8's."""
    if t.dtype == torch.float8_e4m3fn:
        nan = torch.stack([t.view(torch.int8).amax().int() == 127, t.view(torch.uint8).amax().int() == 255])
        return torch.where(nan, float("nan"), 0.0)
    if t.dtype.itemsize == 1:  # another float8 type: converted (none is stored by the model)
        t = t.float()
    return torch.stack(torch.aminmax(t)).float()


def _add_source(sources: list, name: str, tensor) -> None:
    """What the NaN check keeps of a checkpoint tensor: a lazy one itself (a handle on its file), a full
    floating-point one's :func:`_extremes` (not the tensor: its memory is freed as loading goes on)."""
    if isinstance(tensor, LazyTensor) and tensor.dtype.is_floating_point:
        sources.append((name, tensor))
    elif isinstance(tensor, torch.Tensor) and tensor.dtype.is_floating_point and tensor.numel():
        sources.append((name, _extremes(tensor)))


def _nonfinite(source: LazyTensor | torch.Tensor) -> str | None:
    """None where a checkpoint tensor (lazy: read again, ``_SCAN_CHUNK`` values at a time; else its
    :func:`_extremes`) is finite, else what it holds ("3 NaN and 0 infinite values, the first at [2, 5]")."""
    if isinstance(source, torch.Tensor):
        if bool(torch.isfinite(source).all()):
            return None
        return f"NaN or infinite values (smallest {source[0].item()}, largest {source[1].item()})"
    if source.ndim == 0:
        chunks = [(0, source.materialize().reshape(1))]
    else:
        rows = source.shape[0]
        step = max(1, _SCAN_CHUNK // max(1, source.numel() // max(1, rows)))
        chunks = ((r, source[r:r + step]) for r in range(0, rows, step))
    nans = infs = 0
    first = None
    for row, chunk in chunks:
        chunk = chunk.float()
        bad = ~torch.isfinite(chunk)
        if bool(bad.any()):
            nans += int(chunk.isnan().sum())
            infs += int(chunk.isinf().sum())
            if first is None:
                index = torch.nonzero(bad)[0].tolist()
                first = [index[0] + row, *index[1:]] if source.ndim else []
    return None if first is None else f"{nans} NaN and {infs} infinite values, the first at {first}"


def _text_model_name(name: str) -> str | None:
    """A checkpoint tensor's name as a text-only model's (None: a vision tower's, not loaded)."""
    if name.startswith(_VISION_PREFIXES):
        return None
    for prefix, to in _TEXT_PREFIXES.items():
        if name.startswith(prefix):
            return to + name[len(prefix):]
    return name


def _kv_scale(layer: "LlamaDecoderLayer", k_cache: torch.Tensor) -> dict:
    """The layer's KV scales as a keyword, where its cache is float8 (else none: a 16/32-bit cache takes
    none)."""
    return {"kv_scale": layer.kv_scale} if k_cache.dtype == torch.float8_e4m3fn else {}


def _convert_int4(scheme: Int4Scheme, t: dict[str, torch.Tensor]) -> Int4Weight:
    """One projection's int4 checkpoint tensors (by their names in the checkpoint) as an Int4Weight."""
    if scheme.format == "gptq":
        return from_gptq(t["qweight"], t["qzeros"], t["scales"], t.get("g_idx"), group_size=scheme.group_size,
                         zero_offset=scheme.zero_offset)
    if scheme.format == "awq":
        return from_awq(t["qweight"], t["qzeros"], t["scales"], group_size=scheme.group_size)
    zero_point = t.get("weight_zero_point")
    if zero_point is not None and scheme.sym and not zero_point.any():
        zero_point = None  # a symmetric scheme's zero points, written all zeros: nothing to subtract
    return from_compressed(t["weight_packed"], t["weight_scale"], t.get("weight_shape"), t.get("weight_g_idx"),
                           group_size=scheme.group_size, weight_zero_point=zero_point)


class LlamaModel:
    """Weights and forward pass; no autograd, no nn.Module.

    ``forward(input_ids [T], positions [T], meta, kv_caches)`` -> hidden states [T, hidden];
    ``compute_logits(hidden [S, hidden])`` -> fp32 logits [S, vocab]. ``group`` is the tensor-parallel
    group the layers are sharded over (one rank: no sharding).
    """

    def __init__(self, config: ModelConfig, *, dtype: torch.dtype, device: torch.device,
                 options: ModelOptions = ModelOptions(), group: ParallelGroup = SINGLE):
        self.config = config
        self.dtype = dtype
        self.device = device
        self.kv_scale_report: list[dict] = []  # calibrate_kv_scales' rows (an fp8 KV cache's scales measured)
        self.group = group
        kw = dict(group=group, dtype=dtype, device=device)
        self.embed = VocabParallelEmbedding(config.vocab_size, config.hidden_size, **kw)
        self.quantization = options.quantization
        if config.int4 is not None and options.quantization != "int4":
            raise ValueError(f"this checkpoint's projections are int4 ({config.int4.format}): quantization must be "
                             f"'int4' (or left unset), got {options.quantization!r}")
        if config.int4 is not None and config.int4.group_size is None:
            raise ValueError(f"this {config.int4.format} checkpoint's quantization_config states no group_size: "
                             f"build its config with tritium.models.weights.load_hf_config, which reads the group "
                             f"size from the tensors' shapes")
        if config.num_experts and options.quantization not in (None, "fp8"):
            raise ValueError(f"quantization {options.quantization!r} is not supported for mixture-of-experts models "
                             f"({config.model_type}, {config.num_experts} experts): their experts run in 16/32 bits "
                             f"or as weight-only fp8 (quantization='fp8')")
        if config.num_experts and options.batch_invariant:
            raise ValueError(f"batch_invariant is not supported for mixture-of-experts models ({config.model_type}): "
                             f"the experts' kernels sum in a different order at decode and prefill sizes")
        self.layers = [LlamaDecoderLayer(config, group, dtype, device, options.quantization, i)
                       for i in range(config.num_hidden_layers)]
        self.norm = torch.empty(config.hidden_size, dtype=dtype, device=device)
        self.lm_head = ParallelLMHead(config.vocab_size, config.hidden_size, **kw,
                                      tied_to=self.embed if config.tie_word_embeddings else None)
        self._loaded: set[str] = set()
        self.num_heads = self.layers[0].qkv_proj.num_heads          # this rank's query and KV heads
        self.num_kv_heads = self.layers[0].qkv_proj.num_kv_heads
        self.scale = config.attention_scale
        self.layer_cos_sin: list[torch.Tensor] = []  # each layer's rope table (Gemma 3: the sliding layers' own)
        # Gemma: embeddings times sqrt(hidden) rounded to the dtype first, as transformers multiplies them
        self.embedding_multiplier = (None if config.embedding_multiplier == 1.0 else
                                     torch.tensor(config.embedding_multiplier, dtype=dtype).item())
        self._rope_freqs: torch.Tensor | None = None
        self.prefetcher: WeightPrefetcher | None = None
        self.prefetch_plan: dict[str, int | None] = {}
        self.linear = LinearDispatch(options.linear_backend, pdl=options.pdl)
        self.linear.activation_dtype = dtype
        self.linear.dynamic_fp8 = options.quantization == "fp8-dynamic"
        # the layers' two norm weights go into the QKV / gate-up weights at load (see ModelOptions.fuse_norms);
        # not under W8A8, where no GEMV takes a norm in (folding would only requantize the weights)
        self.fold_norms = (options.fuse_norms and group.world_size == 1 and options.op_backend == "triton"
                           and options.linear_backend != "torch" and not self.linear.dynamic_fp8
                           and options.quantization != "int4"  # an int4 weight takes no norm either
                           and not config.num_experts  # nor does a router or an expert
                           and not config.sandwich_norms)  # Gemma's layers run apart (_forward_sandwich)
        self.norms_folded = False
        # projections tune_linears timed two ways (down: gated or plain; qkv: with rope inside or plain), the
        # configs of each way, and the way whose configs are in place (swapped by set_options)
        self._ways: dict[str, dict[str, dict]] = {}
        self._ways_applied: dict[str, str] = {}
        self.unit_norm = torch.ones(config.hidden_size, dtype=dtype, device=device)
        self.lora: LoRAStack | None = None  # enable_lora
        self.set_options(options)

    def set_options(self, options: ModelOptions) -> None:
        """Switch backends and kernel options (graphs captured before must be captured again); the linear
        layers' tuned choices are kept."""
        if options.quantization != self.quantization:
            raise ValueError(f"quantization is fixed when the model is built ({self.quantization!r}), got "
                             f"{options.quantization!r}")
        self.options = options
        self.ops = op_set(options.op_backend, pdl=options.pdl)
        cfg = self.config
        windows = [cfg.layer_window(i) for i in range(cfg.num_hidden_layers)]
        by_window = {}  # one attention object per sliding window the layers have (None: full attention)
        if options.context_parallel is not None:
            if not cfg.uniform_layers or cfg.attn_logit_softcapping is not None:
                raise ValueError(f"context_parallel: {cfg.model_type} layers with different sliding windows or an "
                                 f"attention softcap are not supported by context parallelism")
            by_window[windows[0]] = options.context_parallel
        elif options.attention_backend == "triton":
            invariant = None
            if options.batch_invariant:
                invariant = invariant_attention_config(
                    num_q_heads=self.num_heads, num_kv_heads=self.num_kv_heads, head_dim=cfg.head_dim,
                    max_seq_len=cfg.max_position_embeddings, dtype=self.dtype)
            workspace = None
            for window in dict.fromkeys(windows):
                by_window[window] = TritonAttention(
                    options.max_decode_tokens, self.num_heads, cfg.head_dim, self.device, window,
                    pdl=options.attention_pdl, num_splits=options.attention_num_splits, invariant=invariant,
                    softcap=cfg.attn_logit_softcapping, workspace=workspace)
                workspace = by_window[window].workspace
        else:
            for window in dict.fromkeys(windows):
                by_window[window] = TorchAttention(window, cfg.attn_logit_softcapping)
        self.layer_attention = [by_window[w] for w in windows]
        self.layer_windowed = [w is not None for w in windows]  # read AttentionMetadata.window where present
        self.attention = self.layer_attention[0]
        self.attention_variants = list(by_window.values())  # what a warm-up runs (each window's kernels)
        self.linear.mode = options.linear_backend
        self.linear.silu_and_mul = self.ops.silu_and_mul
        self.linear.pdl = options.pdl
        self.linear.fuse_quant = options.fuse_act_quant
        # Triton ops and attention: rope and the KV-cache write are one kernel (TritonAttention.attend reads
        # the cache it wrote). The torch attention keeps its own graph-safe scatter.
        self.fused_rope_kv = (options.fuse_rope_kv_write and options.op_backend == "triton"
                              and options.attention_backend == "triton")
        self._apply_ways()

    def enable_prefetch(self, plan: dict[str, int | None] | None = None, *, evict_last: bool = False) -> bool:
        """Prefetch projection weights into L2 in decode steps (<= 4 tokens) while the small kernels before
        them run (see :mod:`tritium.ops.prefetch`). ``plan`` maps a projection (``o_proj``,
        ``gate_up_proj``, ``down_proj``, ``qkv_proj``: the next layer's, ``lm_head`` after the last layer) to
        the bytes to prefetch (None: all of it); each is issued right after the projection before it.
        ``plan={}`` turns prefetching off. Returns whether prefetching is active (False where the hardware
        has no bulk L2 prefetch)."""
        plan = dict(DEFAULT_PREFETCH_PLAN if plan is None else plan)
        unknown = set(plan) - set(PREFETCH_POINTS)
        if unknown:
            raise ValueError(f"prefetch plan: unknown projections {sorted(unknown)}; expected some of {PREFETCH_POINTS}")
        for name, n in plan.items():
            if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
                raise ValueError(f"prefetch plan[{name!r}] must be a byte count >= 0 or None (all), got {n!r}")
        prefetcher = WeightPrefetcher(self.device, enabled=bool(plan), evict_last=evict_last)
        self.prefetcher = prefetcher if prefetcher.enabled else None
        self.prefetch_plan = plan if prefetcher.enabled else {}
        return self.prefetcher is not None

    # -- weights -------------------------------------------------------------------------------------------
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor | LazyTensor]]) -> None:
        """Take (Hugging Face name, full tensor or :class:`~tritium.models.weights.LazyTensor`) pairs; each
        layer copies its shard (of a lazy tensor it reads only that; norms and ``rope_freqs`` are read whole).
        Raises ValueError for missing or unexpected tensors, and (``options.check_finite``) for NaN or infinite
        values: every floating-point tensor the model holds is reduced to its min and max on its device, and the
        host reads them once at the end; only then, where one is not finite, are the checkpoint tensors read
        again (on the CPU, in checkpoint order) to name the first that holds such a value. A full tensor passed
        in is reduced as it comes instead (it is not kept)."""
        cfg = self.config
        if self.norms_folded:
            raise ValueError("load_weights: this model's norm weights are folded into its projections already; "
                             "build a new LlamaModel to load weights again")
        # (checkpoint name, its lazy tensor or a full one's extremes): what the NaN check reads again on failure
        sources: list[tuple[str, LazyTensor | torch.Tensor]] | None = [] if self.options.check_finite else None
        for name, tensor in weights:
            checkpoint_name, name = name, _text_model_name(name)
            if name is None:
                continue  # a vision tower's
            try:
                if name == "rope_freqs":
                    self._rope_freqs = materialize(tensor).float()
                elif name == "model.embed_tokens.weight":
                    self.embed.load_weight(tensor)
                elif name == "model.norm.weight":
                    value = materialize(tensor)
                    _check_norm(name, value, tuple(self.norm.shape), "hidden_size")
                    self.norm.copy_(value.float() + cfg.norm_weight_offset if cfg.norm_weight_offset else value)
                elif name == "lm_head.weight":
                    if not cfg.tie_word_embeddings:
                        self.lm_head.load_weight(tensor)
                elif name.startswith("model.layers."):
                    idx, key = name[len("model.layers."):].split(".", 1)
                    if not idx.isdigit() or int(idx) >= cfg.num_hidden_layers:
                        raise ValueError(f"weight {name!r}: layer {idx} is out of range (model has "
                                         f"{cfg.num_hidden_layers} layers)")
                    if not self.layers[int(idx)].load(key, tensor):
                        raise ValueError(f"unexpected weight {name!r} for a {cfg.model_type} model")
                elif name.endswith("rotary_emb.inv_freq"):
                    continue
                else:
                    raise ValueError(f"unexpected weight {name!r} for a {cfg.model_type} model")
                self._loaded.add(name)
                if sources is not None and not (name == "lm_head.weight" and cfg.tie_word_embeddings):
                    _add_source(sources, checkpoint_name, tensor)
            except (ValueError, TypeError) as e:  # a layer's message, named by its checkpoint tensor
                if type(e) not in (ValueError, TypeError) or name in str(e):
                    raise
                head, _, rest = str(e).partition(": ")  # a norm's message names it by its layer's key
                raise type(e)(f"{name}: {rest if name.endswith('.' + head) else e}") from None
        if self.quantization == "int4":
            for i, layer in enumerate(self.layers):
                try:
                    layer.finish_int4()
                except ValueError as e:
                    raise ValueError(f"model.layers.{i}.{e}") from None
        if not cfg.tie_word_embeddings and "lm_head.weight" not in self._loaded:
            # refused as vLLM does (transformers runs a randomly initialized head, with a warning)
            raise ValueError("checkpoint has no 'lm_head.weight', and the config's tie_word_embeddings is false "
                             "(a partial download, or a config that should say tie_word_embeddings: true?)")
        self._check_complete()
        if self.fold_norms:
            self._fold_norm_weights()
        if sources is not None:
            self._check_finite(sources)
        tables = {}  # the full layers' rope table, and Gemma 3's sliding layers' (its own base, unscaled)
        self.layer_cos_sin = []
        for i in range(cfg.num_hidden_layers):
            local = cfg.rope_local_theta is not None and cfg.layer_window(i) is not None
            if local not in tables:
                theta, scaling = cfg.layer_rope(i)
                freqs = None if local else self._rope_freqs  # a GGUF file's factors are the full layers'
                tables[local] = rope_cos_sin(rope_inv_freq(cfg.head_dim, theta, scaling, freqs),
                                             cfg.max_position_embeddings, rope_attention_factor(scaling))
                tables[local] = tables[local].to(self.device)
            self.layer_cos_sin.append(tables[local])

    def _held_tensors(self) -> list[tuple[str, torch.Tensor]]:
        """(label, tensor) of every non-empty floating-point tensor the weights were loaded into (an int4 weight's
        scales; an fp8 weight and its scales), each once."""
        out = [("model.embed_tokens.weight", self.embed.weight), ("model.norm.weight", self.norm),
               ("lm_head.weight", self.lm_head.weight)]
        for i, layer in enumerate(self.layers):
            prefix = f"model.layers.{i}."
            for attr in ("input_norm", "post_norm", "attn_out_norm", "mlp_out_norm", "q_norm", "k_norm",
                         "kv_scale"):
                out.append((prefix + attr, getattr(layer, attr)))
            for attr in LAYER_PROJECTIONS:
                if getattr(layer, attr) is not None:
                    out += [(prefix + attr, t) for t in getattr(layer, attr).weights()]
            if layer.moe is not None:
                out += [(prefix + "experts", t) for t in layer.moe.weights()]
        if self._rope_freqs is not None:
            out.append(("rope_freqs", self._rope_freqs))
        seen, held = set(), []
        for label, t in out:
            if t is not None and t.dtype.is_floating_point and t.numel() and id(t) not in seen:
                seen.add(id(t))
                held.append((label, t))
        return held

    def _check_finite(self, sources: list[tuple[str, LazyTensor | torch.Tensor]]) -> None:
        """ValueError naming the first checkpoint tensor (in ``sources``' order: the checkpoint's) holding a NaN
        or an infinity, where any tensor the model holds does; naming the model's tensor where none of the
        checkpoint's does (a value past the dtype's range became infinite as it was converted).

        NOTE: the fast path is one ``aminmax`` a tensor (no temporary of the tensor's size) whose results stay
        on the device, concatenated and read by the host once a device; the checkpoint is read again only on
        failure. Measured on the CPU (one thread, 2026-12): 0.2 ms for the tests' tiny models (17-20 tensors),
        18-21 ms for SmolLM2-135M's 134.5M values (bandwidth-bound: aminmax runs at 17-24 GB/s there), about 4%
        of that model's load from its GGUF file."""
        held = self._held_tensors()
        extremes = [(label, _extremes(t)) for label, t in held]
        parts = [e for _, e in extremes] + [s for _, s in sources if isinstance(s, torch.Tensor)]
        by_device: dict[torch.device, list[torch.Tensor]] = {}
        for e in parts:
            by_device.setdefault(e.device, []).append(e)
        if all(bool(torch.isfinite(torch.cat(group)).all()) for group in by_device.values()):
            return
        for name, source in sources:
            found = _nonfinite(source)
            if found is not None:
                origin = source.origin if isinstance(source, LazyTensor) else None
                where = f"checkpoint tensor {name!r}" if origin is None else (
                    f"checkpoint tensor {origin[0]!r}{'' if origin[0] == name else f' ({name})'} in {origin[1]!r}")
                raise ValueError(f"{where} holds {found}: a model with it computes NaN logits (weights must be "
                                 f"finite; check_finite=False loads it anyway: LLM(..., check_finite=False), "
                                 f"EngineConfig, ModelOptions, or the command's --no-check-finite)")
        # no checkpoint tensor holds one (the failed part came from the model's tensors): a conversion made it
        label, t = next((label, t) for (label, t), (_, e) in zip(held, extremes) if not bool(torch.isfinite(e).all()))
        raise ValueError(f"{label} holds NaN or infinite values after loading, though no checkpoint tensor does: a "
                         f"value beyond {t.dtype}'s range (largest {torch.finfo(t.dtype).max:.4g}) became infinite as "
                         f"it was converted (or as norms were folded into it); load the model in a wider dtype "
                         f"(bfloat16 or float32)")

    def _fold_norm_weights(self) -> None:
        """``W[:, k] *= w[k]`` for QKV (input norm) and gate/up (post-attention norm), in fp32, rounded once."""
        for layer in self.layers:
            for proj, norm in ((layer.qkv_proj, layer.input_norm), (layer.gate_up_proj, layer.post_norm)):
                w, scale = proj.weight, proj.weight_scale
                for i in range(0, w.shape[0], 4096):  # a slice at a time: one fp32 copy of 4096 rows at most
                    if scale is None:
                        w[i:i + 4096] = (w[i:i + 4096].float() * norm.float()).to(w.dtype)
                    else:  # quantized: the folded rows quantized again, with their new scales
                        w[i:i + 4096], scale[i:i + 4096] = quantize_rows(
                            dequantize(w[i:i + 4096], scale[i:i + 4096]) * norm.float())
        self.norms_folded = True

    def _norm_weight(self, weight: torch.Tensor) -> torch.Tensor:
        """A layer norm's weight as the forward applies it: a unit weight where it is folded into the projection."""
        return self.unit_norm if self.norms_folded else weight

    def _check_complete(self) -> None:
        for name in ("model.embed_tokens.weight", "model.norm.weight"):
            if name not in self._loaded:
                raise ValueError(f"checkpoint has no {name!r}")
        for i, layer in enumerate(self.layers):
            missing = layer.missing()
            if missing:
                raise ValueError(f"checkpoint layer {i} lacks {missing}")

    def weight_bytes(self) -> int:
        """Bytes this rank reads per batch-1 decode step: every layer weight (of a mixture of experts, the router
        and ``num_experts_per_tok`` experts), the final norm and the LM head."""
        norm = self.norm.numel() * self.norm.element_size()
        return sum(layer.weight_bytes() for layer in self.layers) + norm + self.lm_head.weight_bytes()

    @property
    def projection_names(self) -> tuple[str, ...]:
        """The layer projections the linear dispatch runs (of ``LAYER_PROJECTIONS``: qkv and o only where the
        MLP is a mixture of experts, whose kernels are its own)."""
        return LAYER_PROJECTIONS[:2] if self.config.num_experts else LAYER_PROJECTIONS

    def projection_shapes(self) -> list[tuple[int, int]]:
        """(N, K) of this rank's layer projections (:attr:`projection_names`; every layer has the same)."""
        return [tuple(getattr(self.layers[0], name).weight.shape) for name in self.projection_names]

    def tune_linears(self, ms: tuple[int, ...]) -> list[dict]:
        """Pick cuBLAS or the Triton GEMV per projection shape for decode batches of ``ms`` rows (GPU, mode
        ``"auto"``), each GEMV timed as the decode chain runs it (norm inside, residual add inside, SiLU
        inside: see ``ModelOptions.fuse_norms``); returns the timing report."""
        groups = {name: [getattr(layer, name).weight for layer in self.layers]
                  for name in self.projection_names}
        groups["lm_head"] = [self.lm_head.weight]
        if self.config.num_experts:  # the routers: a small product of their own, GEMV or cuBLAS
            groups["router"] = [layer.moe.router for layer in self.layers]
            if self.config.shared_expert_intermediate_size:  # Qwen2-MoE's shared experts and their gates
                groups.update({f"shared_{part}": [layer.moe.shared[part] for layer in self.layers]
                               for part in ("gate_up", "down", "gate")})
        if self.quantization == "int4":  # int4 projections run their own GEMVs alone (nothing fuses): timed once
            self._ways, self._ways_applied = {}, {}
            return self.linear.tune(groups, ms)
        scales = {name: self._scales(name) for name in self.projection_names}
        norm = "norm_folded" if self.norms_folded else "norm"
        if self._norms_chain and not self.linear.dynamic_fp8:  # W8A8: no norm or residual add in a GEMV
            return self.linear.tune(groups, ms, variants={"qkv_proj": norm, "o_proj": "residual",
                                                          "gate_up_proj": norm, "down_proj": "gated_residual"},
                                    scales=scales)
        qkv = self.layers[0].qkv_proj
        heads = (qkv.num_heads, qkv.num_kv_heads)  # the "rope" variant's kernel needs them
        # SiLU-and-mul in the gate/up GEMV's epilogue (fuse_swiglu): the down projection then multiplies its
        # output plainly where gate/up runs the GEMV at M rows, and takes [gate | up] (gated) where gate/up runs
        # on cuBLAS. Rope and the KV write in the QKV GEMV's epilogue (fuse_qkv_rope, where the Triton rope
        # kernel runs): its own kernel. Each is timed both ways where both can run, so that turning either
        # option off or on later runs configs tuned for how the projection then runs.
        down, qkv_group = groups.pop("down_proj", None), groups.pop("qkv_proj")
        # (Gemma's layers run the gate/up projection plain: their GeGLU is a launch of its own)
        swiglu = "swiglu" if self.options.fuse_swiglu and not self.config.sandwich_norms else "plain"
        self.linear.tune(groups, ms, variants={"gate_up_proj": swiglu, "shared_gate_up": swiglu}, scales=scales)
        self._ways, self._ways_applied = {}, {}
        self._tune_ways("qkv_proj", qkv_group, {m: ("plain", "rope") if self.fused_rope_kv else ("plain",)
                                                for m in ms}, heads)
        if down is not None:  # (a mixture of experts has no down projection of its own)
            gate_up = self.layers[0].gate_up_proj.weight
            self._tune_ways("down_proj", down, {m: ("gated", "plain") if self.linear.gemv_chosen(m, gate_up)
                                                else ("gated",) for m in ms}, heads)
        self._apply_ways()
        return self.linear.report

    def warm_quantized(self, max_rows: int) -> int:
        """Run each quantized projection's dense path once in every kernel configuration a step of up to
        ``max_rows`` tokens can select (:func:`tritium.models.linear.warm_dense_paths`; the layers' shapes are
        the same, so layer 0's): at engine start, so that no Triton kernel compiles inside a request. Returns
        how many ran (0 without quantization). W8A8 with ``fuse_act_quant``: the quantizing RMSNorm and
        SiLU-and-mul kernels once too (a batch-1 step may not run the latter, a prefill does)."""
        if not self.quantization:
            return 0
        layer = self.layers[0]
        if self.quantization == "int4":
            count = 0
            for name in LAYER_PROJECTIONS:
                w = getattr(layer, name).weight
                for m in int4_warm_rows(*w.shape, w.group_size, max_rows, self.device):
                    self.linear(torch.zeros(m, w.shape[1], dtype=self.dtype, device=self.device), w)
                    count += 1
            return count
        count = sum(warm_dense_paths(self.linear, getattr(layer, name).weight, getattr(layer, name).weight_scale,
                                     max_rows, self.dtype) for name in self.projection_names)  # MoE: qkv and o
        if (layer.down_proj is not None and self.options.fuse_act_quant
                and self.linear.quantizes_input(layer.down_proj.weight)):
            x = torch.zeros(1, layer.gate_up_proj.weight.shape[0], dtype=self.dtype, device=self.device)
            self.linear.gated(x, layer.down_proj.weight, scale=layer.down_proj.weight_scale)
            self.ops.rms_norm(torch.zeros_like(self.unit_norm)[None], self.unit_norm, self.config.rms_norm_eps,
                              quantize=True)
            count += 2
        return count

    def _scales(self, name: str) -> list[torch.Tensor] | None:
        """Every layer's row scales of projection ``name`` (None where the weights are not quantized)."""
        return ([getattr(layer, name).weight_scale for layer in self.layers]
                if self.quantization and self.quantization != "int4" else None)

    def linear_state(self) -> dict:
        """What :meth:`tune_linears` (and ``ModelRunner.settle_linears``) left in place, as JSON-able data
        (:meth:`LinearDispatch.state` and the two-way projections' configs): :meth:`restore_linears` puts
        it back in a later engine of the same model on the same GPU, without timing anything."""
        ways = {name: {way: encode_choices(configs) for way, configs in by_way.items()}
                for name, by_way in self._ways.items()}
        return {"linear": self.linear.state(), "ways": ways, "ways_applied": dict(self._ways_applied),
                "norms_chain": self._norms_chain}

    def restore_linears(self, state: dict) -> None:
        """Put back what :meth:`linear_state` returned, then swap in the configs the current options run
        (as :meth:`set_options` does). Raises ValueError, changing nothing, where ``state`` is malformed or
        was tuned for another way of running the projections."""
        try:
            if state["norms_chain"] != self._norms_chain:
                was, now = ("on" if v else "off" for v in (state["norms_chain"], self._norms_chain))
                raise ValueError(f"linear state: tuned with fuse_norms' chain {was}, this model runs it {now}")
            ways = {name: {way: decode_choices(rows) for way, rows in by_way.items()}
                    for name, by_way in state["ways"].items()}
            applied = dict(state["ways_applied"])
            if set(applied) != set(ways) or any(applied[n] not in ways[n] for n in applied):
                raise ValueError(f"linear state: ways_applied {applied!r} does not match the ways tuned")
            linear = dict(state["linear"])
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"linear state: malformed ({type(e).__name__}: {e})") from None
        self.linear.load_state(linear)
        self._ways, self._ways_applied = ways, applied
        self._apply_ways()

    def _tune_ways(self, name: str, group: list[torch.Tensor], ways: dict[int, tuple[str, ...]],
                   heads: tuple[int, int]) -> None:
        """Tune projection ``name`` at each M as each of ``ways[M]`` (LinearDispatch variants) and keep each
        way's choices. The way it runs under the current options is tuned last, so that its choices (and
        its fastest GEMV, ``LinearDispatch.best_gemv``, what the whole-step check tries) are the ones in place."""
        key = tuple(group[0].shape)
        want = self._wanted_way(name)
        self._ways[name] = {way: {} for per_m in ways.values() for way in per_m}
        for m, per_m in ways.items():
            for way in sorted(per_m, key=lambda w: w == want):
                self.linear.tune({name: group}, (m,), variants={name: way}, rope_heads=heads,
                                 scales={name: self._scales(name)})
                self._ways[name][way][(m, *key)] = self.linear.choices.get((m, *key))
        # where the wanted way cannot run at some M (down gated where gate/up is on cuBLAS), the way tuned
        # there is in place, and it runs either way
        self._ways_applied[name] = want if want in self._ways[name] else next(iter(self._ways[name]))

    def _wanted_way(self, name: str) -> str:
        """How projection ``name`` runs under the current options (its LinearDispatch variant)."""
        if name == "down_proj":
            return "plain" if self.options.fuse_swiglu or self.config.sandwich_norms else "gated"
        return "rope" if self._qkv_rope_possible else "plain"

    def _apply_ways(self) -> None:
        """Where an option changed since a two-way projection's configs were put in place (``_tune_ways``),
        swap in those tuned for how it runs now, keeping the ones in place (a whole-step check may have
        changed them) for a swap back."""
        for name, by_way in self._ways.items():
            want, applied = self._wanted_way(name), self._ways_applied[name]
            if want == applied or want not in by_way:
                continue
            for key in by_way[want]:
                by_way[applied][key] = self.linear.choices.get(key)
            self.linear.choices.update(by_way[want])
            self._ways_applied[name] = want

    @torch.inference_mode()
    def calibrate_kv_scales(self, num_tokens: int = CALIBRATION_TOKENS,
                            margin: float = CALIBRATION_MARGIN) -> list[dict]:
        """Scales for a float8 KV cache where the checkpoint has none: one prefill of ``num_tokens`` fixed tokens
        (the BOS token, then ids drawn with seed 0: the same on every start and every rank) into a cache of its own
        in the model's dtype, and each layer's largest |K| and |V| on it. A layer's scale becomes ``margin * max /
        448`` where that exceeds 1 (its values would otherwise come within ``margin`` of float8's saturation at
        448), else stays 1, so a model whose keys and values are small stores them exactly as with scale 1.
        Checkpoint scales are kept. With tensor parallelism every rank runs it together (collectives inside) and
        scales its own heads. Returns one row per layer: the maxima, the scales and where they came from."""
        cfg, dev = self.config, self.device
        T = max(1, min(num_tokens, cfg.max_position_embeddings))
        ids = torch.randint(0, cfg.vocab_size, (T,), generator=torch.Generator().manual_seed(0))
        if cfg.bos_token_id is not None and 0 <= cfg.bos_token_id < cfg.vocab_size:
            ids[0] = cfg.bos_token_id
        block = 16
        pages = -(-T // block)
        page = (pages, block, self.num_kv_heads, cfg.head_dim)
        caches = [(torch.zeros(page, dtype=self.dtype, device=dev), torch.zeros(page, dtype=self.dtype, device=dev))
                  for _ in self.layers]
        meta = AttentionMetadata(
            slot_mapping=torch.arange(T, device=dev),
            block_table=torch.arange(pages, dtype=torch.int32, device=dev)[None],
            seq_lens=torch.tensor([T], dtype=torch.int32, device=dev),
            cu_seqlens_q=torch.tensor([0, T], dtype=torch.int32, device=dev), max_seqlen_q=T, max_seqlen_k=T,
            q_lens_host=[T], seq_lens_host=[T])
        self.forward(ids.to(dev), torch.arange(T, device=dev), meta, caches)
        rows = []
        for layer, (k, v) in zip(self.layers, caches):
            peaks = [float(c.view(-1, cfg.head_dim)[:T * self.num_kv_heads].abs().amax()) for c in (k, v)]
            row = {"layer": layer.index, "k_max": peaks[0], "v_max": peaks[1], "k_scale": None, "v_scale": None}
            for i, (name, peak) in enumerate(zip(("k", "v"), peaks)):
                if layer.kv_scale_loaded[i]:
                    row[f"{name}_scale"], row[f"{name}_from"] = float(layer.kv_scale[i]), "checkpoint"
                    continue
                if not peak == peak or peak == float("inf"):  # NaN or inf: nothing to scale by
                    raise ValueError(f"calibrating the fp8 KV cache: layer {layer.index}'s {name} values are not "
                                     f"finite ({peak}) on the calibration tokens")
                scale = max(1.0, margin * peak / FP8_MAX)
                layer.kv_scale[i] = scale
                row[f"{name}_scale"], row[f"{name}_from"] = scale, "calibrated"
            rows.append(row)
        self.kv_scale_report = rows
        return rows

    # -- forward -------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
                kv_caches: list[tuple[torch.Tensor, torch.Tensor]], lora_slots: torch.Tensor | None = None,
                lora_order: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids, positions: [T] int64 -> final-normed hidden states [T, hidden]. ``lora_slots`` [T] (with
        :meth:`enable_lora`): each token's adapter slot, -1 none (None: no token has one; the layers run as
        without adapters); ``lora_order``: the tokens sorted by slot (None: sorted here where it pays)."""
        cfg, ops, linear = self.config, self.ops, self.linear
        T = input_ids.shape[0]
        h = self.embed.forward(input_ids)                                             # [T, hidden]
        if self.embedding_multiplier is not None:
            h.mul_(self.embedding_multiplier)
        if self.lora is not None and lora_slots is not None:
            return self._forward_lora(h, positions, meta, kv_caches, self.lora.step_rows(lora_slots, lora_order))
        residual = None
        # decode steps: ask L2 for each projection's weight as soon as the one before it is done
        plan = self.prefetch_plan if T <= 4 and self.prefetcher is not None else {}

        def prefetch(name: str, weight: torch.Tensor | Int4Weight) -> None:
            if name in plan:
                self.prefetcher.issue(weight.packed if isinstance(weight, Int4Weight) else weight, plan[name])

        if self.config.sandwich_norms:
            return self._forward_sandwich(h, positions, meta, kv_caches, plan, prefetch)
        if self._norms_in_gemvs(T):
            return self._forward_norms_in_gemvs(h, positions, meta, kv_caches, plan, prefetch)
        # tensor parallel with a fused collective: each row-parallel output stays this rank's partial sum
        # and its all-reduce runs in one kernel with the residual add and RMSNorm that follow it (add_norm)
        reduce = self._reduces_apart
        add_norm = self._add_norm

        # ... and at decode sizes the row-parallel projection itself joins that launch (normed = its output)
        normed = None
        for i, (layer, (k_cache, v_cache)) in enumerate(zip(self.layers, kv_caches)):
            # W8A8 (fuse_act_quant): the norm writes the QKV projection's input quantized (Fp8Rows)
            quantize = self._norm_quantizes(layer.qkv_proj)
            if residual is None:
                residual = h
                x, _ = ops.rms_norm(h, self._norm_weight(layer.input_norm), cfg.rms_norm_eps, quantize=quantize)
            elif normed is not None:
                x = normed
            else:
                x, residual = add_norm(h, self._norm_weight(layer.input_norm), residual, quantize=quantize)
            roped = self._qkv_rope(x, layer)
            if roped:  # rope and the KV write in the projection's epilogue
                qkv = layer.qkv_proj.forward_rope_kv(x, linear, positions, self.layer_cos_sin[i], k_cache, v_cache,
                                                     self._layer_meta(meta, i).slot_mapping,
                                                     **_kv_scale(layer, k_cache))
            else:
                qkv = layer.qkv_proj.forward(x, linear)                               # [T, (hq + 2 hkv) d]
            prefetch("o_proj", layer.o_proj.weight)
            attn = self._attend(qkv, positions, meta, k_cache, v_cache, layer, roped=roped)
            x = layer.o_proj.forward_add_norm(attn, residual, self._norm_weight(layer.post_norm), cfg.rms_norm_eps)
            routed = None
            if x is None:
                h = layer.o_proj.forward(attn, linear, reduce=reduce)
                if layer.moe is not None and layer.moe.routes_with_norm(T):  # the norm, router and top-k in one
                    x, residual, routed = layer.moe.norm_route(h, ops, residual, self._norm_weight(layer.post_norm),
                                                               cfg.rms_norm_eps)
                else:
                    x, residual = add_norm(h, self._norm_weight(layer.post_norm), residual,
                                           quantize=self._norm_quantizes(layer.gate_up_proj))
            last = i + 1 == len(self.layers)
            if layer.moe is not None:  # the router and the experts; their sum all-reduced with the norm after
                # one rank: the slots' sum, the residual add and the next norm in one launch (the step's last
                # norm stays apart when weight prefetches must be joined before it)
                if self.group.world_size == 1 and not (last and plan):
                    nxt = self.norm if last else self._norm_weight(self.layers[i + 1].input_norm)
                    normed, residual = layer.moe.forward_add_norm(x, linear, ops, residual, nxt, cfg.rms_norm_eps,
                                                                  routed=routed)
                else:
                    normed, h = None, layer.moe.forward(x, linear, ops, reduce=reduce, routed=routed)
                if last:
                    prefetch("lm_head", self.lm_head.weight)
                else:
                    prefetch("qkv_proj", self.layers[i + 1].qkv_proj.weight)
                continue
            prefetch("gate_up_proj", layer.gate_up_proj.weight)
            # SiLU-and-mul in the gate/up GEMV's epilogue (fuse_swiglu), else inside the down GEMV (gated)
            gated = not self._swiglu(x, layer)
            act = layer.gate_up_proj.forward(x, linear) if gated else layer.gate_up_proj.forward_swiglu(x, linear)
            prefetch("down_proj", layer.down_proj.weight)
            # (the step's last norm stays apart when weight prefetches must be joined before it)
            normed = None if last and plan else layer.down_proj.forward_add_norm(
                act, residual, self.norm if last else self._norm_weight(self.layers[i + 1].input_norm),
                cfg.rms_norm_eps, gated=gated)
            if normed is None:
                h = layer.down_proj.forward(act, linear, gated=gated, reduce=reduce)
            if not last:
                prefetch("qkv_proj", self.layers[i + 1].qkv_proj.weight)
            else:
                prefetch("lm_head", self.lm_head.weight)
        if normed is not None:
            return normed
        kw = self._join_prefetches(plan)
        out, _ = add_norm(h, self.norm, residual, **kw)
        return out

    def enable_lora(self, max_loras: int, max_rank: int) -> LoRAStack:
        """Serve LoRA adapters from ``max_loras`` slots of rank <= ``max_rank`` (:class:`LoRAStack`, returned:
        the engine loads adapters into it). A step with adapters (``forward``'s ``lora_slots``) then runs
        :meth:`_forward_lora`: each projection's update added to its output, or (QKV with rope, gate/up with the
        SiLU-and-mul, where their GEMVs run) inside its epilogue; a step without runs as before."""
        if self.config.sandwich_norms:
            raise ValueError(f"LoRA adapters are not supported for {self.config.model_type} (Gemma's layers)")
        if self.quantization is not None:
            raise ValueError(f"LoRA adapters are not supported with quantization={self.quantization!r}")
        if self.fold_norms:  # an adapter's A must see the normed rows times the norm's weight
            raise ValueError("LoRA adapters need fuse_norms off (the norm weights are folded into the projections)")
        self.lora = LoRAStack(self, max_loras, max_rank, backend=self.options.op_backend)
        return self.lora

    def _forward_lora(self, h, positions, meta, kv_caches, slots: tuple) -> torch.Tensor:
        """The layers with each token's adapter update (``self.lora``; ``slots``: :meth:`LoRAStack.step_rows`').
        Where the QKV GEMV with rope and the KV write runs (decode sizes, ``fuse_qkv_rope``), and the gate/up GEMV
        with the SiLU-and-mul (``fuse_swiglu``), the update is computed first (``LoRAStack.delta``) and added in
        their epilogues; elsewhere it is added to the projection's output after it (``LoRAStack.apply``)."""
        ops, linear, eps, lora = self.ops, self.linear, self.config.rms_norm_eps, self.lora
        # a row-parallel projection's update joins this rank's partial sum, before the all-reduce (in the projection,
        # or in the residual add + RMSNorm after it: _add_norm)
        reduce = self._reduces_apart
        residual = None
        for i, (layer, (k_cache, v_cache)) in enumerate(zip(self.layers, kv_caches)):
            if residual is None:
                residual = h
                x, _ = ops.rms_norm(h, layer.input_norm, eps)
            else:
                x, residual = self._add_norm(h, layer.input_norm, residual)
            roped = self._qkv_rope(x, layer)
            if roped:
                qkv = layer.qkv_proj.forward_rope_kv(x, linear, positions, self.layer_cos_sin[i], k_cache, v_cache,
                                                     self._layer_meta(meta, i).slot_mapping,
                                                     addend=lora.delta(i, "qkv_proj", x, slots),
                                                     **_kv_scale(layer, k_cache))
            else:
                qkv = lora.apply(i, "qkv_proj", x, layer.qkv_proj.forward(x, linear), slots)
            attn = self._attend(qkv, positions, meta, k_cache, v_cache, layer, roped=roped)
            h = self._reduced(lora.apply(i, "o_proj", attn, layer.o_proj.forward(attn, linear, reduce=False), slots))
            x, residual = self._add_norm(h, layer.post_norm, residual)
            if layer.moe is not None:
                h = layer.moe.forward(x, linear, ops, reduce=reduce)
                continue
            if self._swiglu(x, layer):
                act = layer.gate_up_proj.forward_swiglu(x, linear, addend=lora.delta(i, "gate_up_proj", x, slots))
            else:
                act = ops.silu_and_mul(lora.apply(i, "gate_up_proj", x, layer.gate_up_proj.forward(x, linear),
                                                  slots))
            h = self._reduced(lora.apply(i, "down_proj", act, layer.down_proj.forward(act, linear, reduce=False),
                                         slots))
        out, _ = self._add_norm(h, self.norm, residual)
        return out

    def _reduced(self, partial: torch.Tensor) -> torch.Tensor:
        """A row-parallel projection's partial sums, all-reduced here where :meth:`_add_norm` does not."""
        return self.group.all_reduce(partial) if self._reduces_apart and self.group.world_size > 1 else partial

    @property
    def _reduces_apart(self) -> bool:
        """Whether a row-parallel projection all-reduces its output itself: False where the group fuses that
        all-reduce with the residual add and RMSNorm after it (:meth:`_add_norm` then takes the partial sums)."""
        return self.group.world_size == 1 or self.group.all_reduce_rms_norm is None

    def _add_norm(self, h: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, **kw):
        """``residual += h``, then the RMSNorm of it: (normed rows, residual). Where the group fuses it (see
        :attr:`_reduces_apart`) h is this rank's partial sum and its all-reduce runs in the same kernel."""
        if not self._reduces_apart:
            normed = self.group.all_reduce_rms_norm(h, residual, weight, self.config.rms_norm_eps)
            if normed is not None:
                return normed, residual  # 16-bit rows: a W8A8 projection quantizes them itself
            h = self.group.all_reduce(h)  # a message the group leaves to its plain all-reduce
        return self.ops.rms_norm(h, weight, self.config.rms_norm_eps, residual, **kw)

    @property
    def _norms_chain(self) -> bool:
        """``fuse_norms`` asked for and possible here (one rank, triton ops); it runs where the GEMVs do."""
        return (self.options.fuse_norms and self.group.world_size == 1 and self.ops.backend == "triton"
                and not self.config.num_experts and not self.config.sandwich_norms)

    def _norms_in_gemvs(self, T: int) -> bool:
        """Whether a step of T tokens runs the RMSNorms inside the GEMVs (``ModelOptions.fuse_norms``)."""
        if not self._norms_chain:
            return False
        layer = self.layers[0]
        return self.linear.gemv_runs(T, layer.qkv_proj.weight, layer.o_proj.weight, layer.gate_up_proj.weight,
                                     layer.down_proj.weight)

    def _forward_norms_in_gemvs(self, h, positions, meta, kv_caches, plan, prefetch) -> torch.Tensor:
        """The layers with each RMSNorm inside the GEMV after it and each residual add inside the GEMV before
        it: h is the residual stream, updated in place by o_proj and down_proj."""
        linear, eps = self.linear, self.config.rms_norm_eps
        for i, (layer, (k_cache, v_cache)) in enumerate(zip(self.layers, kv_caches)):
            qkv = layer.qkv_proj.forward_normed(h, self._folded_or(layer.input_norm), eps, linear)
            prefetch("o_proj", layer.o_proj.weight)
            layer.o_proj.forward_residual(self._attend(qkv, positions, meta, k_cache, v_cache, layer), h, linear)
            prefetch("gate_up_proj", layer.gate_up_proj.weight)
            gate_up = layer.gate_up_proj.forward_normed(h, self._folded_or(layer.post_norm), eps, linear)
            prefetch("down_proj", layer.down_proj.weight)
            layer.down_proj.forward_residual(gate_up, h, linear, gated=True)  # SiLU-and-mul inside too
            if i + 1 < len(self.layers):
                prefetch("qkv_proj", self.layers[i + 1].qkv_proj.weight)
            else:
                prefetch("lm_head", self.lm_head.weight)
        out, _ = self.ops.rms_norm(h, self.norm, eps, **self._join_prefetches(plan))
        return out

    def _forward_sandwich(self, h, positions, meta, kv_caches, plan, prefetch) -> torch.Tensor:
        """Gemma's layers: each sublayer's input and output RMS-normed. A sublayer's output norm, the residual
        add and the next input norm run as one launch (``rms_norm``'s ``pre_weight``: two norms a layer where
        four were launched); the MLP is a GeGLU."""
        ops, linear, eps = self.ops, self.linear, self.config.rms_norm_eps
        act_and_mul = ops.gelu_tanh_and_mul if self.config.hidden_act == "gelu_tanh" else ops.silu_and_mul
        residual = None
        out_norm = None  # the MLP output norm of the layer before, applied in the next norm's launch
        for i, (layer, (k_cache, v_cache)) in enumerate(zip(self.layers, kv_caches)):
            if residual is None:
                x, _ = ops.rms_norm(h, layer.input_norm, eps)
                residual = h
            else:
                x, residual = ops.rms_norm(h, layer.input_norm, eps, residual, pre_weight=out_norm)
            qkv = layer.qkv_proj.forward(x, linear)
            prefetch("o_proj", layer.o_proj.weight)
            attn = layer.o_proj.forward(self._attend(qkv, positions, meta, k_cache, v_cache, layer), linear)
            prefetch("gate_up_proj", layer.gate_up_proj.weight)
            x, residual = ops.rms_norm(attn, layer.post_norm, eps, residual, pre_weight=layer.attn_out_norm)
            act = act_and_mul(layer.gate_up_proj.forward(x, linear))
            prefetch("down_proj", layer.down_proj.weight)
            h, out_norm = layer.down_proj.forward(act, linear), layer.mlp_out_norm
            prefetch("qkv_proj" if i + 1 < len(self.layers) else "lm_head",
                     (self.layers[i + 1].qkv_proj if i + 1 < len(self.layers) else self.lm_head).weight)
        out, _ = ops.rms_norm(h, self.norm, eps, residual, pre_weight=out_norm, **self._join_prefetches(plan))
        return out

    def _folded_or(self, weight: torch.Tensor) -> torch.Tensor | None:
        """A norm weight for a fused GEMV: None where it is folded into the GEMV's weight."""
        return None if self.norms_folded else weight

    def _join_prefetches(self, plan) -> dict:
        """Prefetches only read weights: joined once, before the step ends, ahead of a kernel launched without
        programmatic dependence (a join edge and a programmatic edge are not mixed). The norm's kwargs."""
        if not plan:
            return {}
        self.prefetcher.join()
        return {"pdl": False} if self.ops.backend == "triton" else {}

    def _norm_quantizes(self, proj) -> bool:
        """Whether the RMSNorm before ``proj`` writes its rows quantized to fp8 (``fuse_act_quant``: ``proj`` is
        a W8A8 projection, which then takes them as they are)."""
        return self.options.fuse_act_quant and proj is not None and self.linear.quantizes_input(proj.weight)

    def _swiglu(self, x: torch.Tensor, layer) -> bool:
        """Whether this step's gate/up projection runs with the SiLU-and-mul in its epilogue (``fuse_swiglu``)."""
        return self.options.fuse_swiglu and self.linear.gemv_chosen(x.shape[0], layer.gate_up_proj.weight)

    @property
    def _qkv_rope_possible(self) -> bool:
        """``fuse_qkv_rope`` asked for and possible for this model: not with query/key head norms (Qwen3,
        Gemma 3), which the epilogue does not apply, nor in Gemma's layers (``_forward_sandwich``). Where not,
        the QKV projection runs plain, with the configurations tuned plain (``_wanted_way``)."""
        return (self.options.fuse_qkv_rope and self.fused_rope_kv and not self.config.qk_norm
                and not self.config.sandwich_norms)

    def _qkv_rope(self, x: torch.Tensor, layer) -> bool:
        """Whether this step's QKV projection runs with rope and the KV write inside (``fuse_qkv_rope``)."""
        return self._qkv_rope_possible and self.linear.gemv_runs(x.shape[0], layer.qkv_proj.weight)

    def _layer_meta(self, meta: AttentionMetadata, i: int) -> AttentionMetadata:
        """The step as layer ``i`` sees it: its window pool's slots and pages where it has a sliding window
        and the runner keeps those layers apart (``meta.window``)."""
        return meta.window if meta.window is not None and self.layer_windowed[i] else meta

    def _attend(self, qkv, positions, meta, k_cache, v_cache, layer, *, roped: bool = False) -> torch.Tensor:
        """qkv ``[T, (hq + 2 hkv) d]`` -> attention output ``[T, hq d]``: (``qk_norm``) the query and key heads'
        RMSNorms, rope, the KV-cache write, attention (``roped``: the projection did rope and the write; never
        with ``qk_norm``)."""
        T, hq, hkv, d = qkv.shape[0], self.num_heads, self.num_kv_heads, self.config.head_dim
        q = qkv[:, : hq * d].view(T, hq, d)
        k = qkv[:, hq * d: (hq + hkv) * d].view(T, hkv, d)
        v = qkv[:, (hq + hkv) * d:].view(T, hkv, d)
        # Qwen3: each query and key head RMS-normed over head_dim before rope, in the rope kernel
        kw = {} if layer.q_norm is None else {"qk_norm": (layer.q_norm, layer.k_norm, self.config.rms_norm_eps)}
        attention, cos_sin = self.layer_attention[layer.index], self.layer_cos_sin[layer.index]
        meta = self._layer_meta(meta, layer.index)
        scales = _kv_scale(layer, k_cache)
        if roped:
            attn = attention.attend(q, k_cache, v_cache, meta, self.scale, **scales)
        elif self.fused_rope_kv:
            self.ops.rope_write_kv(q, k, v, positions, cos_sin, k_cache, v_cache, meta.slot_mapping, **kw, **scales)
            attn = attention.attend(q, k_cache, v_cache, meta, self.scale, **scales)  # [T, hq, d]
        else:
            self.ops.rope(q, k, positions, cos_sin, **kw)
            attn = attention(q, k, v, k_cache, v_cache, meta, self.scale, **scales)
        return attn.reshape(T, hq * d)

    @torch.inference_mode()
    def compute_logits(self, hidden: torch.Tensor, *, as_computed: bool = False) -> torch.Tensor:
        """hidden: [S, hidden] -> fp32 logits [S, vocab]; ``as_computed``: in the dtype the LM head computed
        them in where this rank holds the whole vocabulary (no fp32 copy), else fp32 as gathered. Gemma 2's
        ``final_logit_softcapping`` c: ``c * tanh(logits / c)``."""
        if as_computed and self.lm_head.group.world_size == 1:
            logits = self.lm_head.forward(hidden, self.linear, gather=False)
        else:
            logits = self.lm_head.forward(hidden, self.linear)
        cap = self.config.final_logit_softcapping
        return logits if cap is None else logits.div_(cap).tanh_().mul_(cap)  # Gemma 2: cap * tanh(logits / cap)
