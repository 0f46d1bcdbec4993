"""The sparse mixture-of-experts block: checkpoint names (Mixtral, Qwen3-MoE, transformers 5's stacked experts)
load into the stacked weights, shards over world sizes 1-4 (3 included) reassemble every expert and their partial
sums add up to the unsharded output, what is missing is named, bad tensors are refused by name."""

import pytest
import torch

from tritium.models.config import ModelConfig
from tritium.models.llama import LlamaModel, ModelOptions
from tritium.models.moe import SparseMoeBlock
from tritium.models.weights import LazyTensor, RandomWeights
from tritium.ops import op_set, reference
from tritium.ops.quant import quantize_rows

from .test_layers import LINEAR, assert_close, groups

KW = dict(dtype=torch.float32, device="cpu")
H, I, E, K = 16, 12, 5, 2  # I divides by 1-4


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


class Lazy(LazyTensor):
    """A checkpoint tensor read on demand from a full one, recording what was read."""

    def __init__(self, full):
        super().__init__(full.shape, full.dtype)
        self.full, self.reads = full, []

    def _read(self, bounds):
        self.reads.append(bounds)
        return self.full[tuple(slice(a, b) for a, b in bounds)].clone()


def _experts():
    return torch.randn(E, I, H), torch.randn(E, I, H), torch.randn(E, H, I), torch.randn(E, H)


def _checkpoint(style, gate, up, down, router):
    """(name, tensor) of one layer's block as a checkpoint of ``style`` names it."""
    if style == "stacked":
        return [("mlp.gate.weight", router), ("mlp.experts.gate_up_proj", Lazy(torch.cat([gate, up], 1))),
                ("mlp.experts.down_proj", Lazy(down))]
    if style == "gguf":  # tritium.models.weights' names for a GGUF file's stacked experts
        return [("mlp.gate.weight", router), ("mlp.experts.gate_proj", Lazy(gate)), ("mlp.experts.up_proj", Lazy(up)),
                ("mlp.experts.down_proj", Lazy(down))]
    prefix, names = {"mixtral": ("block_sparse_moe", ("w1", "w3", "w2")),
                     "qwen3_moe": ("mlp", ("gate_proj", "up_proj", "down_proj"))}[style]
    out = [(f"{prefix}.gate.weight", router)]
    for e in range(E):
        out += [(f"{prefix}.experts.{e}.{n}.weight", t[e]) for n, t in zip(names, (gate, up, down))]
    return out


@pytest.mark.parametrize("ws", [1, 2, 3, 4], ids=lambda w: f"ws{w}")
@pytest.mark.parametrize("style", ["mixtral", "qwen3_moe", "stacked", "gguf"])
def test_shards_reassemble_and_sum(style, ws):
    gate, up, down, router = _experts()
    blocks = [SparseMoeBlock(H, I, E, K, True, group=g, **KW) for g in groups(ws)]
    for block in blocks:
        assert block.missing()[:4] == ["router", "experts.0.gate", "experts.0.up", "experts.0.down"]
        for name, t in _checkpoint(style, gate, up, down, router):
            assert block.load(name, t), name
        assert block.missing() == []
    i = I // ws
    for r, block in enumerate(blocks):
        rows = slice(r * i, (r + 1) * i)
        assert torch.equal(block.w_gate_up, torch.cat([gate[:, rows], up[:, rows]], 1))
        assert torch.equal(block.w_down, down[:, :, rows]) and torch.equal(block.router, router)
    x = torch.randn(7, H)
    ops = op_set("torch")
    full = reference.fused_moe(x, torch.cat([gate, up], 1), down, *reference.moe_route(x @ router.T, K, True))
    parts = [block.forward(x, LINEAR, ops, reduce=False) for block in blocks]
    assert_close(sum(parts), full, 1e-5)


