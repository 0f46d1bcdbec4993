"""Model configuration: :class:`ModelConfig` describes a Llama-family decoder (Llama 2/3, Qwen2, Qwen3,
Mistral, SmolLM2, Phi-3 / Phi-4; Gemma 2 and Gemma 3; the mixtures of experts Mixtral, Qwen2-MoE and
Qwen3-MoE) and is built from a Hugging Face ``config.json`` or from GGUF metadata."""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
import re

import torch

from tritium.models.int4_formats import Int4Scheme, int4_scheme
from tritium.models.rope import yarn_mscale

log = logging.getLogger(__name__)


class UnsupportedModelError(ValueError):
    """The checkpoint describes a model this engine cannot run (architecture, rope scaling, ...)."""


# Hugging Face `architectures` / `model_type` values and GGUF `general.architecture` values we run.
SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral", "mixtral", "qwen2_moe", "qwen3_moe", "gemma2",
                         "gemma3_text", "phi3")
GEMMA_TYPES = ("gemma2", "gemma3_text")
_ARCHITECTURE_TO_TYPE = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Phi3ForCausalLM": "phi3",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3",  # its text model (text_config), the vision tower left out
}
# GGUF architectures (general.architecture); llama with experts is Mixtral (llama.cpp writes it so)
_GGUF_TYPES = ("llama", "qwen2", "qwen3", "mistral", "qwen2moe", "qwen3moe", "gemma2", "gemma3", "phi3")
ROPE_SCALING_TYPES = ("default", "linear", "dynamic", "llama3", "yarn")
LAYER_TYPES = ("full_attention", "sliding_attention")
HIDDEN_ACTS = ("silu", "gelu_tanh")  # the gated MLP's activation: SwiGLU, or GeGLU with tanh's GELU (Gemma)
# transformers' defaults for fields a Gemma config.json may leave out (a Gemma 3 text_config names only a few)
_GEMMA_DEFAULTS = {
    "gemma2": dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                   num_attention_heads=8, num_key_value_heads=4, head_dim=256, max_position_embeddings=8192,
                   rms_norm_eps=1e-6, query_pre_attn_scalar=256, sliding_window=4096, final_logit_softcapping=30.0,
                   attn_logit_softcapping=50.0, tie_word_embeddings=True, bos_token_id=2, eos_token_id=1,
                   hidden_activation="gelu_pytorch_tanh"),
    "gemma3_text": dict(vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                        num_attention_heads=8, num_key_value_heads=4, head_dim=256, max_position_embeddings=131072,
                        rms_norm_eps=1e-6, query_pre_attn_scalar=256, sliding_window=4096,
                        final_logit_softcapping=None, attn_logit_softcapping=None, tie_word_embeddings=True,
                        bos_token_id=2, eos_token_id=1, hidden_activation="gelu_pytorch_tanh", rope_theta=1e6,
                        rope_local_base_freq=10000.0),
}
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# ModelConfig's fields that must be positive integers, and those that count something (0 allowed)
_POSITIVE_INTS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "max_position_embeddings")
_COUNTS = ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size")


def _real(value):
    """A JSON number as a float (ModelConfig names any other value)."""
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else value


def _check(name: str, value, right_type: bool, right_value: bool, wanted: str) -> None:
    """TypeError where ``value`` is not of the type ``name`` needs, ValueError where it is but is out of range."""
    if not right_type:
        raise TypeError(f"{name} must be {wanted}, got {value!r}")
    if not right_value:
        raise ValueError(f"{name} must be {wanted}, got {value!r}")


