"""write_kv_cache against write_kv_cache_ref: round trips, skipped slots, fp8 quantisation and
saturation. (Bad inputs are in test_errors.py.)"""

import pytest
import torch

from tritium.attention import write_kv_cache
from tritium.attention.reference import FP8_MAX, gather_kv, quantize_fp8_ref, write_kv_cache_ref
from tritium.runtime import default_device

from .utils import FP8, dtype_name


def _random_cache(num_blocks, block_size, heads, head_dim, dtype):
    """Random cache contents (so untouched slots are checked to stay as they were)."""
    x = torch.randn(num_blocks, block_size, heads, head_dim, device=default_device()) * 4
    return x.to(dtype)


def _assert_same_bits(got, want, what):
    """Bitwise equality (NaN-safe, and fp8 compared as bytes)."""
    g, w = got.view(torch.uint8), want.view(torch.uint8)
    if not torch.equal(g, w):
        diff = (g != w).reshape(*got.shape[:-1], -1).any(-1).nonzero()[:5].tolist()
        raise AssertionError(f"{what}: differs from the reference at (block, offset, head) {diff}")


def _write_both(k, v, k_cache, v_cache, slots, **scales):
    """Write with the kernel and with the reference into copies; return both pairs."""
    got = (k_cache.clone(), v_cache.clone())
    want = (k_cache.clone(), v_cache.clone())
    write_kv_cache(k, v, *got, slots, **scales)
    write_kv_cache_ref(k, v, *want, slots, **{n: float(s) for n, s in scales.items()})
    return got, want


def _scales(form, device):
    """fp8 scales as floats or 1-element tensors; powers of two, so values on the fp8 grid times the
    scale divide back exactly."""
    if form is None:
        return {}
    scales = {"k_scale": 2.0 ** -6, "v_scale": 2.0 ** -5}
    if form == "tensor":
        return {n: torch.tensor([s], device=device) for n, s in scales.items()}
    return scales


def _write_case(dtype, cache_dtype, heads, head_dim, block_size, scales=None):
    name = f"{dtype_name(dtype)}-into-{dtype_name(cache_dtype)}-H{heads}-D{head_dim}-bs{block_size}"
    return pytest.param(dtype, cache_dtype, heads, head_dim, block_size, scales,
                        id=name + (f"-{scales}-scales" if scales else ""))


