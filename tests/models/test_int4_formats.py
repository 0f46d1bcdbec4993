"""GPTQ, AWQ and compressed-tensors int4 checkpoints read into tritium's Int4Weight.

Random codes, scales and zero points are written in each layout (tritium.testing.int4_checkpoints, packed from
the formats' descriptions) and read back (tritium.models.int4_formats); the read weight, dequantized by
tritium's reference, must equal ``(code - zero) * scale`` computed here with each input feature's group (exact:
small integers times fp16 scales in fp32). One hand-written tiny checkpoint per format pins the bit order
against the description itself, in both directions. Then the config parser and the refusals."""

import pytest
import torch

from tritium.models.int4_formats import (AWQ_ORDER, AWQ_REVERSE_ORDER, Int4Scheme, from_awq, from_compressed,
                                         from_gptq, int4_scheme, tensor_names)
from tritium.ops.int4 import dequantize_int4_reference
from tritium.testing.int4_checkpoints import to_awq, to_compressed, to_gptq


def _i32(word: int) -> int:
    """The int32 whose bits are the unsigned 32-bit ``word``."""
    return word - (1 << 32) if word >= 1 << 31 else word


def _random(n: int, k: int, g: int, *, sym: bool, seed: int, scale_dtype=torch.float16):
    """codes [N, K] and zeros [N, K/G] uint8 in [0, 15] (zeros all 8 if ``sym``), scales [N, K/G]."""
    gen = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (n, k), generator=gen).to(torch.uint8)
    scales = (torch.rand(n, k // g, generator=gen) * 0.1 + 0.01).to(scale_dtype)
    zeros = (torch.full((n, k // g), 8) if sym else torch.randint(0, 16, (n, k // g), generator=gen)).to(torch.uint8)
    return codes, scales, zeros


def _act_order_perm(k: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randperm(k, generator=gen).to(torch.int32)


def _groups(k: int, g: int, perm: torch.Tensor | None) -> torch.Tensor:
    """Each input feature's group: k // G, or feature perm[j] in group j // G."""
    if perm is None:
        return torch.arange(k) // g
    out = torch.empty(k, dtype=torch.int64)
    out[perm.long()] = torch.arange(k) // g
    return out


def _expected(codes, scales, zeros, groups) -> torch.Tensor:
    """W[n, k] = (code[n, k] - zero[n, grp(k)]) * scale[n, grp(k)] in fp32 ([N, K/G] scales and zeros)."""
    return (codes.float() - zeros.float()[:, groups]) * scales.float()[:, groups]


def _assert_equal(w, expected):
    got = dequantize_int4_reference(w)
    bad = torch.nonzero(got != expected)
    assert bad.numel() == 0, f"{bad.shape[0]} elements differ, first at {bad[0].tolist()}: " \
                             f"{got[tuple(bad[0])]} vs {expected[tuple(bad[0])]}"


# ---------------------------------------------------------------------------------------------- GPTQ


@pytest.mark.parametrize("group_size", [32, -1], ids=lambda g: f"G{g}")
@pytest.mark.parametrize("g_idx", ["none", "trivial", "actorder"])
@pytest.mark.parametrize("sym", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("zero_offset", [1, 0], ids=["v1", "v2"])
def test_gptq_round_trip(zero_offset, sym, g_idx, group_size):
    n, k = 24, 128
    g = k if group_size == -1 else group_size
    codes, scales, zeros = _random(n, k, g, sym=sym, seed=zero_offset * 10 + sym)
    perm = _act_order_perm(k, seed=3) if g_idx == "actorder" else None
    ckpt = to_gptq(codes, scales, zeros, group_size=group_size, perm=perm, zero_offset=zero_offset)
    groups = _groups(k, g, perm)
    assert ckpt["qweight"].shape == (k // 8, n) and ckpt["qzeros"].shape == (k // g, n // 8)
    assert ckpt["scales"].shape == (k // g, n) and torch.equal(ckpt["g_idx"].long(), groups)

    w = from_gptq(ckpt["qweight"], ckpt["qzeros"], ckpt["scales"], None if g_idx == "none" else ckpt["g_idx"],
                  group_size=group_size, zero_offset=zero_offset)
    assert w.group_size == g and w.shape == (n, k) and w.scales.dtype == torch.float16
    assert (w.zeros is None) == sym
    if g_idx == "actorder" and g < k:
        assert w.perm is not None and w.perm.dtype == torch.int32
        assert torch.equal(groups[w.perm.long()], torch.arange(k) // g)   # stored group g: columns [gG, (g+1)G)
    else:   # no g_idx, k // G, or one group (g_idx all 0, whatever the order)
        assert w.perm is None
    _assert_equal(w, _expected(codes, scales, zeros, groups))


def test_gptq_v1_zero_zero_point_wraps():
    """v1 stores zero - 1 mod 16: a zero point of 0 is stored as 15 and read back as 0."""
    codes, scales, _ = _random(8, 16, 8, sym=False, seed=5)
    zeros = torch.zeros(8, 2, dtype=torch.uint8)
    ckpt = to_gptq(codes, scales, zeros, group_size=8, zero_offset=1)
    assert ckpt["qzeros"].tolist() == [[_i32(0xFFFFFFFF)], [_i32(0xFFFFFFFF)]]
    w = from_gptq(ckpt["qweight"], ckpt["qzeros"], ckpt["scales"], group_size=8)
    assert torch.equal(w.zeros, zeros)


def test_gptq_words_of_other_integer_dtypes():
    """The int32 words may arrive as int64 holding the unsigned values (and g_idx as int64)."""
    codes, scales, zeros = _random(16, 64, 16, sym=False, seed=6)
    ckpt = to_gptq(codes, scales, zeros, group_size=16)
    as_int64 = {name: ckpt[name].to(torch.int64) & 0xFFFFFFFF for name in ("qweight", "qzeros")}
    w = from_gptq(as_int64["qweight"], as_int64["qzeros"], ckpt["scales"], ckpt["g_idx"].long(), group_size=16)
    _assert_equal(w, _expected(codes, scales, zeros, _groups(64, 16, None)))


def _gptq_hand_example():
    """N=8, K=16, G=8, v1; codes 0, zeros 8, scales 1 except where set below."""
    qweight = torch.zeros(2, 8, dtype=torch.int32)
    qweight[0, 3] = 0x00000050            # nibble 1 of row 0: W[3, 8*0 + 1] has code 5
    qweight[1, 0] = _i32(0xF0000000)      # nibble 7 of row 1: W[0, 15] has code 15
    qweight[1, 7] = 0x00300000            # nibble 5 of row 1: W[7, 13] has code 3
    qzeros = torch.tensor([[_i32(0x77772777)],   # group 0: nibble 3 stores 2 -> output 3's zero is 3; others 8
                           [_i32(0x07777777)]],  # group 1: nibble 7 stores 0 -> output 7's zero is 1
                          dtype=torch.int32)
    scales = torch.ones(2, 8, dtype=torch.float16)   # [K/G, N]
    scales[0, 3], scales[1, 0], scales[1, 7] = 0.5, 2.0, 0.25
    codes = torch.zeros(8, 16, dtype=torch.uint8)
    codes[3, 1], codes[0, 15], codes[7, 13] = 5, 15, 3
    zeros = torch.full((8, 2), 8, dtype=torch.uint8)
    zeros[3, 0], zeros[7, 1] = 3, 1
    return qweight, qzeros, scales, codes, zeros


def test_gptq_hand_written():
    qweight, qzeros, scales, codes, zeros = _gptq_hand_example()
    w = from_gptq(qweight, qzeros, scales, group_size=8)
    got = dequantize_int4_reference(w)
    assert got[3, 1] == (5 - 3) * 0.5 and got[3, 0] == (0 - 3) * 0.5 and got[3, 9] == -8
    assert got[0, 15] == (15 - 8) * 2.0 and got[0, 8] == -16 and got[0, 7] == -8
    assert got[7, 13] == (3 - 1) * 0.25 and got[7, 12] == -0.25 and got[7, 0] == -8
    assert torch.equal(got, _expected(codes, scales.t(), zeros, torch.arange(16) // 8))
    ckpt = to_gptq(codes, scales.t(), zeros, group_size=8)
    assert torch.equal(ckpt["qweight"], qweight) and torch.equal(ckpt["qzeros"], qzeros)
    v2 = to_gptq(codes, scales.t(), zeros, group_size=8, zero_offset=0)
    assert v2["qzeros"].tolist() == [[_i32(0x88883888)], [0x18888888]]


def test_gptq_hand_written_act_order():
    """The same words with g_idx alternating 1, 0, 1, 0, ...: feature k takes group g_idx[k]'s zero and scale."""
    qweight, qzeros, scales, codes, zeros = _gptq_hand_example()
    g_idx = torch.tensor([1, 0] * 8, dtype=torch.int32)
    w = from_gptq(qweight, qzeros, scales, g_idx, group_size=8)
    assert w.perm.tolist() == [1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14]
    got = dequantize_int4_reference(w)
    assert got[3, 1] == (5 - 3) * 0.5 and got[3, 0] == -8        # feature 1 is in group 0, feature 0 in group 1
    assert got[0, 15] == (15 - 8) * 1.0 and got[0, 14] == -16    # feature 15: group 0 (scale 1)
    assert got[7, 13] == (3 - 8) * 1.0 and got[7, 12] == -0.25   # feature 12: group 1 (zero 1, scale 0.25)
    assert torch.equal(got, _expected(codes, scales.t(), zeros, g_idx.long()))


# ---------------------------------------------------------------------------------------------- AWQ


@pytest.mark.parametrize("group_size", [16, -1], ids=lambda g: f"G{g}")
@pytest.mark.parametrize("sym", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("n", [8, 40])
def test_awq_round_trip(n, sym, group_size):
    k = 64
    g = k if group_size == -1 else group_size
    codes, scales, zeros = _random(n, k, g, sym=sym, seed=n + sym)
    ckpt = to_awq(codes, scales, zeros, group_size=group_size)
    assert set(ckpt) == {"qweight", "qzeros", "scales"}
    assert ckpt["qweight"].shape == (k, n // 8) and ckpt["qzeros"].shape == (k // g, n // 8)
    w = from_awq(ckpt["qweight"], ckpt["qzeros"], ckpt["scales"], group_size=group_size)
    assert w.perm is None and (w.zeros is None) == sym and w.group_size == g
    _assert_equal(w, _expected(codes, scales, zeros, _groups(k, g, None)))


def test_awq_order_tables():
    assert [AWQ_ORDER[AWQ_REVERSE_ORDER[j]] for j in range(8)] == list(range(8))


def test_awq_hand_written():
    """N=16, K=16, G=8; codes 0, zeros 0, scales 1 except where set below."""
    qweight = torch.zeros(16, 2, dtype=torch.int32)
    qweight[1, 0] = 0x00000030            # nibble 1 -> output ORDER[1] = 2: W[2, 1] has code 3
    qweight[9, 0] = 0x00A00000            # nibble 5 -> output ORDER[5] = 3: W[3, 9] has code 10
    qweight[9, 1] = 0x10000000            # word 1, nibble 7 -> output 8 + 7: W[15, 9] has code 1
    qweight[4, 1] = 0x00000900            # word 1, nibble 2 -> output 8 + 4: W[12, 4] has code 9
    qzeros = torch.zeros(2, 2, dtype=torch.int32)
    qzeros[0, 0] = 0x00000400             # group 0, nibble 2 -> output 4's zero is 4
    qzeros[1, 1] = 0x0000000F             # group 1, word 1, nibble 0 -> output 8's zero is 15
    scales = torch.ones(2, 16, dtype=torch.float16)
    scales[1, 3] = 0.5
    w = from_awq(qweight, qzeros, scales, group_size=8)
    got = dequantize_int4_reference(w)
    expected = torch.zeros(16, 16)
    expected[2, 1], expected[3, 9], expected[15, 9], expected[12, 4] = 3, 10 * 0.5, 1, 9
    expected[4, :8], expected[8, 8:] = -4, -15
    assert torch.equal(got, expected)
    codes = torch.zeros(16, 16, dtype=torch.uint8)
    codes[2, 1], codes[3, 9], codes[15, 9], codes[12, 4] = 3, 10, 1, 9
    zeros = torch.zeros(16, 2, dtype=torch.uint8)
    zeros[4, 0], zeros[8, 1] = 4, 15
    ckpt = to_awq(codes, scales.t(), zeros, group_size=8)
    assert torch.equal(ckpt["qweight"], qweight) and torch.equal(ckpt["qzeros"], qzeros)


# ---------------------------------------------------------------------------------------------- compressed-tensors


@pytest.mark.parametrize("case", [
    dict(k=128, group_size=32, actorder=False, dtype=torch.float16),
    dict(k=128, group_size=32, actorder=True, dtype=torch.bfloat16),
    dict(k=128, group_size=None, actorder=False, dtype=torch.bfloat16),
    dict(k=36, group_size=12, actorder=False, dtype=torch.float16),     # K not a multiple of 8: padded words
    dict(k=36, group_size=None, actorder=False, dtype=torch.float16),
], ids=lambda c: f"K{c['k']}-{'channel' if c['group_size'] is None else 'G' + str(c['group_size'])}"
               f"{'-actorder' if c['actorder'] else ''}-{str(c['dtype'])[6:]}")
def test_compressed_round_trip(case):
    n, k, group_size = 16, case["k"], case["group_size"]
    g = k if group_size is None else group_size
    codes, scales, _ = _random(n, k, g, sym=True, seed=k, scale_dtype=case["dtype"])
    perm = _act_order_perm(k, seed=4) if case["actorder"] else None
    ckpt = to_compressed(codes, scales, group_size, perm=perm)
    assert ckpt["weight_packed"].shape == (n, (k + 7) // 8) and ckpt["weight_shape"].tolist() == [n, k]
    assert ("weight_g_idx" in ckpt) == case["actorder"]
    w = from_compressed(ckpt["weight_packed"], ckpt["weight_scale"], ckpt["weight_shape"], ckpt.get("weight_g_idx"),
                        group_size=group_size)
    assert w.zeros is None and w.scales.dtype == case["dtype"] and w.group_size == g
    assert (w.perm is not None) == case["actorder"]
    expected = _expected(codes, scales, torch.full_like(codes[:, : k // g], 8), _groups(k, g, perm))
    _assert_equal(w, expected)


def test_compressed_g_idx_all_minus_one_is_column_order():
    codes, scales, _ = _random(8, 64, 16, sym=True, seed=8)
    ckpt = to_compressed(codes, scales, 16)
    w = from_compressed(ckpt["weight_packed"], ckpt["weight_scale"], None, torch.full((64,), -1, dtype=torch.int32),
                        group_size=16)
    assert w.perm is None
    _assert_equal(w, _expected(codes, scales, torch.full((8, 4), 8), _groups(64, 16, None)))


def test_compressed_hand_written():
    """N=8, K=16, G=8: stored nibbles 8 (signed 0) except where set below."""
    packed = torch.full((8, 2), _i32(0x88888888), dtype=torch.int32)
    packed[2, 1] = _i32(0x8888C888)       # word 1, nibble 3 -> column 8 + 3: W[2, 11] stores 12 (signed 4)
    packed[5, 0] = _i32(0x88888880)       # nibble 0: W[5, 0] stores 0 (signed -8)
    packed[6, 1] = _i32(0xF8888888)       # word 1, nibble 7: W[6, 15] stores 15 (signed 7)
    scales = torch.ones(8, 2, dtype=torch.bfloat16)
    scales[2, 1], scales[6, 1] = 0.5, 2.0
    w = from_compressed(packed, scales, torch.tensor([8, 16]), group_size=8)
    expected = torch.zeros(8, 16)
    expected[2, 11], expected[5, 0], expected[6, 15] = 4 * 0.5, -8, 7 * 2.0
    assert torch.equal(dequantize_int4_reference(w), expected)
    codes = torch.full((8, 16), 8, dtype=torch.uint8)
    codes[2, 11], codes[5, 0], codes[6, 15] = 12, 0, 15
    assert torch.equal(to_compressed(codes, scales, 8)["weight_packed"], packed)


# ---------------------------------------------------------------------------------------------- bad tensors


def _gptq_ckpt():
    codes, scales, zeros = _random(16, 64, 16, sym=False, seed=9)
    return to_gptq(codes, scales, zeros, group_size=16)


@pytest.mark.parametrize("name, change, match", [
    ("qweight", lambda t: t.float(), "qweight"),
    ("qweight", lambda t: t[None], "qweight"),
    ("qzeros", lambda t: t[:-1], r"qzeros must be a \[4, 2\]"),
    ("scales", lambda t: t[:, :-1], r"scales must be a \[4, 16\]"),
    ("scales", lambda t: t.to(torch.int32), "scales"),
    ("g_idx", lambda t: t[:-1], r"g_idx must be a \[64\]"),
    ("g_idx", lambda t: torch.where(torch.arange(64) == 0, 1, t).to(torch.int32), "group 0 has 15"),
    ("g_idx", lambda t: t + 1, r"g_idx: group indices must lie in \[0, 4\)"),
])
def test_gptq_bad_tensors(name, change, match):
    ckpt = _gptq_ckpt()
    ckpt[name] = change(ckpt[name])
    with pytest.raises(ValueError, match=match):
        from_gptq(ckpt["qweight"], ckpt["qzeros"], ckpt["scales"], ckpt["g_idx"], group_size=16)


def test_gptq_bad_arguments():
    ckpt = _gptq_ckpt()
    with pytest.raises(ValueError, match="group_size"):
        from_gptq(ckpt["qweight"], ckpt["qzeros"], ckpt["scales"], group_size=24)
    with pytest.raises(ValueError, match="zero_offset"):
        from_gptq(ckpt["qweight"], ckpt["qzeros"], ckpt["scales"], group_size=16, zero_offset=2)
    with pytest.raises(ValueError, match="qweight .* N = 12"):
        from_gptq(torch.zeros(8, 12, dtype=torch.int32), ckpt["qzeros"], ckpt["scales"], group_size=16)


def test_awq_bad_tensors():
    codes, scales, zeros = _random(16, 64, 16, sym=False, seed=10)
    ckpt = to_awq(codes, scales, zeros, group_size=16)
    with pytest.raises(ValueError, match=r"qzeros must be a \[4, 2\]"):
        from_awq(ckpt["qweight"], ckpt["qzeros"].t(), ckpt["scales"], group_size=16)
    with pytest.raises(ValueError, match=r"scales must be a \[4, 16\]"):
        from_awq(ckpt["qweight"], ckpt["qzeros"], ckpt["scales"].t(), group_size=16)
    with pytest.raises(ValueError, match="group_size"):
        from_awq(ckpt["qweight"], ckpt["qzeros"], ckpt["scales"], group_size=128)


def test_compressed_bad_tensors():
    codes, scales, _ = _random(16, 64, 16, sym=True, seed=11)
    ckpt = to_compressed(codes, scales, 16)
    packed, scale = ckpt["weight_packed"], ckpt["weight_scale"]
    with pytest.raises(ValueError, match="weight_shape"):
        from_compressed(packed, scale, torch.tensor([16, 72]), group_size=16)
    with pytest.raises(ValueError, match="weight_shape"):
        from_compressed(packed, scale, torch.tensor([8, 64]), group_size=16)
    with pytest.raises(ValueError, match=r"weight_scale must be a \[16, 4\]"):
        from_compressed(packed, scale[:, :2], group_size=16)
    with pytest.raises(ValueError, match=r"weight_g_idx must be a \[64\]"):
        from_compressed(packed, scale, None, torch.zeros(32, dtype=torch.int32), group_size=16)
    with pytest.raises(ValueError, match="asymmetric pack-quantized is not supported"):
        from_compressed(packed, scale, group_size=16, weight_zero_point=torch.zeros(16, 4, dtype=torch.int8))
    with pytest.raises(ValueError, match="weight_packed"):
        from_compressed(packed.to(torch.float32), scale, group_size=16)
    with pytest.raises(ValueError, match="every zero point must be 8"):
        to_compressed(codes, scales, 16, zeros=torch.zeros(16, 4, dtype=torch.uint8))


# ---------------------------------------------------------------------------------------------- configs

GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True,
        "checkpoint_format": "gptq"}
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True,
       "modules_to_not_convert": ["visual"]}


def _compressed(weights: dict | None = None, activations: dict | None = None, **top) -> dict:
    w = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128,
         "actorder": None, "dynamic": False, "observer": "minmax"}
    w.update(weights or {})
    config = {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
              "ignore": ["lm_head"], "sparsity_config": {},
              "config_groups": {"group_0": {"targets": ["Linear"], "weights": w, "input_activations": activations,
                                            "output_activations": None}}}
    config.update(top)
    return config


@pytest.mark.parametrize("config, scheme", [
    (GPTQ, Int4Scheme("gptq", 128, 1, False, True, ())),
    ({**GPTQ, "checkpoint_format": None, "desc_act": True}, Int4Scheme("gptq", 128, 1, True, True, ())),
    ({k: v for k, v in GPTQ.items() if k != "checkpoint_format"}, Int4Scheme("gptq", 128, 1, False, True, ())),
    ({**GPTQ, "checkpoint_format": "gptq_v2", "sym": False, "group_size": -1},
     Int4Scheme("gptq", -1, 0, False, False, ())),
    (AWQ, Int4Scheme("awq", 128, 0, False, False, ("visual",))),
    ({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "version": "GEMM", "zero_point": True},
     Int4Scheme("awq", 64, 0, False, False, ())),
    (_compressed(), Int4Scheme("compressed", 128, 0, False, True, ("lm_head",))),
    (_compressed({"strategy": "channel", "group_size": None}), Int4Scheme("compressed", -1, 0, False, True,
                                                                            ("lm_head",))),
    (_compressed({"actorder": "group", "group_size": 32}), Int4Scheme("compressed", 32, 0, True, True,
                                                                        ("lm_head",))),
    (_compressed({"actorder": "weight"}), Int4Scheme("compressed", 128, 0, False, True, ("lm_head",))),
], ids=["gptq", "gptq-desc_act", "gptq-no-format", "gptq_v2-asym-G-1", "awq", "awq-old-keys", "compressed-group",
        "compressed-channel", "compressed-actorder-group", "compressed-actorder-weight"])
def test_int4_scheme(config, scheme):
    assert int4_scheme(config) == scheme


def test_int4_scheme_null_flags_take_their_defaults():
    assert int4_scheme({**GPTQ, "sym": None, "desc_act": None}) == int4_scheme(GPTQ)


def test_int4_scheme_format_inside_the_group():
    config = _compressed(format=None)
    config["config_groups"]["group_0"]["format"] = "pack-quantized"
    assert int4_scheme(config).format == "compressed"


@pytest.mark.parametrize("config, match", [
    ({**GPTQ, "bits": 8}, "GPTQ with bits=8"),
    ({**GPTQ, "checkpoint_format": "marlin"}, "checkpoint_format 'marlin'"),
    ({**GPTQ, "group_size": 0}, "group_size"),
    ({**GPTQ, "group_size": 33}, "group_size"),
    ({**AWQ, "version": "gemv"}, "AWQ version 'gemv'"),
    ({**AWQ, "zero_point": False}, "zero_point=False"),
    ({**AWQ, "bits": 3}, "AWQ with bits=3"),
    (_compressed({"symmetric": False}), "asymmetric"),
    (_compressed(activations={"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token",
                              "dynamic": True}), "input_activations.*W4A8"),
    (_compressed({"num_bits": 8}), "8-bit integer weights"),
    (_compressed(format="marlin-24"), "format 'marlin-24'"),
    (_compressed({"strategy": "tensor"}), "strategy 'tensor'"),
    # strings where flags belong: "false" was read as true
    ({**GPTQ, "sym": "false"}, "GPTQ sym must be true or false, got 'false'"),
    ({**GPTQ, "desc_act": "no"}, "GPTQ desc_act must be true or false, got 'no'"),
], ids=["gptq-8bit", "gptq-marlin", "gptq-G0", "gptq-G33", "awq-gemv", "awq-no-zero-point", "awq-3bit",
        "compressed-asym", "compressed-W4A8", "compressed-W8A16", "compressed-marlin-24", "compressed-tensor",
        "gptq-sym-string", "gptq-desc-act-string"])
def test_int4_scheme_refuses(config, match):
    with pytest.raises(ValueError, match=match):
        int4_scheme(config)


FP8 = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
       "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                                        "strategy": "channel"}}}}


@pytest.mark.parametrize("config", [None, {}, FP8, {"quant_method": "fbgemm_fp8"},
                                    {"quant_method": "fp8", "weight_block_size": [128, 128]},
                                    {"quant_method": "bitsandbytes", "load_in_4bit": True}],
                         ids=["None", "empty", "compressed-fp8", "fbgemm_fp8", "fp8-block", "bitsandbytes"])
def test_int4_scheme_none_for_other_configs(config):
    assert int4_scheme(config) is None


def test_tensor_names():
    gptq, awq, compressed = (Int4Scheme(f, 128, 0, False, True) for f in ("gptq", "awq", "compressed"))
    assert tensor_names(gptq) == ("qweight", "qzeros", "scales", "g_idx")
    assert tensor_names(gptq, optional=False) == ("qweight", "qzeros", "scales")
    assert tensor_names(awq) == tensor_names(awq, optional=False) == ("qweight", "qzeros", "scales")
    assert tensor_names(compressed) == ("weight_packed", "weight_scale", "weight_shape", "weight_g_idx")
    assert tensor_names(compressed, optional=False) == ("weight_packed", "weight_scale")
