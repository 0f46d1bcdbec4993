"""Bad inputs to paged_attention and AttentionWorkspace: each raises the right exception type with a
message that names the offending argument. The 'meta' device stands in for a second device."""

import pytest
import torch

from tritium.attention import AttentionConfig, AttentionWorkspace, paged_attention, write_kv_cache
from tritium.runtime import default_device

from .utils import FP8, Shape, call_with, strided_last_dim

META = torch.device("meta")


def _base(cache_dtype=torch.float16) -> dict:
    """Keyword arguments of a valid call: 2 sequences (2 new over 17, 1 new over 5), 4/2 heads, D64,
    16-token pages, 6 blocks, 3 block-table columns."""
    batch = Shape(q_lens=(2, 1), seq_lens=(17, 5)).batch(torch.float16)
    if cache_dtype != torch.float16:
        batch.k_cache, batch.v_cache = batch.k_cache.to(cache_dtype), batch.v_cache.to(cache_dtype)
    names = ("q", "k_cache", "v_cache", "block_table", "seq_lens", "cu_seqlens_q")
    return dict(zip(names, batch.args))


def _like(t, *, shape=None, dtype=None, device=None):
    """A random tensor like ``t`` with some of shape, dtype or device changed."""
    shape = t.shape if shape is None else shape
    dtype = t.dtype if dtype is None else dtype
    device = t.device if device is None else device
    if dtype.is_floating_point and dtype != FP8:
        return torch.randn(shape, dtype=dtype, device=device)
    return torch.zeros(shape, dtype=dtype, device=device)


def _cache(a, *, block_size=16, heads=2, head_dim=64, dtype=None):
    return _like(a["k_cache"], shape=(6, block_size, heads, head_dim), dtype=dtype)


def _heads(n):
    return torch.ones(n, dtype=torch.float32)


