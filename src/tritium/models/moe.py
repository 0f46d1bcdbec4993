"""Sparse mixture-of-experts MLP (Mixtral, Qwen3-MoE): a router picks ``top_k`` of ``num_experts`` SwiGLU experts
per token and the layer's output is their weighted sum.

``y[t] = sum_j w[t, j] * down_e(silu(gate_e(x[t])) * up_e(x[t]))``, ``e = ids[t, j]``, where ``(w, ids)`` are the
top_k of ``softmax(x[t] @ router^T)`` (renormalized to sum 1 where the model does: Mixtral always, Qwen3-MoE with
``norm_topk_prob``). The experts' weights are stacked, ``w_gate_up [E, 2 I, H]`` (gate rows, then up rows) and
``w_down [E, H, I]``, for :func:`tritium.ops.moe.fused_moe`.

Tensor parallelism splits every expert's intermediate size I, as the dense MLP's is split (gate/up by rows, down
by columns): each rank computes a partial sum of y and the model all-reduces it with the residual add that
follows. The router is replicated.
"""

from __future__ import annotations

import re

import torch

from tritium.models.layers import SINGLE, ParallelGroup, checkpoint_scale, shard_range
from tritium.models.weights import LazyTensor, materialize
from tritium.ops.moe import NORM_ROUTE_MAX_HIDDEN, norm_route_counters
from tritium.ops.quant import FP8_DTYPE, quantize_rows

# checkpoint names of one expert's projections inside a layer -> (the stacked weight, its part)
# Mixtral: block_sparse_moe.experts.{e}.w1 (gate) / w3 (up) / w2 (down); Qwen3-MoE: mlp.experts.{e}.*_proj
_EXPERT_NAME = re.compile(r"(block_sparse_moe|mlp)\.experts\.(\d+)\.(w1|w2|w3|gate_proj|up_proj|down_proj)\."
                          r"(weight|weight_scale|input_scale)")
_EXPERT_PART = {"w1": "gate", "gate_proj": "gate", "w3": "up", "up_proj": "up", "w2": "down", "down_proj": "down"}
# decode steps up to this many tokens norm and route in one launch (ops.moe_norm_route)
NORM_ROUTE_MAX_TOKENS = 16
_SHARED_NAMES = {"mlp.shared_expert.gate_proj.weight": "gate", "mlp.shared_expert.up_proj.weight": "up",
                 "mlp.shared_expert.down_proj.weight": "down", "mlp.shared_expert_gate.weight": "gate_weight"}
_ROUTER_NAMES = ("block_sparse_moe.gate.weight", "mlp.gate.weight")
# transformers 5 in memory (and checkpoints saved from it without conversion): the experts stacked already
# (and GGUF files, whose stacked gate and up projections come apart: tritium.models.weights names them so)
_STACKED_NAMES = {"mlp.experts.gate_up_proj": "gate_up", "mlp.experts.down_proj": "down",
                  "block_sparse_moe.experts.gate_up_proj": "gate_up", "block_sparse_moe.experts.down_proj": "down",
                  "mlp.experts.gate_proj": "gate", "mlp.experts.up_proj": "up"}


