"""Parallel linear layers: shards reassemble into the full weight, per-rank outputs combine into the unsharded
result (world sizes 1-4, 3 included), world size 1 launches exactly the plain ops, and a real gloo run of a
small MLP model equals the single-process reference on every rank."""

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from tritium.models.layers import (SINGLE, ColumnParallelLinear, MergedColumnParallelLinear, ParallelGroup,
                                   ParallelLMHead, QKVParallelLinear, RowParallelLinear, VocabParallelEmbedding,
                                   shard_range)
from tritium.shmem.launch import launch

WORLD_SIZES = [1, 2, 3, 4]
KW = dict(dtype=torch.float32, device="cpu")
TOL = 1e-6  # fp32, relative; shards change only the blocking of the same dot products


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


class TorchLinear:
    """The ``linear`` object the layers take, in plain torch."""

    def __call__(self, x, weight, bias=None):
        return F.linear(x, weight, bias)

    def gated(self, x, weight):
        i = x.shape[-1] // 2
        return F.linear(F.silu(x[:, :i]) * x[:, i:], weight)

    def swiglu(self, x, weight):
        y = F.linear(x, weight)
        i = y.shape[-1] // 2
        return F.silu(y[:, :i]) * y[:, i:]


LINEAR = TorchLinear()


def _unused(x):
    raise AssertionError("a collective was called where the test asked for this rank's local result")


def groups(ws, all_reduce=_unused, all_gather=_unused):
    return [ParallelGroup(r, ws, all_reduce=all_reduce, all_gather=all_gather) for r in range(ws)]


def assert_close(out, ref, tol=TOL):
    assert out.shape == ref.shape, f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    assert not torch.isnan(out).any(), "output has NaN"
    err = ((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()
    if err > tol:
        worst = (out.double() - ref.double()).abs().argmax().item()
        idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(worst), out.shape))
        raise AssertionError(f"relative error {err:.3e} > {tol:.0e}; worst at {idx}: {out[idx]} vs {ref[idx]}")


# -- group and shard_range -------------------------------------------------------------------------------------

def test_parallel_group_validation():
    assert SINGLE.rank == 0 and SINGLE.world_size == 1
    with pytest.raises(ValueError, match=r"rank must be in \[0, 2\).*got 2"):
        ParallelGroup(2, 2, all_reduce=_unused, all_gather=_unused)
    with pytest.raises(ValueError, match="world_size must be >= 1, got 0"):
        ParallelGroup(0, 0)
    with pytest.raises(ValueError, match="world_size 2 needs a callable all_reduce"):
        ParallelGroup(0, 2, all_gather=_unused)
    with pytest.raises(ValueError, match="world_size 2 needs a callable all_gather"):
        ParallelGroup(1, 2, all_reduce=_unused)
    with pytest.raises(TypeError, match="world_size must be an int"):
        ParallelGroup(0, 2.0)


def test_shard_range():
    assert [shard_range(12, r, 3) for r in range(3)] == [(0, 4), (4, 8), (8, 12)]
    assert shard_range(7, 0, 1) == (0, 7)
    with pytest.raises(ValueError, match="intermediate_size must be divisible by the tensor-parallel "
                                         "world_size 3, got 10"):
        shard_range(10, 0, 3, name="intermediate_size")
    with pytest.raises(ValueError, match="rank must be in"):
        shard_range(12, 3, 3)


def _bias_and_world_sizes(test):
    test = pytest.mark.parametrize("ws", WORLD_SIZES, ids=lambda w: f"ws{w}")(test)
    return pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])(test)


BIAS_AND_WORLD_SIZES = _bias_and_world_sizes


def load_ranks(make, ws: int, w, b=None) -> list:
    """One layer per rank of a world of ``ws`` (``make(group)``), each loaded from the full ``w`` (and ``b``)."""
    layers = [make(g) for g in groups(ws)]
    for layer in layers:
        layer.load_weight(w)
        if b is not None:
            layer.load_bias(b)
        assert layer.missing() == []
    return layers


# -- per-rank layers, in one process -------------------------------------------------------------------------