def _is_int(value) -> bool:
    """An integer (Python's or numpy's), not a bool and not a float of integral value (JSON's 128.0)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class Fp8Blocks:
    """A checkpoint whose projection weights are float8 with one scale per ``rows`` x ``cols`` block of each
    weight's last two dimensions (Qwen3's and DeepSeek's ``-FP8`` releases: ``quant_method: "fp8"`` with
    ``weight_block_size``, scales ``<name>.weight_scale_inv``; compressed-tensors' ``block`` strategy, scales
    ``<name>.weight_scale``). The value times its block's scale is the weight. tritium dequantizes such weights
    as they load (:class:`tritium.models.weights.BlockFp8Tensor`) and runs the model in 16 bits, or quantizes
    them again per row where ``quantization="fp8"`` is asked for."""
    rows: int
    cols: int
    scale_suffix: str  # the scale tensor's name is the weight's with this appended ("_scale_inv", "_scale")


@dataclasses.dataclass
class ModelConfig:
    """Shape and numerics of a Llama-family decoder.

    Attributes mirror Hugging Face names. ``rope_scaling`` is ``None`` or a dict with ``rope_type`` in
    ``ROPE_SCALING_TYPES`` and its parameters under transformers' names, completed with transformers'
    defaults (``original_max_position_embeddings`` = ``max_position_embeddings`` for llama3 and yarn; yarn's
    ``factor`` = their ratio); :func:`tritium.models.rope.rope_inv_freq` and ``rope_attention_factor``
    turn it into the rope table. ``dynamic`` (NTK) scaling only changes positions past
    ``max_position_embeddings``, where the engine's table (and ``max_model_len``) stops: within it the
    rope is the default one, as in transformers. A GGUF ``rope_freqs`` tensor (Llama 3.1+ files) divides
    the per-frequency inverse wavelengths instead, as llama.cpp does. ``qk_norm`` (Qwen3): each query and
    key head is RMS-normed over ``head_dim`` (weights ``q_norm`` / ``k_norm``, one per layer, shared by the
    heads) after the QKV projection and before rope. ``num_experts`` > 0 (Mixtral, Qwen3-MoE): every layer's MLP
    is a sparse mixture of ``num_experts`` SwiGLU experts of ``moe_intermediate_size``, ``num_experts_per_tok``
    of them per token, their router weights renormalized to sum 1 where ``norm_topk_prob``
    (:mod:`tritium.models.moe`); 0: the dense MLP of ``intermediate_size``.
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
    qk_norm: bool = False
    tie_word_embeddings: bool = False
    sliding_window: int | None = None
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    torch_dtype: torch.dtype | None = None
    quantization: str | None = None
    int4: Int4Scheme | None = None  # an int4 checkpoint's layout (GPTQ, AWQ, compressed-tensors) and group
    fp8_blocks: Fp8Blocks | None = None  # a block-wise FP8 checkpoint (dequantized as it loads)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    norm_topk_prob: bool = True
    shared_expert_intermediate_size: int = 0  # Qwen2-MoE: a dense SwiGLU expert every token takes, gated
    layer_types: tuple[str, ...] | None = None
    rope_local_theta: float | None = None
    hidden_act: str = "silu"
    norm_weight_offset: float = 0.0
    sandwich_norms: bool = False
    embedding_multiplier: float = 1.0
    query_pre_attn_scalar: float | None = None
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None

    def __post_init__(self):
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise UnsupportedModelError(
                f"model_type {self.model_type!r} is not supported; expected one of {', '.join(SUPPORTED_MODEL_TYPES)}")
        self._check_values()
        if self.num_attention_heads % self.num_key_value_heads:
            raise UnsupportedModelError(
                f"num_attention_heads ({self.num_attention_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})")
        if self.num_experts:
            if not 1 <= self.num_experts_per_tok <= self.num_experts:
                raise UnsupportedModelError(f"num_experts_per_tok must be in [1, num_experts = {self.num_experts}], "
                                            f"got {self.num_experts_per_tok}")
            if self.moe_intermediate_size < 1:
                raise UnsupportedModelError(f"moe_intermediate_size must be >= 1, got {self.moe_intermediate_size}")
        if self.shared_expert_intermediate_size < 0 or (self.shared_expert_intermediate_size and not self.num_experts):
            raise UnsupportedModelError(f"shared_expert_intermediate_size must be >= 0, and 0 without experts, got "
                                        f"{self.shared_expert_intermediate_size} ({self.num_experts} experts)")
        self.rope_scaling = _normalise_rope_scaling(self.rope_scaling, self.max_position_embeddings)
        if self.hidden_act not in HIDDEN_ACTS:
            raise UnsupportedModelError(f"hidden_act {self.hidden_act!r} is not supported; expected one of "
                                        f"{', '.join(HIDDEN_ACTS)}")
        if self.layer_types is not None:
            self.layer_types = tuple(self.layer_types)
            bad = [t for t in self.layer_types if t not in LAYER_TYPES]
            if len(self.layer_types) != self.num_hidden_layers or bad:
                raise UnsupportedModelError(
                    f"layer_types must name each of the {self.num_hidden_layers} layers one of {', '.join(LAYER_TYPES)}"
                    f"; got {len(self.layer_types)} entries{f', among them {bad[0]!r}' if bad else ''}")
        for name in ("attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise UnsupportedModelError(f"{name} must be positive or None, got {value!r}")

    def _check_values(self) -> None:
        """TypeError naming the first field of the wrong type (a float, a string or a bool where an integer belongs,
        a string where a number or a flag does), ValueError the first of a nonsense value (a size that is not
        positive, an odd head_dim, an epsilon or rope base that is not a positive finite number, a negative token
        id): such values passed the loader and failed later as tracebacks far from the config, or ran (a rope base
        of 0 gives NaN logits; ``"false"`` as ``tie_word_embeddings`` is true)."""
        for name in _POSITIVE_INTS:
            value = getattr(self, name)
            _check(name, value, _is_int(value), _is_int(value) and value > 0, "a positive integer")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even (rope turns pairs of dimensions), got {self.head_dim}")
        for name in _COUNTS:  # their ranges are checked below, where they are used
            value = getattr(self, name)
            _check(name, value, _is_int(value), _is_int(value) and (name != "num_experts" or value >= 0),
                   "an integer >= 0")
        for name in ("rms_norm_eps", "rope_theta", "rope_local_theta"):
            value = getattr(self, name)
            if name != "rope_local_theta" or value is not None:
                real = isinstance(value, numbers.Real) and not isinstance(value, bool)
                _check(name, value, real, real and 0 < value < math.inf, "a positive finite number")
        for name in ("attention_bias", "qk_norm", "tie_word_embeddings", "norm_topk_prob", "sandwich_norms"):
            _check(name, getattr(self, name), isinstance(getattr(self, name), bool), True, "true or false")
        if self.sliding_window is not None:
            _check("sliding_window", self.sliding_window, _is_int(self.sliding_window),
                   _is_int(self.sliding_window) and self.sliding_window > 0, "a positive integer or null")
        self.eos_token_ids = tuple(self.eos_token_ids)
        for name, ids in (("bos_token_id", () if self.bos_token_id is None else (self.bos_token_id,)),
                          ("eos_token_id", self.eos_token_ids)):
            for t in ids:
                _check(name, t, _is_int(t), _is_int(t) and t >= 0, "token ids (integers >= 0)")

    def layer_window(self, i: int) -> int | None:
        """Layer i's sliding window (None: it attends to the whole context)."""
        if self.layer_types is not None and self.layer_types[i] != "sliding_attention":
            return None
        return self.sliding_window

    def layer_rope(self, i: int) -> tuple[float, dict | None]:
        """(rope base, rope scaling) of layer i: ``rope_local_theta`` with the default rope on a sliding layer
        where it is set, else ``rope_theta`` and ``rope_scaling``."""
        if self.rope_local_theta is not None and self.layer_window(i) is not None:
            return self.rope_local_theta, None
        return self.rope_theta, self.rope_scaling

    @property
    def uniform_layers(self) -> bool:
        """Every layer attends alike: one window (or none) and one rope."""
        return len({(self.layer_window(i), self.layer_rope(i)[0]) for i in range(self.num_hidden_layers)}) == 1

    @property
    def attention_scale(self) -> float:
        """The scores' scale: ``query_pre_attn_scalar ** -0.5`` where set, else ``head_dim ** -0.5``."""
        return (self.query_pre_attn_scalar or self.head_dim) ** -0.5

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
        if model_type == "gemma3":  # a Gemma 3 with its vision tower: the text model
            cfg, model_type = _gemma3_text_config(cfg), "gemma3_text"
        gemma = model_type in GEMMA_TYPES
        if gemma:
            cfg = {**_GEMMA_DEFAULTS[model_type], **cfg}
            if cfg.get("use_bidirectional_attention"):
                raise UnsupportedModelError(f"{model_type} with use_bidirectional_attention (an embedding model) is "
                                            f"not supported; only causal decoders")
        # transformers 5 keeps rope_theta and scaling in `rope_parameters` (Gemma 3: one set a layer type);
        # 4.x in `rope_theta` / `rope_scaling` (Gemma 3: and `rope_local_base_freq`).
        rope = dict(cfg.get("rope_parameters") or {})
        local_theta = cfg.get("rope_local_base_freq") if model_type == "gemma3_text" else None
        if set(rope) & set(LAYER_TYPES):
            local = dict(rope.get("sliding_attention") or {})
            rope = dict(rope.get("full_attention") or {})
            if local.get("rope_type", "default") != "default":
                raise UnsupportedModelError(f"rope scaling {local.get('rope_type')!r} on the sliding layers is not "
                                            f"supported; only the default rope there")
            local_theta = local.get("rope_theta", local_theta)
        rope_theta = rope.pop("rope_theta", cfg.get("rope_theta", 10000.0))
        partial = rope.pop("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
        if partial not in (None, 1, 1.0):
            raise UnsupportedModelError(f"partial_rotary_factor {partial} (rope on part of each head) is not "
                                        f"supported; only rope over the whole head_dim")
        rope_scaling = cfg.get("rope_scaling") or (rope if rope.get("rope_type", "default") != "default" else None)
        if rope_scaling and cfg.get("original_max_position_embeddings"):  # Phi-3 style: wins, as in transformers
            rope_scaling = dict(rope_scaling, original_max_position_embeddings=cfg["original_max_position_embeddings"])
        eos = cfg.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (eos,))
        bos = cfg.get("bos_token_id")
        vocab = cfg.get("vocab_size")
        if _is_int(vocab) and vocab > 0:
            # An integer id at or past vocab_size is one the model cannot produce or embed: transformers keeps it
            # and never stops at it (a BOS there would index past the embeddings). Left out with a warning, as
            # generation_config.json's and GGUF's are; other bad values are named by __post_init__.
            def past(t) -> bool:
                return _is_int(t) and t >= vocab

            for name, ids in (("bos_token_id", (bos,)), ("eos_token_id", eos_ids)):
                for t in filter(past, ids):
                    log.warning("config.json %s = %d is not a token id of the model (vocab_size = %d): ignored "
                                "(the model cannot produce it)", name, t, vocab)
            bos = None if past(bos) else bos
            eos_ids = tuple(t for t in eos_ids if not past(t))
        heads, hidden, head_dim = cfg["num_attention_heads"], cfg["hidden_size"], cfg.get("head_dim")
        if head_dim is None and _is_int(hidden) and _is_int(heads) and heads > 0:  # else the field is named below
            if hidden % heads:
                raise ValueError(f"hidden_size ({hidden}) is not divisible by num_attention_heads ({heads}), and no "
                                 f"head_dim is given")
            head_dim = hidden // heads
        use_sliding = cfg.get("use_sliding_window", model_type in ("mistral", "mixtral", "phi3") or gemma)
        window, layer_types = _hf_sliding_window(cfg, model_type) if use_sliding else (None, None)
        dtype = cfg.get("torch_dtype") or cfg.get("dtype")
        if dtype is not None and not (isinstance(dtype, str) and isinstance(getattr(torch, dtype, None), torch.dtype)
                                      and getattr(torch, dtype).is_floating_point):
            raise (ValueError if isinstance(dtype, str) else TypeError)(
                f"torch_dtype {dtype!r} is not a floating-point torch dtype (float32, float16, bfloat16)")
        quant = cfg.get("quantization_config")
        if quant and not isinstance(quant, dict):
            raise UnsupportedModelError(f"quantization_config must be a JSON object naming its quant_method, got "
                                        f"{quant!r}")
        try:
            int4 = int4_scheme(quant)
        except ValueError as e:  # its message names quantization_config already
            raise UnsupportedModelError(str(e)) from None
        fp8_blocks = _hf_fp8_blocks(cfg.get("quantization_config"))
        # a block-wise FP8 checkpoint is dequantized as it loads: the model runs in 16 bits unless asked otherwise
        quantization = ("int4" if int4 is not None else None if fp8_blocks is not None
                        else _hf_quantization(cfg.get("quantization_config")))
        experts = _hf_experts(cfg, model_type)
        if experts and quantization == "fp8-dynamic":
            quantization = "fp8"  # no W8A8 experts: an FP8 mixture of experts runs weight-only (its weights as stored)
        return cls(
            model_type=model_type,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_hidden_layers=cfg["num_hidden_layers"],
            num_attention_heads=heads,
            num_key_value_heads=heads if cfg.get("num_key_value_heads") is None else cfg["num_key_value_heads"],
            head_dim=head_dim,
            max_position_embeddings=cfg.get("max_position_embeddings", 4096),
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=_real(rope_theta),
            rope_scaling=rope_scaling,
            # Qwen2-MoE: qkv_bias (transformers 5; True when absent, as in the released checkpoints)
            attention_bias=cfg.get("qkv_bias", cfg.get("attention_bias", model_type in ("qwen2", "qwen2_moe"))),
            qk_norm=model_type in ("qwen3", "qwen3_moe", "gemma3_text"),
            tie_word_embeddings=cfg.get("tie_word_embeddings", False),
            sliding_window=window,
            layer_types=layer_types,
            rope_local_theta=None if local_theta is None else _real(local_theta),
            hidden_act=_hf_hidden_act(cfg, model_type),
            **(dict(norm_weight_offset=1.0, sandwich_norms=True, embedding_multiplier=cfg["hidden_size"] ** 0.5,
                    query_pre_attn_scalar=cfg.get("query_pre_attn_scalar"),
                    attn_logit_softcapping=cfg.get("attn_logit_softcapping"),
                    final_logit_softcapping=cfg.get("final_logit_softcapping")) if gemma else {}),
            bos_token_id=bos,
            eos_token_ids=eos_ids,
            torch_dtype=_DTYPES.get(dtype) if isinstance(dtype, str) else None,
            quantization=quantization,
            int4=int4,
            fp8_blocks=fp8_blocks,
            **experts,
        )

    @classmethod
    def from_gguf_metadata(cls, meta: dict, *, has_output_weight: bool, has_qkv_bias: bool,
                           has_qk_norm: bool = False, source: str | None = None) -> "ModelConfig":
        """From GGUF key/values (``{arch}.block_count`` ...). Whether embeddings are tied, whether the QKV
        projections have biases and whether queries and keys are normed are told by which tensors the file holds.
        A key missing, of the wrong type or out of range raises ValueError (UnsupportedModelError for what is
        not supported) naming the key; :func:`tritium.models.weights.load_gguf_config` adds the file. A special
        token id (``tokenizer.ggml.{bos,eos,eot,eom}_token_id``) outside the vocabulary is logged as a warning
        naming ``source`` (the file) and ignored, as llama.cpp's loader ignores it."""
        arch = meta.get("general.architecture")
        if arch is None:
            raise UnsupportedModelError("GGUF metadata has no general.architecture (the model's architecture)")
        if arch not in _GGUF_TYPES:
            raise UnsupportedModelError(f"GGUF metadata general.architecture: architecture {_brief(arch)} is not "
                                        f"supported; expected one of {', '.join(_GGUF_TYPES)}")
        keys = _GGUFKeys(meta, arch, source)
        experts = _gguf_experts(arch, keys)
        heads = keys.int("attention.head_count", field="num_attention_heads")
        hidden = keys.int("embedding_length", field="hidden_size")
        layers = keys.int("block_count", field="num_hidden_layers")
        scaling = _gguf_rope_scaling(keys)
        vocab = keys.int("vocab_size", None, field="vocab_size")
        if vocab is None:  # llama.cpp's converters write the vocabulary's size as its token list
            tokens = meta.get("tokenizer.ggml.tokens")
            if not isinstance(tokens, (list, tuple)) or not tokens:
                raise ValueError(f"GGUF metadata has neither {arch}.vocab_size nor a tokenizer.ggml.tokens list "
                                 f"(the vocabulary's size), got {_brief(tokens)}")
            vocab = len(tokens)
            keys.fields["vocab_size"] = "tokenizer.ggml.tokens"
        head_dim = keys.int("attention.key_length", None, field="head_dim")
        if head_dim is None:
            if hidden % heads:
                raise ValueError(f"GGUF metadata {arch}.embedding_length ({hidden}) is not divisible by "
                                 f"{arch}.attention.head_count ({heads}), and no {arch}.attention.key_length is given")
            head_dim = hidden // heads
            keys.fields["head_dim"] = f"{arch}.embedding_length / {arch}.attention.head_count"
        gemma = _gguf_gemma(arch, keys, hidden, heads, head_dim) if arch in ("gemma2", "gemma3") else {}
        rope_dims = keys.int("rope.dimension_count", None) if arch == "phi3" else None
        if rope_dims not in (None, head_dim):  # Phi-4-mini: part of each head
            raise UnsupportedModelError(f"GGUF metadata phi3.rope.dimension_count: rope over {rope_dims} of each "
                                        f"head's {head_dim} dimensions is not supported; only rope over the whole "
                                        f"head")
        # generation ends at the end-of-text token and at an end-of-turn / end-of-message one where the file
        # names it (llama.cpp's end-of-generation set: Gemma's <end_of_turn>, Llama 3's <|eot_id|>)
        stop = [keys.token_id(f"tokenizer.ggml.{k}_token_id", vocab) for k in ("eos", "eot", "eom")]
        if keys.ignored and all(t is None for t in stop):  # (the only token ids read so far)
            log.warning("%sGGUF metadata names no end-of-generation token within the vocabulary (%s ignored): "
                        "generation stops only at max_tokens, stop strings and stop_token_ids", keys.where,
                        ", ".join(keys.ignored))
        window = keys.int("attention.sliding_window", None, minimum=0, field="sliding_window")
        fields = dict(
            model_type=experts.pop("model_type", gemma.pop("model_type", arch)),
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=keys.int("feed_forward_length", field="intermediate_size"),
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=keys.int("attention.head_count_kv", heads, field="num_key_value_heads"),
            head_dim=head_dim,
            max_position_embeddings=keys.int("context_length", 4096, field="max_position_embeddings"),
            rms_norm_eps=keys.real("attention.layer_norm_rms_epsilon", 1e-6, field="rms_norm_eps"),
            rope_theta=keys.real("rope.freq_base", 10000.0, field="rope_theta"),
            rope_scaling=scaling,
            attention_bias=has_qkv_bias,
            qk_norm=has_qk_norm,
            tie_word_embeddings=not has_output_weight,
            sliding_window=window or None,
            bos_token_id=keys.token_id("tokenizer.ggml.bos_token_id", vocab),
            eos_token_ids=tuple(dict.fromkeys(t for t in stop if t is not None)),
            **experts,
            **gemma,
        )
        try:
            return cls(**fields)
        except (ValueError, TypeError) as e:  # ModelConfig's checks name its fields: named here by their keys
            named = [key for field, key in keys.fields.items() if re.search(rf"\b{field}\b", str(e))]
            if not named:
                raise
            raise (type(e) if isinstance(e, UnsupportedModelError) else ValueError)(
                f"GGUF metadata {', '.join(dict.fromkeys(named))}: {e}") from None


_REQUIRED = object()


def _keyed(error: Exception, key: str) -> Exception:
    """``error`` marked with the GGUF key it is about (``gguf_key``), where its message does not name the key
    (messages kept as they were): :func:`tritium.models.weights.load_gguf_config` names it with the file."""
    error.gguf_key = key
    return error


def _brief(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a GGUF array can hold thousands of values)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class _GGUFKeys:
    """Typed reads of GGUF metadata: ``{arch}.<key>`` (``general.*`` and ``tokenizer.*`` keys as they are), each
    value checked as it is read, a missing or malformed one named by its key (``int(None)`` was a TypeError naming
    no key, a float or a per-layer array where an integer belongs went into the config as it was). ``fields``
    records which key each ModelConfig field came from, for ModelConfig's own checks."""

    def __init__(self, meta: dict, arch: str, source: str | None = None):
        self.meta, self.arch = meta, arch
        self.fields: dict[str, str] = {}
        self.where = "" if source is None else f"{source!r}: "  # warnings' prefix: the file
        self.ignored: list[str] = []  # special token keys ignored (ids outside the vocabulary)

    def key(self, key: str) -> str:
        return key if key.startswith(("general.", "tokenizer.")) else f"{self.arch}.{key}"

    def get(self, key: str, default=None):
        """The raw value of ``key`` (``default`` where it is absent)."""
        value = self.meta.get(self.key(key))
        return default if value is None else value

    def _value(self, key: str, default, field: str | None):
        full = self.key(key)
        if field is not None:
            self.fields[field] = full
        value = self.meta.get(full)
        if value is None and default is _REQUIRED:
            raise ValueError(f"GGUF metadata has no {full}, which a {self.arch} model needs")
        return full, value

    def int(self, key: str, default=_REQUIRED, *, minimum: int = 1, field: str | None = None):
        """An integer >= ``minimum`` (not a bool, not a float of integral value, not an array)."""
        full, value = self._value(key, default, field)
        if value is None:
            return default
        if not _is_int(value) or value < minimum:
            wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise ValueError(f"GGUF metadata {full} must be {wanted}, got {_brief(value)}")
        return int(value)

    def real(self, key: str, default=_REQUIRED, *, field: str | None = None):
        """A positive finite number."""
        full, value = self._value(key, default, field)
        if value is None:
            return default
        if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value < math.inf):
            raise ValueError(f"GGUF metadata {full} must be a positive finite number, got {_brief(value)}")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        full, value = self._value(key, default, None)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ValueError(f"GGUF metadata {full} must be true or false, got {_brief(value)}")
        return value

    def token_id(self, key: str, vocab: int) -> int | None:
        """A token id in [0, vocab), or None where the key is absent. A value that is not an integer raises
        ValueError naming the key; an integer outside [0, vocab) is logged as a warning and gives None, as
        llama.cpp's loader warns "bad special token" and keeps its default (tritium has none: no such token)."""
        full, value = self._value(key, None, None)
        if value is None:
            return None
        if not _is_int(value):
            raise ValueError(f"GGUF metadata {full} must be a token id (an integer in [0, {vocab}), the "
                             f"vocabulary's size), got {_brief(value)}")
        if not 0 <= value < vocab:
            log.warning("%sGGUF metadata %s = %d is not a token id of the vocabulary (%d tokens): ignored, as "
                        "llama.cpp ignores it", self.where, full, value, vocab)
            self.ignored.append(full)
            return None
        return int(value)