class SparseMoeBlock:
    """One decoder layer's experts and router, sharded over ``group`` along the intermediate size.

    ``router [E, H]``; ``w_gate_up [E, 2 i, H]`` and ``w_down [E, H, i]`` with ``i = I / world_size`` (rank r holds
    intermediate features ``[r i, (r + 1) i)`` of every expert).

    ``quant="fp8"`` (weight-only): the experts' weights stored as float8_e4m3fn with a scale per row,
    ``gate_up_scale [E, 2 i]`` and ``down_scale [E, H]``, each row's scale from the whole row of the checkpoint
    (a down row's every column, whatever this rank holds: every tensor-parallel size holds the same weights), as
    the dense layers quantize theirs; 16/32-bit checkpoint tensors are quantized as they load. An FP8 checkpoint's
    experts (expert by expert: ``experts.{e}.gate_proj.weight`` float8 with its ``weight_scale``, per tensor or per
    channel, as compressed-tensors writes them) load as stored with their scales; their ``input_scale`` goes unused
    (the activations stay in the model dtype). The router and Qwen2-MoE's shared expert stay in the model dtype.
    """

    def __init__(self, hidden_size: int, intermediate_size: int, num_experts: int, top_k: int, renormalize: bool, *,
                 group: ParallelGroup = SINGLE, dtype: torch.dtype, device: torch.device | str,
                 name: str = "moe", shared_intermediate_size: int = 0, quant: str | None = None):
        for arg, value in (("hidden_size", hidden_size), ("intermediate_size", intermediate_size),
                           ("num_experts", num_experts), ("top_k", top_k)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: {arg} must be a positive int, got {value!r}")
        if (not isinstance(shared_intermediate_size, int) or isinstance(shared_intermediate_size, bool)
                or shared_intermediate_size < 0):
            raise ValueError(f"{name}: shared_intermediate_size must be an int >= 0 (0: no shared expert), got "
                             f"{shared_intermediate_size!r}")
        if quant not in (None, "fp8"):
            raise ValueError(f"{name}: quant must be None or 'fp8' (weight-only fp8 experts), got {quant!r}")
        if top_k > num_experts:
            raise ValueError(f"{name}: top_k (num_experts_per_tok) must be <= num_experts ({num_experts}), got {top_k}")
        self.name = name
        self.group = group
        self.hidden_size, self.intermediate_size = hidden_size, intermediate_size
        self.num_experts, self.top_k, self.renormalize = num_experts, top_k, renormalize
        self._cols = shard_range(intermediate_size, group.rank, group.world_size,
                                 name=f"{name}: moe intermediate_size")
        i = self._cols[1] - self._cols[0]
        self.router = torch.empty(num_experts, hidden_size, dtype=dtype, device=device)
        self.quant = quant
        wdtype = FP8_DTYPE if quant == "fp8" else dtype
        self.w_gate_up = torch.empty(num_experts, 2 * i, hidden_size, dtype=wdtype, device=device)
        self.w_down = torch.empty(num_experts, hidden_size, i, dtype=wdtype, device=device)
        self.scales = {}  # fused_moe's keywords: the fp8 weights' per-row scales
        if quant == "fp8":
            self.scales = {"gate_up_scale": torch.ones(num_experts, 2 * i, dtype=torch.float32, device=device),
                           "down_scale": torch.ones(num_experts, hidden_size, dtype=torch.float32, device=device)}
        # Qwen2-MoE's shared expert, sharded as the experts are: [gate; up] rows, down columns, its gate replicated
        self.shared_intermediate_size = shared_intermediate_size
        self.shared = None
        if shared_intermediate_size:
            self._shared_cols = shard_range(shared_intermediate_size, group.rank, group.world_size,
                                            name=f"{name}: shared_expert_intermediate_size")
            si = self._shared_cols[1] - self._shared_cols[0]
            self.shared = {"gate_up": torch.empty(2 * si, hidden_size, dtype=dtype, device=device),
                           "down": torch.empty(hidden_size, si, dtype=dtype, device=device),
                           "gate": torch.empty(1, hidden_size, dtype=dtype, device=device)}
        self._loaded: set[str] = set()
        self._stored_fp8: set[str] = set()  # parts loaded as float8 from the checkpoint: their scales must come too
        # the tickets of ops.moe_norm_route (decode steps of up to NORM_ROUTE_MAX_TOKENS tokens), this layer's own
        self.route_counters = norm_route_counters(NORM_ROUTE_MAX_TOKENS, device)

    # -- loading -------------------------------------------------------------------------------------------
    def load(self, name: str, tensor: torch.Tensor | LazyTensor) -> bool:
        """Load a checkpoint tensor by its name inside the layer (``mlp.gate.weight``,
        ``block_sparse_moe.experts.3.w1.weight`` ...); False if the name is not one of the block's."""
        if name in _ROUTER_NAMES:
            self._copy("router", self.router, tensor, (self.num_experts, self.hidden_size), lambda t: t[:])
            return True
        if name in _STACKED_NAMES:
            self._load_stacked(_STACKED_NAMES[name], tensor)
            return True
        if name in _SHARED_NAMES and self.shared is not None:
            self._load_shared(_SHARED_NAMES[name], tensor)
            return True
        m = _EXPERT_NAME.fullmatch(name)
        if m is None:
            return False
        e, part, kind = int(m.group(2)), _EXPERT_PART[m.group(3)], m.group(4)
        if e >= self.num_experts:
            raise ValueError(f"{self.name}: {name}: expert {e} is out of range (num_experts {self.num_experts})")
        H, I, (a, b) = self.hidden_size, self.intermediate_size, self._cols
        i = b - a
        if kind == "input_scale":  # an FP8 checkpoint's static activation scale: the activations stay unquantized
            return True
        label = f"experts.{e}.{part}"
        if part == "down":
            scale = self._scale_slot("down_scale", e)
            if kind == "weight_scale":
                self._load_scale(label, tensor, H, scale, slice(None))
            else:
                self._copy(label, self.w_down[e], tensor, (H, I), lambda t: t[:, a:b], scale=scale,
                           whole_rows=False, as_stored=True)
        else:
            rows = slice(0, i) if part == "gate" else slice(i, 2 * i)
            scale = self._scale_slot("gate_up_scale", e, rows)
            if kind == "weight_scale":
                self._load_scale(label, tensor, I, scale, slice(a, b))
            else:
                self._copy(label, self.w_gate_up[e, rows], tensor, (I, H), lambda t: t[a:b], scale=scale,
                           as_stored=True)
        return True

    def _load_scale(self, part: str, t, rows: int, dst: torch.Tensor | None, shard: slice) -> None:
        """A stored fp8 part's checkpoint scale (one value, or one per row of the full part): this rank's ``shard``
        of its rows into ``dst``."""
        if dst is None:
            raise ValueError(f"{self.name}: got a weight scale for {part}, but the experts are not fp8: build the "
                             f"model with quantization='fp8'")
        scale = checkpoint_scale(self.name, f"{part}.weight_scale", t, rows)
        with torch.no_grad():
            dst.copy_(scale[shard])
        self._loaded.add(f"{part}.scale")

    def _scale_slot(self, name: str, *index) -> torch.Tensor | None:
        """The part of a scale tensor a weight part's row scales go to (None: the weights are not fp8)."""
        return self.scales[name][index] if self.scales else None

    def _load_stacked(self, part: str, t: torch.Tensor | LazyTensor) -> None:
        """Stacked experts: transformers 5's ``gate_up_proj [E, 2 I, H]`` or ``down_proj [E, H, I]``; a GGUF file's
        ``gate_proj`` / ``up_proj [E, I, H]``."""
        E, H, I, (a, b) = self.num_experts, self.hidden_size, self.intermediate_size, self._cols
        i = b - a
        if part == "down":
            self._copy("experts.down", self.w_down, t, (E, H, I), lambda t: t[:, :, a:b],
                       scale=self._scale_slot("down_scale", slice(None)), whole_rows=False)
            return
        if part in ("gate", "up"):
            rows = slice(0, i) if part == "gate" else slice(i, 2 * i)
            self._copy(f"experts.{part}", self.w_gate_up[:, rows], t, (E, I, H), lambda t: t[:, a:b],
                       scale=self._scale_slot("gate_up_scale", slice(None), rows))
            return
        self._copy("experts.gate_up", self.w_gate_up[:, :i], t, (E, 2 * I, H), lambda t: t[:, a:b],
                   scale=self._scale_slot("gate_up_scale", slice(None), slice(0, i)))
        self._copy("experts.gate_up", self.w_gate_up[:, i:], t, (E, 2 * I, H), lambda t: t[:, I + a:I + b],
                   scale=self._scale_slot("gate_up_scale", slice(None), slice(i, 2 * i)))

    def _load_shared(self, part: str, t: torch.Tensor | LazyTensor) -> None:
        """Qwen2-MoE's shared expert (``mlp.shared_expert.{gate,up,down}_proj``) and its gate
        (``mlp.shared_expert_gate``, ``[1, H]``)."""
        H, S, (a, b) = self.hidden_size, self.shared_intermediate_size, self._shared_cols
        si = b - a
        if part == "gate_weight":  # [1, H] (transformers) or [H] (a GGUF file)
            shape = (H,) if len(t.shape) == 1 else (1, H)
            self._copy("shared.gate_weight", self.shared["gate"], t, shape, lambda t: t[:])
        elif part == "down":
            self._copy("shared.down", self.shared["down"], t, (H, S), lambda t: t[:, a:b])
        else:
            rows = slice(0, si) if part == "gate" else slice(si, 2 * si)
            self._copy(f"shared.{part}", self.shared["gate_up"][rows], t, (S, H), lambda t: t[a:b])

    def _copy(self, part: str, dst: torch.Tensor, full, expected: tuple[int, ...], shard,
              scale: torch.Tensor | None = None, whole_rows: bool = True, as_stored: bool = False) -> None:
        """Check ``full`` (the checkpoint tensor of shape ``expected``) and copy this rank's ``shard(full)`` into
        ``dst``. ``scale`` (fp8 experts): where the rows' scales go; the rows are quantized as they load, from the
        shard where it keeps whole rows (``whole_rows``: gate and up, sharded by rows), else from the whole rows
        of ``full`` (down, sharded by columns) and then sharded. ``as_stored``: a float8 ``full`` is copied as it
        is, its scale to come as a tensor of its own (expert-by-expert names)."""
        if not isinstance(full, (torch.Tensor, LazyTensor)):
            raise TypeError(f"{self.name}: {part} must be a torch.Tensor or LazyTensor, got {type(full).__name__}")
        stored_fp8 = as_stored and scale is not None and full.dtype == FP8_DTYPE
        if not stored_fp8 and (not full.dtype.is_floating_point or full.dtype.itemsize == 1):
            raise TypeError(f"{self.name}: {part} must be a 16- or 32-bit floating-point tensor, got {full.dtype} "
                            f"(float8 only for the experts' weights stored expert by expert, with quantization='fp8'; "
                            f"mixture-of-experts checkpoints quantized otherwise are not supported)")
        if tuple(full.shape) != tuple(expected):
            raise ValueError(f"{self.name}: {part} has shape {tuple(full.shape)}, expected {tuple(expected)} "
                             f"(the full checkpoint tensor)")
        with torch.no_grad():
            if scale is None or stored_fp8:
                dst.copy_(shard(full))
            elif whole_rows:
                w8, s = _quantize_last(shard(full).to(dst.device))
                dst.copy_(w8)
                scale.copy_(s)
            else:
                w8, s = _quantize_last(materialize(full).to(dst.device))
                dst.copy_(shard(w8))
                scale.copy_(s)
        (self._stored_fp8.add if stored_fp8 else self._stored_fp8.discard)(part)
        self._loaded.add(part)

    def missing(self) -> list[str]:
        """Names of the parts not loaded yet (``router``, ``experts.3.up`` ...): each projection of the experts
        loaded stacked (``experts.gate_up``, ``experts.gate`` ...) or expert by expert."""
        loaded = self._loaded
        stacked = {p for p in ("gate", "up", "down")
                   if f"experts.{p}" in loaded or (p != "down" and "experts.gate_up" in loaded)}
        names = ["router"] + [f"experts.{e}.{p}" for e in range(self.num_experts) for p in ("gate", "up", "down")
                              if p not in stacked]
        if self.shared is not None:
            names += [f"shared.{p}" for p in ("gate", "up", "down", "gate_weight")]
        names += sorted(f"{p}.scale" for p in self._stored_fp8)  # float8 as stored: its scale must come too
        return [n for n in names if n not in loaded]

    # -- forward -------------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, linear, ops, *, reduce: bool = True,
                routed: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """x ``[T, H]`` -> ``[T, H]``: the router's logits (``linear``: the model's projection dispatch), its
        top_k (``ops.moe_route``) and the experts (``ops.fused_moe``). ``reduce``: all-reduce the partial sums
        over the group (world_size > 1); False returns this rank's partial sum. ``routed``: x's (weights, ids)
        where :meth:`norm_route` gave them."""
        if routed is None:
            routed = ops.moe_route(linear(x, self.router), self.top_k, self.renormalize)
        y = ops.fused_moe(x, self.w_gate_up, self.w_down, *routed, **self.scales)
        if self.shared is not None:
            y = y + self._shared_expert(x, linear)
        if reduce and self.group.world_size > 1:
            y = self.group.all_reduce(y)
        return y

    def forward_add_norm(self, x: torch.Tensor, linear, ops, residual: torch.Tensor, norm_weight: torch.Tensor,
                         eps: float, *, routed: tuple[torch.Tensor, torch.Tensor] | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` on one rank, then the residual add and the next RMSNorm (``ops.fused_moe_add_norm``:
        the slots' sum, the add and the norm in one launch where the experts leave partial rows): (normed rows,
        the residual, updated in place by the Triton ops). ``routed``: x's (weights, ids), from
        :meth:`norm_route`."""
        if self.group.world_size > 1:
            raise ValueError("forward_add_norm runs on one rank; with tensor parallelism the partial sums are "
                             "all-reduced first (forward with reduce=False, then the group's fused all-reduce)")
        if self.shared is not None:  # the shared expert's output joins the experts' before the add
            return ops.rms_norm(self.forward(x, linear, ops, routed=routed), norm_weight, eps, residual)
        if routed is None:
            routed = ops.moe_route(linear(x, self.router), self.top_k, self.renormalize)
        return ops.fused_moe_add_norm(x, self.w_gate_up, self.w_down, *routed, residual, norm_weight, eps,
                                      **self.scales)

    def _shared_expert(self, x: torch.Tensor, linear) -> torch.Tensor:
        """Qwen2-MoE's shared expert times the sigmoid of its gate: ``sigmoid(x g^T) * down(silu(gate(x)) *
        up(x))`` ``[T, H]`` (this rank's partial sum under tensor parallelism; the gate is replicated), each step
        rounded to x's dtype as transformers computes it."""
        act = linear.swiglu(x, self.shared["gate_up"])  # the SiLU-and-mul in the GEMV's epilogue where it runs
        return torch.sigmoid(linear(x, self.shared["gate"])) * linear(act, self.shared["down"])

    def routes_with_norm(self, tokens: int) -> bool:
        """Whether :meth:`norm_route` takes a step of ``tokens`` tokens: decode sizes on one rank (a
        tensor-parallel rank's router input comes from the fused all-reduce and norm)."""
        return (self.group.world_size == 1 and 1 <= tokens <= NORM_ROUTE_MAX_TOKENS
                and self.hidden_size <= NORM_ROUTE_MAX_HIDDEN)

    def norm_route(self, x: torch.Tensor, ops, residual: torch.Tensor, norm_weight: torch.Tensor,
                   eps: float) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """The residual add and RMSNorm before the block with the router's logits and top-k in one launch
        (``ops.moe_norm_route``; :meth:`routes_with_norm` says where): (normed rows, the residual, (weights, ids)),
        for :meth:`forward_add_norm`."""
        normed, residual, weights, ids = ops.moe_norm_route(x, residual, norm_weight, eps, self.router, self.top_k,
                                                            self.renormalize, self.route_counters)
        return normed, residual, (weights, ids)

    def weight_bytes(self, *, active: bool = True) -> int:
        """Bytes of weight this rank reads for one token: the router and ``top_k`` experts (``active=False``: every
        expert, what the layer holds)."""
        per_expert = (self.w_gate_up[0].numel() + self.w_down[0].numel()) * self.w_down.element_size() + sum(
            s[0].numel() * s.element_size() for s in self.scales.values())
        experts = self.top_k if active else self.num_experts
        shared = sum(t.numel() * t.element_size() for t in (self.shared or {}).values())
        return self.router.numel() * self.router.element_size() + experts * per_expert + shared

    def weights(self) -> list[torch.Tensor]:
        """The tensors this block holds."""
        return [self.router, self.w_gate_up, self.w_down, *self.scales.values(), *(self.shared or {}).values()]


def _quantize_last(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``quantize_rows`` over the last dimension of a tensor of any rank: (fp8 values, a scale per row)."""
    w8, s = quantize_rows(w.reshape(-1, w.shape[-1]))
    return w8.view(w.shape), s.view(w.shape[:-1])
