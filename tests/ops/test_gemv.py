"""Triton GEMV (decode projections) against the fp64 reference."""

import pytest
import torch

from tritium.ops.gemv import DEFAULT_CONFIG, MAX_M, GemvConfig, gemv
from tritium.ops import reference
from tritium.runtime import default_device, interpreting

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
DTYPES = [pytest.param(d, id=str(d).replace("torch.", "")) for d in TOL]
CONFIGS = [DEFAULT_CONFIG, GemvConfig(4, 1024, 4), GemvConfig(16, 256, 4, 3), GemvConfig(2, 1024, 4, 3),
           GemvConfig(4, 512, 4, flat=True), GemvConfig(1, 1024, 4, flat=True)]
FLAT = GemvConfig(8, 256, 4, flat=True)  # the kernel with one accumulator a row of x


def rel_err(out, ref):
    assert not torch.isnan(out).any() and not torch.isinf(out).any()
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 2, 3, 4])
@pytest.mark.parametrize("n,k", [(64, 512), (37, 100), (8, 1536), (130, 1030)], ids=lambda v: str(v))
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_gemv_matches_reference(m, n, k, dtype, with_bias):
    dev = default_device()
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    b = torch.randn(n, dtype=dtype, device=dev) if with_bias else None
    out = gemv(x, w, b)
    assert out.shape == (m, n) and out.dtype == dtype
    assert rel_err(out, reference.linear(x, w, b)) < TOL[dtype]


@pytest.mark.parametrize("config", CONFIGS, ids=str)
def test_gemv_configs_and_strided_rows(config):
    """Every candidate shape of program, x a row-strided view (rows of a wider buffer)."""
    dev = default_device()
    buf = torch.randn(3, 2 * 1024, dtype=torch.float16, device=dev)
    x = buf[:, 512:1536]
    w = torch.randn(72, 1024, dtype=torch.float16, device=dev) / 32
    out = gemv(x, w, config=config)
    assert rel_err(out, reference.linear(x, w)) < TOL[torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 2, 3, 4])
@pytest.mark.parametrize("n,k", [(64, 512), (37, 100), (40, 1030)], ids=str)
def test_flat_kernel_matches_reference(m, n, k, dtype):
    """The flat kernel on every row count (3: a masked fourth row), ragged N and K, with a bias: the fp64
    reference within tolerance, and the 3-D kernel's result to within fp32 summation order."""
    dev = default_device()
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    b = torch.randn(n, dtype=dtype, device=dev)
    for config in (FLAT, GemvConfig(2, 1024, 4, 3, flat=True)):
        out = gemv(x, w, b, config=config)
        assert out.shape == (m, n) and out.dtype == dtype
        assert rel_err(out, reference.linear(x, w, b)) < TOL[dtype], config
        assert rel_err(out, gemv(x, w, b, config=GemvConfig(config.block_n, config.block_k, 4))) < TOL[dtype]


def test_gemv_bad_input():
    dev = default_device()
    x = torch.randn(2, 64, device=dev)
    w = torch.randn(16, 64, device=dev)
    cases = [
        ((torch.randn(0, 64, device=dev), w), "rows"),
        ((torch.randn(MAX_M + 1, 64, device=dev), w), "rows"),
        ((x, torch.randn(16, 32, device=dev)), "weight must be"),
        ((x[:, ::2], torch.randn(16, 32, device=dev)), "contiguous"),
        ((x, w.half()), "dtype"),
        ((x.view(2, 8, 8), w), "x must be"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            gemv(*args)
    with pytest.raises(ValueError, match="bias"):
        gemv(x, w, torch.randn(15, device=dev))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(1, 64, 512), (3, 37, 100), (4, 40, 1030)], ids=str)
