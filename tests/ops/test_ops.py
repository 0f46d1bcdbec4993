"""Fused Triton ops (RMSNorm, rope, SiLU-and-mul) against their PyTorch references."""

import pytest
import torch

from tritium import ops
from tritium.attention import write_kv_cache
from tritium.models.rope import rope_cos_sin, rope_inv_freq
from tritium.ops import reference
from tritium.ops import moe
from tritium.ops.rms_norm import sum_rms_norm
from tritium.runtime import default_device

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
DTYPES = [pytest.param(d, id=str(d).replace("torch.", "")) for d in TOL]


def rel_err(out, ref):
    assert not torch.isnan(out).any()
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def head_norms(qk_norm, head_dim, dtype, dev):
    """The ``qk_norm`` keyword of the rope ops: random weights (not all ones) and eps, or nothing."""
    if not qk_norm:
        return {}
    weights = (torch.rand(2, head_dim, device=dev) + 0.5).to(dtype)
    return {"qk_norm": (weights[0], weights[1], 1e-6)}


def qkv_views(T, hq, hkv, head_dim, dtype, dev):
    """A random fused QKV buffer [T, (hq + 2 hkv) * head_dim] and its q, k, v head views, as in the model."""
    qkv = torch.randn(T, (hq + 2 * hkv) * head_dim, dtype=dtype, device=dev)
    q = qkv[:, : hq * head_dim].view(T, hq, head_dim)
    k = qkv[:, hq * head_dim: (hq + hkv) * head_dim].view(T, hkv, head_dim)
    v = qkv[:, (hq + hkv) * head_dim:].view(T, hkv, head_dim)
    return qkv, q, k, v


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hidden", [(1, 64), (17, 576), (5, 1000)], ids=lambda v: str(v))
@pytest.mark.parametrize("with_residual", [False, True], ids=["plain", "residual"])
def test_rms_norm(tokens, hidden, dtype, with_residual):
    dev = default_device()
    x = torch.randn(tokens, hidden, dtype=dtype, device=dev)
    w = torch.randn(hidden, dtype=dtype, device=dev)
    res = torch.randn(tokens, hidden, dtype=dtype, device=dev) if with_residual else None
    ref_y, ref_h = reference.rms_norm(x, w, 1e-5, None if res is None else res.clone())
    y, h = ops.rms_norm(x, w, 1e-5, None if res is None else res.clone())
    assert rel_err(y, ref_y) < TOL[dtype]
    if with_residual:
        assert rel_err(h, ref_h) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,hidden", [(1, 64), (7, 1000)], ids=lambda v: str(v))
