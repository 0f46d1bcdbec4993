"""Greedy sampling step of a decode graph: argmax of each row's logits, turned into the next step's
inputs (token, position, length, cache slot) on the device, so greedy decode windows run without the host.

Reference: :func:`tritium.ops.reference.greedy_advance`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Greedy sampling state of one launch: row 0 the best (value, index) key of each row so far, row 1 how many
# of the row's programs are done. Both return to their initial values by the end of every launch.
_NO_KEY = -(2**63)
_NO_KEY_C = tl.constexpr(_NO_KEY)
_LOW32 = tl.constexpr(2**32 - 1)


def greedy_scratch(rows: int, device) -> torch.Tensor:
    """Scratch of :func:`greedy_advance` for up to ``rows`` rows: int64 [2, rows], reused by every launch."""
    s = torch.zeros(2, rows, dtype=torch.int64, device=device)
    s[0] = _NO_KEY
    return s


@triton.jit
def _greedy_advance_kernel(
    # pointers
    logits_ptr, hist_ptr, ids_ptr, pos_ptr, seq_lens_ptr, slots_ptr, stop_ptr, block_table_ptr, scratch_ptr,
    wslots_ptr, wtable_ptr,
    # strides and sizes
    stride_l, stride_hist, stride_bt, stride_scratch, stride_wt, vocab, hist_rows, max_blocks, block_size,
    # meta-parameters
    BLOCK: tl.constexpr, SPLITS: tl.constexpr, HAS_WINDOW: tl.constexpr,
):
    """Grid (rows, SPLITS): program (r, s) reduces BLOCK logits of row r to one int64 key (the value's
    bits, made signed-monotonic, above the complement of the index: the largest key is the first
    maximum), folds it into the row's best key with an atomic max, and the row's last program to
    finish (an atomic ticket) turns the winner into the row's next decode inputs."""
    row = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots_ptr + row)
    if slot < 0:  # graph padding: no sequence in this row
        return
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < vocab
    x = tl.load(logits_ptr + row * stride_l + cols, mask=mask, other=0.0).to(tl.float32)
    bits = x.to(tl.int32, bitcast=True)
    key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # orders as the floats do (-0 just below +0)
    key = tl.where(x != x, 0x7FFFFFFF, key)  # NaN is the maximum, as in torch.argmax
    low = tl.full([BLOCK], _LOW32, tl.int64)
    packed = (key.to(tl.int64) << 32) | (low - cols.to(tl.int64))
    packed = tl.where(mask, packed, tl.full([BLOCK], _NO_KEY_C, tl.int64))
    best_ptr = scratch_ptr + row
    ticket_ptr = scratch_ptr + stride_scratch + row
    tl.atomic_max(best_ptr, tl.max(packed, 0), sem="acq_rel", scope="gpu")
    tl.debug_barrier()
    done = tl.atomic_add(ticket_ptr, 1, sem="acq_rel", scope="gpu")
    if done == SPLITS - 1:  # every other program of the row has folded its key in
        best = tl.atomic_xchg(best_ptr, tl.full([], _NO_KEY_C, tl.int64), sem="acq_rel", scope="gpu")
        tl.atomic_xchg(ticket_ptr, 0, sem="relaxed", scope="gpu")
        low32 = tl.full([], _LOW32, tl.int64)
        tok = low32 - (best & low32)
        pos = tl.load(pos_ptr + row) + 1
        tl.store(hist_ptr + (pos % hist_rows) * stride_hist + row, tok)
        if (pos < max_blocks * block_size) & (pos < tl.load(stop_ptr + row)):
            tl.store(ids_ptr + row, tok)
            tl.store(pos_ptr + row, pos)
            tl.store(seq_lens_ptr + row, tl.load(seq_lens_ptr + row) + 1)
            page = tl.load(block_table_ptr + row * stride_bt + pos // block_size).to(tl.int64)
            tl.store(slots_ptr + row, page * block_size + pos % block_size)
            if HAS_WINDOW:
                wpage = tl.load(wtable_ptr + row * stride_wt + pos // block_size).to(tl.int64)
                tl.store(wslots_ptr + row, wpage * block_size + pos % block_size)
        else:  # its last token, or past its block table: the row stops (writes nowhere, reads what it has)
            tl.store(slots_ptr + row, -1)
            if HAS_WINDOW:
                tl.store(wslots_ptr + row, -1)


def greedy_advance(logits: torch.Tensor, hist: torch.Tensor, ids: torch.Tensor, pos: torch.Tensor,
                   seq_lens: torch.Tensor, slots: torch.Tensor, stop: torch.Tensor, block_table: torch.Tensor,
                   block_size: int, scratch: torch.Tensor, window_slots: torch.Tensor | None = None,
                   window_table: torch.Tensor | None = None) -> None:
    """Triton twin of :func:`tritium.ops.reference.greedy_advance`: argmax and next-step inputs in one
    launch of (rows, vocab / 4096) programs; graph safe (no host sync, ``scratch`` from
    :func:`greedy_scratch` is left as it was found).

    logits [rows, vocab] (any float dtype, unit stride); hist int64 [H, >= rows]; ids, pos, slots, stop int64
    and seq_lens int32 [>= rows]; block_table int32 [>= rows, max_blocks], unit last stride; window_slots /
    window_table (both or neither) as slots / block_table, of the windowed layers' pool.
    """
    rows, vocab = logits.shape
    if rows == 0:
        return
    if scratch.shape[0] != 2 or scratch.shape[1] < rows or scratch.dtype != torch.int64:
        raise ValueError(f"scratch must be greedy_scratch(rows >= {rows}), got {scratch.dtype} {tuple(scratch.shape)}")
    if logits.stride(1) != 1 or block_table.stride(1) != 1 or hist.stride(1) != 1:
        raise ValueError("logits, hist and block_table must have a unit last stride")
    has_window = window_slots is not None
    if has_window != (window_table is not None):
        raise ValueError("window_slots and window_table go together")
    if has_window and (window_table.shape[1] != block_table.shape[1] or window_table.stride(1) != 1
                       or window_slots.shape[0] < rows or window_table.shape[0] < rows):
        raise ValueError(f"window_table must be [>= {rows}, {block_table.shape[1]}] with a unit last stride and "
                         f"window_slots [>= {rows}], got {tuple(window_table.shape)} and {tuple(window_slots.shape)}")
    block = min(4096, triton.next_power_of_2(vocab))
    splits = triton.cdiv(vocab, block)
    _greedy_advance_kernel[(rows, splits)](
        logits, hist, ids, pos, seq_lens, slots, stop, block_table, scratch,
        window_slots if has_window else slots, window_table if has_window else block_table,
        logits.stride(0), hist.stride(0), block_table.stride(0), scratch.stride(0),
        window_table.stride(0) if has_window else 0, vocab, hist.shape[0], block_table.shape[1], block_size,
        BLOCK=block, SPLITS=splits, HAS_WINDOW=has_window, num_warps=4)