@pytest.mark.parametrize("dtype,cache_dtype,heads,head_dim,block_size,scales", [
    _write_case(torch.float16, torch.float16, 2, 64, 16),
    _write_case(torch.float32, torch.float32, 1, 80, 48),
    _write_case(torch.bfloat16, torch.bfloat16, 3, 128, 16),
    _write_case(torch.float16, FP8, 2, 256, 32, "float"),
    _write_case(torch.bfloat16, FP8, 3, 64, 16, "tensor"),
    _write_case(torch.float32, FP8, 1, 96, 64, "tensor"),
])
def test_write_round_trip(dtype, cache_dtype, heads, head_dim, block_size, scales):
    """A sequence written through a shuffled block table lands bit-exactly like the reference; tokens
    with a negative slot and every slot not named stay untouched; gather_kv gives the tokens back."""
    device = default_device()
    num_tokens, num_blocks = 41, 6
    scale_kwargs = _scales(scales, device)
    k = torch.randn(num_tokens, heads, head_dim, device=device)
    v = torch.randn(num_tokens, heads, head_dim, device=device)
    if cache_dtype == FP8:
        # On the fp8 grid (so no rounding: see test_fp8_rounding) over its whole range, then scaled.
        k = _on_fp8_grid(k * 100) * float(scale_kwargs["k_scale"])
        v = _on_fp8_grid(v * 100) * float(scale_kwargs["v_scale"])
    k, v = k.to(dtype), v.to(dtype)
    if heads == 3:
        # k and v as views into a fused QKV projection output (token stride larger than heads * dim).
        qkv = torch.zeros(num_tokens, 4 + 2 * heads, head_dim, dtype=dtype, device=device)
        qkv[:, 4:4 + heads], qkv[:, 4 + heads:] = k, v
        k, v = qkv[:, 4:4 + heads], qkv[:, 4 + heads:]
    k_cache = _random_cache(num_blocks, block_size, heads, head_dim, cache_dtype)
    v_cache = _random_cache(num_blocks, block_size, heads, head_dim, cache_dtype)
    block_table = torch.randperm(num_blocks)[:-(-num_tokens // block_size)]
    pos = torch.arange(num_tokens)
    slots = block_table[pos // block_size] * block_size + pos % block_size
    skipped = (pos % 7 == 0) | (pos == 3)
    slots[skipped] = -1
    slots[3] = -5  # any negative slot skips
    got, want = _write_both(k, v, k_cache, v_cache, slots.to(device), **scale_kwargs)
    _assert_same_bits(got[0], want[0], "k_cache")
    _assert_same_bits(got[1], want[1], "v_cache")

    kept = ~skipped.to(device)
    for name, src, before, after in (("k", k, k_cache, got[0]), ("v", v, v_cache, got[1])):
        back = gather_kv(after, block_table.to(device), num_tokens)
        old = gather_kv(before, block_table.to(device), num_tokens)
        _assert_same_bits(back[~kept], old[~kept], f"{name}: skipped tokens")
        if cache_dtype == FP8:
            scale = float(scale_kwargs[f"{name}_scale"])
            assert torch.equal(back[kept].float() * scale, src[kept].float()), f"{name}: fp8 round trip"
        else:
            assert torch.equal(back[kept], src[kept])


def _on_fp8_grid(x: torch.Tensor) -> torch.Tensor:
    """x rounded (by torch, round-to-nearest-even) to float8_e4m3fn values, saturated, as fp32."""
    return quantize_fp8_ref(x, 1.0).float()


def test_all_slots_skipped():
    device = default_device()
    k = torch.randn(5, 2, 64, device=device, dtype=torch.float16)
    cache = _random_cache(2, 16, 2, 64, torch.float16)
    got = (cache.clone(), cache.clone())
    write_kv_cache(k, k, *got, torch.tensor([-1, -2, -1, -100, -1], device=device))
    _assert_same_bits(got[0], cache, "k_cache")
    _assert_same_bits(got[1], cache, "v_cache")


def test_no_tokens():
    device = default_device()
    k = torch.empty(0, 2, 64, device=device, dtype=torch.float16)
    cache = _random_cache(2, 16, 2, 64, torch.float16)
    before = cache.clone()
    write_kv_cache(k, k, cache, cache, torch.empty(0, dtype=torch.int64, device=device))
    _assert_same_bits(cache, before, "k_cache")


@pytest.mark.parametrize("scales", ["float", "tensor"])
def test_fp8_saturation(scales):
    """Values beyond +-448 * scale saturate to +-448 (never inf or NaN); values on the grid are kept."""
    device = default_device()
    scale_kwargs = _scales(scales, device)
    ks, vs = float(scale_kwargs["k_scale"]), float(scale_kwargs["v_scale"])
    edge = torch.tensor([1e6, 449.0, 464.0, 480.0, 1e30, 448.0, 288.0, 0.5, -0.0, 2.0 ** -9, 0.0, 1.0, 3.5, 240.0,
                         2000.0, 447.0 + 1])
    x = torch.stack([edge, -edge, edge.flip(0), -edge.flip(0)])[:, None, :].repeat(1, 1, 4)  # [4, 1, 64]
    saturated = (x.abs() > FP8_MAX).to(device)
    k, v = (x * ks).to(device), (x * vs).to(device)
    cache = torch.zeros(1, 16, 1, 64, dtype=FP8, device=device)
    slots = torch.tensor([0, 5, 9, 15], device=device)
    got, want = _write_both(k, v, cache, cache, slots, **scale_kwargs)
    _assert_same_bits(got[0], want[0], "k_cache")
    _assert_same_bits(got[1], want[1], "v_cache")
    for stored in (got[0][0, slots], got[1][0, slots]):
        stored = stored.float()
        assert bool(torch.isfinite(stored).all()), "fp8 writes must saturate, not overflow"
        assert torch.equal(stored[saturated], FP8_MAX * x.to(device)[saturated].sign())


def test_fp8_rounding():
    """Quantisation rounds to nearest, ties to even, like torch: random values, every midpoint between
    neighbouring fp8 values, subnormals. (Under the interpreter through ``tritium.runtime.fp8.e4m3_exact``:
    Triton 3.6's interpreter converts fp32 -> float8e4nv rounding ties away from zero, dropping the carry
    into the exponent, 31.6 -> 16, and flushing subnormals to 0.)"""
    device = default_device()
    grid = torch.arange(256, dtype=torch.uint8).view(FP8).float()
    grid = torch.unique(grid[torch.isfinite(grid)])
    mids = (grid[1:] + grid[:-1]) / 2  # 252 ties
    x = torch.cat([mids, torch.randn(500) * 30, torch.rand(60) * 2.0 ** -7])
    x = torch.cat([x, torch.zeros(-x.numel() % 64)]).reshape(-1, 1, 64).to(device)
    num_tokens = x.shape[0]
    cache = torch.zeros(1, 16, 1, 64, dtype=FP8, device=device)
    got, want = _write_both(x, -x, cache, cache, torch.arange(num_tokens, device=device), k_scale=1.0, v_scale=1.0)
    _assert_same_bits(got[0], want[0], "k_cache")
    _assert_same_bits(got[1], want[1], "v_cache")