@BIAS_AND_WORLD_SIZES
def test_column_parallel(ws, bias):
    H, N, T = 12, 24, 5
    w, b, x = torch.randn(N, H), torch.randn(N), torch.randn(T, H)
    assert ColumnParallelLinear(H, N, bias=bias, **KW).missing() == ["weight"] + ["bias"] * bias
    layers = load_ranks(lambda g: ColumnParallelLinear(H, N, bias=bias, group=g, **KW), ws, w, b if bias else None)
    assert all(layer.weight.shape == (N // ws, H) for layer in layers)
    assert torch.equal(torch.cat([layer.weight for layer in layers]), w)
    if bias:
        assert torch.equal(torch.cat([layer.bias for layer in layers]), b)
    out = torch.cat([layer.forward(x, LINEAR) for layer in layers], dim=1)
    assert_close(out, F.linear(x, w, b if bias else None))


@pytest.mark.parametrize("ws", WORLD_SIZES, ids=lambda w: f"ws{w}")
def test_merged_column_parallel(ws):
    H, sizes, T = 12, [24, 12], 3
    parts, x = [torch.randn(n, H) for n in sizes], torch.randn(T, H)
    layers = [MergedColumnParallelLinear(H, sizes, group=g, **KW) for g in groups(ws)]
    for layer in layers:
        layer.load_weight(parts[1], 1)
        assert layer.missing() == ["weight[0]"]
        layer.load_weight(parts[0], 0)
        assert layer.missing() == []
        assert layer.weight.shape == (sum(sizes) // ws, H)
    # each rank: [part 0 shard | part 1 shard]; per part the shards reassemble the full part
    local = [layer.weight.split([n // ws for n in sizes]) for layer in layers]
    for p, full in enumerate(parts):
        assert torch.equal(torch.cat([shards[p] for shards in local]), full)
    ref = [F.linear(x, full) for full in parts]
    for r, layer in enumerate(layers):
        out = layer.forward(x, LINEAR)
        got = out.split([n // ws for n in sizes], dim=1)
        for p, n in enumerate(sizes):
            assert_close(got[p], ref[p][:, r * n // ws: (r + 1) * n // ws])


# (num_heads, num_kv_heads, world_size): kv sharded where num_kv_heads % ws == 0, replicated (MQA/GQA with
# more ranks than kv heads) where ws % num_kv_heads == 0
QKV_CASES = [(12, 4, 1), (8, 4, 2), (8, 4, 4), (12, 12, 3), (12, 6, 3), (12, 4, 2),
             (8, 2, 4), (8, 1, 4), (12, 1, 3), (12, 2, 4), (12, 1, 2)]


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("nh,nkv,ws", QKV_CASES, ids=[f"H{a}/{b}-ws{c}" for a, b, c in QKV_CASES])
def test_qkv_parallel(nh, nkv, ws, bias):
    hidden, d, T = 16, 4, 3
    full = {"q": torch.randn(nh * d, hidden), "k": torch.randn(nkv * d, hidden), "v": torch.randn(nkv * d, hidden)}
    fb = {"q": torch.randn(nh * d), "k": torch.randn(nkv * d), "v": torch.randn(nkv * d)}
    x = torch.randn(T, hidden)
    ref = {p: F.linear(x, full[p], fb[p] if bias else None) for p in "qkv"}
    layers = [QKVParallelLinear(hidden, d, nh, nkv, bias=bias, group=g, **KW) for g in groups(ws)]
    hq, hkv = nh // ws, max(nkv // ws, 1)
    seen_kv = set()
    for r, layer in enumerate(layers):
        for p in "qkv":
            layer.load_weight(full[p], p)
            if bias:
                layer.load_bias(fb[p], p)
        assert layer.missing() == []
        assert (layer.num_heads, layer.num_kv_heads, layer.head_dim) == (hq, hkv, d)
        assert (layer.q_size, layer.kv_size) == (hq * d, hkv * d)
        kv_heads = list(range(r * hkv, (r + 1) * hkv)) if nkv % ws == 0 else [r // (ws // nkv)]
        seen_kv.update(kv_heads)
        # every local query head's kv head is the local kv head it will attend with
        for j in range(hq):
            assert kv_heads[j // (hq // hkv)] == (r * hq + j) // (nh // nkv)
        rows_q = list(range(r * hq * d, (r + 1) * hq * d))
        rows_kv = [h * d + i for h in kv_heads for i in range(d)]
        expect_w = torch.cat([full["q"][rows_q], full["k"][rows_kv], full["v"][rows_kv]])
        assert torch.equal(layer.weight, expect_w)
        out = layer.forward(x, LINEAR)
        assert out.shape == (T, layer.q_size + 2 * layer.kv_size)
        assert_close(out, torch.cat([ref["q"][:, rows_q], ref["k"][:, rows_kv], ref["v"][:, rows_kv]], dim=1))
        if bias:
            assert torch.equal(layer.bias, torch.cat([fb["q"][rows_q], fb["k"][rows_kv], fb["v"][rows_kv]]))
    assert seen_kv == set(range(nkv))
    assert torch.equal(torch.cat([layer.weight[: layer.q_size] for layer in layers]), full["q"])


@BIAS_AND_WORLD_SIZES
def test_row_parallel(ws, bias):
    K, N, T = 24, 12, 5
    w, b, x = torch.randn(N, K), torch.randn(N), torch.randn(T, K)
    layers = load_ranks(lambda g: RowParallelLinear(K, N, bias=bias, group=g, **KW), ws, w, b if bias else None)
    assert all(layer.weight.shape == (N, K // ws) for layer in layers)
    assert torch.equal(torch.cat([layer.weight for layer in layers], dim=1), w)
    k = K // ws
    partial = [layer.forward(x[:, r * k: (r + 1) * k], LINEAR, reduce=False) for r, layer in enumerate(layers)]
    ref = F.linear(x, w, b if bias else None)
    assert_close(sum(partial), ref)
    if bias and ws > 1:  # the bias is added once, on rank 0
        assert_close(partial[1], F.linear(x[:, k: 2 * k], w[:, k: 2 * k]))

    # reduce=True: one all-reduce of this rank's partial sum, whose result is returned
    calls = []

    def all_reduce(y):
        calls.append(y)
        return sum(partial)

    layer = RowParallelLinear(K, N, bias=bias, group=ParallelGroup(0, ws, all_reduce, _unused), **KW)
    layer.load_weight(w)
    if bias:
        layer.load_bias(b)
    out = layer.forward(x[:, :k], LINEAR)
    assert len(calls) == (1 if ws > 1 else 0)
    assert_close(out, ref)


@pytest.mark.parametrize("ws", WORLD_SIZES, ids=lambda w: f"ws{w}")
def test_tensor_parallel_mlp(ws):
    """gate/up column-parallel then down row-parallel, gated: the partial sums add up to
    (silu(x g^T) * (x u^T)) d^T."""
    H, I, T = 12, 24, 4
    gate, up, down, x = torch.randn(I, H), torch.randn(I, H), torch.randn(H, I), torch.randn(T, H)
    out = 0
    for g in groups(ws):
        gate_up = MergedColumnParallelLinear(H, [I, I], group=g, **KW)
        gate_up.load_weight(gate, 0)
        gate_up.load_weight(up, 1)
        down_proj = RowParallelLinear(I, H, group=g, **KW)
        down_proj.load_weight(down)
        y = gate_up.forward(x, LINEAR)
        assert y.shape == (T, 2 * I // ws)
        out = out + down_proj.forward(y, LINEAR, gated=True, reduce=False)
    assert_close(out, F.linear(F.silu(x @ gate.T) * (x @ up.T), down))


@pytest.mark.parametrize("V", [103, 96])
@pytest.mark.parametrize("ws", WORLD_SIZES, ids=lambda w: f"ws{w}")
def test_vocab_parallel_embedding(ws, V):
    D = 8
    table = torch.randn(V, D)
    ids = torch.cat([torch.tensor([0, V - 1, V // 2]), torch.randint(0, V, (13,))])
    per = -(-V // ws)
    layers = [VocabParallelEmbedding(V, D, group=g, **KW) for g in groups(ws)]
    for r, layer in enumerate(layers):
        assert layer.missing() == ["weight"]
        layer.load_weight(table)
        assert layer.missing() == []
        assert layer.weight.shape == (per, D)
        assert layer.weight_bytes() == 0 and layer.weights() == [layer.weight]
    stacked = torch.cat([layer.weight for layer in layers])
    assert torch.equal(stacked[:V], table)
    assert torch.equal(stacked[V:], torch.zeros(ws * per - V, D))  # padding rows are zero
    if ws == 1:
        assert torch.equal(layers[0].forward(ids), F.embedding(ids, table))
        return
    parts = [layer.forward(ids, reduce=False) for layer in layers]
    for r, part in enumerate(parts):  # each rank fills exactly the rows of its ids
        mine = (ids >= r * per) & (ids < (r + 1) * per)
        assert torch.equal(part[~mine], torch.zeros(int((~mine).sum()), D))
    assert torch.equal(sum(parts), F.embedding(ids, table))  # one nonzero term per element: exact

    calls = []
    group = ParallelGroup(1, ws, all_reduce=lambda y: calls.append(y) or sum(parts), all_gather=_unused)
    layer = VocabParallelEmbedding(V, D, group=group, **KW)
    layer.load_weight(table)
    assert torch.equal(layer.forward(ids), F.embedding(ids, table))
    assert len(calls) == 1 and torch.equal(calls[0], parts[1])


@pytest.mark.parametrize("V", [103, 96])
@pytest.mark.parametrize("ws", WORLD_SIZES, ids=lambda w: f"ws{w}")
def test_parallel_lm_head(ws, V):
    D, S = 8, 3
    w, hidden = torch.randn(V, D), torch.randn(S, D)
    per = -(-V // ws)
    ref = F.linear(hidden, w)
    layers = [ParallelLMHead(V, D, group=g, **KW) for g in groups(ws)]
    for layer in layers:
        layer.load_weight(w)
        assert layer.missing() == []
        assert layer.weight_bytes() == per * D * 4
    local = [layer.forward(hidden, LINEAR, gather=False) for layer in layers]
    assert all(t.shape == (S, per) for t in local)
    full = torch.cat(local, dim=1)
    assert_close(full[:, :V], ref)
    assert torch.equal(full[:, V:], torch.zeros(S, ws * per - V))

    # gather=True: the all-gather stacks ranks along dim 0; the layer reorders to [S, vocab] and drops padding
    def all_gather(x):
        return torch.cat(local)

    for r in range(ws):
        layer = ParallelLMHead(V, D, group=ParallelGroup(r, ws, all_reduce=_unused, all_gather=all_gather), **KW)
        layer.load_weight(w)
        logits = layer.forward(hidden, LINEAR)
        assert logits.dtype == torch.float32 and logits.is_contiguous()
        assert_close(logits, ref)


@pytest.mark.parametrize("ws", [1, 3])
def test_lm_head_tie(ws):
    V, D = 103, 8
    table = torch.randn(V, D)
    for g in groups(ws):
        embed = VocabParallelEmbedding(V, D, group=g, **KW)
        head = ParallelLMHead(V, D, group=g, **KW)
        assert head.missing() == ["weight"]
        head.tie(embed)
        assert head.weight is embed.weight and head.missing() == [] and embed.missing() == ["weight"]
        embed.load_weight(table)
        hidden = torch.randn(2, D)
        assert torch.equal(head.forward(hidden, LINEAR, gather=False), F.linear(hidden, embed.weight))
        with pytest.raises(ValueError, match="tied to the embedding"):
            head.load_weight(table)
        built_tied = ParallelLMHead(V, D, group=g, tied_to=embed, **KW)
        assert built_tied.weight is embed.weight and built_tied.missing() == []
    with pytest.raises(ValueError, match=r"cannot tie to VocabParallelEmbedding.*\(103, 8, 0, 1, torch.float32\) "
                                         r"here, \(104, 8, 0, 1, torch.float32\) there"):
        ParallelLMHead(V, D, **KW).tie(VocabParallelEmbedding(V + 1, D, **KW))


# -- world size 1: the plain ops, nothing else -----------------------------------------------------------------

class _RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _ops(fn):
    with _RecordOps() as rec:
        fn()
    return rec.ops


class _Sentinel:
    """A linear that returns a fresh object: a forward that returns anything else added work."""

    def __init__(self):
        self.calls = []

    def __call__(self, x, weight, bias=None):
        self.calls.append(("linear", x, weight, bias))
        return object()

    def gated(self, x, weight):
        self.calls.append(("gated", x, weight))
        return object()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_world_size_1_is_the_plain_op(dtype):
    H, I, V, T = 16, 32, 50, 3
    kw = dict(dtype=dtype, device="cpu")
    x, ids = torch.randn(T, H, dtype=dtype), torch.randint(0, V, (T,))
    layers = {
        "column": ColumnParallelLinear(H, I, bias=True, **kw),
        "merged": MergedColumnParallelLinear(H, [I, I], **kw),
        "qkv": QKVParallelLinear(H, 4, 4, 2, bias=True, **kw),
        "row": RowParallelLinear(I, H, bias=True, **kw),
    }
    for name, layer in layers.items():
        for t in layer.weights():
            t.normal_()
        inp = x if name != "row" else torch.randn(T, I, dtype=dtype)
        lin = _Sentinel()
        out = layer.forward(inp, lin)
        assert lin.calls[0][2] is layer.weight and lin.calls[0][3] is layer.bias and len(lin.calls) == 1
        assert out is not None and not isinstance(out, torch.Tensor)  # the linear's result, untouched
        assert _ops(lambda: layer.forward(inp, LINEAR)) == _ops(lambda: F.linear(inp, layer.weight, layer.bias))
    down = RowParallelLinear(I, H, **kw)
    lin = _Sentinel()
    y = torch.randn(T, 2 * I, dtype=dtype)
    assert not isinstance(down.forward(y, lin, gated=True), torch.Tensor) and lin.calls[0][0] == "gated"
    assert _ops(lambda: down.forward(y, LINEAR, gated=True)) == _ops(lambda: LINEAR.gated(y, down.weight))

    embed = VocabParallelEmbedding(V, H, **kw)
    embed.weight.normal_()
    assert _ops(lambda: embed.forward(ids)) == _ops(lambda: F.embedding(ids, embed.weight))
    head = ParallelLMHead(V, H, tied_to=embed, **kw)
    assert _ops(lambda: head.forward(x, LINEAR)) == _ops(lambda: F.linear(x, embed.weight).float())
    assert torch.equal(head.forward(x, LINEAR), F.linear(x, embed.weight).float())


def test_weight_bytes_and_weights():
    g = groups(2)[1]
    qkv = QKVParallelLinear(16, 4, 4, 2, bias=True, group=g, dtype=torch.bfloat16, device="cpu")
    rows = (2 + 1 + 1) * 4  # local heads: 2 q, 1 k, 1 v
    assert qkv.weight_bytes() == (rows * 16 + rows) * 2
    assert [t is w for t, w in zip(qkv.weights(), (qkv.weight, qkv.bias))] == [True, True]
    row = RowParallelLinear(16, 8, bias=True, group=g, **KW)
    assert row.weight_bytes() == 8 * 8 * 4  # rank 1 does not add the bias
    assert RowParallelLinear(16, 8, bias=True, group=groups(2)[0], **KW).weight_bytes() == (8 * 8 + 8) * 4
    assert [t.shape for t in row.weights()] == [(8, 8), (8,)]
    assert ColumnParallelLinear(16, 8, **KW).weights()[0].shape == (8, 16)


# -- errors ----------------------------------------------------------------------------------------------------

def test_errors_name_the_argument():
    g4, g3 = groups(4)[0], groups(3)[0]
    with pytest.raises(ValueError, match="num_heads must be divisible by the tensor-parallel world_size 4, got 6"):
        QKVParallelLinear(16, 4, 6, 2, group=g4, **KW)
    with pytest.raises(ValueError, match="num_kv_heads must divide or be divisible by the tensor-parallel "
                                         "world_size 4, got 6"):
        QKVParallelLinear(16, 4, 12, 6, group=g4, **KW)
    with pytest.raises(ValueError, match="num_heads must be a multiple of num_kv_heads, got num_heads 8, "
                                         "num_kv_heads 3"):
        QKVParallelLinear(16, 4, 8, 3, **KW)
    with pytest.raises(ValueError, match="ColumnParallelLinear: output_size must be divisible by the "
                                         "tensor-parallel world_size 3, got 10"):
        ColumnParallelLinear(8, 10, group=g3, **KW)
    with pytest.raises(ValueError, match=r"output_sizes\[1\] must be divisible .* world_size 3, got 10"):
        MergedColumnParallelLinear(8, [12, 10], group=g3, **KW)
    with pytest.raises(ValueError, match="down_proj: input_size must be divisible .* world_size 4, got 10"):
        RowParallelLinear(10, 8, group=g4, name="down_proj", **KW)
    with pytest.raises(ValueError, match="hidden_size must be a positive int, got 0"):
        QKVParallelLinear(0, 4, 4, 4, **KW)
    with pytest.raises(ValueError, match="dtype must be a floating-point torch.dtype"):
        ColumnParallelLinear(8, 8, dtype=torch.int32, device="cpu")
    with pytest.raises(TypeError, match="group must be a ParallelGroup"):
        ColumnParallelLinear(8, 8, group=(0, 1), **KW)


def test_load_errors():
    col = ColumnParallelLinear(8, 12, group=groups(3)[2], name="layers.0.mlp.up", **KW)
    with pytest.raises(ValueError, match=r"layers\.0\.mlp\.up: weight has shape \(12, 9\), expected \(12, 8\)"):
        col.load_weight(torch.randn(12, 9))
    with pytest.raises(TypeError, match="layers.0.mlp.up: weight must be a floating-point tensor, got torch.int64"):
        col.load_weight(torch.zeros(12, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="was built with bias=False"):
        col.load_bias(torch.randn(12))
    assert col.missing() == ["weight"]
    col.load_weight(torch.randn(12, 8, dtype=torch.float64))  # any float dtype: cast on copy
    assert col.missing() == [] and col.weight.dtype == torch.float32

    qkv = QKVParallelLinear(16, 4, 8, 2, bias=True, **KW)
    assert qkv.missing() == ["weight[q]", "weight[k]", "weight[v]", "bias[q]", "bias[k]", "bias[v]"]
    with pytest.raises(ValueError, match=r"QKVParallelLinear: weight\[k\] has shape \(32, 16\), expected \(8, 16\)"):
        qkv.load_weight(torch.randn(32, 16), "k")
    with pytest.raises(ValueError, match="part must be 'q', 'k' or 'v', got 'o'"):
        qkv.load_weight(torch.randn(32, 16), "o")
    qkv.load_weight(torch.randn(8, 16), "v")
    qkv.load_bias(torch.randn(32), "q")
    assert qkv.missing() == ["weight[q]", "weight[k]", "bias[k]", "bias[v]"]

    merged = MergedColumnParallelLinear(8, [12, 12], **KW)
    with pytest.raises(ValueError, match=r"part must be an int in \[0, 2\), got 2"):
        merged.load_weight(torch.randn(12, 8), 2)
    row = RowParallelLinear(12, 8, bias=True, group=groups(3)[1], **KW)
    with pytest.raises(ValueError, match=r"RowParallelLinear: weight has shape \(8, 4\), expected \(8, 12\)"):
        row.load_weight(torch.randn(8, 4))  # the shard's shape is not accepted: loaders take full tensors
    row.load_weight(torch.randn(8, 12))
    assert row.missing() == ["bias"]
    emb = VocabParallelEmbedding(103, 8, group=groups(4)[3], **KW)
    with pytest.raises(ValueError, match=r"VocabParallelEmbedding: weight has shape \(26, 8\), expected \(103, 8\)"):
        emb.load_weight(torch.randn(26, 8))


# -- a real tensor-parallel run: torch.distributed (gloo), one process per rank ---------------------------------

def _dist_all_reduce(x):
    dist.all_reduce(x)
    return x


def _dist_all_gather(x):
    out = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(out, x.contiguous())
    return torch.cat(out)


def _mlp_model_worker(rank, world_size, weights, ids, expected):
    group = ParallelGroup(rank, world_size, all_reduce=_dist_all_reduce, all_gather=_dist_all_gather)
    V, H = weights["embed"].shape
    embed = VocabParallelEmbedding(V, H, group=group, **KW)
    embed.load_weight(weights["embed"])
    blocks = []
    for i, (gate, up, down, down_bias) in enumerate(weights["blocks"]):
        I = gate.shape[0]
        gate_up = MergedColumnParallelLinear(H, [I, I], group=group, **KW)
        gate_up.load_weight(gate, 0)
        gate_up.load_weight(up, 1)
        down_proj = RowParallelLinear(I, H, bias=True, group=group, name=f"blocks.{i}.down", **KW)
        down_proj.load_weight(down)
        down_proj.load_bias(down_bias)
        blocks.append((gate_up, down_proj))
    head = ParallelLMHead(V, H, group=group, **KW)
    head.load_weight(weights["head"])
    assert not embed.missing() and not head.missing() and not any(a.missing() or b.missing() for a, b in blocks)

    h = embed.forward(ids)
    for gate_up, down_proj in blocks:
        h = h + down_proj.forward(gate_up.forward(h, LINEAR), LINEAR, gated=True)
    logits = head.forward(h, LINEAR)
    assert_close(logits, expected, tol=1e-5)


def _mlp_reference(weights, ids):
    h = F.embedding(ids, weights["embed"])
    for gate, up, down, down_bias in weights["blocks"]:
        h = h + F.linear(F.silu(h @ gate.T) * (h @ up.T), down, down_bias)
    return F.linear(h, weights["head"]).float()


@pytest.mark.parametrize("ws", WORLD_SIZES, ids=lambda w: f"ws{w}")
def test_distributed_mlp_model(ws):
    """embedding -> 2 x (merged column gate/up -> gated row down, residual) -> LM head, over gloo: every rank's
    logits equal the single-process reference."""
    V, H, I, T = 103, 24, 36, 7
    weights = {
        "embed": torch.randn(V, H),
        "blocks": [(torch.randn(I, H) / H ** 0.5, torch.randn(I, H) / H ** 0.5, torch.randn(H, I) / I ** 0.5,
                    torch.randn(H)) for _ in range(2)],
        "head": torch.randn(V, H) / H ** 0.5,
    }
    ids = torch.cat([torch.tensor([0, V - 1]), torch.randint(0, V, (T - 2,))])
    launch(_mlp_model_worker, ws, weights, ids, _mlp_reference(weights, ids), backend="gloo", timeout=60)


# -- quant="fp8": the weight stored in fp8 with row scales ------------------------------------------------------

class ScaledLinear(TorchLinear):
    """``TorchLinear`` taking a quantized weight's row scales as the model's LinearDispatch does."""

    def __call__(self, x, weight, bias=None, *, scale=None):
        from tritium.ops.quant import dequantize
        return F.linear(x, weight if scale is None else dequantize(weight, scale), bias)

    def gated(self, x, weight, *, scale=None):
        i = x.shape[-1] // 2
        return self(F.silu(x[:, :i]) * x[:, i:], weight, scale=scale)


def _fp8_reference(w):
    from tritium.ops.quant import dequantize, quantize_rows
    return dequantize(*quantize_rows(w))


@pytest.mark.parametrize("ws", WORLD_SIZES, ids=lambda w: f"ws{w}")
def test_fp8_layers_quantize_each_full_row(ws):
    """16/32-bit checkpoint weights quantized at load: every world size holds the values of the whole
    model's row quantization (a row-parallel rank scales by the whole row, not its columns), so the ranks'
    outputs combine into the dequantized model's exactly as unquantized shards do."""
    from tritium.ops.quant import FP8_DTYPE
    H, I, T = 12, 24, 4
    linear = ScaledLinear()
    # rows of very different magnitudes across the columns a row-parallel rank holds
    gate, up = torch.randn(I, H), torch.randn(I, H)
    down = torch.randn(H, I) * torch.logspace(-2, 1, I)[None, :]
    x = torch.randn(T, H)
    out = 0
    for g in groups(ws):
        gate_up = MergedColumnParallelLinear(H, [I, I], group=g, quant="fp8", **KW)
        gate_up.load_weight(gate, 0)
        gate_up.load_weight(up, 1)
        down_proj = RowParallelLinear(I, H, group=g, quant="fp8", **KW)
        down_proj.load_weight(down.bfloat16())
        for layer in (gate_up, down_proj):
            assert layer.missing() == [] and layer.weight.dtype == FP8_DTYPE
            assert layer.weight_scale.dtype == torch.float32
            assert layer.weight_bytes() == layer.weight.numel() + 4 * layer.weight_scale.numel()
        out = out + down_proj.forward(gate_up.forward(x, linear), linear, gated=True, reduce=False)
    ref_down = _fp8_reference(down.bfloat16())
    assert_close(out, F.linear(F.silu(x @ _fp8_reference(gate).T) * (x @ _fp8_reference(up).T), ref_down))


@pytest.mark.parametrize("per", ["tensor", "channel"])
@pytest.mark.parametrize("nh,nkv,ws", [(8, 4, 1), (8, 4, 2), (12, 6, 3), (8, 1, 4)], ids=str)
def test_fp8_checkpoint_qkv(nh, nkv, ws, per):
    """An FP8 checkpoint's q/k/v weights, copied as stored, with per-tensor ([] or [1]) or per-channel
    ([rows, 1]) scales loaded in either order: each rank's rows and scales, the missing scale named."""
    from tritium.ops.quant import FP8_DTYPE, quantize_rows
    hidden, d, T = 16, 4, 3
    x = torch.randn(T, hidden)
    full, scales = {}, {}
    for p, rows in (("q", nh * d), ("k", nkv * d), ("v", nkv * d)):
        if per == "tensor":  # one scale for the tensor
            w8, s = (torch.randn(rows, hidden) * 40).to(FP8_DTYPE), torch.rand(()) + 0.01
        else:
            w8, s = quantize_rows(torch.randn(rows, hidden))
            s = s[:, None]
        full[p], scales[p] = w8, s
    deq = {p: full[p].float() * scales[p] for p in "qkv"}
    for g in groups(ws):
        layer = QKVParallelLinear(hidden, d, nh, nkv, group=g, quant="fp8", **KW)
        layer.load_weight(full["q"], "q")
        layer.load_weight_scale(scales["q"], "q")
        layer.load_weight_scale(scales["k"], "k")  # scale before its weight
        layer.load_weight(full["k"], "k")
        layer.load_weight(full["v"], "v")
        assert layer.missing() == ["weight_scale[v]"]
        layer.load_weight_scale(scales["v"], "v")
        assert layer.missing() == []
        out = layer.forward(x, ScaledLinear())
        r = g.rank
        hq, hkv = nh // ws, max(nkv // ws, 1)
        kv_heads = list(range(r * hkv, (r + 1) * hkv)) if nkv % ws == 0 else [r // (ws // nkv)]
        rows_q = list(range(r * hq * d, (r + 1) * hq * d))
        rows_kv = [h * d + i for h in kv_heads for i in range(d)]
        w_ref = torch.cat([deq["q"][rows_q], deq["k"][rows_kv], deq["v"][rows_kv]])
        assert_close(out, F.linear(x, w_ref))


def test_fp8_load_errors():
    from tritium.ops.quant import quantize_rows
    w8, s = quantize_rows(torch.randn(8, 6))
    plain = ColumnParallelLinear(6, 8, **KW)
    with pytest.raises(TypeError, match="quantization='fp8'"):
        plain.load_weight(w8)
    with pytest.raises(ValueError, match="not quantized"):
        plain.load_weight_scale(s)
    layer = RowParallelLinear(6, 8, quant="fp8", **KW)
    with pytest.raises(ValueError, match="weight_scale: .*block-wise"):
        layer.load_weight_scale(torch.ones(2, 3))
    with pytest.raises(ValueError, match="finite positive"):
        layer.load_weight_scale(torch.zeros(8, 1))
    with pytest.raises(ValueError, match="quant must be None or one of"):
        RowParallelLinear(6, 8, quant="int3", **KW)
    layer.load_weight(w8)
    assert layer.missing() == ["weight_scale"]
    biased = ColumnParallelLinear(6, 8, bias=True, quant="fp8", **KW)
    with pytest.raises(TypeError, match="only weights"):
        biased.load_bias(w8[:, 0].contiguous())


# -- quant="int4": 4-bit codes in groups -------------------------------------------------------------------------

class Int4TorchLinear(TorchLinear):
    """``TorchLinear`` taking an Int4Weight as the model's LinearDispatch does in "torch" mode."""

    def __call__(self, x, weight, bias=None):
        from tritium.ops.int4 import Int4Weight, dequantize_int4_reference
        if isinstance(weight, Int4Weight):
            weight = dequantize_int4_reference(weight, x.dtype)
        return F.linear(x, weight, bias)

    def gated(self, x, weight):
        i = x.shape[-1] // 2
        return self(F.silu(x[:, :i]) * x[:, i:], weight)


@pytest.mark.parametrize("ws", WORLD_SIZES, ids=lambda w: f"ws{w}")
def test_int4_layers(ws):
    """Quantized at load (each rank its rows, or its columns in whole groups: 128, else the largest of 64 / 32
    / 16 that divides them) and from a checkpoint's Int4Weight (load_int4: rows, or whole groups of columns):
    the ranks' outputs combine into the model of the dequantized weights."""
    from tritium.ops.int4 import Int4Weight, dequantize_int4_reference, quantize_int4
    H, I, T = 48, 192, 4
    linear = Int4TorchLinear()
    gate, up, down, x = torch.randn(I, H), torch.randn(I, H), torch.randn(H, I), torch.randn(T, H)
    ckpt = {name: quantize_int4(w, 16, symmetric=name == "up") for name, w in (("gate", gate), ("up", up),
                                                                                ("down", down))}
    deq = {name: dequantize_int4_reference(w) for name, w in ckpt.items()}
    local = I // ws
    g_down = next(g for g in (128, 64, 32, 16) if local % g == 0)
    rtn_down = torch.cat([dequantize_int4_reference(quantize_int4(down[:, r * local:(r + 1) * local], g_down))
                          for r in range(ws)], dim=1)
    rtn = {name: dequantize_int4_reference(quantize_int4(w, 16)) for name, w in (("gate", gate), ("up", up.bfloat16()))}
    out_rtn = out_ckpt = 0
    for g in groups(ws):
        layers = {}
        for source in ("rtn", "ckpt"):
            kw = dict(group=g, quant="int4", **KW)
            gate_up = MergedColumnParallelLinear(H, [I, I], group_size=None if source == "rtn" else 16, **kw)
            down_proj = RowParallelLinear(I, H, group_size=None if source == "rtn" else 16, **kw)
            if source == "rtn":
                gate_up.load_weight(gate, 0)
                gate_up.load_weight(up.bfloat16(), 1)
                down_proj.load_weight(down)
            else:
                gate_up.load_int4(ckpt["gate"], 0)
                gate_up.load_int4(ckpt["up"], 1)
                down_proj.load_int4(ckpt["down"])
            for layer in (gate_up, down_proj):
                assert layer.missing() == []
                layer.finish_int4()
                assert isinstance(layer.weight, Int4Weight) and layer.weight.scales.dtype == torch.float16
            layers[source] = (gate_up, down_proj)
        assert layers["rtn"][1].weight.group_size == g_down and layers["ckpt"][1].weight.group_size == 16
        assert layers["ckpt"][0].weight.zeros is not None  # gate's (asymmetric) zero points are kept
        for source, (gate_up, down_proj) in layers.items():
            y = down_proj.forward(gate_up.forward(x, linear), linear, gated=True, reduce=False)
            if source == "rtn":
                out_rtn = out_rtn + y
            else:
                out_ckpt = out_ckpt + y
    assert_close(out_rtn, F.linear(F.silu(x @ rtn["gate"].T) * (x @ rtn["up"].T), rtn_down))
    assert_close(out_ckpt, F.linear(F.silu(x @ deq["gate"].T) * (x @ deq["up"].T), deq["down"]))


def test_int4_load_errors():
    from tritium.ops.int4 import Int4Weight, quantize_int4
    w = quantize_int4(torch.randn(8, 64), 16)
    with pytest.raises(ValueError, match="not int4: build the model with quantization='int4'"):
        ColumnParallelLinear(64, 8, **KW).load_int4(w)
    layer = ColumnParallelLinear(64, 8, quant="int4", group_size=32, **KW)
    with pytest.raises(ValueError, match="groups of 16 here, the layer holds 64 in groups of 32"):
        layer.load_int4(w)
    with pytest.raises(ValueError, match=r"has shape \(8, 64\), expected \(8, 32\)"):
        ColumnParallelLinear(32, 8, quant="int4", **KW).load_int4(w)
    with pytest.raises(ValueError, match="groups of 48 input features do not divide this rank's 32 of 64"):
        RowParallelLinear(64, 8, quant="int4", group_size=48, group=groups(2)[0], **KW)
    # act-order: a row-parallel rank cannot take columns of permuted features; fused parts must share the order
    permuted = Int4Weight(w.packed, w.scales, w.zeros, torch.randperm(64).to(torch.int32), 16)
    with pytest.raises(ValueError, match="tensor-parallel size 2: .*permuted"):
        RowParallelLinear(64, 8, quant="int4", group_size=16, group=groups(2)[1], **KW).load_int4(permuted)
    merged = MergedColumnParallelLinear(64, [8, 8], quant="int4", group_size=16, **KW)
    merged.load_int4(permuted, 0)
    with pytest.raises(ValueError, match=r"weight\[1\] orders its input features .* differently from weight\[0\]"):
        merged.load_int4(w, 1)
