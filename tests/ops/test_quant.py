"""Weight-only FP8 (:mod:`tritium.ops.quant`): row quantization, checkpoint scales, and the reference the
kernels are tested against."""

import pytest
import torch

from tritium.ops.quant import FP8_DTYPE, FP8_MAX, dequantize, expand_scale, quantize_rows


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_quantize_rows_round_trip(dtype):
    """Each row's largest magnitude maps to 448; the round trip stays within e4m3's half-ulp (2^-4
    relative) of every element, relative to its row's scale; zero rows come back as zeros."""
    gen = torch.Generator().manual_seed(1)
    w = (torch.randn(37, 100, generator=gen) * torch.logspace(-3, 2, 37)[:, None]).to(dtype)
    w[5] = 0
    w8, scale = quantize_rows(w)
    assert w8.dtype == FP8_DTYPE and w8.shape == w.shape
    assert scale.dtype == torch.float32 and scale.shape == (37,) and scale.is_contiguous()
    assert scale[5] == 1 and (w8[5].float() == 0).all()
    assert torch.allclose(w8.float().abs().amax(1)[torch.arange(37) != 5], torch.tensor(FP8_MAX))
    back = dequantize(w8, scale)
    err = (back - w.float()).abs()
    # e4m3: 3 mantissa bits (relative step 2^-3, error <= 2^-4 of the value) down to its subnormals (2^-9)
    bound = torch.maximum(w.float().abs() * 2 ** -4, scale[:, None] * 2 ** -10)
    assert (err <= bound * 1.0001).all()
    assert dequantize(w8, scale, torch.bfloat16).dtype == torch.bfloat16


def test_quantize_rows_refuses_bad_input():
    with pytest.raises(ValueError, match="non-finite"):
        quantize_rows(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="2-D float"):
        quantize_rows(torch.ones(3))
    with pytest.raises(ValueError, match="2-D float"):
        quantize_rows(torch.ones(2, 2, dtype=torch.int32))


@pytest.mark.parametrize("shape", [(), (1,), (1, 1), (6,), (6, 1)], ids=str)
def test_expand_scale(shape):
    scale = torch.arange(1, 7, dtype=torch.float32)[: max(1, (shape or (1,))[0])].reshape(shape).bfloat16()
    out = expand_scale(scale, 6)
    assert out.shape == (6,) and out.dtype == torch.float32 and out.is_contiguous()
    expected = torch.full((6,), 1.0) if scale.numel() == 1 else torch.arange(1, 7, dtype=torch.float32)
    assert torch.equal(out, expected)


@pytest.mark.parametrize("shape", [(2,), (6, 2), (3, 128)], ids=str)
def test_expand_scale_refuses_other_shapes(shape):
    with pytest.raises(ValueError, match="per channel"):
        expand_scale(torch.ones(shape), 6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n,k", [(8, 512), (13, 700), (1, 5)], ids=str)
def test_dequantize_fp8_kernel(n, k, dtype):
    """The one-pass kernel gives the reference's bits (fp32 product, one rounding), into a poisoned ``out``
    (a row-strided view) too; bad arguments are named."""
    from tritium.ops.dequant import dequantize_fp8
    from tritium.runtime import default_device, interpreting
    dev = default_device()
    gen = torch.Generator().manual_seed(n * k)
    w8, scale = quantize_rows(torch.randn(n, k, generator=gen) * torch.logspace(-3, 1, n)[:, None])
    w8, scale = w8.to(dev), scale.to(dev)
    expected = dequantize(w8, scale, dtype)
    got = dequantize_fp8(w8, scale, dtype)
    # NOTE: the interpreter rounds fp32 -> bf16 otherwise than round-to-nearest-even (one ulp, seen on CPU)
    rtol = 2 ** -7 if dtype == torch.bfloat16 and interpreting() else 0.0
    assert got.dtype == dtype
    torch.testing.assert_close(got, expected, rtol=rtol, atol=0.0)
    buf = torch.full((n, k + 3), float("nan"), dtype=dtype, device=dev)
    out = dequantize_fp8(w8, scale, dtype, out=buf[:, :k])
    torch.testing.assert_close(out, expected, rtol=rtol, atol=0.0)
    assert torch.isnan(buf[:, k:]).all()
    with pytest.raises(ValueError, match="dtype must be"):
        dequantize_fp8(w8, scale, torch.float64)
    with pytest.raises(ValueError, match="out must be"):
        dequantize_fp8(w8, scale, dtype, out=buf)
    with pytest.raises(ValueError, match="scale must be"):
        dequantize_fp8(w8, scale[:-1] if n > 1 else scale.double(), dtype)
