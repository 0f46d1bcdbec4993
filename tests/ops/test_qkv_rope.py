"""The QKV GEMV with rope and the KV-cache write in its epilogue, against the GEMV then rope_write_kv
(bit for bit where the roundings match) and the fp64/fp32 references."""

import pytest
import torch

from tritium import ops
from tritium.models.rope import rope_cos_sin, rope_inv_freq
from tritium.ops import reference
from tritium.ops.gemv import GemvConfig, gemv
from tritium.ops.qkv_rope import qkv_rope_write_kv, supports
from tritium.runtime import default_device, interpreting

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
DTYPES = [pytest.param(d, id=str(d).replace("torch.", "")) for d in TOL]


def _case(m, hq, hkv, d, k, dtype, bias, gen):
    dev = default_device()
    n = (hq + 2 * hkv) * d
    x = torch.randn(m, k, generator=gen).to(dtype).to(dev)
    w = (torch.randn(n, k, generator=gen) / k ** 0.5).to(dtype).to(dev)
    b = torch.randn(n, generator=gen).to(dtype).to(dev) if bias else None
    cos_sin = rope_cos_sin(rope_inv_freq(d, 10000.0, None, None), 64, 1.0).to(dev)
    positions = torch.randint(0, 64, (m,), generator=gen).to(dev)
    blocks, bs = 6, 4
    k_cache = torch.randn(blocks, bs, hkv, d, generator=gen).to(dtype).to(dev)
    v_cache = torch.randn(blocks, bs, hkv, d, generator=gen).to(dtype).to(dev)
    slots = torch.randperm(blocks * bs, generator=gen)[:m].to(dev)
    if m > 1:
        slots[1] = -1  # skipped: nothing written for that row
    if m > 2:
        slots[2] = blocks * bs  # past the cache: skipped
    return x, w, b, positions, cos_sin, k_cache, v_cache, slots


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,hq,hkv,d,k,bias", [(1, 4, 2, 64, 256, False), (4, 2, 1, 128, 200, True),
                                               (3, 3, 3, 64, 96, True)], ids=str)
def test_qkv_rope_matches_gemv_then_rope_write_kv(m, hq, hkv, d, k, dtype, bias):
    gen = torch.Generator().manual_seed(m * 7 + d + k)
    x, w, b, pos, cos_sin, kc, vc, slots = _case(m, hq, hkv, d, k, dtype, bias, gen)
    kc2, vc2 = kc.clone(), vc.clone()
    kc_ref, vc_ref = kc.clone(), vc.clone()
    configs = [GemvConfig(8, 128, 4), GemvConfig(16, 256, 4, 3), GemvConfig(16, 128, 4, flat=True),
               GemvConfig(8, 256, 4, 3, flat=True)] + ([GemvConfig(4, 64, 4)] if k < 128 else [])
    if dtype != torch.float32 and interpreting():
        # 16-bit inputs change the loads and the epilogue's roundings, not the tiling: one config of each
        # kernel (plain, flat) under the interpreter (CI time); every config on a GPU
        configs = [configs[0], configs[2]]
    for config in configs:
        kc.copy_(kc2)
        vc.copy_(vc2)
        out = qkv_rope_write_kv(x, w, b, pos, cos_sin, kc, vc, slots, num_q_heads=hq, num_kv_heads=hkv, config=config)
        # unfused: the GEMV, then rope + KV write on views of its output
        unf = gemv(x, w, b, config=config)
        kc_u, vc_u = kc2.clone(), vc2.clone()
        q3, k3, v3 = (unf[:, :hq * d].view(m, hq, d), unf[:, hq * d:(hq + hkv) * d].view(m, hkv, d),
                      unf[:, (hq + hkv) * d:].view(m, hkv, d))
        ops.rope_write_kv(q3, k3, v3, pos, cos_sin, kc_u, vc_u, slots)
        if dtype == torch.bfloat16 and interpreting():  # fp32 -> bf16 rounds towards zero here: one ulp
            for a, e in ((out, unf), (kc, kc_u), (vc, vc_u)):
                torch.testing.assert_close(a, e, rtol=2 ** -6, atol=2 ** -6)
        elif dtype == torch.float32 and not interpreting():
            # fp32 on a GPU: the rotation's multiply-adds may contract into FMAs differently in the two kernels
            # (one ulp; measured on the H100 for the flat 8x256 config), the products themselves bit for bit
            assert torch.equal(out[:, (hq + hkv) * d:], unf[:, (hq + hkv) * d:]) and torch.equal(vc, vc_u), config
            for a, e in ((out, unf), (kc, kc_u)):
                torch.testing.assert_close(a, e, rtol=2 ** -21, atol=2 ** -21)
        else:
            assert torch.equal(out, unf) and torch.equal(kc, kc_u) and torch.equal(vc, vc_u), config
    # the references: fp64 product, then the torch rope + write
    ref = reference.linear(x, w, b)
    q3, k3, v3 = (ref[:, :hq * d].view(m, hq, d), ref[:, hq * d:(hq + hkv) * d].view(m, hkv, d),
                  ref[:, (hq + hkv) * d:].view(m, hkv, d))
    reference.rope_write_kv(q3, k3, v3, pos, cos_sin, kc_ref, vc_ref, slots)
    for a, e in ((out, ref), (kc, kc_ref), (vc, vc_ref)):
        assert not a.isnan().any()
        assert ((a.double() - e.double()).norm() / e.double().norm()).item() < TOL[dtype]
    if m > 2:  # rows with a skipped slot left the caches alone there
        assert torch.equal(kc.view(-1, hkv, d)[slots[0]], out[0, hq * d:(hq + hkv) * d].view(hkv, d))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", [GemvConfig(8, 128, 4), GemvConfig(16, 128, 4, flat=True)], ids=str)
