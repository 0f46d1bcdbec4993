"""LlamaModel's fused decode chains against the same model with those kernels apart: the RMSNorms inside
the GEMVs (``ModelOptions.fuse_norms``: same hidden states within the dtype's tolerance, the fused norm
never rounding the normed row, and no per-layer norm launched) and rope with the KV write inside the QKV
GEMV (``fuse_qkv_rope``: the same hidden states and caches, no rope kernel launched)."""

import dataclasses

import pytest
import torch

from tritium.models.attention import AttentionMetadata
from tritium.models.config import ModelConfig
from tritium.models.llama import LlamaModel, ModelOptions
from tritium.models.weights import random_weights
from tritium.runtime import default_device, interpreting

BLOCK = 16
CONFIGS = {
    "llama": ModelConfig(model_type="llama", vocab_size=97, hidden_size=128, intermediate_size=192,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=64,
                         max_position_embeddings=64),
    # QKV bias: added after the fused norm's scaling
    "qwen2": ModelConfig(model_type="qwen2", vocab_size=97, hidden_size=128, intermediate_size=192,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, head_dim=64,
                         max_position_embeddings=64, attention_bias=True),
    # query/key head norms (over head_dim, before rope); q wider than the hidden size
    "qwen3": ModelConfig(model_type="qwen3", vocab_size=97, hidden_size=128, intermediate_size=192,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                         max_position_embeddings=64, qk_norm=True),
}
TOL = {torch.float32: 1e-5, torch.bfloat16: 3e-2}


def _weights(cfg, dtype, dev):
    """Random weights, the norms' not all ones (as in checkpoints)."""
    gen = torch.Generator().manual_seed(2)
    for name, t in random_weights(cfg, dtype, dev, seed=1):
        if name.endswith("norm.weight"):
            t = (torch.rand(t.shape[0], generator=gen) + 0.5).to(dtype).to(dev)
        yield name, t


def _model(cfg, dtype, backend="triton"):
    dev = default_device()
    opts = ModelOptions(attention_backend=backend, op_backend=backend, linear_backend=backend, max_decode_tokens=4,
                        fuse_norms=True)
    model = LlamaModel(cfg, dtype=dtype, device=dev, options=opts)
    model.load_weights(_weights(cfg, dtype, dev))
    return model


def _caches(cfg, dtype):
    kv, dev = cfg.num_key_value_heads, default_device()
    return [tuple(torch.zeros(16, BLOCK, kv, cfg.head_dim, dtype=dtype, device=dev) for _ in range(2))
            for _ in range(cfg.num_hidden_layers)]


def _meta(lens, q_lens, dev):
    """Sequence s owns pages [s * 4, s * 4 + 4); its new tokens are the last q_lens[s] of lens[s]."""
    table = torch.arange(len(lens) * 4, dtype=torch.int32, device=dev).view(len(lens), 4)
    slots = [s * 4 * BLOCK + p for s, (n, q) in enumerate(zip(lens, q_lens)) for p in range(n - q, n)]
    cu = torch.tensor([0] + list(torch.tensor(q_lens).cumsum(0)), dtype=torch.int32, device=dev)
    meta = AttentionMetadata(slot_mapping=torch.tensor(slots, device=dev), block_table=table,
                             seq_lens=torch.tensor(lens, dtype=torch.int32, device=dev), cu_seqlens_q=cu,
                             max_seqlen_q=max(q_lens), max_seqlen_k=max(lens), q_lens_host=list(q_lens),
                             seq_lens_host=list(lens))
    positions = torch.tensor([p for n, q in zip(lens, q_lens) for p in range(n - q, n)], device=dev)
    return meta, positions


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_norms_inside_gemvs_match_norm_kernels(name, dtype):
    """Decode steps of 1 and 4 sequences (after a prefill): the chain with the norms inside the GEMVs (their
    weights folded into QKV and gate/up) against the same model with norm kernels, and against the torch
    backend's model on the unfolded weights."""
    cfg, dev = CONFIGS[name], default_device()
    model, ref = _model(cfg, dtype), _model(cfg, dtype, "torch")
    assert model.norms_folded and not ref.norms_folded  # (torch ops never fold)
    caches, ref_caches = _caches(cfg, dtype), _caches(cfg, dtype)
    ctx = [7, 19, 3, 11]
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, cfg.vocab_size, (sum(ctx),), generator=gen).to(dev)
    meta, pos = _meta(ctx, ctx, dev)
    assert not model._norms_in_gemvs(prompt.numel())  # a prefill runs the norm kernels
    model.forward(prompt, pos, meta, caches)
    ref.forward(prompt, pos, meta, ref_caches)

    norm_calls = []
    fused_ops = model.ops

    def count(*args, **kw):
        norm_calls.append(1)
        return fused_ops.rms_norm(*args, **kw)

    for seqs in (1, 4):
        lens = [n + 1 for n in ctx[:seqs]]
        meta, pos = _meta(lens, [1] * seqs, dev)
        ids = torch.randint(0, cfg.vocab_size, (seqs,), generator=gen).to(dev)
        outs = {}
        for fuse in (False, True):
            model.set_options(dataclasses.replace(model.options, fuse_norms=fuse))
            model.ops = dataclasses.replace(model.ops, rms_norm=count)
            norm_calls.clear()
            out = model.forward(ids, pos, meta, caches)
            assert torch.isfinite(out).all()
            outs[fuse] = out.double()
            # fused: only the final norm; apart: two a layer (the query/key head norms run in the rope kernel)
            assert len(norm_calls) == (1 if fuse else 2 * cfg.num_hidden_layers + 1), (fuse, len(norm_calls))
        err = ((outs[True] - outs[False]).norm() / outs[False].norm()).item()
        assert err < TOL[dtype], (seqs, err)
        if dtype == torch.bfloat16 and interpreting():
            continue  # the interpreter's bf16 tl.dot (the attention's) is wrong: torch can only be matched on a GPU
        expected = ref.forward(ids, pos, meta, ref_caches).double()
        err = ((outs[True] - expected).norm() / expected.norm()).item()
        assert err < TOL[dtype], ("vs torch", seqs, err)
    with pytest.raises(ValueError, match="folded into its projections already"):
        model.load_weights(_weights(cfg, dtype, dev))


