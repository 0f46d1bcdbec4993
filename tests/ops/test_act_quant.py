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


# --- the kernels that quantize their rows as they write them (W8A8's fuse_act_quant) ---

def _rows(t):
    """An Fp8Rows' values and scales on the CPU (values: the interpreter writes -0.0 as +0)."""
    return t.data.cpu().float(), t.scale.cpu()


def _assert_same_rows(got, want):
    g, gs = _rows(got)
    w, ws = _rows(want)
    torch.testing.assert_close(gs, ws, rtol=0, atol=0, equal_nan=True)
    ok = torch.isfinite(ws)
    assert torch.equal(g[ok], w[ok]), (g[ok] != w[ok]).sum()
    assert got.dtype == want.dtype and got.shape == want.shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("t,h", [(1, 64), (4, 100), (3, 4096)], ids=str)
@pytest.mark.parametrize("with_residual", [False, True], ids=["plain", "residual"])
def test_rms_norm_quantizes_as_the_unfused_chain(t, h, dtype, with_residual):
    """``rms_norm(..., quantize=True)``: the plain kernel's rows quantized by the quantization kernel, bit for
    bit (scales and values), the residual updated the same way; a zero row gets scale 1, a NaN row a NaN scale;
    and within fp8's rounding of the fp32 reference."""
    from tritium.ops import reference
    from tritium.ops.quant import Fp8Rows
    from tritium.ops.rms_norm import rms_norm
    dev = default_device()
    gen = torch.Generator().manual_seed(t * h)
    x = (torch.randn(t, h, generator=gen) * torch.logspace(-2, 2, t)[:, None]).to(dtype)
    if t > 2:
        x[1] = 0
        x[2, h // 3] = float("nan")
    x, w = x.to(dev), (torch.rand(h, generator=gen) + 0.5).to(dtype).to(dev)
    r = torch.randn(t, h, generator=gen).to(dtype).to(dev) if with_residual else None
    if with_residual and t > 2:
        r[1] = 0
    r1, r2 = (None, None) if r is None else (r.clone(), r.clone())
    got, res = rms_norm(x, w, 1e-5, r1, quantize=True)
    plain, res2 = rms_norm(x, w, 1e-5, r2)
    assert isinstance(got, Fp8Rows) and got.data.dtype == FP8_DTYPE and got.dtype == dtype
    _assert_same_rows(got, Fp8Rows(*quantize_activations_fp8(plain), dtype))
    if with_residual:
        assert torch.equal(res.cpu().float().nan_to_num(), res2.cpu().float().nan_to_num())
    want = reference.rms_norm(x.cpu().float(), w.cpu().float(), 1e-5, None if r is None else r.cpu().float())[0]
    ok = torch.isfinite(got.scale.cpu())
    deq = got.dequantize().cpu().float()
    bound = want.abs() * 2 ** -4 + got.scale.cpu()[:, None] * 2 ** -9 + want.abs() * 1e-2  # fp8 + 16-bit rounding
    assert (deq[ok] - want[ok]).abs().le(bound[ok]).all()
    if t > 2:
        assert got.scale[1].item() == 1.0 and (got.data[1].float() == 0).all() and torch.isnan(got.scale[2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("t,inter", [(1, 48), (3, 1000), (2, 16384), (2, 16400)], ids=str)
def test_silu_and_mul_quantizes_as_the_unfused_chain(t, inter, dtype):
    """``silu_and_mul(x, quantize=True)``: one program a row, the row kept in registers up to 16384 columns
    and computed twice past that; bit for bit the plain kernel's rows quantized, NaN rows NaN-scaled."""
    from tritium.ops.activation import silu_and_mul
    from tritium.ops.quant import Fp8Rows
    dev = default_device()
    gen = torch.Generator().manual_seed(t * inter)
    x = (torch.randn(t, 2 * inter, generator=gen) * 3).to(dtype)
    if t > 2:
        x[1] = 0
        x[2, inter + 5] = float("nan")
    x = x.to(dev)
    got = silu_and_mul(x, quantize=True)
    assert isinstance(got, Fp8Rows) and got.shape == (t, inter)
    _assert_same_rows(got, Fp8Rows(*quantize_activations_fp8(silu_and_mul(x)), dtype))
    if t > 2:
        assert got.scale[1].item() == 1.0 and torch.isnan(got.scale[2])
    empty = silu_and_mul(x[:0], quantize=True)
    assert empty.shape == (0, inter) and empty.scale.shape == (0,)


def test_reference_ops_quantize():
    """The torch op set's rms_norm / silu_and_mul with quantize=True: the reference quantization of their rows."""
    from tritium.ops import reference
    from tritium.ops.quant import Fp8Rows
    gen = torch.Generator().manual_seed(1)
    x, w = torch.randn(3, 40, generator=gen), torch.rand(40, generator=gen)
    q, _ = reference.rms_norm(x, w, 1e-6, quantize=True)
    assert isinstance(q, Fp8Rows)
    e8, es = quantize_activations(reference.rms_norm(x, w, 1e-6)[0])
    assert torch.equal(q.data.float(), e8.float()) and torch.equal(q.scale, es)
    a = reference.silu_and_mul(x, quantize=True)
    e8, es = quantize_activations(reference.silu_and_mul(x))
    assert torch.equal(a.data.float(), e8.float()) and torch.equal(a.scale, es) and a.dtype == torch.float32


def test_fp8_rows_refuses_bad_parts():
    from tritium.ops.quant import Fp8Rows
    x8 = torch.zeros(3, 8, dtype=FP8_DTYPE)
    with pytest.raises(ValueError, match="Fp8Rows.data must be"):
        Fp8Rows(torch.zeros(3, 8), torch.ones(3), torch.bfloat16)
    with pytest.raises(ValueError, match="Fp8Rows.scale must be"):
        Fp8Rows(x8, torch.ones(2), torch.bfloat16)
    with pytest.raises(ValueError, match="Fp8Rows.dtype must be"):
        Fp8Rows(x8, torch.ones(3), torch.int8)
    assert torch.equal(Fp8Rows(x8, torch.ones(3), torch.bfloat16).dequantize(), torch.zeros(3, 8, dtype=torch.bfloat16))