def _gguf_gemma(arch: str, keys: _GGUFKeys, hidden: int, heads: int, head_dim: int) -> dict:
    """ModelConfig's Gemma fields from GGUF metadata, as llama.cpp runs the file: its norm weights hold ``1 + w``
    already (the converter adds the 1), windows on every other layer (Gemma 2) or five of six (Gemma 3, whose
    sliding layers have a rope base of 10000), scores scaled by 1/sqrt(head_dim) except on the 27B models
    (46 layers of Gemma 2, 62 of Gemma 3: 1/sqrt(hidden / heads), their ``query_pre_attn_scalar``), the
    softcaps the file names."""
    layers = keys.int("block_count")
    pattern, big = (2, 46) if arch == "gemma2" else (6, 62)
    window = keys.int("attention.sliding_window", None, minimum=0) or None
    return dict(
        model_type="gemma2" if arch == "gemma2" else "gemma3_text", hidden_act="gelu_tanh", sandwich_norms=True,
        embedding_multiplier=hidden ** 0.5, query_pre_attn_scalar=hidden // heads if layers == big else head_dim,
        layer_types=None if window is None else tuple(
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)),
        rope_local_theta=10000.0 if arch == "gemma3" and window is not None else None,
        attn_logit_softcapping=_softcap(keys, "attn_logit_softcapping"),
        final_logit_softcapping=_softcap(keys, "final_logit_softcapping"))