@pytest.mark.parametrize("ws", [1, 2, 3], ids=lambda w: f"ws{w}")
@pytest.mark.parametrize("style", ["qwen3_moe", "stacked", "gguf"])
def test_fp8_experts_quantized_per_whole_row(style, ws):
    """quant="fp8": every rank's experts are the world-size-1 block's fp8 weights and scales, sliced (a down row's
    scale from all its columns, whatever the rank holds); the ranks' partial sums add up to the reference on the
    dequantized weights."""
    gate, up, down, router = _experts()
    blocks = [SparseMoeBlock(H, I, E, K, True, group=g, quant="fp8", **KW) for g in groups(ws)]
    for block in blocks:
        for name, t in _checkpoint(style, gate, up, down, router):
            assert block.load(name, t), name
        assert block.missing() == []
    (gu8, gus), (d8, ds) = (quantize_rows(w.reshape(-1, w.shape[-1])) for w in (torch.cat([gate, up], 1), down))
    gu8, gus, d8, ds = gu8.view(E, 2 * I, H), gus.view(E, 2 * I), d8.view(E, H, I), ds.view(E, H)
    i = I // ws
    for r, block in enumerate(blocks):
        rows = torch.cat([torch.arange(r * i, (r + 1) * i), I + torch.arange(r * i, (r + 1) * i)])
        assert block.w_gate_up.dtype == torch.float8_e4m3fn and block.w_down.dtype == torch.float8_e4m3fn
        assert torch.equal(block.w_gate_up.float(), gu8[:, rows].float())
        assert torch.equal(block.scales["gate_up_scale"], gus[:, rows])
        assert torch.equal(block.w_down.float(), d8[:, :, r * i:(r + 1) * i].float())
        assert torch.equal(block.scales["down_scale"], ds)
        assert block.weight_bytes() == E * H * 4 + K * (3 * i * H + (2 * i + H) * 4)
    x = torch.randn(7, H)
    ops = op_set("torch")
    full = reference.fused_moe(x, gu8, d8, *reference.moe_route(x @ router.T, K, True), gate_up_scale=gus,
                               down_scale=ds)
    parts = [block.forward(x, LINEAR, ops, reduce=False) for block in blocks]
    assert_close(sum(parts), full, 1e-5)


@pytest.mark.parametrize("ws", [1, 2, 3], ids=lambda w: f"ws{w}")
@pytest.mark.parametrize("style", ["mixtral", "qwen3_moe"])
def test_fp8_experts_loaded_as_stored(style, ws):
    """An FP8 checkpoint's experts (float8 weights with a per-channel weight_scale, an unused input_scale beside
    them, as compressed-tensors writes them): copied as stored, the scales sharded with the rows; the same
    block as the 16-bit checkpoint quantized at load. A float8 part without its scale is named missing."""
    gate, up, down, router = _experts()
    quantized = {n: quantize_rows(t.reshape(-1, t.shape[-1])) for n, t in (("gate", gate), ("up", up), ("down", down))}
    stored = [(name, t) for name, t in _checkpoint(style, gate, up, down, router) if "experts" not in name]
    prefix, names = {"mixtral": ("block_sparse_moe", ("w1", "w3", "w2")),
                     "qwen3_moe": ("mlp", ("gate_proj", "up_proj", "down_proj"))}[style]
    for e in range(E):
        for n, part in zip(names, ("gate", "up", "down")):
            w8, sc = quantized[part]
            rows = w8.shape[0] // E
            stored += [(f"{prefix}.experts.{e}.{n}.weight", w8[e * rows:(e + 1) * rows]),
                       (f"{prefix}.experts.{e}.{n}.weight_scale", sc[e * rows:(e + 1) * rows, None]),
                       (f"{prefix}.experts.{e}.{n}.input_scale", torch.ones(1))]
    for g in groups(ws):
        block = SparseMoeBlock(H, I, E, K, True, group=g, quant="fp8", **KW)
        reference_block = SparseMoeBlock(H, I, E, K, True, group=g, quant="fp8", **KW)
        for name, t in _checkpoint(style, gate, up, down, router):
            reference_block.load(name, t)
        for name, t in stored:
            assert block.load(name, t), name
        assert block.missing() == []
        assert torch.equal(block.w_gate_up.float(), reference_block.w_gate_up.float())
        assert torch.equal(block.w_down.float(), reference_block.w_down.float())
        for k in block.scales:
            assert torch.equal(block.scales[k], reference_block.scales[k]), k
    block = SparseMoeBlock(H, I, E, K, True, quant="fp8", **KW)
    block.load(f"{prefix}.experts.2.{names[2]}.weight", quantized["down"][0][2 * H:3 * H])
    assert "experts.2.down.scale" in block.missing()
    with pytest.raises(ValueError, match=r"experts.2.down.weight_scale: weight scale of shape \(3,\)"):
        block.load(f"{prefix}.experts.2.{names[2]}.weight_scale", torch.ones(3))
    plain = SparseMoeBlock(H, I, E, K, True, **KW)
    with pytest.raises(ValueError, match="got a weight scale for experts.0.gate, but the experts are not fp8"):
        plain.load(f"{prefix}.experts.0.{names[0]}.weight_scale", torch.ones(1))


