"""The skinny tensor-core GEMM (decode projections of 1-32 rows) against the fp64 reference."""

import importlib

import pytest
import torch

from tritium.ops import reference
from tritium.ops.skinny import CONFIGS, DEFAULT_CONFIG, MAX_M, SkinnyConfig, block_m, skinny
from tritium.runtime import default_device, interpreting

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
# bf16 dots are wrong under the interpreter (../shared/ENVIRONMENT.md): bf16 runs on a GPU only
DTYPES = [pytest.param(d, id=str(d).replace("torch.", ""),
                       marks=pytest.mark.skipif(d == torch.bfloat16 and interpreting(),
                                                reason="bf16 dots are wrong under the Triton interpreter"))
          for d in TOL]
SMALL = SkinnyConfig(16, 64, 4, 2)  # small tiles: several programs and K chunks on the interpreter's shapes


def rel_err(out, ref):
    assert not torch.isnan(out).any() and not torch.isinf(out).any()
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 2, 5, 16, 17, 32])
@pytest.mark.parametrize("n,k", [(64, 256), (37, 100), (130, 200)], ids=str)
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_skinny_matches_reference(m, n, k, dtype, with_bias):
    """Every row count's padding (16 and 32 rows of x on the tensor core's narrow side), ragged N and K."""
    dev = default_device()
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    b = torch.randn(n, dtype=dtype, device=dev) if with_bias else None
    out = skinny(x, w, b, config=SMALL)
    assert out.shape == (m, n) and out.dtype == dtype
    assert rel_err(out, reference.linear(x, w, b)) < TOL[dtype]


@pytest.mark.parametrize("config", list(CONFIGS) + [SMALL], ids=str)
def test_skinny_configs_and_strided_rows(config):
    """Every candidate LinearDispatch times, x a row-strided view (rows of a wider buffer)."""
    dev = default_device()
    buf = torch.randn(3, 2 * 512, dtype=torch.float16, device=dev)
    x = buf[:, 256:768]
    w = torch.randn(200, 512, dtype=torch.float16, device=dev) / 23
    out = skinny(x, w, config=config)
    assert rel_err(out, reference.linear(x, w)) < TOL[torch.float16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [2, 9])
