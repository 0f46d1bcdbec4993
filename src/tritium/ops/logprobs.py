"""Log-probabilities (and ranks) of given tokens and of each row's most likely one, in one pass over the
logits: what scoring a prompt needs (``SamplingParams.prompt_logprobs``) without writing the [rows, vocab] log-softmax.

Reference: :func:`tritium.ops.reference.token_logprobs`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_V = 4096


@triton.jit
def _token_logprobs_kernel(
    logits_ptr, targets_ptr, chosen_ptr, lse_ptr, best_v_ptr, best_i_ptr, rank_ptr,
    stride_row, vocab,
    BLOCK: tl.constexpr,
):
    """Grid (rows,): program r reads the target's logit, then streams row r in BLOCK-wide pieces with an
    online max and sum of exponentials (fp32), keeping the first maximum's index and counting the logits
    above the target's."""
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride_row
    cols = tl.arange(0, BLOCK)
    target = tl.load(targets_ptr + row).to(tl.int64)
    x_t = tl.load(base + target).to(tl.float32)
    m = tl.full([], float("-inf"), tl.float32)
    s = tl.zeros([], tl.float32)
    best = tl.zeros([], tl.int64)
    above = tl.zeros([], tl.int64)
    for start in range(0, vocab, BLOCK):
        idx = start + cols
        x = tl.load(base + idx, mask=idx < vocab, other=float("-inf")).to(tl.float32)
        block_max = tl.max(x, 0)
        block_arg = tl.argmax(x, 0, tie_break_left=True)
        new_m = tl.maximum(m, block_max)
        ref = tl.where(new_m == float("-inf"), 0.0, new_m)  # a row of -inf so far: nothing to rescale
        s = s * tl.exp(m - ref) + tl.sum(tl.exp(x - ref), 0)
        best = tl.where(block_max > m, start + block_arg.to(tl.int64), best)  # strictly: the first maximum
        above += tl.sum((x > x_t).to(tl.int64), 0)
        m = new_m
    lse = m + tl.log(s)
    tl.store(chosen_ptr + row, x_t - lse)
    tl.store(lse_ptr + row, lse)
    tl.store(best_v_ptr + row, m - lse)
    tl.store(best_i_ptr + row, best)
    tl.store(rank_ptr + row, above + 1)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, out: tuple[torch.Tensor, ...]) -> None:
    """Triton twin of :func:`tritium.ops.reference.token_logprobs`, written into ``out`` = (chosen, lse,
    best_v: fp32 [R]; best_i, rank: int64 [R]) (views of larger buffers are fine). ``logits`` [R, V] any float
    dtype with a unit last stride; ``targets`` [R] integer ids in [0, V) (not checked: the caller's are
    prompt tokens, checked against the vocabulary when the request came in). One program a row; no host
    sync, no allocation. A row holding NaN gets NaN values (its index is unspecified)."""
    rows, vocab = logits.shape
    chosen, lse, best_v, best_i, rank = out
    if logits.stride(1) != 1:
        raise ValueError(f"logits must have a unit last stride, got strides {logits.stride()}")
    if targets.shape != (rows,):
        raise ValueError(f"targets must be [{rows}] (one per row of logits), got {tuple(targets.shape)}")
    for name, t, dtype in (("chosen", chosen, torch.float32), ("lse", lse, torch.float32),
                           ("best_v", best_v, torch.float32), ("best_i", best_i, torch.int64),
                           ("rank", rank, torch.int64)):
        if t.shape != (rows,) or t.dtype != dtype or t.stride(0) != 1:
            raise ValueError(f"out {name} must be a contiguous {dtype} [{rows}], got {t.dtype} {tuple(t.shape)}")
    if rows == 0:
        return
    _token_logprobs_kernel[(rows,)](logits, targets, chosen, lse, best_v, best_i, rank, logits.stride(0), vocab,
                                    BLOCK=min(BLOCK_V, triton.next_power_of_2(vocab)), num_warps=8)