@pytest.mark.parametrize("ws", [1, 2, 3, 4], ids=lambda w: f"ws{w}")
def test_shared_expert_shards_sum(ws):
    """Qwen2-MoE's shared expert (its [gate; up] rows and down columns sharded like the experts', its sigmoid gate
    replicated): what is missing is named, and the ranks' partial sums add up to the experts plus
    sigmoid(x g) * shared(x)."""
    S = 12  # divides by 1-4
    gate, up, down, router = _experts()
    sg, su, sd, sgate = torch.randn(S, H), torch.randn(S, H), torch.randn(H, S), torch.randn(1, H)
    shared = [("mlp.shared_expert.gate_proj.weight", Lazy(sg)), ("mlp.shared_expert.up_proj.weight", Lazy(su)),
              ("mlp.shared_expert.down_proj.weight", Lazy(sd)), ("mlp.shared_expert_gate.weight", sgate)]
    blocks = [SparseMoeBlock(H, I, E, K, False, group=g, shared_intermediate_size=S, **KW) for g in groups(ws)]
    for block in blocks:
        for name, t in _checkpoint("qwen3_moe", gate, up, down, router):
            assert block.load(name, t)
        assert block.missing() == ["shared.gate", "shared.up", "shared.down", "shared.gate_weight"]
        for name, t in shared:
            assert block.load(name, t), name
        assert block.missing() == []
    x = torch.randn(7, H)
    ops = op_set("torch")
    experts = reference.fused_moe(x, torch.cat([gate, up], 1), down, *reference.moe_route(x @ router.T, K, False))
    expect = experts + torch.sigmoid(x @ sgate.T) * ((torch.nn.functional.silu(x @ sg.T) * (x @ su.T)) @ sd.T)
    parts = [block.forward(x, LINEAR, ops, reduce=False) for block in blocks]
    assert_close(sum(parts), expect, 1e-5)
    assert blocks[0].weight_bytes() == E * H * 4 + K * 3 * (I // ws) * H * 4 + (3 * S // ws + 1) * H * 4


def test_stacked_lazy_reads_only_the_shard():
    gate, up, down, router = _experts()
    ckpt = dict(_checkpoint("stacked", gate, up, down, router))
    block = SparseMoeBlock(H, I, E, K, True, group=groups(3)[1], **KW)
    for name, t in ckpt.items():
        block.load(name, t)
    assert ckpt["mlp.experts.down_proj"].reads == [[(0, E), (0, H), (4, 8)]]
    assert ckpt["mlp.experts.gate_up_proj"].reads == [[(0, E), (4, 8), (0, H)], [(0, E), (16, 20), (0, H)]]


def test_not_a_block_name_and_weight_bytes():
    block = SparseMoeBlock(H, I, E, K, False, **KW)
    assert not block.load("mlp.gate_proj.weight", torch.zeros(I, H))  # a dense MLP's name
    assert not block.load("self_attn.q_proj.weight", torch.zeros(H, H))
    per_expert = 3 * I * H * 4
    assert block.weight_bytes() == E * H * 4 + K * per_expert
    assert block.weight_bytes(active=False) == E * H * 4 + E * per_expert


@pytest.mark.parametrize("name,tensor,error,match", [
    ("mlp.experts.5.up_proj.weight", torch.zeros(I, H), ValueError,
     r"mlp.experts.5.up_proj.weight: expert 5 is out of range \(num_experts 5\)"),
    ("mlp.experts.0.up_proj.weight", torch.zeros(I, H + 1), ValueError,
     r"experts.0.up has shape \(12, 17\), expected \(12, 16\)"),
    ("mlp.gate.weight", torch.zeros(E + 1, H), ValueError, r"router has shape \(6, 16\), expected \(5, 16\)"),
    ("mlp.experts.down_proj", torch.zeros(E, H, I - 1), ValueError, r"experts.down has shape"),
    ("mlp.experts.1.down_proj.weight", torch.zeros(H, I, dtype=torch.float8_e4m3fn), TypeError,
     r"experts.1.down must be a 16- or 32-bit floating-point tensor, got torch.float8_e4m3fn \(float8 only .* with "
     r"quantization='fp8'"),
    ("mlp.experts.1.down_proj.weight", torch.zeros(H, I, dtype=torch.int32), TypeError,
     r"experts.1.down must be .*got torch.int32"),
    ("mlp.experts.1.down_proj.weight", [[0.0]], TypeError, r"experts.1.down must be a torch.Tensor or LazyTensor"),
], ids=["expert-range", "shape", "router-shape", "stacked-shape", "fp8", "int", "list"])
def test_bad_tensors(name, tensor, error, match):
    block = SparseMoeBlock(H, I, E, K, True, name="layers.3.moe", **KW)
    with pytest.raises(error, match="layers.3.moe: " + match):
        block.load(name, tensor)


def test_bad_sizes():
    with pytest.raises(ValueError, match=r"moe: top_k \(num_experts_per_tok\) must be <= num_experts \(5\), got 6"):
        SparseMoeBlock(H, I, E, 6, True, **KW)
    with pytest.raises(ValueError, match="moe: num_experts must be a positive int, got 0"):
        SparseMoeBlock(H, I, 0, 1, True, **KW)
    with pytest.raises(ValueError, match="moe intermediate_size must be divisible by the tensor-parallel world_size 3"):
        SparseMoeBlock(H, 10, E, K, True, group=groups(3)[0], **KW)
    with pytest.raises(ValueError, match="moe: shared_intermediate_size must be an int >= 0"):
        SparseMoeBlock(H, I, E, K, True, shared_intermediate_size=-1, **KW)
    with pytest.raises(ValueError, match="shared_expert_intermediate_size must be divisible by the tensor-parallel"):
        SparseMoeBlock(H, I, E, K, True, group=groups(3)[0], shared_intermediate_size=8, **KW)


def test_model_refuses_what_experts_cannot_run():
    cfg = ModelConfig(model_type="qwen3_moe", vocab_size=32, hidden_size=H, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=64,
                      qk_norm=True, num_experts=E, num_experts_per_tok=K, moe_intermediate_size=I)
    model = LlamaModel(cfg, **KW)
    layer = model.layers[0]
    assert layer.gate_up_proj is None and layer.down_proj is None and layer.moe.w_down.shape == (E, H, I)
    assert model.projection_names == ("qkv_proj", "o_proj") and len(model.projection_shapes()) == 2
    assert "moe.router" in layer.missing() and "moe.experts.4.down" in layer.missing()
    with pytest.raises(ValueError, match="quantization 'fp8-dynamic' is not supported for mixture-of-experts models"):
        LlamaModel(cfg, **KW, options=ModelOptions(quantization="fp8-dynamic"))
    fp8 = LlamaModel(cfg, **KW, options=ModelOptions(quantization="fp8")).layers[0]
    assert fp8.moe.w_down.dtype == torch.float8_e4m3fn and fp8.qkv_proj.weight.dtype == torch.float8_e4m3fn
    assert fp8.moe.router.dtype == torch.float32
    with pytest.raises(ValueError, match="moe: quant must be None or 'fp8'"):
        SparseMoeBlock(H, I, E, K, True, quant="int4", **KW)
    with pytest.raises(ValueError, match="batch_invariant is not supported for mixture-of-experts models"):
        LlamaModel(cfg, **KW, options=ModelOptions(batch_invariant=True, attention_backend="triton",
                                                    op_backend="triton", linear_backend="invariant"))


@pytest.mark.parametrize("shared", [0, 24], ids=["qwen3_moe", "qwen2_moe"])
def test_random_weights_load_a_moe_model(shared):
    """The benchmarks' random weights name a mixture of experts' router and experts as Qwen3-MoE does (and
    Qwen2-MoE's shared expert); the model takes all of them (and nothing is missing)."""
    cfg = ModelConfig(model_type="qwen2_moe" if shared else "qwen3_moe", vocab_size=32, hidden_size=H,
                      intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=8, max_position_embeddings=64, qk_norm=not shared, num_experts=E, num_experts_per_tok=K,
                      moe_intermediate_size=I, shared_expert_intermediate_size=shared)
    names = RandomWeights(cfg, "float32").shapes()
    assert names["model.layers.1.mlp.experts.4.down_proj.weight"] == ((H, I), 0.02)
    assert "model.layers.0.mlp.gate_proj.weight" not in names
    assert ("model.layers.1.mlp.shared_expert_gate.weight" in names) == bool(shared)
    model = LlamaModel(cfg, **KW)
    model.load_weights(RandomWeights(cfg, "float32").iter("cpu"))  # raises on a missing or unexpected tensor
    assert model.layers[1].moe.w_gate_up.abs().sum() > 0
    if shared:
        assert model.layers[1].moe.shared["down"].abs().sum() > 0
    # quantization="fp8" (the engine bench's tritium-fp8 system): the experts quantized as they load
    fp8 = LlamaModel(cfg, **KW, options=ModelOptions(quantization="fp8"))
    fp8.load_weights(RandomWeights(cfg, "float32").iter("cpu"))
    moe = fp8.layers[1].moe
    assert moe.w_gate_up.dtype == torch.float8_e4m3fn and (moe.scales["down_scale"] != 1).all()
