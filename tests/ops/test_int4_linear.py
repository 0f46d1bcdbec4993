"""Weight-only int4 kernels (:mod:`tritium.ops.int4_linear`) against the fp32 references of
:mod:`tritium.ops.int4`: the one-pass dequantization bit for bit, the GEMV, the matmul and the dispatcher
within per-dtype tolerances."""

import pytest
import torch
import torch.nn.functional as F
import triton

from tritium.ops.int4 import Int4Weight, dequantize_int4_reference, linear_int4_reference, pack_int4
from tritium.ops.int4_linear import (DEFAULT_GEMV_CONFIG, GEMV_CONFIGS, MATMUL_CONFIGS, MATMUL_MAX_M, MAX_M,
                                     WORD_GEMV_CONFIGS, WORD_GEMV_DEFAULTS, Int4GemvConfig, Int4MatmulConfig,
                                     dequantize_int4, gemv_candidates, int4_gemv, int4_linear, int4_matmul,
                                     int4_warm_rows, select_int4_matmul_config)
from tritium.runtime import default_device, interpreting

# relative to the output's norm: fp32 sums against the fp32 reference (each rounded once); the matmul's
# 16-bit weight rounding adds ~2^-11 (fp16) / 2^-8 (bf16) a weight, averaged over K
TOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1e-2}
DT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
GEMV_DTYPES = [pytest.param(d, id=DT[d]) for d in TOL]
# tl.dot on bf16 operands is wrong under the interpreter (ENVIRONMENT.md): bf16 matmuls run on a GPU only
DOT_DTYPES = [pytest.param(torch.float32, id="fp32"), pytest.param(torch.float16, id="fp16"),
              pytest.param(torch.bfloat16, id="bf16", marks=pytest.mark.gpu)]


def make_weight(n, k, group_size, *, zeros=True, perm=False, scale_dtype=torch.float16, seed=0):
    """Random codes (all 16 values), scales (~1/sqrt(K), a few negative) and zero points; perm: a random
    permutation of the input features (GPTQ act-order: stored groups stay contiguous)."""
    gen = torch.Generator().manual_seed(seed)
    dev = default_device()
    groups = k // group_size
    codes = torch.randint(0, 16, (n, k), generator=gen)
    scales = (torch.rand(n, groups, generator=gen) + 0.5) / k ** 0.5
    scales[0, 0] = -scales[0, 0]
    z = torch.randint(0, 16, (n, groups), generator=gen, dtype=torch.uint8) if zeros else None
    p = torch.randperm(k, generator=gen).to(torch.int32) if perm else None
    return Int4Weight(pack_int4(codes).to(dev), scales.to(scale_dtype).to(dev), None if z is None else z.to(dev),
                      None if p is None else p.to(dev), group_size)


def randn(*shape, dtype, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype).to(default_device())


def check(out, ref, tol):
    """``‖out − ref‖ / ‖ref‖ < tol``, no NaN or inf; the worst element named on failure."""
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype, ref.shape, ref.dtype)
    assert torch.isfinite(out).all(), f"non-finite at {torch.nonzero(~torch.isfinite(out))[:5].tolist()}"
    diff = (out.double() - ref.double())
    err = (diff.norm() / ref.double().norm()).item()
    if not err < tol:
        worst = torch.nonzero(diff.abs() == diff.abs().max())[0].tolist()
        raise AssertionError(f"relative error {err:.3g} >= {tol}; worst at {worst}: {out[tuple(worst)].item()} vs "
                             f"{ref[tuple(worst)].item()}")


def case_id(c):
    n, k, g, zeros, perm, sdt = c[:6]
    return f"N{n}-K{k}-G{g}" + ("-z" if zeros else "-sym") + ("-perm" if perm else "") + f"-s{DT[sdt]}"


