"""LoRA adapters: PEFT checkpoints read and checked against the model, and the slots the engine serves them from.

A PEFT adapter directory holds ``adapter_config.json`` (``r``, ``lora_alpha``, ``target_modules``, ...) and
``adapter_model.safetensors`` with ``...layers.{i}.self_attn.q_proj.lora_A.weight`` ``[r, in]`` and ``lora_B``
``[out, r]`` per adapted projection; the adapted projection computes ``W x + scaling B A x``, ``scaling =
lora_alpha / r`` (``lora_alpha / sqrt(r)`` with ``use_rslora``). What this model's decoder projections can take is
read (q, k, v, o, gate, up, down of every layer, or Phi-3's fused qkv and gate_up; not a mixture of experts'
experts); anything else (embeddings, the LM head, ``modules_to_save``, biases, DoRA, per-module ranks) is refused
by name.

:class:`LoRAStack` holds ``max_loras`` slots per projection on the device, each adapter's ranks padded to one
power of two (:func:`tritium.ops.lora.padded_rank`), its scaling folded into B; the model adds each token's slot's
update after each projection (:func:`tritium.ops.lora.lora_apply`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import os
import re

import torch

from tritium.models.config import ModelConfig
from tritium.ops.lora import (lora_apply, lora_apply_reference, lora_delta, lora_delta_reference, padded_rank,
                              sort_order)

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# PEFT module name -> (the model's projection, its part)
MODULES = {"q_proj": ("qkv_proj", 0), "k_proj": ("qkv_proj", 1), "v_proj": ("qkv_proj", 2), "o_proj": ("o_proj", 0),
           "gate_proj": ("gate_up_proj", 0), "up_proj": ("gate_up_proj", 1), "down_proj": ("down_proj", 0)}
PROJECTIONS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
# Phi-3's fused modules: one A for all parts, B's rows split into the parts' modules
FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
_READS = itertools.count()
PEFT_ALPHA = 8  # PEFT's LoraConfig.lora_alpha default: an adapter_config.json without lora_alpha is read with it
_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.default)?\.weight$")


def module_shapes(cfg: ModelConfig) -> dict[str, tuple[int, int]]:
    """(out, in) of each PEFT module of this model's layers."""
    shapes = {"q_proj": (cfg.q_size, cfg.hidden_size), "k_proj": (cfg.kv_size, cfg.hidden_size),
              "v_proj": (cfg.kv_size, cfg.hidden_size), "o_proj": (cfg.hidden_size, cfg.q_size),
              "gate_proj": (cfg.intermediate_size, cfg.hidden_size),
              "up_proj": (cfg.intermediate_size, cfg.hidden_size), "down_proj": (cfg.hidden_size, cfg.intermediate_size)}
    for fused, parts in FUSED.items():
        shapes[fused] = (sum(shapes[p][0] for p in parts), shapes[parts[0]][1])
    return shapes