def _softcap(keys: _GGUFKeys, key: str) -> float | None:
    """A softcap (0 or absent: none)."""
    return None if keys.get(key) in (None, 0) else keys.real(key, field=key)


def _gguf_experts(arch: str, keys: _GGUFKeys) -> dict:
    """ModelConfig's expert fields (and model type) from GGUF metadata: Mixtral (``llama`` with
    ``expert_count``; experts of ``feed_forward_length``, weights renormalized), Qwen3-MoE (``qwen3moe``;
    ``expert_feed_forward_length``, weights renormalized unless ``expert_weights_norm`` says not, as llama.cpp
    runs it) and Qwen2-MoE (``qwen2moe``: the same, weights as they come unless ``expert_weights_norm``, and a
    shared expert of ``expert_shared_feed_forward_length``). Shared experts elsewhere, gating other than softmax
    and experts in other architectures are refused."""
    count = keys.int("expert_count", 0, minimum=0, field="num_experts")
    if arch in ("qwen2moe", "qwen3moe") and not count:
        raise UnsupportedModelError(f"GGUF {arch} file without {arch}.expert_count")
    if not count:
        return {}
    if arch not in ("llama", "qwen2moe", "qwen3moe"):
        raise UnsupportedModelError(f"GGUF {arch} files with experts ({arch}.expert_count = {count}) are not "
                                    f"supported; mixtures of experts: llama (Mixtral), qwen2moe and qwen3moe")
    shared = keys.int("expert_shared_feed_forward_length", None, field="shared_expert_intermediate_size")
    if arch != "qwen2moe" and (keys.get("expert_shared_count") or shared):
        raise UnsupportedModelError(f"GGUF {arch}: shared experts ({arch}.expert_shared_count = "
                                    f"{keys.get('expert_shared_count')}) are not supported (qwen2moe's are)")
    gating = keys.get("expert_gating_func")
    if gating not in (None, 1):  # llama.cpp: 1 softmax, 2 sigmoid, 3 softmax of the top k
        raise UnsupportedModelError(f"GGUF {arch}: expert gating function {_brief(gating)} is not supported "
                                    f"(softmax, 1)")
    if keys.get("expert_used_count") is None:
        raise UnsupportedModelError(f"GGUF {arch}: {arch}.expert_used_count (experts a token) is missing")
    used = keys.int("expert_used_count", field="num_experts_per_tok")
    if arch == "llama":
        return dict(model_type="mixtral", num_experts=count, num_experts_per_tok=used,
                    moe_intermediate_size=keys.int("feed_forward_length"), norm_topk_prob=True)
    if keys.get("expert_feed_forward_length") is None:
        raise UnsupportedModelError(f"GGUF {arch}: {arch}.expert_feed_forward_length is missing")
    inter = keys.int("expert_feed_forward_length", field="moe_intermediate_size")
    if arch == "qwen2moe":
        if shared is None:
            raise UnsupportedModelError("GGUF qwen2moe: qwen2moe.expert_shared_feed_forward_length is missing")
        return dict(model_type="qwen2_moe", num_experts=count, num_experts_per_tok=used,
                    moe_intermediate_size=inter, norm_topk_prob=keys.flag("expert_weights_norm", False),
                    shared_expert_intermediate_size=shared)
    return dict(model_type="qwen3_moe", num_experts=count, num_experts_per_tok=used,
                moe_intermediate_size=inter, norm_topk_prob=keys.flag("expert_weights_norm", True))


