"""Mixture of experts (router top-k and the fused routed experts), both paths, against the fp32 references."""

import pytest
import torch

from tritium.ops import moe, reference
from tritium.ops.moe import fused_moe, moe_route
from tritium.ops.quant import quantize_rows
from tritium.ops.rms_norm import rms_norm
from tritium.runtime import default_device, interpreting, pdl_launch

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
PATHS = ["slot", "sorted"]


def rel_err(out, ref):
    assert not torch.isnan(out).any() and not torch.isinf(out).any()
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def dname(dtype):
    return str(dtype).replace("torch.", "")


@pytest.fixture
def path(request, monkeypatch):
    """Force the path of fused_moe's calls that leave it to moe_tiles (path=None), whatever the shape."""
    choose = moe.moe_tiles

    def forced(T, k, H, I, E, dtype, device, path=None):
        return choose(T, k, H, I, E, dtype, device, path or request.param)

    monkeypatch.setattr(moe, "moe_tiles", forced)
    return request.param


def experts(E, H, I, dtype, dev):
    """Random w_gate_up [E, 2I, H] and w_down [E, H, I], scaled so that the activations stay O(1)."""
    w_gate_up = (torch.randn(E, 2 * I, H, device=dev) / H ** 0.5).to(dtype)
    w_down = (torch.randn(E, H, I, device=dev) / I ** 0.5).to(dtype)
    return w_gate_up, w_down


def routed(T, E, k, dev):
    """Routing weights and duplicate-free ids as a router gives them (top-k of random logits)."""
    return reference.moe_route(torch.randn(T, E, device=dev), k, True)


def check_moe(x, w_gate_up, w_down, weights, ids, tol=None):
    """fused_moe into a NaN-poisoned ``out`` against the reference, within ``tol`` (default: the dtype's)."""
    out = torch.full(x.shape, float("nan"), dtype=x.dtype, device=x.device)
    got = fused_moe(x, w_gate_up, w_down, weights, ids, out=out)
    assert got is out
    ref = reference.fused_moe(x, w_gate_up, w_down, weights, ids)
    err = rel_err(out, ref)
    if err >= (tol or TOL[x.dtype]):
        worst = (out.double() - ref.double()).abs().argmax().item()
        pytest.fail(f"relative error {err:.3g} (worst at {divmod(worst, x.shape[1])}: {out.flatten()[worst].item()} "
                    f"vs {ref.flatten()[worst].item()})")


# -- router ------------------------------------------------------------------------------------------------------

ROUTE_CASES = [(E, k) for E in (4, 8, 60) for k in (1, 2, 8) if k <= E] + [(128, 8), (512, 16)]  # + Qwen3, the most


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dname)
@pytest.mark.parametrize("E,k", [pytest.param(E, k, id=f"E{E}-k{k}") for E, k in ROUTE_CASES])
@pytest.mark.parametrize("renormalize", [False, True], ids=["plain", "renorm"])
def test_moe_route_matches_reference(E, k, renormalize, dtype):
    dev = default_device()
    logits = (torch.randn(7, E, device=dev) * 3).to(dtype)
    weights, ids = moe_route(logits, k, renormalize)
    ref_w, ref_i = reference.moe_route(logits, k, renormalize)
    assert weights.shape == ids.shape == (7, k) and weights.dtype == torch.float32 and ids.dtype == torch.int32
    assert torch.equal(ids, ref_i)
    torch.testing.assert_close(weights, ref_w, atol=1e-6, rtol=1e-5)


def test_moe_route_ties_take_the_lower_expert():
    """Equal probabilities: the lower index first (the reference's stable sort; torch.topk's order among
    ties is unspecified), into given buffers (poisoned), with a row of all-equal logits."""
    dev = default_device()
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0, 2.0, 2.0, -1.0], [0.5] * 8], device=dev).half()
    weights_out = torch.full((2, 4), float("nan"), device=dev)
    ids_out = torch.full((2, 4), -7, dtype=torch.int32, device=dev)
    weights, ids = moe_route(logits, 4, False, weights_out=weights_out, ids_out=ids_out)
    assert weights is weights_out and ids is ids_out
    assert ids.tolist() == [[1, 2, 4, 5], [0, 1, 2, 3]]
    ref_w, ref_i = reference.moe_route(logits, 4, False)
    assert torch.equal(ids, ref_i)
    torch.testing.assert_close(weights, ref_w, atol=1e-6, rtol=1e-5)
    assert torch.equal(weights[1], torch.full((4,), 0.125, device=dev))


