"""token_logprobs (one pass: target log-probability, log-sum-exp, first maximum, the target's rank) against its
fp32 reference."""

import pytest
import torch

from tritium.ops import logprobs, reference
from tritium.runtime import default_device

DTYPES = [pytest.param(d, id=str(d).replace("torch.", "")) for d in (torch.float32, torch.bfloat16)]


def _poisoned(rows, dev):
    return (torch.full((rows,), float("nan"), device=dev), torch.full((rows,), float("nan"), device=dev),
            torch.full((rows,), float("nan"), device=dev), torch.full((rows,), -7, dtype=torch.int64, device=dev),
            torch.full((rows,), -7, dtype=torch.int64, device=dev))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,vocab", [(1, 7), (5, 4096), (3, 9000), (4, 8192 + 4096 + 1)], ids=str)
def test_token_logprobs(rows, vocab, dtype):
    """Random logits (spread as an LM head's, a few rows shifted far up or down), vocabularies of 1-4 pieces
    (the last partial); ties: a row whose maximum appears twice, in two pieces, gives the first."""
    dev = default_device()
    g = torch.Generator().manual_seed(rows * vocab)
    x = (torch.randn(rows, vocab, generator=g) * 4).to(dev)
    x[0] += 80.0  # large logits: the log-sum-exp must not overflow
    if rows > 1:
        x[1] -= 300.0
    if rows > 2 and vocab > 4096:
        x[2, 1] = x[2, 4097] = x[2].max() + 5  # tie across pieces
    logits = x.to(dtype)
    targets = torch.randint(0, vocab, (rows,), generator=g).to(dev)
    targets[0] = logits[0].float().argmax()
    out = _poisoned(rows, dev)
    logprobs.token_logprobs(logits, targets, out)
    want = reference.token_logprobs(logits, targets)
    for name, got, ref in zip(("chosen", "lse", "best_v"), out[:3], want[:3]):
        assert not torch.isnan(got).any(), name
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-4, msg=name)
    assert torch.equal(out[3], want[3]) and torch.equal(out[4], want[4])
    assert out[0][0].item() == out[2][0].item()  # the target is the maximum: the same value, bit for bit
    assert out[4][0].item() == 1 and (out[4] >= 1).all() and (out[4] <= vocab).all()
    if rows > 2 and vocab > 4096:
        assert out[3][2].item() == 1


def test_token_logprobs_views_nan_and_errors():
    """Rows of a larger logits buffer (a row stride), outputs as views of larger buffers; a NaN row gives NaN
    and leaves the other rows alone; bad shapes, dtypes and strides are named."""
    dev = default_device()
    big = torch.randn(6, 300, device=dev)
    logits = big[1:5, :257]
    logits[2, 10] = float("nan")
    targets = torch.tensor([0, 5, 9, 256], device=dev)
    buf = torch.full((3, 10), float("nan"), device=dev)
    idx = torch.full((10,), -1, dtype=torch.int64, device=dev)
    ranks = torch.full((4,), -1, dtype=torch.int64, device=dev)
    out = (buf[0, 2:6], buf[1, 2:6], buf[2, 2:6], idx[3:7], ranks)
    logprobs.token_logprobs(logits, targets, out)
    want = reference.token_logprobs(logits, targets)
    ok = torch.tensor([True, True, False, True], device=dev)
    for got, ref in zip(out[:3], want[:3]):
        torch.testing.assert_close(got[ok], ref[ok], rtol=1e-5, atol=1e-4)
        assert torch.isnan(got[2])
    assert torch.equal(out[3][ok], want[3][ok]) and torch.equal(out[4][ok], want[4][ok])
    assert torch.isnan(buf[:, :2]).all() and torch.isnan(buf[:, 6:]).all() and (idx[:3] == -1).all()
    with pytest.raises(ValueError, match=r"targets must be \[4\]"):
        logprobs.token_logprobs(logits, targets[:3], out)
    with pytest.raises(ValueError, match="out best_i must be a contiguous torch.int64"):
        logprobs.token_logprobs(logits, targets, out[:3] + (idx[3:7].float(), ranks))
    with pytest.raises(ValueError, match="unit last stride"):
        logprobs.token_logprobs(big.t()[:4], targets, out)
