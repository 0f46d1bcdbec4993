"""Lazy checkpoint loading: every tensor-parallel rank of a LlamaModel loaded from lazy safetensors, GGUF or
random weights holds exactly its slices of the world-size-1 model's weights (world sizes 2 and 3; GQA with
KV heads sharded, Qwen2-like with replicated KV heads and a QKV bias), and reads only those slices: the
safetensors library reads and the GGUF dequantisations are counted per tensor."""

import collections
import dataclasses
import os
import pickle

import numpy as np
import pytest
import torch

from tritium.models.config import ModelConfig
from tritium.models.layers import ColumnParallelLinear, ParallelGroup, RowParallelLinear, shard_range
from tritium.models.llama import LlamaModel
from tritium.models.weights import (GGUFTensor, LazyTensor, RandomWeights, iter_gguf_weights, iter_hf_weights,
                                    materialize, random_weights, unpermute_rope)

gguf = pytest.importorskip("gguf")

Q = gguf.GGMLQuantizationType
BLOCK = 32  # values per Q8_0 / Q4_0 block
CONFIGS = {
    # GQA 12/6: KV heads shard at world sizes 2 and 3; vocab 103 leaves padding rows on the last rank
    "llama": ModelConfig(model_type="llama", vocab_size=103, hidden_size=64, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=12, num_key_value_heads=6, head_dim=8,
                         max_position_embeddings=64),
    # one KV head: replicated on every rank; QKV bias; tied embeddings
    "qwen2": ModelConfig(model_type="qwen2", vocab_size=103, hidden_size=64, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=1, head_dim=16,
                         max_position_embeddings=64, attention_bias=True, tie_word_embeddings=True),
}
CASES = [(m, ws) for m in CONFIGS for ws in (2, 3)]
CASE_IDS = [f"{m}-ws{ws}" for m, ws in CASES]


def _unused(x):
    raise AssertionError("a collective was called while loading")


def load(cfg: ModelConfig, weights, rank: int = 0, ws: int = 1) -> LlamaModel:
    group = ParallelGroup(rank, ws, all_reduce=_unused, all_gather=_unused)
    model = LlamaModel(cfg, dtype=torch.float32, device=torch.device("cpu"), group=group)
    model.load_weights(weights)
    return model


# -- what a rank must hold and read ----------------------------------------------------------------------------