@dataclasses.dataclass(eq=False)
class LoRAAdapter:
    """One adapter's weights on the host: ``weights[(layer, module)] = (A [r, in], B [out, r])`` as stored."""

    name: str
    path: str
    rank: int
    scaling: float
    weights: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]
    # which read of its directory this is, in this process: a rank that follows another reads it again where it
    # changes (the adapter registered anew from the same directory)
    serial: int = dataclasses.field(default_factory=lambda: next(_READS))

    @classmethod
    def load(cls, path: str, config: ModelConfig, *, name: str | None = None, max_rank: int | None = None
             ) -> "LoRAAdapter":
        """Read and check the PEFT adapter in directory ``path`` for a model of ``config``. ValueError (or
        FileNotFoundError) naming what is wrong."""
        from safetensors import SafetensorError, safe_open

        name = name or os.path.basename(os.path.normpath(path))
        where = f"LoRA adapter {name!r} ({path})"
        cfg_path, w_path = os.path.join(path, ADAPTER_CONFIG), os.path.join(path, ADAPTER_WEIGHTS)
        for p in (cfg_path, w_path):
            if not os.path.isfile(p):
                raise FileNotFoundError(f"{where}: no {os.path.basename(p)} (a PEFT adapter directory holds "
                                        f"{ADAPTER_CONFIG} and {ADAPTER_WEIGHTS})")
        try:
            with open(cfg_path) as f:
                acfg = json.load(f)
        except (OSError, ValueError) as e:
            raise ValueError(f"{where}: {ADAPTER_CONFIG} is not JSON ({e})") from None
        if not isinstance(acfg, dict):
            raise ValueError(f"{where}: {ADAPTER_CONFIG} must hold an object")
        peft_type = acfg.get("peft_type", "LORA")
        if str(peft_type).upper() != "LORA":
            raise ValueError(f"{where}: peft_type must be LORA, got {peft_type!r}")
        rank, alpha = acfg.get("r"), acfg.get("lora_alpha", PEFT_ALPHA)
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
            raise ValueError(f"{where}: r must be a positive integer, got {rank!r}")
        if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not math.isfinite(alpha):
            raise ValueError(f"{where}: lora_alpha must be a finite number, got {alpha!r}")
        rslora = acfg.get("use_rslora")
        if rslora is not None and not isinstance(rslora, bool):
            raise ValueError(f"{where}: use_rslora must be true or false, got {rslora!r}")
        if max_rank is not None and rank > max_rank:
            raise ValueError(f"{where}: rank {rank} is above max_lora_rank={max_rank}")
        refused = {"use_dora": acfg.get("use_dora"), "modules_to_save": acfg.get("modules_to_save"),
                   "rank_pattern": acfg.get("rank_pattern"), "alpha_pattern": acfg.get("alpha_pattern"),
                   "fan_in_fan_out": acfg.get("fan_in_fan_out")}
        for key, value in refused.items():
            if value:
                raise ValueError(f"{where}: {key}={value!r} is not supported (plain LoRA on the decoder's "
                                 f"projections only)")
        if acfg.get("bias", "none") != "none":
            raise ValueError(f"{where}: bias={acfg['bias']!r} is not supported (trained biases); expected 'none'")
        scaling = alpha / math.sqrt(rank) if rslora else alpha / rank
        shapes = module_shapes(config)
        moe = bool(config.num_experts)
        pending: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
        try:
            weights_file = safe_open(w_path, framework="pt")
        except SafetensorError as e:  # a truncated or damaged file
            raise ValueError(f"{where}: {ADAPTER_WEIGHTS} is not a readable safetensors file ({e})") from None
        with weights_file as f:
            for key in f.keys():
                m = _KEY.search(key)
                if m is None:
                    raise ValueError(f"{where}: tensor {key!r} is not a LoRA A/B weight of a decoder projection "
                                     f"(q/k/v/o/gate/up/down_proj); embeddings, the LM head and trained biases are "
                                     f"not supported")
                layer, module, ab = int(m.group(1)), m.group(2), m.group(3)
                known = module in MODULES or module in FUSED
                if not known or (moe and module in ("gate_proj", "up_proj", "down_proj", "gate_up_proj")):
                    what = "a mixture of experts' MLP" if moe and known else f"module {module!r}"
                    allowed = [m_ for m_ in MODULES if not moe or MODULES[m_][0] in ("qkv_proj", "o_proj")]
                    raise ValueError(f"{where}: tensor {key!r}: {what} cannot take a LoRA adapter here; expected "
                                     f"{', '.join(allowed)}")
                if not 0 <= layer < config.num_hidden_layers:
                    raise ValueError(f"{where}: tensor {key!r}: layer {layer} is outside the model's "
                                     f"{config.num_hidden_layers}")
                t = f.get_tensor(key)
                out, inp = shapes[module]
                expected = (rank, inp) if ab == "A" else (out, rank)
                if tuple(t.shape) != expected:
                    raise ValueError(f"{where}: tensor {key!r} has shape {tuple(t.shape)}, expected {expected} "
                                     f"(rank {rank}, this model's {module} is [{out}, {inp}])")
                if not t.is_floating_point() or not torch.isfinite(t).all():
                    raise ValueError(f"{where}: tensor {key!r} must hold finite floating-point values")
                pending.setdefault((layer, module), {})[ab] = t
        weights = {}
        for (layer, module), ab in sorted(pending.items()):
            if set(ab) != {"A", "B"}:
                missing = "lora_B" if "A" in ab else "lora_A"
                raise ValueError(f"{where}: layer {layer} {module} has no {missing} weight")
            parts = FUSED.get(module, (module,))
            rows = 0
            for part in parts:  # a fused module: its A for each part, B's rows of each
                if (layer, part) in weights:
                    raise ValueError(f"{where}: layer {layer} has both {module} and {part} weights")
                n = shapes[part][0]
                weights[(layer, part)] = (ab["A"], ab["B"][rows:rows + n])
                rows += n
        if not weights:
            raise ValueError(f"{where}: {ADAPTER_WEIGHTS} holds no LoRA weights")
        return cls(name, path, rank, float(scaling), weights)


