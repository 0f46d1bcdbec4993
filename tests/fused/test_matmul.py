"""tritium's GEMM (``tritium.fused.matmul``) against the fp32 reference: both load paths (TMA descriptors,
masked pointers), edge tiles, persistent programs, ``out=``, bad input; bf16 and CUDA graphs on the GPU."""

import dataclasses

import pytest
import torch

from tritium.fused import MatmulConfig, matmul, select_config
from tritium.fused.matmul import _DECODE, _NARROW, _WIDE, invariant_config
from tritium.fused import reference
from tritium.runtime import default_device, interpreting

# relative error ||out - ref|| / ||ref||: fp32 exact products (ieee); 16-bit: the output's rounding
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
CPU_DTYPES = [pytest.param(d, id=str(d).replace("torch.", "")) for d in (torch.float16, torch.float32)]
SMALL = MatmulConfig(32, 32, 16, num_warps=4, num_stages=2)  # several tiles and K steps at test sizes


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    bad = torch.isnan(out) | torch.isinf(out)
    assert not bad.any(), f"{int(bad.sum())} non-finite outputs, first at {bad.nonzero()[:4].tolist()}"
    diff = (out.double() - ref.double()).abs()
    err = (diff.norm() / ref.double().norm()).item()
    if err > 1e-2:
        print("worst indices:", diff.flatten().topk(4).indices.tolist(), "of shape", list(out.shape))
    return err


def poisoned(shape, dtype, device):
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("m", [1, 17, 63])
@pytest.mark.parametrize("n,k", [(48, 80), (208, 112)], ids=lambda v: str(v))
@pytest.mark.parametrize("config", [None, SMALL], ids=["selected", "small"])
def test_matmul_matches_reference(m, n, k, dtype, config):
    """K and N odd multiples of 16, M not a multiple of the tile; output poisoned before the launch."""
    dev = default_device()
    a = torch.randn(m, k, dtype=dtype, device=dev)
    b = torch.randn(k, n, dtype=dtype, device=dev) / k ** 0.5
    out = poisoned((m, n), dtype, dev)
    c = matmul(a, b, out=out, config=config)
    assert c is out and c.shape == (m, n) and c.dtype == dtype
    assert rel_err(c, reference.matmul(a, b)) < TOL[dtype]


@pytest.mark.parametrize("case", ["unaligned-k", "unaligned-n", "offset-view", "b-transposed", "notma"])
def test_matmul_layouts(case):
    """Shapes and views TMA cannot take run on the pointer path; b = w.T keeps TMA (K-major tiles)."""
    dev, dt = default_device(), torch.float16
    m, n, k = 33, 80, 48
    if case == "unaligned-k":
        k = 36  # 72-byte rows: not 16-byte aligned
    if case == "unaligned-n":
        n = 36
    a = torch.randn(m, k, dtype=dt, device=dev)
    b = torch.randn(k, n, dtype=dt, device=dev) / k ** 0.5
    if case == "offset-view":  # bases one element past 16-byte alignment, row strides wider than the rows
        a = torch.randn(m, k + 9, dtype=dt, device=dev)[:, 1:k + 1]
        b = (torch.randn(k, n + 9, dtype=dt, device=dev) / k ** 0.5)[:, 1:n + 1]
    if case == "b-transposed":
        b = (torch.randn(n, k, dtype=dt, device=dev) / k ** 0.5).t()
    config = MatmulConfig(32, 32, 16, num_warps=4, num_stages=2, tma=case != "notma")
    out = poisoned((m, n), dt, dev)
    matmul(a, b, out=out, config=config)
    assert rel_err(out, reference.matmul(a, b)) < TOL[dt]


@pytest.mark.parametrize("config", [SMALL, MatmulConfig(16, 64, 32, num_warps=4, num_stages=2, epilogue_split=2,
                                                                group_m=2)], ids=str)
def test_matmul_persistent_programs_cover_every_tile(config):
    """Fewer programs than tiles (each loops over several, in grouped order with a short last group);
    the output view's neighbours in the buffer stay untouched."""
    dev, dt = default_device(), torch.float16
    m, n, k = 81, 112, 64
    a = torch.randn(m, k, dtype=dt, device=dev)
    b = torch.randn(k, n, dtype=dt, device=dev) / 8
    buf = torch.zeros(m, n + 16, dtype=dt, device=dev)
    out = buf[:, 8:8 + n].fill_(float("nan"))
    matmul(a, b, out=out, config=config, num_programs=3)
    assert rel_err(out, reference.matmul(a, b)) < TOL[dt]
    assert not buf[:, :8].any() and not buf[:, 8 + n:].any()