def test_moe_route_nan_rows_and_underflow():
    """A row with a NaN logit: NaN weights and still k distinct ids in [0, E); a row whose probabilities
    underflow to 0 past the first few: the zeros tie and the lower experts come first, as in the reference."""
    dev = default_device()
    E, k = 128, 8
    logits = torch.randn(3, E, device=dev)
    logits[0, 5] = float("nan")
    logits[1] = -1000.0
    logits[1, 17] = logits[1, 90] = logits[1, 3] = 0.0  # three winners, then 125 probabilities of exactly 0
    weights, ids = moe_route(logits, k, True)
    assert torch.isnan(weights[0]).all()
    assert len(set(ids[0].tolist())) == k and 0 <= ids[0].min() and ids[0].max() < E
    ref_w, ref_i = reference.moe_route(logits[1:], k, True)
    assert ids[1].tolist() == [3, 17, 90, 0, 1, 2, 4, 5] and torch.equal(ids[1:], ref_i)
    torch.testing.assert_close(weights[1:], ref_w, atol=1e-6, rtol=1e-5)


def test_moe_route_empty_and_errors():
    dev = default_device()
    weights, ids = moe_route(torch.randn(0, 8, device=dev), 2, True)
    assert weights.shape == ids.shape == (0, 2)
    logits = torch.randn(3, 8, device=dev)
    cases = [
        ((torch.randn(3, 8, 1, device=dev), 2), {}, "logits must be a \\[T, E\\] tensor"),
        ((logits.double(), 2), {}, "logits must be float32, float16 or bfloat16, got torch.float64"),
        ((torch.randn(2, 513, device=dev), 2), {}, "logits must have 1 to 512 experts"),
        ((torch.randn(8, 3, device=dev).T, 2), {}, "logits needs a contiguous last dimension"),
        ((logits, 0), {}, "top_k must be an int in \\[1, 8\\]"),
        ((logits, 9), {}, "top_k must be an int in \\[1, 8\\].*got 9"),
        ((logits, 2), {"weights_out": torch.empty(3, 2, device=dev, dtype=torch.float16)}, "weights_out must be"),
        ((logits, 2), {"ids_out": torch.empty(3, 3, device=dev, dtype=torch.int32)}, "ids_out must be a \\[3, 2\\]"),
        ((logits, 2), {"ids_out": torch.empty(2, 3, device=dev, dtype=torch.int32).T}, "ids_out needs a contiguous"),
    ]
    for args, kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            moe_route(*args, True, **kwargs)


NORM_ROUTE_CASES = [pytest.param(*c, id="T{}-E{}-k{}-H{}".format(*c))
                    for c in [(1, 8, 2, 48), (3, 60, 8, 64), (1, 128, 8, 256), (5, 4, 1, 1000), (2, 8, 2, 8192)]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dname)
@pytest.mark.parametrize("T,E,k,H", NORM_ROUTE_CASES)
def test_moe_norm_route(T, E, k, H, dtype):
    """The add, the norm, the router's logits and their top-k in one launch (several programs a token, the
    last one writing): equal to rms_norm, the router projection rounded to the dtype and moe_route one after
    the other: the new residual bit for bit what ops.rms_norm writes, the normed rows to rounding, the ids
    those of the reference (16-bit: each pick within a rounding of the k-th); the counters left zero."""
    dev = default_device()
    torch.manual_seed(T * 1000 + E + H)
    x = torch.randn(T, H, device=dev).to(dtype)
    residual = torch.randn(T, H, device=dev).to(dtype)
    norm_w = (torch.rand(H, device=dev) + 0.5).to(dtype)
    router = (torch.randn(E, H, device=dev) * 2 / H ** 0.5).to(dtype)
    counters = moe.norm_route_counters(8, dev)
    into = residual.clone()
    normed, h, weights, ids = moe.moe_norm_route(x, into, norm_w, 1e-6, router, k, True, counters)
    assert h is into and not counters.any()
    two_normed, two_h = rms_norm(x, norm_w, 1e-6, residual.clone())
    # the residual bit for bit; the normed rows to the dtype's rounding (on a GPU the sum of squares is reduced
    # by one warp here, by four in rms_norm: another order)
    assert torch.equal(h, two_h) and rel_err(normed, two_normed) < TOL[dtype]
    assert (normed.double() - two_normed.double()).abs().max() <= 2 * two_normed.double().abs().max() * TOL[dtype]
    ref_w, ref_i = reference.moe_route(reference.linear(two_normed, router), k, True)
    if dtype == torch.float32:  # products summed in another order: exact ids, weights to rounding
        assert torch.equal(ids, ref_i)
        torch.testing.assert_close(weights, ref_w, atol=1e-5, rtol=1e-4)
    else:  # 16-bit logits: a sum in another order may round one to its neighbour and swap a near tie, so
        # each pick must be within a rounding of the reference's k-th probability and weigh what it weighs there
        probs = torch.softmax(reference.linear(two_normed, router).float(), -1)
        picked = probs.gather(1, ids.long())
        kth = probs.sort(-1, descending=True).values[:, k - 1:k]
        assert (picked >= kth * 0.95).all()
        assert all(len(set(row)) == k for row in ids.tolist())
        torch.testing.assert_close(weights, picked / picked.sum(-1, keepdim=True), atol=2e-2, rtol=2e-2)
        assert (ids == ref_i).float().mean() > 0.8
    # a second launch on the same counters (as the next layer's): the same
    again = moe.moe_norm_route(x, residual.clone(), norm_w, 1e-6, router, k, True, counters)
    assert torch.equal(again[0], normed) and torch.equal(again[2], weights) and torch.equal(again[3], ids)


