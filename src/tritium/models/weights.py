"""Loading checkpoints: a Hugging Face model directory (config.json + safetensors) or a GGUF file.

Both produce a :class:`~tritium.models.config.ModelConfig` and tensors under Hugging Face names
(``model.layers.0.self_attn.q_proj.weight`` ...), which :meth:`tritium.models.llama.LlamaModel.load_weights`
consumes. GGUF tensors are dequantised at load time with the ``gguf`` package, and the Q/K projections
that llama.cpp's converter permutes for its interleaved rope are permuted back.
"""

from __future__ import annotations

import glob
import json
import os
import re
from typing import Iterator

import numpy as np
import torch

from tritium.models.config import ModelConfig

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
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
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
    return os.path.isfile(path) and path.endswith(".gguf")


def check_model_path(path: str) -> None:
    """Raise FileNotFoundError (one line) unless ``path`` is a GGUF file or a directory with config.json
    and safetensors weights."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"model path {path!r} does not exist (expected a model directory or a .gguf file)")
    if os.path.isfile(path):
        if not path.endswith(".gguf"):
            raise FileNotFoundError(f"model file {path!r} is not a .gguf file")
        return
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"model directory {path!r} has no config.json")
    if not glob.glob(os.path.join(path, "*.safetensors")):
        raise FileNotFoundError(f"model directory {path!r} has no *.safetensors weights")


# ---------------------------------------------------------------------------------------------------------
# Hugging Face directory
# ---------------------------------------------------------------------------------------------------------

def load_hf_config(path: str) -> ModelConfig:
    with open(os.path.join(path, "config.json")) as f:
        cfg = ModelConfig.from_hf_dict(json.load(f))
    gen_path = os.path.join(path, "generation_config.json")
    if os.path.isfile(gen_path):
        with open(gen_path) as f:
            eos = json.load(f).get("eos_token_id")
        if eos is not None:
            cfg.eos_token_ids = tuple(eos) if isinstance(eos, list) else (eos,)
    return cfg


def iter_hf_weights(path: str, *, progress: bool = False) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, CPU tensor) for every tensor of every ``*.safetensors`` shard in ``path``."""
    from safetensors import safe_open

    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    handles = [safe_open(f, framework="pt") for f in files]
    names = [(h, n) for h in handles for n in h.keys()]
    for handle, name in _progress(names, len(names), "loading weights", progress):
        yield name, handle.get_tensor(name)


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
    reader = gguf.GGUFReader(path)
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        meta[key] = field.contents()
    return reader, meta


def load_gguf_config(reader, meta: dict) -> ModelConfig:
    names = {t.name for t in reader.tensors}
    return ModelConfig.from_gguf_metadata(
        meta, has_output_weight="output.weight" in names, has_qkv_bias="blk.0.attn_q.bias" in names)


def unpermute_rope(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo llama.cpp's ``permute`` of a Q/K projection ``[n_heads * head_dim, ...]``.

    The converter regroups each head's rows from (half, pair) to (pair, half) order so that llama.cpp's
    interleaved rope matches Hugging Face's rotate-half rope; this is the inverse.
    """
    shape = w.shape
    return w.reshape(n_heads, shape[0] // n_heads // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def iter_gguf_weights(reader, config: ModelConfig, *, progress: bool = False
                      ) -> Iterator[tuple[str, torch.Tensor]]:
    """(Hugging Face name, float32 CPU tensor) for every tensor of a GGUF file, dequantised.

    ``rope_freqs.weight`` (Llama 3.1+ files: llama3 rope scaling as per-frequency factors) comes out as
    ``rope_freqs``; the model divides its rope inverse frequencies by it, as llama.cpp does.
    """
    gguf = _import_gguf()
    permuted = config.model_type in ("llama", "mistral")
    layer = re.compile(r"blk\.(\d+)\.(.+)")
    for t in _progress(reader.tensors, len(reader.tensors), "dequantising weights", progress):
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))
        arr = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False).reshape(shape)
        if t.name == "rope_freqs.weight":
            yield "rope_freqs", _to_torch(arr)
            continue
        m = layer.fullmatch(t.name)
        if m:
            suffix = _GGUF_LAYER_NAMES.get(m.group(2))
            if suffix is None:
                raise ValueError(f"GGUF tensor {t.name!r} is not part of a supported Llama-family model")
            if permuted and m.group(2).startswith("attn_q."):
                arr = unpermute_rope(arr, config.num_attention_heads)
            elif permuted and m.group(2).startswith("attn_k."):
                arr = unpermute_rope(arr, config.num_key_value_heads)
            name = f"model.layers.{m.group(1)}.{suffix}"
        elif t.name in _GGUF_NAMES:
            name = _GGUF_NAMES[t.name]
        else:
            raise ValueError(f"GGUF tensor {t.name!r} is not part of a supported Llama-family model")
        yield name, _to_torch(arr)


def _to_torch(arr: np.ndarray) -> torch.Tensor:
    """A tensor owning a copy when ``arr`` is a read-only view of the memory-mapped file."""
    return torch.from_numpy(arr if arr.flags.writeable and arr.flags.c_contiguous else np.array(arr))