@pytest.mark.parametrize("m", [1, 3])
def test_qkv_rope_addend(m, config, dtype):
    """A per-row addend (a LoRA update) joins the product before rope and the cache write: the same bits as the
    GEMV with it then rope_write_kv, and the fp64 reference within tolerance."""
    gen = torch.Generator().manual_seed(m + 31)
    hq, hkv, d, k = 2, 1, 64, 192
    x, w, b, pos, cos_sin, kc, vc, slots = _case(m, hq, hkv, d, k, dtype, True, gen)
    n = w.shape[0]
    add = (torch.randn(m, n + 4, generator=gen) * 0.5).to(x.device)[:, 4:]
    kc_u, vc_u, kc_ref, vc_ref = kc.clone(), vc.clone(), kc.clone(), vc.clone()
    out = qkv_rope_write_kv(x, w, b, pos, cos_sin, kc, vc, slots, num_q_heads=hq, num_kv_heads=hkv, config=config,
                            addend=add)
    unf = gemv(x, w, b, config=config, addend=add)
    ref = reference.linear(x, w, b, addend=add)
    for qkv, kcache, vcache, rope in ((unf, kc_u, vc_u, ops.rope_write_kv), (ref, kc_ref, vc_ref,
                                                                            reference.rope_write_kv)):
        rope(qkv[:, :hq * d].view(m, hq, d), qkv[:, hq * d:(hq + hkv) * d].view(m, hkv, d),
             qkv[:, (hq + hkv) * d:].view(m, hkv, d), pos, cos_sin, kcache, vcache, slots)
    if dtype == torch.float32 and not interpreting():  # FMA contraction may differ by an ulp (see above)
        for a, e in ((out, unf), (kc, kc_u), (vc, vc_u)):
            torch.testing.assert_close(a, e, rtol=2 ** -21, atol=2 ** -21)
    elif dtype == torch.bfloat16 and interpreting():
        for a, e in ((out, unf), (kc, kc_u), (vc, vc_u)):
            torch.testing.assert_close(a, e, rtol=2 ** -6, atol=2 ** -6)
    else:
        assert torch.equal(out, unf) and torch.equal(kc, kc_u) and torch.equal(vc, vc_u)
    for a, e in ((out, ref), (kc, kc_ref), (vc, vc_ref)):
        assert not a.isnan().any()
        assert ((a.double() - e.double()).norm() / e.double().norm()).item() < TOL[dtype]
    with pytest.raises(ValueError, match="addend must be"):
        qkv_rope_write_kv(x, w, b, pos, cos_sin, kc, vc, slots, num_q_heads=hq, num_kv_heads=hkv, config=config,
                          addend=add[:, :-1])


