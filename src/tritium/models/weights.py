"""Loading checkpoints: a Hugging Face model directory (config.json + safetensors) or a GGUF file.

Both produce a :class:`~tritium.models.config.ModelConfig` and tensors under Hugging Face names
(``model.layers.0.self_attn.q_proj.weight`` ...), which :meth:`tritium.models.llama.LlamaModel.load_weights`
consumes. GGUF tensors are dequantised at load time with the ``gguf`` package, and the Q/K projections
that llama.cpp's converter permutes for its interleaved rope are permuted back.

With ``lazy=True`` the iterators yield :class:`LazyTensor` objects instead of full tensors: a
tensor-parallel rank indexes each one with its shard's row or column range and reads (dequantises) only
that, so no rank holds the whole model in memory. :class:`RandomWeights` is the same kind of source for
random benchmark weights.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import logging
import os
import re
from typing import Iterator

import numpy as np
import torch

from tritium.models.config import Fp8Blocks, ModelConfig, UnsupportedModelError
from tritium.models.int4_formats import group_size_from_shapes

log = logging.getLogger(__name__)

_GGUF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_GGUF_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    # mixtures of experts: the router, and each projection of every expert stacked ([E, I, H] / [E, H, I])
    "ffn_gate_inp.weight": "mlp.gate.weight",
    "ffn_gate_exps.weight": "mlp.experts.gate_proj",
    "ffn_up_exps.weight": "mlp.experts.up_proj",
    "ffn_down_exps.weight": "mlp.experts.down_proj",
    # Qwen2-MoE's shared expert and its gate (a [hidden] vector in the file)
    "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
    "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
}
# Phi-3's fused tensors (llama.cpp's phi3 architecture: gate and up in ffn_up)
_GGUF_PHI3_NAMES = {"attn_qkv.weight": "self_attn.qkv_proj.weight", "ffn_up.weight": "mlp.gate_up_proj.weight"}
# Gemma's four norms a layer: ffn_norm is the MLP's input norm, the other two norm the sublayers' outputs
_GGUF_SANDWICH_NAMES = {
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight",
    "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
}


def _progress(iterable, total: int, desc: str, enabled: bool):
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc=desc, unit="tensor", leave=False)


def is_gguf(path: str) -> bool:
    """``path`` is a file named ``*.gguf`` (any case: ``.GGUF`` too)."""
    return os.path.isfile(path) and path.lower().endswith(".gguf")


# PyTorch pickle checkpoints (transformers' pytorch_model*.bin, Meta's consolidated.*.pth): not loaded (a pickle
# can run code as it loads), named when a directory has no other weights (not training_args.bin and the like)
_PICKLE_WEIGHTS = ("pytorch_model*.bin", "model*.bin", "consolidated*.pth", "consolidated*.pt")


def check_model_path(path: str) -> None:
    """Raise FileNotFoundError (one line) unless ``path`` is a GGUF file or a directory with config.json
    and safetensors weights. A directory that also holds ``.gguf`` files loads its safetensors weights, with a
    warning naming the GGUF files (a GGUF file runs when its own path is given)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"model path {path!r} does not exist (expected a model directory or a .gguf file)")
    if os.path.isfile(path):
        if not is_gguf(path):
            raise FileNotFoundError(f"model file {path!r} is not a .gguf file")
        return
    ggufs = sorted(f for f in os.listdir(path) if f.lower().endswith(".gguf")
                   and os.path.isfile(os.path.join(path, f)))
    if not os.path.isfile(os.path.join(path, "config.json")):
        hint = f"; to run its GGUF file give that file's path: {os.path.join(path, ggufs[0])!r}" if ggufs else ""
        raise FileNotFoundError(f"model directory {path!r} has no config.json{hint}")
    if not weight_files(path):
        pickles = sorted({os.path.basename(f) for pattern in _PICKLE_WEIGHTS
                          for f in glob.glob(os.path.join(path, pattern))})
        if pickles:
            shown = ", ".join(pickles[:4]) + (f" and {len(pickles) - 4} more" if len(pickles) > 4 else "")
            raise FileNotFoundError(f"model directory {path!r} has no *.safetensors weights, only PyTorch pickle "
                                    f"checkpoints ({shown}), which are not supported: tritium needs safetensors "
                                    f"weights or a GGUF file (convert them, e.g. with transformers' "
                                    f"save_pretrained(..., safe_serialization=True))")
        raise FileNotFoundError(f"model directory {path!r} has no *.safetensors weights")
    if ggufs:
        log.warning("model directory %r holds safetensors weights and %s: loading the safetensors weights (give a "
                    ".gguf file's path to run it instead)", path, ", ".join(ggufs))