def _hf_experts(cfg: dict, model_type: str) -> dict:
    """ModelConfig's expert fields from a ``config.json``: Mixtral's ``num_local_experts`` (experts of
    ``intermediate_size``, weights always renormalized), Qwen3-MoE's and Qwen2-MoE's ``num_experts`` /
    ``num_local_experts`` (``moe_intermediate_size``, ``norm_topk_prob``; Qwen2-MoE's shared expert of
    ``shared_expert_intermediate_size``, 5632 where absent as in transformers). A model with dense MLPs on some
    layers only (``mlp_only_layers``, ``decoder_sparse_step``) is refused."""
    if model_type not in ("mixtral", "qwen2_moe", "qwen3_moe"):
        return {}
    experts = cfg.get("num_local_experts", cfg.get("num_experts")) or 0
    if not experts:
        return {}
    if model_type == "mixtral":
        return dict(num_experts=experts, num_experts_per_tok=cfg.get("num_experts_per_tok", 2),
                    moe_intermediate_size=cfg["intermediate_size"], norm_topk_prob=True)
    layers, step = cfg["num_hidden_layers"], cfg.get("decoder_sparse_step", 1) or 1
    dense = sorted(set(cfg.get("mlp_only_layers") or ()) | {i for i in range(layers) if (i + 1) % step})
    if dense:
        raise UnsupportedModelError(
            f"dense MLPs on layers {dense[:8]}{'...' if len(dense) > 8 else ''} of a mixture-of-experts model "
            f"(mlp_only_layers {cfg.get('mlp_only_layers')}, decoder_sparse_step {step}) are not supported; "
            f"only experts on every layer")
    shared = dict(shared_expert_intermediate_size=int(cfg.get("shared_expert_intermediate_size", 5632))
                  ) if model_type == "qwen2_moe" else {}
    return dict(num_experts=experts, num_experts_per_tok=cfg.get("num_experts_per_tok", 4 if shared else 8),
                moe_intermediate_size=cfg.get("moe_intermediate_size") or cfg["intermediate_size"],
                norm_topk_prob=bool(cfg.get("norm_topk_prob", False)), **shared)


