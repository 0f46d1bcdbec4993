"""How the model multiplies by a weight: cuBLAS (``F.linear``), tritium's Triton GEMV or its skinny tensor-core
GEMM, chosen per shape.

At decode batch sizes (1-32 rows) a projection is a weight stream; whether the GEMV (1-4 rows), the skinny GEMM
(2-32 rows: :mod:`tritium.ops.skinny`) or cuBLAS streams it faster depends on the GPU and the shape, so
:class:`LinearDispatch` times them on the loaded weights at engine start (inside CUDA graphs, as decode runs)
and keeps the fastest per (M, N, K).
"""

from __future__ import annotations

import dataclasses
import logging

import torch
import torch.nn.functional as F
import triton

from tritium.fused.matmul import invariant_config, matmul, select_config
from tritium.ops import reference
from tritium.ops.gemv import CONFIGS, DEFAULT_CONFIG, INTERPRETER_CONFIG, MAX_M, GemvConfig, gemv, widest
from tritium.ops.qkv_rope import qkv_rope_write_kv
from tritium.ops.qkv_rope import supports as qkv_rope_supports
from tritium.ops.act_quant import quantize_activations_fp8
from tritium.ops.dequant import dequantize_fp8
from tritium.ops.int4 import Int4Weight, dequantize_int4_reference
from tritium.ops.int4_linear import GEMV_CONFIGS as INT4_GEMV_CONFIGS
from tritium.ops.int4_linear import MAX_M as INT4_MAX_M
from tritium.ops.int4_linear import WORD_GEMV_CONFIGS as INT4_WORD_CONFIGS
from tritium.ops.int4_linear import Int4GemvConfig, dequantize_int4, gemv_candidates, int4_gemv, int4_linear
from tritium.ops.quant import FP8_DTYPE, QUANTIZED_DTYPES, Fp8Rows, dequantize, dynamic_linear
from tritium.ops.rope import rope_write_kv
from tritium.ops.skinny import CONFIGS as SKINNY_CONFIGS
from tritium.ops.skinny import MAX_M as SKINNY_MAX_M
from tritium.ops.skinny import SkinnyConfig, skinny
from tritium.runtime import interpreting

log = logging.getLogger(__name__)
# The skinny GEMM is timed from 2 rows: at 1 it ties the GEMV alone and lost 5% of a Llama-3-8B decode step in the
# chain (no load before the PDL wait then; bench/NOTES.md, "Decode steps of 2-32 rows")
SKINNY_MIN_M = 2
# Split-K skinny candidates are timed from 16 rows: in whole Llama-3-8B decode graphs on an H200 they made 16-32 row
# steps 0.6-3.1% faster and 2-8 row steps 0.2-0.4% slower than the unsplit picks, though they won alone there too
# (bench/NOTES.md, "Split-K")
SKINNY_SPLIT_MIN_M = 16
# the GEMV kinds LinearDispatch.tune times (what a projection runs in the model)
VARIANTS = ("plain", "norm", "norm_folded", "residual", "gated", "gated_residual", "rope", "swiglu")