@pytest.mark.parametrize("config", [DEFAULT_CONFIG, FLAT], ids=str)
def test_gated_gemv_fuses_silu_and_mul(m, n, k, dtype, config):
    """gated=True on x = [gate | up] equals SiLU-and-mul then the GEMV, bit for bit (same roundings, same
    sums), and the fp64 reference within tolerance."""
    from tritium import ops

    dev = default_device()
    x = torch.randn(m, 2 * k, dtype=dtype, device=dev) * 2
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    fused = gemv(x, w, gated=True, config=config)
    assert fused.shape == (m, n) and fused.dtype == dtype
    assert torch.equal(fused, gemv(ops.silu_and_mul(x), w, config=config))
    assert rel_err(fused, reference.linear(reference.silu_and_mul(x), w)) < TOL[dtype]
    with pytest.raises(ValueError, match="gated: x must be \\[M, 2K\\] \\(gate then up\\), got an odd width 7"):
        gemv(x[:, :7], w, gated=True)
    with pytest.raises(ValueError, match=f"weight must be \\[N, {k}\\]"):
        gemv(x, torch.randn(n, 2 * k, dtype=dtype, device=dev), gated=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,i,k,with_bias", [(1, 64, 512, False), (3, 37, 100, True), (4, 20, 1030, False),
                                              (2, 65, 1536, True)], ids=str)
@pytest.mark.parametrize("config", [DEFAULT_CONFIG, FLAT, GemvConfig(2, 1024, 4, 3, flat=True)], ids=str)
def test_swiglu_gemv_fuses_silu_and_mul(m, i, k, dtype, config, with_bias):
    """swiglu=True on W = [gate; up] equals the GEMV then SiLU-and-mul, bit for bit (each program pairs gate
    row j with up row I + j; the same sums and roundings), and the fp64 reference within tolerance; I
    that the program's pairs do not divide (masked tail) included."""
    from tritium import ops

    dev = default_device()
    x = torch.randn(m, k, dtype=dtype, device=dev) * 2
    w = torch.randn(2 * i, k, dtype=dtype, device=dev) / k ** 0.5
    b = torch.randn(2 * i, dtype=dtype, device=dev) if with_bias else None
    fused = gemv(x, w, b, swiglu=True, config=config)
    assert fused.shape == (m, i) and fused.dtype == dtype
    assert torch.equal(fused, ops.silu_and_mul(gemv(x, w, b, config=config)))
    # the product's last-bit difference from the fp64 one passes through SiLU and the multiply: twice the slack
    assert rel_err(fused, reference.silu_and_mul(reference.linear(x, w, b))) < 2 * TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 3, 4])
@pytest.mark.parametrize("config", [DEFAULT_CONFIG, FLAT], ids=str)
@pytest.mark.parametrize("epilogue", ["plain", "swiglu", "residual"])
def test_gemv_addend(m, dtype, config, epilogue):
    """A per-row addend (fp32, a row-strided view) joins the product with the bias, before the rounding and the
    epilogue: the fp64 reference within tolerance; at one row, in x's dtype, the same bits as a bias of that row."""
    dev = default_device()
    n, k = 72, 300
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    b = torch.randn(n, dtype=dtype, device=dev)
    add = torch.randn(m, n + 8, device=dev)[:, 8:]
    want = reference.linear(x, w, b, addend=add)
    if epilogue == "swiglu":
        out = gemv(x, w, b, config=config, swiglu=True, addend=add)
        want = reference.silu_and_mul(want)
    elif epilogue == "residual":
        residual = torch.randn(m, n, dtype=dtype, device=dev)
        want = (want.double() + residual.double()).to(dtype)
        out = gemv(x, w, b, config=config, residual=residual, addend=add)
    else:
        out = gemv(x, w, b, config=config, addend=add)
    assert rel_err(out, want) < 2 * TOL[dtype]
    if m == 1:
        one = add.to(dtype)
        assert torch.equal(gemv(x, w, config=config, addend=one), gemv(x, w, one[0].contiguous(), config=config))
    with pytest.raises(ValueError, match=f"addend must be a \\[{m}, {n}\\]"):
        gemv(x, w, config=config, addend=add.T)
    with pytest.raises(ValueError, match="addend must be"):
        gemv(x, w, config=config, addend=add.long())