BAD_INPUTS = [
    # wrong rank or shape
    ("q-rank", lambda a: {"q": a["q"][0]}, ValueError, r"q must have 3 dimensions"),
    ("k_cache-rank", lambda a: {"k_cache": a["k_cache"][0]}, ValueError, r"k_cache must have 4 dimensions"),
    ("v_cache-rank", lambda a: {"v_cache": a["v_cache"][0]}, ValueError, r"v_cache must have 4 dimensions"),
    ("v_cache-shape", lambda a: {"v_cache": a["v_cache"][:-1]}, ValueError, r"v_cache shape"),
    ("block_table-rank", lambda a: {"block_table": a["block_table"][0]}, ValueError, r"block_table must have 2"),
    ("block_table-rows", lambda a: {"block_table": a["block_table"][:1]}, ValueError, r"block_table has 1 rows"),
    ("seq_lens-rank", lambda a: {"seq_lens": a["seq_lens"][None]}, ValueError, r"seq_lens must have 1"),
    ("cu_seqlens_q-rank", lambda a: {"cu_seqlens_q": a["cu_seqlens_q"][None]}, ValueError,
     r"cu_seqlens_q must have 1"),
    ("cu_seqlens_q-length", lambda a: {"cu_seqlens_q": a["cu_seqlens_q"][:-1]}, ValueError,
     r"cu_seqlens_q must have num_seqs \+ 1 = 3 entries, got 2"),
    ("no-sequences", lambda a: {"seq_lens": a["seq_lens"][:0], "block_table": a["block_table"][:0],
                                "cu_seqlens_q": a["cu_seqlens_q"][:1]}, ValueError, r"seq_lens is empty"),
    ("q-not-tensor", lambda a: {"q": a["q"].tolist()}, TypeError, r"q must be a torch.Tensor"),
    # heads and head_dim
    ("head_dim-q-vs-cache", lambda a: {"q": _like(a["q"], shape=(3, 4, 128))}, ValueError,
     r"k_cache has head_dim 64, q has 128"),
    ("heads-k-vs-v", lambda a: {"v_cache": _cache(a, heads=4)}, ValueError, r"v_cache shape"),
    ("heads-not-divisible", lambda a: {"q": _like(a["q"], shape=(3, 3, 64))}, ValueError,
     r"num_q_heads \(3, q.shape\[1\]\) must be divisible by num_kv_heads \(2"),
    ("head_dim-unsupported", lambda a: {"q": _like(a["q"], shape=(3, 4, 72)), "k_cache": _cache(a, head_dim=72),
                                        "v_cache": _cache(a, head_dim=72)}, ValueError, r"head_dim must be one of"),
    ("block-size-8", lambda a: {"k_cache": _cache(a, block_size=8), "v_cache": _cache(a, block_size=8)},
     ValueError, r"block size \(k_cache.shape\[1\]\) must be a positive multiple of 16, got 8"),
    ("block-size-24", lambda a: {"k_cache": _cache(a, block_size=24), "v_cache": _cache(a, block_size=24)},
     ValueError, r"block size \(k_cache.shape\[1\]\).*got 24"),
    # dtypes
    ("q-int32", lambda a: {"q": _like(a["q"], dtype=torch.int32)}, TypeError, r"q must have dtype"),
    ("q-fp64", lambda a: {"q": _like(a["q"], dtype=torch.float64)}, TypeError, r"q must have dtype"),
    ("k_cache-vs-q", lambda a: {"k_cache": _cache(a, dtype=torch.float32), "v_cache": _cache(a, dtype=torch.float32)},
     TypeError, r"k_cache dtype"),
    ("v_cache-vs-k_cache", lambda a: {"v_cache": _cache(a, dtype=torch.float32)}, TypeError, r"v_cache dtype"),
    ("block_table-int64", lambda a: {"block_table": a["block_table"].long()}, TypeError,
     r"block_table must have dtype"),
    ("seq_lens-int64", lambda a: {"seq_lens": a["seq_lens"].long()}, TypeError, r"seq_lens must have dtype"),
    ("cu_seqlens_q-int64", lambda a: {"cu_seqlens_q": a["cu_seqlens_q"].long()}, TypeError,
     r"cu_seqlens_q must have dtype"),
    ("alibi-fp16", lambda a: {"alibi_slopes": _heads(4).half()}, TypeError, r"alibi_slopes must have dtype"),
    ("alibi-length", lambda a: {"alibi_slopes": _heads(2)}, ValueError, r"alibi_slopes must have num_q_heads = 4"),
    ("sinks-fp16", lambda a: {"sinks": _heads(4).half()}, TypeError, r"sinks must have dtype"),
    ("sinks-length", lambda a: {"sinks": _heads(8)}, ValueError, r"sinks must have num_q_heads = 4"),
    ("out-dtype", lambda a: {"out": a["q"].float()}, TypeError, r"out must have dtype"),
    ("out-shape", lambda a: {"out": a["q"][:2]}, ValueError, r"out shape"),
    # scalars
    ("sliding_window-0", lambda a: {"sliding_window": 0}, ValueError, r"sliding_window"),
    ("sliding_window-float", lambda a: {"sliding_window": 2.5}, ValueError, r"sliding_window"),
    ("softmax-scale-0", lambda a: {"softmax_scale": 0.0}, ValueError, r"softmax_scale must be a positive"),
    ("softmax-scale-negative", lambda a: {"softmax_scale": -0.1}, ValueError, r"softmax_scale must be a positive"),
    ("softmax-scale-inf", lambda a: {"softmax_scale": float("inf")}, ValueError, r"softmax_scale must be a positive"),
    ("softcap-0", lambda a: {"softcap": 0.0}, ValueError, r"softcap"),
    ("softcap-negative", lambda a: {"softcap": -1.0}, ValueError, r"softcap"),
    ("softcap-inf", lambda a: {"softcap": float("inf")}, ValueError,
     r"softcap must be a positive finite number, got inf"),
    ("softcap-tensor", lambda a: {"softcap": torch.tensor(5.0)}, ValueError,
     r"softcap must be a positive finite number \(a Python or NumPy scalar\), got Tensor"),
    ("softcap-string", lambda a: {"softcap": "a"}, ValueError, r"softcap must be a positive finite number .*got str"),
    ("softmax-scale-bool", lambda a: {"softmax_scale": True}, ValueError, r"softmax_scale must be .*got bool"),
    ("softmax-scale-tensor", lambda a: {"softmax_scale": torch.tensor(0.1)}, ValueError,
     r"softmax_scale must be a positive finite number \(a Python or NumPy scalar\), got Tensor"),
    ("sliding_window-bool", lambda a: {"sliding_window": True}, ValueError, r"sliding_window must be a positive int"),
    ("causal-string", lambda a: {"causal": "no"}, ValueError, r"causal must be a bool, got 'no'"),
    ("validate-int", lambda a: {"validate": 1}, ValueError, r"validate must be a bool, got 1"),
    ("max_seqlen_q-negative", lambda a: {"max_seqlen_q": -1}, ValueError,
     r"max_seqlen_q must be a non-negative int, got -1"),
    ("max_seqlen_k-float", lambda a: {"max_seqlen_k": 1.5}, ValueError, r"max_seqlen_k must be a non-negative int"),
    ("max_seqlen_q-string", lambda a: {"max_seqlen_q": "5"}, ValueError, r"max_seqlen_q must be .*got str"),
    ("num_splits-0", lambda a: {"num_splits": 0}, ValueError, r"num_splits"),
    ("num_splits-65", lambda a: {"num_splits": 65}, ValueError, r"num_splits"),
    # a Q block of 16 tokens x 2 heads a KV head: 32 rows, more than the config's 16
    ("config-rows", lambda a: {"config": AttentionConfig(block_m=16, block_q=16, tile_n=16, num_splits=1, num_warps=4,
                                                         num_stages=1)},
     ValueError, r"config.block_q \* \(num_q_heads // num_kv_heads\) = 16 \* 2 must be at most config.block_m = 16"),
    ("k_scale-on-fp16-cache", lambda a: {"k_scale": 0.5, "v_scale": 0.5}, ValueError, r"k_scale"),
]