# (N, K, group_size, zeros, perm, scale dtype): ragged N; K a multiple of the block or not; groups of
# 32/64/128, G == K (one group a row, also not a power of two), G = 96 (pieces of 32 columns)
CASES = [
    (24, 1024, 128, True, False, torch.float16),
    (37, 384, 32, False, True, torch.bfloat16),
    (40, 320, 64, True, True, torch.float32),
    (19, 96, 96, True, False, torch.float16),
    (33, 192, 96, False, False, torch.float32),
    (8, 512, 512, True, True, torch.bfloat16),
]


# -- dequantize_int4 -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", GEMV_DTYPES)
@pytest.mark.parametrize("case", CASES + [(9, 1030, 1030, True, True, torch.float32),
                                          (3, 2, 2, False, False, torch.float16)], ids=case_id)
def test_dequantize_bit_exact(case, dtype):
    """Every element (q - zero) * scale, rounded once: the reference's bits, in input-feature order
    (unpermute) and stored order, into a new tensor and into a poisoned row-strided ``out``."""
    n, k, g, zeros, perm, sdt = case
    w = make_weight(n, k, g, zeros=zeros, perm=perm, scale_dtype=sdt, seed=n * k)
    # NOTE: the interpreter rounds fp32 -> bf16 towards zero, not to nearest even (ENVIRONMENT.md): one ulp
    rtol = 2 ** -7 if dtype == torch.bfloat16 and interpreting() else 0.0
    for unpermute in (True, False):
        expected = dequantize_int4_reference(w, dtype, unpermute=unpermute)
        got = dequantize_int4(w, dtype, unpermute=unpermute)
        assert got.shape == (n, k) and got.dtype == dtype
        torch.testing.assert_close(got, expected, rtol=rtol, atol=0.0)
        if rtol == 0.0:
            assert torch.equal(got, expected)
        buf = torch.full((n, k + 5), float("nan"), dtype=dtype, device=w.device)
        out = dequantize_int4(w, dtype, buf[:, 2:k + 2], unpermute=unpermute)
        assert out.data_ptr() == buf[:, 2:].data_ptr()
        torch.testing.assert_close(out, expected, rtol=rtol, atol=0.0)
        assert torch.isnan(buf[:, :2]).all() and torch.isnan(buf[:, k + 2:]).all()


def test_dequantize_bad_input():
    w = make_weight(16, 64, 32)
    with pytest.raises(ValueError, match="dequantize_int4: dtype must be"):
        dequantize_int4(w, torch.float64)
    with pytest.raises(ValueError, match=r"dequantize_int4: out must be a \[16, 64\] torch.float16 tensor"):
        dequantize_int4(w, torch.float16, torch.empty(16, 63, dtype=torch.float16, device=w.device))
    with pytest.raises(ValueError, match="out must be"):
        dequantize_int4(w, torch.float16, torch.empty(16, 64, device=w.device))
    with pytest.raises(ValueError, match="out must be"):
        dequantize_int4(w, torch.float16, torch.empty(64, 16, dtype=torch.float16, device=w.device).t())
    with pytest.raises(TypeError, match="w must be an Int4Weight"):
        dequantize_int4(w.packed, torch.float16)


# -- int4_gemv -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", GEMV_DTYPES)
@pytest.mark.parametrize("m", range(1, MAX_M + 1))
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_gemv_matches_reference(case, m, dtype):
    """1-4 rows, every weight layout of CASES, with and without bias (alternating by row count)."""
    n, k, g, zeros, perm, sdt = case
    w = make_weight(n, k, g, zeros=zeros, perm=perm, scale_dtype=sdt, seed=k + m)
    x = randn(m, k, dtype=dtype, seed=m)
    b = randn(n, dtype=dtype, seed=n) if m % 2 else None
    out = int4_gemv(x, w, b)
    check(out, linear_int4_reference(x, w, b), TOL[dtype])