def test_swiglu_gemv_bad_input():
    dev = default_device()
    x = torch.randn(2, 64, device=dev)
    with pytest.raises(ValueError, match="swiglu: weight must be \\[gate; up\\] with an even row count, got 15"):
        gemv(x, torch.randn(15, 64, device=dev), swiglu=True)
    with pytest.raises(ValueError, match="swiglu: config.block_n must be even"):
        gemv(x, torch.randn(16, 64, device=dev), swiglu=True, config=GemvConfig(1, 64, 4))
    with pytest.raises(ValueError, match="swiglu=True does not combine with gated=True or residual"):
        gemv(x, torch.randn(16, 64, device=dev), swiglu=True, residual=torch.zeros(2, 16, device=dev))
    with pytest.raises(ValueError, match="swiglu=True does not combine"):
        gemv(torch.randn(2, 128, device=dev), torch.randn(16, 64, device=dev), swiglu=True, gated=True)


@pytest.mark.parametrize("dtype", DTYPES)
# the longest row (K = 1536, three K blocks of the widest configs) without bias only: the bias is added in
# the epilogue, which the other shapes check (CI time: ~10 s a case under the interpreter)
@pytest.mark.parametrize("m,n,k,with_bias", [(m, n, k, b) for m, n, k in ((1, 64, 512), (3, 37, 100), (4, 40, 1030))
                                             for b in (False, True)] + [(2, 130, 1536, False)], ids=str)
def test_norm_gemv_matches_reference(m, n, k, dtype, with_bias):
    """norm_weight: RMSNorm(h) @ W^T in one kernel, against the fp64 reference (normed row never rounded)
    and, within the same tolerance, the unfused RMSNorm then GEMV."""
    from tritium import ops

    dev = default_device()
    h = torch.randn(m, k, dtype=dtype, device=dev) * 3
    h[0] *= 40  # rows of very different scale: each row gets its own 1 / rms
    nw = (torch.rand(k, device=dev) + 0.5).to(dtype)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    b = torch.randn(n, dtype=dtype, device=dev) if with_bias else None
    for config in CONFIGS:
        fused = gemv(h, w, b, norm_weight=nw, eps=1e-5, config=config)
        assert fused.shape == (m, n) and fused.dtype == dtype
        assert rel_err(fused, reference.rms_norm_linear(h, nw, 1e-5, w, b)) < TOL[dtype]
    unfused = gemv(ops.rms_norm(h, nw, 1e-5)[0], w, b)
    assert rel_err(fused, unfused.double()) < 2 * TOL[dtype]
    # the norm's weight folded into W's columns instead: no norm_weight
    folded = (w.double() * nw.double()).to(dtype)
    out = gemv(h, folded, b, eps=1e-5)
    assert rel_err(out, reference.rms_norm_linear(h, None, 1e-5, folded, b)) < TOL[dtype]
    assert rel_err(out, reference.rms_norm_linear(h, nw, 1e-5, w, b)) < 2 * TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,k", [(1, 64, 512), (3, 37, 100), (4, 40, 1030)], ids=str)