@pytest.mark.parametrize("with_residual", [True, False], ids=["residual", "no-residual"])
def test_rms_norm_pre_weight(tokens, hidden, dtype, with_residual):
    """Gemma's output norm, residual add and next norm in one launch: bit for bit the two launches (the first's
    rows stored in the dtype), and within the dtype's tolerance of the reference."""
    dev = default_device()
    x = torch.randn(tokens, hidden, dtype=dtype, device=dev) * 3
    w_pre, w = torch.randn(hidden, dtype=dtype, device=dev), torch.randn(hidden, dtype=dtype, device=dev)
    res = torch.randn(tokens, hidden, dtype=dtype, device=dev) if with_residual else None
    copy = (lambda t: None if t is None else t.clone())
    y, h = ops.rms_norm(x, w, 1e-6, copy(res), pre_weight=w_pre)
    normed, _ = ops.rms_norm(x, w_pre, 1e-6)
    y2, h2 = ops.rms_norm(normed, w, 1e-6, copy(res))
    assert not y.isnan().any() and torch.equal(y, y2) and (h is None or torch.equal(h, h2))
    ref_y, ref_h = reference.rms_norm(x, w, 1e-6, copy(res), pre_weight=w_pre)
    assert rel_err(y, ref_y) < TOL[dtype] and (h is None or rel_err(h, ref_h) < TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,k,hidden", [(1, 8, 64), (5, 3, 1000), (0, 2, 64)], ids=lambda v: str(v))
def test_sum_rms_norm(tokens, k, hidden, dtype):
    """Each row's k fp32 parts summed (in order, rounded once), added to the residual and normed: bit for bit
    the parts' sum rounded and then ops.rms_norm, and within the dtype's tolerance of the reference."""
    dev = default_device()
    parts = torch.randn(tokens * k, hidden, device=dev)
    w = torch.randn(hidden, dtype=dtype, device=dev)
    res = torch.randn(tokens, hidden, dtype=dtype, device=dev)
    x = parts[0::k].clone()
    for j in range(1, k):  # the kernel's order: fp32 adds, each exact IEEE
        x += parts[j::k]
    x = x.to(dtype)
    ref_y, ref_h = reference.rms_norm(x, w, 1e-5, res.clone())
    into = res.clone()
    y, h = sum_rms_norm(parts, k, w, 1e-5, into)
    assert h is into and y.shape == (tokens, hidden) and y.dtype == dtype
    if tokens:
        assert rel_err(y, ref_y) < TOL[dtype] and rel_err(h, ref_h) < TOL[dtype]
    summed = torch.empty_like(res)
    moe._sum_slots(parts, summed, k, {"USE_PDL": False})  # the two launches it replaces (both round as the device does)
    two_y, two_h = ops.rms_norm(summed, w, 1e-5, res.clone())
    assert torch.equal(y, two_y) and torch.equal(h, two_h)
    with pytest.raises(ValueError, match="parts must be a \\[.*float32"):
        sum_rms_norm(parts.to(dtype) if dtype != torch.float32 else parts[:, :-1], k, w, 1e-5, res.clone())



def ROPE_SHAPES(test):
    """dtype x (q heads, kv heads) x head_dim x the query/key head norms (Qwen3) or none, shared by the rope
    tests."""
    test = pytest.mark.parametrize("qk_norm", [False, True], ids=["", "qk_norm"])(test)
    test = pytest.mark.parametrize("head_dim", [64, 80])(test)
    test = pytest.mark.parametrize("heads", [(4, 4), (9, 3), (8, 1)], ids=lambda h: f"H{h[0]}/{h[1]}")(test)
    return pytest.mark.parametrize("dtype", DTYPES)(test)


@ROPE_SHAPES
def test_rope(heads, head_dim, dtype, qk_norm):
    dev = default_device()
    hq, hkv = heads
    T = 13
    inv = rope_inv_freq(head_dim, 10000.0, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32})
    cos_sin = rope_cos_sin(inv, 300).to(dev)
    qkv, q, k, _ = qkv_views(T, hq, hkv, head_dim, dtype, dev)
    positions = torch.randint(0, 300, (T,), device=dev)
    q_ref, k_ref = q.clone(), k.clone()
    norms = head_norms(qk_norm, head_dim, dtype, dev)
    reference.rope(q_ref, k_ref, positions, cos_sin, **norms)
    v_before = qkv[:, (hq + hkv) * head_dim:].clone()
    ops.rope(q, k, positions, cos_sin, **norms)
    assert rel_err(q, q_ref) < TOL[dtype]
    assert rel_err(k, k_ref) < TOL[dtype]
    assert torch.equal(qkv[:, (hq + hkv) * head_dim:], v_before)  # v untouched


