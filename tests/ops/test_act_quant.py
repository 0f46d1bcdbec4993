"""Per-token dynamic FP8 quantization (:mod:`tritium.ops.act_quant`) against its reference
(:func:`tritium.ops.quant.quantize_activations`): the same bits, NaN rows kept NaN, bad arguments named."""

import pytest
import torch

from tritium.ops.act_quant import quantize_activations_fp8
from tritium.ops.quant import FP8_DTYPE, FP8_MAX, quantize_activations
from tritium.runtime import default_device


def test_reference_round_trip():
    """The reference maps each row's largest magnitude to 448 and stays within e4m3's half step of each value."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(9, 300, generator=gen) * torch.logspace(-4, 3, 9)[:, None]
    x[4] = 0
    x8, scale = quantize_activations(x)
    assert x8.dtype == FP8_DTYPE and scale.shape == (9,) and scale[4] == 1 and (x8[4].float() == 0).all()
    rows = torch.arange(9) != 4
    assert torch.equal(x8.float().abs().amax(1)[rows], torch.full((8,), FP8_MAX))
    err = (x8.float() * scale[:, None] - x).abs()
    assert (err <= torch.maximum(x.abs() * 2 ** -4, scale[:, None] * 2 ** -10) * 1.0001).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("m,k", [(1, 64), (5, 1000), (3, 5000), (2, 7)], ids=str)
def test_kernel_matches_reference(m, k, dtype):
    """Every byte and scale equal to the reference's, on rows of very different magnitudes (subnormal e4m3
    values included), into poisoned buffers, a zero row and a row with a NaN among them."""
    dev = default_device()
    gen = torch.Generator().manual_seed(m * k)
    x = (torch.randn(m, k, generator=gen) * torch.logspace(-3, 3, m)[:, None]).to(dtype)
    if m > 2:
        x[1] = 0
        x[2, k // 2] = float("nan")
    x = x.to(dev)
    e8, escale = quantize_activations(x)
    out = torch.full((m, k + 5), 0x7F, dtype=torch.uint8, device=dev).view(FP8_DTYPE)  # 0x7F: NaN
    scale = torch.full((m,), float("nan"), device=dev)
    got8, got_scale = quantize_activations_fp8(x, out[:, :k], scale)
    assert got8.data_ptr() == out.data_ptr() and got_scale is scale
    torch.testing.assert_close(got_scale, escale, rtol=0, atol=0, equal_nan=True)
    ok = torch.isfinite(escale)
    # values, not bytes: the interpreter converts -0.0 to +0 (the GPU keeps the sign); products are the same
    assert torch.equal(got8[ok].float(), e8[ok].float())
    assert (out[:, k:].view(torch.uint8) == 0x7F).all()
    if m > 2:
        assert torch.isnan(got_scale[2]) and got_scale[1] == 1


def test_kernel_rounds_ties_and_carries():
    """Values exactly halfway between e4m3 neighbours round to the even one, and round-ups that carry into
    the exponent (1.96875 -> 2.0) land on the next power of two, where the interpreter's own conversion errs."""
    dev = default_device()
    row = torch.tensor([[448.0, 1.96875, 1.0625, 1.1875, -3.9, 0.0146484375, 2 ** -10, 2 ** -9 * 1.5, 7.9]])
    got8, got_scale = quantize_activations_fp8(row.to(dev))
    e8, escale = quantize_activations(row)
    assert got_scale.item() == escale.item() == 1.0
    assert torch.equal(got8.cpu().float(), e8.float())
    assert got8.cpu().float()[0].tolist() == [448.0, 2.0, 1.0, 1.25, -4.0, 0.015625, 0.0, 2 ** -8, 8.0]


def test_refuses_bad_arguments():
    dev = default_device()
    x = torch.randn(4, 32, device=dev)
    with pytest.raises(ValueError, match="x must be a 2-D"):
        quantize_activations_fp8(x[:, ::2])
    with pytest.raises(TypeError, match="x has dtype"):
        quantize_activations_fp8(x.double())
    with pytest.raises(ValueError, match="out must be"):
        quantize_activations_fp8(x, out=torch.empty(4, 32, device=dev))
    with pytest.raises(ValueError, match="scale must be"):
        quantize_activations_fp8(x, scale=torch.empty(3, device=dev))