@pytest.mark.parametrize("gated", [False, True], ids=["plain", "gated"])
@pytest.mark.parametrize("config", [DEFAULT_CONFIG, FLAT], ids=str)
def test_residual_gemv_adds_in_place(m, n, k, dtype, gated, config):
    """residual: residual += x @ W^T in place, bit for bit the unfused GEMV then add (the product rounded
    first), and the reference within tolerance; other rows of the residual's buffer untouched. (The
    interpreter rounds fp32 -> bf16 towards zero where torch rounds to nearest: one bf16 ulp there.)"""
    dev = default_device()
    x = torch.randn(m, 2 * k if gated else k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    buf = torch.randn(m + 2, n, dtype=dtype, device=dev)
    residual = buf[1:m + 1]
    before = buf.clone()
    expected = gemv(x, w, gated=gated, config=config) + residual
    out = gemv(x, w, gated=gated, residual=residual, config=config)
    assert out.data_ptr() == residual.data_ptr()
    if dtype == torch.bfloat16 and interpreting():
        torch.testing.assert_close(residual, expected, rtol=2 ** -7, atol=0)
    else:
        assert torch.equal(residual, expected)
    assert torch.equal(buf[0], before[0]) and torch.equal(buf[m + 1], before[m + 1])
    prod_in = reference.silu_and_mul(x) if gated else x
    assert rel_err(residual, reference.linear_residual(prod_in, w, before[1:m + 1])) < TOL[dtype]


def test_norm_and_residual_bad_input():
    dev = default_device()
    x = torch.randn(2, 64, device=dev)
    w = torch.randn(16, 64, device=dev)
    nw = torch.ones(64, device=dev)
    cases = [
        (dict(norm_weight=torch.ones(63, device=dev), eps=1e-5), "norm_weight must be a contiguous \\[64\\]"),
        (dict(norm_weight=nw.half(), eps=1e-5), "norm_weight must be"),
        (dict(norm_weight=nw), "norm_weight needs eps"),
        (dict(norm_weight=nw, eps=0.0), "eps must be a number > 0"),
        (dict(eps=True), "eps must be a number > 0"),
        (dict(residual=torch.zeros(2, 15, device=dev)), "residual must be a \\[2, 16\\]"),
        (dict(residual=torch.zeros(2, 16, device=dev).half()), "residual must be"),
        (dict(residual=torch.zeros(16, 2, device=dev).t()), "contiguous last dimension"),
    ]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            gemv(x, w, **kw)
    with pytest.raises(ValueError, match="a norm \\(eps\\) and gated=True do not combine"):
        gemv(torch.randn(2, 128, device=dev), w, gated=True, norm_weight=nw, eps=1e-5)
    square = torch.randn(16, 16, device=dev)
    with pytest.raises(ValueError, match="residual must not share memory with x"):
        gemv(square[:2], square, residual=square[2:4])


# -- weight-only FP8: an fp8 weight and its row scales ------------------------------------------------------

FP8_CONFIGS = [DEFAULT_CONFIG, GemvConfig(16, 256, 4, 3), GemvConfig(4, 512, 4, flat=True),
               GemvConfig(2, 1024, 4, 3, flat=True)]


def _fp8_weight(n, k, gen, dev):
    from tritium.ops.quant import quantize_rows
    w8, scale = quantize_rows(torch.randn(n, k, generator=gen) * torch.logspace(-2, 1, n)[:, None] / k ** 0.5)
    return w8.to(dev), scale.to(dev)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("config", FP8_CONFIGS, ids=str)
def test_gemv_fp8_weight(config, dtype):
    """``scale``: the fp8 weight times its row scales, in every variant (plain with a bias, gated, swiglu,
    norm, residual), against the fp64 reference of the dequantized weight; outputs poisoned first."""
    from tritium.ops.quant import dequantize
    dev = default_device()
    gen = torch.Generator().manual_seed(3)
    n, k = 40, 300
    w8, scale = _fp8_weight(n, k, gen, dev)
    wd = dequantize(w8, scale)  # fp32: what the reference multiplies by
    for m in (1, 3):
        x = torch.randn(m, k, generator=gen).to(dtype).to(dev)
        b = torch.randn(n, generator=gen).to(dtype).to(dev)
        out = gemv(x, w8, b, config=config, scale=scale)
        assert rel_err(out, reference.linear(x, wd, b)) < TOL[dtype]
        assert rel_err(out, reference.linear(x, w8, b, scale)) < TOL[dtype]
        x2 = torch.randn(m, 2 * k, generator=gen).to(dtype).to(dev)
        out = gemv(x2, w8, config=config, scale=scale, gated=True)
        assert rel_err(out, reference.linear(reference.silu_and_mul(x2), wd)) < TOL[dtype]
        if config.block_n % 2 == 0:
            out = gemv(x, w8, b, config=config, scale=scale, swiglu=True)
            assert rel_err(out, reference.silu_and_mul(reference.linear(x, wd, b))) < 2 * TOL[dtype]
        nw = torch.rand(k, generator=gen).to(dtype).to(dev) + 0.5
        out = gemv(x, w8, config=config, scale=scale, norm_weight=nw, eps=1e-5)
        assert rel_err(out, reference.rms_norm_linear(x, nw, 1e-5, wd)) < TOL[dtype]
        residual = torch.randn(m, n, generator=gen).to(dtype).to(dev)
        expected = reference.linear_residual(x, wd, residual, b)
        out = gemv(x, w8, b, config=config, scale=scale, residual=residual)
        assert out is residual and rel_err(out, expected) < TOL[dtype]


def test_gemv_fp8_bad_input():
    dev = default_device()
    gen = torch.Generator().manual_seed(4)
    w8, scale = _fp8_weight(16, 64, gen, dev)
    x = torch.randn(2, 64, device=dev)
    with pytest.raises(ValueError, match="needs its scale"):
        gemv(x, w8)
    with pytest.raises(ValueError, match=r"contiguous \[16\] float32"):
        gemv(x, w8, scale=scale[:8])
    with pytest.raises(ValueError, match=r"contiguous \[16\] float32"):
        gemv(x, w8, scale=scale.double())
    with pytest.raises(ValueError, match="quantized weight"):
        gemv(x, torch.randn(16, 64, device=dev), scale=scale)


# -- W8A8: an fp8 x (per-row scales) times an fp8 weight -----------------------------------------------------

@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("config", FP8_CONFIGS, ids=str)
def test_gemv_fp8_activations(config, out_dtype):
    """``x_scale``: fp8 x (rows of very different magnitudes, quantized per row) times the fp8 weight, plain with
    a bias, swiglu and residual, into poisoned outputs: the fp64 product of the dequantized operands, and the
    W8A8 reference (``dynamic_linear``) of the unquantized x."""
    from tritium.ops.quant import dequantize, dynamic_linear, quantize_activations
    dev = default_device()
    gen = torch.Generator().manual_seed(7)
    n, k = 40, 300
    w8, scale = _fp8_weight(n, k, gen, dev)
    wd = dequantize(w8, scale).double()
    for m in range(1, MAX_M + 1):
        x = torch.randn(m, k, generator=gen) * torch.logspace(-2, 2, m)[:, None]
        x8, xs = (t.to(dev) for t in quantize_activations(x))
        exact = dequantize(x8, xs).double() @ wd.t()
        b = torch.randn(n, generator=gen).to(out_dtype).to(dev)
        out = gemv(x8, w8, b, config=config, scale=scale, x_scale=xs, out_dtype=out_dtype)
        assert out.dtype == out_dtype
        assert rel_err(out, exact + b.double()) < TOL[out_dtype]
        assert rel_err(out, dynamic_linear(x.to(dev), w8, scale, b.float())) < TOL[out_dtype] + 1e-5
        if config.block_n % 2 == 0:
            out = gemv(x8, w8, b, config=config, scale=scale, x_scale=xs, out_dtype=out_dtype, swiglu=True)
            assert rel_err(out, reference.silu_and_mul((exact + b.double()).to(out_dtype))) < 2 * TOL[out_dtype]
        residual = torch.randn(m, n, generator=gen).to(out_dtype).to(dev)
        expected = (exact + residual.double()).to(out_dtype)
        out = gemv(x8, w8, config=config, scale=scale, x_scale=xs, out_dtype=out_dtype, residual=residual)
        assert out is residual and rel_err(out, expected) < TOL[out_dtype]


def test_gemv_fp8_activations_bad_input():
    from tritium.ops.quant import quantize_activations
    dev = default_device()
    gen = torch.Generator().manual_seed(8)
    w8, scale = _fp8_weight(16, 64, gen, dev)
    x8, xs = (t.to(dev) for t in quantize_activations(torch.randn(2, 64)))
    with pytest.raises(ValueError, match="needs its row scales"):
        gemv(x8, w8, scale=scale, out_dtype=torch.float32)
    with pytest.raises(ValueError, match="needs out_dtype"):
        gemv(x8, w8, scale=scale, x_scale=xs)
    with pytest.raises(ValueError, match=r"x_scale must be a contiguous \[2\]"):
        gemv(x8, w8, scale=scale, x_scale=xs[:1], out_dtype=torch.float32)
    with pytest.raises(ValueError, match="and no scale"):
        gemv(x8, w8, x_scale=xs, out_dtype=torch.float32)
    with pytest.raises(ValueError, match="does not combine"):
        gemv(x8, w8, scale=scale, x_scale=xs, out_dtype=torch.float32, eps=1e-5)
    with pytest.raises(ValueError, match="only a quantized x"):
        gemv(torch.randn(2, 64, device=dev), w8, scale=scale, out_dtype=torch.float16)