@ROPE_SHAPES
def test_rope_write_kv(heads, head_dim, dtype, qk_norm):
    dev = default_device()
    hq, hkv = heads
    T, blocks, block_size = 11, 6, 4
    cos_sin = rope_cos_sin(rope_inv_freq(head_dim, 10000.0), 300).to(dev)
    _, q, k, v = qkv_views(T, hq, hkv, head_dim, dtype, dev)
    positions = torch.randint(0, 300, (T,), device=dev)
    slots = torch.randperm(blocks * block_size, device=dev)[:T]
    slots[[2, 7]] = -1  # skipped tokens (CUDA-graph padding)
    k_cache = torch.randn(blocks, block_size, hkv, head_dim, dtype=dtype, device=dev)
    v_cache = torch.randn_like(k_cache)
    q_ref, k_ref, kc_ref, vc_ref = q.clone(), k.clone(), k_cache.clone(), v_cache.clone()
    norms = head_norms(qk_norm, head_dim, dtype, dev)
    reference.rope_write_kv(q_ref, k_ref, v.clone(), positions, cos_sin, kc_ref, vc_ref, slots, **norms)
    v_before = v.clone()
    ops.rope_write_kv(q, k, v, positions, cos_sin, k_cache, v_cache, slots, **norms)
    assert rel_err(q, q_ref) < TOL[dtype]
    assert rel_err(k, k_ref) < TOL[dtype]
    assert torch.equal(v, v_before)
    written = torch.zeros(blocks * block_size, dtype=torch.bool, device=dev)
    written[slots[slots >= 0]] = True
    for cache, ref in ((k_cache, kc_ref), (v_cache, vc_ref)):
        flat, flat_ref = cache.view(-1, hkv, head_dim), ref.view(-1, hkv, head_dim)
        assert torch.equal(flat[~written], flat_ref[~written])  # other slots untouched
        assert rel_err(flat[written], flat_ref[written]) < TOL[dtype]
    # the cache holds exactly the rotated k the kernel left in place, and v bit for bit
    assert torch.equal(k_cache.view(-1, hkv, head_dim)[slots[slots >= 0]], k[slots >= 0])
    assert torch.equal(v_cache.view(-1, hkv, head_dim)[slots[slots >= 0]], v[slots >= 0])