def shard_ranges(cfg: ModelConfig, rank: int, ws: int) -> dict[str, tuple[int, int]]:
    """Row/column ranges of rank ``rank``'s shards, worked out from the config alone."""
    d, kvh = cfg.head_dim, cfg.num_key_value_heads
    if kvh % ws == 0:
        kv_heads = shard_range(kvh, rank, ws)
    else:                                   # more ranks than KV heads: ranks share (replicate) one head
        head = rank // (ws // kvh)
        kv_heads = (head, head + 1)
    q0, q1 = shard_range(cfg.num_attention_heads, rank, ws)
    per = -(-cfg.vocab_size // ws)
    return {"q": (q0 * d, q1 * d), "kv": (kv_heads[0] * d, kv_heads[1] * d),
            "inter": shard_range(cfg.intermediate_size, rank, ws),
            "vocab": (rank * per, min((rank + 1) * per, cfg.vocab_size)), "per": (0, per)}


def held(model: LlamaModel) -> dict[str, torch.Tensor]:
    out = {"embed": model.embed.weight, "norm": model.norm, "lm_head": model.lm_head.weight}
    for i, layer in enumerate(model.layers):
        out.update({f"{i}.input_norm": layer.input_norm, f"{i}.post_norm": layer.post_norm,
                    f"{i}.qkv": layer.qkv_proj.weight, f"{i}.gate_up": layer.gate_up_proj.weight,
                    f"{i}.o": layer.o_proj.weight, f"{i}.down": layer.down_proj.weight})
        if layer.qkv_proj.bias is not None:
            out[f"{i}.qkv_bias"] = layer.qkv_proj.bias
    return out


def expected_shards(full: LlamaModel, rank: int, ws: int) -> dict[str, torch.Tensor]:
    """The world-size-1 model's weights sliced the way rank ``rank`` of ``ws`` must hold them."""
    cfg = full.config
    r = shard_ranges(cfg, rank, ws)
    q, kv, inter, vocab = (slice(*r[k]) for k in ("q", "kv", "inter", "vocab"))
    per = r["per"][1]

    def vocab_rows(w):
        rows = w[vocab]
        return torch.cat([rows, rows.new_zeros(per - rows.shape[0], rows.shape[1])])

    def qkv_rows(w):
        wq, wk, wv = w.split([cfg.q_size, cfg.kv_size, cfg.kv_size])
        return torch.cat([wq[q], wk[kv], wv[kv]])

    out = {"embed": vocab_rows(full.embed.weight), "norm": full.norm, "lm_head": vocab_rows(full.lm_head.weight)}
    for i, layer in enumerate(full.layers):
        gate, up = layer.gate_up_proj.weight.chunk(2)
        out.update({f"{i}.input_norm": layer.input_norm, f"{i}.post_norm": layer.post_norm,
                    f"{i}.qkv": qkv_rows(layer.qkv_proj.weight), f"{i}.gate_up": torch.cat([gate[inter], up[inter]]),
                    f"{i}.o": layer.o_proj.weight[:, q], f"{i}.down": layer.down_proj.weight[:, inter]})
        if layer.qkv_proj.bias is not None:
            out[f"{i}.qkv_bias"] = qkv_rows(layer.qkv_proj.bias)
    return out


def expected_reads(cfg: ModelConfig, rank: int, ws: int, column_block: int = 1) -> dict[str, int]:
    """Elements rank ``rank`` reads of each checkpoint tensor: its shard, column shards widened to whole
    blocks of ``column_block`` values (a quantised row dequantises whole blocks)."""
    r = shard_ranges(cfg, rank, ws)
    h = cfg.hidden_size

    def n(key):
        return r[key][1] - r[key][0]

    def cols(key):
        start, stop = r[key]
        return (-(-stop // column_block) - start // column_block) * column_block

    out = {"model.embed_tokens.weight": n("vocab") * h, "model.norm.weight": h}
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = n("vocab") * h
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        out.update({p + "input_layernorm.weight": h, p + "post_attention_layernorm.weight": h,
                    p + "self_attn.q_proj.weight": n("q") * h, p + "self_attn.k_proj.weight": n("kv") * h,
                    p + "self_attn.v_proj.weight": n("kv") * h, p + "self_attn.o_proj.weight": h * cols("q"),
                    p + "mlp.gate_proj.weight": n("inter") * h, p + "mlp.up_proj.weight": n("inter") * h,
                    p + "mlp.down_proj.weight": h * cols("inter")})
        if cfg.attention_bias:
            out.update({p + "self_attn.q_proj.bias": n("q"), p + "self_attn.k_proj.bias": n("kv"),
                        p + "self_attn.v_proj.bias": n("kv")})
    return out


def assert_rank_holds_its_slices(model: LlamaModel, full: LlamaModel, rank: int, ws: int) -> None:
    got, want = held(model), expected_shards(full, rank, ws)
    assert got.keys() == want.keys()
    for key in want:
        assert got[key].shape == want[key].shape, f"rank {rank}/{ws} {key}: {tuple(got[key].shape)} vs " \
                                                  f"{tuple(want[key].shape)}"
        if not torch.equal(got[key], want[key]):
            worst = (got[key] - want[key]).abs().max().item()
            raise AssertionError(f"rank {rank}/{ws} {key}: differs from the full model's slice by up to {worst}")


# -- checkpoints -----------------------------------------------------------------------------------------------

def hf_tensors(cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Random fp32 Hugging Face-named tensors of ``cfg`` (std 0.1; norms and biases around 1 and 0)."""
    g = torch.Generator().manual_seed(1)
    out = {}
    for name, t in RandomWeights(cfg, "float32").iter("cpu"):
        out[name] = torch.randn(t.shape, generator=g) * (0.1 if t.ndim == 2 or "bias" in name else 0.05) \
            + (0 if t.ndim == 2 or "bias" in name else 1)
    return out


class ReadCounter:
    """Wraps ``safetensors.safe_open``: counts the elements each tensor gives back, whole or sliced."""

    def __init__(self, safe_open):
        self.safe_open = safe_open
        self.reads = collections.Counter()

    def __call__(self, *args, **kwargs):
        return _SpyHandle(self.safe_open(*args, **kwargs), self.reads)


class _SpyHandle:
    def __init__(self, handle, reads):
        self._handle, self._reads = handle, reads

    def keys(self):
        return self._handle.keys()

    def get_tensor(self, name):
        t = self._handle.get_tensor(name)
        self._reads[name] += t.numel()
        return t

    def get_slice(self, name):
        return _SpySlice(self._handle.get_slice(name), name, self._reads)


class _SpySlice:
    def __init__(self, sl, name, reads):
        self._slice, self._name, self._reads = sl, name, reads

    def get_shape(self):
        return self._slice.get_shape()

    def get_dtype(self):
        return self._slice.get_dtype()

    def __getitem__(self, index):
        t = self._slice[index]
        self._reads[self._name] += t.numel()
        return t


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory):
    """{model: (directory with two safetensors shards, the tensors)}."""
    from safetensors.torch import save_file

    out = {}
    for model, cfg in CONFIGS.items():
        path = tmp_path_factory.mktemp(f"hf-{model}")
        tensors = hf_tensors(cfg)
        names = sorted(tensors)
        save_file({n: tensors[n] for n in names[::2]}, os.path.join(path, "model-00001-of-00002.safetensors"))
        save_file({n: tensors[n] for n in names[1::2]}, os.path.join(path, "model-00002-of-00002.safetensors"))
        out[model] = (str(path), tensors)
    return out


def llama_cpp_permute(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf's ``LlamaModel.permute``."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_NAMES = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
              "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
              "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
              "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias",
              "self_attn.v_proj.bias": "attn_v.bias", "mlp.gate_proj.weight": "ffn_gate.weight",
              "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
              "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight"}


def gguf_type(name: str, ndim: int):
    """Q8_0 projections (Q4_0 gate), F16 embedding, BF16 LM head, F32 norms and biases."""
    if ndim == 1:
        return Q.F32
    return {"model.embed_tokens.weight": Q.F16, "lm_head.weight": Q.BF16}.get(
        name, Q.Q4_0 if "gate_proj" in name else Q.Q8_0)


def write_gguf(path: str, cfg: ModelConfig, tensors: dict[str, torch.Tensor]) -> None:
    """The tensors as llama.cpp's converter writes them (Q/K permuted for the llama architecture)."""
    w = gguf.GGUFWriter(path, cfg.model_type)
    for name, t in tensors.items():
        a = t.numpy()
        key = name.split(".", 3)[-1] if name.startswith("model.layers.") else name
        if cfg.model_type == "llama" and key.startswith("self_attn.q_proj"):
            a = llama_cpp_permute(a, cfg.num_attention_heads)
        elif cfg.model_type == "llama" and key.startswith("self_attn.k_proj"):
            a = llama_cpp_permute(a, cfg.num_key_value_heads)
        gname = f"blk.{name.split('.')[2]}.{GGUF_NAMES[key]}" if name.startswith("model.layers.") else GGUF_NAMES[key]
        qtype = gguf_type(name, a.ndim)
        w.add_tensor(gname, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def gguf_files(hf_dirs, tmp_path_factory):
    """{model: (GGUFReader, the HF tensors it was written from)}."""
    out = {}
    for model, cfg in CONFIGS.items():
        path = str(tmp_path_factory.mktemp(f"gguf-{model}") / f"{model}.gguf")
        write_gguf(path, cfg, hf_dirs[model][1])
        out[model] = (gguf.GGUFReader(path), hf_dirs[model][1])
    return out


class DequantCounter:
    """Wraps ``gguf.quants.dequantize``: elements dequantised while each tensor of ``weights`` loads."""

    def __init__(self, monkeypatch):
        self.total = 0
        self.reads = collections.Counter()
        dequantize = gguf.quants.dequantize

        def counting(data, qtype):
            out = dequantize(data, qtype)
            self.total += out.size
            return out

        monkeypatch.setattr(gguf.quants, "dequantize", counting)

    def per_tensor(self, weights):
        for name, t in weights:
            before = self.total
            yield name, t  # the model loads this tensor before asking for the next
            self.reads[name] += self.total - before


# -- tests -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("model,ws", CASES, ids=CASE_IDS)
def test_safetensors_rank_reads_only_its_shard(hf_dirs, monkeypatch, model, ws):
    import safetensors

    cfg = CONFIGS[model]
    path, tensors = hf_dirs[model]
    full = load(cfg, iter_hf_weights(path))  # full tensors, the behaviour without lazy
    for name, t in held(full).items():
        assert not t.isnan().any(), name
    assert torch.equal(full.layers[1].o_proj.weight, tensors["model.layers.1.self_attn.o_proj.weight"])
    counter = ReadCounter(safetensors.safe_open)
    monkeypatch.setattr(safetensors, "safe_open", counter)
    for rank in range(ws):
        counter.reads.clear()
        sharded = load(cfg, iter_hf_weights(path, lazy=True), rank, ws)
        assert_rank_holds_its_slices(sharded, full, rank, ws)
        assert dict(counter.reads) == expected_reads(cfg, rank, ws)
    # the row- and column-sharded projections: 1/ws of each per rank
    name = "model.layers.0.mlp.down_proj.weight"
    assert counter.reads[name] * ws == tensors[name].numel()
    assert counter.reads["model.layers.0.self_attn.q_proj.weight"] * ws == cfg.q_size * cfg.hidden_size


@pytest.mark.parametrize("model,ws", CASES, ids=CASE_IDS)
def test_gguf_rank_dequantises_only_its_shard(gguf_files, monkeypatch, model, ws):
    cfg = CONFIGS[model]
    reader, tensors = gguf_files[model]
    full = load(cfg, iter_gguf_weights(reader, cfg))
    # the eager path: whole tensors dequantised and un-permuted, close to the HF weights (Q4_0 / Q8_0)
    for name, t in [("model.layers.0.self_attn.q_proj.weight", full.layers[0].qkv_proj.weight[: cfg.q_size]),
                    ("model.layers.1.mlp.down_proj.weight", full.layers[1].down_proj.weight),
                    ("model.embed_tokens.weight", full.embed.weight)]:
        err = ((t - tensors[name]).norm() / tensors[name].norm()).item()
        assert err < 0.02, f"{name}: relative error {err:.3e} against the HF tensor"
    counter = DequantCounter(monkeypatch)
    for rank in range(ws):
        counter.reads.clear()
        sharded = load(cfg, counter.per_tensor(iter_gguf_weights(reader, cfg, lazy=True)), rank, ws)
        assert_rank_holds_its_slices(sharded, full, rank, ws)
        assert dict(counter.reads) == expected_reads(cfg, rank, ws, column_block=BLOCK)
    total = sum(t.numel() for t in tensors.values())
    assert sum(counter.reads.values()) < total * (0.6 if ws == 2 else 0.45)


@pytest.mark.parametrize("model,ws", CASES, ids=CASE_IDS)
def test_random_weights_rank_holds_its_slices(model, ws):
    cfg = CONFIGS[model]
    source = pickle.loads(pickle.dumps(RandomWeights(cfg, "float32", seed=3)))  # as a worker process gets it
    full = load(cfg, random_weights(cfg, torch.float32, "cpu", seed=3))
    for rank in range(ws):
        assert_rank_holds_its_slices(load(cfg, source.iter("cpu"), rank, ws), full, rank, ws)


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_random_weights_distributions_match_the_bench(model_type):
    from tritium.bench.engine import make_weights

    cfg = ModelConfig(model_type=model_type, vocab_size=512, hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                      max_position_embeddings=64, qk_norm=model_type == "qwen3")
    bench = make_weights(cfg, torch.bfloat16, torch.device("cpu"))
    lazy = dict(random_weights(cfg, torch.bfloat16, "cpu"))
    assert lazy.keys() == bench.keys()
    for name, t in lazy.items():
        full, ref = t.materialize(), bench[name]
        assert (full.shape, full.dtype) == (ref.shape, ref.dtype), name
        if name.endswith("norm.weight"):
            assert torch.equal(full, ref), name
        else:
            assert abs(full.float().std().item() / ref.float().std().item() - 1) < 0.1, name
            assert abs(full.float().mean().item()) < 0.005, name
    # a seed per (seed, name): layers differ, the same seed repeats, another seed does not
    w0, w1 = lazy["model.layers.0.mlp.up_proj.weight"], lazy["model.layers.1.mlp.up_proj.weight"]
    assert not torch.equal(w0.materialize(), w1.materialize())
    assert torch.equal(w0[5:9, 3:70], dict(random_weights(cfg, torch.bfloat16, "cpu"))[
        "model.layers.0.mlp.up_proj.weight"].materialize()[5:9, 3:70])
    assert not torch.equal(w0.materialize(), dict(random_weights(cfg, torch.bfloat16, "cpu", seed=1))[
        "model.layers.0.mlp.up_proj.weight"].materialize())
    # bias and tied embeddings follow the config
    names = {n for n, _ in RandomWeights(CONFIGS["qwen2"]).iter("cpu")}
    assert "model.layers.1.self_attn.v_proj.bias" in names and "lm_head.weight" not in names


@pytest.mark.parametrize("ndim", [1, 2], ids=["bias", "weight"])
def test_gguf_rope_unpermute_of_any_row_range(tmp_path, ndim):
    """A row range of the un-permuted Q/K tensor equals the same rows of the fully un-permuted tensor, for
    ranges that cut heads too; columns of a quantised tensor cut blocks."""
    heads, d, cols = 4, 8, 3 * BLOCK
    hf = np.random.default_rng(0).standard_normal((heads * d, cols) if ndim == 2 else (heads * d,))
    hf = hf.astype(np.float32)
    path = str(tmp_path / "q.gguf")
    w = gguf.GGUFWriter(path, "llama")
    qtype = Q.Q8_0 if ndim == 2 else Q.F32
    w.add_tensor("attn_q", gguf.quants.quantize(llama_cpp_permute(hf, heads), qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    t = gguf.GGUFReader(path).tensors[0]
    lazy = GGUFTensor(t, rope_heads=heads)
    full = unpermute_rope(gguf.quants.dequantize(t.data, t.tensor_type).reshape(hf.shape), heads)
    assert np.abs(full - hf).max() <= (0.05 if ndim == 2 else 0)  # the inverse of llama.cpp's permute
    assert lazy.shape == hf.shape and lazy.dtype == torch.float32
    assert np.array_equal(lazy.materialize().numpy(), full)
    for start in range(0, heads * d, 3):
        for stop in range(start + 1, heads * d + 1, 5):
            assert np.array_equal(lazy[start:stop].numpy(), full[start:stop]), (start, stop)
    if ndim == 2:
        for start, stop in [(0, BLOCK), (5, 40), (33, 96), (47, 48)]:
            assert np.array_equal(lazy[9:20, start:stop].numpy(), full[9:20, start:stop]), (start, stop)
            assert np.array_equal(lazy[:, start:stop].numpy(), full[:, start:stop]), (start, stop)


class Fake(LazyTensor):
    """A lazy tensor of any shape and dtype; reading it fails the test."""

    def _read(self, bounds):
        raise AssertionError("a lazy tensor was read before its shape was checked")


def _error(fn) -> tuple[type, str]:
    with pytest.raises(Exception) as e:
        fn()
    return e.type, str(e.value)


def test_bad_lazy_tensors_fail_like_full_tensors():
    col = ColumnParallelLinear(8, 12, group=ParallelGroup(1, 3, all_reduce=_unused, all_gather=_unused),
                               name="layers.0.mlp.up", dtype=torch.float32, device="cpu")
    row = RowParallelLinear(12, 8, bias=True, dtype=torch.float32, device="cpu")
    for layer, shape in [(col, (12, 9)), (row, (8, 4))]:
        full_error = _error(lambda: layer.load_weight(torch.zeros(shape)))
        assert full_error[0] is ValueError and f"has shape {shape}" in full_error[1]
        assert _error(lambda: layer.load_weight(Fake(shape, torch.float32))) == full_error
    assert _error(lambda: row.load_bias(Fake((7,), torch.float32))) == _error(lambda: row.load_bias(torch.zeros(7)))
    int_error = _error(lambda: col.load_weight(torch.zeros(12, 8, dtype=torch.int64)))
    assert int_error == (TypeError, "layers.0.mlp.up: weight must be a floating-point tensor, got torch.int64")
    assert _error(lambda: col.load_weight(Fake((12, 8), torch.int64))) == int_error
    assert _error(lambda: col.load_weight(np.zeros((12, 8)))) == (
        TypeError, "layers.0.mlp.up: weight must be a torch.Tensor or LazyTensor, got ndarray")

    cfg = CONFIGS["llama"]
    weights = dict(random_weights(cfg, torch.float32, "cpu"))
    name = "model.layers.1.self_attn.k_proj.weight"
    weights[name] = Fake((cfg.kv_size + 8, cfg.hidden_size), torch.float32)
    lazy_error = _error(lambda: load(cfg, weights.items()))
    weights[name] = torch.zeros(cfg.kv_size + 8, cfg.hidden_size)
    assert lazy_error == _error(lambda: load(cfg, weights.items()))
    assert lazy_error[0] is ValueError and "weight[k] has shape (56, 64), expected (48, 64)" in lazy_error[1]


def test_lazy_tensor_indexing():
    t = random_weights(CONFIGS["llama"], torch.float32, "cpu").__next__()[1]   # the embedding, [103, 64]
    full = t.materialize()
    assert isinstance(t, LazyTensor) and t.shape == (103, 64) and t.numel() == full.numel()
    assert torch.equal(t[10:20], full[10:20]) and torch.equal(t[:, 3:5], full[:, 3:5])
    assert torch.equal(t[-3:, :-60], full[-3:, :-60]) and torch.equal(t[90:200], full[90:])
    assert t[50:50].shape == (0, 64) and t[:, 7:2].shape == (103, 0)
    assert t[:, 3:5].is_contiguous() and torch.equal(materialize(full), full)
    with pytest.raises(ValueError, match="slice steps must be 1, got 2 at index 1"):
        t[:, ::2]
    with pytest.raises(TypeError, match="index 0 must be a slice, got int"):
        t[3]
    with pytest.raises(IndexError, match=r"3 indices for a tensor of shape \(103, 64\)"):
        t[:, :, :]
    with pytest.raises(ValueError, match="dtype_name must name a floating-point torch dtype"):
        RandomWeights(CONFIGS["llama"], "int8")


@pytest.mark.parametrize("qtype", [Q.Q8_0, Q.F32], ids=["q8_0", "f32"])
def test_gguf_stacked_experts_of_any_range(tmp_path, qtype):
    """A 3-D tensor (a GGUF file's stacked experts [E, rows, columns]): any expert, row and column range (the
    slices tensor-parallel shards take) equals the same slice of the whole tensor dequantised; quantisation
    blocks cut by the column range."""
    E, R, C = 3, 5, 2 * BLOCK
    hf = np.random.default_rng(1).standard_normal((E, R, C)).astype(np.float32)
    path = str(tmp_path / "e.gguf")
    w = gguf.GGUFWriter(path, "qwen3moe")
    w.add_tensor("blk.0.ffn_up_exps.weight", gguf.quants.quantize(hf, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    t = gguf.GGUFReader(path).tensors[0]
    lazy = GGUFTensor(t)
    full = gguf.quants.dequantize(t.data, t.tensor_type).reshape(hf.shape)
    assert np.abs(full - hf).max() <= (0.05 if qtype == Q.Q8_0 else 0)
    assert lazy.shape == (E, R, C) and np.array_equal(lazy.materialize().numpy(), full)
    for index in [np.s_[1:3], np.s_[:, 2:4], np.s_[:, :, 5:40], np.s_[2:3, 1:5, 33:64], np.s_[:, 4:5, :]]:
        assert np.array_equal(lazy[index].numpy(), full[index]), index


def test_smollm2_gguf_shards():
    """The default model (SmolLM2-135M: Q4_1 with a Q8_0 embedding, Q/K permuted; its first 3 layers) at
    world size 3."""
    from tritium.engine.llm_engine import default_model_path
    from tritium.models.weights import load_gguf_config, read_gguf

    try:
        path = default_model_path()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    reader, meta = read_gguf(path)
    cfg = dataclasses.replace(load_gguf_config(reader, meta), num_hidden_layers=3)

    def weights(lazy):  # lazy=False: the whole tensors, as iter_gguf_weights(lazy=False) gives them
        return [(n, t if lazy else t.materialize()) for n, t in iter_gguf_weights(reader, cfg, lazy=True)
                if not n.startswith("model.layers.") or int(n.split(".")[2]) < cfg.num_hidden_layers]

    full = load(cfg, weights(lazy=False))
    for rank in range(3):
        assert_rank_holds_its_slices(load(cfg, weights(lazy=True), rank, 3), full, rank, 3)


# -- block-wise FP8 checkpoints ------------------------------------------------------------------------------

def _block_fp8(w: torch.Tensor, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(float8 values, scales a block, the dequantized weight) of ``w`` quantized by blocks of its last two
    dimensions, edge blocks partial: as a block-wise FP8 checkpoint stores it."""
    *lead, n, k = w.shape
    nb, kb = -(-n // rows), -(-k // cols)
    pad = torch.nn.functional.pad(w.float(), (0, kb * cols - k, 0, nb * rows - n))
    blocks = pad.reshape(*lead, nb, rows, kb, cols)
    scale = blocks.abs().amax(dim=(-3, -1)).clamp(min=1e-8) / 448.0  # [..., nb, kb]
    full = scale.repeat_interleave(rows, -2).repeat_interleave(cols, -1)[..., :n, :k]
    w8 = (w.float() / full).to(torch.float8_e4m3fn)
    return w8, scale, w8.float() * full


@pytest.mark.parametrize("shape,blocks", [((37, 50), (16, 24)), ((3, 37, 50), (16, 24)), ((64, 48), (16, 16))])
def test_block_fp8_tensor_reads_any_slice_dequantized(shape, blocks):
    from tritium.models.config import Fp8Blocks
    from tritium.models.weights import BlockFp8Tensor

    w8, scale, ref = _block_fp8(torch.randn(shape) * torch.rand(shape[-1]) * 7, *blocks)
    t = BlockFp8Tensor("x.weight", w8, scale, Fp8Blocks(*blocks, "_scale_inv"))
    assert t.dtype == torch.float32 and t.shape == tuple(shape)
    assert torch.equal(t.materialize(), ref)
    lead = (slice(1, 3),) if len(shape) == 3 else ()
    for rows, cols in ((slice(5, 30), slice(None)), (slice(None), slice(7, 45)), (slice(17, 18), slice(33, 49)),
                       (slice(0, 16), slice(24, 48))):
        index = lead + (rows, cols)
        assert torch.equal(t[index], ref[index]), index


def test_block_fp8_tensor_errors():
    from tritium.models.config import Fp8Blocks
    from tritium.models.weights import BlockFp8Tensor

    w8, scale, _ = _block_fp8(torch.randn(37, 50), 16, 24)
    blocks = Fp8Blocks(16, 24, "_scale_inv")
    with pytest.raises(ValueError, match=r"x.weight_scale_inv: shape \(3, 2\), expected \(3, 3\)"):
        BlockFp8Tensor("x.weight", w8, scale[:, :2], blocks)
    with pytest.raises(ValueError, match="x.weight: .* must be a float8 tensor .* got torch.float32"):
        BlockFp8Tensor("x.weight", w8.float(), scale, blocks)


def test_iter_hf_weights_pairs_block_fp8_weights_with_their_scales(tmp_path):
    from safetensors.torch import save_file

    from tritium.models.config import Fp8Blocks
    from tritium.models.weights import BlockFp8Tensor

    w8, scale, ref = _block_fp8(torch.randn(40, 32), 16, 16)
    blocks = Fp8Blocks(16, 16, "_scale_inv")
    bias = torch.randn(40)
    save_file({"a.weight": w8, "a.weight_scale_inv": scale, "a.bias": bias, "n.weight": torch.ones(32)},
              str(tmp_path / "model.safetensors"))
    lazy = dict(iter_hf_weights(str(tmp_path), lazy=True, fp8_blocks=blocks))
    assert sorted(lazy) == ["a.bias", "a.weight", "n.weight"]  # the scale is consumed, not yielded
    assert isinstance(lazy["a.weight"], BlockFp8Tensor) and torch.equal(lazy["a.weight"][8:24], ref[8:24])
    full = dict(iter_hf_weights(str(tmp_path), fp8_blocks=blocks))
    assert torch.equal(full["a.weight"], ref) and torch.equal(full["a.bias"], bias)
    # without the block layout the checkpoint reads as stored
    assert dict(iter_hf_weights(str(tmp_path)))["a.weight"].dtype == torch.float8_e4m3fn

    save_file({"a.weight": w8, "b.weight": w8.clone(), "b.weight_scale_inv": scale},
              str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="a.weight: a float8 tensor without a.weight_scale_inv"):
        list(iter_hf_weights(str(tmp_path), fp8_blocks=blocks))
    save_file({"b.weight_scale_inv": scale}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="scales without their weights: b.weight_scale_inv"):
        list(iter_hf_weights(str(tmp_path), fp8_blocks=blocks))
