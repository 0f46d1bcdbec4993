"""Weight-only int4 storage (:mod:`tritium.ops.int4`): packing, round-to-nearest quantization, the checks of
:class:`Int4Weight`, and the references the kernels are tested against."""

import pytest
import torch

from tritium.ops.int4 import (SYMMETRIC_ZERO, Int4Weight, dequantize_int4_reference, linear_int4_reference,
                              pack_int4, quantize_int4, unpack_int4)


def test_pack_unpack_round_trip():
    """Column 2j in the low nibble of byte j, 2j + 1 in the high one; unpack inverts pack for every code."""
    gen = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (7, 34), generator=gen)
    packed = pack_int4(codes)
    assert packed.dtype == torch.uint8 and packed.shape == (7, 17) and packed.is_contiguous()
    assert torch.equal(packed.int(), codes[:, 0::2] + 16 * codes[:, 1::2])
    back = unpack_int4(packed)
    assert back.dtype == torch.uint8 and torch.equal(back.long(), codes)
    assert torch.equal(pack_int4(back), packed)
    assert pack_int4(torch.tensor([[3, 12]])).item() == 0xC3
    every = torch.arange(256, dtype=torch.int32).to(torch.uint8)[None]
    assert torch.equal(pack_int4(unpack_int4(every)), every)