# fp8-cache calls with bad dequantisation scales.
BAD_SCALES = [
    ("k_scale-negative", {"k_scale": -1.0, "v_scale": 1.0}, ValueError, r"k_scale must be a positive"),
    ("k_scale-inf", {"k_scale": float("inf"), "v_scale": 1.0}, ValueError, r"k_scale must be a positive finite"),
    ("v_scale-bool", {"k_scale": 1.0, "v_scale": True}, ValueError, r"v_scale must be a positive finite"),
    ("v_scale-string", {"k_scale": 1.0, "v_scale": "1"}, ValueError, r"v_scale must be a positive"),
    ("k_scale-2-elements", {"k_scale": torch.ones(2), "v_scale": torch.ones(1)}, ValueError,
     r"k_scale must be a float or a 1-element tensor"),
    ("k_scale-fp16", {"k_scale": torch.ones(1, dtype=torch.float16), "v_scale": torch.ones(1)}, TypeError,
     r"k_scale tensor must be float32"),
    ("tensor-and-float", {"k_scale": torch.ones(1), "v_scale": 1.0}, ValueError, r"k_scale and v_scale"),
    # A scale tensor on another device than q is a bad input like any other tensor argument.
    ("k_scale-device", {"k_scale": torch.ones(1, device=META), "v_scale": torch.ones(1)}, ValueError, r"k_scale"),
    ("v_scale-device", {"k_scale": torch.ones(1), "v_scale": torch.ones(1, device=META)}, ValueError, r"v_scale"),
]



def _with_optional(a: dict) -> dict:
    """The base call plus every optional tensor argument."""
    return {**a, "alibi_slopes": _heads(4).to(a["q"].device), "sinks": _heads(4).to(a["q"].device),
            "out": torch.empty_like(a["q"])}


def _move_scales(changes: dict, device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) and v.device != META else v for k, v in changes.items()}


def _set(t, index, value):
    t = t.clone()
    t[index] = value
    return t