def test_norm_fold_only_where_the_chain_can_run():
    """Folding happens at construction with fuse_norms, triton ops, a GEMV-capable linear backend and one rank."""
    cfg, dev = CONFIGS["llama"], default_device()
    base = dict(attention_backend="triton", op_backend="triton", linear_backend="triton")
    for change, folds in [({}, False), ({"fuse_norms": True}, True), ({"fuse_norms": True, "op_backend": "torch"}, False),
                          ({"fuse_norms": True, "linear_backend": "torch"}, False)]:
        model = LlamaModel(cfg, dtype=torch.float32, device=dev, options=ModelOptions(**dict(base, **change)))
        assert model.fold_norms == folds, change


@pytest.mark.parametrize("name", list(CONFIGS))
def test_qkv_rope_in_the_gemv_matches_the_rope_kernel(name):
    """fuse_qkv_rope: decode steps with rope and the KV write inside the QKV GEMV give the hidden states and
    the caches of the rope kernel's chain (fp32: the same arithmetic), and launch no rope kernel."""
    cfg, dev = CONFIGS[name], default_device()
    model = _model(cfg, torch.float32)
    caches = _caches(cfg, torch.float32)
    ctx = [7, 19, 3, 11]
    gen = torch.Generator().manual_seed(3)
    prompt = torch.randint(0, cfg.vocab_size, (sum(ctx),), generator=gen).to(dev)
    meta, pos = _meta(ctx, ctx, dev)
    model.forward(prompt, pos, meta, caches)
    lens = [n + 1 for n in ctx]
    meta, pos = _meta(lens, [1] * 4, dev)
    ids = torch.randint(0, cfg.vocab_size, (4,), generator=gen).to(dev)
    outs, after = {}, {}
    for fuse in (False, True):
        model.set_options(dataclasses.replace(model.options, fuse_qkv_rope=fuse, fuse_norms=False))
        calls = []
        rope_kv = model.ops.rope_write_kv
        model.ops = dataclasses.replace(model.ops, rope_write_kv=lambda *a, **k: (calls.append(1), rope_kv(*a, **k)))
        work = [tuple(c.clone() for c in pair) for pair in caches]
        outs[fuse] = model.forward(ids, pos, meta, work)
        after[fuse] = work
        assert len(calls) == (0 if fuse and not cfg.qk_norm else cfg.num_hidden_layers)  # qk_norm: never fused
    torch.testing.assert_close(outs[True], outs[False], rtol=1e-5, atol=1e-5)
    for (k1, v1), (k2, v2) in zip(after[True], after[False]):
        torch.testing.assert_close(k1, k2, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(v1, v2, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_swiglu_in_the_gate_up_gemv_matches_the_gated_down(dtype):
    """fuse_swiglu: decode steps with the SiLU-and-mul in the gate/up GEMV's epilogue (down then a plain GEMV)
    give the hidden states of the chain whose down GEMV does the SiLU-and-mul while loading [gate | up],
    bit for bit (the same sums and roundings); prefill steps (cuBLAS-sized) keep the gated path."""
    cfg, dev = CONFIGS["llama"], default_device()
    model = _model(cfg, dtype)
    caches = _caches(cfg, dtype)
    ctx = [7, 19, 3, 11]
    gen = torch.Generator().manual_seed(5)
    prompt = torch.randint(0, cfg.vocab_size, (sum(ctx),), generator=gen).to(dev)
    meta, pos = _meta(ctx, ctx, dev)
    model.forward(prompt, pos, meta, caches)
    meta, pos = _meta([n + 1 for n in ctx], [1] * 4, dev)
    ids = torch.randint(0, cfg.vocab_size, (4,), generator=gen).to(dev)
    outs = {}
    linear = model.linear
    for fuse in (False, True):
        model.set_options(dataclasses.replace(model.options, fuse_swiglu=fuse, fuse_norms=False))
        calls = {"swiglu": 0, "gated": 0}
        for kind in calls:
            def spy(*a, _f=getattr(type(linear), kind), _k=kind, **k):
                calls[_k] += 1
                return _f(linear, *a, **k)
            setattr(linear, kind, spy)
        try:
            outs[fuse] = model.forward(ids, pos, meta, [tuple(c.clone() for c in pair) for pair in caches])
        finally:
            del linear.swiglu, linear.gated
        n = cfg.num_hidden_layers
        assert calls == ({"swiglu": n, "gated": 0} if fuse else {"swiglu": 0, "gated": n}), (fuse, calls)
        assert torch.isfinite(outs[fuse]).all()
    assert torch.equal(outs[True], outs[False])


def test_two_way_configs_follow_the_options():
    """The down projection runs plain after a gate/up GEMV with the SiLU-and-mul inside and gated otherwise;
    the QKV projection runs with rope inside (fuse_qkv_rope) or plain. tune_linears times each both ways,
    and set_options swaps in the configs for how it runs now, keeping what was in place (a whole-step
    check's change included) for a swap back."""
    from tritium.ops.gemv import GemvConfig

    model = _model(CONFIGS["llama"], torch.float32)
    key = (1, *model.layers[0].down_proj.weight.shape)
    qkey = (1, *model.layers[0].qkv_proj.weight.shape)
    gated, plain, settled = GemvConfig(8, 256, 4), GemvConfig(2, 512, 4, flat=True), GemvConfig(4, 512, 4)
    qplain, qrope = GemvConfig(4, 1024, 4, flat=True), GemvConfig(2, 1024, 4, 3)
    # what tune_linears leaves on a GPU with both options off
    model._ways = {"down_proj": {"gated": {key: gated}, "plain": {key: plain}},
                   "qkv_proj": {"plain": {qkey: qplain}, "rope": {qkey: qrope}}}
    model._ways_applied = {"down_proj": "gated", "qkv_proj": "plain"}
    model.linear.choices.update({key: gated, qkey: qplain})
    off = dict(fuse_swiglu=False, fuse_qkv_rope=False)
    model.set_options(dataclasses.replace(model.options, **off))
    assert model.linear.choices[key] == gated and model.linear.choices[qkey] == qplain
    model.set_options(dataclasses.replace(model.options, fuse_swiglu=True, fuse_qkv_rope=False))
    assert model.linear.choices[key] == plain and model.linear.choices[qkey] == qplain
    model.linear.choices[key] = settled  # e.g. ModelRunner.settle_linears
    model.set_options(dataclasses.replace(model.options, **off))
    assert model.linear.choices[key] == gated
    model.set_options(dataclasses.replace(model.options, fuse_norms=False, **off))
    assert model.linear.choices[key] == gated
    model.set_options(dataclasses.replace(model.options, fuse_swiglu=True, fuse_qkv_rope=True))
    assert model.linear.choices[key] == settled
    assert model.linear.choices[qkey] == (qrope if model.fused_rope_kv else qplain)
    model.set_options(dataclasses.replace(model.options, fuse_qkv_rope=False))
    assert model.linear.choices[qkey] == qplain


def test_restore_linears_round_trip():
    """linear_state() -> JSON -> restore_linears() on a second model gives the same choices, the two-way
    projections' configs included (and set_options still swaps them); a state tuned with the fused-norm chain
    on does not restore where it is off, and a malformed one changes nothing."""
    import json

    from tritium.ops.gemv import CONFIGS as GEMVS

    model = _model(CONFIGS["llama"], torch.float32)
    key = (1, *model.layers[0].down_proj.weight.shape)
    qkey = (1, *model.layers[0].qkv_proj.weight.shape)
    model._ways = {"down_proj": {"gated": {key: GEMVS[0]}, "plain": {key: GEMVS[1]}},
                   "qkv_proj": {"plain": {qkey: None}, "rope": {qkey: GEMVS[2]}}}
    model._ways_applied = {"down_proj": "plain", "qkv_proj": "rope"}
    model.linear.choices.update({key: GEMVS[1], qkey: GEMVS[2]})
    model.linear.best_gemv.update({key: GEMVS[1], qkey: GEMVS[2]})
    state = json.loads(json.dumps(model.linear_state()))
    other = _model(CONFIGS["llama"], torch.float32)
    other.restore_linears(state)
    assert other.linear.choices == model.linear.choices and other._ways == model._ways
    assert other._ways_applied == model._ways_applied
    other.set_options(dataclasses.replace(other.options, fuse_swiglu=False, fuse_qkv_rope=False))
    assert other.linear.choices[key] == GEMVS[0] and other.linear.choices[qkey] is None
    with pytest.raises(ValueError, match="fuse_norms"):
        other.restore_linears(dict(state, norms_chain=not state["norms_chain"]))
    fresh = _model(CONFIGS["llama"], torch.float32)
    for bad in (dict(state, ways_applied={"down_proj": "rope"}), {k: v for k, v in state.items() if k != "ways"},
                dict(state, ways={"down_proj": {"plain": [[1, 2, 3, {"block_n": 5}]]}})):
        with pytest.raises(ValueError, match="linear state"):
            fresh.restore_linears(bad)
        assert fresh.linear.choices == {} and fresh._ways == {}


def test_phi3_fused_tensors_are_split_and_checked():
    """A Phi-3 checkpoint's qkv_proj / gate_up_proj: rows split into the engine's parts (each equal to loading
    the parts by their Llama names); a tensor of the wrong height is named with the rows it should have."""
    cfg = dataclasses.replace(CONFIGS["llama"], model_type="phi3")
    fused = LlamaModel(cfg, dtype=torch.float32, device=torch.device("cpu"))
    layer = fused.layers[0]
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(cfg.q_size + 2 * cfg.kv_size, cfg.hidden_size, generator=g)
    gate_up = torch.randn(2 * cfg.intermediate_size, cfg.hidden_size, generator=g)
    assert layer.load("self_attn.qkv_proj.weight", qkv) and layer.load("mlp.gate_up_proj.weight", gate_up)
    plain = LlamaModel(cfg, dtype=torch.float32, device=torch.device("cpu")).layers[0]
    q, k, v = qkv.split([cfg.q_size, cfg.kv_size, cfg.kv_size])
    for name, t in (("q", q), ("k", k), ("v", v)):
        plain.load(f"self_attn.{name}_proj.weight", t)
    plain.load("mlp.gate_proj.weight", gate_up[:cfg.intermediate_size])
    plain.load("mlp.up_proj.weight", gate_up[cfg.intermediate_size:])
    assert torch.equal(layer.qkv_proj.weight, plain.qkv_proj.weight)
    assert torch.equal(layer.gate_up_proj.weight, plain.gate_up_proj.weight)
    with pytest.raises(ValueError, match=rf"self_attn.qkv_proj.weight: expected {cfg.q_size + 2 * cfg.kv_size} rows"):
        layer.load("self_attn.qkv_proj.weight", qkv[:-1])


@pytest.mark.parametrize("model_type,way", [("llama", "rope"), ("qwen3", "plain"), ("gemma3_text", "plain")])
def test_qkv_runs_the_configurations_of_how_it_runs(model_type, way):
    """The QKV projection's tuned configurations in place are those of the kernel it runs: with rope in its
    epilogue only where the model can take it (no query/key head norms, not Gemma's layers)."""
    cfg = CONFIGS["llama"]
    if model_type != "llama":
        cfg = dataclasses.replace(cfg, model_type=model_type, qk_norm=True, rope_scaling=None,
                                  **(dict(sandwich_norms=True, hidden_act="gelu_tanh", norm_weight_offset=1.0)
                                     if model_type == "gemma3_text" else {}))
    opts = ModelOptions(attention_backend="triton", op_backend="triton", linear_backend="triton")
    model = LlamaModel(cfg, dtype=torch.float32, device=torch.device("cpu"), options=opts)
    assert model._wanted_way("qkv_proj") == way
    assert model._wanted_way("down_proj") == "plain"