@pytest.mark.parametrize("scaled", [False, True], ids=["scale1", "scaled"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=lambda v: str(v).replace("torch.", ""))
def test_rope_write_kv_fp8_cache(dtype, scaled):
    """float8_e4m3fn caches: the rotated k (rounded to the model dtype) and v divided by their scales (1, or
    kv_scale's) and saturated to +-448, bit for bit as the reference and as write_kv_cache after rope stores
    them; values past the range included."""
    dev = default_device()
    T, blocks, block_size, hq, hkv, d = 9, 5, 4, 4, 2, 64
    cos_sin = rope_cos_sin(rope_inv_freq(d, 10000.0), 64).to(dev)
    _, q, k, v = qkv_views(T, hq, hkv, d, dtype, dev)
    k.mul_(100)
    v.mul_(300)  # some past 448
    positions = torch.randint(0, 64, (T,), device=dev)
    slots = torch.randperm(blocks * block_size, device=dev)[:T]
    slots[3] = -1
    fp8 = torch.float8_e4m3fn
    k_cache = torch.randn(blocks, block_size, hkv, d, device=dev).to(fp8)
    v_cache = torch.randn_like(k_cache, dtype=torch.float32).to(fp8)
    kc_ref, vc_ref = k_cache.clone(), v_cache.clone()
    q_ref, k_ref = q.clone(), k.clone()
    kv_scale = torch.tensor([0.37, 1.9], device=dev) if scaled else None
    reference.rope_write_kv(q_ref, k_ref, v.clone(), positions, cos_sin, kc_ref, vc_ref, slots, kv_scale=kv_scale)
    ops.rope_write_kv(q, k, v, positions, cos_sin, k_cache, v_cache, slots, kv_scale=kv_scale)
    assert rel_err(k, k_ref) < TOL[dtype]
    live = slots[slots >= 0]
    assert v.abs().max() > 448 * (1.9 if scaled else 1)
    ks, vs = (None, None) if kv_scale is None else (kv_scale[0], kv_scale[1])
    assert torch.equal(v_cache.view(-1, hkv, d)[live].float(), reference.to_cache(v[slots >= 0], fp8, vs).float())
    assert torch.equal(k_cache.view(-1, hkv, d)[live].float(), reference.to_cache(k[slots >= 0], fp8, ks).float())
    if scaled:  # as write_kv_cache stores them with the same scales
        kc_w, vc_w = kc_ref.clone(), vc_ref.clone()
        write_kv_cache(k, v, kc_w, vc_w, slots, k_scale=kv_scale[0:1], v_scale=kv_scale[1:2])
        assert torch.equal(vc_w.view(torch.uint8), v_cache.view(torch.uint8))
    assert torch.equal(v_cache.view(torch.uint8), vc_ref.view(torch.uint8))  # untouched slots too
    if dtype == torch.float32:  # fp32 rope sums alike: the keys' bits too
        assert torch.equal(k_cache.view(torch.uint8), kc_ref.view(torch.uint8))
    with pytest.raises(ValueError, match="both caches alike"):
        ops.rope_write_kv(q, k, v, positions, cos_sin, k_cache, v_cache.float(), slots)
    with pytest.raises(ValueError, match=r"kv_scale must be a contiguous \[2\] float32 tensor"):
        ops.rope_write_kv(q, k, v, positions, cos_sin, k_cache, v_cache, slots, kv_scale=torch.ones(1, device=dev))
    with pytest.raises(ValueError, match="kv_scale applies to float8 caches only"):
        ops.rope_write_kv(q, k, v, positions, cos_sin, k_cache.to(dtype), v_cache.to(dtype), slots,
                          kv_scale=torch.ones(2, device=dev))


def test_rope_write_kv_slot_past_cache_writes_nothing():
    """A slot past the cache (inconsistent metadata) is skipped like a negative one: the pages after the
    cache in the same allocation stay untouched, the other tokens are written."""
    dev = default_device()
    T, blocks, block_size, hkv, d = 6, 3, 4, 2, 64
    cos_sin = rope_cos_sin(rope_inv_freq(d, 10000.0), 16).to(dev)
    _, q, k, v = qkv_views(T, 4, hkv, d, torch.float32, dev)
    positions = torch.arange(T, device=dev)
    buf_k = torch.randn(blocks + 2, block_size, hkv, d, device=dev)  # 2 guard pages after the cache
    buf_v = torch.randn_like(buf_k)
    guard_k, guard_v = buf_k[blocks:].clone(), buf_v[blocks:].clone()
    k_cache, v_cache = buf_k[:blocks], buf_v[:blocks]
    slots = torch.tensor([0, blocks * block_size, 5, blocks * block_size + 3, 2**40, 7], device=dev)
    kc_ref, vc_ref = k_cache.clone(), v_cache.clone()
    reference.rope_write_kv(q.clone(), k.clone(), v.clone(), positions, cos_sin, kc_ref, vc_ref, slots)
    ops.rope_write_kv(q, k, v, positions, cos_sin, k_cache, v_cache, slots)
    assert torch.equal(buf_k[blocks:], guard_k) and torch.equal(buf_v[blocks:], guard_v)
    assert rel_err(k_cache, kc_ref) < 1e-5 and torch.equal(v_cache, vc_ref)


def test_rope_write_kv_rejects_mismatched_cache():
    dev = default_device()
    q = torch.randn(2, 4, 64, device=dev)
    k, v = torch.randn(2, 2, 64, device=dev), torch.randn(2, 2, 64, device=dev)
    cos_sin = rope_cos_sin(rope_inv_freq(64, 10000.0), 8).to(dev)
    positions, slots = torch.arange(2, device=dev), torch.arange(2, device=dev)
    with pytest.raises(ValueError, match="k_cache"):
        ops.rope_write_kv(q, k, v, positions, cos_sin, torch.zeros(4, 4, 3, 64, device=dev),
                          torch.zeros(4, 4, 2, 64, device=dev), slots)
    with pytest.raises(ValueError, match="v_cache"):
        ops.rope_write_kv(q, k, v, positions, cos_sin, torch.zeros(4, 4, 2, 64, device=dev),
                          torch.zeros(4, 4, 2, 64, dtype=torch.float16, device=dev), slots)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,inter", [(1, 64), (7, 1536), (3, 2500)], ids=lambda v: str(v))
def test_silu_and_mul(tokens, inter, dtype):
    x = torch.randn(tokens, 2 * inter, dtype=dtype, device=default_device())
    assert rel_err(ops.silu_and_mul(x), reference.silu_and_mul(x)) < TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens,inter", [(1, 64), (7, 1536), (3, 2500)], ids=lambda v: str(v))
def test_gelu_tanh_and_mul(tokens, inter, dtype):
    """Gemma's GeGLU against torch's tanh GELU, gates spread to +-40 (exp's overflow and underflow ends),
    elementwise; and its fp8 rows as the unfused chain quantizes them."""
    x = torch.randn(tokens, 2 * inter, dtype=dtype, device=default_device())
    x[:, :inter] *= 10
    x[0, :4] = torch.tensor([-40.0, 40.0, 0.0, -3.0], dtype=dtype)
    got, want = ops.gelu_tanh_and_mul(x), reference.gelu_tanh_and_mul(x.float())
    assert not got.isnan().any() and got.dtype == dtype
    torch.testing.assert_close(got.float(), want, rtol=TOL[dtype], atol=TOL[dtype])
    assert rel_err(got, reference.gelu_tanh_and_mul(x)) < TOL[dtype]
    q = ops.gelu_tanh_and_mul(x, quantize=True)
    ref = reference.gelu_tanh_and_mul(x)
    assert q.data.shape == (tokens, inter) and torch.equal(q.scale.isfinite(), torch.ones_like(q.scale, dtype=bool))
    deq = q.data.float() * q.scale[:, None]
    assert rel_err(deq, ref) < 0.07  # e4m3's 3 mantissa bits
    with pytest.raises(ValueError, match=r"x must be \[T, 2I\]"):
        ops.gelu_tanh_and_mul(x[:, :-1])


@pytest.mark.parametrize("rows, vocab, block_size, dtype, window", [
    (1, 300, 16, torch.float32, False), (4, 9000, 16, torch.float32, False), (6, 5000, 32, torch.bfloat16, False),
    (5, 3000, 16, torch.float32, True)],
    ids=lambda v: str(v).replace("torch.", ""))
def test_greedy_advance(rows, vocab, block_size, dtype, window):
    """Argmax (first maximum on ties, NaN wins, all-negative rows) and the next step's inputs: a position
    that crosses into a new page, a padding row (slot -1) left alone, a row that sampled its last token
    and a row at the end of its block table stop. Launched twice: the scratch is back to its initial
    state after each launch. ``window``: the window pool's slots move with their own table."""
    dev = default_device()
    g = torch.Generator().manual_seed(rows * vocab)
    max_blocks, hist_rows = 6, 8
    pos = torch.randint(0, max_blocks * block_size - 2, (rows,), generator=g)
    pos[0] = block_size - 1  # the next position starts page 1
    slots = torch.randint(0, 1000, (rows,), generator=g)
    if rows > 1:
        slots[-1] = -1  # padding
        pos[-2 if rows > 2 else 0] = max_blocks * block_size - 1  # no column for the next position
    stop = pos + 1 + torch.randint(1, 4, (rows,), generator=g)  # at least one more step for every row ...
    if rows > 2:
        stop[1] = pos[1] + 1  # ... but row 1, which samples its last token now
    state = {"ids": torch.randint(0, vocab, (rows,), generator=g), "pos": pos, "seq_lens": (pos + 1).to(torch.int32),
             "slots": slots}
    block_table = torch.randperm(64, generator=g)[:rows * max_blocks].view(rows, max_blocks).to(torch.int32)
    window_table = None
    if window:
        state["wslots"] = torch.where(slots >= 0, torch.randint(0, 500, (rows,), generator=g), -1)
        window_table = torch.randperm(40, generator=g)[:rows * max_blocks].view(rows, max_blocks).to(torch.int32)
    logits = torch.randn(rows, vocab, generator=g).to(dtype)
    logits[0, 3] = logits[0, vocab - 2] = 60.0  # tie: the first one
    if rows > 2:
        logits[1] = -torch.rand(vocab, generator=g).to(dtype) - 1.0
        logits[2, vocab // 2] = float("nan")
    scratch = ops.greedy_scratch(rows + 2, dev)
    initial = scratch.clone()
    got = {k: v.clone().to(dev) for k, v in state.items()}
    got_hist = torch.full((hist_rows, rows), -7, dtype=torch.int64, device=dev)
    want = {k: v.clone() for k, v in state.items()}
    want_hist = torch.full((hist_rows, rows), -7, dtype=torch.int64)
    first = {}
    for launch in range(2):
        got_hist.fill_(-7)
        want_hist.fill_(-7)
        ops.greedy_advance(logits.to(dev), got_hist, got["ids"], got["pos"], got["seq_lens"], got["slots"],
                           stop.to(dev), block_table.to(dev), block_size, scratch, got.get("wslots"),
                           None if window_table is None else window_table.to(dev))
        reference.greedy_advance(logits, want_hist, want["ids"], want["pos"], want["seq_lens"], want["slots"],
                                 stop, block_table, block_size, None, want.get("wslots"), window_table)
        for k in want:
            assert torch.equal(got[k].cpu(), want[k]), k
        assert torch.equal(got_hist.cpu(), want_hist)
        assert torch.equal(scratch, initial)
        if launch == 0:
            first = {k: v.clone() for k, v in want.items()}
            first["hist"] = want_hist.clone()
    tok = torch.argmax(logits.float(), -1)
    assert first["hist"][block_size % hist_rows, 0] == 3 and first["ids"][0] == 3
    assert first["slots"][0] == block_table[0, 1] * block_size  # first slot of the new page
    if window:
        assert first["wslots"][0] == window_table[0, 1] * block_size
        assert first["wslots"][-1] == -1 and first["wslots"][1] == -1  # padding; a row that stopped
        live = [r for r in range(rows) if first["slots"][r] >= 0]
        assert all(first["wslots"][r] == window_table[r, first["pos"][r] // block_size] * block_size
                   + first["pos"][r] % block_size for r in live) and len(live) >= 2
    if rows > 2:
        assert first["hist"][(state["pos"][2] + 1) % hist_rows, 2] == vocab // 2
    if rows > 2:  # row 1's last token is in the ring; it stopped
        assert first["hist"][(state["pos"][1] + 1) % hist_rows, 1] == tok[1]
        assert first["slots"][1] == -1 and first["pos"][1] == state["pos"][1]
    if rows > 1:
        assert first["slots"][-1] == -1 and first["pos"][-1] == state["pos"][-1]  # padding untouched
        assert first["ids"][-1] == state["ids"][-1]
        stopped = -2 if rows > 2 else 0
        assert first["slots"][stopped] == -1 and first["pos"][stopped] == state["pos"][stopped]


def test_rope_rejects_bad_head_norms():
    dev = default_device()
    _, q, k, _ = qkv_views(2, 4, 2, 64, torch.float32, dev)
    cos_sin = rope_cos_sin(rope_inv_freq(64, 10000.0), 8).to(dev)
    positions = torch.arange(2, device=dev)
    good = torch.ones(64, device=dev)
    with pytest.raises(ValueError, match=r"q_norm must be a contiguous \[64\] tensor"):
        ops.rope(q, k, positions, cos_sin, qk_norm=(torch.ones(32, device=dev), good, 1e-6))
    with pytest.raises(ValueError, match="k_norm"):
        ops.rope(q, k, positions, cos_sin, qk_norm=(good, torch.ones(128, device=dev)[::2], 1e-6))