# Value errors only validate=True can see (they need the tensors' contents).
BAD_VALUES = [
    ("block-id-too-large", lambda a: {"block_table": _set(a["block_table"], (0, 1), 6)},
     r"block_table\[0, 1\] = 6 is out of range \[0, 6\)"),
    ("block-id-negative", lambda a: {"block_table": _set(a["block_table"], (1, 0), -1)},
     r"block_table\[1, 0\] = -1 is out of range"),
    ("seq-shorter-than-query", lambda a: {"seq_lens": _set(a["seq_lens"], 0, 1)},
     r"seq_lens\[0\] = 1 is shorter than its query length 2"),
    ("seq-negative-with-q_start_pos", lambda a: {"seq_lens": _set(a["seq_lens"], 1, -5),
                                                 "q_start_pos": torch.zeros_like(a["seq_lens"])},
     r"seq_lens\[1\] = -5 is negative"),
    ("too-few-block-table-columns", lambda a: {"seq_lens": _set(a["seq_lens"], 1, 60)},
     r"seq_lens\[1\] = 60 needs 4 pages of 16, block_table has 3 columns"),
    ("cu_seqlens_q-end", lambda a: {"cu_seqlens_q": _set(a["cu_seqlens_q"], 2, 2)},
     r"cu_seqlens_q must start at 0 and end at num_tokens = 3"),
    ("cu_seqlens_q-decreasing", lambda a: {"cu_seqlens_q": _set(a["cu_seqlens_q"], 1, 4)},
     r"cu_seqlens_q must be non-decreasing"),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c[0]) for c in BAD_VALUES])
def test_validate_catches(case):
    _, change, match = case
    a = _base()
    with pytest.raises(ValueError, match=match):
        call_with(paged_attention, a, {**change(a), "validate": True})


@pytest.mark.parametrize("kwargs,match", [
    pytest.param({"max_num_tokens": 0}, r"max_num_tokens must be a positive int", id="no-tokens"),
    pytest.param({"head_dim": 64.0}, r"head_dim must be a positive int", id="float-head_dim"),
    pytest.param({"max_splits": 65}, r"max_splits must be <= 64", id="too-many-splits"),
])
def test_workspace_bad_construction(kwargs, match):
    args = {"max_num_tokens": 8, "num_q_heads": 4, "head_dim": 64, **kwargs}
    with pytest.raises(ValueError, match=match):
        AttentionWorkspace(**args)


@pytest.mark.parametrize("workspace,match", [
    pytest.param(dict(max_num_tokens=8, num_q_heads=8, head_dim=64), r"workspace is for 8 heads", id="heads"),
    pytest.param(dict(max_num_tokens=8, num_q_heads=4, head_dim=128), r"head_dim 128", id="head_dim"),
    pytest.param(dict(max_num_tokens=2, num_q_heads=4, head_dim=64), r"workspace holds 2 tokens, q has 3",
                 id="tokens"),
    pytest.param(dict(max_num_tokens=8, num_q_heads=4, head_dim=64, device=META), r"workspace is on meta",
                 id="device"),
])
def test_workspace_mismatch(workspace, match):
    a = _base()
    workspace = {"device": a["q"].device, **workspace}
    with pytest.raises(ValueError, match=match):
        call_with(paged_attention, a, {"workspace": AttentionWorkspace(**workspace), "num_splits": 2})


def _kv_base(cache_dtype=torch.float16) -> dict:
    """A valid write_kv_cache call: 3 tokens, 2 kv heads, D64, into 2 pages of 16."""
    device = default_device()
    k = torch.randn(3, 2, 64, dtype=torch.float16, device=device)
    cache = torch.zeros(2, 16, 2, 64, dtype=cache_dtype, device=device)
    return {"k": k, "v": k.clone(), "k_cache": cache, "v_cache": cache.clone(),
            "slot_mapping": torch.tensor([0, 17, 5], device=device)}


KV_TENSOR_ARGS = ["k", "v", "k_cache", "v_cache", "slot_mapping"]