@pytest.mark.parametrize("n", [128, 100], ids=lambda n: f"n{n}")
def test_skinny_swiglu(m, n, dtype):
    """silu_and_mul of the rounded product in the epilogue, [gate; up] rows paired across the weight's halves
    (N / 2 = 50: the last program's pairs run past the gate half)."""
    dev = default_device()
    k = 192
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    b = torch.randn(n, dtype=dtype, device=dev)
    out = skinny(x, w, b, config=SMALL, swiglu=True)
    assert out.shape == (m, n // 2)
    want = reference.silu_and_mul(reference.linear(x, w, b).to(dtype))
    assert rel_err(out, want) < 2 * TOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_skinny_residual_in_place(dtype):
    dev = default_device()
    m, n, k = 3, 80, 160
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    residual = torch.randn(m, n, dtype=dtype, device=dev)
    before = residual.clone()
    out = skinny(x, w, config=SMALL, residual=residual)
    assert out is residual
    assert rel_err(out, reference.linear_residual(x, w, before)) < 2 * TOL[dtype]


@pytest.mark.parametrize("config", [SMALL, SkinnyConfig(16, 64, 4, 2, split_k=3)], ids=str)
def test_skinny_writes_only_its_rows(config):
    """Rows past M and columns past N of a wider output buffer are left alone (poisoned beforehand); split-K: its
    last program writes the row block."""
    dev = default_device()
    x = torch.randn(5, 300, dtype=torch.float16, device=dev)
    w = torch.randn(40, 300, dtype=torch.float16, device=dev) / 17
    buf = torch.full((8, 64), float("nan"), dtype=torch.float16, device=dev)
    residual = buf[:5, :40]
    residual.zero_()
    skinny(x, w, config=config, residual=residual)
    assert rel_err(residual, reference.linear(x, w)) < TOL[torch.float16]
    assert torch.isnan(buf[5:]).all() and torch.isnan(buf[:, 40:]).all()


def _counts_zero(dev) -> bool:
    """Whether split-K's arrival counts on ``dev`` exist and are all zero."""
    module = importlib.import_module("tritium.ops.skinny")  # (tritium.ops.skinny is also the function's name)
    parts_counts = module._WORKSPACES.get(dev)
    return parts_counts is not None and not parts_counts[1].any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m", [1, 3, 17])
@pytest.mark.parametrize("split", [2, 3, 8])
@pytest.mark.parametrize("epilogue", ["bias", "residual", "swiglu"])
def test_skinny_split_k(m, split, epilogue, dtype):
    """Split-K: a row block's columns over ``split`` programs (8 asks for more splits than the 4 chunks of K = 200:
    4 run), their sums added in split order by the last to arrive, then the epilogue; two calls give the same
    bits, and the arrival counts are back at zero after each."""
    dev = default_device()
    n, k = 96, 200
    cfg = SkinnyConfig(16, 64, 4, 2, split_k=split)
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    b = torch.randn(n, dtype=dtype, device=dev)
    if epilogue == "bias":
        out, want = skinny(x, w, b, config=cfg), reference.linear(x, w, b)
        assert torch.equal(out, skinny(x, w, b, config=cfg))
    elif epilogue == "residual":
        residual = torch.randn(m, n, dtype=dtype, device=dev)
        before = residual.clone()
        out, want = skinny(x, w, config=cfg, residual=residual), reference.linear_residual(x, w, before)
        assert torch.equal(skinny(x, w, config=cfg, residual=before.clone()), out)
    else:
        out = skinny(x, w, b, config=cfg, swiglu=True)
        want = reference.silu_and_mul(reference.linear(x, w, b).to(dtype))
        assert torch.equal(out, skinny(x, w, b, config=cfg, swiglu=True))
    assert rel_err(out, want) < 2 * TOL[dtype]
    assert _counts_zero(x.device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,split", [(1, 1), (5, 3), (17, 1)], ids=str)
@pytest.mark.parametrize("swiglu", [False, True], ids=["plain", "swiglu"])
def test_skinny_addend(m, split, swiglu, dtype):
    """A per-row addend (fp32, rows of a wider buffer) added with the bias before the rounding, the SiLU-and-mul
    after it: the fp64 reference within tolerance; with a split K too."""
    dev = default_device()
    n, k = 96, 200
    cfg = SkinnyConfig(16, 64, 4, 2, split_k=split)
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    b = torch.randn(n, dtype=dtype, device=dev)
    add = torch.randn(m, 2 * n, device=dev)[:, 16:16 + n]
    want = reference.linear(x, w, b, addend=add)
    if swiglu:
        want = reference.silu_and_mul(want)
    out = torch.full((m, n // 2 if swiglu else n), float("nan"), dtype=dtype, device=dev)
    out.copy_(skinny(x, w, b, config=cfg, swiglu=swiglu, addend=add))
    assert rel_err(out, want) < 2 * TOL[dtype]
    assert _counts_zero(x.device) or split == 1
    with pytest.raises(ValueError, match=f"addend must be a \\[{m}, {n}\\]"):
        skinny(x, w, config=cfg, addend=add[:, :n - 1])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or interpreting(), reason="needs a GPU (CUDA graphs)")
def test_skinny_split_k_in_a_cuda_graph():
    """Captured after one eager call (the workspace in place), replays give the eager bits each time (the counts
    reset themselves); a product whose workspace would have to grow inside a capture is refused by name."""
    dev = torch.device("cuda")
    cfg = SkinnyConfig(64, 128, 4, 4, split_k=4)
    x = torch.randn(4, 4096, dtype=torch.bfloat16, device=dev)
    w = torch.randn(1024, 4096, dtype=torch.bfloat16, device=dev) / 64
    want = skinny(x, w, config=cfg)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = skinny(x, w, config=cfg)
    for _ in range(3):
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, want)
    big = torch.randn(1 << 16, 4096, dtype=torch.bfloat16, device=dev)
    with pytest.raises(RuntimeError, match="inside a CUDA graph capture"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            skinny(x, big, config=cfg)


def test_block_m():
    assert [block_m(m) for m in (1, 2, 16, 17, 32)] == [16, 16, 16, 32, 32]
    assert DEFAULT_CONFIG in CONFIGS and MAX_M == 32


def test_skinny_bad_input():
    dev = default_device()
    x = torch.randn(2, 64, device=dev)
    w = torch.randn(16, 64, device=dev)
    cases = [
        ((torch.randn(0, 64, device=dev), w), {}, "rows"),
        ((torch.randn(MAX_M + 1, 64, device=dev), w), {}, "rows"),
        ((x, torch.randn(16, 32, device=dev)), {}, "weight must be"),
        ((x[:, ::2], torch.randn(16, 32, device=dev)), {}, "contiguous"),
        ((x, w.half()), {}, "dtype"),
        ((x.long(), w.long()), {}, "dtype"),
        ((x.view(2, 8, 8), w), {}, "x must be"),
        ((x, w, torch.randn(15, device=dev)), {}, "bias"),
        ((x, torch.randn(15, 64, device=dev)), {"swiglu": True}, "even"),
        ((x, w), {"swiglu": True, "residual": torch.zeros(2, 16, device=dev)}, "swiglu"),
        ((x, w), {"residual": torch.zeros(2, 15, device=dev)}, "residual"),
        ((x, w), {"residual": x[:, :16]}, "share memory"),
        ((x, w), {"config": SkinnyConfig(16, 64, split_k=0)}, "split_k"),
    ]
    for args, kw, match in cases:
        with pytest.raises(ValueError, match=match):
            skinny(*args, **kw)
