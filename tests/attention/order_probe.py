"""A kernel that records what ``_rank_order`` hands each program (test_paged_attention's mapping test). Its own
module with absolute imports only: the compile check loads test kernels from their files by name."""

import triton
import triton.language as tl

from tritium.attention import kernels


@triton.jit
def rank_order_probe(cu_seqlens_q_ptr, out_ptr, num_seqs, num_tokens, BLOCK_Q: tl.constexpr, MAX_SEQS: tl.constexpr):
    """Program j writes (seq, q_slot, empty, ok) of ``_rank_order`` for j to out[j, 0:4]."""
    seq, q_slot, empty, ok = kernels._rank_order(cu_seqlens_q_ptr, num_seqs, num_tokens, tl.program_id(0), BLOCK_Q,
                                                 MAX_SEQS)
    base = out_ptr + 4 * tl.program_id(0)
    tl.store(base, seq)
    tl.store(base + 1, q_slot)
    tl.store(base + 2, empty.to(tl.int32))
    tl.store(base + 3, ok.to(tl.int32))