def test_moe_norm_route_bad_input():
    dev = default_device()
    T, E, k, H = 2, 8, 2, 16
    x = torch.randn(T, H, device=dev)
    good = dict(x=x, residual=torch.randn(T, H, device=dev), norm_weight=torch.ones(H, device=dev), eps=1e-6,
                router=torch.randn(E, H, device=dev), top_k=k, renormalize=True,
                counters=moe.norm_route_counters(4, dev))
    cases = [
        ({"x": x[None]}, "x must be a \\[T, H\\]"),
        ({"x": torch.randn(T, 8193, device=dev)}, "x must have 1 to 8192 columns"),
        ({"residual": torch.randn(T + 1, H, device=dev)}, "residual must be a \\[2, 16\\]"),
        ({"norm_weight": torch.ones(H + 1, device=dev)}, "norm_weight must be a \\[16\\]"),
        ({"router": torch.randn(E, H + 1, device=dev)}, "router must be an \\[E, 16\\]"),
        ({"router": torch.randn(E, H, device=dev).half()}, "router must be an .* torch.float32"),
        ({"router": torch.randn(513, H, device=dev)}, "router must have 1 to 512 experts"),
        ({"top_k": 9}, "top_k must be an int in \\[1, 8\\]"),
        ({"counters": torch.zeros(1, dtype=torch.int32, device=dev)}, "counters must be int32 \\[>= 2\\]"),
        ({"counters": torch.zeros(4, device=dev)}, "counters must be int32"),
        ({"router": torch.randn(H, E, device=dev).T}, "router needs a contiguous last dimension"),
    ]
    for change, match in cases:
        with pytest.raises(ValueError, match=match):
            moe.moe_norm_route(**dict(good, **change))


# -- experts -----------------------------------------------------------------------------------------------------

MOE_SHAPES = [pytest.param(*s, id="T{}-E{}-k{}-H{}-I{}".format(*s))
              for s in [(T, E, k, 48, 40) for T in (1, 3, 17) for E, k in ((4, 1), (8, 2))] + [(3, 8, 2, 128, 64)]]


@pytest.mark.parametrize("path", PATHS, indirect=True)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=dname)
@pytest.mark.parametrize("T,E,k,H,I", MOE_SHAPES)
def test_fused_moe_matches_reference(T, E, k, H, I, dtype, path):
    """Both paths; H and I that the tiles do not divide (48, 40) and ones they do (128, 64)."""
    dev = default_device()
    torch.manual_seed(T * 100 + E)
    x = torch.randn(T, H, device=dev).to(dtype)
    check_moe(x, *experts(E, H, I, dtype, dev), *routed(T, E, k, dev))


@pytest.mark.parametrize("path", PATHS, indirect=True)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dname)
@pytest.mark.parametrize("T,E,k", [pytest.param(1, 8, 2, id="T1-k2"), pytest.param(1, 4, 1, id="T1-k1"),
                                   pytest.param(3, 8, 2, id="T3-k2")])