BAD_WRITES = [
    ("k-rank", lambda a: {"k": a["k"][0]}, ValueError, r"k must have 3 dimensions"),
    ("v-shape", lambda a: {"v": a["v"][:2]}, ValueError, r"v shape"),
    ("k_cache-rank", lambda a: {"k_cache": a["k_cache"][0]}, ValueError, r"k_cache must have 4 dimensions"),
    ("v_cache-shape", lambda a: {"v_cache": a["v_cache"][:1]}, ValueError, r"v_cache"),
    ("heads", lambda a: {"k": _like(a["k"], shape=(3, 3, 64)), "v": _like(a["k"], shape=(3, 3, 64))},
     ValueError, r"k_cache has 2 heads x head_dim 64, k has 3 x 64"),
    ("head_dim", lambda a: {"k": _like(a["k"], shape=(3, 2, 128)), "v": _like(a["k"], shape=(3, 2, 128))},
     ValueError, r"k_cache has 2 heads x head_dim 64, k has 2 x 128"),
    ("slot_mapping-int32", lambda a: {"slot_mapping": a["slot_mapping"].int()}, TypeError,
     r"slot_mapping must have dtype int64"),
    ("slot_mapping-rank", lambda a: {"slot_mapping": a["slot_mapping"][None]}, ValueError,
     r"slot_mapping must have 1 dimensions"),
    ("slot_mapping-length", lambda a: {"slot_mapping": a["slot_mapping"][:2]}, ValueError,
     r"slot_mapping has 2 entries, k has 3 tokens"),
    ("k-int", lambda a: {"k": a["k"].int()}, TypeError, r"k must have dtype"),
    ("k-vs-cache", lambda a: {"k": a["k"].float(), "v": a["v"].float()}, TypeError, r"k_cache dtype"),
    ("v_cache-dtype", lambda a: {"v_cache": a["v_cache"].float()}, TypeError, r"v_cache dtype"),
    ("v-dtype", lambda a: {"v": a["v"].float()}, TypeError, r"v dtype .* differs from k dtype"),
    ("k_scale-on-fp16-cache", lambda a: {"k_scale": 1.0, "v_scale": 1.0}, ValueError, r"k_scale"),
]




# op name -> (function, valid keyword arguments given the cache dtype, its tensor arguments, the one
# others are compared with)
OPS = {
    "attention": (paged_attention, _base, ["q", "k_cache", "v_cache", "block_table", "seq_lens", "cu_seqlens_q",
                                          "alibi_slopes", "sinks", "out"], "q"),
    "write": (write_kv_cache, _kv_base, KV_TENSOR_ARGS, "k"),
}


def _op_params(cases_by_op: dict) -> list:
    return [pytest.param(op, case, id=f"{op}-{case[0]}") for op, cases in cases_by_op.items() for case in cases]


def _tensor_params() -> list:
    return [pytest.param(op, name, id=f"{op}-{name}") for op, (_, _, names, _) in OPS.items() for name in names]


def _base_of(op, cache_dtype=torch.float16, optional=False) -> dict:
    base = OPS[op][1](cache_dtype)
    return _with_optional(base) if optional and op == "attention" else base


@pytest.mark.parametrize("op,case", _op_params({"attention": BAD_INPUTS, "write": BAD_WRITES}))
def test_bad_input(op, case):
    _, change, exc, match = case
    a = _base_of(op)
    device = a["k_cache"].device
    changes = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in change(a).items()}
    with pytest.raises(exc, match=match):
        call_with(OPS[op][0], a, changes)


@pytest.mark.parametrize("op,case", _op_params({"attention": BAD_SCALES, "write": BAD_SCALES}))
def test_bad_scale(op, case):
    _, changes, exc, match = case
    a = _base_of(op, cache_dtype=FP8)
    with pytest.raises(exc, match=match):
        call_with(OPS[op][0], a, _move_scales(changes, a["k_cache"].device))


@pytest.mark.parametrize("op,name", _tensor_params())
def test_other_device(op, name):
    fn, _, _, first = OPS[op]
    a = _base_of(op, optional=True)
    with pytest.raises(ValueError, match=rf"(^{name} is on meta|, {first} is on meta)"):
        call_with(fn, a, {name: a[name].to(META)})


@pytest.mark.parametrize("op,name", _tensor_params())
def test_non_contiguous_last_dim(op, name):
    a = _base_of(op, optional=True)
    with pytest.raises(ValueError, match=rf"{name} must be contiguous in its last dimension"):
        call_with(OPS[op][0], a, {name: strided_last_dim(a[name])})
