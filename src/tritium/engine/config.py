"""Model and engine configuration.

:class:`ModelConfig` describes a Llama-family decoder (Llama 2/3, Qwen2, Mistral, SmolLM2) and is built
from a Hugging Face ``config.json`` or from GGUF metadata. :class:`EngineConfig` holds the serving knobs
(KV-cache size, batching budget, backends).
"""

from __future__ import annotations

import dataclasses
import math

import torch


class UnsupportedModelError(ValueError):
    """The checkpoint describes a model this engine cannot run (architecture, rope scaling, ...)."""


# Hugging Face `architectures` / `model_type` values and GGUF `general.architecture` values we run.
SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "mistral")
_ARCHITECTURE_TO_TYPE = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "MistralForCausalLM": "mistral",
}
ROPE_SCALING_TYPES = ("default", "linear", "dynamic", "llama3", "yarn")
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclasses.dataclass
class ModelConfig:
    """Shape and numerics of a Llama-family decoder.

    Attributes mirror Hugging Face names. ``rope_scaling`` is ``None`` or a dict with ``rope_type`` in
    ``ROPE_SCALING_TYPES`` and its parameters under transformers' names, completed with transformers'
    defaults (``original_max_position_embeddings`` = ``max_position_embeddings`` for llama3 and yarn; yarn's
    ``factor`` = their ratio); :func:`tritium.engine.reference.rope_inv_freq` and ``rope_attention_factor``
    turn it into the rope table. ``dynamic`` (NTK) scaling only changes positions past
    ``max_position_embeddings``, where the engine's table (and ``max_model_len``) stops: within it the
    rope is the default one, as in transformers. A GGUF ``rope_freqs`` tensor (Llama 3.1+ files) divides
    the per-frequency inverse wavelengths instead, as llama.cpp does.
    """

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    attention_bias: bool = False
    tie_word_embeddings: bool = False
    sliding_window: int | None = None
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    torch_dtype: torch.dtype | None = None

    def __post_init__(self):
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise UnsupportedModelError(
                f"model_type {self.model_type!r} is not supported; expected one of {', '.join(SUPPORTED_MODEL_TYPES)}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise UnsupportedModelError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})")
        self.rope_scaling = _normalise_rope_scaling(self.rope_scaling, self.max_position_embeddings)

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @classmethod
    def from_hf_dict(cls, cfg: dict) -> "ModelConfig":
        """From the contents of a Hugging Face ``config.json`` (transformers 4.x or 5.x layout)."""
        archs = cfg.get("architectures") or []
        model_type = cfg.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            known = [_ARCHITECTURE_TO_TYPE[a] for a in archs if a in _ARCHITECTURE_TO_TYPE]
            if not known:
                raise UnsupportedModelError(
                    f"architecture {archs or model_type!r} is not supported; expected one of "
                    f"{', '.join(_ARCHITECTURE_TO_TYPE)}")
            model_type = known[0]
        # transformers 5 keeps rope_theta and scaling in `rope_parameters`; 4.x in `rope_theta`/`rope_scaling`.
        rope = dict(cfg.get("rope_parameters") or {})
        rope_theta = rope.pop("rope_theta", cfg.get("rope_theta", 10000.0))
        rope_scaling = cfg.get("rope_scaling") or (rope if rope.get("rope_type", "default") != "default" else None)
        if rope_scaling and cfg.get("original_max_position_embeddings"):  # Phi-3 style: wins, as in transformers
            rope_scaling = dict(rope_scaling, original_max_position_embeddings=cfg["original_max_position_embeddings"])
        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (eos,))
        heads = cfg["num_attention_heads"]
        use_sliding = cfg.get("use_sliding_window", model_type == "mistral")
        dtype = cfg.get("torch_dtype") or cfg.get("dtype")
        return cls(
            model_type=model_type,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_hidden_layers=cfg["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=cfg.get("num_key_value_heads") or heads,
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            max_position_embeddings=cfg.get("max_position_embeddings", 4096),
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=float(rope_theta),
            rope_scaling=rope_scaling,
            attention_bias=cfg.get("attention_bias", model_type == "qwen2"),
            tie_word_embeddings=cfg.get("tie_word_embeddings", False),
            sliding_window=cfg.get("sliding_window") if use_sliding else None,
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_ids=eos_ids,
            torch_dtype=_DTYPES.get(dtype) if isinstance(dtype, str) else None,
        )

    @classmethod
    def from_gguf_metadata(cls, meta: dict, *, has_output_weight: bool, has_qkv_bias: bool) -> "ModelConfig":
        """From GGUF key/values (``{arch}.block_count`` ...). Whether embeddings are tied and whether the
        QKV projections have biases are told by which tensors the file holds."""
        arch = meta.get("general.architecture")
        if arch not in SUPPORTED_MODEL_TYPES:
            raise UnsupportedModelError(
                f"GGUF architecture {arch!r} is not supported; expected one of {', '.join(SUPPORTED_MODEL_TYPES)}")

        def get(key, default=None):
            return meta.get(f"{arch}.{key}", default)

        heads = int(get("attention.head_count"))
        hidden = int(get("embedding_length"))
        scaling = _gguf_rope_scaling(get)
        eos = meta.get("tokenizer.ggml.eos_token_id")
        vocab = get("vocab_size") or len(meta.get("tokenizer.ggml.tokens", ()))
        return cls(
            model_type=arch,
            vocab_size=int(vocab),
            hidden_size=hidden,
            intermediate_size=int(get("feed_forward_length")),
            num_hidden_layers=int(get("block_count")),
            num_attention_heads=heads,
            num_key_value_heads=int(get("attention.head_count_kv", heads)),
            head_dim=int(get("attention.key_length", hidden // heads)),
            max_position_embeddings=int(get("context_length", 4096)),
            rms_norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-6)),
            rope_theta=float(get("rope.freq_base", 10000.0)),
            rope_scaling=scaling,
            attention_bias=has_qkv_bias,
            tie_word_embeddings=not has_output_weight,
            sliding_window=get("attention.sliding_window"),
            bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
            eos_token_ids=() if eos is None else (int(eos),),
        )


def _normalise_rope_scaling(scaling: dict | None, max_position_embeddings: int) -> dict | None:
    """``rope_scaling`` with ``rope_type`` set (from ``type`` in old configs) and transformers' defaults filled
    in; None for the default rope; UnsupportedModelError (one line) for other types or missing parameters."""
    if scaling is None:
        return None
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in ROPE_SCALING_TYPES:
        raise UnsupportedModelError(
            f"rope scaling {kind!r} is not supported; expected one of {', '.join(ROPE_SCALING_TYPES)}")
    if kind == "default":
        return None
    out = {k: v for k, v in scaling.items() if k not in ("type", "rope_theta")}
    out["rope_type"] = kind
    if kind in ("llama3", "yarn"):
        out.setdefault("original_max_position_embeddings", max_position_embeddings)
    if kind == "yarn" and out.get("factor") is None:
        out["factor"] = max_position_embeddings / out["original_max_position_embeddings"]
    if not isinstance(out.get("factor"), (int, float)) or out["factor"] <= 0:
        raise UnsupportedModelError(f"rope scaling {kind!r} needs a positive 'factor', got {out.get('factor')!r}")
    return out


# GGUF `{arch}.rope.scaling.*` keys and their transformers names (yarn).
_GGUF_YARN_KEYS = {"original_context_length": "original_max_position_embeddings",
                   "yarn_beta_fast": "beta_fast", "yarn_beta_slow": "beta_slow"}


def _gguf_rope_scaling(get) -> dict | None:
    """``rope_scaling`` from GGUF ``{arch}.rope.scaling.*`` (``get(key)`` reads ``{arch}.key``).

    llama.cpp's yarn scales cos/sin by ``attn_factor * (1 + 0.1 ln(factor))`` (``rope_yarn`` in ggml): a file
    that sets ``yarn_attn_factor`` (or the older ``attn_factor``) gets that product as ``attention_factor``.
    Llama 3.1+ files carry their llama3 scaling as the ``rope_freqs`` tensor, not here.
    """
    from tritium.engine.reference import yarn_mscale

    kind = get("rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind not in ("linear", "yarn"):
        raise UnsupportedModelError(f"GGUF rope scaling {kind!r} is not supported; expected none, linear or yarn")
    scaling = {"rope_type": kind, "factor": get("rope.scaling.factor")}
    if kind == "yarn":
        for key, name in _GGUF_YARN_KEYS.items():
            if get(f"rope.scaling.{key}") is not None:
                scaling[name] = get(f"rope.scaling.{key}")
        ext = get("rope.scaling.yarn_ext_factor")
        if ext is not None and ext != 1.0:
            raise UnsupportedModelError(f"GGUF yarn_ext_factor {ext} is not supported; expected 1.0")
        attn = get("rope.scaling.yarn_attn_factor", get("rope.scaling.attn_factor"))
        if attn is not None and scaling["factor"] is not None:
            scaling["attention_factor"] = float(attn) * yarn_mscale(scaling["factor"])
    return scaling


@dataclasses.dataclass
class EngineConfig:
    """Serving knobs.

    - ``block_size``: tokens per KV-cache page (a multiple of 16).
    - ``num_blocks`` / ``kv_cache_memory``: KV-cache size as a page count or a byte budget; when neither is
      given it is sized from free GPU memory (``gpu_memory_utilization``) or, on the CPU, from
      ``max_num_seqs * max_model_len`` tokens.
    - ``max_num_batched_tokens``: token budget of one step (chunked prefill splits longer prompts).
    - ``max_num_seqs``: sequences running at once; also the largest CUDA-graph batch.
    - ``attention_backend``: ``"triton"`` (tritium's paged attention) or ``"torch"`` (PyTorch SDPA over
      gathered pages). ``op_backend``: ``"triton"`` (fused RMSNorm, RoPE, SiLU-and-mul) or ``"torch"``.
      ``None`` picks triton on a GPU and torch on the CPU.
    - ``linear_backend``: projections of decode batches of 1-4 rows: ``"auto"`` (time cuBLAS and tritium's
      Triton GEMV on the loaded weights at start-up, keep the faster per shape), ``"triton"`` (always the
      GEMV) or ``"torch"`` (always ``F.linear``). ``None`` picks auto on a GPU and torch on the CPU.
    - ``weight_prefetch``: in decode steps, prefetch projection weights into L2 while the small kernels
      before them run (NVIDIA Hopper or newer; :mod:`tritium.engine.prefetch`). Off by default: on the H100
      it bought nothing measurable (bench/NOTES.md). ``None``: on where the GPU supports it; after start-up
      it reads whether it is active.
    - ``cuda_graphs``: capture decode steps for bucketed batch sizes (GPU only).
    - ``decode_steps``: up to this many greedy decode steps of an unchanged batch run back to back (CUDA
      graph replays, or eager steps without graphs), the next token fed on the device, before the host
      reads their tokens; the next window is queued from the device's state before that read, so the
      host's per-step work overlaps the GPU. A sequence that stops on EOS or a stop string wastes the
      rest of its window and of the one queued after it. 1 syncs every step.
    """

    block_size: int = 16
    num_blocks: int | None = None
    kv_cache_memory: int | None = None
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 64
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    attention_backend: str | None = None
    op_backend: str | None = None
    linear_backend: str | None = None
    weight_prefetch: bool | None = False
    cuda_graphs: bool = True
    decode_steps: int = 8
    dtype: torch.dtype | None = None
    device: torch.device | None = None

    def validate(self) -> None:
        """Raise TypeError/ValueError naming the bad field, what it must be and the value given."""
        for name in ("block_size", "max_num_batched_tokens", "max_num_seqs", "decode_steps"):
            _check_int(name, getattr(self, name))
        for name in ("num_blocks", "kv_cache_memory", "max_model_len"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name))
        if self.dtype is not None and self.dtype not in _DTYPES.values():
            raise TypeError(f"dtype must be None or one of torch.float32, torch.float16, torch.bfloat16, "
                            f"got {self.dtype!r}")
        if not isinstance(self.gpu_memory_utilization, (int, float)) or isinstance(self.gpu_memory_utilization, bool):
            raise TypeError(f"gpu_memory_utilization must be a float, got {self.gpu_memory_utilization!r}")
        if self.block_size <= 0 or self.block_size % 16:
            raise ValueError(f"block_size must be a positive multiple of 16, got {self.block_size}")
        for name in ("attention_backend", "op_backend"):
            value = getattr(self, name)
            if value not in (None, "triton", "torch"):
                raise ValueError(f"{name} must be 'triton', 'torch' or None, got {value!r}")
        if self.linear_backend not in (None, "auto", "triton", "torch"):
            raise ValueError(f"linear_backend must be 'auto', 'triton', 'torch' or None, got {self.linear_backend!r}")
        for name in ("weight_prefetch", "cuda_graphs", "enable_prefix_caching", "enable_chunked_prefill"):
            value = getattr(self, name)
            if not isinstance(value, bool) and not (name == "weight_prefetch" and value is None):
                raise TypeError(f"{name} must be True or False{' or None' if name == 'weight_prefetch' else ''}, "
                                f"got {value!r}")
        if self.max_num_batched_tokens < 1:
            raise ValueError(f"max_num_batched_tokens must be >= 1, got {self.max_num_batched_tokens}")
        if not 1 <= self.decode_steps <= 64:
            raise ValueError(f"decode_steps must be in [1, 64], got {self.decode_steps}")
        if self.max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {self.max_num_seqs}")
        for name in ("num_blocks", "kv_cache_memory", "max_model_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")

    def blocks_per_seq(self) -> int:
        return math.ceil(self.max_model_len / self.block_size)


def _check_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