def test_fused_moe_add_norm(T, E, k, dtype, path):
    """The experts, the residual add and the next RMSNorm: against the references, and bit for bit what
    fused_moe and then ops.rms_norm give (one token and the sorted path: the slots' sum inside the norm's
    launch; T = 3 on the per-slot path: two launches). Outputs poisoned; the residual updated in place."""
    if dtype == torch.bfloat16 and path == "sorted" and interpreting():
        pytest.skip("the interpreter's bf16 dots are wrong")
    dev = default_device()
    torch.manual_seed(T * 10 + k)
    H, I = 48, 40
    x = torch.randn(T, H, device=dev).to(dtype)
    wgu, wd = experts(E, H, I, dtype, dev)
    weights, ids = routed(T, E, k, dev)
    residual = torch.randn(T, H, device=dev).to(dtype)
    norm_w = (torch.rand(H, device=dev) + 0.5).to(dtype)
    ref_y, ref_h = reference.fused_moe_add_norm(x, wgu, wd, weights, ids, residual.clone(), norm_w, 1e-6)
    into = residual.clone()
    y, h = moe.fused_moe_add_norm(x, wgu, wd, weights, ids, into, norm_w, 1e-6)
    assert h is into
    tol = TOL[dtype] * (2 if interpreting() and dtype == torch.bfloat16 else 1)
    assert rel_err(y, ref_y) < tol and rel_err(h, ref_h) < tol
    out = torch.full_like(x, float("nan"))
    two_y, two_h = rms_norm(fused_moe(x, wgu, wd, weights, ids, out=out), norm_w, 1e-6, residual.clone())
    assert torch.equal(y, two_y) and torch.equal(h, two_h)


def test_fused_moe_add_norm_bad_input():
    dev = default_device()
    T, E, k, H, I = 2, 4, 2, 16, 8
    x = torch.randn(T, H, device=dev)
    wgu, wd = experts(E, H, I, torch.float32, dev)
    weights, ids = routed(T, E, k, dev)
    for residual, norm_w, match in [
            (torch.randn(T + 1, H, device=dev), torch.ones(H, device=dev), "residual must be a \\[2, 16\\]"),
            (torch.randn(T, H, device=dev).half(), torch.ones(H, device=dev), "residual must be .* torch.float32"),
            (torch.randn(T, H, device=dev), torch.ones(H + 1, device=dev), "norm_weight must be a \\[16\\]")]:
        with pytest.raises(ValueError, match=match):
            moe.fused_moe_add_norm(x, wgu, wd, weights, ids, residual, norm_w, 1e-6)
    with pytest.raises(ValueError, match="x must be \\[T, H\\]"):
        moe.fused_moe_add_norm(x[None], wgu, wd, weights, ids, x, torch.ones(H, device=dev), 1e-6)


@pytest.mark.parametrize("T,E,k", [pytest.param(64, 8, 2, id="T64-E8-k2"), pytest.param(132, 4, 1, id="T132-E4-k1")])
def test_fused_moe_sorted_by_default_for_many_slots(T, E, k):
    """Past the threshold: the sorted path, several blocks a busy expert (BLOCK_M 16; 64 at 33 slots an
    expert and more, the largest tile, recorded for the compile check)."""
    dev = default_device()
    H, I, dtype = 48, 40, torch.float16
    assert T * k > moe.PER_SLOT_MAX_SLOTS_PER_EXPERT * E
    x = torch.randn(T, H, device=dev).to(dtype)
    check_moe(x, *experts(E, H, I, dtype, dev), *routed(T, E, k, dev))


@pytest.mark.parametrize("path", [PATHS[0], pytest.param(PATHS[1], marks=pytest.mark.gpu)], indirect=True)
def test_fused_moe_bf16(path):
    """bf16 (the models' dtype): the sorted path's bf16 tl.dot only on a GPU (wrong in the interpreter). The
    interpreter also truncates fp32 -> bf16 where the GPU and torch round to nearest (measured: half of
    randn's values 1 ulp off), which doubles the error of act's three roundings: twice the tolerance there."""
    dev = default_device()
    T, E, k, H, I = 3, 8, 2, 48, 40
    x = torch.randn(T, H, device=dev).bfloat16()
    tol = TOL[torch.bfloat16] * (2 if interpreting() else 1)
    check_moe(x, *experts(E, H, I, torch.bfloat16, dev), *routed(T, E, k, dev), tol=tol)


def fp8_experts(E, H, I, dev):
    """fp8 experts as the models quantize them (a scale per row: ``quantize_rows``) and their fp32 dequantization."""
    w_gate_up, w_down = experts(E, H, I, torch.float32, dev)
    w_gate_up *= torch.rand(E, 2 * I, 1, device=dev) * 4  # rows of different ranges, so that the scales differ
    w_down *= torch.rand(E, H, 1, device=dev) * 4
    (gu8, gus), (d8, ds) = (quantize_rows(w.reshape(-1, w.shape[-1])) for w in (w_gate_up, w_down))
    return gu8.view(E, 2 * I, H), gus.view(E, 2 * I), d8.view(E, H, I), ds.view(E, H)


