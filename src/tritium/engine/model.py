"""Llama-family decoder (Llama 2/3, Qwen2, Mistral, SmolLM2) over a flat batch of tokens and a paged KV cache.

Tokens of all sequences in a step are concatenated: ``input_ids`` and ``positions`` are ``[T]``. Q/K/V
projections are fused into one ``[q + 2 kv, hidden]`` weight and gate/up into one ``[2 I, hidden]``.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch
import torch.nn.functional as F

from tritium.engine import reference
from tritium.engine.attention import AttentionMetadata
from tritium.engine.config import ModelConfig


def op_functions(backend: str) -> tuple[Callable, Callable, Callable, Callable]:
    """(rms_norm, rope, silu_and_mul, greedy_advance) of the ``"triton"`` or ``"torch"`` op backend."""
    if backend == "triton":
        from tritium.engine import ops
        return ops.rms_norm, ops.rope, ops.silu_and_mul, ops.greedy_advance
    return reference.rms_norm, reference.rope, reference.silu_and_mul, reference.greedy_advance


# Projections whose weights can be prefetched, in the order a layer reads them.
PREFETCH_POINTS = ("o_proj", "gate_up_proj", "down_proj", "qkv_proj", "lm_head")
# Measured on the H100 (bench/NOTES.md): o_proj fits L2 whole and follows ~10 us of small kernels.
DEFAULT_PREFETCH_PLAN: dict[str, int | None] = {"o_proj": None}


class LlamaModel:
    """Weights and forward pass; no autograd, no nn.Module (weights live in plain dicts of tensors).

    ``forward(input_ids [T], positions [T], meta, kv_caches)`` -> hidden states [T, hidden];
    ``compute_logits(hidden [S, hidden])`` -> fp32 logits [S, vocab].
    """

    def __init__(self, config: ModelConfig, *, dtype: torch.dtype, device: torch.device,
                 attention, op_backend: str = "torch", linear_backend: str = "torch"):
        self.config = config
        self.dtype = dtype
        self.device = device
        self.attention = attention
        self.op_backend = op_backend
        self.rms_norm, self.rope, self.silu_and_mul, self.greedy_advance = op_functions(op_backend)
        # Triton ops and attention: rope and the KV-cache write are one kernel (TritonAttention.attend reads
        # the cache it wrote). The torch attention keeps its own graph-safe scatter.
        self.rope_write_kv = None
        if op_backend == "triton" and getattr(attention, "name", None) == "triton":
            from tritium.engine import ops
            self.rope_write_kv = ops.rope_write_kv
        from tritium.engine.gemv import LinearDispatch  # kernels import after the Triton backend is chosen
        self.linear = LinearDispatch(linear_backend, self.silu_and_mul)
        self.scale = 1.0 / math.sqrt(config.head_dim)
        self.layers: list[dict[str, torch.Tensor]] = [{} for _ in range(config.num_hidden_layers)]
        self.embed: torch.Tensor | None = None
        self.norm: torch.Tensor | None = None
        self.lm_head: torch.Tensor | None = None
        self.cos_sin: torch.Tensor | None = None
        self._rope_freqs: torch.Tensor | None = None
        self.prefetcher = None
        self.prefetch_plan: dict[str, int | None] = {}

    def enable_prefetch(self, plan: dict[str, int | None] | None = None, *, evict_last: bool = False) -> bool:
        """Prefetch projection weights into L2 in decode steps (<= 4 tokens) while the small kernels before
        them run (see :mod:`tritium.engine.prefetch`). ``plan`` maps a projection (``o_proj``,
        ``gate_up_proj``, ``down_proj``, ``qkv_proj``: the next layer's, ``lm_head`` after the last layer) to
        the bytes to prefetch (None: all of it); each is issued right after the projection before it.
        Returns whether prefetching is active (False where the hardware has no bulk L2 prefetch)."""
        from tritium.engine.prefetch import WeightPrefetcher

        plan = dict(DEFAULT_PREFETCH_PLAN if plan is None else plan)
        unknown = set(plan) - set(PREFETCH_POINTS)
        if unknown:
            raise ValueError(f"prefetch plan: unknown projections {sorted(unknown)}; expected some of {PREFETCH_POINTS}")
        for name, n in plan.items():
            if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
                raise ValueError(f"prefetch plan[{name!r}] must be a byte count >= 0 or None (all), got {n!r}")
        self.prefetcher = WeightPrefetcher(self.device, evict_last=evict_last)
        self.prefetch_plan = plan if self.prefetcher.enabled else {}
        if not self.prefetcher.enabled:
            self.prefetcher = None
        return self.prefetcher is not None

    # -- weights -------------------------------------------------------------------------------------------
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Take (Hugging Face name, tensor) pairs; raise ValueError for missing or unexpected tensors."""
        cfg = self.config
        pending: list[dict[str, torch.Tensor]] = [{} for _ in range(cfg.num_hidden_layers)]
        for name, tensor in weights:
            t = tensor.to(device=self.device, dtype=self.dtype)
            if name == "rope_freqs":
                self._rope_freqs = tensor.float()
            elif name == "model.embed_tokens.weight":
                self.embed = t
            elif name == "model.norm.weight":
                self.norm = t
            elif name == "lm_head.weight":
                self.lm_head = t
            elif name.startswith("model.layers."):
                idx, key = name[len("model.layers."):].split(".", 1)
                if not idx.isdigit() or int(idx) >= cfg.num_hidden_layers:
                    raise ValueError(f"weight {name!r}: layer {idx} is out of range (model has "
                                     f"{cfg.num_hidden_layers} layers)")
                pending[int(idx)][key] = t
                self._fuse(int(idx), pending[int(idx)])
            elif name.endswith("rotary_emb.inv_freq"):
                continue
            else:
                raise ValueError(f"unexpected weight {name!r} for a {cfg.model_type} model")
        if cfg.tie_word_embeddings or self.lm_head is None:
            self.lm_head = self.embed
        self._check_complete(pending)
        self.cos_sin = reference.rope_cos_sin(
            reference.rope_inv_freq(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling, self._rope_freqs),
            cfg.max_position_embeddings, reference.rope_attention_factor(cfg.rope_scaling)).to(self.device)

    def _fuse(self, i: int, w: dict[str, torch.Tensor]) -> None:
        layer = self.layers[i]
        names = {
            "input_layernorm.weight": "input_norm", "post_attention_layernorm.weight": "post_norm",
            "self_attn.o_proj.weight": "o_proj", "mlp.down_proj.weight": "down_proj",
        }
        for src, dst in names.items():
            if src in w:
                layer[dst] = w.pop(src)
        qkv = [f"self_attn.{p}_proj.weight" for p in "qkv"]
        if all(n in w for n in qkv):
            layer["qkv_proj"] = torch.cat([w.pop(n) for n in qkv])
        bias = [f"self_attn.{p}_proj.bias" for p in "qkv"]
        if all(n in w for n in bias):
            layer["qkv_bias"] = torch.cat([w.pop(n) for n in bias])
        gate_up = ["mlp.gate_proj.weight", "mlp.up_proj.weight"]
        if all(n in w for n in gate_up):
            layer["gate_up_proj"] = torch.cat([w.pop(n) for n in gate_up])

    def _check_complete(self, pending) -> None:
        cfg = self.config
        for name, t in (("model.embed_tokens.weight", self.embed), ("model.norm.weight", self.norm)):
            if t is None:
                raise ValueError(f"checkpoint has no {name!r}")
        need = ["input_norm", "post_norm", "qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
        need += ["qkv_bias"] if cfg.attention_bias else []
        for i, (layer, rest) in enumerate(zip(self.layers, pending)):
            if rest:
                raise ValueError(f"unexpected or incomplete weights in layer {i}: {sorted(rest)}")
            missing = [n for n in need if n not in layer]
            if missing:
                raise ValueError(f"checkpoint layer {i} lacks {missing}")
        if self.embed.shape != (cfg.vocab_size, cfg.hidden_size):
            raise ValueError(f"embed_tokens has shape {tuple(self.embed.shape)}, config says "
                             f"({cfg.vocab_size}, {cfg.hidden_size})")

    def weight_bytes(self) -> int:
        """Bytes read per decode step: every layer weight, the final norm and the LM head."""
        n = sum(t.numel() * t.element_size() for layer in self.layers for t in layer.values())
        return n + self.norm.numel() * self.norm.element_size() + self.lm_head.numel() * self.lm_head.element_size()

    def tune_linears(self, ms: tuple[int, ...]) -> list[dict]:
        """Pick cuBLAS or the Triton GEMV per projection shape for decode batches of ``ms`` rows (GPU, mode
        ``"auto"``); returns the timing report."""
        names = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
        groups = {n: [layer[n] for layer in self.layers] for n in names}
        groups["lm_head"] = [self.lm_head]
        return self.linear.tune(groups, ms)

    # -- forward -------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata,
                kv_caches: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """input_ids, positions: [T] int64 -> final-normed hidden states [T, hidden]."""
        cfg = self.config
        T = input_ids.shape[0]
        hq, hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        h = F.embedding(input_ids, self.embed)                                        # [T, hidden]
        residual = None
        # decode steps: ask L2 for each projection's weight as soon as the one before it is done
        plan = self.prefetch_plan if T <= 4 and self.prefetcher is not None else {}

        def prefetch(name: str, weight: torch.Tensor) -> None:
            if name in plan:
                self.prefetcher.issue(weight, plan[name])

        for i, (layer, (k_cache, v_cache)) in enumerate(zip(self.layers, kv_caches)):
            if residual is None:
                residual = h
                x, _ = self.rms_norm(h, layer["input_norm"], cfg.rms_norm_eps)
            else:
                x, residual = self.rms_norm(h, layer["input_norm"], cfg.rms_norm_eps, residual)
            qkv = self.linear(x, layer["qkv_proj"], layer.get("qkv_bias"))              # [T, (hq + 2 hkv) d]
            prefetch("o_proj", layer["o_proj"])
            q = qkv[:, : hq * d].view(T, hq, d)
            k = qkv[:, hq * d: (hq + hkv) * d].view(T, hkv, d)
            v = qkv[:, (hq + hkv) * d:].view(T, hkv, d)
            if self.rope_write_kv is not None:
                self.rope_write_kv(q, k, v, positions, self.cos_sin, k_cache, v_cache, meta.slot_mapping)
                attn = self.attention.attend(q, k_cache, v_cache, meta, self.scale)  # [T, hq, d]
            else:
                self.rope(q, k, positions, self.cos_sin)
                attn = self.attention(q, k, v, k_cache, v_cache, meta, self.scale)
            h = self.linear(attn.reshape(T, hq * d), layer["o_proj"])
            prefetch("gate_up_proj", layer["gate_up_proj"])
            x, residual = self.rms_norm(h, layer["post_norm"], cfg.rms_norm_eps, residual)
            gate_up = self.linear(x, layer["gate_up_proj"])
            prefetch("down_proj", layer["down_proj"])
            h = self.linear.gated(gate_up, layer["down_proj"])  # SiLU-and-mul fused into the GEMV when it runs
            if i + 1 < len(self.layers):
                prefetch("qkv_proj", self.layers[i + 1]["qkv_proj"])
            else:
                prefetch("lm_head", self.lm_head)
        kw = {}
        if plan:
            # prefetches only read weights: joined once, before the step ends, ahead of a kernel launched
            # without programmatic dependence (a join edge and a programmatic edge are not mixed)
            self.prefetcher.join()
            kw = {"pdl": False} if self.rms_norm is not reference.rms_norm else {}
        out, _ = self.rms_norm(h, self.norm, cfg.rms_norm_eps, residual, **kw)
        return out

    @torch.inference_mode()
    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden: [S, hidden] -> fp32 logits [S, vocab]."""
        return self.linear(hidden, self.lm_head).float()