# ---------------------------------------------------------------------------------------------------------
# Lazy tensors
# ---------------------------------------------------------------------------------------------------------

class LazyTensor:
    """A checkpoint tensor read on demand: only the part that is indexed is read.

    ``shape`` (tuple) and ``dtype`` (the torch dtype it reads as) are known without reading. ``t[a:b]``
    (rows), ``t[:, c:d]`` (columns) or ``t[a:b, c:d]``: slices with step 1, one per leading dimension at
    most; the result is a new CPU or device tensor holding only that block. ``materialize()`` reads all of
    it. Subclasses implement ``_read(bounds)``: bounds is one ``(start, stop)`` per dimension, non-empty.
    ``origin``: (its name in the checkpoint, the file holding it) where the reader knows them, for messages.
    """

    origin: tuple[str, str] | None = None

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype})"

    def __getitem__(self, index) -> torch.Tensor:
        index = index if isinstance(index, tuple) else (index,)
        if len(index) > self.ndim:
            raise IndexError(f"{type(self).__name__}: {len(index)} indices for a tensor of shape {self.shape}")
        bounds = []
        for dim, size in enumerate(self.shape):
            s = index[dim] if dim < len(index) else slice(None)
            if not isinstance(s, slice):
                raise TypeError(f"{type(self).__name__}: index {dim} must be a slice, got {type(s).__name__}")
            start, stop, step = s.indices(size)
            if step != 1:
                raise ValueError(f"{type(self).__name__}: slice steps must be 1, got {step} at index {dim}")
            bounds.append((start, max(start, stop)))
        if any(stop == start for start, stop in bounds):
            return torch.empty([stop - start for start, stop in bounds], dtype=self.dtype)
        return self._read(bounds)

    def materialize(self) -> torch.Tensor:
        """The whole tensor."""
        return self[(slice(None),) * self.ndim]

    def _read(self, bounds: list[tuple[int, int]]) -> torch.Tensor:
        raise NotImplementedError


def materialize(t: torch.Tensor | LazyTensor) -> torch.Tensor:
    """``t`` itself when it is a tensor, else all of it read."""
    return t if isinstance(t, torch.Tensor) else t.materialize()


# ---------------------------------------------------------------------------------------------------------
# Hugging Face directory
# ---------------------------------------------------------------------------------------------------------

SAFETENSORS_INDEX = "model.safetensors.index.json"


def weight_files(path: str) -> list[str]:
    """The safetensors files of a model directory that hold its weights: those its index names (each must
    be there), else ``model.safetensors``, else every ``*.safetensors`` file. (Repositories such as
    Mistral's ship a ``consolidated.safetensors`` of other names beside the Hugging Face shards: not read.)"""
    index = os.path.join(path, SAFETENSORS_INDEX)
    if os.path.isfile(index):
        names = index_files(index)
        missing = [n for n in names if not os.path.isfile(os.path.join(path, n))]
        if missing:
            raise FileNotFoundError(f"model directory {path!r} lacks {', '.join(missing)} (named by "
                                    f"{SAFETENSORS_INDEX}: a partial download?)")
        return [os.path.join(path, n) for n in names]
    single = os.path.join(path, "model.safetensors")
    if os.path.isfile(single):
        return [single]
    return sorted(glob.glob(os.path.join(path, "*.safetensors")))


