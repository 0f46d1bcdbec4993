"""Batched LoRA (tritium.ops.lora): the two Triton launches and the torch reference against a token-by-token
fp64 computation, on fresh random adapters, slots mixed in every way a step mixes them."""

import pytest
import torch

from tritium.ops.lora import (check_lora, lora_apply, lora_apply_reference, lora_delta, lora_delta_reference,
                              padded_rank)
from tritium.runtime import default_device

TOL = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def brute(x, y, a, b, slots, bounds):
    """y + B[s] (A[s] x) per token, fp64, the parts spelled out."""
    N, R = y.shape[1], b.shape[2]
    out = y.double().clone()
    for t, s in enumerate(slots.tolist()):
        if s < 0:
            continue
        h = a[s].double() @ x[t].double()
        for n in range(N):
            p = int(n >= bounds[0]) + int(n >= bounds[1])
            out[t, n] += b[s, n].double() @ h[p * R:(p + 1) * R]
    return out


def make(T, K, N, parts, slots_n, rank, dtype, bounds, slot_list, dev):
    R = padded_rank(rank)
    x = torch.randn(T, K, dtype=dtype, device=dev)
    y = torch.randn(T, N, dtype=dtype, device=dev)
    a = torch.zeros(slots_n, parts * R, K, dtype=dtype, device=dev)
    b = torch.zeros(slots_n, N, R, dtype=dtype, device=dev)
    for p in range(parts):  # rank ``rank`` in a padded R: the rest stays zero, as the engine stores it
        a[:, p * R:p * R + rank] = (torch.randn(slots_n, rank, K) / K ** 0.5).to(dtype)
    b[:, :, :rank] = (torch.randn(slots_n, N, rank) / rank ** 0.5).to(dtype)
    slots = torch.tensor(slot_list, dtype=torch.int32, device=dev)
    return x, y, a, b, slots


def err(out, ref):
    assert not torch.isnan(out).any() and not torch.isinf(out).any()
    return ((out.double() - ref).norm() / ref.norm()).item()