def test_matmul_allocates_output_and_empty_shapes():
    dev = default_device()
    a = torch.randn(5, 32, device=dev)
    b = torch.randn(32, 16, device=dev)
    c = matmul(a, b)
    assert c.shape == (5, 16) and rel_err(c, reference.matmul(a, b)) < TOL[torch.float32]
    assert matmul(a[:0], b).shape == (0, 16)
    out = poisoned((5, 16), torch.float32, dev)
    assert not matmul(a[:, :0], b[:0], out=out).any()  # K = 0: zeros


@pytest.mark.parametrize("tma,k,calls", [(True, 112, 20), (False, 112, 2), (True, 100, 2), (False, 100, 2)],
                         ids=["tma-k112", "pointers-k112", "tma-k100", "pointers-k100"])
def test_matmul_split_k_repeated_calls(tma, k, calls):
    """Split-K (pieces of 2, 2 and 3 K steps at K = 112; a ragged last step at 100): calls with new data
    through one workspace, which each call must leave zeroed; some with fewer programs than pieces."""
    dev, dt = default_device(), torch.float16
    m, n = 17, 48
    config = MatmulConfig(32, 32, 16, num_warps=4, num_stages=2, split_k=3, tma=tma)
    out = poisoned((m, n), dt, dev)
    for call in range(calls):
        a = torch.randn(m, k, dtype=dt, device=dev)
        b = torch.randn(k, n, dtype=dt, device=dev) / k ** 0.5
        out.fill_(float("nan"))
        matmul(a, b, out=out, config=config, num_programs=5 if call % 2 else None)
        assert rel_err(out, reference.matmul(a, b)) < TOL[dt], f"call {call}"


@pytest.mark.parametrize("config,m,n,k", [(_WIDE, 130, 272, 192), (_NARROW, 130, 272, 192),
                                          (dataclasses.replace(_DECODE, split_k=7), 5, 144, 1024)], ids=str)
def test_matmul_production_configs(config, m, n, k):
    """The configurations select_config returns for the benchmark shapes (their compiled form is checked
    for sm_90 from this launch by `make test`), on small shapes with edge tiles."""
    dev, dt = default_device(), torch.float16
    a = torch.randn(m, k, dtype=dt, device=dev)
    b = torch.randn(k, n, dtype=dt, device=dev) / k ** 0.5
    out = poisoned((m, n), dt, dev)
    matmul(a, b, out=out, config=config)
    assert rel_err(out, reference.matmul(a, b)) < TOL[dt]