class LinearDispatch:
    """``F.linear`` with the Triton GEMV swapped in for small M.

    mode ``"torch"``: always ``F.linear``. ``"triton"``: the GEMV (default config) whenever M <= MAX_M.
    ``"auto"``: the GEMV with the config :meth:`tune` found faster than cuBLAS for that (M, N, K), else
    ``F.linear``; untuned shapes use ``F.linear``. Where cuBLAS could run (a product with nothing fused before it:
    plain, gated after the SiLU-and-mul kernel, rope after the product, swiglu), ``"auto"`` also times the
    skinny tensor-core GEMM (:func:`tritium.ops.skinny.skinny`, 2-32 rows, 16-bit weights) and a
    :class:`~tritium.ops.skinny.SkinnyConfig` choice runs it in cuBLAS's place (with the SiLU-and-mul in its
    epilogue for swiglu); :meth:`gemv_runs` is False for it (the norm, residual add and rope fusions are the
    GEMV's). ``"invariant"``: every product through
    :func:`tritium.fused.matmul` under its ``invariant_config`` (never split-K), so a row's result does not
    depend on the other rows (batch invariance); no GEMV, so nothing fuses into one.

    Every method takes ``scale``: the weight is stored quantized (float8_e4m3fn) with these fp32 row scales
    (weight-only FP8, :mod:`tritium.ops.quant`). The GEMV takes them as they are; where no GEMV runs, the
    product is :func:`tritium.fused.matmul` with the fp8 weight converted tile by tile (``"torch"`` mode: the
    weight dequantized, then ``F.linear``). An :class:`~tritium.ops.int4.Int4Weight` (weight-only int4) runs
    :func:`tritium.ops.int4_linear.int4_linear` at every M (its own GEMV, matmul or dequantize + cuBLAS by the
    row count; ``"torch"`` mode: the reference dequantization, then ``F.linear``); nothing fuses into it, so
    :meth:`gemv_runs` is False for it; :meth:`tune` times its GEMV configs alone (``int4_choices``). cuBLAS
    has no weight-only FP8 product, so in ``"auto"`` mode the "cublas" timing of a quantized shape is that
    matmul's. With ``dynamic_fp8`` (set by the model for
    ``quantization="fp8-dynamic"``) a quantized weight's product is W8A8 at every M: the activations
    quantized per row (:func:`tritium.ops.act_quant.quantize_activations_fp8`), then fp8 times fp8: the GEMV
    with the row scales of x (``x_scale``; plain, gated after the SiLU-and-mul kernel, swiglu) where it is the
    choice, else tritium's matmul on the tensor cores (:func:`quantized_linear`). Nothing fuses into the
    product (a norm, a residual add, rope: they act on x before it is quantized), so :meth:`gemv_runs` is
    False for such a weight; instead the kernel before quantizes: x may come as
    :class:`~tritium.ops.quant.Fp8Rows` (from ``rms_norm(..., quantize=True)``), and :meth:`gated` asks
    ``silu_and_mul`` for quantized rows.
    """

    MODES = ("auto", "triton", "torch", "invariant")

    def __init__(self, mode: str = "torch", silu_and_mul=reference.silu_and_mul, *, pdl: bool = True):
        if mode not in self.MODES:
            raise ValueError(f"linear_backend must be one of {self.MODES}, got {mode!r}")
        self.mode = mode
        self.silu_and_mul = silu_and_mul
        self.pdl = pdl  # False: GEMVs launch without programmatic dependent launch
        # (M, N, K) -> the GEMV's config, the skinny GEMM's (in cuBLAS's place) or None (cuBLAS)
        self.choices: dict[tuple[int, int, int], GemvConfig | SkinnyConfig | None] = {}
        # int4 weights: the fastest int4 GEMV config timed for each (M, N, K) (tune; the kernel's default where
        # none is)
        self.int4_choices: dict[tuple[int, int, int], Int4GemvConfig] = {}
        # the fastest GEMV timed for each (M, N, K), cuBLAS's choice or not (what a whole-step check tries)
        self.best_gemv: dict[tuple[int, int, int], GemvConfig | SkinnyConfig] = {}
        # where tune() picked the skinny GEMM: the fastest other kind timed there (a GEMV's config, None for
        # cuBLAS), what a whole-step check tries in its place; not part of state() (a restored start runs no check)
        self.not_skinny: dict[tuple[int, int, int], GemvConfig | None] = {}
        self.report: list[dict] = []
        self.chain_report: list[dict] = []  # the whole-step checks (ModelRunner.settle_linears)
        self.rejected: list[dict] = []  # GEMV candidates whose output disagreed with cuBLAS's in tune()
        self.restored = False  # the choices came from load_state (an earlier start's record), not from tune()
        self.activation_dtype = torch.bfloat16  # what tune() runs quantized weights' products in (the model sets it)
        self.dynamic_fp8 = False  # quantized weights multiply per-row quantized fp8 activations (the model sets it)
        self.fuse_quant = True  # W8A8 gated: the SiLU-and-mul quantizes its rows as it writes them

    def cublas_alternatives(self, m: int, shapes) -> dict[tuple[int, int, int], GemvConfig]:
        """For each (N, K) of ``shapes`` that :meth:`tune` put on cuBLAS at ``m`` rows, the fastest GEMV it
        timed there: the alternative a whole decode step is timed with (``ModelRunner.settle_linears``)."""
        if self.mode != "auto":
            return {}
        keys = [(m, *shape) for shape in shapes]
        return {k: self.best_gemv[k] for k in keys if k in self.choices and self.choices[k] is None
                and k in self.best_gemv}

    def skinny_alternatives(self, m: int, shapes) -> dict[tuple[int, int, int], GemvConfig | None]:
        """For each (N, K) of ``shapes`` where :meth:`tune` picked the skinny GEMM at ``m`` rows, the fastest other
        kind it timed there (a GEMV, which brings the chain's fusions back, or None: cuBLAS): the alternative a
        whole decode step is timed with (``ModelRunner.settle_linears``)."""
        if self.mode != "auto":
            return {}
        keys = [(m, *shape) for shape in shapes]
        return {k: self.not_skinny[k] for k in keys if isinstance(self.choices.get(k), SkinnyConfig)
                and k in self.not_skinny}

    def _dynamic(self, weight: torch.Tensor) -> bool:
        """Whether ``weight``'s products are W8A8 (``dynamic_fp8`` and a quantized weight)."""
        return self.dynamic_fp8 and weight.dtype in QUANTIZED_DTYPES

    def _check_rows_for(self, weight: torch.Tensor) -> None:
        """Quantized rows (Fp8Rows) multiply only a W8A8 weight: TypeError otherwise."""
        if not self._dynamic(weight):
            raise TypeError(f"x is quantized (Fp8Rows) but weight {tuple(weight.shape)} {weight.dtype} is not "
                            "an fp8 weight multiplied W8A8 (quantization='fp8-dynamic')")

    def quantizes_input(self, weight: torch.Tensor) -> bool:
        """Whether a product with ``weight`` quantizes its input per row (W8A8): then it takes that input as
        :class:`~tritium.ops.quant.Fp8Rows` too, quantized by the kernel that wrote it."""
        return self._dynamic(weight)

    def _choice(self, m: int, weight: torch.Tensor) -> GemvConfig | SkinnyConfig | None:
        """The GEMV or skinny GEMM config the mode and the tuning give ``m`` rows times ``weight^T``, or None for
        cuBLAS (the dense path)."""
        if self.mode in ("torch", "invariant") or isinstance(weight, Int4Weight):
            return None
        if self.mode == "triton":
            return (INTERPRETER_CONFIG if interpreting() else DEFAULT_CONFIG) if 1 <= m <= MAX_M else None
        return self.choices.get((m, *weight.shape)) if 1 <= m <= SKINNY_MAX_M else None

    def _config_for(self, m: int, weight: torch.Tensor) -> GemvConfig | None:
        """The GEMV config for ``m`` rows times ``weight^T`` where a GEMV may take fusions in (a norm, a
        residual add, rope): :meth:`_choice`, None for a W8A8 weight or where the skinny GEMM runs."""
        cfg = None if self._dynamic(weight) else self._choice(m, weight)
        return cfg if isinstance(cfg, GemvConfig) else None

    def _config(self, x: torch.Tensor | Fp8Rows, weight: torch.Tensor) -> GemvConfig | SkinnyConfig | None:
        """The GEMV config for ``x @ weight^T`` (W8A8 included), or None for cuBLAS. Fp8Rows only with a W8A8
        weight (TypeError otherwise: nothing else multiplies them)."""
        if isinstance(x, Fp8Rows):
            self._check_rows_for(weight)
            return self._choice(x.shape[0], weight)
        return self._choice(x.shape[0], weight) if x.stride(-1) == 1 else None

    def _dynamic_gemv(self, x: torch.Tensor | Fp8Rows, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
                      config: GemvConfig, scale: torch.Tensor, swiglu: bool = False) -> torch.Tensor:
        """The W8A8 GEMV: x quantized per row (unless it comes as Fp8Rows), then ``x8 @ weight^T`` with both
        scales, in x's dtype."""
        x8, x_scale = (x.data, x.scale) if isinstance(x, Fp8Rows) else quantize_activations_fp8(x, pdl=self.pdl)
        return gemv(x8, weight, bias, config=config, pdl=self._pdl, scale=scale, x_scale=x_scale,
                    out_dtype=x.dtype, swiglu=swiglu)

    @property
    def _pdl(self) -> bool | None:
        """The GEMVs' ``pdl`` argument: where supported, unless turned off."""
        return None if self.pdl else False

    def _dense(self, x: torch.Tensor | Fp8Rows, weight: torch.Tensor, bias: torch.Tensor | None = None,
               scale: torch.Tensor | None = None) -> torch.Tensor:
        """``x @ weight^T + bias`` where no GEMV runs: ``F.linear``, or the invariant matmul; a quantized
        weight (``scale``) through :func:`quantized_linear` (x may be Fp8Rows there, under W8A8)."""
        if isinstance(x, Fp8Rows):
            self._check_rows_for(weight)
        if isinstance(weight, Int4Weight):
            return self._int4(x, weight, bias)
        if scale is not None:
            return quantized_linear(x, weight, scale, bias, torch_only=self.mode == "torch",
                                    invariant=self.mode == "invariant", dynamic=self.dynamic_fp8)
        if self.mode != "invariant":
            return F.linear(x, weight, bias)
        return invariant_linear(x, weight, bias)

    def _int4(self, x: torch.Tensor, weight: Int4Weight, bias: torch.Tensor | None) -> torch.Tensor:
        """``x @ weight^T + bias`` for an int4 weight: tritium's int4 kernels, or (``"torch"`` mode) the
        reference dequantization then ``F.linear``. Not under ``"invariant"``: which int4 kernel runs depends on
        the row count."""
        if self.mode == "invariant":
            raise ValueError("int4 weights have no batch-invariant product (their kernel depends on the row "
                             "count): batch_invariant=True needs 16-bit or fp8 weights")
        if self.mode == "torch":
            return F.linear(x, dequantize_int4_reference(weight, x.dtype), bias)
        rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
        cfg = self.int4_choices.get((rows, *weight.shape))
        if cfg is None and interpreting() and 1 <= rows <= INT4_MAX_M:  # fewer, wider programs (as the GEMV's)
            cfg = widest(gemv_candidates(weight))
        return int4_linear(x, weight, bias, gemv_config=cfg)

    def __call__(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
                 scale: torch.Tensor | None = None) -> torch.Tensor:
        cfg = self._config(x, weight)
        if cfg is None:
            return self._dense(x, weight, bias, scale)
        if isinstance(cfg, SkinnyConfig):
            return skinny(x, weight, bias, config=cfg, pdl=self._pdl)
        if self._dynamic(weight):
            return self._dynamic_gemv(x, weight, bias, config=cfg, scale=scale)
        return gemv(x, weight, bias, config=cfg, pdl=self._pdl, scale=scale)

    def gated(self, x: torch.Tensor, weight: torch.Tensor, *, scale: torch.Tensor | None = None) -> torch.Tensor:
        """``silu_and_mul(x) @ weight^T`` for x = [gate | up] ``[M, 2K]``: one fused GEMV where the GEMV is
        the choice for (M, N, K), else ``silu_and_mul`` (the one given at construction) then ``F.linear``.
        W8A8: the activation first, quantized per row by the same launch, then the product."""
        if self._dynamic(weight):
            act = self._activation_fp8(x)
            cfg = self._config(act, weight)
            return (self._dense(act, weight, None, scale) if cfg is None
                    else self._dynamic_gemv(act, weight, None, config=cfg, scale=scale))
        cfg = self._config(x, weight)
        if cfg is None:
            return self._dense(self.silu_and_mul(x), weight, None, scale)
        if isinstance(cfg, SkinnyConfig):
            return skinny(self.silu_and_mul(x), weight, config=cfg, pdl=self._pdl)
        return gemv(x, weight, config=cfg, gated=True, pdl=self._pdl, scale=scale)

    def _activation_fp8(self, x: torch.Tensor) -> Fp8Rows | torch.Tensor:
        """The SiLU-and-mul given at construction for a W8A8 product: quantizing its rows as it writes them
        (``fuse_quant``), else in x's dtype (the product quantizes them)."""
        return self.silu_and_mul(x, quantize=True) if self.fuse_quant else self.silu_and_mul(x)

    def swiglu(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
               scale: torch.Tensor | None = None, addend: torch.Tensor | None = None) -> torch.Tensor:
        """``silu_and_mul(x @ weight^T + bias)`` for weight = [gate; up] ``[2I, K]`` -> ``[M, I]``: one GEMV with
        the SiLU-and-mul in its epilogue where the GEMV is the choice for (M, 2I, K), else ``F.linear`` then
        ``silu_and_mul`` (the one given at construction). ``addend`` ``[M, 2I]``: a per-row term added to the
        product before the SiLU-and-mul (a LoRA update: :func:`tritium.ops.lora.lora_delta`); 16-bit weights only
        (not quantized ones)."""
        cfg = self._config(x, weight)
        if addend is not None and (scale is not None or self._dynamic(weight) or isinstance(weight, Int4Weight)):
            raise ValueError("swiglu: addend is for 16-bit weights, not quantized ones")
        if cfg is None or cfg.block_n % 2:
            return self.silu_and_mul(self._dense_addend(x, weight, bias, scale, addend))
        if isinstance(cfg, SkinnyConfig):
            return skinny(x, weight, bias, config=cfg, swiglu=True, pdl=self._pdl, addend=addend)
        if self._dynamic(weight):
            return self._dynamic_gemv(x, weight, bias, config=cfg, scale=scale, swiglu=True)
        return gemv(x, weight, bias, config=cfg, swiglu=True, pdl=self._pdl, scale=scale, addend=addend)

    def _dense_addend(self, x, weight, bias, scale, addend: torch.Tensor | None) -> torch.Tensor:
        """:meth:`_dense`, then ``addend`` added (the product rounded first: the unfused path's order)."""
        y = self._dense(x, weight, bias, scale)
        return y if addend is None else y.add_(addend)

    def gemv_chosen(self, m: int, *weights: torch.Tensor) -> bool:
        """Whether each of ``weights`` runs a GEMV or the skinny GEMM for ``m`` rows, W8A8 ones included
        (:meth:`swiglu` puts the SiLU-and-mul in the epilogue of those too: it acts on the product, not on x)."""
        return all(self._choice(m, w) is not None for w in weights)

    def gemv_runs(self, m: int, *weights: torch.Tensor) -> bool:
        """Whether each of ``weights`` runs the Triton GEMV for ``m`` rows (the mode and the tuned choices):
        where it does, :meth:`normed` and :meth:`add_into` fuse the layer's RMSNorm and residual add."""
        return all(self._config_for(m, w) is not None for w in weights)

    def _gemv_config(self, x: torch.Tensor, weight: torch.Tensor) -> GemvConfig:
        cfg = self._config(x, weight)
        if not isinstance(cfg, GemvConfig):
            raise ValueError(f"no GEMV runs x {tuple(x.shape)} @ weight {tuple(weight.shape)}^T here (mode "
                             f"{self.mode!r}): check gemv_runs() before asking for a fused norm or residual add")
        return cfg

    def normed(self, h: torch.Tensor, norm_weight: torch.Tensor | None, eps: float, weight: torch.Tensor,
               bias: torch.Tensor | None = None, *, scale: torch.Tensor | None = None) -> torch.Tensor:
        """``rms_norm(h, norm_weight) @ weight^T + bias`` as one GEMV (the norm on the fly, its row never
        rounded: :func:`tritium.ops.reference.rms_norm_linear`; ``norm_weight`` None: folded into
        ``weight``); only where :meth:`gemv_runs`."""
        return gemv(h, weight, bias, config=self._gemv_config(h, weight), norm_weight=norm_weight, eps=eps,
                    pdl=self._pdl, scale=scale)

    def add_into(self, x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                 bias: torch.Tensor | None = None, *, gated: bool = False,
                 scale: torch.Tensor | None = None) -> torch.Tensor:
        """``residual += x @ weight^T + bias`` (``silu_and_mul(x)`` when ``gated``) in place as one GEMV,
        returning ``residual``; only where :meth:`gemv_runs`."""
        return gemv(x, weight, bias, config=self._gemv_config(x, weight), gated=gated, residual=residual,
                    pdl=self._pdl, scale=scale)

    def qkv_rope(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, positions: torch.Tensor,
                 cos_sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot_mapping: torch.Tensor, *,
                 num_q_heads: int, num_kv_heads: int, scale: torch.Tensor | None = None,
                 kv_scale: torch.Tensor | None = None, addend: torch.Tensor | None = None) -> torch.Tensor:
        """The QKV GEMV with rope and the KV-cache write in its epilogue (:func:`tritium.ops.qkv_rope_write_kv`),
        with this shape's tuned config where its rows split into rope pairs, else that kernel's default;
        only where :meth:`gemv_runs`. ``addend``: a per-row term added before rope (a LoRA update)."""
        cfg = self._gemv_config(x, weight)
        head_dim = weight.shape[0] // (num_q_heads + 2 * num_kv_heads)
        if cfg == INTERPRETER_CONFIG and not qkv_rope_supports(cfg, head_dim):  # as wide as its rope pairs allow
            pairs = cfg.block_n // 2
            while (head_dim // 2) % pairs:
                pairs //= 2
            cfg = dataclasses.replace(cfg, block_n=2 * pairs)
        return qkv_rope_write_kv(x, weight, bias, positions, cos_sin, k_cache, v_cache, slot_mapping,
                                 num_q_heads=num_q_heads, num_kv_heads=num_kv_heads,
                                 config=cfg if qkv_rope_supports(cfg, head_dim) else None,
                                 pdl=self._pdl, scale=scale, kv_scale=kv_scale, addend=addend)

    def state(self) -> dict:
        """What :meth:`tune` (and a whole-step check) settled, as JSON-able data: the choice and the fastest
        GEMV of every (M, N, K), and the reports. :meth:`load_state` puts it back."""
        return {"choices": encode_choices(self.choices), "best_gemv": encode_choices(self.best_gemv),
                "int4_choices": encode_choices(self.int4_choices),
                "report": self.report, "chain_report": self.chain_report, "rejected": self.rejected}

    def load_state(self, state: dict) -> None:
        """Put back what :meth:`state` returned (replacing the choices and reports held now). Raises ValueError,
        changing nothing, where ``state`` is malformed or names a GEMV configuration this version does not
        have (a state written by another version)."""
        try:
            choices, best = decode_choices(state["choices"]), decode_choices(state["best_gemv"])
            # a record from before int4 tuning has none: the int4 GEMVs' defaults
            int4 = decode_choices(state.get("int4_choices", []), INT4_WORD_CONFIGS + INT4_GEMV_CONFIGS)
            reports = [list(state[name]) for name in ("report", "chain_report", "rejected")]
        except (KeyError, TypeError, IndexError) as e:
            raise ValueError(f"linear state: malformed ({type(e).__name__}: {e})") from None
        if any(cfg is None for cfg in [*best.values(), *int4.values()]):
            raise ValueError("linear state: best_gemv or int4_choices names no GEMV configuration for some shape")
        self.choices, self.best_gemv, self.int4_choices, self.not_skinny = choices, best, int4, {}
        self.report, self.chain_report, self.rejected = reports
        self.restored = True

    @torch.inference_mode()
    def tune(self, weights: dict[str, list[torch.Tensor]], ms: tuple[int, ...], repeats: int = 5,
             variants: dict[str, str] | None = None, rope_heads: tuple[int, int] | None = None,
             scales: dict[str, list[torch.Tensor]] | None = None) -> list[dict]:
        """Time cuBLAS and every GEMV candidate on each group of same-shaped weights (all of a group in
        turn, so that no weight is read from L2) for each M in ``ms``; keep the fastest per (M, N, K).
        ``variants``: the GEMV each group runs in the model, timed as it runs (default "plain"): "norm"
        (:meth:`normed`), "norm_folded" (the same, its weight folded into W), "residual" (:meth:`add_into`),
        "gated" (:meth:`gated`), "gated_residual", "rope" (:meth:`qkv_rope`, the kernel itself with rope and
        the KV write, among the configurations whose rows split into rope pairs; ``rope_heads`` gives the
        (query, key/value) head counts; cuBLAS timed with the rope + KV-write kernel after it), "swiglu"
        (:meth:`swiglu`; cuBLAS timed with the SiLU-and-mul kernel after it). The fused ones (a norm or residual
        add inside) keep the fastest GEMV even where cuBLAS's plain product is faster: cuBLAS cannot run
        them, and one projection on cuBLAS turns the model's fused chain off (``LlamaModel``
        ``fuse_norms``); cuBLAS is still timed and reported. cuBLAS runs a gated projection after a
        SiLU-and-mul kernel, and is timed with it. The fastest GEMV of every shape is kept too
        (``best_gemv``): timed alone, a GEMV misses what it gains in the decode chain (its launch overlaps
        the kernel before it), which ``ModelRunner.settle_linears`` measures on whole decode steps.
        ``scales``: the row scales of groups whose weights are stored quantized (fp8), one per weight; their
        "cublas" timing is the dense path's (:func:`quantized_linear`); with ``dynamic_fp8`` the W8A8 GEMV
        (x quantized first: a "gated" one after the SiLU-and-mul kernel) against W8A8 matmul, plain, gated
        and swiglu variants only (the others fuse what acts on x before it is quantized: not timed).

        Returns (and keeps in ``report``) one row per (name, M): times in us and effective TB/s.
        """
        if self.mode != "auto":
            return []
        self.restored = False
        variants = variants or {}
        scales = scales or {}
        for name, weight_group in weights.items():
            if isinstance(weight_group[0], Int4Weight):
                self._tune_int4(name, weight_group, ms, repeats)
                continue
            N, K = weight_group[0].shape
            nbytes = sum(w.numel() * w.element_size() for w in weight_group)
            scale_group = scales.get(name)
            quantized = scale_group is not None
            if quantized and len(scale_group) != len(weight_group):
                raise ValueError(f"scales[{name!r}] must hold one scale per weight ({len(weight_group)})")
            group = list(zip(weight_group, scale_group or [None] * len(weight_group)))
            # the activations' dtype: the model's (a quantized weight's own is fp8)
            dtype, dev = (self.activation_dtype if quantized else weight_group[0].dtype), weight_group[0].device
            variant = variants.get(name, "plain")
            if variant not in VARIANTS:
                raise ValueError(f"variants[{name!r}] must be one of {VARIANTS}, got {variant!r}")
            dynamic = quantized and self.dynamic_fp8  # W8A8: the GEMV quantizes x first; nothing fuses before it
            if dynamic and variant not in ("plain", "gated", "swiglu"):
                continue
            rope = None
            if variant == "rope":
                rope = _RopeBench(rope_heads, N, dtype, dev)
            run = self._dynamic_gemv if dynamic else gemv if rope is None else rope.gemv
            # the skinny GEMM in cuBLAS's place: 16-bit weights, nothing fused before the product
            skinny_variant = (not quantized and variant in ("plain", "gated", "rope", "swiglu")
                              and dtype in (torch.float16, torch.bfloat16))
            for m in ms:
                gemv_m, skinny_m = 1 <= m <= MAX_M, skinny_variant and SKINNY_MIN_M <= m <= SKINNY_MAX_M
                if not (gemv_m or skinny_m):
                    continue
                gated = variant.startswith("gated")
                swiglu = variant == "swiglu"
                x = torch.randn(m, 2 * K if gated else K, dtype=dtype, device=dev)
                kw = dict(gated=True) if gated else dict(swiglu=True) if swiglu else {}
                # W8A8 gated: the SiLU-and-mul kernel quantizing as it writes, then the GEMV of its output (timed
                # together)
                pre = self._activation_fp8 if dynamic and gated else (lambda y: y)
                if dynamic and gated:
                    kw = {}
                if variant.startswith("norm"):
                    unit = torch.ones(K, dtype=dtype, device=dev) if variant == "norm" else None
                    kw.update(eps=1e-5, norm_weight=unit)
                if variant.endswith("residual"):
                    kw.update(residual=torch.zeros(m, N, dtype=dtype, device=dev))
                # cuBLAS as the model runs it: SiLU-and-mul is a kernel of its own there (before a gated
                # projection, after a swiglu one)
                act = (self._activation_fp8 if dynamic else self.silu_and_mul) if gated else None
                post = self.silu_and_mul if swiglu else rope.after_cublas if rope is not None else (lambda y: y)
                times = {"cublas": _time_group(
                    lambda p: post(self._dense(x if act is None else act(x), p[0], None, p[1])), group, repeats)}
                if dynamic:
                    expected = post(dynamic_linear(x if act is None else self.silu_and_mul(x), *group[0]))
                else:
                    first = group[0][0] if not quantized else dequantize(*group[0], dtype)
                    expected = post(_expected(x, first, act, kw))
                # each candidate: (config, its product of (weight, scale) as the model runs it, its keywords)
                candidates = []
                for cfg in (SKINNY_CONFIGS if skinny_m else ()):  # in cuBLAS's place: rope, the KV write after it
                    if cfg.split_k > 1 and m < SKINNY_SPLIT_MIN_M:
                        continue
                    candidates.append((cfg, (lambda p, c, **_: skinny(x, p[0], config=c, swiglu=True)) if swiglu
                                       else (lambda p, c, **_: post(skinny(x if act is None else act(x), p[0],
                                                                           config=c))), {}))
                for cfg in (CONFIGS if gemv_m else ()):
                    if not (cfg.block_k > 2 * triton.next_power_of_2(K) or (swiglu and cfg.block_n % 2)
                            or (rope is not None and not qkv_rope_supports(cfg, rope.head_dim))):
                        candidates.append((cfg, lambda p, c, **k: run(pre(x), p[0], config=c, scale=p[1], **k), kw))
                for cfg, product, args in candidates:
                    kind = "skinny" if isinstance(cfg, SkinnyConfig) else "gemv"
                    try:
                        # checked against cuBLAS on this GPU before it is timed (a fresh residual: timing adds)
                        once = dict(args, residual=torch.zeros_like(args["residual"])) if "residual" in args else args
                        error = _disagreement(product(group[0], cfg, **once), expected)
                        if error is not None:
                            self.rejected.append({"config": str(cfg), "m": m, "n": N, "k": K, "variant": variant,
                                                  "error": error})
                            log.warning("%s %s on %s (%s) disagrees with cuBLAS: %s; not used", kind, cfg, (m, N, K),
                                        variant, error)
                            continue
                        times[cfg] = _time_group(lambda p, c=cfg, f=product, a=args: f(p, c, **a), group, repeats)
                    except Exception as e:  # a candidate that does not compile here (registers, shared memory)
                        log.debug("%s %s on %s: %s", kind, cfg, (m, N, K), e)
                # a norm or a residual add inside: cuBLAS cannot run it, and choosing it would turn the fused
                # chain off for every projection; what the chain buys is measured as a whole (engine-ablate)
                fused = variant not in ("plain", "gated", "rope", "swiglu")
                gemvs = [k for k in times if k != "cublas"]
                best = min(gemvs if fused and gemvs else times, key=times.get)
                self.choices[(m, N, K)] = None if best == "cublas" else best
                if gemvs:
                    self.best_gemv[(m, N, K)] = min(gemvs, key=times.get)
                self.not_skinny.pop((m, N, K), None)
                if isinstance(best, SkinnyConfig):  # the runner-up of another kind (cuBLAS always timed)
                    others = [k for k in times if not isinstance(k, SkinnyConfig)]
                    runner_up = min(others, key=times.get)
                    self.not_skinny[(m, N, K)] = None if runner_up == "cublas" else runner_up
                per_call = {str(k): round(v / len(group) * 1e3, 2) for k, v in times.items()}
                self.report.append({
                    "weight": name, "variant": variant, "m": m, "n": N, "k": K, "layers": len(group),
                    **({"weight_dtype": str(weight_group[0].dtype).removeprefix("torch."),
                        "dense": "tritium matmul (fp8 activations and weight)" if dynamic
                        else "tritium matmul (fp8 weight)"} if quantized else {}),
                    "choice": str(best),
                    "us_per_call": per_call,
                    "cublas_tbs": round(nbytes / (times["cublas"] * 1e-3) / 1e12, 3),
                    "best_tbs": round(nbytes / (times[best] * 1e-3) / 1e12, 3),
                })
                log.info("linear %s m=%d: %s (%.2f TB/s; cuBLAS %.2f TB/s)", name, m, best,
                         self.report[-1]["best_tbs"], self.report[-1]["cublas_tbs"])
        return self.report

    def _tune_int4(self, name: str, group: list[Int4Weight], ms: tuple[int, ...], repeats: int) -> None:
        """:meth:`tune` for a group of int4 weights: every word GEMV config the weight allows (else every byte
        GEMV config), each checked first against the weight dequantized then cuBLAS, timed alone at each M of
        ``ms`` up to the int4 GEMV's MAX_M; the fastest kept in ``int4_choices``, the timings in ``report``. Nothing of
        cuBLAS's to choose: int4 runs its own kernels at every M, and nothing fuses into them."""
        N, K = group[0].shape
        nbytes = sum(w.nbytes() for w in group)
        dev = group[0].device
        for m in ms:
            if not 1 <= m <= INT4_MAX_M:
                continue
            x = torch.randn(m, K, dtype=self.activation_dtype, device=dev)
            expected = F.linear(x, dequantize_int4(group[0], x.dtype))
            times = {}
            # the byte GEMV's configs only where the weight runs no word GEMV (it is 1.3-1.5x slower)
            for cfg in gemv_candidates(group[0]):
                try:
                    error = _disagreement(int4_gemv(x, group[0], config=cfg), expected)
                except Exception as e:  # a candidate that does not compile or run here: left out
                    log.debug("int4 gemv %s on %s: %s", cfg, (m, N, K), e)
                    continue
                if error is not None:
                    self.rejected.append({"config": str(cfg), "m": m, "n": N, "k": K, "variant": "int4",
                                          "error": error})
                    log.warning("int4 gemv %s on %s disagrees with the dequantized product: %s; not used",
                                cfg, (m, N, K), error)
                    continue
                try:
                    times[cfg] = _time_group(lambda w, c=cfg: int4_gemv(x, w, config=c), group, repeats)
                except Exception as e:  # a candidate that does not run here (e.g. too many registers)
                    log.debug("int4 gemv %s on %s: %s", cfg, (m, N, K), e)
            if not times:
                continue
            best = min(times, key=times.get)
            self.int4_choices[(m, N, K)] = best
            self.report.append({
                "weight": name, "variant": "int4", "m": m, "n": N, "k": K, "layers": len(group),
                "choice": str(best), "us_per_call": {str(k): round(v / len(group) * 1e3, 2) for k, v in times.items()},
                "best_tbs": round(nbytes / (times[best] * 1e-3) / 1e12, 3)})
            log.info("linear %s (int4) m=%d: %s (%.2f TB/s)", name, m, best, self.report[-1]["best_tbs"])


def dense_paths(linear: LinearDispatch, n: int, k: int, max_rows: int, dtype: torch.dtype,
                device: torch.device) -> dict[tuple, int]:
    """The kernels the dense path of an fp8 weight ``[n, k]`` on ``device`` (:func:`quantized_linear` under
    ``linear``'s mode) can launch for 1 to ``max_rows`` rows of x in ``dtype``: {kernel key: the fewest rows
    that select it}."""
    if linear.mode == "torch" or (device.type == "cpu" and not interpreting()):
        return {}
    paths: dict[tuple, int] = {}
    for m in range(1, max_rows + 1):
        if linear.dynamic_fp8:
            a_dtype = FP8_DTYPE
        elif linear.mode != "invariant" and m > FP8_MATMUL_MAX_ROWS and device.type == "cuda":
            paths.setdefault(("dequantize + cuBLAS",), m)
            continue
        else:
            a_dtype = dtype
        choose = invariant_config if linear.mode == "invariant" else select_config
        paths.setdefault(("matmul", choose(m, n, k, a_dtype, device)), m)
    return paths


def warm_dense_paths(linear: LinearDispatch, weight: torch.Tensor, scale: torch.Tensor, max_rows: int,
                     dtype: torch.dtype) -> int:
    """Run an fp8 weight's dense path once for each kernel of :func:`dense_paths` (the activation quantization
    with the W8A8 ones): at engine start, so that no Triton kernel compiles inside a request (the 16-bit
    models' dense path is cuBLAS, which has nothing to compile). Returns how many ran."""
    n, k = weight.shape
    paths = dense_paths(linear, n, k, max_rows, dtype, weight.device)
    for m in paths.values():
        linear._dense(torch.randn(m, k, dtype=dtype, device=weight.device), weight, None, scale)
    return len(paths)


def invariant_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                     scale: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight^T + bias`` with each row's bits independent of the other rows (x ``[..., K]``, weight
    ``[N, K]``; ``scale``: its fp8 row scales): :func:`tritium.fused.matmul` under ``invariant_config`` for
    the row count, then the bias."""
    return _matmul_linear(x, weight, bias, scale, invariant=True)


def _matmul_linear(x: torch.Tensor | Fp8Rows, weight: torch.Tensor, bias: torch.Tensor | None,
                   scale: torch.Tensor | None, *, invariant: bool, dynamic: bool = False) -> torch.Tensor:
    """``x @ weight^T + bias`` through :func:`tritium.fused.matmul` (x ``[..., K]``), under ``invariant_config``
    for the row count when ``invariant``, else its own choice; ``dynamic`` (W8A8): x quantized per row first
    (x may come quantized, as Fp8Rows)."""
    if isinstance(x, Fp8Rows):
        a, a_scale = x.data, x.scale
    else:
        x2 = x.reshape(-1, x.shape[-1])
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        a, a_scale = quantize_activations_fp8(x2) if dynamic else (x2, None)
    m, k = a.shape
    n = weight.shape[0]
    config = invariant_config(m, n, k, a.dtype, a.device) if invariant else None
    out = matmul(a, weight.t(), config=config, b_scale=scale, a_scale=a_scale,
                 out_dtype=x.dtype if dynamic else None)
    if bias is not None:
        out += bias
    return out.view(*x.shape[:-1], n)


# NOTE: H200, Llama-3-8B projections (bench/probe_fp8_linear.py, bench/NOTES.md "Weight-only FP8"): tritium's
# matmul converting fp8 tiles in registers streams 0.3-1.3 TB/s of fp8 (1.5-4x bf16 cuBLAS's time) and is
# 2x cuBLAS at 2048 rows; dequantizing to the activations' dtype (one pass, tritium.ops.dequant: 3 bytes moved a
# weight) then cuBLAS pays where the product is compute-bound: above this many rows.
FP8_MATMUL_MAX_ROWS = 128


def quantized_linear(x: torch.Tensor | Fp8Rows, weight: torch.Tensor, scale: torch.Tensor,
                     bias: torch.Tensor | None = None, *, torch_only: bool = False, invariant: bool = False,
                     dynamic: bool = False) -> torch.Tensor:
    """``x @ (scale[:, None] * weight)^T + bias`` for an fp8 ``weight [N, K]`` and its fp32 row scales
    ``[N]``, in x's dtype: :func:`tritium.fused.matmul` converting the weight tile by tile (under
    ``invariant_config`` when ``invariant``), or the weight dequantized to x's dtype and ``F.linear``: with
    ``torch_only``, where tritium's kernels do not run (a CPU tensor outside the interpreter), and on a GPU
    above ``FP8_MATMUL_MAX_ROWS`` rows (prefill: cuBLAS's compute rate wins over the dequant pass).

    ``dynamic`` (W8A8, ``quantization="fp8-dynamic"``): x quantized per row to fp8
    (:func:`tritium.ops.act_quant.quantize_activations_fp8`), then fp8 times fp8 in tritium's matmul at every
    row count (under ``invariant``: its W8A8 ``invariant_config``, and the per-row quantization keeps rows
    independent); the reference :func:`tritium.ops.quant.dynamic_linear` where tritium's kernels do not run.
    x may come quantized per row already (:class:`~tritium.ops.quant.Fp8Rows`, ``dynamic`` only)."""
    if isinstance(x, Fp8Rows) and not dynamic:
        raise TypeError("quantized_linear: x is quantized (Fp8Rows); that takes dynamic=True (W8A8)")
    if dynamic:
        if torch_only or (x.device.type == "cpu" and not interpreting()):
            return dynamic_linear(x, weight, scale, bias)
        return _matmul_linear(x, weight, bias, scale, invariant=invariant, dynamic=True)
    if invariant:
        return invariant_linear(x, weight, bias, scale)
    if torch_only or (x.device.type == "cpu" and not interpreting()):
        return F.linear(x, dequantize(weight, scale, x.dtype), bias)
    if x.device.type == "cuda" and x.numel() // x.shape[-1] > FP8_MATMUL_MAX_ROWS:
        return F.linear(x, dequantize_fp8(weight, scale, x.dtype), bias)
    return _matmul_linear(x, weight, bias, scale, invariant=False)


def encode_choices(choices: dict[tuple[int, int, int], GemvConfig | SkinnyConfig | None]) -> list[list]:
    """``{(M, N, K): config or None (cuBLAS)}`` as JSON-able rows ``[M, N, K, config's fields or None]``, sorted;
    :func:`decode_choices` reads them back."""
    return [[*key, None if cfg is None else dataclasses.asdict(cfg)] for key, cfg in sorted(choices.items())]


def decode_choices(rows, candidates: tuple = CONFIGS + SKINNY_CONFIGS) \
        -> dict[tuple[int, int, int], GemvConfig | SkinnyConfig | None]:
    """The choices :func:`encode_choices` wrote. Raises ValueError for a malformed row or a configuration that
    is not one of ``candidates`` (this version's GEMV configs; TypeError where ``rows`` is not a list of
    rows)."""
    return {_key(row): _config_from(row[3], candidates) for row in rows}


def _key(row) -> tuple[int, int, int]:
    key = tuple(row[:3])
    if len(row) != 4 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in key):
        raise ValueError(f"linear state: expected [M, N, K, config] with positive integers, got {row!r}")
    return key


def _config_from(data: dict | None, candidates: tuple) -> GemvConfig | SkinnyConfig | None:
    """The one of ``candidates`` that ``data`` describes (None: cuBLAS)."""
    if data is None:
        return None
    for cfg in candidates:
        if data == dataclasses.asdict(cfg):
            return cfg
    raise ValueError(f"linear state: {data!r} is not a GEMV configuration of this version")


class _RopeBench:
    """What :meth:`LinearDispatch.tune` times a "rope" projection with: the QKV GEMV with rope and the KV write
    inside (:func:`tritium.ops.qkv_rope_write_kv`), and cuBLAS followed by the rope + KV-write kernel, as
    the model runs either. Every row sits at position 0, where the rotation is the identity (cos 1, sin
    0), so that the output is the plain product a candidate is checked against; each row writes a slot of
    a small cache of its own."""

    def __init__(self, heads: tuple[int, int] | None, n: int, dtype: torch.dtype, device: torch.device):
        if heads is None or len(heads) != 2 or min(heads) < 1 or n % (heads[0] + 2 * heads[1]):
            raise ValueError(f"rope_heads must be (num_q_heads, num_kv_heads) dividing the weight's {n} rows into "
                             f"q, k and v heads of one size, got {heads!r}")
        self.hq, self.hkv = heads
        self.head_dim = d = n // (self.hq + 2 * self.hkv)
        self.cos_sin = torch.cat([torch.ones(1, d // 2), torch.zeros(1, d - d // 2)], dim=1).to(device)
        rows = max(MAX_M, SKINNY_MAX_M)
        self.k_cache = torch.zeros(1, rows, self.hkv, d, dtype=dtype, device=device)
        self.v_cache = torch.zeros_like(self.k_cache)
        self.positions = torch.zeros(rows, dtype=torch.int64, device=device)
        self.slots = torch.arange(rows, device=device)

    def gemv(self, x: torch.Tensor, weight: torch.Tensor, *, config: GemvConfig,
             scale: torch.Tensor | None = None) -> torch.Tensor:
        m = x.shape[0]
        return qkv_rope_write_kv(x, weight, None, self.positions[:m], self.cos_sin, self.k_cache, self.v_cache,
                                 self.slots[:m], num_q_heads=self.hq, num_kv_heads=self.hkv, config=config,
                                 scale=scale)

    def after_cublas(self, qkv: torch.Tensor) -> torch.Tensor:
        m, d = qkv.shape[0], self.head_dim
        q = qkv[:, :self.hq * d].view(m, self.hq, d)
        k = qkv[:, self.hq * d:(self.hq + self.hkv) * d].view(m, self.hkv, d)
        v = qkv[:, (self.hq + self.hkv) * d:].view(m, self.hkv, d)
        rope_write_kv(q, k, v, self.positions[:m], self.cos_sin, self.k_cache, self.v_cache, self.slots[:m])
        return qkv


def _expected(x: torch.Tensor, weight: torch.Tensor, act, kw: dict) -> torch.Tensor:
    """cuBLAS's product for a GEMV candidate's check: ``act`` (SiLU-and-mul) first where gated, the row
    normed first (:func:`tritium.ops.reference.rms_norm`, a unit weight where it is folded into W) where
    the GEMV takes ``eps``."""
    if act is not None:
        x = act(x)
    if "eps" in kw:
        nw = kw["norm_weight"]
        x = reference.rms_norm(x, torch.ones_like(x[0]) if nw is None else nw, kw["eps"])[0]
    return F.linear(x, weight)


def _disagreement(out: torch.Tensor, expected: torch.Tensor) -> str | None:
    """Why ``out`` is not ``expected`` up to rounding (a relative error over 2e-2 for 16-bit types, 1e-3
    for fp32, or a non-finite value), or None where it is."""
    if not torch.isfinite(out).all():
        return "non-finite values"
    tol = 1e-3 if out.dtype == torch.float32 else 2e-2
    err = ((out.float() - expected.float()).norm() / expected.float().norm().clamp_min(1e-30)).item()
    return None if err <= tol else f"relative error {err:.2e} > {tol:g}"


def _time_group(fn, group: list, repeats: int) -> float:
    """Best of ``repeats`` timings (ms) of ``fn`` over every tensor of ``group`` in turn, replayed from a
    CUDA graph as decode steps run: timed back to back from Python, a small projection measures the host's
    launch rate instead (the Triton launcher costs more host time than the ~20 us kernel; bench/NOTES.md)."""
    for w in group[:2]:  # compile + warm up
        fn(w)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for w in group:
            fn(w)
    graph.replay()
    best = float("inf")
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    del graph
    return best