class LoRAStack:
    """``max_loras`` adapter slots of every layer's projections on the device: per (layer, projection) A
    ``[S, P * R, K]`` and B ``[S, N, R]`` (zeros where a slot's adapter leaves a projection or part alone).
    ``apply(layer, projection, x, y, slots)`` adds each token's slot's update to the projection's output
    ``y`` in place (slots -1: none).

    Under tensor parallelism each rank holds its shard, cut as its projection's weight is: a column-parallel
    projection (QKV by heads, gate/up by the intermediate rows) keeps B's rows of its output shard and all of A;
    a row-parallel one (o, down) keeps A's columns of its input shard and all of B, so that its update of the
    rank's partial output is a partial sum too, added up by the projection's all-reduce (``B (sum_r A_r x_r)``:
    no communication of its own). Rank 0 decides what each slot holds (:class:`tritium.engine.lora.LoRASlots`):
    its loads and clears are logged (:meth:`take_ops`) and replayed by the other ranks (:meth:`replay`), which
    read the adapter from the same directory."""

    def __init__(self, model, max_loras: int, max_rank: int, *, backend: str = "triton"):
        cfg, group = model.config, model.group
        self.max_loras, self.max_rank, self.rank = max_loras, max_rank, padded_rank(max_rank)
        self.triton = backend == "triton"
        self.config = cfg
        R, dev, dtype = self.rank, model.device, model.dtype
        parts, self._cut = self._shards(model)
        self.stacks: list[dict[str, tuple[torch.Tensor, torch.Tensor, tuple[int, int]]]] = []
        for layer in model.layers:
            stacks = {}
            for proj, (outs, k) in parts.items():
                if getattr(layer, proj) is None:  # a mixture of experts' MLP
                    continue
                n = sum(outs)
                if any(o % 16 for o in outs):
                    raise ValueError(f"LoRA adapters need projection parts of multiples of 16 rows; {proj} has "
                                     f"{outs}" + (f" on each of {group.world_size} ranks" if group.world_size > 1
                                                  else ""))
                bounds = (outs[0], outs[0] + outs[1]) if len(outs) == 3 else (outs[0], n)
                stacks[proj] = (torch.zeros(max_loras, len(outs) * R, k, dtype=dtype, device=dev),
                                torch.zeros(max_loras, n, R, dtype=dtype, device=dev), bounds)
            self.stacks.append(stacks)
        self._offsets = {proj: [0] + [sum(outs[:i + 1]) for i in range(len(outs))] for proj, (outs, _) in parts.items()}
        # rank 0 of several: the slots' loads and clears, for the other ranks (None: nobody follows this stack)
        self._ops: list[tuple] | None = [] if group.world_size > 1 and group.rank == 0 else None
        self._read: dict[str, tuple[tuple, LoRAAdapter]] = {}  # another rank's reads: name -> ((path, serial), it)
        self._holder: list[str | None] = [None] * max_loras  # another rank's: the adapter in each slot

    @staticmethod
    def _shards(model) -> tuple[dict, dict]:
        """Each projection's (local part sizes, local input size) and each PEFT module's (B's rows, A's columns)
        this rank holds, from the model's first layer that has the projection."""
        cfg = model.config
        first = {proj: next((getattr(layer, proj) for layer in model.layers if getattr(layer, proj) is not None), None)
                 for proj in PROJECTIONS}
        qkv, o, gate_up, down = (first[p] for p in PROJECTIONS)
        everything = slice(None)
        q0, kv0 = model.group.rank * qkv.q_size, qkv.kv_head_start * qkv.head_dim
        parts = {"qkv_proj": ((qkv.q_size, qkv.kv_size, qkv.kv_size), cfg.hidden_size),
                 "o_proj": ((cfg.hidden_size,), o._cols[1] - o._cols[0])}
        cut = {"q_proj": (slice(q0, q0 + qkv.q_size), everything),
               "k_proj": (slice(kv0, kv0 + qkv.kv_size), everything),
               "v_proj": (slice(kv0, kv0 + qkv.kv_size), everything), "o_proj": (everything, slice(*o._cols))}
        if gate_up is not None:
            inter = gate_up.local_sizes[0]
            g0 = model.group.rank * inter
            parts["gate_up_proj"] = ((inter, inter), cfg.hidden_size)
            parts["down_proj"] = ((cfg.hidden_size,), down._cols[1] - down._cols[0])
            cut.update(gate_proj=(slice(g0, g0 + inter), everything), up_proj=(slice(g0, g0 + inter), everything),
                       down_proj=(everything, slice(*down._cols)))
        return parts, cut

    def load(self, slot: int, adapter: LoRAAdapter) -> None:
        """Copy ``adapter`` (this rank's shard of it) into ``slot`` (whatever it held before is cleared)."""
        if not 0 <= slot < self.max_loras:
            raise ValueError(f"slot must be in [0, {self.max_loras}), got {slot}")
        if adapter.rank > self.max_rank:
            raise ValueError(f"LoRA adapter {adapter.name!r}: rank {adapter.rank} is above max_lora_rank="
                             f"{self.max_rank}")
        self._clear(slot)
        R, r = self.rank, adapter.rank
        for (layer, module), (a, b) in adapter.weights.items():
            proj, part = MODULES[module]
            rows, cols = self._cut[module]
            A, B, _ = self.stacks[layer][proj]
            lo, hi = self._offsets[proj][part], self._offsets[proj][part + 1]
            A[slot, part * R:part * R + r].copy_(a[:, cols])
            B[slot, lo:hi, :r].copy_(b[rows].float() * adapter.scaling)
        if self._ops is not None:
            self._ops.append((slot, adapter.name, adapter.path, adapter.serial))

    def clear(self, slot: int) -> None:
        self._clear(slot)
        if self._ops is not None:
            self._ops.append((slot, None, None, None))

    def _clear(self, slot: int) -> None:
        for stacks in self.stacks:
            for A, B, _ in stacks.values():
                A[slot].zero_()
                B[slot].zero_()

    def take_ops(self) -> list[tuple]:
        """Rank 0: the loads ``(slot, name, path, serial)`` and clears ``(slot, None, None, None)`` since the last
        call, in order, for the other ranks' :meth:`replay` (sent ahead of the step that reads them)."""
        if not self._ops:
            return []
        ops, self._ops = self._ops, []
        return ops

    def replay(self, ops: list[tuple]) -> None:
        """Another rank: rank 0's loads and clears (:meth:`take_ops`); an adapter is read from its directory once
        per read of rank 0's (``serial``) while it stays in a slot: the host copies kept here are only those of the
        adapters in the slots (at most ``max_loras``), the others read again when they come back."""
        for slot, name, path, serial in ops:
            self._holder[slot] = name
            if name is None:
                self._clear(slot)
                continue
            adapter = self._read.get(name)
            if adapter is None or adapter[0] != (path, serial):
                self._read[name] = ((path, serial), LoRAAdapter.load(path, self.config, name=name,
                                                                     max_rank=self.max_rank))
            self.load(slot, self._read[name][1])
        for name in set(self._read) - set(self._holder):
            del self._read[name]

    def step_rows(self, slots: torch.Tensor, order: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A step's tokens' slots and the order the kernels visit them in: ``order`` (the engine's, sorted on the
        host), else :func:`tritium.ops.lora.sort_order`'s, computed once for every projection of the step."""
        if not self.triton:
            return slots, None
        return slots, order if order is not None else sort_order(slots)

    def apply(self, layer: int, proj: str, x: torch.Tensor, y: torch.Tensor,
              rows: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
        """``y += scaling B A x`` per token, each with its slot's adapter (in place; returns y); ``rows``:
        :meth:`step_rows`'."""
        return self._run(layer, proj, x, rows, y)

    def delta(self, layer: int, proj: str, x: torch.Tensor, rows: tuple[torch.Tensor, torch.Tensor | None]
              ) -> torch.Tensor | None:
        """Each token's update of the projection alone, ``[T, N]`` fp32 (zeros for tokens without an adapter), for
        a projection that adds it in its epilogue (before rope or the SiLU-and-mul there); None where no slot
        adapts ``proj`` (a mixture of experts' MLP)."""
        return self._run(layer, proj, x, rows, None)

    def _run(self, layer: int, proj: str, x: torch.Tensor, rows: tuple, y: torch.Tensor | None
             ) -> torch.Tensor | None:
        """``apply`` into ``y``, or ``delta`` (y None); y (or None) where no slot adapts ``proj``."""
        entry = self.stacks[layer].get(proj)
        if entry is None:
            return y
        A, B, bounds = entry
        slots, order = rows
        if not self.triton:
            return (lora_delta_reference(x, A, B, slots, bounds) if y is None
                    else lora_apply_reference(x, y, A, B, slots, bounds))
        # (the stacks' shapes are right by construction: no per-call checks on the step's path)
        if y is None:
            return lora_delta(x, A, B, slots, bounds, order=order, validate=False)
        return lora_apply(x, y, A, B, slots, bounds, order=order, validate=False)