def test_select_config_regimes():
    """Decode splits K to give every SM a piece; large shapes take the wide tile unless it leaves most of
    the last wave empty (up projection at 4 GPUs, M = 2048: 448 wide tiles = 3.4 waves of 132)."""
    dev = default_device()
    decode = select_config(1, 14336, 8192, torch.bfloat16, dev)
    assert decode.block_m == 64 and decode.split_k * (14336 // decode.block_n) >= 132
    assert select_config(16384, 14336, 8192, torch.bfloat16, dev) == _WIDE
    assert select_config(2048, 7168, 8192, torch.bfloat16, dev) == _NARROW
    assert select_config(17, 64, 64, torch.float32, dev).block_k <= 32
    fp8 = torch.float8_e4m3fn  # W8A8: wider K steps (the fp8 MMA's K is 32; a byte an element)
    assert all(select_config(m, 6144, 4096, fp8, dev).block_k >= 128 for m in (1, 16, 64, 256, 2048))
    assert select_config(4, 6144, 4096, fp8, dev).block_m == 16
    assert select_config(64, 6144, 4096, fp8, dev).block_m == 64


def test_matmul_bad_input():
    dev = default_device()
    a = torch.randn(4, 32, device=dev)
    b = torch.randn(32, 16, device=dev)
    value_errors = [
        ((a.view(4, 4, 8), b), {}, "a must be 2-D"),
        ((a, b.view(32, 4, 4)), {}, "b must be 2-D"),
        ((a, torch.randn(16, 16, device=dev)), {}, r"b must be \[K, N\] with K = 32"),
        ((a, b), {"out": torch.empty(4, 15, device=dev)}, r"out must be \[4, 16\]"),
        ((a, b.to("meta")), {}, "b is on meta"),
        ((a, b), {"out": torch.empty(4, 16, device="meta")}, "out is on meta"),
    ]
    for args, kwargs, match in value_errors:
        with pytest.raises(ValueError, match=match):
            matmul(*args, **kwargs)
    type_errors = [
        ((a, b.half()), {}, "b has dtype torch.float16, a has torch.float32"),
        ((a.int(), b.int()), {}, "a has dtype torch.int32"),
        ((a, b), {"out": torch.empty(4, 16, device=dev, dtype=torch.float16)}, "out has dtype"),
        ((a.tolist(), b), {}, "a must be a torch.Tensor"),
    ]
    for args, kwargs, match in type_errors:
        with pytest.raises(TypeError, match=match):
            matmul(*args, **kwargs)
    other = "meta" if interpreting() else "cpu"
    with pytest.raises(ValueError, match=f"a is on {other}"):
        matmul(a.to(other), b.to(other))


@pytest.mark.gpu
@pytest.mark.parametrize("m,n,k", [(1, 4096, 1024), (17, 208, 112), (63, 1040, 4096), (2048, 1792, 1024),
                                   (300, 7168, 2048), (257, 100, 136)], ids=str)
@pytest.mark.parametrize("transposed_b", [False, True], ids=["b", "wT"])
def test_matmul_bf16_gpu(m, n, k, transposed_b):
    dev = torch.device("cuda")
    a = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
    w = torch.randn(n, k, dtype=torch.bfloat16, device=dev) / k ** 0.5
    b = w.t() if transposed_b else w.t().contiguous()
    out = poisoned((m, n), torch.bfloat16, dev)
    matmul(a, b, out=out)
    assert rel_err(out, reference.matmul(a, b)) < TOL[torch.bfloat16]


@pytest.mark.gpu
def test_matmul_cuda_graph_and_no_allocation():
    """With ``out=`` a call allocates nothing (after the first, which may size the descriptor scratch);
    captured in a CUDA graph it replays correctly on new inputs copied into the captured buffers."""
    dev = torch.device("cuda")
    m, n, k = 512, 1024, 768
    a = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
    b = torch.randn(k, n, dtype=torch.bfloat16, device=dev) / k ** 0.5
    out = torch.empty(m, n, dtype=torch.bfloat16, device=dev)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        matmul(a, b, out=out)
        stream.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        for _ in range(3):
            matmul(a, b, out=out)
        stream.synchronize()
        assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        matmul(a, b, out=out)
    for _ in range(3):
        a.copy_(torch.randn_like(a))
        b.copy_(torch.randn_like(b) / k ** 0.5)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert rel_err(out, reference.matmul(a, b)) < TOL[torch.bfloat16]


def _rows_differing(got: torch.Tensor, want: torch.Tensor) -> int:
    bits = torch.int32 if got.element_size() == 4 else torch.int16
    return int((got.view(bits) != want.view(bits)).any(dim=1).sum())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_invariant_config_rows_do_not_depend_on_m(dtype):
    """Batch invariance: under ``invariant_config`` row i of ``a[:m] @ b`` has the same bits for every m, and
    the product is still right (interpreter: with the row-independent dot, see tritium.testing.row_dot)."""
    from tritium.testing.row_dot import row_independent_dot

    dev = default_device()
    k, n = 160, 96
    a = torch.randn(130, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    with row_independent_dot():
        full = matmul(a, w.t(), config=invariant_config(130, n, k, dtype, dev))
        assert rel_err(full, reference.matmul(a, w.t())) < TOL[dtype]
        for m in (1, 3, 17, 64, 65):
            out = poisoned((m, n), dtype, dev)
            matmul(a[:m], w.t(), out=out, config=invariant_config(m, n, k, dtype, dev))
            assert _rows_differing(out, full[:m]) == 0, f"m={m}"


def test_invariant_config_never_splits():
    dev = default_device()
    for m in (1, 4, 16, 17, 64, 65, 2048):
        for dtype in (torch.float32, torch.bfloat16):
            assert invariant_config(m, 4096, 14336, dtype, dev).split_k == 1


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("k,n", [(4096, 6144), (14336, 4096), (136, 100)], ids=str)
def test_invariant_config_rows_do_not_depend_on_m_gpu(dtype, k, n):
    """On the GPU the tile changes with m (16-, 64-, 128-row tiles): each row's bits must not."""
    dev = torch.device("cuda")
    a = torch.randn(300, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, dtype=dtype, device=dev) / k ** 0.5
    full = matmul(a, w.t(), config=invariant_config(300, n, k, dtype, dev))
    assert rel_err(full, reference.matmul(a, w.t())) < TOL[dtype]
    for m in (1, 2, 4, 16, 17, 64, 65, 129):
        out = poisoned((m, n), dtype, dev)
        matmul(a[:m], w.t(), out=out, config=invariant_config(m, n, k, dtype, dev))
        assert _rows_differing(out, full[:m]) == 0, f"m={m}: {invariant_config(m, n, k, dtype, dev)}"


# -- weight-only FP8: b an fp8 weight's transpose, b_scale its row scales --------------------------------------

@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("config", [None, SMALL, dataclasses.replace(SMALL, split_k=3),
                                    dataclasses.replace(SMALL, tma=False)], ids=["selected", "small", "split3", "notma"])
def test_matmul_fp8_weight(dtype, config):
    """``b_scale``: b = w8.t() (fp8) converted tile by tile and each column scaled: the fp64 product with the
    dequantized weight, on poisoned outputs, including split-K (each piece scaled) and pointer loads."""
    from tritium.ops.quant import dequantize, quantize_rows
    dev = default_device()
    gen = torch.Generator().manual_seed(5)
    n, k = 72, 112
    w8, scale = quantize_rows(torch.randn(n, k, generator=gen) * torch.logspace(-2, 1, n)[:, None] / k ** 0.5)
    w8, scale = w8.to(dev), scale.to(dev)
    for m in (1, 40):
        a = torch.randn(m, k, generator=gen).to(dtype).to(dev)
        out = poisoned((m, n), dtype, dev)
        matmul(a, w8.t(), out=out, config=config, b_scale=scale)
        assert rel_err(out, reference.matmul(a, dequantize(w8, scale).t())) < TOL[dtype]


def test_matmul_fp8_bad_input():
    from tritium.ops.quant import quantize_rows
    dev = default_device()
    w8, scale = quantize_rows(torch.randn(16, 32))
    w8, scale = w8.to(dev), scale.to(dev)
    a = torch.randn(4, 32, device=dev)
    with pytest.raises(TypeError, match="needs b_scale"):
        matmul(a, w8.t())
    with pytest.raises(ValueError, match="b_scale must be"):
        matmul(a, w8.t(), b_scale=scale[:4])
    with pytest.raises(TypeError, match="quantized b"):
        matmul(a, torch.randn(32, 16, device=dev), b_scale=scale)


# -- W8A8: a per-row quantized fp8 activation (a_scale) times an fp8 weight (b_scale) -----------------------------

SMALL_FP8 = dataclasses.replace(SMALL, block_k=32)  # the fp8 MMA's K is 32
# NOTE: Hopper's fp8 MMA sums a K step's products in an accumulator of ~14 bits before they reach fp32 (H200: 1.2e-4
# relative error at K = 112 in one 256-wide step, fp32 output); exact under the interpreter
FP8_TOL = {**TOL, torch.float32: 1e-5 if interpreting() else 5e-4}


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("config", [None, SMALL_FP8, dataclasses.replace(SMALL_FP8, split_k=3),
                                    dataclasses.replace(SMALL_FP8, tma=False)],
                         ids=["selected", "small", "split3", "notma"])
def test_matmul_fp8_activations(out_dtype, config):
    """``a_scale``: fp8 a times fp8 b on the tensor cores, each output scaled by its row's and column's scale:
    the fp64 product of the dequantized operands (the reference ``dynamic_linear`` too), on poisoned outputs,
    with split-K (each piece scaled) and pointer loads, rows of very different magnitudes."""
    from tritium.ops.quant import dequantize, dynamic_linear, quantize_activations, quantize_rows
    dev = default_device()
    gen = torch.Generator().manual_seed(6)
    n, k = 72, 112
    w8, scale = quantize_rows(torch.randn(n, k, generator=gen) * torch.logspace(-2, 1, n)[:, None] / k ** 0.5)
    w8, scale = w8.to(dev), scale.to(dev)
    for m in (1, 40):
        x = torch.randn(m, k, generator=gen) * torch.logspace(-3, 2, m)[:, None]
        x8, x_scale = quantize_activations(x)
        x8, x_scale = x8.to(dev), x_scale.to(dev)
        out = poisoned((m, n), out_dtype, dev)
        matmul(x8, w8.t(), out=out, config=config, b_scale=scale, a_scale=x_scale)
        expected = dequantize(x8, x_scale).double() @ dequantize(w8, scale).double().t()
        assert rel_err(out, expected) < FP8_TOL[out_dtype]
        assert rel_err(out, dynamic_linear(x.to(out_dtype).to(dev), w8, scale)) < FP8_TOL[out_dtype] + 1e-2
        fresh = matmul(x8, w8.t(), config=config, b_scale=scale, a_scale=x_scale, out_dtype=out_dtype)
        assert fresh.dtype == out_dtype and rel_err(fresh, expected) < FP8_TOL[out_dtype]


def test_matmul_fp8_activations_bad_input():
    from tritium.ops.quant import quantize_activations, quantize_rows
    dev = default_device()
    w8, scale = (t.to(dev) for t in quantize_rows(torch.randn(16, 32)))
    x8, x_scale = (t.to(dev) for t in quantize_activations(torch.randn(4, 32)))
    with pytest.raises(TypeError, match="needs a_scale"):
        matmul(x8, w8.t(), b_scale=scale)
    with pytest.raises(TypeError, match="output dtype"):
        matmul(x8, w8.t(), b_scale=scale, a_scale=x_scale)
    with pytest.raises(ValueError, match="a_scale must be"):
        matmul(x8, w8.t(), b_scale=scale, a_scale=x_scale[:2], out_dtype=torch.float32)
    with pytest.raises(TypeError, match="without b_scale"):
        matmul(x8, w8.t(), a_scale=x_scale, out_dtype=torch.float32)
    with pytest.raises(TypeError, match="quantized a"):
        matmul(torch.randn(4, 32, device=dev), w8.t(), b_scale=scale, a_scale=x_scale, out_dtype=torch.float32)
    with pytest.raises(TypeError, match="out_dtype"):
        matmul(torch.randn(4, 32, device=dev), torch.randn(32, 16, device=dev), out_dtype=torch.float16)
    with pytest.raises(ValueError, match="block_k >= 32"):
        matmul(x8, w8.t(), b_scale=scale, a_scale=x_scale, out_dtype=torch.float32, config=SMALL)


@pytest.mark.parametrize("on_gpu", [pytest.param(True, marks=pytest.mark.gpu), False], ids=["gpu", "cpu"])
def test_invariant_config_w8a8_rows_do_not_depend_on_m(on_gpu):
    """W8A8 under ``invariant_config`` (fp8 a with per-row scales): row i's bits are the same for every m (one
    tile at every m on the GPU; the interpreter with the row-independent dot)."""
    from tritium.ops.quant import quantize_activations, quantize_rows
    from tritium.testing.row_dot import row_independent_dot

    dev = default_device()
    fp8 = torch.float8_e4m3fn
    k, n = (4096, 6144) if on_gpu else (160, 96)
    a8, a_scale = (t.to(dev) for t in quantize_activations(torch.randn(300, k) * torch.rand(300, 1) * 10))
    w8, w_scale = (t.to(dev) for t in quantize_rows(torch.randn(n, k) / k ** 0.5))
    with row_independent_dot():
        kw = dict(b_scale=w_scale, out_dtype=torch.bfloat16 if on_gpu else torch.float32)
        full = matmul(a8, w8.t(), a_scale=a_scale, config=invariant_config(300, n, k, fp8, dev), **kw)
        for m in (1, 3, 16, 17, 64, 65, 129):
            out = matmul(a8[:m], w8.t(), a_scale=a_scale[:m], config=invariant_config(m, n, k, fp8, dev), **kw)
            assert _rows_differing(out, full[:m]) == 0, f"m={m}"
    assert all(invariant_config(m, n, k, fp8, dev).split_k == 1 for m in (1, 64, 2048))