def _hf_fp8_blocks(q) -> Fp8Blocks | None:
    """The block layout of a block-wise FP8 checkpoint's ``quantization_config`` (``quant_method: "fp8"`` with
    ``weight_block_size: [rows, cols]``, float8 e4m3; or compressed-tensors float 8-bit weights of ``block``
    strategy with ``block_structure``), None for any other config. Activation settings are not used (the model
    runs its activations in 16 bits). Malformed blocks raise UnsupportedModelError naming the field."""
    if not isinstance(q, dict):
        return None
    if q.get("quant_method") == "fp8" and q.get("weight_block_size") is not None:
        if q.get("fmt", "e4m3") != "e4m3":
            raise UnsupportedModelError(f"quantization_config: fp8 fmt {q.get('fmt')!r} is not supported; expected "
                                        f"'e4m3'")
        return Fp8Blocks(*_block_shape(q["weight_block_size"], "weight_block_size"), "_scale_inv")
    if q.get("quant_method") != "compressed-tensors":
        return None
    groups = [(name, (g or {}).get("weights") or {}) for name, g in (q.get("config_groups") or {}).items()]
    blocked = [(name, w) for name, w in groups if w.get("strategy") == "block"]
    if not blocked:
        return None
    shapes = set()
    for name, w in groups:
        if w.get("strategy") != "block" or (w.get("type"), w.get("num_bits")) != ("float", 8):
            raise UnsupportedModelError(f"quantization_config: compressed-tensors group {name!r} has weights of type "
                                        f"{w.get('type')!r}, {w.get('num_bits')} bits, strategy {w.get('strategy')!r} "
                                        f"beside block-wise float 8-bit groups; expected every group block-wise")
        shapes.add(_block_shape(w.get("block_structure"), f"config_groups.{name}.weights.block_structure"))
    if len(shapes) != 1:
        raise UnsupportedModelError(f"quantization_config: compressed-tensors groups have different block structures "
                                    f"{sorted(shapes)}; expected one")
    return Fp8Blocks(*shapes.pop(), "_scale")