def test_pack_refuses_bad_codes():
    with pytest.raises(ValueError, match="even number of columns"):
        pack_int4(torch.zeros(2, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="2-D integer"):
        pack_int4(torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"\[0, 15\]"):
        pack_int4(torch.tensor([[0, 16]]))
    with pytest.raises(ValueError, match=r"\[0, 15\]"):
        pack_int4(torch.tensor([[-1, 0]]))
    with pytest.raises(ValueError, match="2-D uint8"):
        unpack_int4(torch.zeros(2, 4, dtype=torch.int32))


@pytest.mark.parametrize("scale_dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("symmetric", [False, True], ids=["asym", "sym"])
@pytest.mark.parametrize("group_size", [32, 128, 384])
def test_quantize_error_bound(group_size, symmetric, scale_dtype):
    """Round to nearest: every weight within half a step (its group's scale) of its dequantized value, up
    to the scale's rounding to its dtype; symmetric: zero points 8 (zeros None) and codes 1..15; an
    all-zero group dequantizes to zeros."""
    gen = torch.Generator().manual_seed(group_size)
    n, k = 12, 768
    w = torch.randn(n, k, generator=gen) * torch.logspace(-2, 1, n)[:, None]
    w[3, :group_size] = 0
    w[4, group_size:2 * group_size] = w[4, group_size:2 * group_size].abs()  # a group with no negative weight
    q = quantize_int4(w.to(torch.bfloat16) if scale_dtype == torch.bfloat16 else w, group_size,
                      symmetric=symmetric, scale_dtype=scale_dtype)
    w = w.to(torch.bfloat16).float() if scale_dtype == torch.bfloat16 else w
    assert q.shape == (n, k) and q.group_size == group_size and q.perm is None
    assert q.scales.dtype == scale_dtype and q.scales.shape == (n, k // group_size)
    codes = unpack_int4(q.packed)
    if symmetric:
        assert q.zeros is None and codes.min() >= 1
    else:
        assert q.zeros.dtype == torch.uint8 and q.zeros.max() <= 15
    back = dequantize_int4_reference(q)
    step = q.scales.float().repeat_interleave(group_size, dim=1)
    eps = 2.0 ** -7 if scale_dtype == torch.bfloat16 else 2.0 ** -10  # the scale's rounding, 15 steps over
    err = (back - w).abs()
    bound = step * (0.5 + 15 * eps) + 1e-30
    assert (err <= bound).all(), f"worst {(err / bound).max().item():.3f} of the bound"
    assert (back[3, :group_size] == 0).all()


def test_quantize_refuses_bad_input():
    with pytest.raises(ValueError, match="non-finite"):
        quantize_int4(torch.tensor([[1.0, float("inf")]]), 2)
    with pytest.raises(ValueError, match="group_size must be an even int that divides K = 64, got 48"):
        quantize_int4(torch.ones(2, 64), 48)
    with pytest.raises(ValueError, match="group_size"):
        quantize_int4(torch.ones(2, 64), 3)
    with pytest.raises(ValueError, match="scale_dtype"):
        quantize_int4(torch.ones(2, 64), 32, scale_dtype=torch.float64)
    with pytest.raises(ValueError, match="2-D float"):
        quantize_int4(torch.ones(2, 64, dtype=torch.int32), 32)


def _weight(n=6, k=64, g=16, zeros=True, perm=True):
    gen = torch.Generator().manual_seed(n * k)
    packed = pack_int4(torch.randint(0, 16, (n, k), generator=gen))
    scales = torch.rand(n, k // g, generator=gen).half()
    z = torch.randint(0, 16, (n, k // g), generator=gen, dtype=torch.uint8) if zeros else None
    p = torch.randperm(k, generator=gen).to(torch.int32) if perm else None
    return Int4Weight(packed, scales, z, p, g)


def test_validate_names_the_field():
    w = _weight()
    good = dict(packed=w.packed, scales=w.scales, zeros=w.zeros, perm=w.perm, group_size=16)
    cases = [
        (dict(packed=w.packed.int()), "packed must be a 2-D uint8 tensor"),
        (dict(packed=w.packed[0]), "packed must be a 2-D uint8 tensor"),
        (dict(group_size=24), "group_size must be an even int that divides K = 64, got 24"),
        (dict(group_size=1), "group_size"),
        (dict(group_size=16.0), "group_size"),
        (dict(scales=w.scales[:, :2]), r"scales must be a \[6, 4\] float16/bfloat16/float32 tensor"),
        (dict(scales=w.scales.double()), "scales must be"),
        (dict(zeros=w.zeros.int()), r"zeros must be None or a \[6, 4\] uint8 tensor"),
        (dict(perm=w.perm.long()), r"perm must be None or a \[64\] int32 tensor"),
        (dict(perm=w.perm[:32]), "perm must be"),
        (dict(scales=w.scales.to("meta")), "scales is on meta, packed on cpu"),
        (dict(packed=torch.zeros(32, 6, dtype=torch.uint8).t()), "packed must be contiguous"),
        (dict(scales=w.scales.t().contiguous().t()), "scales must be contiguous"),
    ]
    for change, match in cases:
        with pytest.raises(ValueError, match=match):
            Int4Weight(**{**good, **change})
    w.scales = w.scales[:, :2]  # fields changed after construction: validate() names them
    with pytest.raises(ValueError, match="scales must be"):
        w.validate()


def test_properties_and_rows_view():
    w = _weight(n=6, k=64, g=16)
    assert w.shape == (6, 64) and w.num_groups == 4 and w.device == torch.device("cpu")
    assert w.nbytes() == 6 * 32 + 6 * 4 * 2 + 6 * 4 + 64 * 4
    part = w.rows(2, 5)
    assert part.shape == (3, 64) and part.perm is w.perm and part.group_size == 16
    assert part.packed.data_ptr() == w.packed[2].data_ptr() and part.scales.data_ptr() == w.scales[2].data_ptr()
    assert part.zeros.data_ptr() == w.zeros[2].data_ptr()
    assert torch.equal(dequantize_int4_reference(part), dequantize_int4_reference(w)[2:5])
    part.packed.fill_(0x88)  # a view: the loader's copy lands in the whole weight
    assert (w.packed[2:5] == 0x88).all() and (w.packed[:2] != 0x88).any()
    assert _weight(zeros=False).rows(0, 1).zeros is None


def test_reference_dequantize_and_linear():
    """(q - zero) * scale per group (zero point 8 without zeros), scattered to perm[j] with unpermute;
    linear = x @ W^T + b from the fp32 weight, rounded once to x's dtype."""
    for zeros in (True, False):
        w = _weight(zeros=zeros)
        codes = unpack_int4(w.packed).float()
        z = w.zeros.float() if zeros else torch.full((6, 4), float(SYMMETRIC_ZERO))
        stored = (codes - z.repeat_interleave(16, 1)) * w.scales.float().repeat_interleave(16, 1)
        assert torch.equal(dequantize_int4_reference(w, unpermute=False), stored)
        full = dequantize_int4_reference(w)
        assert torch.equal(full[:, w.perm.long()], stored)
        assert torch.equal(dequantize_int4_reference(w, torch.float16), full.half())
        x = torch.randn(3, 64).half()
        b = torch.randn(6).half()
        assert torch.equal(linear_int4_reference(x, w, b), (x.float() @ full.t() + b.float()).half())