@pytest.mark.parametrize("path", PATHS, indirect=True)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16,
                                   pytest.param(torch.bfloat16, marks=pytest.mark.gpu)], ids=dname)
@pytest.mark.parametrize("T,E,k,H,I", [pytest.param(*s, id="T{}-E{}-k{}-H{}-I{}".format(*s))
                                       for s in ((1, 8, 2, 48, 40), (3, 8, 2, 48, 40), (17, 4, 1, 128, 64))])
def test_fused_moe_fp8_weights(T, E, k, H, I, dtype, path):
    """Weight-only fp8 experts (float8 weights, a scale per row of each expert): both paths, one token (fp32
    partials a slot) and several, against the reference on the dequantized weights; into a poisoned ``out``;
    with the add and norm after it too."""
    dev = default_device()
    torch.manual_seed(T + E)
    x = torch.randn(T, H, device=dev).to(dtype)
    gu8, gus, d8, ds = fp8_experts(E, H, I, dev)
    weights, ids = routed(T, E, k, dev)
    out = torch.full(x.shape, float("nan"), dtype=dtype, device=dev)
    assert fused_moe(x, gu8, d8, weights, ids, out=out, gate_up_scale=gus, down_scale=ds) is out
    ref = reference.fused_moe(x, gu8, d8, weights, ids, gate_up_scale=gus, down_scale=ds)
    deq = reference.fused_moe(x, gu8.float().mul(gus[..., None]).to(dtype), d8.float().mul(ds[..., None]).to(dtype),
                              weights, ids) if dtype == torch.float32 else ref
    assert torch.equal(ref, deq)  # the reference is the dequantized model
    assert rel_err(out, ref) < TOL[dtype]
    residual = torch.randn(T, H, device=dev).to(dtype)
    norm_w = (torch.rand(H, device=dev) + 0.5).to(dtype)
    ref_y, ref_h = reference.fused_moe_add_norm(x, gu8, d8, weights, ids, residual.clone(), norm_w, 1e-6,
                                                gate_up_scale=gus, down_scale=ds)
    y, h = moe.fused_moe_add_norm(x, gu8, d8, weights, ids, residual.clone(), norm_w, 1e-6, gate_up_scale=gus,
                                  down_scale=ds)
    assert rel_err(y, ref_y) < TOL[dtype] and rel_err(h, ref_h) < TOL[dtype]


def test_fused_moe_fp8_bad_input():
    dev = default_device()
    T, E, k, H, I = 2, 4, 2, 16, 8
    x = torch.randn(T, H, device=dev)
    gu8, gus, d8, ds = fp8_experts(E, H, I, dev)
    wgu, wd = experts(E, H, I, torch.float32, dev)
    weights, ids = routed(T, E, k, dev)
    good = dict(x=x, w_gate_up=gu8, w_down=d8, weights=weights, ids=ids, gate_up_scale=gus, down_scale=ds)
    for change, match in [
            ({"gate_up_scale": None}, r"w_gate_up is float8: gate_up_scale must be a float32 \[4, 16\] tensor"),
            ({"down_scale": ds[:, :8]}, r"down_scale must be a float32 \[4, 16\] tensor .* got torch.float32 \[4, 8\]"),
            ({"down_scale": ds.double()}, "down_scale must be a float32"),
            ({"w_down": wd, "down_scale": None}, "must both be float8 .* or neither"),
            ({"w_gate_up": wgu, "w_down": wd}, "gate_up_scale is for float8 weights"),
            ({"w_gate_up": gu8.to(torch.float8_e5m2), "w_down": d8.to(torch.float8_e5m2)},
             "must have x's dtype .* or be float8_e4m3fn")]:
        with pytest.raises(ValueError, match=match):
            fused_moe(**dict(good, **change))


@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_fused_moe_uneven_routing(path):
    """All tokens on expert 5 (first choice), the second choice among 0..2 only: experts 3, 4, 6, 7 get no
    token; int64 ids as torch.topk gives them, ids and weights strided views, x rows of a wider buffer."""
    dev = default_device()
    T, E, k, H, I = 6, 8, 2, 48, 40
    dtype = torch.float16
    ids = torch.empty(k, T, dtype=torch.int64, device=dev).T                  # [T, k], strides (1, T)
    ids[:, 0] = 5
    ids[:, 1] = torch.randint(0, 3, (T,), device=dev)
    weights = torch.rand(T, 2 * k, device=dev)[:, ::2]                       # [T, k], strides (2k, 2)
    x = torch.randn(T, 2 * H, device=dev).to(dtype)[:, H:]
    check_moe(x, *experts(E, H, I, dtype, dev), weights, ids)