def _block_shape(value, field: str) -> tuple[int, int]:
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
        raise UnsupportedModelError(f"quantization_config: {field} must be two positive integers, got {value!r}")
    return int(value[0]), int(value[1])


def _hf_quantization(q) -> str | None:
    """The weight quantization a ``config.json``'s ``quantization_config`` describes: None (none), "fp8" for
    FP8 weights with per-tensor or per-channel scales (compressed-tensors float 8-bit weights, as
    llm-compressor writes them), or "fp8-dynamic" where the checkpoint was made to run its activations in
    FP8 too (compressed-tensors ``input_activations`` of 8-bit floats, dynamic or static: tritium quantizes
    them per token as it runs; ``fbgemm_fp8``, whose activations are quantized per row; AutoFP8's and vLLM's
    ``quant_method: "fp8"`` without ``weight_block_size``: per-tensor weight scales, activations static or
    dynamic). Not for block-wise FP8 configs (:func:`_hf_fp8_blocks`: the caller asks that first). Anything else
    raises UnsupportedModelError naming it."""
    if not q:
        return None
    supported = ("tritium reads FP8 checkpoints with per-tensor or per-channel weight scales (compressed-tensors "
                 "float 8-bit weights, activations unquantized or 8-bit floats; fbgemm_fp8; AutoFP8's quant_method "
                 "'fp8') or block-wise scales "
                 "(quant_method 'fp8' with weight_block_size; compressed-tensors 'block'), or quantizes a 16-bit "
                 "checkpoint as it loads (quantization='fp8' or 'fp8-dynamic')")
    method = q.get("quant_method") if isinstance(q, dict) else None
    if method == "fbgemm_fp8":
        return "fp8-dynamic"
    if method == "fp8":  # AutoFP8 / vLLM's per-tensor FP8 (no weight_block_size): weight_scale per tensor
        scheme = q.get("activation_scheme", "dynamic")
        if scheme not in ("static", "dynamic") or q.get("fmt", "e4m3") != "e4m3":
            raise UnsupportedModelError(f"quantization_config: fp8 with activation_scheme {scheme!r}, fmt "
                                        f"{q.get('fmt', 'e4m3')!r} is not supported; expected 'static' or 'dynamic', "
                                        f"'e4m3'")
        return "fp8-dynamic"  # its activations were meant to be fp8: tritium quantizes them per token
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        activations = set()
        for name, group in groups.items():
            w = (group or {}).get("weights") or {}
            kind = (w.get("type"), w.get("num_bits"), w.get("strategy"))
            if kind[:2] != ("float", 8) or kind[2] not in ("tensor", "channel"):
                raise UnsupportedModelError(f"quantization_config: compressed-tensors group {name!r} has weights of "
                                            f"type {kind[0]!r}, {kind[1]} bits, strategy {kind[2]!r}; {supported}")
            a = (group or {}).get("input_activations")
            if a and (a.get("type"), a.get("num_bits")) != ("float", 8):
                raise UnsupportedModelError(f"quantization_config: compressed-tensors group {name!r} quantizes "
                                            f"activations to {a.get('type')!r}, {a.get('num_bits')} bits; {supported}")
            activations.add(bool(a))
        if not groups or q.get("format") not in (None, "naive-quantized", "float-quantized"):
            raise UnsupportedModelError(f"quantization_config: compressed-tensors format {q.get('format')!r} "
                                        f"with {len(groups)} config groups; {supported}")
        return "fp8-dynamic" if any(activations) else "fp8"
    detail = f" with weight_block_size {q.get('weight_block_size')}" if isinstance(q, dict) and \
        q.get("weight_block_size") else ""
    raise UnsupportedModelError(f"quantization_config: quant_method {method!r}{detail} is not supported; {supported}")