@pytest.mark.parametrize("scaled", [False, True], ids=["scale1", "scaled"])
@pytest.mark.parametrize("config", [GemvConfig(8, 128, 4), GemvConfig(16, 128, 4, flat=True)], ids=str)
def test_qkv_rope_fp8_cache(config, scaled):
    """float8_e4m3fn caches: the epilogue stores what gemv then rope_write_kv store (the products rounded to
    the model dtype, rotated, divided by their scales, saturated to +-448), bit for bit, values past the
    range included."""
    gen = torch.Generator().manual_seed(5)
    m, hq, hkv, d, k = 3, 4, 2, 64, 256
    x, w, b, pos, cos_sin, _, _, slots = _case(m, hq, hkv, d, k, torch.float32, True, gen)
    w = w * 300  # some keys and values past 448
    fp8 = torch.float8_e4m3fn
    kc = torch.randn(6, 4, hkv, d, generator=gen).to(fp8).to(x.device)
    vc = torch.randn(6, 4, hkv, d, generator=gen).to(fp8).to(x.device)
    kc_u, vc_u = kc.clone(), vc.clone()
    kv_scale = torch.tensor([0.37, 1.9], device=x.device) if scaled else None
    out = qkv_rope_write_kv(x, w, b, pos, cos_sin, kc, vc, slots, num_q_heads=hq, num_kv_heads=hkv, config=config,
                            kv_scale=kv_scale)
    unf = gemv(x, w, b, config=config)
    q3, k3, v3 = (unf[:, :hq * d].view(m, hq, d), unf[:, hq * d:(hq + hkv) * d].view(m, hkv, d),
                  unf[:, (hq + hkv) * d:].view(m, hkv, d))
    ops.rope_write_kv(q3, k3, v3, pos, cos_sin, kc_u, vc_u, slots, kv_scale=kv_scale)
    assert v3.abs().max() > 448 * 1.9
    assert torch.equal(out[:, (hq + hkv) * d:], unf[:, (hq + hkv) * d:])
    assert torch.equal(vc.view(torch.uint8), vc_u.view(torch.uint8))
    if interpreting():  # (on a GPU the rotation may contract into FMAs differently: one fp32 ulp, then fp8)
        assert torch.equal(kc.view(torch.uint8), kc_u.view(torch.uint8))
    else:
        torch.testing.assert_close(kc.float(), kc_u.float(), rtol=2 ** -3, atol=2 ** -9)
    with pytest.raises(ValueError, match="both caches alike"):
        qkv_rope_write_kv(x, w, b, pos, cos_sin, kc, vc.float(), slots, num_q_heads=hq, num_kv_heads=hkv)


def test_qkv_rope_bad_input():
    gen = torch.Generator().manual_seed(0)
    x, w, b, pos, cos_sin, kc, vc, slots = _case(2, 4, 2, 64, 128, torch.float32, False, gen)
    kw = dict(num_q_heads=4, num_kv_heads=2)
    assert supports(GemvConfig(8, 128, 4), 64) and not supports(GemvConfig(4, 128, 4), 66)
    assert not supports(GemvConfig(128, 64, 4), 64)
    cases = [
        ((x, w, b, pos, cos_sin, kc, vc, slots), dict(num_q_heads=3, num_kv_heads=2), "not \\(num_q_heads 3"),
        ((x.repeat(3, 1), w, b, pos, cos_sin, kc, vc, slots), kw, "1 to 4 rows"),
        ((x, w, b, pos[:1], cos_sin, kc, vc, slots), kw, "one entry per row"),
        ((x, w, b, pos, cos_sin.double(), kc, vc, slots), kw, "float32 table"),
        ((x, w, b, pos, cos_sin, kc[..., :32], vc, slots), kw, "k_cache must be"),
        ((x, w, b, pos, cos_sin, kc, vc.half(), slots), kw, "v_cache must be"),
        ((x, w, torch.zeros(3), pos, cos_sin, kc, vc, slots), kw, "bias must be"),
    ]
    for args, kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            qkv_rope_write_kv(*args, **kwargs)
    with pytest.raises(ValueError, match="block_n / 2 must divide head_dim / 2"):
        qkv_rope_write_kv(x, w, b, pos, cos_sin, kc, vc, slots, config=GemvConfig(128, 64, 4), **kw)


@pytest.mark.parametrize("config", [GemvConfig(8, 128, 4), GemvConfig(16, 128, 4, flat=True)], ids=str)
def test_qkv_rope_fp8_weight(config):
    """An fp8 QKV weight with its row scales: the same as the fused kernel on the dequantized weight (fp32:
    the rows' scales applied before the epilogue, as the product of the dequantized row)."""
    from tritium.ops.quant import dequantize, quantize_rows
    gen = torch.Generator().manual_seed(11)
    m, hq, hkv, d, k = 3, 2, 1, 64, 160
    x, w, b, pos, cos_sin, kc, vc, slots = _case(m, hq, hkv, d, k, torch.float32, True, gen)
    w8, scale = quantize_rows(w * torch.logspace(-1, 1, w.shape[0], device=w.device)[:, None])
    kc_ref, vc_ref = kc.clone(), vc.clone()
    kc.fill_(float("nan"))
    vc.copy_(kc)
    kc_ref.copy_(kc)
    vc_ref.copy_(kc)
    out = qkv_rope_write_kv(x, w8, b, pos, cos_sin, kc, vc, slots, num_q_heads=hq, num_kv_heads=hkv,
                            config=config, scale=scale)
    ref = qkv_rope_write_kv(x, dequantize(w8, scale), b, pos, cos_sin, kc_ref, vc_ref, slots, num_q_heads=hq,
                            num_kv_heads=hkv, config=config)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kc, kc_ref, rtol=1e-5, atol=1e-5, equal_nan=True)
    torch.testing.assert_close(vc, vc_ref, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert (~torch.isnan(kc)).sum() == (~torch.isnan(kc_ref)).sum() > 0