@pytest.mark.parametrize("dtype", list(TOL), ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("case", [
    # T, K, N, parts, bounds, slots
    (1, 200, 64, 1, None, [1]),
    (5, 256, 96, 3, (32, 64), [0, -1, 2, 2, 1]),
    (17, 130, 128, 2, (64, 128), [3] * 9 + [-1] * 3 + [0] * 5),
    (70, 96, 48, 3, (16, 32), [(i // 9) % 5 - 1 for i in range(70)]),
], ids=["decode-1", "mixed-qkv", "chunks-gate-up", "prefill-blocks"])
def test_lora_matches_brute_force(case, dtype):
    T, K, N, parts, bounds, slot_list = case
    dev = default_device()
    bounds_ = (N, N) if bounds is None else bounds
    x, y, a, b, slots = make(T, K, N, parts, 4, 8, dtype, bounds_, slot_list, dev)
    ref = brute(x, y, a, b, slots, bounds_)
    out = y.clone()
    assert lora_apply(x, out, a, b, slots, bounds) is out
    assert err(out, ref) < TOL[dtype]
    as_they_come = y.clone()  # the other visiting order: sorted where lora_apply would not sort, and back
    lora_apply(x, as_they_come, a, b, slots, bounds, order=None if T > 16 else torch.argsort(slots, stable=True))
    assert err(as_they_come, ref) < TOL[dtype]
    untouched = slots.cpu() < 0  # rows without an adapter keep their bits
    assert torch.equal(out[untouched.to(dev)], y[untouched.to(dev)])
    out_ref = lora_apply_reference(x, y.clone(), a, b, slots, bounds)
    assert err(out_ref, ref) < TOL[dtype]


@pytest.mark.parametrize("dtype", list(TOL), ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("case", [
    (1, 200, 64, 1, None, [1]),
    (3, 256, 96, 3, (32, 64), [0, -1, 2]),
    (20, 130, 128, 2, (64, 128), [3] * 9 + [-1] * 6 + [0] * 5),
    (70, 96, 48, 3, (16, 32), [(i // 9) % 5 - 1 for i in range(70)]),
], ids=["decode-1", "mixed-qkv", "blocks-gate-up", "sorted"])
def test_lora_delta_is_the_update_alone(case, dtype):
    """lora_delta: [T, N] fp32 updates (every row written: zeros where a token has no adapter, its buffer
    poisoned first), the brute force's minus y; the reference the same."""
    T, K, N, parts, bounds, slot_list = case
    dev = default_device()
    bounds_ = (N, N) if bounds is None else bounds
    x, y, a, b, slots = make(T, K, N, parts, 4, 8, dtype, bounds_, slot_list, dev)
    zeros = torch.zeros(T, N, dtype=torch.float64, device=dev)
    ref = brute(x, zeros, a, b, slots, bounds_)
    poisoned = torch.full((T, N + 8), float("nan"), device=dev)[:, 8:]  # rows of a wider buffer
    out = lora_delta(x, a, b, slots, bounds, out=poisoned)
    assert out is poisoned
    assert torch.equal(lora_delta(x, a, b, slots, bounds), out)
    assert err(out, ref) < TOL[dtype]
    none = (slots < 0).to(dev)
    assert torch.equal(out[none], torch.zeros_like(out[none]))
    assert err(lora_delta_reference(x, a, b, slots, bounds), ref) < TOL[dtype]
    with pytest.raises(ValueError, match="slots must be"):
        lora_delta(x, a, b, slots[:-1] if T > 1 else slots.repeat(2), bounds)
    with pytest.raises(ValueError, match="out must be"):
        lora_delta(x, a, b, slots, bounds, out=torch.zeros(T, N, dtype=torch.float16, device=dev))


def test_lora_rank_padding_and_no_slots():
    """Rank 4 stored at 16; a step where no token has an adapter leaves y bit for bit."""
    dev = default_device()
    assert padded_rank(4) == 16 and padded_rank(16) == 16 and padded_rank(17) == 32 and padded_rank(64) == 64
    x, y, a, b, slots = make(3, 64, 32, 1, 2, 4, torch.float32, (32, 32), [-1, -1, -1], dev)
    out = y.clone()
    lora_apply(x, out, a, b, slots)
    assert torch.equal(out, y)


def test_lora_int64_slots_and_strided_rows():
    """Slots as the runner stages them (int64) and x a view of a wider buffer (the QKV's rows)."""
    dev = default_device()
    x, y, a, b, slots = make(4, 64, 32, 1, 2, 16, torch.float32, (32, 32), [1, 0, -1, 1], dev)
    wide = torch.randn(4, 160, device=dev)
    wide[:, 32:96] = x
    ref = brute(x, y, a, b, slots, (32, 32))
    out = y.clone()
    lora_apply(wide[:, 32:96], out, a, b, slots.long())
    assert err(out, ref) < TOL[torch.float32]


@pytest.mark.parametrize("bad,match", [
    (dict(a_shape=(2, 16, 65)), "a must be"),
    (dict(b_rank=24), "power of two"),
    (dict(bounds=(8, 32)), "bounds"),
    (dict(slots_len=3), "slots must be"),
])
def test_lora_bad_input_names_the_argument(bad, match):
    dev = default_device()
    x = torch.randn(4, 64, device=dev)
    y = torch.randn(4, 32, device=dev)
    a = torch.zeros(*bad.get("a_shape", (2, 16, 64)), device=dev)
    b = torch.zeros(2, 32, bad.get("b_rank", 16), device=dev)
    slots = torch.zeros(bad.get("slots_len", 4), dtype=torch.int32, device=dev)
    with pytest.raises(ValueError, match=match):
        check_lora(x, y, a, b, slots, bad.get("bounds", (32, 32)))