def _hf_sliding_window(cfg: dict, model_type: str) -> tuple[int | None, tuple[str, ...] | None]:
    """(sliding window, layer types) of a config whose ``use_sliding_window`` is on: the window and None where
    every layer has it, (None, None) where none does, else the window and each layer's type. Which layers
    have it: ``layer_types`` ("sliding_attention" / "full_attention", transformers 4.53+), else as
    transformers builds ``layer_types``: for Qwen2/Qwen3 the layers from ``max_window_layers`` on, for Gemma 2
    every other layer from the first, for Gemma 3 all but every ``sliding_window_pattern``-th (6), else all."""
    window = cfg.get("sliding_window")
    if window is None:
        return None, None
    types, layers = cfg.get("layer_types"), cfg["num_hidden_layers"]
    if types is None and model_type == "gemma2":
        types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    elif types is None and model_type == "gemma3_text":
        pattern = cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern")) or 6
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
    elif (types is None and model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe")
            and cfg.get("max_window_layers") is not None):
        types = ["sliding_attention" if i >= cfg["max_window_layers"] else "full_attention" for i in range(layers)]
    if types is None:
        return window, None
    windowed = sum(kind == "sliding_attention" for kind in types)
    if not windowed:
        return None, None
    return window, (None if windowed == len(types) else tuple(types))


def _hf_hidden_act(cfg: dict, model_type: str) -> str:
    """The gated MLP's activation (``HIDDEN_ACTS``) from ``hidden_act`` / ``hidden_activation``: SiLU for the
    Llama family, tanh's GELU for Gemma (``gelu_pytorch_tanh``); any other is refused by name."""
    act = cfg.get("hidden_activation") or cfg.get("hidden_act")
    if model_type in GEMMA_TYPES:
        if act not in ("gelu_pytorch_tanh", "gelu_tanh"):
            raise UnsupportedModelError(f"{model_type}: hidden_activation {act!r} is not supported; expected "
                                        f"gelu_pytorch_tanh")
        return "gelu_tanh"
    if act not in (None, "silu", "swish"):
        raise UnsupportedModelError(f"{model_type}: hidden_act {act!r} is not supported; expected silu")
    return "silu"


def _gemma3_text_config(cfg: dict) -> dict:
    """A Gemma 3 ``config.json`` with a vision tower (``Gemma3ForConditionalGeneration``) as its text model's:
    ``text_config``, with the outer config's token ids, dtype, tying and quantization where it has none."""
    text = dict(cfg.get("text_config") or {})
    for key in ("bos_token_id", "eos_token_id", "tie_word_embeddings", "torch_dtype", "dtype", "quantization_config"):
        if key in cfg and key not in text:
            text[key] = cfg[key]
    text["model_type"] = "gemma3_text"
    return text


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


def _gguf_rope_scaling(keys: _GGUFKeys) -> dict | None:
    """``rope_scaling`` from GGUF ``{arch}.rope.scaling.*``.

    llama.cpp's yarn scales cos/sin by ``attn_factor * (1 + 0.1 ln(factor))`` (``rope_yarn`` in ggml): a file
    that sets ``yarn_attn_factor`` (or the older ``attn_factor``) gets that product as ``attention_factor``.
    Llama 3.1+ files carry their llama3 scaling as the ``rope_freqs`` tensor, not here.
    """
    kind = keys.get("rope.scaling.type")
    if kind in (None, "none"):
        return None
    if kind not in ("linear", "yarn"):
        raise _keyed(UnsupportedModelError(f"GGUF rope scaling {kind!r} is not supported; expected none, linear "
                                           f"or yarn"), keys.key("rope.scaling.type"))
    scaling = {"rope_type": kind, "factor": keys.real("rope.scaling.factor", None, field="factor")}
    if kind == "yarn":
        for key, name in _GGUF_YARN_KEYS.items():
            value = keys.int(f"rope.scaling.{key}", None, field=name) if name.startswith("original") else \
                keys.real(f"rope.scaling.{key}", None, field=name)
            if value is not None:
                scaling[name] = value
        ext = keys.get("rope.scaling.yarn_ext_factor")
        if ext is not None and ext != 1.0:
            raise _keyed(UnsupportedModelError(f"GGUF yarn_ext_factor {ext} is not supported; expected 1.0"),
                         keys.key("rope.scaling.yarn_ext_factor"))
        attn_key = "rope.scaling.yarn_attn_factor" if keys.get("rope.scaling.yarn_attn_factor") is not None else \
            "rope.scaling.attn_factor"
        attn = keys.real(attn_key, None)
        if attn is not None and scaling["factor"] is not None:
            scaling["attention_factor"] = attn * yarn_mscale(scaling["factor"])
    return scaling