@pytest.mark.parametrize("config", GEMV_CONFIGS + WORD_GEMV_CONFIGS, ids=str)
def test_gemv_configs(config):
    """Every candidate config: N = 40 (ragged for 16 and 32 rows a program), K = 2304 a multiple of no block_k
    (18 groups of 128),
    asymmetric with a permutation, a row-strided x (rows of a wider buffer); and an even K (4096)."""
    n = 40
    for k, perm in ((2304, True), (4096, False)):
        w = make_weight(n, k, 128, zeros=True, perm=perm, scale_dtype=torch.bfloat16, seed=k)
        buf = randn(3, k + 64, dtype=torch.float16, seed=1)
        x = buf[:, 32:32 + k]
        b = randn(n, dtype=torch.float16, seed=2)
        check(int4_gemv(x, w, b, config=config), linear_int4_reference(x, w, b), TOL[torch.float16])


def test_gemv_other_block_k_than_group():
    """Chunks of one group (block_k < G), whole groups (block_k > G), and pieces where neither divides."""
    x = randn(2, 768, dtype=torch.float32, seed=3)
    for g in (768, 384, 256, 96, 6):
        w = make_weight(21, 768, g, zeros=g % 64 == 0, perm=g == 96, seed=g)
        for config in (Int4GemvConfig(4, 64, 4), Int4GemvConfig(8, 256, 4), Int4GemvConfig(2, 512, 4)):
            check(int4_gemv(x, w, config=config), linear_int4_reference(x, w), TOL[torch.float32])
        # the word GEMV: groups of whole words that tile its chunk of words or that it tiles, or one group a row
        for config in (Int4GemvConfig(4, 64, 4, words=True), Int4GemvConfig(2, 256, 4, words=True)):
            bw = config.block_k // 8
            if g >= 768 or (g % 8 == 0 and (bw % (g // 8) == 0 or (g // 8) % bw == 0)):
                check(int4_gemv(x, w, config=config), linear_int4_reference(x, w), TOL[torch.float32])
            else:
                with pytest.raises(ValueError, match=f"int4_gemv: config {config} needs"):
                    int4_gemv(x, w, config=config)


def test_gemv_default_kernel(monkeypatch):
    """Without a config, 1-4 rows run the word GEMV where the weight allows it (K a multiple of 8, groups of
    whole words that tile its chunk), the byte GEMV elsewhere (here: groups of 96 columns, 12 words)."""
    import tritium.ops.int4_linear as mod

    class Refuse:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            raise AssertionError(f"{self.name} launched")

    x = randn(3, 768, dtype=torch.float32, seed=4)
    for g, kernel in ((128, "_gemv_kernel"), (96, "_gemv_words_kernel")):
        w = make_weight(10, 768, g, zeros=True, seed=g)
        with monkeypatch.context() as mp:
            mp.setattr(mod, kernel, Refuse(kernel))
            check(int4_gemv(x, w), linear_int4_reference(x, w), TOL[torch.float32])
    # what the engine's tuning times: the word configs the weight allows, else the byte ones
    assert gemv_candidates(make_weight(10, 768, 128)) == WORD_GEMV_CONFIGS
    assert gemv_candidates(make_weight(10, 768, 96)) == GEMV_CONFIGS
    assert all(c.words for c in WORD_GEMV_CONFIGS + tuple(WORD_GEMV_DEFAULTS.values()))
    assert not any(c.words for c in GEMV_CONFIGS + (DEFAULT_GEMV_CONFIG,))
    with pytest.raises(ValueError, match="words must be a bool, and block_k >= 8"):
        Int4GemvConfig(4, 4, 4, words=True)


# -- int4_matmul -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DOT_DTYPES)
@pytest.mark.parametrize("m", [5, 17, 64])
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[2], CASES[4]], ids=case_id)
def test_matmul_matches_reference(case, m, dtype):
    """5 to 64 rows (partial row tiles), ragged N and K, groups 32/64/96/128, with the selected config."""
    n, k, g, zeros, perm, sdt = case
    w = make_weight(n, k, g, zeros=zeros, perm=perm, scale_dtype=sdt, seed=k + m)
    x = randn(m, k, dtype=dtype, seed=m)
    b = randn(n, dtype=dtype, seed=n) if m != 17 else None
    check(int4_matmul(x, w, b), linear_int4_reference(x, w, b), TOL[dtype])


# (the 64 x 128 tile with K steps of 128 overruns an MI300X's shared memory with fp32 operands: with fp16 x only,
# as the selection gives it)
SMALL_TILES = (MATMUL_CONFIGS[1], MATMUL_CONFIGS[3], Int4MatmulConfig(16, 32, 64, 4, 2),
               Int4MatmulConfig(32, 16, 256, 4, 1))
MATMUL_CASES = [pytest.param(c, d, id=f"{c}-{DT[d]}") for c in SMALL_TILES for d in (torch.float16, torch.float32)] + [
    pytest.param(MATMUL_CONFIGS[0], torch.float16, id=f"{MATMUL_CONFIGS[0]}-fp16"),
    pytest.param(Int4MatmulConfig(64, 128, 64, 8, 3), torch.float32, id="m64-n128-k64-w8-st3-fp32")]


@pytest.mark.parametrize("config,dtype", MATMUL_CASES)
def test_matmul_configs(config, dtype):
    """Configs whose K step is a group, part of one, several (G = 32 < block_k), and pieces (G = 96)."""
    x = randn(40, 768, dtype=dtype, seed=4)
    b = randn(70, dtype=dtype, seed=5)
    for g in (128, 32, 96):
        w = make_weight(70, 768, g, zeros=g != 32, perm=g == 128, scale_dtype=torch.float32, seed=g)
        check(int4_matmul(x, w, b, config=config), linear_int4_reference(x, w, b), TOL[dtype])


def test_select_matmul_config():
    """Row tiles by M, and a K step inside one group for the usual group sizes."""
    tiles = {(m, n): select_int4_matmul_config(m, n, 4096, 128)
             for m in (5, 16, 17, 32, 64, 200) for n in (4096, 28672)}
    assert all(cfg.block_m <= max(16, triton.next_power_of_2(m)) for (m, _), cfg in tiles.items())
    assert (tiles[5, 4096].block_m, tiles[5, 4096].block_n) == (16, 32)  # 128 programs of 16 x 32
    assert (tiles[64, 28672].block_m, tiles[64, 28672].block_n) == (64, 128)
    assert (tiles[64, 4096].block_m, tiles[64, 4096].block_n) == (32, 64)
    for g in (32, 64, 128, 4096):
        for m in (5, 100, 256):
            for dtype in (torch.bfloat16, torch.float32):
                cfg = select_int4_matmul_config(m, 4096, 4096, g, x_dtype=dtype)
                assert g % cfg.block_k == 0 and cfg.block_k <= (64 if dtype == torch.float32 else 128)
    assert int4_warm_rows(4096, 4096, 128, 1) == [1]
    assert int4_warm_rows(4096, 4096, 128, 3) == [1, 2]
    assert int4_warm_rows(4096, 4096, 128, 2048) == [1, 2, 4, 5, 33, MATMUL_MAX_M + 1]
    rows = int4_warm_rows(4096, 4096, 128, 100)
    assert max(rows) <= 100 and {select_int4_matmul_config(m, 4096, 4096, 128)
                                 for m in range(MAX_M + 1, min(100, MATMUL_MAX_M) + 1)} == \
        {select_int4_matmul_config(m, 4096, 4096, 128) for m in rows if m > MAX_M}


# -- int4_linear -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=DT.get)
def test_linear_dispatch(dtype):
    """x [..., K] by row count: the GEMV at M = 1 (x [K]), the matmul at M = 8 (x [2, 4, K]), dequantize +
    F.linear at M = 300 (each bit for bit the kernel it dispatches to); M = 0; a strided x copied."""
    n, k = 48, 256
    w = make_weight(n, k, 64, zeros=True, perm=True, seed=7)
    b = randn(n, dtype=dtype, seed=8)
    x1 = randn(k, dtype=dtype, seed=9)
    y = int4_linear(x1, w, b)
    assert y.shape == (n,) and torch.equal(y, int4_gemv(x1[None], w, b)[0])
    check(y, linear_int4_reference(x1[None], w, b)[0], TOL[dtype])
    x8 = randn(2, 4, k, dtype=dtype, seed=10)
    y = int4_linear(x8, w, b)
    assert y.shape == (2, 4, n) and torch.equal(y, int4_matmul(x8.reshape(8, k), w, b).reshape(2, 4, n))
    check(y, linear_int4_reference(x8.reshape(8, k), w, b).reshape(2, 4, n), TOL[dtype])
    x300 = randn(MATMUL_MAX_M + 44, k, dtype=dtype, seed=11)
    y = int4_linear(x300, w)
    assert torch.equal(y, F.linear(x300, dequantize_int4(w, dtype)))
    check(y, linear_int4_reference(x300, w), TOL[dtype])
    assert int4_linear(x300[:0], w, b).shape == (0, n)
    assert int4_linear(randn(2, 0, k, dtype=dtype, seed=12), w).shape == (2, 0, n)
    strided = randn(3, 2 * k, dtype=dtype, seed=13)[:, ::2]
    check(int4_linear(strided, w, b), linear_int4_reference(strided.contiguous(), w, b), TOL[dtype])


def test_bad_input():
    dev = default_device()
    w = make_weight(16, 64, 32)
    x = randn(2, 64, dtype=torch.float16, seed=0)
    for fn in (int4_gemv, int4_matmul, int4_linear):
        name = fn.__name__
        shape_error = rf"{name}: x must be \[(M|\.\.\.), 64\] \(K of the weight \[16, 64\]\), got \(2, 32\)"
        with pytest.raises(ValueError, match=shape_error):
            fn(randn(2, 32, dtype=torch.float16, seed=0), w)
        with pytest.raises(ValueError, match=rf"{name}: bias must be a contiguous \[16\] torch.float16 tensor"):
            fn(x, w, torch.zeros(15, dtype=torch.float16, device=dev))
        with pytest.raises(ValueError, match="bias must be"):
            fn(x, w, torch.zeros(16, dtype=torch.float32, device=dev))
        with pytest.raises(ValueError, match=rf"{name}: x must be float16, bfloat16 or float32, got torch.float64"):
            fn(x.double(), w)
        with pytest.raises(ValueError, match="x must be float16"):
            fn(x.to(torch.int32), w)
        with pytest.raises(ValueError, match=rf"{name}: x is on meta"):
            fn(torch.empty(2, 64, dtype=torch.float16, device="meta"), w)
        with pytest.raises(TypeError, match=rf"{name}: w must be an Int4Weight"):
            fn(x, w.packed)
    for fn in (int4_gemv, int4_matmul):
        with pytest.raises(ValueError, match="contiguous last dimension"):
            fn(randn(2, 128, dtype=torch.float16, seed=0)[:, ::2], w)
        with pytest.raises(ValueError, match=r"x must be \[M, 64\]"):
            fn(randn(2, 1, 64, dtype=torch.float16, seed=0), w)
    with pytest.raises(ValueError, match=f"int4_gemv: x must have at most {MAX_M} rows, got 5"):
        int4_gemv(randn(5, 64, dtype=torch.float16, seed=0), w)
    with pytest.raises(TypeError, match="int4_gemv: config must be an Int4GemvConfig"):
        int4_gemv(x, w, config=MATMUL_CONFIGS[0])
    with pytest.raises(TypeError, match="int4_matmul: config must be an Int4MatmulConfig"):
        int4_matmul(x, w, config=DEFAULT_GEMV_CONFIG)
    with pytest.raises(ValueError, match="Int4GemvConfig: block_n must be a power of two >= 1, got 3"):
        Int4GemvConfig(3, 512, 4)
    with pytest.raises(ValueError, match="Int4MatmulConfig: block_k must be a power of two >= 16, got 8"):
        Int4MatmulConfig(16, 16, 8, 4, 2)