def index_weight_map(index: str) -> dict:
    """The ``weight_map`` (tensor name -> file) of a safetensors index; FileNotFoundError where it has none."""
    try:
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        sorted(set(weight_map.values()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise FileNotFoundError(f"{index!r} is not a safetensors index ({type(e).__name__}: {e})") from None
    return weight_map


def index_files(index: str) -> list[str]:
    names = sorted(set(index_weight_map(index).values()))
    if not names or not all(isinstance(n, str) and n.endswith(".safetensors") and "/" not in n for n in names):
        raise FileNotFoundError(f"{index!r} names no safetensors files of its directory")
    return names


# quantizers' own files, read where config.json has no quantization_config (checkpoints made before
# transformers wrote one): AutoGPTQ's, and AutoAWQ's first format, with the method each implies
_QUANT_FILES = (("quantize_config.json", "gptq"), ("quant_config.json", "awq"))


def read_json(path: str):
    """The JSON value in the file at ``path``; ValueError naming the file where it is not JSON (or not UTF-8)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path!r} is not valid JSON ({e})") from None


def load_hf_config(path: str) -> ModelConfig:
    config_path = os.path.join(path, "config.json")
    raw = read_json(config_path)
    if not isinstance(raw, dict):
        raise ValueError(f"{config_path!r} must hold a JSON object, got {type(raw).__name__}")
    for name, method in _QUANT_FILES:
        if raw.get("quantization_config") or not os.path.isfile(os.path.join(path, name)):
            continue
        try:
            with open(os.path.join(path, name)) as f:
                raw["quantization_config"] = {"quant_method": method, **json.load(f)}
        except (OSError, ValueError) as e:
            raise ValueError(f"{os.path.join(path, name)!r} is not a JSON quantization config ({e})") from None
    try:
        cfg = ModelConfig.from_hf_dict(raw)
    except KeyError as e:
        raise ValueError(f"{config_path!r} has no {e.args[0]!r}, which this model type needs") from None
    except (TypeError, AttributeError) as e:  # a field of the wrong JSON type
        raise ValueError(f"{config_path!r} has a field of an unexpected type ({e})") from None
    except UnsupportedModelError:
        raise
    except ValueError as e:  # a nonsense value, named by the config's checks
        raise ValueError(f"{config_path!r}: {e}") from None
    gen_path = os.path.join(path, "generation_config.json")
    if os.path.isfile(gen_path):
        eos = generation_eos_token_ids(gen_path, cfg.vocab_size, cfg.eos_token_ids)
        if eos is not None:
            cfg.eos_token_ids = eos
    if cfg.int4 is not None and cfg.int4.format in ("gptq", "awq"):
        cfg.int4 = dataclasses.replace(cfg.int4, group_size=_int4_group_size(path, cfg.int4.format,
                                                                             cfg.int4.group_size))
    return cfg


def generation_eos_token_ids(gen_path: str, vocab_size: int, config_ids: tuple[int, ...] = ()
                             ) -> tuple[int, ...] | None:
    """The ``eos_token_id`` of a ``generation_config.json`` (an id or a list of ids; None where absent or null),
    the one field of it tritium reads. ValueError naming the file and the field for a file that is not a JSON
    object, or an id that is not an integer: a string, a bool (JSON's true is not 1), a float or an object went
    into the stop set as it was (a stop id never sampled, or a TypeError far from the file). An integer outside
    [0, vocab_size) (an id the model cannot produce; transformers keeps it and never stops at it) is logged as a
    warning and left out; where that leaves none of the ids, the warning says so and None is returned: the model
    stops at ``config_ids`` (config.json's ``eos_token_id``) and the tokenizer's EOS token."""
    gen = read_json(gen_path)
    if not isinstance(gen, dict):
        raise ValueError(f"{gen_path!r} must hold a JSON object, got {type(gen).__name__}")
    eos = gen.get("eos_token_id")
    if eos is None:
        return None
    named = [(f"eos_token_id[{i}]", t) for i, t in enumerate(eos)] if isinstance(eos, list) else \
        [("eos_token_id", eos)]
    for where, t in named:
        if not (isinstance(t, int) and not isinstance(t, bool)):
            raise ValueError(f"{gen_path!r}: {where} must be a token id (an integer), or eos_token_id a list of "
                             f"them; got {t!r}")
    for where, t in named:
        if not 0 <= t < vocab_size:
            log.warning("%r: %s = %d is not a token id of the model (vocab_size = %d): ignored (the model cannot "
                        "produce it)", gen_path, where, t, vocab_size)
    kept = tuple(t for _, t in named if 0 <= t < vocab_size)
    if named and not kept:
        log.warning("%r: none of eos_token_id %r is a token id of the model (vocab_size = %d): generation stops "
                    "only at config.json's eos_token_id (%s) and the tokenizer's EOS token, where they have one",
                    gen_path, eos, vocab_size, ", ".join(map(str, config_ids)) or "none")
        return None
    return kept


def _int4_group_size(path: str, fmt: str, stated: int | None) -> int:
    """A GPTQ or AWQ checkpoint's group size as its tensors' shapes give it (:func:`group_size_from_shapes`),
    read from the safetensors headers (and each GPTQ ``g_idx``'s largest value: K int32s a projection), checked
    against the ``group_size`` its quantization config states (None: not stated, as HF's GPTQConfig, AutoGPTQ
    and AutoAWQ allow)."""
    from safetensors import safe_open

    shapes, g_idx_groups = {}, {}
    for f in weight_files(path):
        try:
            handle = safe_open(f, framework="pt")
        except Exception as e:  # safetensors' SafetensorError: a truncated or corrupt header
            raise ValueError(f"{f!r} is not a readable safetensors file ({e})") from None
        for name in handle.keys():
            if name.endswith((".qweight", ".qzeros", ".scales", ".g_idx")):
                shapes[name] = tuple(handle.get_slice(name).get_shape())
            if name.endswith(".g_idx") and len(shapes[name]) == 1 and shapes[name][0]:
                g_idx = handle.get_tensor(name)
                if not g_idx.dtype.is_floating_point:
                    g_idx_groups[name] = int(g_idx.max()) + 1
    try:
        return group_size_from_shapes(fmt, shapes, stated, g_idx_groups)
    except ValueError as e:
        raise ValueError(f"{path!r}: {e}") from None


class SafetensorsTensor(LazyTensor):
    """One tensor of an open safetensors file; an index reads only its bytes (``safe_open().get_slice``)."""

    def __init__(self, handle, name: str):
        self._handle, self._name = handle, name
        self._slice = handle.get_slice(name)
        shape = tuple(self._slice.get_shape())
        # the dtype as safetensors converts it, from an empty read (a 0-d tensor is read whole)
        super().__init__(shape, (self._slice[0:0] if shape else handle.get_tensor(name)).dtype)

    def _read(self, bounds):
        if all(stop - start == size for (start, stop), size in zip(bounds, self.shape)):
            return self._handle.get_tensor(self._name)
        return self._slice[tuple(slice(start, stop) for start, stop in bounds)]


class BlockFp8Tensor(LazyTensor):
    """A weight of a block-wise FP8 checkpoint (:class:`~tritium.models.config.Fp8Blocks`), read dequantized
    as float32: each float8 value times the scale of its ``rows`` x ``cols`` block of the last two dimensions
    (blocks at the right and bottom edges may be partial). Exact: a float8 value times an fp32 scale is an
    fp32 product of at most 4 + 24 significant bits, rounded once. An index reads only the weight's part and
    the scales of the blocks it touches, so a tensor-parallel rank dequantizes only its shard."""

    def __init__(self, name: str, weight: torch.Tensor | LazyTensor, scale: torch.Tensor | LazyTensor,
                 blocks: Fp8Blocks):
        shape = tuple(weight.shape)
        if weight.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2) or len(shape) < 2:
            raise ValueError(f"{name}: a block-wise FP8 checkpoint's weight beside a scale must be a float8 tensor of "
                             f"2 or more dimensions, got {weight.dtype} of shape {shape}")
        expected = shape[:-2] + (-(-shape[-2] // blocks.rows), -(-shape[-1] // blocks.cols))
        if tuple(scale.shape) != expected:
            raise ValueError(f"{name}{blocks.scale_suffix}: shape {tuple(scale.shape)}, expected {expected} (one scale "
                             f"per {blocks.rows} x {blocks.cols} block of the weight's {shape})")
        super().__init__(shape, torch.float32)
        self._weight, self._scale, self._blocks = weight, scale, blocks

    def _read(self, bounds):
        br, bc = self._blocks.rows, self._blocks.cols
        (r0, r1), (c0, c1) = bounds[-2:]
        w = self._weight[tuple(slice(a, b) for a, b in bounds)]
        s = self._scale[tuple(slice(a, b) for a, b in bounds[:-2])
                        + (slice(r0 // br, (r1 - 1) // br + 1), slice(c0 // bc, (c1 - 1) // bc + 1))]
        s = s.float().repeat_interleave(br, dim=-2).repeat_interleave(bc, dim=-1)
        s = s[..., r0 % br: r0 % br + (r1 - r0), c0 % bc: c0 % bc + (c1 - c0)]
        return w.float() * s


def iter_hf_weights(path: str, *, progress: bool = False, lazy: bool = False, fp8_blocks: Fp8Blocks | None = None
                    ) -> Iterator[tuple[str, torch.Tensor | LazyTensor]]:
    """(name, CPU tensor) for every tensor of the safetensors shards in ``path`` (those its index names:
    :func:`weight_files`); ``lazy``: (name, :class:`SafetensorsTensor`) instead, read when
    indexed (the files stay open while the iterator lives). ``fp8_blocks`` (a block-wise FP8 checkpoint):
    each float8 weight comes dequantized with its scale (:class:`BlockFp8Tensor`), the scales themselves not
    at all; a float8 tensor without a scale, or a scale without its weight, raises ValueError naming it."""
    from safetensors import safe_open

    files = weight_files(path)
    handles = []
    for f in files:
        try:
            handles.append(safe_open(f, framework="pt"))
        except Exception as e:  # safetensors' SafetensorError: a truncated or corrupt header
            raise ValueError(f"{f!r} is not a readable safetensors file ({e})") from None
    names = [(h, n) for h in handles for n in h.keys()]
    file_of = {id(h): f for f, h in zip(files, handles)}
    if os.path.isfile(os.path.join(path, SAFETENSORS_INDEX)):
        _check_index(os.path.join(path, SAFETENSORS_INDEX), files, handles)
    elif len(files) > 1:
        _check_unique_names(files, handles)
    scales = {}
    if fp8_blocks is not None:
        suffix = ".weight" + fp8_blocks.scale_suffix
        owner = {n: h for h, n in names}
        scales = {n[:-len(fp8_blocks.scale_suffix)]: (owner[n], n) for n in owner if n.endswith(suffix)}
        lost = sorted(w + fp8_blocks.scale_suffix for w in scales if w not in owner)
        if lost:
            raise ValueError(f"{path!r}: block-wise FP8 scales without their weights: {', '.join(lost[:4])}")
        names = [(h, n) for h, n in names if not n.endswith(suffix)]
    for handle, name in _progress(names, len(names), "loading weights", progress):
        t = SafetensorsTensor(handle, name)
        if name in scales:
            t = BlockFp8Tensor(name, t, SafetensorsTensor(*scales[name]), fp8_blocks)
        elif fp8_blocks is not None and t.dtype.itemsize == 1 and t.dtype.is_floating_point:
            raise ValueError(f"{name}: a float8 tensor without {name + fp8_blocks.scale_suffix} in a block-wise FP8 "
                             f"checkpoint")
        t.origin = (name, file_of[id(handle)])
        yield name, t if lazy else t.materialize()


def _check_index(index: str, files: list[str], handles) -> None:
    """ValueError naming a tensor the index places in a file that does not hold it (shards of another revision
    beside the index, or a damaged one): before, such a tensor was reported missing from its layer, without a
    file, or, where another shard had a tensor of that name, that one loaded."""
    held = {os.path.basename(f): set(h.keys()) for f, h in zip(files, handles)}
    for name, file in index_weight_map(index).items():
        if name not in held[file]:
            raise ValueError(f"tensor {name!r} is not in {os.path.join(os.path.dirname(index), file)!r}, where "
                             f"{SAFETENSORS_INDEX} places it (shards and index of different downloads?)")


def _check_unique_names(files: list[str], handles) -> None:
    """ValueError naming both files where two safetensors files of a directory without an index hold a tensor
    of the same name (which one the model is meant to have cannot be told: two exports side by side?)."""
    owner: dict[str, str] = {}
    for f, h in zip(files, handles):
        for name in h.keys():
            if name in owner:
                raise ValueError(f"tensor {name!r} is in both {owner[name]!r} and {f!r}, and no {SAFETENSORS_INDEX} "
                                 f"says which to load: remove the file that does not belong to the model, or add "
                                 f"an index")
            owner[name] = f


# ---------------------------------------------------------------------------------------------------------
# GGUF file
# ---------------------------------------------------------------------------------------------------------

def _import_gguf():
    try:
        import gguf
    except ImportError as e:
        raise ImportError("loading .gguf files needs the 'gguf' package: pip install gguf") from e
    return gguf


def read_gguf(path: str):
    """(reader, metadata dict) of a GGUF file; arrays of strings/ints come back as Python lists."""
    gguf = _import_gguf()
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, OSError, IndexError, KeyError) as e:  # numpy's errors on a short or corrupt file
        raise ValueError(f"{path!r} is truncated or not a valid GGUF file ({e})") from None
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        meta[key] = field.contents()
    return reader, meta


def gguf_path(reader) -> str:
    """The path of the file a ``gguf.GGUFReader`` reads (its memory map's), for messages."""
    return str(getattr(getattr(reader, "data", None), "filename", None) or "<GGUF file>")


def load_gguf_config(reader, meta: dict) -> ModelConfig:
    """The ModelConfig of a GGUF file. A metadata key missing or malformed raises ValueError (UnsupportedModelError
    for what is not supported) naming the file and the key; a special token id outside the vocabulary is logged
    as a warning naming them and ignored (as llama.cpp does)."""
    names = {t.name for t in reader.tensors}
    try:
        return ModelConfig.from_gguf_metadata(
            meta, has_output_weight="output.weight" in names, has_qkv_bias="blk.0.attn_q.bias" in names,
            has_qk_norm="blk.0.attn_q_norm.weight" in names, source=gguf_path(reader))
    except (ValueError, TypeError) as e:
        key = getattr(e, "gguf_key", None)
        message = f"GGUF metadata {key}: {e}" if key is not None and key not in str(e) else str(e)
        raise (UnsupportedModelError if isinstance(e, UnsupportedModelError) else ValueError)(
            f"{gguf_path(reader)!r}: {message}") from None


def unpermute_rope(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's ``permute`` of a Q/K projection ``[n_heads * head_dim, ...]``.

    The converter regroups each head's rows from (half, pair) to (pair, half) order so that llama.cpp's
    interleaved rope matches Hugging Face's rotate-half rope; this is the inverse.
    """
    shape = w.shape
    return w.reshape(n_heads, shape[0] // n_heads // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


class GGUFTensor(LazyTensor):
    """One tensor of a GGUF file under its Hugging Face shape, dequantised to float32 when indexed.

    GGUF stores the HF shape reversed (ne0 is the HF last dimension) row by row, each row a run of whole
    quantisation blocks: a row range is one contiguous byte range, and only its blocks are dequantised; a
    column range dequantises the blocks that cover it in each row. ``rope_heads``: the tensor is a Q/K
    projection (weight or bias) that llama.cpp permuted within each of that many heads; the heads that
    cover the requested rows are read and un-permuted (:func:`unpermute_rope`), so any row range equals
    the same rows of the fully un-permuted tensor.
    """

    def __init__(self, tensor, rope_heads: int | None = None):
        super().__init__(tuple(int(s) for s in reversed(tensor.shape.tolist())), torch.float32)
        if rope_heads is not None and (self.ndim not in (1, 2) or self.shape[0] % (2 * rope_heads)):
            raise ValueError(f"GGUF tensor {tensor.name!r} of shape {self.shape} cannot be un-permuted over "
                             f"{rope_heads} rope heads (rows must divide into heads of an even size)")
        self._tensor = tensor
        self._rope_heads = rope_heads

    def _read(self, bounds):
        if self._rope_heads is None:
            return _to_torch(self._dequantize(bounds))
        (start, stop), rest = bounds[0], bounds[1:]
        d = self.shape[0] // self._rope_heads                       # rows per head
        h0, h1 = start // d, -(-stop // d)                           # the heads covering [start, stop)
        heads = unpermute_rope(self._dequantize([(h0 * d, h1 * d), *rest]), h1 - h0)
        return _to_torch(heads[start - h0 * d: stop - h0 * d])

    def _dequantize(self, bounds) -> np.ndarray:
        """float32 ``[stop - start for each bound]`` of the HF-shaped tensor. A 3-D tensor (stacked experts,
        ``[E, rows, columns]``) is read as the 2-D ``[E * rows, columns]`` it is stored as, expert by expert."""
        t = self._tensor
        shape = [b - a for a, b in bounds]
        if self.ndim > 3:
            raise ValueError(f"GGUF tensor {t.name!r} has {self.ndim} dimensions; at most 3 are read")
        if self.ndim == 3:
            E, R = self.shape[:2]
            data = t.data.reshape(E * R, -1)
            (e0, e1), (r0, r1), cols = bounds
            arr = np.stack([self._rows(data, (e * R + r0, e * R + r1), cols) for e in range(e0, e1)]) if e1 > e0 \
                else np.zeros(shape, np.float32)
            return arr.reshape(shape)
        data = t.data.reshape(1, -1) if self.ndim == 1 else t.data   # [rows, elements or bytes of a row]
        rows, cols = ((0, 1), bounds[0]) if self.ndim == 1 else bounds
        return self._rows(data, rows, cols).reshape(shape)

    def _rows(self, data: np.ndarray, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
        """float32 ``[r1 - r0, c1 - c0]`` of the 2-D stored ``data`` ([rows, elements or bytes of a row])."""
        gguf = _import_gguf()
        (r0, r1), (c0, c1), kind = rows, cols, self._tensor.tensor_type
        if data.dtype == np.uint8:  # quantised: a row is blocks of `block` values in `nbytes` bytes
            block, nbytes = gguf.GGML_QUANT_SIZES[kind]
            b0, b1 = c0 // block, -(-c1 // block)
            raw = np.ascontiguousarray(data[r0:r1, b0 * nbytes: b1 * nbytes])
            arr = gguf.quants.dequantize(raw, kind)[:, c0 - b0 * block: c1 - b0 * block]
        else:
            arr = gguf.quants.dequantize(data[r0:r1, c0:c1], kind)
        return arr.astype(np.float32, copy=False)


def iter_gguf_weights(reader, config: ModelConfig, *, progress: bool = False, lazy: bool = False
                      ) -> Iterator[tuple[str, torch.Tensor | LazyTensor]]:
    """(Hugging Face name, float32 CPU tensor) for every tensor of a GGUF file, dequantised; ``lazy``:
    (name, :class:`GGUFTensor`) instead, dequantised when indexed.

    ``rope_freqs.weight`` (Llama 3.1+ files: llama3 rope scaling as per-frequency factors) comes out as
    ``rope_freqs``; the model divides its rope inverse frequencies by it, as llama.cpp does.
    """
    _check_gguf_types(reader)
    path = gguf_path(reader)
    permuted = config.model_type in ("llama", "mistral", "mixtral")  # llama.cpp's llama architecture
    layer = re.compile(r"blk\.(\d+)\.(.+)")
    names = dict(_GGUF_LAYER_NAMES, **(_GGUF_SANDWICH_NAMES if config.sandwich_norms else {}),
                 **(_GGUF_PHI3_NAMES if config.model_type == "phi3" else {}))
    for t in _progress(reader.tensors, len(reader.tensors), "dequantising weights", progress):
        rope_heads = None
        m = layer.fullmatch(t.name)
        if t.name == "rope_freqs.weight":
            name = "rope_freqs"
        elif t.name in ("rope_factors_long.weight", "rope_factors_short.weight"):
            raise ValueError(f"GGUF tensor {t.name!r}: LongRoPE (Phi-3's 128k models) is not supported")
        elif m:
            suffix = names.get(m.group(2))
            if suffix is None:
                raise ValueError(f"GGUF tensor {t.name!r} is not part of a supported Llama-family model")
            if permuted and m.group(2).startswith("attn_q."):
                rope_heads = config.num_attention_heads
            elif permuted and m.group(2).startswith("attn_k."):
                rope_heads = config.num_key_value_heads
            name = f"model.layers.{m.group(1)}.{suffix}"
        elif t.name in _GGUF_NAMES:
            name = _GGUF_NAMES[t.name]
        else:
            raise ValueError(f"GGUF tensor {t.name!r} is not part of a supported Llama-family model")
        tensor = GGUFTensor(t, rope_heads)
        tensor.origin = (t.name, path)
        yield name, tensor if lazy else tensor.materialize()


def _check_gguf_types(reader) -> None:
    """ValueError naming a tensor (and how many share its type) stored in a type the ``gguf`` package cannot
    dequantize (F64, integer tensors, Q8_1, Q8_K ...), before any weight is read: its NotImplementedError came
    from inside the package, naming neither the tensor nor the file, after the tensors before it had loaded."""
    gguf = _import_gguf()
    by_type: dict = {}
    for t in reader.tensors:
        by_type.setdefault(t.tensor_type, []).append(t.name)
    for kind, names in by_type.items():
        block, nbytes = gguf.GGML_QUANT_SIZES.get(kind, (1, 1))
        try:
            gguf.quants.dequantize(np.zeros((1, nbytes), np.uint8), kind)  # one block of zeros
        except NotImplementedError:
            more = f" (and {len(names) - 1} more tensors)" if len(names) > 1 else ""
            raise ValueError(f"GGUF tensor {names[0]!r}{more} is stored as {kind.name}, which tritium cannot "
                             f"dequantize (float F32, F16, BF16 and llama.cpp's quantized types Q4_0 ... Q8_0, "
                             f"K-quants, IQ-quants are read)") from None


def _to_torch(arr: np.ndarray) -> torch.Tensor:
    """A tensor owning a copy when ``arr`` is a read-only view of the memory-mapped file."""
    return torch.from_numpy(arr if arr.flags.writeable and arr.flags.c_contiguous else np.array(arr))


# ---------------------------------------------------------------------------------------------------------
# Random weights (benchmarks)
# ---------------------------------------------------------------------------------------------------------

RANDOM_STD = 0.02  # projections and embeddings: N(0, 0.02^2) drawn in float32, then cast; norms are 1


class RandomTensor(LazyTensor):
    """A random tensor that exists only where it is indexed: the full tensor is drawn on ``device`` from a
    generator seeded by ``seed`` (N(0, std^2) in float32; ``std=None``: all ones), sliced and cast to
    ``dtype``, and dropped. Any slice equals the same slice of the full tensor."""

    def __init__(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int,
                 std: float | None):
        super().__init__(shape, dtype)
        self.device, self.seed, self.std = device, seed, std

    def _read(self, bounds):
        index = tuple(slice(start, stop) for start, stop in bounds)
        if self.std is None:
            return torch.ones([b - a for a, b in bounds], dtype=self.dtype, device=self.device)
        if self.std == 0:
            return torch.zeros([b - a for a, b in bounds], dtype=self.dtype, device=self.device)
        g = torch.Generator(device=self.device).manual_seed(self.seed)
        full = torch.randn(self.shape, generator=g, device=self.device, dtype=torch.float32) * self.std
        return full[index].to(self.dtype, copy=True, memory_format=torch.contiguous_format)


@dataclasses.dataclass(frozen=True)
class RandomWeights:
    """Random Hugging Face-named weights for a Llama-family ``config``: a picklable description (worker
    processes rebuild the same values from it) whose :meth:`iter` yields (name, :class:`RandomTensor`).

    Distributions are those of ``tritium.bench.engine.make_weights``: projections, embeddings and the LM
    head N(0, 0.02^2) drawn in float32 and cast to ``dtype_name`` ("bfloat16", "float16", "float32"), norms
    1 (the query/key head norms of ``config.qk_norm`` too; Gemma's stored 0, applied as 1 + 0, and its
    sandwich norms' two more a layer); QKV biases (``config.attention_bias``) N(0, 0.02^2);
    ``lm_head.weight`` only when the embeddings are
    not tied. Each tensor has its own generator, seeded from (``seed``, name): the same on every rank.
    """

    config: ModelConfig
    dtype_name: str = "bfloat16"
    seed: int = 0

    def __post_init__(self):
        if not isinstance(self.config, ModelConfig):
            raise TypeError(f"RandomWeights: config must be a ModelConfig, got {type(self.config).__name__}")
        dtype = getattr(torch, self.dtype_name, None) if isinstance(self.dtype_name, str) else None
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(f"RandomWeights: dtype_name must name a floating-point torch dtype "
                             f"(e.g. 'bfloat16'), got {self.dtype_name!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise TypeError(f"RandomWeights: seed must be an int, got {self.seed!r}")

    @property
    def dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype_name)

    def shapes(self) -> dict[str, tuple[tuple[int, ...], float | None]]:
        """name -> (shape, std; None for the norms, which are ones)."""
        cfg, std = self.config, RANDOM_STD
        h, i, q, kv = cfg.hidden_size, cfg.intermediate_size, cfg.q_size, cfg.kv_size
        one = 0.0 if cfg.norm_weight_offset == 1.0 else None  # a norm applied as 1 (std 0: zeros)
        out = {"model.embed_tokens.weight": ((cfg.vocab_size, h), std), "model.norm.weight": ((h,), one)}
        if not cfg.tie_word_embeddings:
            out["lm_head.weight"] = ((cfg.vocab_size, h), std)
        for layer in range(cfg.num_hidden_layers):
            p = f"model.layers.{layer}."
            out.update({
                p + "input_layernorm.weight": ((h,), one), p + "post_attention_layernorm.weight": ((h,), one),
                p + "self_attn.q_proj.weight": ((q, h), std), p + "self_attn.k_proj.weight": ((kv, h), std),
                p + "self_attn.v_proj.weight": ((kv, h), std), p + "self_attn.o_proj.weight": ((h, q), std),
            })
            if cfg.num_experts:  # Qwen3-MoE's names: the router, then each expert's three projections
                e_i = cfg.moe_intermediate_size
                out[p + "mlp.gate.weight"] = ((cfg.num_experts, h), std)
                for e in range(cfg.num_experts):
                    out.update({p + f"mlp.experts.{e}.gate_proj.weight": ((e_i, h), std),
                                p + f"mlp.experts.{e}.up_proj.weight": ((e_i, h), std),
                                p + f"mlp.experts.{e}.down_proj.weight": ((h, e_i), std)})
                s_i = cfg.shared_expert_intermediate_size  # Qwen2-MoE's shared expert and its gate
                if s_i:
                    out.update({p + "mlp.shared_expert.gate_proj.weight": ((s_i, h), std),
                                p + "mlp.shared_expert.up_proj.weight": ((s_i, h), std),
                                p + "mlp.shared_expert.down_proj.weight": ((h, s_i), std),
                                p + "mlp.shared_expert_gate.weight": ((1, h), std)})
            else:
                out.update({p + "mlp.gate_proj.weight": ((i, h), std), p + "mlp.up_proj.weight": ((i, h), std),
                            p + "mlp.down_proj.weight": ((h, i), std)})
            if cfg.attention_bias:
                out.update({p + f"self_attn.{x}_proj.bias": ((n,), std) for x, n in (("q", q), ("k", kv), ("v", kv))})
            if cfg.qk_norm:
                out.update({p + f"self_attn.{x}_norm.weight": ((cfg.head_dim,), one) for x in "qk"})
            if cfg.sandwich_norms:
                out.update({p + f"{x}_feedforward_layernorm.weight": ((h,), one) for x in ("pre", "post")})
        return out

    def iter(self, device: torch.device | str) -> Iterator[tuple[str, RandomTensor]]:
        """(Hugging Face name, lazy random tensor on ``device``) for every tensor the model needs."""
        device = torch.device(device)
        for name, (shape, std) in self.shapes().items():
            digest = hashlib.sha256(f"{self.seed}:{name}".encode()).digest()
            yield name, RandomTensor(shape, self.dtype, device, int.from_bytes(digest[:8], "little") >> 1, std)


def random_weights(config: ModelConfig, dtype: torch.dtype, device: torch.device | str, seed: int = 0
                   ) -> Iterator[tuple[str, RandomTensor]]:
    """``RandomWeights(config, <dtype's name>, seed).iter(device)``."""
    return RandomWeights(config, str(dtype).removeprefix("torch."), seed).iter(device)