@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_fused_moe_ids_out_of_range_add_nothing(path):
    """Ids -1 and E never address memory: their slots add nothing (the reference's convention), the other
    tokens are unaffected, a token with no valid id gets zeros."""
    dev = default_device()
    T, E, k, H, I = 5, 4, 2, 48, 40
    dtype = torch.float32
    weights, ids = routed(T, E, k, dev)
    ids[1, 0] = -1
    ids[3, 1] = E
    ids[4] = torch.tensor([E + 1000, -(2 ** 31)], device=dev)
    x = torch.randn(T, H, device=dev)
    w_gate_up, w_down = experts(E, H, I, dtype, dev)
    out = fused_moe(x, w_gate_up, w_down, weights, ids)
    assert rel_err(out, reference.fused_moe(x, w_gate_up, w_down, weights, ids)) < TOL[dtype]
    assert torch.equal(out[4], torch.zeros(H, device=dev))
    keep = [0, 2]
    assert rel_err(out[keep], reference.fused_moe(x[keep], w_gate_up, w_down, weights[keep], ids[keep])) < TOL[dtype]


def test_sort_slots_groups_slots_by_expert():
    """The sorted path's slot table: every slot once, in slot order within its expert, each expert's run
    from a block boundary, blocks of one expert, -1 past the end and for the ids out of range."""
    dev = default_device()
    E, block_m = 4, 4
    ids = torch.tensor([[2, 0], [2, 3], [0, 2], [2, 9], [2, -1], [2, 0]], dtype=torch.int32, device=dev)
    sorted_slots, block_expert = moe._sort_slots(ids, E, block_m)
    S = ids.numel()
    assert sorted_slots.shape == ((S // block_m + min(E + 1, S)) * block_m,)
    assert block_expert.tolist() == [0, 2, 2, 3, -1, -1, -1, -1]
    assert sorted_slots.view(-1, block_m).tolist()[:5] == [
        [1, 4, 11, S], [0, 2, 5, 6], [8, 10, S, S], [3, S, S, S], [7, 9, S, S]]
    assert (sorted_slots[5 * block_m:] == S).all()


def test_fused_moe_empty_and_default_out():
    dev = default_device()
    w_gate_up, w_down = experts(4, 48, 40, torch.float32, dev)
    out = fused_moe(torch.randn(0, 48, device=dev), w_gate_up, w_down, torch.empty(0, 2, device=dev),
                    torch.empty(0, 2, dtype=torch.int32, device=dev))
    assert out.shape == (0, 48)
    x = torch.randn(2, 48, device=dev)
    weights, ids = routed(2, 4, 2, dev)
    out = fused_moe(x, w_gate_up, w_down, weights, ids, pdl=False)
    assert out.shape == (2, 48) and out.dtype == torch.float32
    assert rel_err(out, reference.fused_moe(x, w_gate_up, w_down, weights, ids)) < TOL[torch.float32]


def test_fused_moe_bad_input():
    dev = default_device()
    T, E, k, H, I = 3, 4, 2, 16, 8
    x = torch.randn(T, H, device=dev)
    wgu, wd = experts(E, H, I, torch.float32, dev)
    weights, ids = routed(T, E, k, dev)
    good = dict(x=x, w_gate_up=wgu, w_down=wd, weights=weights, ids=ids)
    cases = [
        ({"x": x.tolist()}, "x must be a torch.Tensor"),
        ({"x": x[None]}, "x must be \\[T, H\\]"),
        ({"x": x.to(torch.float64), "w_gate_up": wgu.double(), "w_down": wd.double()}, "x must be float32"),
        ({"w_gate_up": wgu[:, :, :8]}, "w_gate_up must be \\[E, 2I, 16\\]"),
        ({"w_gate_up": wgu[:, :15]}, "w_gate_up must be \\[E, 2I, 16\\]"),
        ({"w_gate_up": wgu[:0], "w_down": wd[:0]}, "at least one expert"),
        ({"w_down": wd[:, :, :4]}, "w_down must be \\[4, 16, 8\\]"),
        ({"w_gate_up": wgu.half()},
         "w_gate_up must have x's dtype torch.float32 or be float8_e4m3fn .*, got torch.float16"),
        ({"w_down": wd.half()}, "w_down must have x's dtype"),
        ({"weights": weights[:2]}, "weights must be \\[3, k\\]"),
        ({"weights": torch.rand(T, E + 1, device=dev), "ids": torch.zeros(T, E + 1, dtype=torch.int32, device=dev)},
         "weights must have 1 to E = 4 columns"),
        ({"weights": weights.half()}, "weights must be float32"),
        ({"ids": ids[:, :1]}, "ids must be \\[3, 2\\] like weights"),
        ({"ids": ids.float()}, "ids must be int32 or int64"),
        ({"w_down": torch.randn(E, I, H, device=dev).transpose(1, 2)}, "w_down needs a contiguous last dimension"),
        ({"x": torch.randn(H, T, device=dev).T}, "x needs a contiguous last dimension"),
        ({"ids": ids.to("meta")}, "ids must be on x's device"),
    ]
    for change, match in cases:
        with pytest.raises(ValueError, match=match):
            fused_moe(**dict(good, **change))
    for out, match in [(torch.empty(T, H, device=dev).half(), "out must be a \\[3, 16\\] torch.float32"),
                       (torch.empty(H, T, device=dev).T, "out needs a contiguous last dimension")]:
        with pytest.raises(ValueError, match=match):
            fused_moe(**good, out=out)


@pytest.mark.skipif(interpreting(), reason="the GPU's compiled kernels at a model's shape")
@pytest.mark.parametrize("path", PATHS, indirect=True)
def test_fused_moe_model_shape(path):
    """Qwen3-30B-A3B's experts (E = 128, k = 8, H = 2048, I = 768) in bf16 at decode and prefill sizes."""
    dev = default_device()
    E, k, H, I = 128, 8, 2048, 768
    w_gate_up, w_down = experts(E, H, I, torch.bfloat16, dev)
    for T in (1, 5, 200):
        x = torch.randn(T, H, device=dev).bfloat16()
        check_moe(x, w_gate_up, w_down, *routed(T, E, k, dev))


@pytest.mark.skipif(interpreting(), reason="CUDA graphs")
@pytest.mark.parametrize("T", [2, 300], ids=["slot-T2", "sorted-T300"])
def test_moe_in_a_cuda_graph(T):
    """The router and the experts captured in a CUDA graph (the sorted path's slot sorting included: nothing
    waits for the device or allocates by a value it computes), replayed on new inputs, equal eager calls."""
    dev = default_device()
    E, k, H, I = 16, 4, 256, 128
    w_gate_up, w_down = experts(E, H, I, torch.bfloat16, dev)
    router = (torch.randn(E, H, device=dev) / H ** 0.5).bfloat16()
    x = torch.randn(T, H, device=dev).bfloat16()

    def layer():
        weights, ids = moe_route(x @ router.T, k, True)
        return fused_moe(x, w_gate_up, w_down, weights, ids)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        layer()  # compile outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = layer()
    for _ in range(2):
        x.copy_(torch.randn(T, H, device=dev))
        out.fill_(float("nan"))
        graph.replay()
        expect = layer()
        assert torch.equal(out, expect)


@pytest.mark.skipif(interpreting(), reason="CUDA graphs")
@pytest.mark.parametrize("T", [1, 300], ids=["slot-T1", "sorted-T300"])
def test_moe_add_norm_in_a_cuda_graph(T):
    """A MoE layer's decode chain captured: the add + norm + router + top-k (tickets reset by every launch),
    the experts (the down kernel's loads before its PDL wait included) and the add + norm after them,
    replayed on new inputs and residuals: equal to eager calls."""
    dev = default_device()
    E, k, H, I = 16, 4, 256, 128
    w_gate_up, w_down = experts(E, H, I, torch.bfloat16, dev)
    router = (torch.randn(E, H, device=dev) / H ** 0.5).bfloat16()
    norm_w = (torch.rand(2, H, device=dev) + 0.5).bfloat16()
    counters = moe.norm_route_counters(T, dev)
    h = torch.randn(T, H, device=dev).bfloat16()
    residual = torch.empty(T, H, device=dev).bfloat16()

    def layer(res):
        x, res, weights, ids = moe.moe_norm_route(h, res, norm_w[0], 1e-6, router, k, True, counters)
        return moe.fused_moe_add_norm(x, w_gate_up, w_down, weights, ids, res, norm_w[1], 1e-6)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        layer(residual.clone())  # compile outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, _ = layer(residual)
    for _ in range(3):
        h.copy_(torch.randn(T, H, device=dev))
        start = torch.randn(T, H, device=dev).bfloat16()
        residual.copy_(start)
        out.fill_(float("nan"))
        graph.replay()
        expect, expect_res = layer(start.clone())
        assert torch.equal(out, expect) and torch.equal(residual, expect_res) and not counters.any()


@pytest.mark.parametrize("T,E,k", [pytest.param(160, 2, 1, id="a80"), pytest.param(256, 1, 1, id="a256")])
def test_fused_moe_large_tiles(T, E, k):
    """The sorted path's prefill tiles (BLOCK_M 128; at 256 slots an expert and more, 128-wide gate/up tiles),
    chosen for 16-bit inputs (fp16 here: the interpreter's bf16 dots are broken)."""
    dev = default_device()
    H, I, dtype = 48, 40, torch.float16
    tiles = moe.moe_tiles(T, k, H, I, E, dtype, dev)
    assert tiles.block_m == 128 and tiles.up_n == (128 if T * k >= 256 * E else 64)
    x = torch.randn(T, H, device=dev).to(dtype)
    check_moe(x, *experts(E, H, I, dtype, dev), *routed(T, E, k, dev))


@pytest.mark.parametrize("tiles", [
    moe.MoeTiles(0, 4, 16, 16, 32, 4, 1, down_per_slot=True),
    moe.MoeTiles(0, 8, 32, 8, 16, 2, 1),
    moe.MoeTiles(16, 32, 16, 32, 16, 4, 2),
], ids=["slot-per-slot-down", "slot-token-down", "sorted"])
def test_fused_moe_given_tiles(tiles):
    """``tiles`` sets the path (block_m 0: per slot) and every tile; a per-slot down sums its fp32 partials."""
    dev = default_device()
    T, E, k, H, I, dtype = 5, 4, 2, 48, 40, torch.float32
    x = torch.randn(T, H, device=dev)
    w_gate_up, w_down = experts(E, H, I, dtype, dev)
    weights, ids = routed(T, E, k, dev)
    ref = reference.fused_moe(x, w_gate_up, w_down, weights, ids)
    out = fused_moe(x, w_gate_up, w_down, weights, ids, tiles=tiles)
    assert rel_err(out, ref) < TOL[dtype]


def test_moe_tiles_errors():
    with pytest.raises(ValueError, match="MoeTiles: up_n must be a power of two, got 12"):
        moe.MoeTiles(0, 12, 16, 16, 32, 4, 1)
    with pytest.raises(ValueError, match=r"MoeTiles: block_m must be 0 \(per-slot path\) or >= 16"):
        moe.MoeTiles(8, 16, 16, 16, 32, 4, 1)
    with pytest.raises(ValueError, match="MoeTiles: num_warps must be a positive int"):
        moe.MoeTiles(0, 16, 16, 16, 32, 0, 1)
    with pytest.raises(ValueError, match="path must be None"):
        moe.moe_tiles(1, 2, 48, 40, 4, torch.float32, torch.device("cpu"), "fast")
    x = torch.randn(2, 48)
    w_gate_up, w_down = experts(4, 48, 40, torch.float32, x.device)
    with pytest.raises(ValueError, match="tiles must be a MoeTiles or None, got tuple"):
        fused_moe(x, w_gate_up, w_down, *routed(2, 4, 2, x.device), tiles=(0, 4))
    with pytest.raises(ValueError, match="path must be None"):
        fused_moe(x, w_gate_up, w_down, *routed(2, 4, 2, x.device), path="fast")


@pytest.mark.parametrize("T,E,k,block_m", [(6, 4, 2, 4), (37, 8, 2, 16), (64, 128, 8, 16), (300, 3, 1, 32)],
                         ids=["T6-E4-k2-m4", "T37-E8-k2-m16", "T64-E128-k8-m16", "T300-E3-k1-m32"])
def test_align_kernel_equals_sort_slots(T, E, k, block_m):
    """The one-program slot sorting (decode batches) writes _sort_slots' table element for element: random ids
    with some out of range (-1, E, large), several chunks of 64 slots."""
    dev = default_device()
    g = torch.Generator(device="cpu").manual_seed(T)
    ids = torch.randint(0, E, (T, k), generator=g, dtype=torch.int32)
    ids.view(-1)[:: 7] = torch.tensor([-1, E, E + 100], dtype=torch.int32).repeat(T * k)[: len(ids.view(-1)[:: 7])]
    ids = ids.to(dev)
    want = moe._sort_slots(ids, E, block_m)
    got = moe._align_slots(ids, E, block_m, pdl_launch(dev, False))
    assert torch.equal(got[1], want[1]), (got[1], want[1])
    assert torch.equal(got[0], want[0])
